# lab-nodes: 2
# MTU 1500 on node 0's rail 0, 9000 on node 1's: rxe derives the active MTU from the net device
# (1024 vs 4096, ibv_devinfo). The default path MTU of ibv_rc_pingpong (1024) works; perftest
# agrees on the smaller MTU and works; path MTU 4096 forced on both sides (rc_probe -m 4096,
# 4 KiB messages, QP timeout 14, retry_cnt $LAB_FABRIC_RETRY default 6) does not complete within
# $LAB_FABRIC_HANG_SECS (default 8) seconds, or fails: records how, with rxe's counters.
. /lab/fabric/lib.sh
r=${LAB_FABRIC_RETRY:-6}
hang=${LAB_FABRIC_HANG_SECS:-8}

if [ "$LAB_NODE" = 0 ]; then mtu=1500; want=1024; else mtu=9000; want=4096; fi
require "rail 0 up with MTU $mtu" fab_rail 0 "$mtu"
am=$(active_mtu rxe0)
assert_eq "rxe0 active_mtu (ibv_devinfo) with net MTU $mtu" "$want" "$am"
fab_post mtu "$am"
peer_am=$(fab_wait $((1 - LAB_NODE)) mtu)
say "active_mtu here $am, on the peer $peer_am"
assert "the two ends differ" test "$am" != "$peer_am"

pair 0 1 dflt 18515 "$FAB_CLIENT_TIMEOUT" ibv_rc_pingpong -d rxe0 -g 1 -n 5 -s 4096
assert_eq "ibv_rc_pingpong, path MTU 1024 (its default), 4 KiB messages: exit" 0 "$RC"
pair 0 1 pt 18516 "$FAB_CLIENT_TIMEOUT" ib_send_lat -d rxe0 -x 1 -s 4096 -n 20
pt_mtu=$(sed -n 's/^ *Mtu *: *\([0-9]*\).*/\1/p' "$OUT" | head -n1)
assert_eq "ib_send_lat 4 KiB (perftest chose MTU $pt_mtu): exit" 0 "$RC"
c0=$(hw_counters rxe0)
pair 0 1 big 18517 "$hang" rc_probe -d rxe0 -g 1 -m 4096 -s 4096 -n 5 -t 14 -r "$r"
big="exit $RC${SECS:+ after ${SECS}s}: $(probe_line "$OUT")"
assert "path MTU 4096 on both sides, 4 KiB messages: fails ($big)" test "$RC" != 0
[ "$LAB_NODE" = 0 ] || assert "path MTU 4096: no success (timed out or a completion error)" \
    test "$RC" = 124 -o -n "$(probe_status "$OUT")"
say "rxe0 counters before: $c0"
say "rxe0 counters after:  $(hw_counters rxe0)"
finish "active_mtu $am here, $peer_am on the peer; ibv_rc_pingpong -m 1024 passes; ib_send_lat picks MTU ${pt_mtu:-?} and passes; rc_probe -m 4096: $big; $(grep -m1 '^iteration 1' "$OUT")"
