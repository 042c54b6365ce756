# Shared RDMA device, RoCE over ipvlan children (L2 mode: every child shares the parent's MAC, so
# link-local entries cannot tell pods apart; only addresses do). With and without the host's
# address on the parent.
. "$(dirname "$0")/lib.sh"

require "rxe0 on veth0, host address 10.9.4.1" rxe_on rxe0 veth0
$IP addr add 10.9.4.1/24 dev veth0
require "podA: ipvlan net1 10.9.4.51" lab_shared_pod podA veth0 ipvlan 10.9.4.51
require "podB: ipvlan net1 10.9.4.52" lab_shared_pod podB veth0 ipvlan 10.9.4.52
require "entries" wait_gid rxe0 10.9.4.52
ih=$(gid_index_of rxe0 10.9.4.1)
ia=$(gid_index_of rxe0 10.9.4.51)
ib=$(gid_index_of rxe0 10.9.4.52)
say "rxe0 table: host $ih, podA $ia, podB $ib"
for pod in podA podB; do
    in_pod $pod env
    want=$([ $pod = podA ] && echo "$ia" || echo "$ib")
    assert_eq "$pod: NCCL_IB_HCA" "=rxe0:1" "$(plan_var NCCL_IB_HCA)"
    assert_eq "$pod: NCCL_IB_GID_INDEX is its own entry, not the host's $ih" "$want" "$(plan_var NCCL_IB_GID_INDEX)"
done

require "rxe1 on veth2, no host address" rxe_on rxe1 veth2
require "podC: ipvlan net1 10.9.5.53" lab_shared_pod podC veth2 ipvlan 10.9.5.53
require "podD: ipvlan net1 10.9.5.54" lab_shared_pod podD veth2 ipvlan 10.9.5.54
require "entries" wait_gid rxe1 10.9.5.54
id=$(gid_index_of rxe1 10.9.5.54)
in_pod podD env
assert_eq "podD: NCCL_IB_HCA (rxe0 holds none of its addresses)" "=rxe1:1" "$(plan_var NCCL_IB_HCA)"
assert_eq "podD: NCCL_IB_GID_INDEX" "$id" "$(plan_var NCCL_IB_GID_INDEX)"
in_pod podD doctor --no-selftest
assert_eq "podD: doctor exit" 0 "$WRAP_RC"
finish "ipvlan pods get their own GID entries (host $ih, podA $ia, podB $ib; podD $id)"
