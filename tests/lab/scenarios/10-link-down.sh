# Two rxe devices; the one whose veth is set down sorts first (rxe0), so picking "the first
# device" would be wrong. nccl-wrap must list only the live port and pick its RoCE v2 IPv4 GID.
. "$(dirname "$0")/lib.sh"

require "rxe0 on veth0" lab_veth_rxe veth0 veth1 rxe0 10.20.0.1 10.20.0.2
require "rxe1 on veth2" lab_veth_rxe veth2 veth3 rxe1 10.20.1.1 10.20.1.2
require "veth0 set down" lab_link_down veth0
require "rxe0 port goes DOWN" wait_port_state rxe0 1
require "rxe1 port stays ACTIVE" wait_port_state rxe1 4
assert_eq "rxe1 GID 1 type" "RoCE v2" "$(cat /sys/class/infiniband/rxe1/ports/1/gid_attrs/types/1)"

wrap env
assert_eq "nccl-wrap env exit" 0 "$WRAP_RC"
assert_eq "NCCL_IB_HCA" "=rxe1:1" "$(plan_var NCCL_IB_HCA)"
assert_eq "NCCL_IB_GID_INDEX" "1" "$(plan_var NCCL_IB_GID_INDEX)"
assert_eq "NCCL_IB_DISABLE" "<unset>" "$(plan_var NCCL_IB_DISABLE)"

# A run applies the same choice, and says what it did on stderr.
wrap -- /bin/busybox env
assert_eq "run exit (the command's own)" 0 "$WRAP_RC"
assert_eq "exec'd NCCL_IB_HCA" "=rxe1:1" "$(exec_env_var NCCL_IB_HCA "$OUT_FILE")"
assert_eq "exec'd NCCL_IB_GID_INDEX" "1" "$(exec_env_var NCCL_IB_GID_INDEX "$OUT_FILE")"
assert "run summary on stderr, prefixed nccl-wrap:" grep -q '^nccl-wrap:' "$ERR_FILE"
finish "only live rxe1:1 used, GID index 1"
