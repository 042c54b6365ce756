# lab-nodes: 3
# The gate with --gate-prune over a rail that drops RoCE: node 1 drops UDP dport 4791 leaving
# eth1 (rail 0, as 79-gate-drop), NCCL_WRAP_PING_TIMEOUT_MS=6000. Rail 0's place is dropped on
# every node: every node starts the command (exit 0) with NCCL_IB_HCA naming rxe1 alone, where
# without the flag (79-gate-drop) every node refuses with 125; each says on stderr that rxe0:1 is
# dropped, naming --gate-prune; the verdict says go with the dropped place; no termination message.
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

_t0=$(now)
timeout "$FAB_CLIENT_TIMEOUT" $NCCL_WRAP --init --gate --gate-prune -- \
    sh -c 'echo "gate-started NCCL_IB_HCA=$NCCL_IB_HCA"' >/tmp/fab.prune.out 2>/tmp/fab.prune.err
RC=$?
SECS=$(since "$_t0")
say "gate: exit $RC after ${SECS}s"
grep -v '"kind":"pair"' /tmp/fab.prune.out | sed 's/^/      out| /' | head -n 6
grep -v '^nccl-wrap:   \|^nccl-wrap: set \|RLIMIT_MEMLOCK' /tmp/fab.prune.err | sed 's/^/      err| /' | head -n 20
assert_eq "gate exit" 0 "$RC"
assert "the command ran with rail 1 alone" grep -q '^gate-started NCCL_IB_HCA==rxe1:1$' /tmp/fab.prune.out
assert_eq "verdict: go" true "$(gv_field /tmp/fab.prune.out go)"
assert "verdict: rail 0's place dropped" grep -q '"dropped":\[{"position":0' /tmp/fab.prune.out
assert "rxe0:1 dropped, said on stderr" grep -q 'gate: --gate-prune: rxe0:1 (rail 1 of 2) is dropped here' /tmp/fab.prune.err
assert "no termination message" test ! -e /tmp/fab.gate.term
finish "exit $RC after ${SECS}s; NCCL_IB_HCA $(sed -n 's/^gate-started NCCL_IB_HCA=//p' /tmp/fab.prune.out)"
