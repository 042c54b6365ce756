# The post-mortem on a real kernel: nccl-wrap supervises (--supervise) a command while rxe0's net
# device is set down mid-run. The transition is logged when the watch sees it (device, change,
# UTC time), the command's exit status passes through, and the post-mortem names the port, the
# change, its time and rxe's link_downed counter; --report holds the same as JSON.
. "$(dirname "$0")/lib.sh"

require "rxe0 on veth0" lab_veth_rxe veth0 veth1 rxe0 10.85.0.1 10.85.0.2
rm -f /tmp/pm.ready /tmp/pm.go /tmp/pm.json
downed0=$(cat /sys/class/infiniband/rxe0/ports/1/hw_counters/link_downed)

# The command runs until told, then fails with 3, as a training process that lost its rail would.
"$NCCL_WRAP" -q --supervise --watch-ms 200 --report /tmp/pm.json -- \
    sh -c 'touch /tmp/pm.ready; while [ ! -e /tmp/pm.go ]; do usleep 50000; done; exit 3' \
    >"$OUT_FILE" 2>"$ERR_FILE" &
wpid=$!
waitfile() { _n=200; while [ ! -e "$1" ] && [ $_n -gt 0 ]; do usleep 50000; _n=$((_n - 1)); done; [ -e "$1" ]; }
require "the command started" waitfile /tmp/pm.ready
usleep 300000
down_at=$(date -u +%Y-%m-%dT%H:%M:%S)
lab_link_down veth0
require "rxe0 port goes DOWN" wait_port_state rxe0 1
# Logged while the command still runs. The kernel sets phys_state before state, so a poll may
# also see the step between them (ACTIVE/LinkUp -> ACTIVE/Disabled -> DOWN/Disabled).
_n=100
while ! grep -q 'port state .* -> DOWN/Disabled' "$ERR_FILE" && [ $_n -gt 0 ]; do usleep 50000; _n=$((_n - 1)); done
assert "the change to DOWN/Disabled logged during the run" grep -q '^nccl-wrap: [0-9TZ:.-]* rxe0:1 port state ACTIVE/[A-Za-z]* -> DOWN/Disabled$' "$ERR_FILE"
touch /tmp/pm.go
wait $wpid
rc=$?
sed 's/^/      err| /' "$ERR_FILE" | head -n 20
assert_eq "exit status of the command kept" 3 "$rc"
live=$(grep -m1 'port state ACTIVE/LinkUp' "$ERR_FILE")
say "live line: $live"
# nccl-wrap: 2026-11-23T18:40:12.345Z rxe0:1 port state ACTIVE/LinkUp -> DOWN/Disabled
assert "the live line starts with a UTC time" sh -c "echo '$live' | grep -Eq '^nccl-wrap: [0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z rxe0:1 '"
stamp=$(echo "$live" | sed -n 's/^nccl-wrap: \([0-9T:-]*\)\..*/\1/p')
say "set down at $down_at UTC (guest clock), logged at $stamp"
a=$(date -u -D '%Y-%m-%dT%H:%M:%S' -d "$down_at" +%s)
b=$(date -u -D '%Y-%m-%dT%H:%M:%S' -d "$stamp" +%s)
assert "the logged time is within 2 s after the change ($down_at -> $stamp)" [ $((b - a)) -ge 0 -a $((b - a)) -le 2 ]
assert "post-mortem header" grep -q 'post-mortem: the command exited with status 3 after .* on its RDMA ports (rxe0:1) since it started:' "$ERR_FILE"
assert "post-mortem repeats the transitions" grep -q '^nccl-wrap:   [0-9TZ:.-]* rxe0:1 port state ACTIVE/[A-Za-z]* -> DOWN/Disabled$' "$ERR_FILE"
assert "post-mortem names link_downed with its meaning" grep -q 'rxe0:1 link_downed +1: the link went down' "$ERR_FILE"
assert "post-mortem names the JSON" grep -q 'post-mortem as JSON: /tmp/pm.json' "$ERR_FILE"
assert "every stderr line is nccl-wrap's, prefixed" sh -c "! grep -v '^nccl-wrap: ' '$ERR_FILE'"
sed 's/^/      json| /' /tmp/pm.json | cut -c1-400
assert "JSON: the transitions, from ACTIVE/LinkUp" grep -q '"transitions":\[{"time":"[0-9T:.-]*Z","port":"rxe0:1","from":{"state":"ACTIVE","phys_state":"LinkUp"},"to":{"state":"[A-Z]*","phys_state":"[A-Za-z]*"},"seen":"poll"}' /tmp/pm.json
assert "JSON: to DOWN/Disabled, seen by a poll" grep -q '"to":{"state":"DOWN","phys_state":"Disabled"},"seen":"poll"}' /tmp/pm.json
assert "JSON: link_downed moved by one" grep -q "{\"name\":\"link_downed\",\"group\":\"hw_counters\",\"start\":$downed0,\"exit\":$((downed0 + 1)),\"delta\":1,\"kind\":\"error\"" /tmp/pm.json
assert "JSON: the exit code" grep -q '"command":{"code":3,"signal":null,"forwarded":null}' /tmp/pm.json

# Up again, a clean run with nothing changed adds nothing.
$IP link set veth0 up
require "rxe0 port ACTIVE again" wait_port_state rxe0 4
wrap -q --supervise -- true
assert_eq "clean run exit" 0 "$WRAP_RC"
assert_eq "clean run adds no line" "" "$(cat "$ERR_FILE")"
# The watch's cost on the kernel's own sysfs (TCG, so an upper bound): nccl-wrap's CPU time
# (/proc/PID/schedstat, ns) over 5 s of `sleep`, polling every 10 ms against not polling; the
# number of polls from the report.
cpu() { "$NCCL_WRAP" -q --supervise --watch-ms "$1" --report /tmp/pm-cpu.json -- sh -c 'sleep 5; cut -d" " -f1 /proc/$PPID/schedstat'; }
c0=$(cpu 0)
c10=$(cpu 10)
polls=$(sed -n 's/.*"polls":\([0-9]*\).*/\1/p' /tmp/pm-cpu.json)
per_poll=$(awk -v a="$c0" -v b="$c10" -v n="$polls" 'BEGIN{printf "%.0f", (b - a) / n / 1000}')
per_hour=$(awk -v p="$per_poll" 'BEGIN{printf "%.2f", p * 3600 / 1e6}')
say "watch cost: $c0 ns without polling, $c10 ns with $polls polls: $per_poll us a poll, ${per_hour} s CPU an hour at 1 s"
echo "LAB-BENCH postmortem-watch us_per_poll=$per_poll cpu_s_per_hour_at_1s=$per_hour"
assert "the watch costs CPU at all (polls are measured)" [ "$c10" -gt "$c0" ]
finish "rxe0 set down mid-run: logged at $stamp, post-mortem names rxe0:1, the change and link_downed +1; exit 3 kept; a poll costs $per_poll us (TCG)"
