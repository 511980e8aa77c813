#!/bin/bash
# moetune bisect on real git repositories built here: 64 commits of a
# "training stack" whose stack file (commit, slowdown) the sim reads from the
# revision's checkout, measured at the sim's default noise.
#   1. one commit makes the sim 3% slower: bisect finds exactly it
#   2. killed (SIGKILL) part way and run again: the same answer, the same
#      total runs, nothing measured twice
#   3. revisions around the culprit cannot be built (exit 125: skip; one exits
#      1: a typed failure): the culprit is reported as the range, via --revs
#   4. no regression at all: exit 3, "does not reproduce", with the figures
#   5. two regressions: both found, or the report names the range of the second
#   6. bad input: an unknown revision, good after bad, a bad prepare template
#   7. through two ZeroMQ workers with CURVE: the same samples as locally
# usage: bisect_git.sh MOETUNE SOURCE_DIR [quick]
# quick (the sanitizer build): cases 1, 3 and 6 only; the others run the same
# code paths again at more cost (the optimized build runs them all)
set -u
MOETUNE=$1
SRC=$2
QUICK=${3:-}
full() { [ "$QUICK" != quick ]; }
CONTRACT=$SRC/tests/contracts/bisect-small.cfg
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
check() { # check NAME COND...
  local name=$1; shift
  if "$@"; then echo "ok: $name"; else echo "FAIL: $name"; fail=1; fi
}
json() { # json FILE PYTHON-EXPRESSION (j is the document)
  python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print($2)" "$1"
}

# mk_repo DIR SPEC: SPEC is "index=slowdown ..." (from that commit on) and
# "index:skip" / "index:fail" (that commit's build exits 125 / 1)
mk_repo() {
  local dir=$1 spec=$2 i s k v
  mkdir -p "$dir" && git -C "$dir" init -q
  git -C "$dir" config user.email bisect@test
  git -C "$dir" config user.name bisect
  s=1.0
  for i in $(seq 0 63); do
    for k in $spec; do
      case $k in
        "$i="*) v=${k#*=}; s=$(python3 -c "print(round($s*$v, 6))") ;;
      esac
    done
    printf 'commit = c%02d\nslowdown = %s\n' "$i" "$s" >"$dir/stack.cfg"
    for k in $spec; do # "index+key": the stack sets key = 1 from that commit on
      case $k in *+*) [ "$i" -ge "${k%%+*}" ] && echo "${k#*+} = 1" >>"$dir/stack.cfg" ;; esac
    done
    rm -f "$dir/BROKEN" "$dir/FAILS"
    for k in $spec; do
      [ "$k" = "$i:skip" ] && touch "$dir/BROKEN"
      [ "$k" = "$i:fail" ] && touch "$dir/FAILS"
    done
    cat >"$dir/build.sh" <<'EOF'
#!/bin/sh
# the "build" of this revision: 125 when it cannot be built (skip), 1 when it fails
[ -f BROKEN ] && { echo "this revision does not build (skip)" >&2; exit 125; }
[ -f FAILS ] && { echo "build failed: undefined reference" >&2; exit 1; }
exit 0
EOF
    chmod +x "$dir/build.sh"
    git -C "$dir" add -A
    git -C "$dir" commit -qm "commit $i"
  done
}
rev() { git -C "$1" rev-list --first-parent --reverse HEAD | sed -n "$(($2 + 1))p"; }
PREP=(--prepare 'git clone -q {repo} {work}' --prepare 'git -C {work} checkout -q {rev}'
      --prepare '{work}/build.sh')

# 1. one 3% regression at commit 37
mk_repo "$T/r1" "37=1.03"
"$MOETUNE" bisect "$CONTRACT" --repo "$T/r1" --good "$(rev "$T/r1" 0)" --bad "$(rev "$T/r1" 63)" \
  --dir "$T/b1" "${PREP[@]}" --quiet >"$T/out1" 2>"$T/err1"
rc=$?
cat "$T/out1"
check "one regression: exit 0" [ "$rc" = 0 ]
check "one regression: the culprit is commit 37" \
  [ "$(json "$T/b1/bisect.json" "[c['index'] for c in j['culprits']]")" = "[37]" ]
