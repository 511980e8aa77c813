#!/bin/bash
# slurm_multinode.sh - a tune whose every job spans two nodes of a real Slurm.
#
# Two nodes on this machine: two slurmd daemons, `slurmd -N mtn1` and
# `slurmd -N mtn2`, each with its own node name, port, spool directory and
# pid file (tests/slurm_lib.sh), one slurmctld, munged, a fake GPU GRES of 4
# devices per node and SlurmdTimeout=5 (a lost node is noticed within
# seconds).  Separate slurmd daemons rather than network namespaces: this
# Slurm (22.05) runs several slurmd on one host when each has its own
# NodeName and Port, srun, its I/O and the step daemons need no routing
# between namespaces, and the test stays within its time budget; what it
# cannot show (real network partitions, different host names) is said in
# examples/slurm/README.md.
#
# The tune (tests/contracts/tune-2node-srun.cfg: 2 nodes x 4 GPUs, srun
# launcher, launch.srun.rank_env) runs through one CURVE worker started as on
# a login node (not inside an allocation): each job is its own Slurm job of
# one step, `srun -l --nodes=2 --ntasks-per-node=4 ... moetune rank-exec --
# moetune-sim ...`, so Slurm allocates the two nodes again for a retry.
# Checked:
#  - every ok run is a step of 8 tasks, 4 on each node, each task with
#    CUDA_VISIBLE_DEVICES=0,1,2,3;
#  - one iteration stream: iteration lines only from the last rank (task 7);
#  - every rank's memory: the run's per-GPU peaks are 8 rows, 4 hosts mtn1
#    and 4 mtn2 (the sim's per-rank report), and rank 0's memory line;
#  - cross-node MASTER_ADDR: every rank, those on mtn2 too, got
#    MASTER_ADDR=mtn1 and one MASTER_PORT from rank-exec;
#  - a node lost mid-step: the task prolog on mtn2 stalls one job's tasks
#    (a marker file), the test kills mtn2's slurmd, step daemon and tasks;
#    srun reports "Node failure on mtn2", the run is typed infra with that
#    evidence, the coordinator re-queues it as retry 1, mtn2's slurmd comes
#    back, and the retry runs ok on both nodes; the tune ends with a bundle;
#  - scancel of a running two-node step leaves no task on either node.
#
# usage: slurm_multinode.sh MOETUNE_BIN SOURCE_DIR
# Needs root; skips (77) when not root or without Slurm, except under CI.
set -u

mt=$1
src=$2
contract=$src/tests/contracts/tune-2node-srun.cfg
sim=$(dirname "$mt")/moetune-sim
SL_TAG=slurm_multinode
. "$src/tests/slurm_lib.sh"
sl_require

sl_start "mtn1 mtn2" 4 SlurmdTimeout=5
say "Slurm up: nodes $SL_NODES (two slurmd on this host, own ports), gpu:4 each"

"$mt" keygen "$T/coord" coordinator >/dev/null || fail "keygen coordinator"
"$mt" keygen "$T/wkeys" mtw >/dev/null || fail "keygen mtw"
mkdir -m 0755 "$T/coord/workers"
cp "$T/wkeys/mtw.pub" "$T/coord/workers/"

# ---- the tune, with a node lost in the middle of one job -----------------------------------

