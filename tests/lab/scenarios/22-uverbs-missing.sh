# A device sysfs shows ACTIVE but whose /dev/infiniband/uverbsN is not in the container: ibverbs
# (and so NCCL) cannot open it. nccl-wrap must drop it with that reason instead of handing it to
# NCCL; with --skip-verbs it trusts sysfs alone.
. "$(dirname "$0")/lib.sh"

require "rxe0 on veth0" lab_veth_rxe veth0 veth1 rxe0 10.22.0.1 10.22.0.2
require "rxe1 on veth2" lab_veth_rxe veth2 veth3 rxe1 10.22.1.1 10.22.1.2
node=$(uverbs_of rxe0)
require "uverbs node of rxe0 known ($node)" test -n "$node"
rm -f "$node"

wrap env
assert_eq "NCCL_IB_HCA without rxe0" "=rxe1:1" "$(plan_var NCCL_IB_HCA)"
wrap -- /bin/true
assert "rxe0 dropped, naming the missing uverbs device" \
    grep -q 'names rxe0, but its uverbs node is not in /dev/infiniband' "$ERR_FILE"

# The container's device nodes decide ownership by a stat, with verbs or without.
wrap env --skip-verbs
assert_eq "--skip-verbs: still without rxe0" "=rxe1:1" "$(plan_var NCCL_IB_HCA)"
finish "device without its uverbs node left out with the reason, with verbs or without"
