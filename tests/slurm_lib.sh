# slurm_lib.sh - a real Slurm on this machine for the Slurm tests (sourced).
#
# slurm_tune.sh (one node named after this host) and slurm_multinode.sh (two
# nodes, mtn1 and mtn2) share it.  From Debian's packages: munged with its
# own key and socket; slurmctld; one slurmd per node, each started with
# `slurmd -N NAME` and listening on its own port (NodeName=NAME Port=P), with
# its own spool directory (SlurmdSpoolDir=.../%n) and pid file; all on
# loopback.  ProctrackType=proctrack/linuxproc, TaskPlugin=task/none and a
# fake GPU GRES (GresTypes=gpu, Gres=gpu:G, gres.conf naming G character
# devices made with mknod ... c 1 3), so that srun --gpus-per-node=G runs
# unchanged and Slurm sets CUDA_VISIBLE_DEVICES.  A task prolog records
# every task: "step=JOB.STEP node=NODE task=PROCID cuda=CUDA_VISIBLE_DEVICES"
# in $T/tasks.log.
#
# The caller sets, before sourcing: SL_TAG (the test's name, for messages
# and the temporary directory).  Then:
#   sl_require                          skip (77) unless root with Slurm and munge
#   sl_start NODES GPUS [CONF_LINE...]  munged + slurmctld + one slurmd per node
#                                       (NODES: "host" for one node named after
#                                       this host, else names like "mtn1 mtn2")
#   sl_slurmd_start NAME / sl_slurmd_kill NAME   one node's slurmd
#   sl_node_procs NAME                  pids of Slurm's processes on that node:
#                                       slurmstepd and tasks (their environment
#                                       names the node)
# and say, skip, fail, free_port, wait_for, job_gone.  T is the temporary
# directory, removed at exit with everything this cluster started
# (MOETUNE_TEST_KEEP=1 keeps it).
set -u

t0=$(date +%s)
say() { echo "$SL_TAG: [$(($(date +%s) - t0))s] $*"; }
skip() {
  if [ -n "${CI:-}" ]; then
    echo "$SL_TAG: FAILED: cannot run under CI: $*" >&2
    exit 1
  fi
  echo "$SL_TAG: SKIPPED: $*"
  exit 77
}

sl_require() {
  local p
  if [ "${MOETUNE_TEST_SLURM:-1}" = 0 ]; then skip "MOETUNE_TEST_SLURM=0"; fi
  if [ "$(id -u)" != 0 ]; then skip "not root (the test starts slurmctld, slurmd and munged)"; fi
  for p in /usr/sbin/slurmctld /usr/sbin/slurmd /usr/sbin/munged; do
    [ -x "$p" ] || skip "$p missing (apt-get install slurmctld slurmd slurm-client munge)"
  done
  for p in srun sbatch squeue scancel sinfo munge unmunge mknod; do
    command -v "$p" >/dev/null || skip "$p missing (apt-get install slurm-client munge)"
  done
}

T=$(mktemp -d "/tmp/mt-$SL_TAG.XXXXXX")
chmod 755 "$T"
export SLURM_CONF=$T/slurm.conf
unset SLURM_JOB_ID SLURM_JOBID
daemons=()
tunes=()
jobs=()
declare -A sl_slurmd

dump() {
  local f
  for f in "$T"/ctld.log "$T"/slurmd*.log "$T"/tune*.err "$T"/workers*.out "$T"/worker*.err "$T"/scancel.log; do
    [ -f "$f" ] || continue
    echo "---- $f (tail)"
    tail -n 25 "$f"
  done
}

cleanup() {
  local p j
  for p in "${tunes[@]}"; do kill -KILL "$p" 2>/dev/null; done
  for j in "${jobs[@]}"; do scancel "$j" 2>/dev/null; done
  for p in "${daemons[@]}" "${sl_slurmd[@]}"; do kill -KILL "$p" 2>/dev/null; done
  for p in "${tunes[@]}" "${daemons[@]}" "${sl_slurmd[@]}"; do wait "$p" 2>/dev/null; done
  # whatever Slurm started for this cluster (slurmstepd, its tasks, the
  # workers): every process whose environment names this slurm.conf
  for p in /proc/[0-9]*; do
    if tr '\0' '\n' 2>/dev/null <"$p/environ" | grep -qx "SLURM_CONF=$SLURM_CONF"; then
      kill -KILL "${p#/proc/}" 2>/dev/null
    fi
  done
  if [ "${MOETUNE_TEST_KEEP:-0}" = 1 ]; then
    echo "$SL_TAG: kept $T"
  else
    rm -rf "$T"
  fi
}
trap cleanup EXIT

