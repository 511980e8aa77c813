#!/usr/bin/env bash
# workers/cuda/gpu-check.sh - the GPU check of moetune-cuda-moe, on the GPUs
# of one node, in at most 5 minutes (README.md "gpu-check.sh"):
#   1. correctness: --check against the CPU reference (bf16, fp8, graph
#      scopes, overlap, recompute, Zipf routing; EP 2 where 2 GPUs are);
#   2. a small sweep: precision x CUDA graph scope x routing at the
#      Qwen3-30B-A3B expert shape, median iteration time;
#   3. expert-GEMM TFLOP/s against the dense BF16/FP8 peak at the
#      Qwen3-30B-A3B and DeepSeek-V3 expert shapes (target: 60% of the BF16
#      peak at the DeepSeek-V3 shape on H100/H200);
#   4. dispatch bandwidth with EP > 1 where the node has several GPUs (on one
#      GPU it says so instead).
# It builds nothing.  Usage: gpu-check.sh [path/to/moetune-cuda-moe]
# (default ./build/workers/cuda/moetune-cuda-moe).  Logs of every run go to
# $GPU_CHECK_LOGS (default a new directory under /tmp).
# Exit: 0 every check passed (speed never fails it), 1 a check failed or a
# run broke, 2 no program, 69 no usable GPU visible (nothing measured).
set -eu

if [ -z "${GPU_CHECK_INNER:-}" ]; then
    # the whole script, bounded: 5 minutes, then SIGTERM, 5 s later SIGKILL
    GPU_CHECK_INNER=1 exec timeout -k 5 300 bash "$0" "$@"
fi

BIN=${1:-./build/workers/cuda/moetune-cuda-moe}
if [ ! -x "$BIN" ]; then
    echo "gpu-check: no moetune-cuda-moe at $BIN (build it first, or pass its path)" >&2
    exit 2
fi
LOGS=${GPU_CHECK_LOGS:-$(mktemp -d /tmp/moetune-gpu-check.XXXXXX)}
mkdir -p "$LOGS"
BUDGET=285 # seconds the steps may use in all (the rest: margin under the 300 s bound)
START=$(date +%s)
FAILED=0

left() { echo $((BUDGET - ($(date +%s) - START))); }

# run NAME LIMIT_S ARGS...: runs the program under timeout (the smaller of
# LIMIT_S and the time left), output in $LOGS/NAME.log; sets RC.
run() {
    local name=$1 limit=$2 l
    shift 2
    l=$(left)
    if [ "$l" -lt 8 ]; then
        echo "(time budget spent)" >"$LOGS/$name.log"
        RC=124
        return 0
    fi
    [ "$limit" -gt "$l" ] && limit=$l
    RC=0
    timeout -k 3 "$limit" "$BIN" "$@" >"$LOGS/$name.log" 2>&1 || RC=$?
    # 137: SIGKILL after the grace period, still the time limit
    [ "$RC" = 137 ] && RC=124
    return 0
}

# kv KEY FILE: the value of KEY=... on the expert-gemm line
kv() { grep -o " $1=[^ ]*" "$2" | head -1 | cut -d= -f2; }

GPUS=0
if command -v nvidia-smi >/dev/null 2>&1; then
    GPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
fi

echo "== moetune-cuda-moe GPU check ($(date -u '+%Y-%m-%d %H:%M:%S UTC'), logs in $LOGS)"
if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi -L 2>/dev/null | sed 's/^/   /' || true
fi

