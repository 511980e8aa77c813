#!/bin/sh
# Fuzz smoke run for CI: builds a libFuzzer target with clang (the project
# itself builds with gcc) and runs it for a bounded time over a scratch copy
# of its seed corpus.  Any crash, leak or sanitizer report fails the test.
#   run_fuzz.sh SOURCE_DIR WORK_DIR SECONDS [TARGET]
# TARGET: logparse (the default; core/logparse.c) or proto (the worker
# protocol's message decoding, workers/proto.c).
set -eu
src=$1
work=$2
secs=$3
target=${4:-logparse}
command -v clang >/dev/null || { echo "run_fuzz.sh: clang is not installed (./.ci/deps installs it)"; exit 1; }
cc="clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined"
case $target in
logparse)
    corpus=$work/corpus
    mkdir -p "$corpus"
    cp "$src"/tests/fuzz/corpus_logparse/* "$corpus/"
    $cc -I"$src/core" -I"$src/abi" \
        "$src/tests/fuzz/fuzz_logparse.c" "$src/core/logparse.c" "$src/core/kv.c" "$src/core/diag.c" \
        -lm -o "$work/fuzz_logparse"
    ;;
proto)
    corpus=$work/corpus_proto
    mkdir -p "$corpus"
    cp "$src"/tests/fuzz/corpus_proto/* "$corpus/"
    # shellcheck disable=SC2046
    $cc -D_GNU_SOURCE -I"$src/workers" -I"$src/core" -I"$src/abi" \
        "$src/tests/fuzz/fuzz_proto.c" "$src/workers/proto.c" "$src/workers/result_json.c" \
        $(pkg-config --cflags --libs libzmq libcjson) -lm -o "$work/fuzz_proto"
    ;;
*)
    echo "run_fuzz.sh: unknown target '$target' (logparse, proto)"
    exit 2
    ;;
esac
# the fuzzer's own exit status decides (a pipe into tail would hide it)
rc=0
"$work/fuzz_$target" -dict="$src/tests/fuzz/$target.dict" -max_len=65536 \
    -max_total_time="$secs" -print_final_stats=1 "$corpus" >"$work/fuzz_$target.log" 2>&1 || rc=$?
tail -n 12 "$work/fuzz_$target.log"
exit $rc
