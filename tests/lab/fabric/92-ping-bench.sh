# lab-nodes: 2
# nccl-wrap ping against perftest on one rxe pair between two guests (rail 0, MTU
# $LAB_FABRIC_BENCH_MTU, default 1500, active MTU 1024): ib_write_bw (-s $LAB_FABRIC_BW_SIZE,
# default 65536, -D $LAB_FABRIC_BW_SECS, default 5), ib_send_lat (-s 8, -n $LAB_FABRIC_LAT_ITERS,
# default 200), then `nccl-wrap ping --bytes SIZE --duration-ms SECS*1000 --iters ITERS` (8-byte
# SENDs one way, as ib_send_lat; RDMA WRITEs of SIZE, as ib_write_bw). Node 1 prints LAB-BENCH
# lines for the three and the ratios ping / perftest (goal: bandwidth >= 0.9, median latency
# <= 1.2; under TCG every packet crosses two emulated guests, so these measure the emulator).
# perftest runs with ping's ACK timeout for this deadline (-u 17: --timeout-ms 30000 gives 17,
# 0.54 s a try, where perftest's own 14 retransmits after 67 ms, within TCG's round trip under
# load). A perftest run that fails at either end is tried once more (perf_pair); one that fails
# twice leaves nothing to compare with: SKIP, named, unless ping's own checks failed.
. /lab/fabric/lib.sh
mtu=${LAB_FABRIC_BENCH_MTU:-1500}
size=${LAB_FABRIC_BW_SIZE:-65536}
secs=${LAB_FABRIC_BW_SECS:-5}
lat_iters=${LAB_FABRIC_LAT_ITERS:-200}

require "rail 0 up with rxe0 (MTU $mtu)" fab_rail 0 "$mtu"
require "both nodes have their rails" fab_barrier rails
am=$(active_mtu rxe0)

# yardstick NAME: after perf_pair, NAME's run as measured (said, and named in `retried` when it took
# two tries) or as missing (named in `unmeasured`, and false).
unmeasured= retried=
yardstick() {
    if [ -n "$PERF_FAILED" ]; then
        unmeasured="${unmeasured:+$unmeasured; }$1 failed twice: $PERF_NOTE"
        return 1
    fi
    say "ok   $1 ran${PERF_NOTE:+ on its second try (first: $PERF_NOTE)}"
    retried="$retried${PERF_NOTE:+${retried:+, }$1 ($PERF_NOTE)}"
}
bw= lmed= lp99=
perf_pair 0 1 bw 18515 "$FAB_CLIENT_TIMEOUT" ib_write_bw -d rxe0 -x 1 -u 17 -s "$size" -D "$secs" --report_gbits
yardstick ib_write_bw && bw=$(awk '/#bytes/ {h = 1; next} h && $1 ~ /^[0-9]+$/ {print $4; exit}' "$OUT")
perf_pair 0 1 lat 18516 "$FAB_CLIENT_TIMEOUT" ib_send_lat -d rxe0 -x 1 -u 17 -s 8 -n "$lat_iters"
if yardstick ib_send_lat; then
    set -- $(awk '/#bytes/ {h = 1; next} h && $1 ~ /^[0-9]+$/ {print $5, $8; exit}' "$OUT")
    lmed=$1 lp99=$2
fi
ping_pair 0 1 ping 18517 "$FAB_CLIENT_TIMEOUT" --bytes="$size" --duration-ms="$((secs * 1000))" \
    --iters="$lat_iters" --timeout-ms=30000
assert_eq "ping exit" 0 "$RC"
l=$(pj_pair "$OUT" 0)
pmed=$(pj_median "$l") pp99=$(pj_p99 "$l") pgb=$(pj_gbps "$l")

if [ "$LAB_NODE" = 1 ]; then
    case $unmeasured in *ib_write_bw*) ;; *) assert "ib_write_bw reported a bandwidth" positive "$bw" ;; esac
    case $unmeasured in *ib_send_lat*) ;; *) assert "ib_send_lat reported a median" positive "$lmed" ;; esac
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
    [ -n "$LAB_FAILED" ] || [ -z "$unmeasured" ] ||
        skip "the perftest yardstick is missing, so no ratio (ping $pgbit Gb/s, median ${pmed:-?} us): $unmeasured"
    finish "ib_write_bw ${bw:-?} Gb/s, ping $pgbit Gb/s (x$rbw); ib_send_lat median ${lmed:-?} us, ping ${pmed:-?} us (x$rlat)${retried:+; tried twice: $retried}"
fi
[ -n "$LAB_FAILED" ] || [ -z "$unmeasured" ] || skip "served ping (exit $RC); $unmeasured"
finish "served ib_write_bw, ib_send_lat, nccl-wrap ping: exit $RC"