# ---- 1. correctness ---------------------------------------------------------
SMALL="--check --tokens 64 --hidden-size 128 --moe-ffn-hidden-size 64 --num-experts 8 --moe-router-topk 2"
echo
echo "== 1. correctness against the CPU reference (tolerance: bf16 2e-2, fp8 6e-2 of max|ref|)"
printf '%-26s %-8s %s\n' "check" "result" "largest error / tolerance"
checks=(
    "bf16|--bf16"
    "bf16-graph-rp-zipf|--bf16 --cuda-graph-scope moe_router moe_preprocess --moe-routing zipf"
    "bf16-overlap-recompute|--bf16 --overlap-moe-expert-parallel-comm --moe-overlap-chunks 2 --recompute-modules moe_act"
    "fp8|--fp8-format e4m3"
    "fp8-graph-router-zipf|--fp8-format e4m3 --cuda-graph-scope moe_router --moe-routing zipf"
    "fp8-overlap-recompute|--fp8-format e4m3 --overlap-moe-expert-parallel-comm --moe-overlap-chunks 4 --recompute-modules moe_act --cuda-graph-scope moe_router moe_preprocess"
    "ep2-overlap|--expert-model-parallel-size 2 --overlap-moe-expert-parallel-comm --cuda-graph-scope moe_router moe_preprocess"
)
NOGPU=0
for c in "${checks[@]}"; do
    name=${c%%|*}
    flags=${c#*|}
    # shellcheck disable=SC2086
    run "check-$name" 60 $SMALL $flags
    # the tensor closest to its tolerance: "error E (tolerance T) ok|FAILED"
    worst=$(awk '/: check .* error .*tolerance/ { e=$(NF-3); t=$(NF-1); sub(/\)/, "", t);
                 if (t > 0 && e / t >= r) { r=e / t; w=e; wt=t } }
                 END { if (w != "") print w " / " wt }' "$LOGS/check-$name.log")
    case $RC in
    0) res=ok ;;
    77)
        res=skipped
        # no GPU, or none usable (older than sm_90): nothing can be measured
        grep -q -e "no CUDA GPU is visible" -e "needs sm_90" "$LOGS/check-$name.log" && NOGPU=1
        worst=$(head -1 "$LOGS/check-$name.log" | sed 's/^moetune-cuda-moe: //' | cut -c1-60)
        ;;
    3)
        res=FAILED
        FAILED=1
        ;;
    124)
        res=TIMEOUT
        FAILED=1
        ;;
    *)
        res="exit-$RC"
        FAILED=1
        worst=$(tail -1 "$LOGS/check-$name.log" | cut -c1-60)
        ;;
    esac
    printf '%-26s %-8s %s\n' "$name" "$res" "$worst"
    if [ "$NOGPU" = 1 ]; then
        echo
        echo "gpu-check: no usable CUDA GPU is visible; nothing measured ($(head -1 "$LOGS/check-$name.log"))"
        exit 69
    fi
done

# ---- 2. sweep ------------------------------------------------------------------
QWEN="--hidden-size 2048 --moe-ffn-hidden-size 768 --num-experts 128 --moe-router-topk 8 --tokens 8192"
DSV3="--hidden-size 7168 --moe-ffn-hidden-size 2048 --num-experts 256 --moe-router-topk 8 --tokens 8192"
echo
echo "== 2. sweep at the Qwen3-30B-A3B expert shape (hidden 2048, FFN 768, 128 experts, top-8, 8192 tokens, EP 1)"
printf '%-9s %-18s %-9s %14s %12s\n' "precision" "graph scope" "routing" "median ms/it" "TFLOP/s/GPU"
for prec in bf16 fp8; do
    pf="--bf16"
    [ $prec = fp8 ] && pf="--fp8-format e4m3"
    for scope in none router router+preprocess; do
        for routing in balanced zipf; do
            name="sweep-$prec-$scope-$routing"
            # shellcheck disable=SC2086
            run "$name" 40 $QWEN $pf --cuda-graph-scope $scope --moe-routing $routing --train-iters 6
            line=$(grep "summary:" "$LOGS/$name.log" || true)
            if [ $RC = 0 ] && [ -n "$line" ]; then
                med=$(echo "$line" | sed -n 's/.*median \([0-9.]*\) ms.*/\1/p')
                tf=$(echo "$line" | sed -n 's/.*(\([0-9.]*\) TFLOP\/s per GPU).*/\1/p')
            else
                med="exit-$RC"
                tf="-"
                [ $RC = 124 ] || [ $RC = 4 ] || FAILED=1
            fi
            printf '%-9s %-18s %-9s %14s %12s\n' "$prec" "$scope" "$routing" "$med" "$tf"
        done
    done
done

# the GPUs the program sees (CUDA_VISIBLE_DEVICES applied, which nvidia-smi
# ignores); nvidia-smi's count only when no run printed it
seen=$(sed -n 's/.*: GPU 0 of \([0-9]*\) visible.*/\1/p' "$LOGS"/sweep-*.log 2>/dev/null | head -1 || true)
GPUS=${seen:-$GPUS}

