# `nccl-wrap doctor` against a real kernel RDMA stack: as root on a live rxe port the device,
# port, uverbs, GID and self-test checks pass; as uid 65534 with `ulimit -l 64` and no
# CAP_IPC_LOCK, memlock and the self-test fail (exit 1) and name the cause.
. "$(dirname "$0")/lib.sh"

require "rxe0 on veth0" lab_veth_rxe veth0 veth1 rxe0 10.70.0.1 10.70.0.2
# status ID FILE: the status of the first check with that id in doctor's JSON (one per line).
status() { tr -d '\n ' <"$2" | grep -o "{\"id\":\"$1\",\"status\":\"[a-z]*\"" | head -n1 | sed 's/.*"status":"\([a-z]*\)"/\1/'; }

wrap doctor --json --selftest-bytes=4194304 --selftest-timeout-ms=30000
assert "root: doctor ran (exit 0 or 1, not 2)" [ "$WRAP_RC" -le 1 ]
for id in devices ports uverbs gid selftest; do
    assert_eq "root: $id" pass "$(status "$id" "$OUT_FILE")"
done

chmod 0666 /dev/infiniband/uverbs* /dev/infiniband/rdma_cm 2>/dev/null
(ulimit -l 64 && exec su -s /bin/sh nobody -c "exec $NCCL_WRAP doctor --json --selftest-bytes=4194304 --selftest-timeout-ms=30000") \
    >"$OUT_FILE" 2>"$ERR_FILE"
rc=$?
say "as uid 65534, ulimit -l 64: doctor -> exit $rc"
assert_eq "unprivileged: doctor exit" 1 "$rc"
assert_eq "unprivileged: memlock" fail "$(status memlock "$OUT_FILE")"
assert_eq "unprivileged: selftest" fail "$(status selftest "$OUT_FILE")"
assert "unprivileged: self-test fails at reg_mr" grep -q 'loopback RC send failed at reg_mr' "$OUT_FILE"
assert "unprivileged: the hint names the memlock limit" grep -q 'RLIMIT_MEMLOCK is 64 KiB' "$OUT_FILE"

wrap doctor --selftest-bytes=4194304 --selftest-timeout-ms=30000
assert "human form: one PASS line for the self-test" grep -q '^PASS.*selftest\|PASS  *selftest' "$OUT_FILE"
finish "doctor on rxe: devices, ports, uverbs, gid, selftest pass as root; memlock and selftest fail naming the cause as uid 65534 with ulimit -l 64"
