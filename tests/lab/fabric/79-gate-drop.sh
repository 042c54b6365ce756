# lab-nodes: 3
# The gate over a rail that drops RoCE: node 1 drops UDP dport 4791 leaving eth1 (rail 0, as
# 74-ping-tc-drop). With NCCL_WRAP_PING_TIMEOUT_MS=6000 a pair through that rail ends in
# IBV_WC_RETRY_EXC_ERR after about 0.94 s. No node starts the command: every node exits 125, and
# its termination message names rank 1's rail rxe0:1 with cause retry-exceeded, the headline first.
. /lab/fabric/lib.sh

require "rail 0 up with rxe0" fab_rail 0
require "rail 1 up with rxe1" fab_rail 1
if [ "$LAB_NODE" = 1 ]; then
    require "tc clsact on eth1" $TC qdisc add dev eth1 clsact
    require "tc drop of UDP dport 4791 leaving eth1" $TC filter add dev eth1 egress protocol ip \
        flower ip_proto udp dst_port 4791 action drop
fi
gate_env 6000
require "every node has its rails, the drop in place" fab_barrier rails

gate_run gate
assert_eq "gate exit" 125 "$RC"
assert "the command did not run" sh -c '! grep -q gate-started /tmp/fab.gate.out'
assert_eq "verdict: go" false "$(gv_field /tmp/fab.gate.out go)"
assert "refusal named on stderr" grep -q 'refusing to start "sh": --gate (NCCL_WRAP_GATE) is set' /tmp/fab.gate.err
require "a termination message" test -s /tmp/fab.gate.term
sed 's/^/      term| /' /tmp/fab.gate.term | head -n 8
assert "termination message: the headline first" \
    sh -c 'head -n1 /tmp/fab.gate.term | grep -q "^nccl-wrap refused to start the command: gate: [0-9]* failure(s)"'
assert "termination message: rank 1's rail 0 and the cause" \
    grep -q 'node-1 (rank 1) rxe0:1 -> .*: retry-exceeded:\|-> node-1 (rank 1) rxe0:1: retry-exceeded:' /tmp/fab.gate.term
assert "termination message under 4096 bytes" test "$(wc -c </tmp/fab.gate.term)" -lt 4096
assert "rail 1 is not named" sh -c '! grep -q rxe1 /tmp/fab.gate.term'
finish "exit $RC after ${SECS}s: $(sed -n 2p /tmp/fab.gate.term | cut -c1-120)"
