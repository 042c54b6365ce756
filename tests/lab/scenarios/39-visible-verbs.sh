# What a start pays for RDMA devices the pod can see but does not own, with the verbs probe on
# and off (rxe under TCG: counts, not times). The pod namespace owns two rails, veth2 with its
# rxe1 and veth4 with its rxe2; the host namespace then adds 24 more rxe devices, each visible in
# the pod (the RDMA netns mode is shared, as on most clusters) and each with its uverbs node in
# this guest's /dev/infiniband, as in a privileged pod. A run must still pick the pod's two
# devices alone, list them from one RDMA netlink dump, read no uverbs device's sysfs files, and
# what verbs add to its system calls before the command (strace -f -c of `-q -- /bin/true`,
# against --skip-verbs) must stay at one per device the pod does not own.
. "$(dirname "$0")/lib.sh"

command -v strace >/dev/null 2>&1 || skip "no strace in this guest (setup.sh installs it; amd64 only)"
require "pod netns with veth2 and rxe1" lab_pod_netns pod veth2 veth3 rxe1 10.39.1.1 10.39.1.2
pod_rail() { # the pod's second rail: veth4 and its rxe2, made from inside as lab_pod_netns does
    $IP link add veth4 type veth peer name veth5 && $IP link set veth4 netns pod \
        && $IP -n pod addr add 10.39.2.1/24 dev veth4 && $IP -n pod link set veth4 up && $IP link set veth5 up \
        && $IP netns exec pod $RDMA link add rxe2 type rxe netdev veth4 && wait_port_state rxe2 4
}
require "the pod's second rail, veth4 and rxe2" pod_rail

count() { # count ARGS...: the syscalls of one run in the pod
    $IP netns exec pod strace -f -c -o /tmp/sc "$NCCL_WRAP" "$@" >/dev/null 2>&1
    awk '/total/ {print $4}' /tmp/sc
}
uverbs_reads() { # uverbs_reads ARGS...: uverbs devices whose sysfs files a run reads (`ibdev`,
    # the first file libibverbs' sysfs scan opens in each one's directory)
    $IP netns exec pod strace -f -qq -e trace=open,openat -o /tmp/uv "$NCCL_WRAP" "$@" >/dev/null 2>&1
    grep -c '"ibdev"' /tmp/uv
}
hca() { $IP netns exec pod "$NCCL_WRAP" -q "$@" env 2>/dev/null | sed -n "s/^export NCCL_IB_HCA=//p" | tr -d "'"; }
dumps() { # dumps: RDMA netlink device dumps (RDMA_NLDEV_CMD_GET, type 0x1401) one run asks for
    $IP netns exec pod strace -f -qq -e trace=sendto -o /tmp/send "$NCCL_WRAP" -q -- /bin/true >/dev/null 2>&1
    grep -c 'nlmsg_type=0x1401' /tmp/send
}

v0=$(count -q -- /bin/true)
s0=$(count -q --skip-verbs -- /bin/true)
u0=$(uverbs_reads -q -- /bin/true)
assert_eq "the pod's devices: NCCL_IB_HCA" "=rxe1:1,rxe2:1" "$(hca)"
assert_eq "one device dump for both of the pod's devices" 1 "$(dumps)"

extra=24
for i in $(seq 1 "$extra"); do
    rxe_on "rxeh$i" "vh$i" >/dev/null 2>&1 || { say "rxeh$i on vh$i could not be made"; break; }
done
n=$(ls /sys/class/infiniband | wc -l)
say "$n RDMA devices visible in the pod"
assert "the host's devices are visible in the pod" [ "$n" -ge $((extra + 2)) ]

v1=$(count -q -- /bin/true)
s1=$(count -q --skip-verbs -- /bin/true)
u1=$(uverbs_reads -q -- /bin/true)
assert_eq "$n devices: NCCL_IB_HCA" "=rxe1:1,rxe2:1" "$(hca)"
assert_eq "$n devices, --skip-verbs: NCCL_IB_HCA" "=rxe1:1,rxe2:1" "$(hca --skip-verbs)"
say "syscalls with verbs: $v0 -> $v1; --skip-verbs: $s0 -> $s1; uverbs devices whose files were read: $u0 -> $u1"
# What verbs add over the sysfs-only run, per device the pod does not own: the kernel's RDMA
# netlink dump hands over one device per datagram, so one receive each (libibverbs' own sysfs
# scan made about 23 system calls each here). The sysfs fallback's own share (rxe devices are
# software devices, each one's parent read to tell whether it is the pod's) is in both runs.
added=$(( (v1 - v0) - (s1 - s0) ))
assert "with verbs, at most one system call per device the pod does not own ($added for $((n - 2)) more)" [ "$added" -le $((n - 2)) ]
assert_eq "no uverbs device's sysfs files are read: libibverbs is told the pod's device over RDMA netlink" "0 0" "$u0 $u1"
finish "2 -> $n visible devices (2 the pod's): syscalls with verbs $v0 -> $v1, --skip-verbs $s0 -> $s1; uverbs devices scanned $u0 -> $u1"