fail() {
  echo "$SL_TAG: FAILED: $*" >&2
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

job_gone() { ! squeue --noheader --jobs="$1" --format=%i 2>/dev/null | grep -q "$1"; }

sl_slurmd_start() {
  /usr/sbin/slurmd -D -f "$SLURM_CONF" -N "$1" >>"$T/slurmd-$1.log" 2>&1 &
  sl_slurmd[$1]=$!
}

sl_slurmd_kill() {
  kill -KILL "${sl_slurmd[$1]}" 2>/dev/null
  wait "${sl_slurmd[$1]}" 2>/dev/null
}

# Slurm's processes on node NAME (slurmstepd and its tasks): their
# environment names the node (SLURMD_NODENAME) and this cluster.
sl_node_procs() {
  local p env
  for p in /proc/[0-9]*; do
    env=$(tr '\0' '\n' 2>/dev/null <"$p/environ") || continue
    case "$env" in *"SLURM_CONF=$SLURM_CONF"*) ;; *) continue ;; esac
    if printf '%s\n' "$env" | grep -qx "SLURMD_NODENAME=$1"; then
      echo "${p#/proc/}"
    fi
  done
}

sl_start() {
  local nodes=$1 gpus=$2 i n ctld_port d_port node_lines="" names="" port
  shift 2
  mkdir -m 0711 "$T/munge"
  head -c 1024 /dev/urandom >"$T/munge/munge.key"
  chmod 0400 "$T/munge/munge.key"
  munged --foreground --force --socket="$T/munge/socket" --key-file="$T/munge/munge.key" \
    --pid-file="$T/munge/munged.pid" --seed-file="$T/munge/seed" --num-threads=2 \
    >"$T/munge.log" 2>&1 &
  daemons+=($!)
  munge_ok() { munge -S "$T/munge/socket" -n 2>/dev/null | unmunge -S "$T/munge/socket" >/dev/null 2>&1; }
  wait_for 10 munge_ok || fail "munged did not come up ($(tail -n 3 "$T/munge.log"))"

  # fake GPUs: character devices like /dev/null
  mkdir "$T/dev"
  for i in $(seq 0 $((gpus - 1))); do
    mknod "$T/dev/nvidia$i" c 1 3 || skip "mknod not permitted here"
  done
  mkdir "$T/state" "$T/spool"
  ctld_port=$(free_port)
  d_port=$(free_port)
  while [ "$d_port" = "$ctld_port" ]; do d_port=$(free_port); done
  if [ "$nodes" = host ]; then
    SL_NODES=$(hostname -s)
    node_lines="NodeName=$SL_NODES NodeAddr=127.0.0.1 CPUs=16 Gres=gpu:$gpus State=UNKNOWN"
  else
    SL_NODES=$nodes
    for n in $nodes; do
      port=$(free_port)
      while [ "$port" = "$ctld_port" ] || [ "$port" = "$d_port" ]; do port=$(free_port); done
      node_lines+="NodeName=$n NodeHostname=$(hostname -s) NodeAddr=127.0.0.1 Port=$port CPUs=8 Gres=gpu:$gpus State=UNKNOWN"$'\n'
    done
  fi
  names=$(echo "$SL_NODES" | tr ' ' ',')
  cat >"$T/task-prolog" <<EOF
#!/bin/sh
echo "step=\$SLURM_JOB_ID.\$SLURM_STEP_ID node=\$SLURMD_NODENAME task=\$SLURM_PROCID cuda=\${CUDA_VISIBLE_DEVICES:-unset}" >>"$T/tasks.log"
if [ -f "$T/stall-\$SLURMD_NODENAME" ]; then
  echo "stalled step=\$SLURM_JOB_ID.\$SLURM_STEP_ID" >>"$T/stalled.log"
  sleep 120
fi
EOF
  chmod 755 "$T/task-prolog"
  {
    cat <<EOF
ClusterName=mt$(echo "$SL_TAG" | tr -cd 'a-z0-9' | cut -c1-20)
SlurmctldHost=$(hostname -s)(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$d_port
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$T/munge/socket
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool/%n
SlurmctldPidFile=$T/ctld.pid
SlurmdPidFile=$T/slurmd-%n.pid
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
EOF
    for i in "$@"; do echo "$i"; done
    printf '%s\n' "$node_lines"
    echo "PartitionName=debug Nodes=$names Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES"
  } >"$T/slurm.conf"
  cat >"$T/gres.conf" <<EOF
AutoDetect=off
Name=gpu File=$T/dev/nvidia[0-$((gpus - 1))]
EOF
  /usr/sbin/slurmctld -D -i -f "$SLURM_CONF" >"$T/ctld.log" 2>&1 &
  daemons+=($!)
  sleep 0.3
  for n in $SL_NODES; do sl_slurmd_start "$n"; done
  all_idle() { [ "$(sinfo --noheader --Node --format=%T 2>/dev/null | grep -c '^idle')" = "$(echo "$SL_NODES" | wc -w)" ]; }
  wait_for 30 all_idle || fail "the nodes never became idle: $(sinfo --noheader --Node 2>&1 | tr '\n' ' ')"
}