# A late reader: for every third job, the worker's squeue answers as an
# overloaded slurmctld does (a socket time-out) for as long as the job is
# live, so the worker never learns the job's nodes while it runs.  The run's
# node list must still come from Slurm (the ended job is still listed), never
# be left unknown.  Every other query goes to the real squeue.
real_squeue=$(command -v squeue)
mkdir -p "$T/bin" "$T/sq"
cat >"$T/bin/squeue" <<EOF
#!/bin/bash
name=
for a in "\$@"; do case "\$a" in --name=*) name=\${a#--name=} ;; esac; done
if [ -n "\$name" ] && [ "\$name" != "\${name#mt-}" ]; then
  if [ ! -e "$T/sq/\$name" ]; then
    n=\$(ls "$T/sq" | wc -l)
    echo \$((n % 3 == 2)) >"$T/sq/\$name"
  fi
  state=\$("$real_squeue" --noheader --states=all --name="\$name" --format=%T)
  if [ "\$(cat "$T/sq/\$name")" = 1 ] && [ "\$state" != COMPLETED ]; then
    echo "refused \$name \$state" >>"$T/sq.log"
    echo "squeue: error: slurm_load_jobs error: Socket timed out on send/recv operation" >&2
    exit 1
  fi
fi
exec "$real_squeue" "\$@"
EOF
chmod 755 "$T/bin/squeue"

port=$(free_port)
"$mt" tune "$contract" --dir "$T/tune" --workers "tcp://127.0.0.1:$port" --keys "$T/coord" \
  --worker-wait 60 >"$T/tune.out" 2>"$T/tune.err" &
tune=$!
tunes+=($tune)
# sim steps of about 10 ms, so that every step lives long enough for squeue to
# list it (its node list is asked of Slurm while it runs)
PATH=$T/bin:$PATH MOETUNE_SIM_TIME_SCALE=0.0003 "$mt" worker --connect "tcp://127.0.0.1:$port" --name mtw --key "$T/wkeys/mtw" \
  --server-key "$T/coord/coordinator.pub" --dir "$T/w" --launchers srun --nodes 2 --gpus 4 \
  --idle-exit 60 >"$T/worker.out" 2>"$T/worker.err" &
daemons+=($!)
say "tune on port $port, one worker (srun launcher, outside any allocation)"

# after a few jobs, the next job's tasks on mtn2 stall in the prolog
some_runs() { [ -f "$T/tasks.log" ] && [ "$(grep -c . "$T/tasks.log")" -ge 24 ]; }
wait_for 60 some_runs || fail "no three jobs ran"
touch "$T/stall-mtn2"
stalled() { [ -s "$T/stalled.log" ]; }
wait_for 30 stalled || fail "no job reached mtn2's stalled prolog"
lost_step=$(head -n 1 "$T/stalled.log" | sed 's/^stalled step=//')
rm -f "$T/stall-mtn2"
# mtn2 is lost: its slurmd, the step daemon and whatever runs there
# the step daemons above the node's processes first (all of them in one
# kill), so that none reports its tasks' deaths: the node is gone, not a task
sl_slurmd_kill mtn2
procs=$(sl_node_procs mtn2)
stepds=""
for p in $procs; do
  q=$p
  while pp=$(awk '/^PPid:/ {print $2}' "/proc/$q/status" 2>/dev/null) && [ -n "$pp" ] &&
    tr '\0' ' ' 2>/dev/null <"/proc/$pp/cmdline" | grep -q '^slurmstepd'; do
    stepds="$stepds $pp"
    q=$pp
  done
done
[ -n "$stepds" ] || fail "no slurmstepd above mtn2's tasks ($procs)"
# shellcheck disable=SC2086
kill -KILL $stepds $procs 2>/dev/null
say "step $lost_step stalled on mtn2; killed mtn2's slurmd, slurmstepd and tasks"
requeued() { grep -q "infra (.*Node failure on mtn2.*re-queued as retry 1" "$T/tune.err"; }
wait_for 45 requeued || fail "the lost step was not typed infra and re-queued"
say "coordinator: $(grep -m1 'job-requeued\|re-queued as retry 1' "$T/tune.err" | sed 's/^ *//' | cut -c1-220)"
sl_slurmd_start mtn2
node2_back() { sinfo --noheader --Node --nodes=mtn2 --format=%T 2>/dev/null | grep -Eq '^(idle|mixed|allocated)'; }
wait_for 30 node2_back || fail "mtn2 did not come back"
say "mtn2 back: $(sinfo --noheader --Node --format='%N %T' | tr '\n' ' ')"

deadline=$(($(date +%s) + 120))
while kill -0 "$tune" 2>/dev/null; do
  [ "$(date +%s)" -lt "$deadline" ] || fail "the tune did not finish"
  sleep 0.3
done
wait "$tune"
rc=$?
tunes=()
[ "$rc" = 0 ] || fail "the tune exited with $rc"
[ -s "$T/tune/bundle.json" ] || fail "no bundle"
say "tune: $(grep -E '^(result|spent)' "$T/tune.out" | tr '\n' ' ')"

# ---- what the runs show --------------------------------------------------------------------

python3 - "$T/tune/moetune.db" "$T/sq.log" <<'EOF' || fail "the stored runs: see above"
import json, sqlite3, sys
db = sqlite3.connect("file:%s?mode=ro" % sys.argv[1], uri=True)
runs = [dict(zip(("id", "config_id", "kind", "replicate", "retry", "outcome", "evidence", "fp"), r))
        for r in db.execute("select id, config_id, kind, replicate, retry, outcome, evidence, fingerprint from runs")]
infra = [r for r in runs if r["outcome"] == "infra"]
ok = [r for r in runs if r["outcome"] == "ok"]
bad = [r for r in runs if r["outcome"] not in ("ok", "infra")]
assert not bad, "runs neither ok nor infra: %s" % [(r["outcome"], r["evidence"]) for r in bad]
assert len(infra) == 1, "%d infra runs, want 1: %s" % (len(infra), [r["evidence"] for r in infra])
i = infra[0]
assert "Node failure on mtn2" in i["evidence"], i["evidence"]
assert i["retry"] == 0, i
key = (i["config_id"], i["kind"], i["replicate"])
again = [r for r in ok if (r["config_id"], r["kind"], r["replicate"]) == key]
assert len(again) == 1 and again[0]["retry"] == 1, "the infra run's retry: %s" % again
for r in ok:
    rows = list(db.execute("select rank, host, gpu, source from gpu_memory where run_id = ? order by rank", (r["id"],)))
    want = [(k, "mtn1" if k < 4 else "mtn2", k % 4, "sim") for k in range(8)]
    assert rows == want, "run %d: per-GPU peaks %s" % (r["id"], rows)
    hosts = json.loads(r["fp"])["hosts"]
    assert hosts == ["mtn1", "mtn2"], "run %d: fingerprint hosts %s" % (r["id"], hosts)
late = {l.split()[1] for l in open(sys.argv[2])}
assert len(late) >= 3, "only %d jobs whose node list was refused while they ran" % len(late)
print("runs: %d ok (each 8 per-rank peaks, 4 on mtn1 and 4 on mtn2; node list mtn1, mtn2), "
      "1 infra at retry 0 (%s...) and its retry 1 ok; %d jobs' nodes learnt only after they ended" % (len(ok), i["evidence"][:90], len(late)))
EOF

# every ok run's step: 8 tasks, 4 per node, 4 GPUs each
steps=$(grep -v ' cuda=unset' "$T/tasks.log" | cut -d' ' -f1 | sort -u | grep -vx "step=$lost_step")
nsteps=0
for s in $steps; do
  nsteps=$((nsteps + 1))
  n1=$(grep -c "^$s node=mtn1 .* cuda=0,1,2,3$" "$T/tasks.log")
  n2=$(grep -c "^$s node=mtn2 .* cuda=0,1,2,3$" "$T/tasks.log")
  [ "$n1" = 4 ] && [ "$n2" = 4 ] || fail "$s: $n1 tasks on mtn1 and $n2 on mtn2 with 4 GPUs (want 4 and 4)"
done
say "$nsteps two-node steps, each 4 + 4 tasks with CUDA_VISIBLE_DEVICES=0,1,2,3"

# the run logs: one iteration stream, rank 0's memory line, MASTER_ADDR on every rank
nlogs=0
for log in "$T"/w/runs/*/stdout.log; do
  grep -q ' iteration ' "$log" || continue # the lost attempt
  nlogs=$((nlogs + 1))
  grep -q '^7: .* iteration ' "$log" || fail "no iteration line from the last rank in $log"
  if grep -q '^[0-6]: .* iteration ' "$log"; then fail "iteration lines from another rank in $log"; fi
  grep -q '^0: \[Rank 0\] (after 1 iterations) memory (MB)' "$log" || fail "no rank-0 memory line in $log"
  masters=$(grep -o '\[sim\] rank [0-9] of 8 on mtn[12], GPU [0-3]; MASTER_ADDR=[^ ]* MASTER_PORT=[0-9]*' "$log")
  [ "$(echo "$masters" | grep -c .)" = 8 ] || fail "not 8 ranks in $log: $masters"
  [ "$(echo "$masters" | grep -c 'on mtn2, .* MASTER_ADDR=mtn1 ')" = 4 ] || fail "mtn2's ranks without MASTER_ADDR=mtn1 in $log: $masters"
  [ "$(echo "$masters" | sed 's/.*MASTER_PORT=//' | sort -u | wc -l)" = 1 ] || fail "ranks disagree on MASTER_PORT in $log"
done
[ "$nlogs" -ge 8 ] || fail "only $nlogs run logs with iterations"
say "$nlogs run logs: iterations from rank 7 alone, rank 0's memory line, ranks 4-7 on mtn2 with MASTER_ADDR=mtn1"

# the same nodes for an A/B: once a comparison's first control run has its
# node list, its later replicates' steps are pinned to it (srun --nodelist);
# a retry is not (the node it lost may be gone)
pinned=$(grep -c ' (retry 0) on nodes mtn1,mtn2$' "$T/worker.err")
[ "$pinned" -ge 2 ] || fail "only $pinned jobs pinned to mtn1,mtn2: $(grep ': running ' "$T/worker.err" | head -n 5)"
if grep -q ' (retry [1-9][0-9]*) on nodes ' "$T/worker.err"; then fail "a retry was pinned to the nodes it may have lost"; fi
say "$pinned jobs sent with their comparison's node list (srun --nodelist=mtn1,mtn2); the retry was not"

# ---- scancel of a running two-node step ----------------------------------------------------

name=mt-scancel-$$
args=$("$mt" render "$contract" --argv-only) || fail "render"
# shellcheck disable=SC2086
env MOETUNE_SIM_GPU=GB300 MOETUNE_SIM_NODES=2 MOETUNE_SIM_GPUS_PER_NODE=4 MOETUNE_SIM_TIME_SCALE=1 \
  srun -l --nodes=2 --ntasks-per-node=4 --ntasks=8 --gpus-per-node=4 --job-name="$name" \
  "$mt" rank-exec -- "$sim" $args >"$T/scancel-run.out" 2>&1 &
srun_pid=$!
running() { [ "$(grep -c '^[0-7]: \[sim\] rank ' "$T/scancel-run.out")" = 8 ]; }
wait_for 30 running || fail "the step's 8 ranks did not start: $(tail -n 3 "$T/scancel-run.out")"
[ -n "$(sl_node_procs mtn1)" ] && [ -n "$(sl_node_procs mtn2)" ] || fail "no task on one of the nodes"
scancel --name="$name" || fail "scancel"
wait "$srun_pid" 2>/dev/null
none_left() { [ -z "$(sl_node_procs mtn1)" ] && [ -z "$(sl_node_procs mtn2)" ]; }
wait_for 20 none_left || fail "tasks left after scancel: mtn1 $(sl_node_procs mtn1 | tr '\n' ' ') mtn2 $(sl_node_procs mtn2 | tr '\n' ' ')"
say "scancel --name=$name: no task left on mtn1 or mtn2"
say "passed"
exit 0
