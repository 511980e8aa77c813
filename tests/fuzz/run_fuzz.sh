#!/bin/sh
# Fuzz smoke run for CI: builds the libFuzzer target with clang (the project
# itself builds with gcc) and runs it for a bounded time over a scratch copy
# of the seed corpus.  Any crash, leak or sanitizer report fails the test.
#   run_fuzz.sh SOURCE_DIR WORK_DIR SECONDS
set -eu
src=$1
work=$2
secs=$3
command -v clang >/dev/null || { echo "run_fuzz.sh: clang is not installed (./.ci/deps installs it)"; exit 1; }
mkdir -p "$work/corpus"
cp "$src"/tests/fuzz/corpus_logparse/* "$work/corpus/"
clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -I"$src/core" -I"$src/abi" \
    "$src/tests/fuzz/fuzz_logparse.c" "$src/core/logparse.c" "$src/core/kv.c" "$src/core/diag.c" \
    -lm -o "$work/fuzz_logparse"
"$work/fuzz_logparse" -dict="$src/tests/fuzz/logparse.dict" -max_len=65536 \
    -max_total_time="$secs" -print_final_stats=1 "$work/corpus" 2>&1 | tail -n 12
