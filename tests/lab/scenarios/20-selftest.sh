# The loopback self-test through `--selftest` on a real rxe device: it passes as root; as an
# unprivileged user with `ulimit -l 64` (soft and hard, no CAP_IPC_LOCK) it fails at memory
# registration and names the memlock limit. Without --require-rdma the port is kept with a warning
# and the command runs; with it the port is dropped and nccl-wrap refuses (125).
. "$(dirname "$0")/lib.sh"

require "rxe0 on veth0" lab_veth_rxe veth0 veth1 rxe0 10.30.0.1 10.30.0.2
# 4 MiB keeps TCG's slow memcpy well inside the deadline; real hardware uses the 64 MiB default.
ST="--selftest --selftest-bytes=4194304 --selftest-timeout-ms=30000"

wrap $ST -- /bin/busybox env
assert_eq "root: --selftest run exit" 0 "$WRAP_RC"
assert "root: no self-test failure reported" sh -c "! grep -q 'self-test failed' '$ERR_FILE'"
assert_eq "root: exec'd NCCL_IB_HCA" "=rxe0:1" "$(exec_env_var NCCL_IB_HCA "$OUT_FILE")"
wrap env --json $ST
assert "root: env --json records a passed self-test" grep -q '"passed": *true' "$OUT_FILE"

# Unprivileged. The uverbs node is opened up so that the memlock limit, not a permission bit, is
# what stands in the way (as in a pod that was handed the device).
chmod 0666 /dev/infiniband/uverbs* /dev/infiniband/rdma_cm 2>/dev/null
require "su drops to uid 65534 with memlock 64 KiB" \
    sh -c "[ \"\$(ulimit -l 64 && su -s /bin/sh nobody -c 'id -u; ulimit -l' | tr '\n' ' ')\" = '65534 64 ' ]"
assert_eq "uid 65534 has no effective capabilities (no CAP_IPC_LOCK)" "0000000000000000" \
    "$(su -s /bin/sh nobody -c 'sed -n "s/^CapEff:[[:space:]]*//p" /proc/self/status')"

(ulimit -l 64 && exec su -s /bin/sh nobody -c "exec $NCCL_WRAP $ST -- /bin/true") >"$OUT_FILE" 2>"$ERR_FILE"
rc=$?
say "as uid 65534, ulimit -l 64: nccl-wrap $ST -- /bin/true -> exit $rc"
sed 's/^/      err| /' "$ERR_FILE" | head -n 20
assert_eq "unprivileged: the command still runs" 0 "$rc"
assert "unprivileged: failure named, at reg_mr" grep -q 'rxe0:1: loopback self-test failed at reg_mr' "$ERR_FILE"
assert "unprivileged: cause names the memlock limit" grep -qiE 'RLIMIT_MEMLOCK|ulimit -l|IPC_LOCK' "$ERR_FILE"

(ulimit -l 64 && exec su -s /bin/sh nobody -c "exec $NCCL_WRAP --require-rdma $ST -- /bin/true") >"$OUT_FILE" 2>"$ERR_FILE"
rc=$?
say "as uid 65534, --require-rdma: exit $rc"
assert_eq "unprivileged, --require-rdma: refused" 125 "$rc"
assert "unprivileged, --require-rdma: port dropped with the self-test reason" \
    grep -q 'rxe0:1 not used: rxe0:1: loopback self-test failed at reg_mr' "$ERR_FILE"
finish "selftest passes as root; as uid 65534 with ulimit -l 64 it fails at reg_mr naming memlock (kept with a warning; dropped and refused under --require-rdma)"
