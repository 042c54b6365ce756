# What the verbs probe and the self-test add to start-up, on the lab's one rxe port (TCG: absolute
# times are pessimistic, many times a real host's). busybox has no sub-second clock but
# /proc/uptime (10 ms steps), so each figure is the mean of a batch of 20 runs of
# `nccl-wrap -q [--skip-verbs|--selftest] -- /bin/true`. Reports; asserts only that runs succeed.
. "$(dirname "$0")/lib.sh"

require "rxe0 on veth0" lab_veth_rxe veth0 veth1 rxe0 10.60.0.1 10.60.0.2

centis() { tr -d . </proc/uptime | cut -d' ' -f1; }
mean_us() { # mean_us CMD...: mean wall time of 20 runs, in microseconds
    t0=$(centis); i=0
    while [ $i -lt 20 ]; do "$@" >/dev/null 2>&1 || return 1; i=$((i + 1)); done
    t1=$(centis); echo $(((t1 - t0) * 10000 / 20))
}
base=$(mean_us /bin/true)
sysfs_only=$(mean_us "$NCCL_WRAP" -q --skip-verbs -- /bin/true)
with_verbs=$(mean_us "$NCCL_WRAP" -q -- /bin/true)
st_1m=$(mean_us "$NCCL_WRAP" -q --selftest --selftest-bytes=1048576 --selftest-timeout-ms=30000 -- /bin/true)
st_64m=$(mean_us "$NCCL_WRAP" -q --selftest --selftest-timeout-ms=30000 -- /bin/true)
for v in "$sysfs_only" "$with_verbs" "$st_1m" "$st_64m"; do assert "all runs succeeded" [ -n "$v" ]; done
say "TIMING /bin/true: $base us; nccl-wrap --skip-verbs: $sysfs_only us; with verbs probe: $with_verbs us; --selftest 1 MiB: $st_1m us; --selftest 64 MiB: $st_64m us"
finish "means of 20 (TCG): true ${base} us; sysfs only ${sysfs_only} us; verbs probe +$((with_verbs - sysfs_only)) us; self-test +$((st_1m - with_verbs)) us (1 MiB), +$((st_64m - with_verbs)) us (64 MiB) per port"
