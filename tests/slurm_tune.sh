#!/bin/bash
# slurm_tune.sh - a tune whose jobs run through a real Slurm.
#
# Starts a single-node Slurm on loopback (tests/slurm_lib.sh: munged,
# slurmctld, one slurmd, a fake GPU GRES of 8 devices, so that the
# production `srun --gpus-per-node=8` argv runs unchanged and Slurm sets
# CUDA_VISIBLE_DEVICES; a task prolog records every task's step and
# CUDA_VISIBLE_DEVICES); a scancel shim first in the workers' PATH records
# each scancel before running the real one.
#
# 1. tune: `moetune tune tests/contracts/tune-small-srun.cfg --workers ...
#    --keys` (CURVE), with the workers started by the example batch script
#    examples/slurm/moetune-workers.sbatch (sbatch, one worker per node,
#    --launchers local,srun, nodes and GPUs from the job).  The tune must end
#    with a bundle; every run must be ok, done by the node's worker, and be a
#    step of the workers' allocation with 8 tasks that each saw
#    CUDA_VISIBLE_DEVICES=0,...,7; the run logs carry srun -l's task labels,
#    iteration lines from the last rank only and rank 0's memory line;
#    after the tune the workers exit and the allocation completes.
# 2. cancel: another tune with --job-grace 2 and slowed sim steps; while its
#    first job's step runs, the worker is stopped (SIGSTOP) until the
#    coordinator declares the job lost, re-queues it and sends `cancel`;
#    resumed, the worker cancels the job: its run is stopped through the
#    srun launcher, which runs `scancel JOBID.STEPID` (seen by the shim), and
#    the step leaves squeue.
#
# usage: slurm_tune.sh MOETUNE_BIN SOURCE_DIR
# Needs root (the daemons, mknod).  Skips (exit 77) when not root or without
# the Slurm packages, except under CI (CI set), where that is a failure.
# MOETUNE_TEST_KEEP=1 keeps the temporary directory.
set -u

mt=$1
src=$2
contract=$src/tests/contracts/tune-small-srun.cfg
batch=$src/examples/slurm/moetune-workers.sbatch
SL_TAG=slurm_tune
. "$src/tests/slurm_lib.sh"
sl_require

# ---- the cluster ---------------------------------------------------------------------------

sl_start host 8
node=$SL_NODES
say "Slurm up: $node, gpu:8 (GRES on $T/dev/nvidia[0-7]), munge on $T/munge/socket"

# the workers' scancel: recorded, then the real one
mkdir "$T/shim"
cat >"$T/shim/scancel" <<EOF
#!/bin/sh
echo "scancel \$*" >>"$T/scancel.log"
exec $(command -v scancel) "\$@"
EOF
chmod 755 "$T/shim/scancel"

# ---- CURVE keys: the coordinator's, and one worker key named after the node ----------------

"$mt" keygen "$T/coord" coordinator >/dev/null || fail "keygen coordinator"
"$mt" keygen "$T/wkeys" "$node" >/dev/null || fail "keygen $node"
mkdir -m 0755 "$T/coord/workers"
cp "$T/wkeys/$node.pub" "$T/coord/workers/"
cp "$T/coord/coordinator.pub" "$T/wkeys/"

# submit_workers PORT DIR [VAR=VALUE...]: the example batch script; prints the job id
submit_workers() {
  local port=$1 dir=$2
  shift 2
  env PATH="$T/shim:$PATH" MOETUNE_COORDINATOR=127.0.0.1 MOETUNE_PORT="$port" \
    MOETUNE_KEYS="$T/wkeys" MOETUNE_BIN="$mt" MOETUNE_WORKER_DIR="$dir" MOETUNE_IDLE_EXIT=60 "$@" \
    sbatch --parsable --output="$dir.out" "$batch"
}

# ---- 1. a tune through srun ---------------------------------------------------------------

port=$(free_port)
"$mt" tune "$contract" --dir "$T/tune1" --workers "tcp://127.0.0.1:$port" --keys "$T/coord" \
  --worker-wait 60 >"$T/tune1.out" 2>"$T/tune1.err" &
tune1=$!
tunes+=($tune1)
job1=$(submit_workers "$port" "$T/workers1") || fail "sbatch failed"
jobs+=("$job1")
say "tune 1 on port $port; workers: batch job $job1"
deadline=$(($(date +%s) + 100))
while kill -0 "$tune1" 2>/dev/null; do
  [ "$(date +%s)" -lt "$deadline" ] || fail "tune 1 did not finish within 100 s"
  sleep 0.5
done
wait "$tune1"
rc=$?
tunes=()
[ "$rc" = 0 ] || fail "tune 1 exited with $rc"
[ -s "$T/tune1/bundle.json" ] || fail "tune 1 wrote no bundle"
say "tune 1: $(grep -E '^(validated gain|result|spent)' "$T/tune1.out" | tr '\n' ' ')"

"$mt" runs "$T/tune1" --json >"$T/runs1.json" || fail "moetune runs"
nruns=$(grep -c '"outcome":"' "$T/runs1.json")
nok=$(grep -c '"outcome":"ok"' "$T/runs1.json")
nworker=$(grep -c "\"worker\":\"$node\"" "$T/runs1.json")
[ "$nruns" -ge 20 ] || fail "tune 1 stored $nruns runs"
[ "$nok" = "$nruns" ] || fail "tune 1: $nok of $nruns runs ok"
[ "$nworker" = "$nruns" ] || fail "tune 1: $nworker of $nruns runs by worker $node"