check "one regression: named by its hash" \
  [ "$(json "$T/b1/bisect.json" "j['culprits'][0]['revision']")" = "$(rev "$T/r1" 37)" ]
check "one regression: the step's interval holds 3%" \
  python3 -c "import json,sys; c=json.load(open(sys.argv[1]))['culprits'][0]; sys.exit(0 if c['ci_lo'] < 0.03 < c['ci_hi'] + 0.01 and c['effect'] > 0.015 else 1)" "$T/b1/bisect.json"
check "one regression: the culprit carries its wall diagnosis (a profiled pair)" \
  python3 -c "import json,sys; d=json.load(open(sys.argv[1]))['culprits'][0]['diagnosis']; sys.exit(0 if d['wall'] in ('memory','communication','host','compute') and d['before']['wall'] and d['after']['wall'] and 'change_points' in d else 1)" "$T/b1/bisect.json"
runs1=$(json "$T/b1/bisect.json" "j['runs']")
check "one regression: under 12 x log2(64) = 72 runs ($runs1)" [ "$runs1" -lt 72 ]
check "one regression: every measured revision has samples and a verdict" \
  python3 -c "import json,sys; m=json.load(open(sys.argv[1]))['measured']; sys.exit(0 if len(m) >= 4 and all(x['samples_ms'] and x['verdict'] in ('good','bad') for x in m) else 1)" "$T/b1/bisect.json"
check "one regression: bisect.html plots step time against revision" \
  grep -q '<svg' "$T/b1/bisect.html"
check "one regression: a prepare step ran once per revision" \
  [ "$(ls -d "$T"/b1/work/*.prepared | wc -l)" = "$(json "$T/b1/bisect.json" "len(j['measured'])")" ]

if full; then
# 2. kill -9 part way, then the same command again
"$MOETUNE" bisect "$CONTRACT" --repo "$T/r1" --good "$(rev "$T/r1" 0)" --bad "$(rev "$T/r1" 63)" \
  --dir "$T/b2" "${PREP[@]}" >/dev/null 2>"$T/err2" &
pid=$!
for _ in $(seq 1 200); do
  n=$(grep -c "replicate" "$T/err2" 2>/dev/null || true)
  [ "${n:-0}" -ge 25 ] && break
  sleep 0.02
done
kill -9 $pid 2>/dev/null
wait $pid 2>/dev/null
before=$(grep -c "replicate" "$T/err2")
"$MOETUNE" bisect "$CONTRACT" --repo "$T/r1" --good "$(rev "$T/r1" 0)" --bad "$(rev "$T/r1" 63)" \
  --dir "$T/b2" "${PREP[@]}" >"$T/out2" 2>"$T/err2b"
rc=$?
check "resume: killed after $before runs, exit 0 on the second run" [ "$rc" = 0 ]
check "resume: the same culprit" \
  [ "$(json "$T/b2/bisect.json" "[c['index'] for c in j['culprits']]")" = "[37]" ]
check "resume: the same total runs as the uninterrupted bisection" \
  [ "$(json "$T/b2/bisect.json" "j['runs']")" = "$runs1" ]
# a batch's results are stored before they are printed, so a kill can fall
# between the two: at least the $before printed runs come back from the store
stored=$(grep -c "(from the store)" "$T/err2b")
check "resume: the $before finished runs came from the store ($stored)" [ "$stored" -ge "$before" ]
check "resume: only the runs not in the store were executed again" \
  python3 -c "import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if j['runs_executed'] == j['runs'] - $stored else 1)" "$T/b2/bisect.json"
check "resume: the same samples as the uninterrupted bisection" \
  [ "$(json "$T/b2/bisect.json" "[x['samples_ms'] for x in j['measured']]")" = \
    "$(json "$T/b1/bisect.json" "[x['samples_ms'] for x in j['measured']]")" ]

fi

# 3. commits 35, 36, 38, 39 cannot be built (125), 37 fails to build (1):
#    the culprit 37 lies in the untestable range 35..40; revisions from a file
mk_repo "$T/r3" "37=1.03 35:skip 36:skip 37:fail 38:skip 39:skip"
git -C "$T/r3" rev-list --first-parent --reverse HEAD >"$T/revs3"
"$MOETUNE" bisect "$CONTRACT" --revs "$T/revs3" --good "$(rev "$T/r3" 0)" --bad "$(rev "$T/r3" 63)" \
  --dir "$T/b3" --prepare "git clone -q $T/r3 {work}" --prepare 'git -C {work} checkout -q {rev}' \
  --prepare '{work}/build.sh' --quiet >"$T/out3" 2>"$T/err3"
