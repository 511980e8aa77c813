#!/bin/sh
# Out-of-tree plugin test: install moetune to a temporary prefix, build
# examples/plugin-flexdemo against the installed header only (found through
# the installed pkg-config file), then load it beside the built-ins.
#   oot_plugin.sh BUILD_DIR SOURCE_DIR TEST_OOT_BINARY
set -eu
build=$1
src=$2
test_oot=$3
prefix=$(mktemp -d /tmp/moetune-prefix-XXXXXX)
work=$(mktemp -d /tmp/moetune-oot-XXXXXX)
trap 'rm -rf "$prefix" "$work"' EXIT INT TERM

cmake --install "$build" --prefix "$prefix" >/dev/null
test -f "$prefix/include/moetune/plugin.h"
# Only the example's own files travel: no path back into the source tree.
cp "$src/examples/plugin-flexdemo/flexdemo.c" "$src/examples/plugin-flexdemo/Makefile" "$work/"
unset CPATH C_INCLUDE_PATH || true
PKG_CONFIG_PATH="$prefix/share/pkgconfig" make -C "$work" >/dev/null
test -f "$work/flexdemo.so"
chmod go-w "$work/flexdemo.so"

# The installed front end finds its installed built-ins and the new plugin.
out=$(env -u MOETUNE_BUILTIN_DIR MOETUNE_PLUGIN_PATH="$work" "$prefix/bin/moetune" plugins)
echo "$out" | grep -q "^flexdemo "
echo "$out" | grep -q "extends:  moe_flex_dispatcher_backend += flexdemo"
echo "$out" | grep -q "^dispatcher "

"$test_oot" "$work/flexdemo.so"
