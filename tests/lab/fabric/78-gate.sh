# lab-nodes: 3
# The gate, healthy, with strays and a pod of another job: three nodes, two rails each, run
#   nccl-wrap --init --gate -- sh -c 'echo gate-started; ls -l /proc/$PPID/fd'
# as ranks 0-2 of one job (torchrun's PET_NODE_RANK, PET_NNODES, PET_MASTER_ADDR=node-0).
# Nodes 0 and 1 start at once; node 2 waits until both gate ports listen (each node posts a flag
# once /proc/net/tcp shows it), sends strays
# to both (an HTTP request, a silent connection, a plain `nccl-wrap ping` hello), starts a pod of
# another job (--gate-id=another-job, rank 1, its own port) that must be refused with 125, and
# only then starts its own rank. Every node: exit 0, the command ran, the verdict says go with 6
# pairs (3 edges x 2 rails), and nccl-wrap itself (the supervising parent) holds no socket and
# no uverbs device while the command runs. Nodes 0 and 1 log the strays as ignored.
. /lab/fabric/lib.sh

require "rail 0 up with rxe0" fab_rail 0
require "rail 1 up with rxe1" fab_rail 1
gate_env
require "every node has its rails" fab_barrier rails

if [ "$LAB_NODE" = 2 ]; then
    for n in 0 1; do
        require "node $n's gate port listens" fab_wait "$n" gate.up 60
    done
    for n in 0 1; do
        printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 2 "node-$n" 18516 >/dev/null 2>&1 &
        (sleep 3 | nc "node-$n" 18516 >/dev/null 2>&1) &
        timeout 10 $NCCL_WRAP ping "node-$n:18516" --iters=2 --duration-ms=0 --timeout-ms=3000 --wait-ms=3000 \
            >/dev/null 2>&1 &
    done
    gate_run other --gate-coordinator=node-0:18516 --gate-wait-ms=20000 --gate-id=another-job --gate-port=18600 \
        --gate-rank=1 --termination-log=/tmp/fab.other.term
    assert_eq "the pod of another job: exit" 125 "$RC"
    assert "the pod of another job: refused as such" grep -q 'a pod of another job (job "another-job"' /tmp/fab.other.term
    assert "the pod of another job: its command did not run" sh -c '! grep -q gate-started /tmp/fab.other.out'
    sleep 2
fi

if [ "$LAB_NODE" != 2 ]; then
    # Tell node 2 when this node's gate port listens (read from /proc/net/tcp, not probed).
    (wait_listen 18516 600 && fab_post gate.up) &
fi
gate_run gate
assert_eq "gate exit" 0 "$RC"
assert "the command ran" grep -q '^gate-started$' /tmp/fab.gate.out
assert_eq "verdict: go" true "$(gv_field /tmp/fab.gate.out go)"
assert_eq "verdict: pairs" 6 "$(gv_field /tmp/fab.gate.out pairs)"
assert_eq "verdict: failed" 0 "$(gv_field /tmp/fab.gate.out failed)"
# Sockets and RDMA device nodes: none. (The post-mortem's watch keeps each watched port's sysfs
# directory open for its polls, close-on-exec: /sys/devices/.../ports/N, not a device.)
held=$(grep -c 'socket:\|/dev/infiniband\|uverbs' /tmp/fab.gate.out)
assert_eq "sockets and RDMA devices nccl-wrap holds while the command runs" 0 "$held"
assert_eq "the watch's port directories, as many as the ports in use" 2 "$(grep -c '/sys/devices/.*/ports/' /tmp/fab.gate.out)"
assert "no termination message" test ! -e /tmp/fab.gate.term
if [ "$LAB_NODE" != 2 ]; then
    assert "stray: garbage named and ignored" grep -q 'gate: ignored a stray connection: .*not a nccl-wrap ping message' /tmp/fab.gate.err
    assert "stray: a plain ping named and ignored" grep -q 'gate: ignored a stray connection: .*a plain `nccl-wrap ping`' /tmp/fab.gate.err
fi
if [ "$LAB_NODE" = 0 ]; then
    assert "the pod of another job: named on the coordinator" grep -q 'gate: ignored .*: a pod of another job' /tmp/fab.gate.err
fi
line=$(grep 'nccl-wrap: gate: rank' /tmp/fab.gate.err | head -n1)
finish "exit $RC after ${SECS}s; ${line#nccl-wrap: }; $(grep -c 'ignored a stray' /tmp/fab.gate.err) stray(s) ignored"
