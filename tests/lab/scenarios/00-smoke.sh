# Proves the Soft-RoCE stack itself, without nccl-wrap: rxe on a veth, ACTIVE RoCE v2 port with
# the IPv4-mapped GID at index 1, the uverbs node, and (with the userspace verbs tools) a real RC
# ping-pong between two QPs over the veth pair.
. "$(dirname "$0")/lib.sh"

require "rdma_rxe module is loaded" test -d /sys/module/rdma_rxe
require "veth pair + rxe0 on veth0" lab_veth_rxe veth0 veth1 rxe0 10.10.0.1 10.10.0.2

p=/sys/class/infiniband/rxe0/ports/1
assert_eq "rxe0 port state" "4: ACTIVE" "$(cat $p/state)"
assert_eq "rxe0 phys_state" "5: LinkUp" "$(cat $p/phys_state)"
assert_eq "rxe0 link_layer" "Ethernet" "$(cat $p/link_layer)"
assert_eq "GID 1 (IPv4-mapped 10.10.0.1)" "0000:0000:0000:0000:0000:ffff:0a0a:0001" "$(cat $p/gids/1)"
assert_eq "GID 1 type" "RoCE v2" "$(cat $p/gid_attrs/types/1)"
assert_eq "GID 1 ndev" "veth0" "$(cat $p/gid_attrs/ndevs/1)"
assert "GID 0 is fe80 link-local" grep -q '^fe80:' $p/gids/0
assert "rdma link shows rxe0 ACTIVE on veth0" sh -c "$RDMA link show rxe0/1 | grep -q 'state ACTIVE.*netdev veth0'"
assert "/dev/infiniband/uverbs0 exists" test -c /dev/infiniband/uverbs0
assert_eq "uverbs0 belongs to" "rxe0" "$(cat /sys/class/infiniband_verbs/uverbs0/ibdev 2>/dev/null)"

if [ -x /usr/bin/ibv_devices ]; then
    assert "ibv_devices lists rxe0" sh -c 'ibv_devices | grep -q "rxe0"'
    # Server on the rxe0 side, client connects over the peer's address; GID index 1 = RoCE v2 IPv4.
    ibv_rc_pingpong -d rxe0 -g 1 -n 100 >/tmp/pp-server.log 2>&1 &
    srv=$!
    sleep 1
    timeout 30 ibv_rc_pingpong -d rxe0 -g 1 -n 100 127.0.0.1 >/tmp/pp-client.log 2>&1
    crc=$?
    wait $srv
    src=$?
    sed 's/^/      server| /' /tmp/pp-server.log
    sed 's/^/      client| /' /tmp/pp-client.log
    assert_eq "ibv_rc_pingpong client exit" 0 "$crc"
    assert_eq "ibv_rc_pingpong server exit" 0 "$src"
    assert "ibv_rc_pingpong moved 100 iterations" grep -q '100 iters' /tmp/pp-client.log
    finish "rxe0 ACTIVE, GID1 RoCEv2 IPv4, uverbs0, ibv_rc_pingpong ok"
fi
finish "rxe0 ACTIVE, GID1 RoCEv2 IPv4, uverbs0 (no verbs tools in guest)"