# ---- 3. expert-GEMM TFLOP/s -------------------------------------------------------
echo
echo "== 3. expert GEMMs alone (--gemm-bench 20), TFLOP/s and % of the GPU's dense peak"
echo "   forward: fc1 + fc2 (FP8 forward when fp8); backward: dgrad + wgrad, BF16"
printf '%-14s %-5s %8s %11s %7s %8s %11s %7s  %s\n' "shape" "prec" "fwd ms" "fwd TFLOP/s" "% peak" \
    "bwd ms" "bwd TFLOP/s" "% peak" "note"
for shape in qwen3-30b-a3b deepseek-v3; do
    for prec in bf16 fp8; do
        pf="--bf16"
        [ $prec = fp8 ] && pf="--fp8-format e4m3"
        sf=$QWEN
        [ $shape = deepseek-v3 ] && sf=$DSV3
        name="gemm-$shape-$prec"
        note=""
        # shellcheck disable=SC2086
        run "$name" 90 $sf $pf --train-iters 2 --gemm-bench 20
        if [ $RC = 4 ]; then
            # too big for this GPU's memory: the same per-expert GEMMs (256 rows
            # per expert at 8192 x 8 / 256) on fewer experts and tokens
            # shellcheck disable=SC2086
            run "$name-small" 90 $sf $pf --num-experts 64 --tokens 2048 --train-iters 2 --gemm-bench 20
            note="64 experts x 2048 tokens: same GEMM shapes (full config out of memory)"
            name="$name-small"
        fi
        f="$LOGS/$name.log"
        if [ $RC = 0 ] && grep -q "expert-gemm" "$f"; then
            fpct=$(kv fwd_pct "$f")
            bpct=$(kv bwd_pct "$f")
            if [ $shape = deepseek-v3 ] && [ $prec = bf16 ]; then
                if awk -v p="$fpct" 'BEGIN { exit !(p >= 60) }'; then
                    note="${note:+$note; }forward meets the 60% BF16 target"
                else
                    note="${note:+$note; }forward below the 60% BF16 target"
                fi
            fi
            printf '%-14s %-5s %8s %11s %7s %8s %11s %7s  %s\n' "$shape" "$prec" "$(kv fwd_ms "$f")" \
                "$(kv fwd_tflops "$f")" "$fpct" "$(kv bwd_ms "$f")" "$(kv bwd_tflops "$f")" "$bpct" "$note"
        else
            printf '%-14s %-5s %s\n' "$shape" "$prec" "exit-$RC: $(tail -1 "$f" | cut -c1-70)"
            [ $RC = 124 ] || FAILED=1
        fi
    done
done
pk=$(grep -h -o 'dense peak BF16 [0-9.]*, FP8 [0-9.]* TFLOP/s ([^)]*)' "$LOGS"/gemm-*.log 2>/dev/null | head -1 || true)
[ -n "$pk" ] && echo "   peak used: $pk"

# ---- 4. dispatch bandwidth, EP > 1 -----------------------------------------------------
echo
echo "== 4. dispatch all-to-all bandwidth with EP > 1"
if [ "$GPUS" -ge 2 ]; then
    ep=$GPUS
    [ "$ep" -gt 8 ] && ep=8
    name="dispatch-ep$ep"
    # shellcheck disable=SC2086
    run "$name" 60 $QWEN --bf16 --expert-model-parallel-size $ep --train-iters 6
    if [ $RC = 0 ]; then
        grep "dispatch rank 0" "$LOGS/$name.log" | sed 's/^moetune-cuda-moe: /   /'
        grep "summary:" "$LOGS/$name.log" | sed 's/^moetune-cuda-moe: /   /'
    else
        echo "   EP $ep: exit $RC: $(tail -1 "$LOGS/$name.log")"
        [ $RC = 124 ] || FAILED=1
    fi
else
    echo "   not measured: ${GPUS} GPU(s) visible; the EP all-to-all needs several GPUs in one node"
    echo "   (EP 1 runs the same code path, a send/recv to itself, which is no bandwidth figure)"
fi

echo
echo "== done in $(($(date +%s) - START)) s: $([ $FAILED = 0 ] && echo "every check passed" || echo "SOMETHING FAILED (see $LOGS)")"
exit $FAILED
