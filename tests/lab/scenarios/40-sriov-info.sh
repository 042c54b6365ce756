# SR-IOV device plugin env: PCIDEVICE_<PREFIX>_<RESOURCE>_INFO names one RDMA device through the
# rdma map's rdma_dev (v3.10.0+). rxe has no PCI address, so the device ID is the device name and
# nccl-wrap must take rdma_dev directly. Two devices are up; only the named one may be used.
. "$(dirname "$0")/lib.sh"

require "rxe0 on veth0" lab_veth_rxe veth0 veth1 rxe0 10.50.0.1 10.50.0.2
require "rxe1 on veth2" lab_veth_rxe veth2 veth3 rxe1 10.50.1.1 10.50.1.2
uv=$(uverbs_of rxe1)
require "rxe1 has a uverbs node" test -c "$uv"

# Without the plugin's variables both are used (natural order).
wrap env
assert_eq "no plugin env: NCCL_IB_HCA" "=rxe0:1,rxe1:1" "$(plan_var NCCL_IB_HCA)"

export PCIDEVICE_INTEL_COM_RXE=rxe1
export PCIDEVICE_INTEL_COM_RXE_INFO='{"rxe1":{"generic":{"deviceID":"rxe1"},"rdma":{"rdma_cm":"/dev/infiniband/rdma_cm","rdma_dev":"rxe1","uverbs":"'"$uv"'"}}}'
say "PCIDEVICE_INTEL_COM_RXE_INFO=$PCIDEVICE_INTEL_COM_RXE_INFO"
wrap env
assert_eq "plugin env: exit" 0 "$WRAP_RC"
assert_eq "plugin env: NCCL_IB_HCA" "=rxe1:1" "$(plan_var NCCL_IB_HCA)"
assert_eq "plugin env: NCCL_IB_GID_INDEX" "1" "$(plan_var NCCL_IB_GID_INDEX)"

wrap -- /bin/busybox env
assert_eq "plugin env: exec'd NCCL_IB_HCA" "=rxe1:1" "$(exec_env_var NCCL_IB_HCA "$OUT_FILE")"
assert_eq "plugin env: plugin variable passed through" "rxe1" "$(exec_env_var PCIDEVICE_INTEL_COM_RXE "$OUT_FILE")"
finish "PCIDEVICE_INTEL_COM_RXE_INFO rdma_dev rxe1 -> only rxe1:1"
