# lab-nodes: 2
# A rail without its IPv4 address: node 0's rail 0 is up with rxe0 but no address, so its GID
# table has no IPv4-mapped (RoCE v2 IPv4) entry, only the IPv6 link-local one. Shows the table
# (sysfs and ibv_devinfo -v), what a client asking for GID index 1 gets, and what nccl-wrap plans.
. /lab/fabric/lib.sh

if [ "$LAB_NODE" = 0 ]; then
    require "rail 0 up with rxe0, no IPv4 address" fab_rail 0 1500 noaddr
else
    require "rail 0 up with rxe0" fab_rail 0
fi
# The IPv6 link-local address (and with it GID 0) comes with the link; give it a moment.
n=0
while [ -z "$(gid_of rxe0 0 | grep '^fe80')" ] && [ "$n" -lt 50 ]; do usleep 100000; n=$((n + 1)); done
gid_table rxe0 >/tmp/fab.gids
say "GID table of rxe0 (index gid type ndev):"
sed 's/^/      gid| /' /tmp/fab.gids
ibv_devinfo -v -d rxe0 2>&1 | grep -i 'GID\[' | sed 's/^/      devinfo| /'
require "both nodes have their rails" fab_barrier rails

if [ "$LAB_NODE" = 1 ]; then
    assert "the peer has its IPv4 GID" grep -q "ffff:0a00:6402" /tmp/fab.gids
    fab_serve 0 x 18515 ibv_rc_pingpong -d rxe0 -g 1 -n 5 -p 18515
    finish "peer with IPv4 GID; server exit $SRV_RC${SRV_KILLED:+ (stopped)}: $(first_error /tmp/fab.x.srv)"
fi
assert "no IPv4-mapped GID on rxe0" sh -c '! grep -q "0000:0000:0000:0000:0000:ffff:" /tmp/fab.gids'
assert "GID 0 is the IPv6 link-local one" grep -q '^0 fe80:' /tmp/fab.gids
assert_eq "GID 1 unreadable or zero" "" "$(gid_of rxe0 1 | grep -v '^0000:0000:0000:0000:0000:0000:0000:0000$')"
cat /sys/class/infiniband/rxe0/ports/1/gids/1 >/tmp/fab.gid1 2>&1
say "cat gids/1: $(cat /tmp/fab.gid1)"
fab_client 1 x "$FAB_CLIENT_TIMEOUT" ibv_rc_pingpong -d rxe0 -g 1 -n 5 -p 18515 "$(pod_addr 1)"
assert "ibv_rc_pingpong -g 1 fails (exit $CLI_RC)" test "$CLI_RC" != 0
wrap env
hca=$(plan_var NCCL_IB_HCA)
gidx=$(plan_var NCCL_IB_GID_INDEX)
dis=$(plan_var NCCL_IB_DISABLE)
say "nccl-wrap env: NCCL_IB_HCA=$hca NCCL_IB_GID_INDEX=$gidx NCCL_IB_DISABLE=$dis"
finish "GIDs: $(awk '{printf "%s %s %s; ", $1, $2, $3}' /tmp/fab.gids)gids/1: $(cat /tmp/fab.gid1); ibv_rc_pingpong -g 1: exit $CLI_RC after ${CLI_SECS}s: $(first_error /tmp/fab.x.cli); nccl-wrap env: NCCL_IB_HCA=$hca NCCL_IB_GID_INDEX=$gidx NCCL_IB_DISABLE=$dis"
