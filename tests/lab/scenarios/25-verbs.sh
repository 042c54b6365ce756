# The statically linked ibverbs path on a real rxe device, through the hidden `__verbs` entry:
# the device is listed with no provider files on disk, the port reads ACTIVE/Ethernet with the
# IPv4-mapped GID at index 1, the loopback self-test passes as root, and it fails at reg_mr naming
# the memlock limit as uid 65534 with `ulimit -l 64`. Prints the probe and self-test times.
. "$(dirname "$0")/lib.sh"

# field KEY FILE: a scalar JSON value (string unquoted) from the one-line output.
field() { grep -o "\"$1\":\(\"[^\"]*\"\|[^,}]*\)" "$2" | head -n1 | cut -d: -f2- | tr -d '"'; }

# Kernel verbs loaded but no device yet: an empty list, and a named device is "not listed".
wrap __verbs list
assert "no device: empty list" grep -q '"devices":\[\]' "$OUT_FILE"
wrap __verbs port mlx5_0 1
assert "no device: mlx5_0 not listed" grep -q 'lists no device named mlx5_0' "$OUT_FILE"

require "rxe0 on veth0" lab_veth_rxe veth0 veth1 rxe0 10.25.0.1 10.25.0.2

# Providers must come from the binary itself, not from /etc/libibverbs.d and the .so files.
mv /etc/libibverbs.d /tmp/libibverbs.d.hidden 2>/dev/null

wrap __verbs list
assert_eq "__verbs list exit" 0 "$WRAP_RC"
assert "rxe0 listed" grep -q '"devices":\[[^]]*"rxe0"' "$OUT_FILE"
say "list: $(field elapsed_us "$OUT_FILE") us"

wrap __verbs port rxe0 1 1
assert_eq "__verbs port exit" 0 "$WRAP_RC"
assert_eq "port state" "ACTIVE" "$(field state "$OUT_FILE")"
assert_eq "link layer" "Ethernet" "$(field link_layer "$OUT_FILE")"
assert_eq "GID 1 (IPv4-mapped 10.25.0.1)" "0000:0000:0000:0000:0000:ffff:0a19:0001" \
    "$(grep -o '"gid":"[^"]*"' "$OUT_FILE" | cut -d'"' -f4)"
assert_eq "GID 1 as sysfs has it" "$(cat /sys/class/infiniband/rxe0/ports/1/gids/1)" \
    "$(grep -o '"gid":"[^"]*"' "$OUT_FILE" | cut -d'"' -f4)"
assert_eq "gid_tbl_len" "$(ls /sys/class/infiniband/rxe0/ports/1/gids | wc -l)" "$(field gid_tbl_len "$OUT_FILE")"
say "probe (list+open+query_port+query_gid): $(field elapsed_us "$OUT_FILE") us"

# Timing runs: 64 KiB, 1 MiB, then the default 64 MiB with the default 2 s deadline and with a
# generous one (TCG makes rxe slow; the result says which step ran out of time).
for args in "65536 30000" "1048576 30000" "" "67108864 60000"; do
    wrap __verbs selftest rxe0 1 1 $args
    say "selftest ${args:-default}: passed=$(field passed "$OUT_FILE") step=$(field step "$OUT_FILE") $(field elapsed_us "$OUT_FILE") us"
done
wrap __verbs selftest rxe0 1 1 1048576 30000
assert_eq "root: selftest 1 MiB exit" 0 "$WRAP_RC"
assert_eq "root: selftest passed" "true" "$(field passed "$OUT_FILE")"

# A GID index past the populated entries is a named failure, not a crash.
wrap __verbs selftest rxe0 1 7 1048576 30000
assert "empty GID 7: fails at query_gid" grep -q '"step":"query_gid"' "$OUT_FILE"

# Unprivileged, memlock 64 KiB (soft and hard), no capabilities: reg_mr of 64 MiB must fail
# with the cause named.
chmod 0666 /dev/infiniband/uverbs* 2>/dev/null
(ulimit -l 64 && exec su -s /bin/sh nobody -c "exec $NCCL_WRAP __verbs selftest rxe0 1 1") \
    >"$OUT_FILE" 2>"$ERR_FILE"
rc=$?
say "as uid 65534, ulimit -l 64: __verbs selftest rxe0 1 1 -> exit $rc"
sed 's/^/      out| /' "$OUT_FILE"
sed 's/^/      err| /' "$ERR_FILE" | head -n 20
assert_eq "unprivileged: exit" 1 "$rc"
assert_eq "unprivileged: failing step" "reg_mr" "$(field step "$OUT_FILE")"
assert "unprivileged: status is the errno" grep -q '"status":"E[A-Z]*: ' "$OUT_FILE"
assert "unprivileged: hint names RLIMIT_MEMLOCK and CAP_IPC_LOCK" \
    sh -c "grep -q 'RLIMIT_MEMLOCK is 64 KiB' $OUT_FILE && grep -q CAP_IPC_LOCK $OUT_FILE"

# A DOWN port: the self-test refuses before allocating anything.
lab_link_down veth0
wait_port_state rxe0 1 >/dev/null
wrap __verbs selftest rxe0 1 1
assert "DOWN port: fails at query_port naming the state" grep -q '"status":"port 1 is DOWN"' "$OUT_FILE"

mv /tmp/libibverbs.d.hidden /etc/libibverbs.d 2>/dev/null
finish "rxe0 listed (static providers), ACTIVE/Ethernet, GID1 IPv4-mapped, selftest PASS; memlock 64 KiB fails at reg_mr with the cause named"
