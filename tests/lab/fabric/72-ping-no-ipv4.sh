# lab-nodes: 2
# nccl-wrap ping with one rail of the listener without its IPv4 address: node 0's rail 1 (eth2,
# rxe1) is up with no address, so rxe1 has no RoCE v2 IPv4 GID and the plan leaves it out
# (NCCL would fall back to the link-local GID 0). Node 1 offers both rails. Rail 0 passes; rail
# 1 has no partner: `no-port` on both ends (the client: its rail 1 has no partner at the peer;
# the listener: the peer's rail 1 has no partner, rxe1 not used here, naming eth2's missing
# address); exit 1 on both.
. /lab/fabric/lib.sh

require "rail 0 up with rxe0" fab_rail 0
if [ "$LAB_NODE" = 0 ]; then
    require "rail 1 up with rxe1, no IPv4 address" fab_rail 1 1500 noaddr
else
    require "rail 1 up with rxe1" fab_rail 1
fi
require "both nodes have their rails" fab_barrier rails

ping_pair 0 1 noip 18515 "$FAB_CLIENT_TIMEOUT"
assert_eq "ping exit" 1 "$RC"
assert_eq "summary: pairs failed exit" "2 1 1" "$(pj_summary "$OUT")"
l0=$(pj_pair "$OUT" 0)
l1=$(pj_pair "$OUT" 1)
assert_eq "pair 0 (rail 0) status" pass "$(pj_status "$l0")"
assert_eq "pair 1 (rail 1) status" fail "$(pj_status "$l1")"
assert_eq "pair 1 (rail 1) cause" no-port "$(pj_cause "$l1")"
s1=$(pj_summary_of "$l1")
if [ "$LAB_NODE" = 1 ]; then
    assert "client: rail 1 has no partner at the peer" has "$s1" '^rail 1 (rxe1:1) has no partner: the peer offers 1 usable port(s), this end 2'
else
    assert "listener: the peer's rail 1 has no partner here" has "$s1" "^the peer's rail 1 (rxe1:1) has no partner here"
    assert "listener: rxe1 not used for want of an IPv4 GID on eth2" has "$s1" 'rxe1:1 is not used here: no usable RoCE v2 IPv4 GID.*eth2'
fi
finish "exit $RC: pair 0 $(pj_status "$l0"); pair 1 $(pj_cause "$l1"): $s1"