rc=$?
cat "$T/out3"
check "skipped range: exit 0" [ "$rc" = 0 ]
check "skipped range: the culprit is one of commits 35..40" \
  [ "$(json "$T/b3/bisect.json" "[(j['culprits'][0]['exact'], len(j['culprits'][0]['candidates']), j['culprits'][0]['index'])]")" = "[(False, 6, 40)]" ]
check "skipped range: the candidates are commits 35..40" \
  [ "$(json "$T/b3/bisect.json" "j['culprits'][0]['candidates'][0]")" = "$(rev "$T/r3" 35)" ]
check "skipped range: a build failure is a typed outcome, not a skip" \
  python3 -c "import json,sys; m={x['index']: x for x in json.load(open(sys.argv[1]))['measured']}; sys.exit(0 if all(m[i]['verdict']=='skip' for i in m if i in (35,36,38,39)) and any(m[i]['verdict']=='failed' and m[i]['outcome']=='prepare_failed' and 'undefined reference' in m[i]['evidence'] for i in m) else 1)" "$T/b3/bisect.json"

if full; then
# 4. no regression
mk_repo "$T/r4" ""
"$MOETUNE" bisect "$CONTRACT" --repo "$T/r4" --good "$(rev "$T/r4" 0)" --bad "$(rev "$T/r4" 63)" \
  --dir "$T/b4" "${PREP[@]}" --quiet >"$T/out4" 2>"$T/err4"
rc=$?
cat "$T/out4"
check "no regression: exit 3" [ "$rc" = 3 ]
check "no regression: says it does not reproduce, with the figures" \
  grep -q "does not reproduce: the bad end is .*%.*CI" "$T/out4"
check "no regression: outcome not_reproduced, no culprit" \
  [ "$(json "$T/b4/bisect.json" "(j['outcome'], j['culprits'])")" = "('not_reproduced', [])" ]

# 5. two regressions (3% at 20, 3% more at 45)
mk_repo "$T/r5" "20=1.03 45=1.03"
"$MOETUNE" bisect "$CONTRACT" --repo "$T/r5" --good "$(rev "$T/r5" 0)" --bad "$(rev "$T/r5" 63)" \
  --dir "$T/b5" "${PREP[@]}" --quiet >"$T/out5" 2>"$T/err5"
rc=$?
cat "$T/out5"
check "two regressions: exit 0" [ "$rc" = 0 ]
check "two regressions: both found, or the second's range reported" \
  python3 -c "
import json, re, sys
j = json.load(open(sys.argv[1]))
found = sorted(c['index'] for c in j['culprits'])
if found == [20, 45]:
    sys.exit(0)
ranges = [tuple(map(int, m)) for n in j['notes'] for m in re.findall(r'#(\d+)\.\.#(\d+)', n)]
missing = [x for x in (20, 45) if x not in found]
sys.exit(0 if len(found) >= 1 and all(any(a <= x <= b for a, b in ranges) for x in missing) else 1)" "$T/b5/bisect.json"

fi

