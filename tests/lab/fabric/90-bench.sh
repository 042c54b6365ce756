# lab-nodes: 2
# Anchor figures on one rxe pair between two guests (rail 0, MTU $LAB_FABRIC_BENCH_MTU, default
# 1500): ib_write_bw (-s $LAB_FABRIC_BW_SIZE, default 65536, for -D $LAB_FABRIC_BW_SECS, default 5
# seconds) and ib_send_lat (-s 8, -n $LAB_FABRIC_LAT_ITERS, default 200), plus ibv_rc_pingpong.
# Node 1 prints LAB-BENCH lines. Under TCG these measure the emulator, not a NIC: they anchor the
# numbers `nccl-wrap ping` will report in this lab.
. /lab/fabric/lib.sh
mtu=${LAB_FABRIC_BENCH_MTU:-1500}
size=${LAB_FABRIC_BW_SIZE:-65536}
secs=${LAB_FABRIC_BW_SECS:-5}
lat_iters=${LAB_FABRIC_LAT_ITERS:-200}

require "rail 0 up with rxe0 (MTU $mtu)" fab_rail 0 "$mtu"
require "both nodes have their rails" fab_barrier rails
am=$(active_mtu rxe0)

run_pair() {
    _t=$1 _p=$2
    shift 2
    if [ "$LAB_NODE" = 0 ]; then
        fab_serve 1 "$_t" "$_p" "$@" -p "$_p"
        RC=$SRV_RC OUT=/tmp/fab.$_t.srv
    else
        fab_client 0 "$_t" "$FAB_CLIENT_TIMEOUT" "$@" -p "$_p" "$(pod_addr 0)"
        RC=$CLI_RC OUT=/tmp/fab.$_t.cli
    fi
}

run_pair bw 18515 ib_write_bw -d rxe0 -x 1 -s "$size" -D "$secs" --report_gbits
assert_eq "ib_write_bw exit" 0 "$RC"
# Result row: "#bytes #iterations BW peak[Gb/sec] BW average[Gb/sec] MsgRate[Mpps]".
bw=$(awk '/#bytes/ {h = 1; next} h && $1 ~ /^[0-9]+$/ {print $4; exit}' "$OUT")
run_pair lat 18516 ib_send_lat -d rxe0 -x 1 -s 8 -n "$lat_iters"
assert_eq "ib_send_lat exit" 0 "$RC"
# "#bytes #iterations t_min t_max t_typical t_avg t_stdev 99% 99.9%" (usec); t_typical = median.
set -- $(awk '/#bytes/ {h = 1; next} h && $1 ~ /^[0-9]+$/ {print $5, $8, $6; exit}' "$OUT")
med=$1 p99=$2 avg=$3
run_pair pp 18517 ibv_rc_pingpong -d rxe0 -g 1 -n "$lat_iters" -s 8
assert_eq "ibv_rc_pingpong exit" 0 "$RC"
set -- $(pp_iters "$OUT")
pp=$2

if [ "$LAB_NODE" = 1 ]; then
    assert "ib_write_bw reported a bandwidth" test -n "$bw"
    assert "ib_send_lat reported a median" test -n "$med"
    echo "LAB-BENCH ib_write_bw gbps=${bw:-?} size=$size secs=$secs mtu=$am"
    echo "LAB-BENCH ib_send_lat median_us=${med:-?} p99_us=${p99:-?} avg_us=${avg:-?} size=8 iters=$lat_iters mtu=$am"
    echo "LAB-BENCH ibv_rc_pingpong usec_per_iter=${pp:-?} size=8 iters=$lat_iters mtu=$am"
    finish "ib_write_bw ${bw:-?} Gb/s; ib_send_lat median ${med:-?} us p99 ${p99:-?} us; ibv_rc_pingpong ${pp:-?} us/iter (active MTU $am)"
fi
finish "served ib_write_bw, ib_send_lat, ibv_rc_pingpong"
