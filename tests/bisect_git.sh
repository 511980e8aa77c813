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
#   8. a stack that drops HybridEP from commit 29: diagnosed as communication
#   9. stacks as revisions: container tags in a revisions file, the image
#      named by launch.srun.container_image = "...:{rev}" (a stand-in srun
#      playing pyxis), the slower tag found; bad tags and placeholders
#      refused; then through a worker whose launchers include srun
# usage: bisect_git.sh MOETUNE SOURCE_DIR [quick]
# quick (the sanitizer build): cases 1, 3, 6, 8 and 9 only; the others run the same
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
# a failed bisection may leave its workers waiting: the check fails, not hangs
[ "$rc" = 0 ] || { cat "$T/errw" "$T/w1.log"; kill $(jobs -p) 2>/dev/null; }
wait
check "workers: exit 0" [ "$rc" = 0 ]
check "workers: the same culprit and samples as the local executor" \
  [ "$(json "$T/b9/bisect.json" "([c['index'] for c in j['culprits']], [x['samples_ms'] for x in j['measured']])")" = \
    "$(json "$T/b1/bisect.json" "([c['index'] for c in j['culprits']], [x['samples_ms'] for x in j['measured']])")" ]
check "workers: both ran jobs, each revision prepared on the worker" \
  bash -c "grep -q 'running job/bisect/' '$T/w1.log' && grep -q 'running job/bisect/' '$T/w2.log' && ls '$T'/wd-w1/work/*.prepared >/dev/null"

fi

