# lab-nodes: 2
# nccl-wrap ping against perftest on one rxe pair between two guests (rail 0, MTU
# $LAB_FABRIC_BENCH_MTU, default 1500, active MTU 1024): ib_write_bw (-s $LAB_FABRIC_BW_SIZE,
# default 65536, -D $LAB_FABRIC_BW_SECS, default 5), ib_send_lat (-s 8, -n $LAB_FABRIC_LAT_ITERS,
# default 200), then `nccl-wrap ping --bytes SIZE --duration-ms SECS*1000 --iters ITERS` (8-byte
# SENDs one way, as ib_send_lat; RDMA WRITEs of SIZE, as ib_write_bw). Node 1 prints LAB-BENCH
# lines for the three and the ratios ping / perftest (goal: bandwidth >= 0.9, median latency
# <= 1.2; under TCG every packet crosses two emulated guests, so these measure the emulator).
. /lab/fabric/lib.sh
mtu=${LAB_FABRIC_BENCH_MTU:-1500}
size=${LAB_FABRIC_BW_SIZE:-65536}
secs=${LAB_FABRIC_BW_SECS:-5}
lat_iters=${LAB_FABRIC_LAT_ITERS:-200}

require "rail 0 up with rxe0 (MTU $mtu)" fab_rail 0 "$mtu"
require "both nodes have their rails" fab_barrier rails
am=$(active_mtu rxe0)

pair 0 1 bw 18515 "$FAB_CLIENT_TIMEOUT" ib_write_bw -d rxe0 -x 1 -s "$size" -D "$secs" --report_gbits
assert_eq "ib_write_bw exit" 0 "$RC"
bw=$(awk '/#bytes/ {h = 1; next} h && $1 ~ /^[0-9]+$/ {print $4; exit}' "$OUT")
pair 0 1 lat 18516 "$FAB_CLIENT_TIMEOUT" ib_send_lat -d rxe0 -x 1 -s 8 -n "$lat_iters"
assert_eq "ib_send_lat exit" 0 "$RC"
set -- $(awk '/#bytes/ {h = 1; next} h && $1 ~ /^[0-9]+$/ {print $5, $8; exit}' "$OUT")
lmed=$1 lp99=$2
ping_pair 0 1 ping 18517 "$FAB_CLIENT_TIMEOUT" --bytes="$size" --duration-ms="$((secs * 1000))" \
    --iters="$lat_iters" --timeout-ms=30000
assert_eq "ping exit" 0 "$RC"
l=$(pj_pair "$OUT" 0)
pmed=$(pj_median "$l") pp99=$(pj_p99 "$l") pgb=$(pj_gbps "$l")

if [ "$LAB_NODE" = 1 ]; then
    assert "ib_write_bw reported a bandwidth" positive "$bw"
    assert "ib_send_lat reported a median" positive "$lmed"
    assert "ping reported a median" positive "$pmed"
    assert "ping reported a bandwidth" positive "$pgb"
    # ping reports GB/s (10^9 bytes), ib_write_bw --report_gbits Gb/s.
    pgbit=$(awk -v g="$pgb" 'BEGIN{printf "%.4f", g * 8}')
    rbw=$(awk -v p="$pgbit" -v b="$bw" 'BEGIN{if (b > 0) printf "%.2f", p / b; else print "?"}')
    rlat=$(awk -v p="$pmed" -v b="$lmed" 'BEGIN{if (b > 0) printf "%.2f", p / b; else print "?"}')
    echo "LAB-BENCH ib_write_bw gbps=${bw:-?} size=$size secs=$secs mtu=$am"
    echo "LAB-BENCH ib_send_lat median_us=${lmed:-?} p99_us=${lp99:-?} size=8 iters=$lat_iters mtu=$am"
    echo "LAB-BENCH nccl-wrap-ping median_us=${pmed:-?} p99_us=${pp99:-?} gbps=$pgbit gbytes_per_s=${pgb:-?} size=$size secs=$secs iters=$lat_iters mtu=$am"
    echo "LAB-BENCH ratio ping/ib_write_bw=$rbw ping/ib_send_lat=$rlat (goal >= 0.9, <= 1.2)"
    finish "ib_write_bw ${bw:-?} Gb/s, ping $pgbit Gb/s (x$rbw); ib_send_lat median ${lmed:-?} us, ping ${pmed:-?} us (x$rlat)"
fi
finish "served ib_write_bw, ib_send_lat, nccl-wrap ping: exit $RC"