if full; then
# 7. through two ZeroMQ workers with CURVE keys: the same samples and culprit
#    as case 1 (the prepare programs on the workers' allowlists)
PORT=$(python3 -c "import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
"$MOETUNE" keygen "$T/keys" coordinator >/dev/null && mkdir -p "$T/keys/workers"
SIM=$(cd "$(dirname "$MOETUNE")" && pwd)/moetune-sim
for w in w1 w2; do
  "$MOETUNE" keygen "$T/wkeys" $w >/dev/null && cp "$T/wkeys/$w.pub" "$T/keys/workers/"
  "$MOETUNE" worker --connect tcp://127.0.0.1:$PORT --name $w --dir "$T/wd-$w" --allow "$SIM" \
    --allow git --allow build.sh --key "$T/wkeys/$w" --server-key "$T/keys/coordinator.pub" \
    >"$T/$w.log" 2>&1 &
done
"$MOETUNE" bisect "$CONTRACT" --repo "$T/r1" --good "$(rev "$T/r1" 0)" --bad "$(rev "$T/r1" 63)" \
  --dir "$T/b9" "${PREP[@]}" --workers tcp://127.0.0.1:$PORT --keys "$T/keys" --worker-wait 30 \
  --quiet >"$T/outw" 2>"$T/errw"
rc=$?
[ "$rc" = 0 ] || { cat "$T/errw" "$T/w1.log"; }
(exit $rc)
rc=$?
wait
check "workers: exit 0" [ "$rc" = 0 ]
check "workers: the same culprit and samples as the local executor" \
  [ "$(json "$T/b9/bisect.json" "([c['index'] for c in j['culprits']], [x['samples_ms'] for x in j['measured']])")" = \
    "$(json "$T/b1/bisect.json" "([c['index'] for c in j['culprits']], [x['samples_ms'] for x in j['measured']])")" ]
check "workers: both ran jobs, each revision prepared on the worker" \
  bash -c "grep -q 'running job/bisect/' '$T/w1.log' && grep -q 'running job/bisect/' '$T/w2.log' && ls '$T'/wd-w1/work/*.prepared >/dev/null"

fi

# 8. a stack change that slows communication: from commit 29 on the stack is
#    built without HybridEP, so the flex dispatcher falls back to alltoall;
#    the culprit's wall diagnosis names communication with the kernel evidence
mk_repo "$T/r8" "29+no_hybridep"
"$MOETUNE" bisect "$SRC/tests/contracts/bisect-small-hybridep.cfg" --repo "$T/r8" \
  --good "$(rev "$T/r8" 0)" --bad "$(rev "$T/r8" 63)" --dir "$T/b10" "${PREP[@]}" --quiet \
  >"$T/out8" 2>"$T/err8"
rc=$?
cat "$T/out8"
check "stack regression: exit 0, the culprit is commit 29" \
  [ "$rc:$(json "$T/b10/bisect.json" "[c['index'] for c in j['culprits']]")" = "0:[29]" ]
check "stack regression: the wall is communication, HybridEP's kernels replaced by NCCL all-to-all" \
  python3 -c "import json,sys; d=json.load(open(sys.argv[1]))['culprits'][0]['diagnosis']; ev=' '.join(d['evidence']); sys.exit(0 if d['wall']=='communication' and 'trace.hybridep_kernels' in ev and '-> 0' in ev and 'trace.alltoall_kernels: 0 ->' in ev else 1)" "$T/b10/bisect.json"
check "stack regression: stdout names the wall" grep -q "wall of .*: communication: .*exposed communication" "$T/out8"

# 6. bad input: each refused with exit 2 and its own words
# refused NAME PATTERN ARGS...: moetune bisect ARGS exits 2 and says PATTERN
refused() {
  local name=$1 pattern=$2 rc
  shift 2
  "$MOETUNE" bisect "$CONTRACT" "$@" --quiet >/dev/null 2>"$T/refused"
  rc=$?
  check "bad input: $name" bash -c "[ $rc = 2 ] && grep -q '$pattern' '$T/refused'"
}
refused "an unknown revision is exit 2, named" 'nosuchrev is not a commit' \
  --repo "$T/r1" --good nosuchrev --bad "$(rev "$T/r1" 63)" --dir "$T/b6"
refused "good after bad is exit 2" 'not an ancestor' \
  --repo "$T/r1" --good "$(rev "$T/r1" 40)" --bad "$(rev "$T/r1" 3)" --dir "$T/b7"
refused "an unterminated quote in a prepare step is exit 2" 'unterminated' \
  --repo "$T/r1" --good "$(rev "$T/r1" 0)" --bad "$(rev "$T/r1" 63)" --dir "$T/b8" \
  --prepare "git clone '{repo} {work}"
refused "an unknown placeholder is exit 2, named" 'unknown placeholder' \
  --repo "$T/r1" --good "$(rev "$T/r1" 0)" --bad "$(rev "$T/r1" 63)" --dir "$T/b8" \
  --prepare "make -C {wrk}"
refused "a directory of another bisection is refused" 'other revisions' \
  --repo "$T/r3" --good "$(rev "$T/r3" 0)" --bad "$(rev "$T/r3" 63)" --dir "$T/b1"
exit $fail
