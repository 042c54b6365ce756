# lab-nodes: 2
# Hostile peers against a real listener (`ping --listen PORT --keep --json`, 3 s deadline on node
# 0), sent by node 1 with busybox nc and printf (the frame: "NCWPING", version 1, kind, u32
# big-endian length, JSON payload; src/ping/wire.rs):
#   garbage         an HTTP request
#   oversized       a hello header declaring 65537 bytes (the limit is 65536)
#   silence         connect and send nothing
#   truncated       a hello header declaring 200 bytes, 20 sent, then the connection closed
#   mid-exchange    a valid hello, then the connection closed when the listener's setup comes
#   greedy          a valid hello asking for 1 GiB per pair (the wire's largest), held 3 s: the
#                   listener says the clamp at once, its own hello answers with its --bytes
#                   (65536), and the memory it pins
#                   (VmPin, sampled every 0.2 s over the whole session) stays under 4 MiB
# Each is named on the listener's stderr; the listener stays up, and a good peer afterwards
# passes (exit 0 on the client, its pair printed by the listener too).
. /lab/fabric/lib.sh
port=18515

require "rail 0 up with rxe0" fab_rail 0
require "both nodes have their rails" fab_barrier rails

# frame KIND PAYLOAD: a ping frame on stdout.
frame() {
    _n=${#2}
    printf 'NCWPING\001'
    printf "\\$(printf %03o "$1")"
    for _s in 24 16 8 0; do printf "\\$(printf %03o $(((_n >> _s) & 255)))"; done
    printf '%s' "$2"
}
# send NAME CMD...: CMD's output to the listener through busybox nc, which closes the connection
# as soon as CMD ends (a CMD that sleeps keeps it open) and prints what the listener sent.
send() {
    _name=$1
    shift
    "$@" | nc "$(pod_addr 0)" "$port" >"/tmp/fab.h.$_name" 2>&1
    say "$_name peer: nc exit $?; the listener answered $(wc -c <"/tmp/fab.h.$_name") bytes: $(tr -c '[:print:]' . <"/tmp/fab.h.$_name" | head -c 160)"
}

if [ "$LAB_NODE" = 0 ]; then
    $NCCL_WRAP ping --listen $port --keep --json $FAB_PING_ARGS --timeout-ms=3000 >/tmp/fab.h.out 2>/tmp/fab.h.err &
    lpid=$!
    echo "$lpid" >>"$FAB_PIDS"
    # The listener's pinned memory, sampled for as long as it runs (kB, one line per sample).
    (while kill -0 "$lpid" 2>/dev/null; do
        sed -n 's/^VmPin:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$lpid/status" 2>/dev/null
        sleep 0.2
    done >/tmp/fab.h.pin) &
    if wait_listen $port; then fab_post h.ready; else fab_post h.ready nolisten; fi
    fab_post good.ready "$(fab_get 0 h.ready)"
    fab_wait 1 h.done "$FAB_CLIENT_TIMEOUT" >/dev/null
    sleep 1
    alive=no
    kill -0 "$lpid" 2>/dev/null && alive=yes
    kill "$lpid" 2>/dev/null
    wait "$lpid" 2>/dev/null
    sed 's/^/      out| /' /tmp/fab.h.out | head -n 10
    sed 's/^/      err| /' /tmp/fab.h.err | head -n 20
    assert_eq "the listener is still running after every peer" yes "$alive"
    assert "garbage: named" grep -q 'not a nccl-wrap ping message' /tmp/fab.h.err
    assert "oversized: named" grep -q 'declared payload of 65537 bytes is over the 65536-byte limit' /tmp/fab.h.err
    assert "silence: named" grep -q 'sent nothing for a message header before the deadline (0 of 13 bytes arrived)' /tmp/fab.h.err
    assert "truncated: named" grep -q 'closed the connection half way through a message body (20 of 200 bytes)' /tmp/fab.h.err
    assert "mid-exchange: named" grep -q 'closed the connection half way through a message header (0 of 13 bytes)' /tmp/fab.h.err
    assert "greedy: the clamp said before the answer" \
        grep -q 'asked for more than --bytes/--iters/--duration-ms allow here: bytes 1073741824 clamped to 65536' /tmp/fab.h.err
    assert_eq "stderr: one line per hostile peer, and the greedy one's clamp" 7 "$(grep -c 'nccl-wrap: ping: ' /tmp/fab.h.err)"
    pin=$(sort -n /tmp/fab.h.pin | tail -n1)
    assert "greedy: VmPin sampled ($(wc -l </tmp/fab.h.pin) samples)" test -s /tmp/fab.h.pin
    assert "greedy: the listener pinned at most 4 MiB (at most ${pin:-?} kB)" test "${pin:-99999}" -le 4096
    l=$(pj_pair /tmp/fab.h.out 0)
    assert_eq "the good peer's pair, as the listener saw it" pass "$(pj_status "$l")"
    finish "listener up after 6 hostile peers, each named; good peer served: $(pj_status "$l")"
fi

r=$(fab_wait 0 h.ready) || true
require "the listener listens" test "$r" = 1
send garbage printf 'GET / HTTP/1.0\r\n\r\n'
# A hello header declaring 0x00010001 bytes.
send oversized printf 'NCWPING\001\001\000\001\000\001'
send silence sleep 5
# A hello header declaring 200 (octal 310) bytes, then 20 of them.
send truncated printf 'NCWPING\001\001\000\000\000\31001234567890123456789'
hello='{"host":"hostile","ports":[{"device":"rxe0","port":1,"link_layer":"Ethernet","gid_index":1,"gid":"0000:0000:0000:0000:0000:ffff:0a00:6402","gid_type":"RoCE v2","lid":null,"mtu":1024,"pkey":null,"netdev":"eth1"}],"all_pairs":false,"bytes":65536,"iters":10,"duration_ms":0}'
# The hello, then 2 s for the listener's hello and setup to come back, then the connection closes.
midway() { frame 1 "$hello"; sleep 2; }
send midway midway
assert "mid-exchange: the listener answered the hello before the peer vanished" grep -q 'NCWPING' /tmp/fab.h.midway
# 1 GiB per pair asked for, then 3 s for the listener to answer, register and set up.
greedy() { frame 1 "$(echo "$hello" | sed 's/"bytes":65536/"bytes":1073741824/')"; sleep 3; }
send greedy greedy
assert "greedy: the listener's hello answers with its own size" grep -q '"bytes":65536' /tmp/fab.h.greedy
assert "greedy: not the size asked for" sh -c '! grep -q "\"bytes\":1073741824" /tmp/fab.h.greedy'
fab_client 0 good "$FAB_CLIENT_TIMEOUT" sh -c "exec $NCCL_WRAP ping $(pod_addr 0):$port --json $FAB_PING_ARGS 2>/tmp/fab.good.err"
fab_post h.done
assert_eq "good peer after the hostile ones: exit" 0 "$CLI_RC"
l=$(pj_pair /tmp/fab.good.cli 0)
assert_eq "good peer: pair status" pass "$(pj_status "$l")"
finish "6 hostile peers sent; good peer exit $CLI_RC after ${CLI_SECS}s: $(pj_status "$l")"
