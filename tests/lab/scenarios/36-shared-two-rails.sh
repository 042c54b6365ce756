# Two shared rails, pods created in different orders on each, so one pod's own index differs per
# rail. NCCL_IB_GID_INDEX is one index for all ports: where the pod's addresses sit in a subnet of
# their own, NCCL_IB_ADDR_RANGE makes NCCL's rule land on them; where a neighbour's address in that
# range comes first on a rail, nothing is exported and a per-port warning gives the fix.
. "$(dirname "$0")/lib.sh"

require "rail 0: rxe0 on veth0" rxe_on rxe0 veth0
require "rail 1: rxe1 on veth2" rxe_on rxe1 veth2
# rail 0: A, B, E; rail 1: B, E, A.
require "A on rail 0" lab_shared_pod podA veth0 macvlan 10.9.0.51
require "B on rail 0" lab_shared_pod podB veth0 macvlan 10.10.0.52
require "E on rail 0" lab_shared_pod podE veth0 macvlan 10.9.0.61
require "B on rail 1" lab_shared_pod podB veth2 macvlan 10.10.1.52
require "E on rail 1" lab_shared_pod podE veth2 macvlan 10.9.1.61
require "A on rail 1" lab_shared_pod podA veth2 macvlan 10.9.1.51
require "entries" wait_gid rxe1 10.9.1.51
say "podB: rail 0 $(gid_index_of rxe0 10.10.0.52), rail 1 $(gid_index_of rxe1 10.10.1.52)"
say "podA: rail 0 $(gid_index_of rxe0 10.9.0.51), rail 1 $(gid_index_of rxe1 10.9.1.51)"

in_pod podB env
assert_eq "podB: NCCL_IB_HCA" "=rxe0:1,rxe1:1" "$(plan_var NCCL_IB_HCA)"
assert_eq "podB: no NCCL_IB_GID_INDEX (indices differ)" "<unset>" "$(plan_var NCCL_IB_GID_INDEX)"
assert_eq "podB: NCCL_IB_ADDR_RANGE holds its addresses only" "10.10.0.0/23" "$(plan_var NCCL_IB_ADDR_RANGE)"
in_pod podB doctor --no-selftest
assert_eq "podB: doctor exit" 0 "$WRAP_RC"
assert "podB: gid-owner passes on rail 1 through the range" grep -q "PASS.*gid-owner.*rxe1:1: NCCL's own rule within NCCL_IB_ADDR_RANGE=10.10.0.0/23 points at index $(gid_index_of rxe1 10.10.1.52): 10.10.1.52" "$OUT_FILE"

in_pod podA env
assert_eq "podA: no NCCL_IB_GID_INDEX" "<unset>" "$(plan_var NCCL_IB_GID_INDEX)"
assert_eq "podA: no NCCL_IB_ADDR_RANGE (10.9.1.61 of podE comes first in it on rail 1)" "<unset>" "$(plan_var NCCL_IB_ADDR_RANGE)"
assert "podA: the warning gives each port's own index and NCCL's" grep -q "rxe1:1: own index $(gid_index_of rxe1 10.9.1.51) (10.9.1.51), NCCL would take" "$ERR_FILE"
assert "podA: the warning gives the fix" grep -q "Fix: give each pod its rails in the same order" "$ERR_FILE"
in_pod podA doctor --no-selftest
assert_eq "podA: doctor exit (NCCL would take another pod's entry)" 1 "$WRAP_RC"
finish "per-rail orders: podB exports NCCL_IB_ADDR_RANGE=10.10.0.0/23, podA gets the per-port warning"