# 7b. dispatch matches the prepare programs: a worker whose allowlist lacks
#     git gets no bisect job; the bisection says why, and nothing runs
PORT=$(python3 -c "import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
SIM=$(cd "$(dirname "$MOETUNE")" && pwd)/moetune-sim
# the bisection binds first: a worker started before it would be in its
# reconnect back-off (0.5 s doubling) and might miss the wait
"$MOETUNE" bisect "$CONTRACT" --repo "$T/r1" --good "$(rev "$T/r1" 0)" --bad "$(rev "$T/r1" 63)" \
  --dir "$T/b9n" "${PREP[@]}" --workers tcp://127.0.0.1:$PORT --worker-wait 10 --quiet \
  >"$T/outn" 2>"$T/errn" &
BIS=$!
"$MOETUNE" worker --connect tcp://127.0.0.1:$PORT --name nogit --dir "$T/wd-nogit" --allow "$SIM" \
  --idle-exit 30 >"$T/nogit.log" 2>&1 &
NOGIT=$!
wait $BIS
rc=$?
kill $NOGIT 2>/dev/null; wait $NOGIT 2>/dev/null
check "workers: a worker without the prepare program git gets no job, and the bisection says so" \
  bash -c "[ $rc != 0 ] && grep -q 'it does not offer the prepare program git' '$T/errn' && ! grep -q 'running job/' '$T/nogit.log'"

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

# 9. stacks as revisions: the revisions file lists container tags, not
#    commits, and the contract's launch.srun.container_image is
#    "nvcr.io#nvidia/nemo:{rev}".  A stand-in srun on PATH plays pyxis: it
#    records its argv and runs the task in the image it was asked for, i.e.
#    hands the sim that image's stack file ($T/images/IMAGE/stack.cfg); an
#    image it does not have is an error.  From tag 25.07 on the images'
#    stack is built without HybridEP.  Nothing but the container setting
#    names the tag, so the bisection finds 25.07 only if each run's image
#    carries its revision.
TAGS="24.11 24.12 25.01 25.02 25.04 25.05 25.06 25.07 25.08 25.09 25.10 25.11"
: >"$T/tags"
i=0
for t in $TAGS; do
  echo "$t" >>"$T/tags"
  mkdir -p "$T/images/nvcr.io#nvidia/nemo:$t"
  printf 'commit = ngc-%s\nslowdown = 1.0\n' "$t" >"$T/images/nvcr.io#nvidia/nemo:$t/stack.cfg"
  [ $i -ge 7 ] && echo "no_hybridep = 1" >>"$T/images/nvcr.io#nvidia/nemo:$t/stack.cfg"
  i=$((i + 1))
done
mkdir -p "$T/pyxis"
{
  echo '#!/bin/bash'
  echo '# stand-in for srun with pyxis (tests/bisect_git.sh case 9)'
  echo "log=$T/srun.argv images=$T/images"
  cat <<'PYXIS'
echo "$*" >>"$log"
image=
while [ $# -gt 0 ]; do
  case $1 in --container-image=*) image=${1#--container-image=} ;; -*) ;; *) break ;; esac
  shift
done
[ -n "$image" ] || { echo "pyxis stand-in: no --container-image" >&2; exit 1; }
[ -f "$images/$image/stack.cfg" ] || { echo "pyxis: image $image not found" >&2; exit 1; }
MOETUNE_SIM_STACK="$images/$image/stack.cfg" exec "$@"
PYXIS
} >"$T/pyxis/srun"
chmod +x "$T/pyxis/srun"
CCONTRACT=$SRC/tests/contracts/bisect-small-container.cfg
PATH="$T/pyxis:$PATH" "$MOETUNE" bisect "$CCONTRACT" --revs "$T/tags" --good 24.11 --bad 25.11 \
  --dir "$T/b11" --quiet >"$T/out9" 2>"$T/err9"
rc=$?
cat "$T/out9"
[ "$rc" = 0 ] || tail -5 "$T/err9"
check "container tags: exit 0, the culprit is the tag 25.07, exact" \
  [ "$rc:$(json "$T/b11/bisect.json" "[(c['revision'], c['exact'], c['parent']) for c in j['culprits']]")" = "0:[('25.07', True, '25.06')]" ]
check "container tags: the source is the file, its revisions the 12 tags" \
  [ "$(json "$T/b11/bisect.json" "(j['source'], j['revisions'], j['good'], j['bad'])")" = "('file', 12, '24.11', '25.11')" ]
check "container tags: every srun carried --container-image=nvcr.io#nvidia/nemo:TAG of a listed tag" \
  python3 -c "
import sys
tags = set(sys.argv[2].split())
lines = open(sys.argv[1]).read().splitlines()
imgs = [[w for w in l.split() if w.startswith('--container-image=')] for l in lines]
sys.exit(0 if lines and all(len(i) == 1 and i[0].startswith('--container-image=nvcr.io#nvidia/nemo:') and i[0].split(':', 1)[1] in tags for i in imgs) else 1)" "$T/srun.argv" "$TAGS"
check "container tags: each measured tag ran in its own image (the images srun saw are the tags measured)" \
  python3 -c "
import json, sys
seen = sorted({w.split(':', 1)[1] for l in open(sys.argv[1]) for w in l.split() if w.startswith('--container-image=')})
measured = sorted(x['revision'] for x in json.load(open(sys.argv[2]))['measured'])
sys.exit(0 if seen == measured and '25.07' in seen and '25.06' in seen else 1)" "$T/srun.argv" "$T/b11/bisect.json"
check "container tags: the culprit's wall is communication, HybridEP replaced by NCCL all-to-all" \
  python3 -c "import json,sys; d=json.load(open(sys.argv[1]))['culprits'][0]['diagnosis']; ev=' '.join(d['evidence']); sys.exit(0 if d['wall']=='communication' and 'trace.alltoall_kernels: 0 ->' in ev else 1)" "$T/b11/bisect.json"
check "container tags: stdout names the tag" grep -q "25\.07" "$T/out9"
# bad input of a stack bisection: each refused with exit 2, naming where and what
printf '24.11\n25.01;reboot\n25.11\n' >"$T/tags-bad"
PATH="$T/pyxis:$PATH" "$MOETUNE" bisect "$CCONTRACT" --revs "$T/tags-bad" --good 24.11 --bad 25.11 \
  --dir "$T/b12" --quiet >/dev/null 2>"$T/err9b"
rc=$?
check "container tags: a tag with ';' is exit 2, naming the file's line and the character" \
  bash -c "[ $rc = 2 ] && grep -q 'tags-bad:2' '$T/err9b' && grep -q \"has ';' at character 6\" '$T/err9b'"
printf '24.11\n--help\n25.11\n' >"$T/tags-opt"
PATH="$T/pyxis:$PATH" "$MOETUNE" bisect "$CCONTRACT" --revs "$T/tags-opt" --good 24.11 --bad 25.11 \
  --dir "$T/b13" --quiet >/dev/null 2>"$T/err9c"
rc=$?
check "container tags: a revision starting with '-' is exit 2, named" \
  bash -c "[ $rc = 2 ] && grep -q 'tags-opt:2' '$T/err9c' && grep -q \"starts with '-'\" '$T/err9c'"
sed 's/nemo:{rev}/nemo:{tag}/' "$CCONTRACT" >"$T/container-tag.cfg"
"$MOETUNE" check "$T/container-tag.cfg" >/dev/null 2>"$T/err9d"
rc=$?
check "container tags: an unknown placeholder in container_image is exit 2, naming the setting" \
  bash -c "[ $rc = 2 ] && grep -q 'launch.srun.container_image' '$T/err9d' && grep -q \"unknown placeholder '{tag}'\" '$T/err9d'"
"$MOETUNE" check "$CCONTRACT" >"$T/out9e" 2>&1
rc=$?
check "container tags: check passes the contract and says only bisect fills {rev} there" \
  bash -c "[ $rc = 0 ] && grep -q 'launch.srun: a container setting names {rev}' '$T/out9e'"
: >"$T/srun.argv"
PATH="$T/pyxis:$PATH" "$MOETUNE" tune "$CCONTRACT" --dir "$T/t9" --quiet >/dev/null 2>"$T/err9f"
rc=$?
check "container tags: tune refuses the contract (exit 2) before any run, naming the container setting" \
  bash -c "[ $rc = 2 ] && grep -q 'launch.srun container setting names {rev}' '$T/err9f' && [ ! -s '$T/srun.argv' ]"
"$MOETUNE" render "$CCONTRACT" --format launch >/dev/null 2>"$T/err9g"
rc=$?
check "container tags: render --format launch refuses {rev} outside a bisection, naming the setting" \
  bash -c "[ $rc = 2 ] && grep -q 'launch.srun.container_image' '$T/err9g' && grep -q 'only .moetune bisect. fills' '$T/err9g'"
"$MOETUNE" bisect "$CCONTRACT" --good-config "$SRC/tests/contracts/bisect-config-good.cfg" \
  --bad-config "$SRC/tests/contracts/bisect-config-bad.cfg" --dir "$T/b14" --quiet >/dev/null 2>"$T/err9h"
rc=$?
check "container tags: a config bisection refuses {rev} in the container (one stack), exit 2" \
  bash -c "[ $rc = 2 ] && grep -q 'launch.srun: a container setting names {rev}' '$T/err9h' && [ ! -e '$T/b14/bisect.json' ]"

# 9h. {work} in the container settings: with a prepare step each revision
#     has its own work directory, and container_mounts = "{work}:/workspace"
#     mounts that directory (absolute, the one the prepare step wrote into)
sed 's|^\( *\)container_image = "nvcr.io#nvidia/nemo:{rev}";|&\n\1container_mounts = "{work}:/workspace";|' \
  "$CCONTRACT" >"$T/container-mounts.cfg"
printf '25.05\n25.06\n25.07\n25.08\n' >"$T/tags4"
: >"$T/srun.argv"
PATH="$T/pyxis:$PATH" "$MOETUNE" bisect "$T/container-mounts.cfg" --revs "$T/tags4" --good 25.05 \
  --bad 25.08 --prepare 'touch {work}/prepared-{rev}' --dir "$T/b16" --quiet >/dev/null 2>"$T/err9i"
rc=$?
check "container mounts: {work} is each revision's own prepared work directory, absolute" \
  python3 -c "
import os, sys
lines = open(sys.argv[1]).read().splitlines()
ok = bool(lines) and sys.argv[2] == '0'
for l in lines:
    words = l.split()
    img = [w.split(':', 1)[1] for w in words if w.startswith('--container-image=')]
    mnt = [w[len('--container-mounts='):] for w in words if w.startswith('--container-mounts=')]
    if len(img) != 1 or len(mnt) != 1 or not mnt[0].endswith(':/workspace'):
        ok = False
        continue
    src = mnt[0][:-len(':/workspace')]
    ok = ok and os.path.isabs(src) and '{' not in src and \
        os.path.exists(os.path.join(src, 'prepared-' + img[0]))
sys.exit(0 if ok else 1)" "$T/srun.argv" "$rc"

if full; then
# 9b. the same tags through a worker (CURVE) whose launchers include srun:
#     the worker substitutes {rev} in the container too, the same culprit
#     and samples as locally, every srun of the worker carrying a tag's image
PORT=$(python3 -c "import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
"$MOETUNE" keygen "$T/ckeys" coordinator >/dev/null && mkdir -p "$T/ckeys/workers"
SIM=$(cd "$(dirname "$MOETUNE")" && pwd)/moetune-sim
"$MOETUNE" keygen "$T/cwkeys" cw >/dev/null && cp "$T/cwkeys/cw.pub" "$T/ckeys/workers/"
: >"$T/srun.argv"
PATH="$T/pyxis:$PATH" "$MOETUNE" worker --connect tcp://127.0.0.1:$PORT --name cw --dir "$T/wd-cw" \
  --allow "$SIM" --launchers local,srun --key "$T/cwkeys/cw" --server-key "$T/ckeys/coordinator.pub" \
  >"$T/cw.log" 2>&1 &
CW=$!
"$MOETUNE" bisect "$CCONTRACT" --revs "$T/tags" --good 24.11 --bad 25.11 --dir "$T/b15" \
  --workers tcp://127.0.0.1:$PORT --keys "$T/ckeys" --worker-wait 30 --quiet >"$T/out9w" 2>"$T/err9w"
rc=$?
# a failed bisection may leave the worker waiting: the check fails, not hangs
[ "$rc" = 0 ] || { tail -5 "$T/err9w" "$T/cw.log"; kill $CW 2>/dev/null; }
wait
check "container tags, worker: exit 0, the same culprit and samples as locally" \
  [ "$rc:$(json "$T/b15/bisect.json" "([c['revision'] for c in j['culprits']], [x['samples_ms'] for x in j['measured']])")" = \
    "0:$(json "$T/b11/bisect.json" "([c['revision'] for c in j['culprits']], [x['samples_ms'] for x in j['measured']])")" ]
check "container tags, worker: the worker's sruns carried the measured tags' images" \
  python3 -c "
import json, sys
seen = sorted({w.split(':', 1)[1] for l in open(sys.argv[1]) for w in l.split() if w.startswith('--container-image=nvcr.io#nvidia/nemo:')})
measured = sorted(x['revision'] for x in json.load(open(sys.argv[2]))['measured'])
sys.exit(0 if seen == measured else 1)" "$T/srun.argv" "$T/b15/bisect.json"
fi

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
