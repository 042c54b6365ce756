# lab-nodes: 3
# The gate with a node that never comes: node 2 does not start nccl-wrap. Nodes 0 and 1 wait
# NCCL_WRAP_GATE_WAIT_MS=5000, then exit 125 naming rank 2 as missing, in the verdict and in the
# termination message, without running the command.
. /lab/fabric/lib.sh

require "rail 0 up with rxe0" fab_rail 0
gate_env
require "every node has its rail" fab_barrier rails
if [ "$LAB_NODE" = 2 ]; then
    finish "this node never comes"
fi

gate_run gate --gate-wait-ms=5000
assert_eq "gate exit" 125 "$RC"
assert "the command did not run" sh -c '! grep -q gate-started /tmp/fab.gate.out'
assert "the wait ended, not the scenario" awk -v s="$SECS" 'BEGIN{exit !(s >= 4.5 && s < 30)}'
require "a termination message" test -s /tmp/fab.gate.term
assert "termination message names rank 2" \
    grep -q '^nccl-wrap refused to start the command: gate: 1 of 3 pod(s) never joined within 5000 ms: rank(s) 2$' \
    /tmp/fab.gate.term
assert_eq "verdict: missing_total" 1 "$(gv_field /tmp/fab.gate.out missing_total)"
finish "exit $RC after ${SECS}s: $(head -n1 /tmp/fab.gate.term | cut -c1-120)"
