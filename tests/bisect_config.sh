#!/bin/bash
# moetune bisect --good-config/--bad-config: two contracts whose base
# configs differ in eight knobs (tests/contracts/bisect-config-*.cfg say
# which and why), measured by real sim processes at the default noise.
#   1. the dispatcher change is named alone, the EP size and the grad-reduce
#      overlap as a pair (each harmless alone, slower together), and nothing
#      else, within the run budget printed below
#   2. the repair of an illegal intermediate config is disclosed
#   3. the same command again: the same answer, nothing executed twice
#   4. bad input: a contract of another model, a missing --bad-config
# usage: bisect_config.sh MOETUNE SOURCE_DIR
set -u
MOETUNE=$1
SRC=$2
GOOD=$SRC/tests/contracts/bisect-config-good.cfg
BAD=$SRC/tests/contracts/bisect-config-bad.cfg
BUDGET=400
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
check() {
  local name=$1; shift
  if "$@"; then echo "ok: $name"; else echo "FAIL: $name"; fail=1; fi
}
json() { python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print($2)" "$1"; }

"$MOETUNE" bisect "$GOOD" --good-config "$GOOD" --bad-config "$BAD" --dir "$T/c1" --quiet \
  >"$T/out1" 2>"$T/err1"
rc=$?
cat "$T/out1"
check "config: exit 0" [ "$rc" = 0 ]
check "config: source config" [ "$(json "$T/c1/bisect.json" "j['source']")" = config ]
check "config: eight knobs in seven variables" \
  [ "$(json "$T/c1/bisect.json" "(len(j['config']['units']), sum(u['change'].count('->') for u in j['config']['units']))")" = "(7, 8)" ]
culprits=$(json "$T/c1/bisect.json" "sorted((c['kind'], tuple(u['variable'] for u in c['units'])) for c in j['config']['culprits'])")
check "config: exactly the dispatcher alone and grad_reduce_overlap + layout as a pair ($culprits)" \
  [ "$culprits" = "[('pair', ('grad_reduce_overlap', 'layout')), ('single', ('dispatcher',))]" ]
check "config: the pair is not slower alone, slower together" \
  python3 -c "import json,sys; c=[c for c in json.load(open(sys.argv[1]))['config']['culprits'] if c['kind']=='pair'][0]; sys.exit(0 if c['alone']['verdict']=='not slower' and c['partner_alone']['verdict']=='not slower' and c['together']['verdict']=='slower' and c['together']['effect'] > 0.01 else 1)" "$T/c1/bisect.json"
check "config: the dispatcher alone is at least 5% slower" \
  python3 -c "import json,sys; c=[c for c in json.load(open(sys.argv[1]))['config']['culprits'] if c['kind']=='single'][0]; sys.exit(0 if c['alone']['effect'] >= 0.05 else 1)" "$T/c1/bisect.json"
check "config: the dispatcher's wall is communication, HybridEP's kernels replaced by NCCL all-to-all" \
  python3 -c "import json,sys; c=[c for c in json.load(open(sys.argv[1]))['config']['culprits'] if c['kind']=='single'][0]['diagnosis']; ev=' '.join(c['evidence']); sys.exit(0 if c['wall']=='communication' and 'trace.hybridep_kernels: 96 -> 0' in ev and 'trace.alltoall_kernels: 0 -> 96' in ev and c['change_points']['communication'] > 5 else 1)" "$T/c1/bisect.json"
runs=$(json "$T/c1/bisect.json" "j['runs']")
executed=$(json "$T/c1/bisect.json" "j['runs_executed']")
echo "config bisection: $runs runs asked, $executed executed (budget $BUDGET)"
check "config: within the run budget ($executed executed <= $BUDGET)" [ "$executed" -le "$BUDGET" ]
check "config: the repair of the illegal prefix is disclosed" \
  python3 -c "import json,sys; p=json.load(open(sys.argv[1]))['config']['prefixes']; sys.exit(0 if any('overlap_param_gather=false' in x['repairs'] for x in p) else 1)" "$T/c1/bisect.json"
check "config: stdout names both culprits" \
  bash -c "grep -q 'config culprit (single): dispatcher' '$T/out1' && grep -q 'config culprit (pair): grad_reduce_overlap' '$T/out1'"

check "config: bisect.html lists the config culprits and the changes" \
  bash -c "grep -q '<h2>Config culprits</h2>' '$T/c1/bisect.html' && grep -q 'overlap_grad_reduce: true -&gt; false' '$T/c1/bisect.html' && grep -q 'trace.hybridep_kernels: 96 -&gt; 0' '$T/c1/bisect.html'"

# 3. again: everything from the store
"$MOETUNE" bisect "$GOOD" --good-config "$GOOD" --bad-config "$BAD" --dir "$T/c1" --quiet \
  >"$T/out2" 2>"$T/err2"
rc=$?
check "resume: exit 0, nothing executed again" \
  [ "$rc:$(json "$T/c1/bisect.json" "j['runs_executed']")" = "0:0" ]
check "resume: the same culprits" \
  [ "$(json "$T/c1/bisect.json" "sorted((c['kind'], tuple(u['variable'] for u in c['units'])) for c in j['config']['culprits'])")" = "$culprits" ]

# 4. bad input
sed 's/num_layers = 48;/num_layers = 24;/' "$BAD" >"$T/other.cfg"
"$MOETUNE" bisect "$GOOD" --good-config "$GOOD" --bad-config "$T/other.cfg" --dir "$T/c3" \
  --quiet >/dev/null 2>"$T/err3"
rc=$?
check "bad input: another model is exit 2, the field named" \
  bash -c "[ $rc = 2 ] && grep -q 'model.num_layers is 24 here and 48' '$T/err3'"
"$MOETUNE" bisect "$GOOD" --good-config "$GOOD" --dir "$T/c4" --quiet >/dev/null 2>"$T/err4"
rc=$?
check "bad input: --good-config without --bad-config is a usage error" \
  bash -c "[ $rc = 64 ] && grep -q 'go together' '$T/err4'"
exit $fail
