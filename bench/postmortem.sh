#!/usr/bin/env bash
# Cost of the post-mortem's watch, on the 4-port h100-roce-sriov fixture copied to a scratch
# directory, each port given mlx5's counter files (21 in counters/, 33 in hw_counters/):
#   1. CPU per poll: nccl-wrap's own CPU time (/proc/PID/schedstat, read by the command at its
#      end) supervising `sleep SECS` with --watch-ms 10, minus the same with --watch-ms 0, divided
#      by the polls the report counts; and what that makes in an hour at the default 1000 ms;
#   2. the first reading (state and every counter of the 4 ports, taken before the fork), as the
#      debug log times it.
# Medians of RUNS. Regular files on the scratch filesystem stand in for sysfs: on mlx5 a read of
# a counters/ file is a firmware query, so the first and last readings cost more there; a poll
# reads only state and phys_state.
#
#   bash bench/postmortem.sh [RUNS] [SECS]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
secs=${2:-10}
. bench/lib.sh
cp -a fixtures/nodes/h100-roce-sriov "$tmp/node"
load_env "$tmp/node/env"
export NCCL_WRAP_SYSFS_ROOT=$tmp/node/sys NCCL_WRAP_ANNOTATIONS=/nonexistent
ib="symbol_error link_error_recovery link_downed port_rcv_errors port_rcv_remote_physical_errors
  port_rcv_switch_relay_errors port_xmit_discards port_xmit_constraint_errors
  port_rcv_constraint_errors local_link_integrity_errors excessive_buffer_overrun_errors VL15_dropped
  port_xmit_data port_rcv_data port_xmit_packets port_rcv_packets port_xmit_wait
  unicast_xmit_packets unicast_rcv_packets multicast_xmit_packets multicast_rcv_packets"
hw="duplicate_request implied_nak_seq_err lifespan local_ack_timeout_err np_cnp_sent
  np_ecn_marked_roce_packets out_of_buffer out_of_sequence packet_seq_err req_cqe_error
  req_cqe_flush_error req_remote_access_errors req_remote_invalid_request resp_cqe_error
  resp_cqe_flush_error resp_local_length_error resp_remote_access_errors rnr_nak_retry_err
  roce_adp_retrans roce_adp_retrans_to roce_slow_restart roce_slow_restart_cnps
  roce_slow_restart_trans rp_cnp_handled rp_cnp_ignored rx_atomic_requests rx_dct_connect
  rx_icrc_encapsulated rx_read_requests rx_write_requests rx_ecn_marked_roce_packets
  rx_roce_only rx_dct_only"
for dev in mlx5_6 mlx5_7 mlx5_10 mlx5_11; do
  p=$tmp/node/sys/class/infiniband/$dev/ports/1
  mkdir -p "$p/counters" "$p/hw_counters"
  for c in $ib; do echo 0 >"$p/counters/$c"; done
  for c in $hw; do echo 0 >"$p/hw_counters/$c"; done
done

cpu() { # WATCH_MS: "cpu_ns polls"
  local ns
  ns=$(env -u NCCL_WRAP_LOG "$bin" -q --supervise --watch-ms "$1" --report "$tmp/r.json" -- \
    sh -c "sleep $secs; cut -d' ' -f1 /proc/\$PPID/schedstat")
  echo "$ns $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["polls"])' "$tmp/r.json")"
}
first() { # the debug log's time of the first reading, in us
  NCCL_WRAP_LOG=nw_postmortem::portwatch=debug "$bin" -q --supervise -- true 2>&1 |
    sed -n 's/.*first reading of \([0-9]*\) port(s) took \(.*\)$/\2/p' |
    python3 -c 'import sys,re; t=sys.stdin.read().strip(); m=re.match(r"([0-9.]+)(ns|µs|us|ms|s)$", t); f={"ns":1e-3,"µs":1,"us":1,"ms":1e3,"s":1e6}; print(float(m.group(1))*f[m.group(2)])'
}
rows=()
for i in $(seq "$runs"); do
  read -r base _ < <(cpu 0)
  read -r polled polls < <(cpu 10)
  rows+=("$base $polled $polls $(first)")
done
printf '%s\n' "${rows[@]}" | python3 -c '
import statistics, sys
per_poll, firsts, bases = [], [], []
for line in sys.stdin:
    base, polled, polls, first = line.split()
    per_poll.append((int(polled) - int(base)) / int(polls) / 1e3)
    firsts.append(float(first)); bases.append(int(base) / 1e6)
pp = statistics.median(per_poll)
print(f"watch, 4 ports: {pp:.1f} us CPU a poll (median of {len(per_poll)}; runs {min(per_poll):.1f}-{max(per_poll):.1f}); "
      f"at the default --watch-ms 1000: {pp * 3600 / 1e6:.3f} s CPU an hour ({pp * 3600 / 1e6 / 36:.5f} % of one core)")
print(f"first reading (state + 54 counter files x 4 ports): {statistics.median(firsts):.0f} us median "
      f"({min(firsts):.0f}-{max(firsts):.0f}); supervising without polls: {statistics.median(bases):.2f} ms CPU in all")
'
echo "machine: $(nproc) cores, $(uname -r)"
