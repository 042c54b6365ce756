# No usable port: with no RDMA device at all, and with the only rxe port DOWN, nccl-wrap plans
# NCCL_IB_DISABLE=1 (sockets) and still runs the command; --require-rdma refuses with exit 125.
. "$(dirname "$0")/lib.sh"

# Case 1: no RDMA device at all.
require "no RDMA device present" sh -c '! ls /sys/class/infiniband/* >/dev/null 2>&1'
wrap env
assert_eq "no device: env exit" 0 "$WRAP_RC"
assert_eq "no device: NCCL_IB_DISABLE" "1" "$(plan_var NCCL_IB_DISABLE)"
assert_eq "no device: NCCL_IB_HCA" "<unset>" "$(plan_var NCCL_IB_HCA)"
wrap --require-rdma -- /bin/true
assert_eq "no device: --require-rdma exit" 125 "$WRAP_RC"

# Case 2: one rxe device whose link is down.
require "rxe0 on veth0" lab_veth_rxe veth0 veth1 rxe0 10.15.0.1 10.15.0.2
require "veth0 set down" lab_link_down veth0
require "rxe0 port goes DOWN" wait_port_state rxe0 1
wrap env
assert_eq "port down: env exit" 0 "$WRAP_RC"
assert_eq "port down: NCCL_IB_DISABLE" "1" "$(plan_var NCCL_IB_DISABLE)"
assert_eq "port down: NCCL_IB_HCA" "<unset>" "$(plan_var NCCL_IB_HCA)"
wrap -- /bin/busybox env
assert_eq "port down: plain run exit (command's own code)" 0 "$WRAP_RC"
assert_eq "port down: command sees NCCL_IB_DISABLE" "1" "$(exec_env_var NCCL_IB_DISABLE "$OUT_FILE")"
wrap --require-rdma -- /bin/true
assert_eq "port down: --require-rdma exit" 125 "$WRAP_RC"
assert "port down: --require-rdma says why on stderr" grep -q '^nccl-wrap:' "$ERR_FILE"
finish "NCCL_IB_DISABLE=1 without a usable port; --require-rdma exits 125"
