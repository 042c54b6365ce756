# lab-nodes: 3
# nccl-wrap ping --ring over three nodes, two rails: every node runs
#   ping --ring --peer-template 'node-{index}' --index N --size 3 --json
# with node-0..node-2 in /etc/hosts (the pod addresses: the template is a host name, resolved by
# the C library). Each node listens on the ring port, tests its successor and prints two passing
# pairs (node_index N, peer_index N+1 mod 3, the successor's rail addresses as remote GIDs) and
# exits 0.
. /lab/fabric/lib.sh

require "rail 0 up with rxe0" fab_rail 0
require "rail 1 up with rxe1" fab_rail 1
for n in 0 1 2; do echo "$(pod_addr $n) node-$n"; done >>/etc/hosts
grep -q '^hosts:' /etc/nsswitch.conf 2>/dev/null || echo 'hosts: files dns' >>/etc/nsswitch.conf
require "every node has its rails" fab_barrier rails
next=$(next_node)

t0=$(now)
timeout "$FAB_CLIENT_TIMEOUT" $NCCL_WRAP ping --ring --peer-template 'node-{index}' --index "$LAB_NODE" \
    --size 3 --port 18515 --json $FAB_PING_ARGS >/tmp/fab.ring.out 2>/tmp/fab.ring.err
rc=$?
secs=$(since "$t0")
say "ring: exit $rc after ${secs}s"
sed 's/^/      out| /' /tmp/fab.ring.out | head -n 10
sed 's/^/      err| /' /tmp/fab.ring.err | head -n 10
assert_eq "ring exit" 0 "$rc"
assert_eq "summary: pairs failed exit" "2 0 0" "$(pj_summary /tmp/fab.ring.out)"
detail=
for r in 0 1; do
    l=$(pj_pair /tmp/fab.ring.out $r)
    assert_eq "edge $LAB_NODE->$next rail $r: status" pass "$(pj_status "$l")"
    assert "edge $LAB_NODE->$next rail $r: node_index $LAB_NODE, peer_index $next, peer node-$next" \
        has "$l" "\"node_index\":$LAB_NODE,\"peer_index\":$next,\"peer\":\"node-$next:18515\""
    want=$(gid_hex_of "$(rail_addr $r "$next")")
    assert "edge $LAB_NODE->$next rail $r: reached $(rail_addr $r "$next")" \
        has "$(pj_remote_gid "$l")" ":ffff:$want\$"
    assert "edge $LAB_NODE->$next rail $r: bandwidth > 0" positive "$(pj_gbps "$l")"
    detail="${detail}rail$r median $(pj_median "$l") us $(pj_gbps "$l") GB/s; "
done
finish "edge $LAB_NODE->$next exit $rc after ${secs}s: ${detail%; }"
