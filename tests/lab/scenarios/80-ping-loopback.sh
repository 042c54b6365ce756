# nccl-wrap ping end to end on one guest (one kernel: RC traffic works within one rxe device, so
# both ends use rxe0, each limited to it through the SR-IOV plugin variable); rxe0 and rxe1 on the
# two ends of one veth pair in the initial namespace, TCP over the same veth. Then rxe1 against
# rxe0 (reported), a listener that gets garbage first, and a client that finds no listener. Sizes
# are small: TCG is slow. Traffic between nodes runs in the fabric lab (fabric.sh).
. "$(dirname "$0")/lib.sh"

# One veth pair, rxe on each end: 10.80.0.1 (veth0, rxe0) <-> 10.80.0.2 (veth1, rxe1).
$IP link add veth0 type veth peer name veth1 || result FAIL "veth pair"
$IP addr add 10.80.0.1/24 dev veth0 && $IP addr add 10.80.0.2/24 dev veth1
$IP link set veth0 up && $IP link set veth1 up
$RDMA link add rxe0 type rxe netdev veth0 && $RDMA link add rxe1 type rxe netdev veth1
require "rxe0 ACTIVE" wait_port_state rxe0 4
require "rxe1 ACTIVE" wait_port_state rxe1 4

only() { # only DEV: the SR-IOV plugin variable naming DEV alone
    echo "PCIDEVICE_LAB_RXE_INFO={\"$1\":{\"generic\":{\"deviceID\":\"$1\"},\"rdma\":{\"rdma_dev\":\"$1\"}}}"
}
# wrap_on DEV ARGS...: `wrap` with the plugin variable naming DEV alone (both ends then plan one
# rail: a client that also planned rxe1 would rightly report that rail's missing partner).
wrap_on() {
    export "$(only "$1")"
    shift
    wrap "$@"
    unset PCIDEVICE_LAB_RXE_INFO
}
# wait_listen PORT: until a socket listens on PORT (the listener detects and opens ports first).
wait_listen() {
    _n=100
    while [ $_n -gt 0 ]; do
        grep -qi ":$(printf %04X "$1") 00000000:0000 0A" /proc/net/tcp && return 0
        usleep 100000
        _n=$((_n - 1))
    done
    return 1
}
SMALL="--bytes=65536 --iters=200 --duration-ms=1000 --timeout-ms=20000 --wait-ms=20000"

# 1. One listener and one client, both limited to rxe0, JSON on both.
env "$(only rxe0)" "$NCCL_WRAP" ping --listen 10.80.0.1:18515 --json $SMALL >/tmp/ping.listen 2>/tmp/ping.listen.err &
lpid=$!
require "listener up on 18515" wait_listen 18515
# The client is limited to rxe0 too: the pair is two queue pairs of one device.
wrap_on rxe0 ping 10.80.0.1:18515 --json $SMALL
crc=$WRAP_RC
wait $lpid
lrc=$?
sed 's/^/      listener| /' /tmp/ping.listen /tmp/ping.listen.err | head -n 20
pair=$(grep '"kind":"ping-pair"' "$OUT_FILE" | head -n1)
say "client: $pair"
assert_eq "client exit" 0 "$crc"
assert_eq "listener exit" 0 "$lrc"
assert "client prints a passing pair with figures" sh -c "grep '\"kind\":\"ping-pair\"' '$OUT_FILE' | grep -q '\"status\":\"pass\".*\"median\"'"
assert "listener prints the pair too" grep -q '"status":"pass"' /tmp/ping.listen
assert "summary line last" sh -c "tail -n1 '$OUT_FILE' | grep -q '\"kind\":\"ping-summary\",\"pairs\":1,\"failed\":0,\"exit\":0'"
LAT=$(echo "$pair" | sed -n 's/.*"latency_us":{"median":\([0-9.]*\),"p99":\([0-9.]*\)}.*/median \1 us p99 \2 us/p')
BW=$(echo "$pair" | sed -n 's/.*"bandwidth_gbytes_per_s":\([0-9.]*\).*/\1 GB\/s/p')

# 2. Client limited to rxe1 towards the listener on rxe0: rxe across two devices of one namespace.
# Reported, not asserted: the kernel cannot resolve a neighbour for an address of its own, so
# INIT->RTR fails (ETIMEDOUT) and ping names qp-transition; the pairs above share rxe0 instead.
env "$(only rxe0)" "$NCCL_WRAP" ping --listen 10.80.0.1:18516 --json $SMALL >/tmp/ping.listen 2>/tmp/ping.listen.err &
lpid=$!
require "listener up on 18516" wait_listen 18516
env "$(only rxe1)" "$NCCL_WRAP" ping 10.80.0.1:18516 --json $SMALL >"$OUT_FILE" 2>"$ERR_FILE"
crc=$?
wait $lpid
say "rxe1 -> rxe0: exit $crc"
sed 's/^/      out| /' "$OUT_FILE" "$ERR_FILE" | head -n 12
XDEV="rxe1->rxe0 exit $crc: $(grep -o '"status":"[a-z]*"' "$OUT_FILE" | head -n1)"

# 3. Hostile first peer, then a good one, under --keep; the listener is stopped afterwards.
env "$(only rxe0)" "$NCCL_WRAP" ping --listen 10.80.0.1:18517 --keep $SMALL >/tmp/ping.keep 2>/tmp/ping.keep.err &
kpid=$!
require "listener up on 18517" wait_listen 18517
echo "GET / HTTP/1.1" | nc -w 2 10.80.0.1 18517 >/dev/null 2>&1
wrap_on rxe0 ping 10.80.0.1:18517 $SMALL
kill $kpid 2>/dev/null
wait $kpid 2>/dev/null
sed 's/^/      keep| /' /tmp/ping.keep /tmp/ping.keep.err | head -n 12
assert_eq "after garbage, a good peer is served: exit" 0 "$WRAP_RC"
assert "the garbage peer was named" grep -q 'not a nccl-wrap ping message' /tmp/ping.keep.err
assert "human form: PASS line" grep -q '^PASS pair 0 rxe0:1 -> peer rxe0:1  latency median' "$OUT_FILE"

# 4. Nobody listening: exit 2, cause peer.
wrap ping 10.80.0.1:18599 --json --wait-ms=1000
assert_eq "no listener: exit" 2 "$WRAP_RC"
assert "no listener: ping-error with cause peer" grep -q '"id":"peer"' "$OUT_FILE"

finish "loopback pair passed ($LAT, $BW under TCG); $XDEV; garbage then good peer under --keep; no listener exits 2"
