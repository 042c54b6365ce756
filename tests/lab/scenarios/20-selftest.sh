# Verbs self-test on a real rxe device: `--selftest` passes as root, and as an unprivileged user
# with `ulimit -l 64` (no CAP_IPC_LOCK, hard limit too, so it cannot be raised) it fails and
# names the memlock limit as the cause. SKIP if the binary reports verbs support missing.
. "$(dirname "$0")/lib.sh"

require "rxe0 on veth0" lab_veth_rxe veth0 veth1 rxe0 10.30.0.1 10.30.0.2

wrap --selftest -- /bin/true
if grep -qiE "(unexpected|unknown|unrecognized) (argument|option).*--selftest|--selftest.*(unexpected|unknown|unrecognized)" "$ERR_FILE"; then
    skip "binary has no --selftest option yet"
fi
if [ "$WRAP_RC" -ne 0 ] && grep -qi 'verbs.*\(unsupported\|not supported\|not built\|unavailable\)' "$ERR_FILE"; then
    skip "binary reports verbs unsupported: $(grep -i -m1 'verbs' "$ERR_FILE")"
fi
assert_eq "root: --selftest -- true exit" 0 "$WRAP_RC"

# Unprivileged run. The uverbs node is opened up so that the memlock limit, not a permission
# bit, is what stands in the way (as in a pod that was handed the device).
chmod 0666 /dev/infiniband/uverbs* /dev/infiniband/rdma_cm 2>/dev/null
# busybox su as root asks no password; leaving uid 0 drops every capability, CAP_IPC_LOCK too.
# `ulimit -l` in the shell sets the soft and the hard limit, so it cannot be raised again.
require "su drops to uid 65534 with memlock 64 KiB" \
    sh -c "[ \"\$(ulimit -l 64 && su -s /bin/sh nobody -c 'id -u; ulimit -l' | tr '\n' ' ')\" = '65534 64 ' ]"
assert_eq "uid 65534 has no effective capabilities (no CAP_IPC_LOCK)" "0000000000000000" \
    "$(su -s /bin/sh nobody -c 'sed -n "s/^CapEff:[[:space:]]*//p" /proc/self/status')"
(ulimit -l 64 && exec su -s /bin/sh nobody -c "exec $NCCL_WRAP --selftest -- /bin/true") \
    >"$OUT_FILE" 2>"$ERR_FILE"
rc=$?
say "as uid 65534, ulimit -l 64: nccl-wrap --selftest -- /bin/true -> exit $rc"
sed 's/^/      err| /' "$ERR_FILE" | head -n 40
assert "unprivileged: --selftest fails" [ "$rc" -ne 0 ]
assert "unprivileged: cause names the memlock limit" grep -qiE 'memlock|ulimit -l|IPC_LOCK' "$ERR_FILE"
assert "unprivileged: message prefixed nccl-wrap:" grep -q '^nccl-wrap:' "$ERR_FILE"
finish "selftest passes as root; fails naming memlock as uid 65534 with ulimit -l 64"