# every run a step of the workers' allocation (step 0 is the workers' own),
# 8 tasks each, every task with the 8 GPUs Slurm gave the step
grep -E "^step=$job1\.[1-9][0-9]{0,5} " "$T/tasks.log" >"$T/tasks1.log"
nsteps=$(cut -d' ' -f1 "$T/tasks1.log" | sort -u | wc -l)
[ "$nsteps" = "$nruns" ] || fail "$nruns runs but $nsteps job steps in allocation $job1"
bad=$(cut -d' ' -f1 "$T/tasks1.log" | sort | uniq -c | awk '$1 != 8' | head -n 3)
[ -z "$bad" ] || fail "steps without 8 tasks: $bad"
ncuda=$(grep -c ' cuda=0,1,2,3,4,5,6,7$' "$T/tasks1.log")
[ "$ncuda" = $((8 * nruns)) ] ||
  fail "$ncuda of $((8 * nruns)) tasks saw CUDA_VISIBLE_DEVICES=0,...,7: $(grep -v ' cuda=0,1,2,3,4,5,6,7$' "$T/tasks1.log" | head -n 2)"
# srun -l labels: each task is one rank of the sim; the last (7) prints the
# iteration lines, rank 0 the arguments and its memory line (DP rank 0)
nlogs=0
for log in "$T/workers1/$node"/runs/*/stdout.log; do
  nlogs=$((nlogs + 1))
  grep -q '^7: .* iteration ' "$log" || fail "no task-7 iteration line in $log"
  if grep -q '^[0-6]: .* iteration ' "$log"; then fail "a rank other than the last printed iteration lines in $log"; fi
  grep -q '^0: \[Rank 0\] (after 1 iterations) memory (MB)' "$log" || fail "no rank-0 memory line in $log"
done
[ "$nlogs" = "$nruns" ] || fail "$nlogs run logs for $nruns runs"
# the coordinator's disconnect ends the workers, and so the allocation
wait_for 30 job_gone "$job1" || fail "allocation $job1 still there after the tune"
grep -q "JobId=$job1 .*JobState=COMPLETED" "$T/jobcomp.txt" || fail "allocation $job1 did not complete: $(grep "JobId=$job1 " "$T/jobcomp.txt")"
say "tune 1: $nruns runs ok, each a step of allocation $job1 with 8 tasks and CUDA_VISIBLE_DEVICES=0,...,7; allocation completed"

# ---- 2. the coordinator cancels a running job: scancel of its step ---------------------------

port=$(free_port)
"$mt" tune "$contract" --dir "$T/tune2" --workers "tcp://127.0.0.1:$port" --keys "$T/coord" \
  --worker-wait 60 --job-grace 2 >"$T/tune2.out" 2>"$T/tune2.err" &
tune2=$!
tunes+=($tune2)
job2=$(submit_workers "$port" "$T/workers2" MOETUNE_SIM_TIME_SCALE=0.03) || fail "sbatch failed"
jobs+=("$job2")
say "tune 2 on port $port (job grace 2 s, sim steps slowed to ~1.4 s); workers: batch job $job2"
first_step() { squeue --noheader --steps --jobs="$job2" --format='%i %j' 2>/dev/null | awk '$2 ~ /^mt-/ {print $1; exit}'; }
step_up() { [ -n "$(first_step)" ]; }
wait_for 60 step_up || fail "no job step in allocation $job2"
step=$(first_step)
# the worker: the process of that command line whose parent is not one too
wpid=""
for p in /proc/[0-9]*; do
  cmd=$(tr '\0' ' ' 2>/dev/null <"$p/cmdline") || continue
  case "$cmd" in *" worker "*"--dir $T/workers2/$node"*) ;; *) continue ;; esac
  pp=$(awk '/^PPid:/ {print $2}' "$p/status" 2>/dev/null)
  case "$(tr '\0' ' ' 2>/dev/null <"/proc/$pp/cmdline")" in *" worker "*"--dir $T/workers2/"*) continue ;; esac
  wpid=${p#/proc/}
done
[ -n "$wpid" ] || fail "worker process not found"
say "step $step runs; stopping worker pid $wpid until the coordinator gives the job up"
kill -STOP "$wpid"
lost() { grep -q 'lost with worker' "$T/tune2.err"; }
if ! wait_for 20 lost; then
  kill -CONT "$wpid"
  fail "the coordinator never declared the job lost"
fi
kill -CONT "$wpid"
say "coordinator: $(grep -m1 'lost with worker' "$T/tune2.err" | sed 's/^ *//')"
step_gone() { ! squeue --noheader --steps --jobs="$job2" --format=%i 2>/dev/null | grep -qx "$step"; }
wait_for 30 step_gone || fail "step $step still in squeue after the cancel"
# exactly that step was cancelled: not the workers' own step, not the allocation
[ "$(cat "$T/scancel.log" 2>/dev/null)" = "scancel $step" ] ||
  fail "expected one 'scancel $step'; the shim saw: $(cat "$T/scancel.log" 2>/dev/null)"
cancelled() { grep -q "stopped job/.* (cancelled)" "$T/workers2.out"; }
wait_for 15 cancelled || fail "the worker did not report the cancelled job"
grep -q "cancelling job/.*re-queued after the job grace" "$T/workers2.out" || fail "the worker did not log the coordinator's cancel"
say "worker: $(grep -m1 'cancelling job/' "$T/workers2.out" | sed 's/^.*worker [^:]*: //')"
kill -0 "$wpid" 2>/dev/null || fail "the worker did not survive the cancel"
say "step $step cancelled with 'scancel $step' and gone from squeue; the worker lives on"

kill -TERM "$tune2" 2>/dev/null
wait "$tune2" 2>/dev/null
tunes=()
scancel "$job2"
wait_for 30 job_gone "$job2" || fail "allocation $job2 not gone after scancel"
say "passed"
exit 0
