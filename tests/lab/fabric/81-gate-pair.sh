# lab-nodes: 2
# The gate with two pods, as a PyTorchJob without torchrun's variables names them (RANK,
# WORLD_SIZE, MASTER_ADDR): one rail, the pair tested both ways. Healthy: both exit 0, the
# command runs, the verdict says go with 2 pairs. Then node 0 drops RoCE leaving eth1 (as
# 74-ping-tc-drop) and both run with --gate=warn: both report the failure and still start the
# command (exit 0), and write no termination message.
. /lab/fabric/lib.sh

require "rail 0 up with rxe0" fab_rail 0
gate_env 6000
unset PET_NODE_RANK PET_NNODES PET_MASTER_ADDR
export RANK=$LAB_NODE WORLD_SIZE=2 MASTER_ADDR=node-0 MASTER_PORT=29500
require "both nodes have their rail" fab_barrier rails

gate_run pair
assert_eq "healthy: exit" 0 "$RC"
assert "healthy: the command ran" grep -q '^gate-started$' /tmp/fab.pair.out
assert_eq "healthy: verdict go" true "$(gv_field /tmp/fab.pair.out go)"
assert_eq "healthy: pairs (both ways)" 2 "$(gv_field /tmp/fab.pair.out pairs)"
assert "healthy: the source is named" grep -q 'rank from RANK, size from WORLD_SIZE, coordinator from MASTER_ADDR' /tmp/fab.pair.err
healthy=$SECS

if [ "$LAB_NODE" = 0 ]; then
    require "tc clsact on eth1" $TC qdisc add dev eth1 clsact
    require "tc drop of UDP dport 4791 leaving eth1" $TC filter add dev eth1 egress protocol ip \
        flower ip_proto udp dst_port 4791 action drop
fi
require "the drop in place" fab_barrier drop

gate_run warn --gate=warn
assert_eq "warn: exit" 0 "$RC"
assert "warn: the command ran" grep -q '^gate-started$' /tmp/fab.warn.out
assert_eq "warn: verdict go" false "$(gv_field /tmp/fab.warn.out go)"
assert_eq "warn: verdict started" true "$(gv_field /tmp/fab.warn.out started)"
assert "warn: said so" grep -q 'gate: --gate=warn: starting the command anyway' /tmp/fab.warn.err
assert "warn: the failure named" grep -q 'gate: FAIL node-.* rxe0:1 -> node-.* rxe0:1: \(retry-exceeded\|timeout\):' /tmp/fab.warn.err
assert "warn: no termination message" test ! -e /tmp/fab.gate.term
finish "healthy pair exit 0 after ${healthy}s; dropped with --gate=warn: exit $RC after ${SECS}s, $(gv_field /tmp/fab.warn.out failed) failure(s) reported"
