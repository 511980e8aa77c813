#!/bin/sh
# The floors (README.md "Layout"): tools/check-layers on this tree and its
# build must pass, and on a small tree with an upward include, an include
# cycle and a call cycle it must fail, naming each.
set -eu
src=$1 build=$2
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
python3 "$src/tools/check-layers" --root "$src" --build "$build"

mkdir -p "$T/core" "$T/workers" "$T/search" "$T/abi" "$T/plugins"
printf '#include "engine.h"\nint a(void);\n' >"$T/core/a.h"          # core -> search: up
printf '#include "b.h"\n' >"$T/workers/c.h"
printf '#include "c.h"\n' >"$T/workers/b.h"                          # b.h <-> c.h
printf 'int e(void);\n' >"$T/search/engine.h"
printf '#include "a.h"\nint x(void) { return 1; }\n' >"$T/core/ok.c"
printf '#include "../plugins/p.h"\n' >"$T/abi/up.h"                  # abi -> plugins: up
printf '\n' >"$T/plugins/p.h"
if python3 "$src/tools/check-layers" --root "$T" >"$T/out" 2>&1; then
  echo "check-layers passed a tree with upward includes and a cycle" >&2; cat "$T/out" >&2; exit 1
fi
grep -q 'core/a.h:1: #include "engine.h": core/ may not use search/' "$T/out"
grep -q 'abi/up.h:1: #include "../plugins/p.h": abi/ may not use plugins/' "$T/out"
grep -q 'include cycle: workers/b.h -> workers/c.h' "$T/out"

# a call cycle between two objects of a library
command -v cc >/dev/null || { echo "no C compiler for the call-cycle case" >&2; exit 1; }
mkdir -p "$T/b/CMakeFiles/moetune_x.dir/core"
printf 'int g(void);\nint f(void) { return g(); }\n' >"$T/f.c"
printf 'int f(void);\nint g(void) { return f() + 1; }\n' >"$T/g.c"
cc -c "$T/f.c" -o "$T/b/CMakeFiles/moetune_x.dir/core/f.c.o"
cc -c "$T/g.c" -o "$T/b/CMakeFiles/moetune_x.dir/core/g.c.o"
if python3 "$src/tools/check-layers" --root "$T" --build "$T/b" >"$T/out" 2>&1; then
  echo "check-layers passed a call cycle" >&2; cat "$T/out" >&2; exit 1
fi
grep -q 'call cycle: core/f.c <-> core/g.c' "$T/out"
echo "check_layers: this tree passes; upward includes, an include cycle and a call cycle are refused"
