# NCCL_IB_HCA lists devices in natural name order (rxe2 before rxe10, where plain string order
# would put rxe10 first), each exact thanks to the leading `=` (without it, rxe1 would also match
# rxe10..rxe19 as a prefix).
. "$(dirname "$0")/lib.sh"

require "rxe10 on veth0" lab_veth_rxe veth0 veth1 rxe10 10.45.0.1 10.45.0.2
require "rxe2 on veth2" lab_veth_rxe veth2 veth3 rxe2 10.45.1.1 10.45.1.2

wrap env
assert_eq "env exit" 0 "$WRAP_RC"
assert_eq "NCCL_IB_HCA" "=rxe2:1,rxe10:1" "$(plan_var NCCL_IB_HCA)"
assert_eq "NCCL_IB_GID_INDEX" "1" "$(plan_var NCCL_IB_GID_INDEX)"
finish "=rxe2:1,rxe10:1 in natural order"
