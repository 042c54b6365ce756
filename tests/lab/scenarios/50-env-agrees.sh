# `nccl-wrap env` is the plan; a run applies exactly that plan. Every variable `env` exports must
# reach the exec'd command with the same value (seen both by `env` and by /proc/self/environ),
# `env --json` carries the same values, and stdout of `env` holds nothing but the exports.
. "$(dirname "$0")/lib.sh"

require "rxe0 on veth0" lab_veth_rxe veth0 veth1 rxe0 10.60.0.1 10.60.0.2

wrap env
require "env exit 0" [ "$WRAP_RC" -eq 0 ]
cp "$OUT_FILE" /tmp/plan.sh
assert "env stdout is only export lines" sh -c "! grep -v \"^export [A-Za-z_][A-Za-z0-9_]*='\" /tmp/plan.sh"
names=$(sed -n 's/^export \([A-Za-z_][A-Za-z0-9_]*\)=.*/\1/p' /tmp/plan.sh)
assert "env exports NCCL_IB_HCA" sh -c "echo '$names' | grep -qx NCCL_IB_HCA"
assert "env exports NCCL_IB_GID_INDEX" sh -c "echo '$names' | grep -qx NCCL_IB_GID_INDEX"

wrap -- /bin/busybox env
require "exec (env) exit 0" [ "$WRAP_RC" -eq 0 ]
cp "$OUT_FILE" /tmp/exec-env.txt
assert "run: every stderr line is prefixed nccl-wrap:" sh -c "! grep -v -e '^nccl-wrap:' -e '^\$' '$ERR_FILE'"
"$NCCL_WRAP" -- /bin/cat /proc/self/environ 2>/dev/null | tr '\0' '\n' >/tmp/exec-environ.txt

wrap env --json
cp "$OUT_FILE" /tmp/plan.json
assert "env --json is a JSON object" sh -c "tr -d ' \n\t' </tmp/plan.json | grep -q '^{.*}\$'"

cp /tmp/plan.sh "$OUT_FILE"
for n in $names; do
    want=$(plan_var "$n")
    assert_eq "exec'd env $n" "$want" "$(exec_env_var "$n" /tmp/exec-env.txt)"
    assert_eq "exec'd /proc/self/environ $n" "$want" "$(exec_env_var "$n" /tmp/exec-environ.txt)"
    assert "env --json has $n" grep -q "\"$n\"" /tmp/plan.json
    assert "env --json has value of $n" grep -qF -- "$want" /tmp/plan.json
done
assert_eq "NCCL_IB_HCA" "=rxe0:1" "$(plan_var NCCL_IB_HCA)"
finish "env, env --json and the exec'd environment agree ($(echo $names | tr ' ' ','))"
