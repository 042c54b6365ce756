# RDMA netns shared mode (the default): the pod namespace owns veth2 and its own rxe1 (created
# from inside); the host keeps rxe0 on veth0. Inside the pod every rxe device is visible in
# /sys/class/infiniband, but only veth2 is a net device there. nccl-wrap run in the pod must pick
# rxe1 only.
. "$(dirname "$0")/lib.sh"

require "host rxe0 on veth0" lab_veth_rxe veth0 veth1 rxe0 10.40.0.1 10.40.0.2
require "pod netns with veth2 and rxe1" lab_pod_netns pod veth2 veth3 rxe1 10.40.1.1 10.40.1.2
assert_eq "RDMA netns mode" "shared" "$($RDMA system show | sed -n 's/.*netns \([a-z]*\).*/\1/p')"
assert "pod sees rxe0 too (shared mode)" $IP netns exec pod test -e /sys/class/infiniband/rxe0
assert "pod sees rxe1" $IP netns exec pod test -e /sys/class/infiniband/rxe1
assert "pod has no veth0" $IP netns exec pod sh -c '! test -e /sys/class/net/veth0'
assert "pod has veth2" $IP netns exec pod test -e /sys/class/net/veth2
assert "host rxe0 still ACTIVE" wait_port_state rxe0 4

# In the pod.
$IP netns exec pod "$NCCL_WRAP" env >"$OUT_FILE" 2>"$ERR_FILE"
WRAP_RC=$?
say "ip netns exec pod nccl-wrap env -> exit $WRAP_RC"
sed 's/^/      out| /' "$OUT_FILE"; sed 's/^/      err| /' "$ERR_FILE"
assert_eq "pod: env exit" 0 "$WRAP_RC"
assert_eq "pod: NCCL_IB_HCA" "=rxe1:1" "$(plan_var NCCL_IB_HCA)"
assert_eq "pod: NCCL_IB_GID_INDEX" "1" "$(plan_var NCCL_IB_GID_INDEX)"

$IP netns exec pod "$NCCL_WRAP" -- /bin/busybox env >"$OUT_FILE" 2>"$ERR_FILE"
WRAP_RC=$?
assert_eq "pod: exec exit" 0 "$WRAP_RC"
assert_eq "pod: exec'd NCCL_IB_HCA" "=rxe1:1" "$(exec_env_var NCCL_IB_HCA "$OUT_FILE")"

# On the host, for contrast: veth2 lives in the pod, so the host namespace can use only rxe0.
wrap env
assert_eq "host: NCCL_IB_HCA" "=rxe0:1" "$(plan_var NCCL_IB_HCA)"
finish "pod netns picks only rxe1:1, host only rxe0:1"
