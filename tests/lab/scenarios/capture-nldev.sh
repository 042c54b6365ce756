# Not part of the lab's runs (run by name): prints the kernel's RDMA netlink answers to
# nccl-wrap's device discovery, for fixtures/nldev/ (fixtures/nldev/capture.py turns the console
# log into the files): two rxe devices, their RDMA_NLDEV_CMD_GET dump (one device a datagram) and
# RDMA_NLDEV_CMD_GET_CHARDEV answers, as strace -xx shows each datagram received.
. "$(dirname "$0")/lib.sh"

command -v strace >/dev/null 2>&1 || skip "no strace in this guest"
require "rxe0 on veth0" lab_veth_rxe veth0 veth1 rxe0 10.41.0.1 10.41.0.2
require "rxe1 on veth2" lab_veth_rxe veth2 veth3 rxe1 10.41.1.1 10.41.1.2
strace -f -qq -xx -s 65536 -e trace=recvfrom,recvmsg -o /tmp/nl.trace "$NCCL_WRAP" __verbs list >/dev/null 2>&1
grep -a 'recvfrom' /tmp/nl.trace | sed 's/^/NLDEV-CAPTURE /'
n=$(grep -c 'recvfrom' /tmp/nl.trace)
assert "datagrams captured" [ "$n" -ge 3 ]
finish "$n datagrams"
