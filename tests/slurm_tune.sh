#!/bin/bash
# slurm_tune.sh - a tune whose jobs run through a real Slurm.
#
# Starts a single-node Slurm on loopback from Debian's packages: munged with
# its own key and socket, slurmctld and slurmd with ProctrackType=
# proctrack/linuxproc, TaskPlugin=task/none and a fake GPU GRES (GresTypes=
# gpu, the node with Gres=gpu:8, gres.conf naming 8 character devices made
# with mknod ... c 1 3), so that the production `srun --gpus-per-node=8`
# argv runs unchanged and Slurm sets CUDA_VISIBLE_DEVICES.  A task prolog
# records every task's step and CUDA_VISIBLE_DEVICES; a scancel shim first
# in the workers' PATH records each scancel before running the real one.
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
t0=$(date +%s)

say() { echo "slurm_tune: [$(($(date +%s) - t0))s] $*"; }
skip() {
  if [ -n "${CI:-}" ]; then
    echo "slurm_tune: FAILED: cannot run under CI: $*" >&2
    exit 1
  fi
  echo "slurm_tune: SKIPPED: $*"
  exit 77
}

if [ "${MOETUNE_TEST_SLURM:-1}" = 0 ]; then skip "MOETUNE_TEST_SLURM=0"; fi
if [ "$(id -u)" != 0 ]; then skip "not root (the test starts slurmctld, slurmd and munged)"; fi
for p in /usr/sbin/slurmctld /usr/sbin/slurmd /usr/sbin/munged; do
  [ -x "$p" ] || skip "$p missing (apt-get install slurmctld slurmd slurm-client munge)"
done
for p in srun sbatch squeue scancel sinfo munge unmunge mknod; do
  command -v "$p" >/dev/null || skip "$p missing (apt-get install slurm-client munge)"
done

T=$(mktemp -d /tmp/mt-slurm-tune.XXXXXX)
chmod 755 "$T"
node=$(hostname -s)
export SLURM_CONF=$T/slurm.conf
unset SLURM_JOB_ID SLURM_JOBID
daemons=()
tunes=()
jobs=()

dump() {
  local f
  for f in "$T"/ctld.log "$T"/slurmd.log "$T"/tune*.err "$T"/workers*.out "$T"/scancel.log; do
    [ -f "$f" ] || continue
    echo "---- $f (tail)"
    tail -n 25 "$f"
  done
}

cleanup() {
  local p j
  for p in "${tunes[@]}"; do kill -KILL "$p" 2>/dev/null; done
  for j in "${jobs[@]}"; do scancel "$j" 2>/dev/null; done
  for p in "${daemons[@]}"; do kill -KILL "$p" 2>/dev/null; done
  for p in "${tunes[@]}" "${daemons[@]}"; do wait "$p" 2>/dev/null; done
  # whatever Slurm started for this cluster (slurmstepd, its tasks, the
  # workers): every process whose environment names this slurm.conf
  for p in /proc/[0-9]*; do
    if tr '\0' '\n' 2>/dev/null <"$p/environ" | grep -qx "SLURM_CONF=$SLURM_CONF"; then
      kill -KILL "${p#/proc/}" 2>/dev/null
    fi
  done
  if [ "${MOETUNE_TEST_KEEP:-0}" = 1 ]; then
    echo "slurm_tune: kept $T"
  else
    rm -rf "$T"
  fi
}
trap cleanup EXIT

fail() {
  echo "slurm_tune: FAILED: $*" >&2
  dump >&2
  exit 1
}

# A TCP port nobody listens on.
free_port() {
  local p i
  for i in $(seq 50); do
    p=$((20000 + RANDOM % 40000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      echo "$p"
      return
    fi
  done
  fail "no free port"
}

# wait_for SECONDS COMMAND...: until COMMAND succeeds; 1 on time out.
wait_for() {
  local limit=$1 end
  shift
  end=$(($(date +%s) + limit))
  until "$@"; do
    [ "$(date +%s)" -lt "$end" ] || return 1
    sleep 0.2
  done
}

# ---- the cluster ---------------------------------------------------------------------------

mkdir -m 0711 "$T/munge"
head -c 1024 /dev/urandom >"$T/munge/munge.key"
chmod 0400 "$T/munge/munge.key"
munged --foreground --force --socket="$T/munge/socket" --key-file="$T/munge/munge.key" \
  --pid-file="$T/munge/munged.pid" --seed-file="$T/munge/seed" --num-threads=2 \
  >"$T/munge.log" 2>&1 &
daemons+=($!)
munge_ok() { munge -S "$T/munge/socket" -n 2>/dev/null | unmunge -S "$T/munge/socket" >/dev/null 2>&1; }
wait_for 10 munge_ok || fail "munged did not come up ($(tail -n 3 "$T/munge.log"))"

# eight fake GPUs: character devices like /dev/null
mkdir "$T/dev"
for i in 0 1 2 3 4 5 6 7; do
  mknod "$T/dev/nvidia$i" c 1 3 || skip "mknod not permitted here"
done
mkdir "$T/state" "$T/spool"
ctld_port=$(free_port)
d_port=$(free_port)
while [ "$d_port" = "$ctld_port" ]; do d_port=$(free_port); done
cat >"$T/task-prolog" <<EOF
#!/bin/sh
echo "step=\$SLURM_JOB_ID.\$SLURM_STEP_ID task=\$SLURM_PROCID cuda=\${CUDA_VISIBLE_DEVICES:-unset}" >>"$T/tasks.log"
EOF
chmod 755 "$T/task-prolog"
cat >"$T/slurm.conf" <<EOF
ClusterName=mtslurmtune
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$d_port
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$T/munge/socket
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool
SlurmctldPidFile=$T/ctld.pid
SlurmdPidFile=$T/slurmd.pid
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
TaskProlog=$T/task-prolog
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SwitchType=switch/none
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$T/jobcomp.txt
ReturnToService=2
KillWait=2
MessageTimeout=5
SlurmdParameters=config_overrides
GresTypes=gpu
NodeName=$node NodeAddr=127.0.0.1 CPUs=16 Gres=gpu:8 State=UNKNOWN
PartitionName=debug Nodes=$node Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
cat >"$T/gres.conf" <<EOF
AutoDetect=off
Name=gpu File=$T/dev/nvidia[0-7]
EOF
/usr/sbin/slurmctld -D -i -f "$SLURM_CONF" >"$T/ctld.log" 2>&1 &
daemons+=($!)
sleep 0.3
/usr/sbin/slurmd -D -f "$SLURM_CONF" -N "$node" >"$T/slurmd.log" 2>&1 &
daemons+=($!)
node_idle() { sinfo --noheader --format=%T 2>/dev/null | grep -q '^idle'; }
wait_for 30 node_idle || fail "the node never became idle"
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

job_gone() { ! squeue --noheader --jobs="$1" --format=%i 2>/dev/null | grep -q "$1"; }

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
