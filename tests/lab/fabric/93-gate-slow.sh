# lab-nodes: 3
# A rail that works but slowly, under the gate and the node agents' ring: node 1 shapes what
# leaves eth1 (rail 0) to 10 Mbit/s with a tbf whose queue holds seconds of traffic, so nothing
# is dropped and RoCE never retries (Soft-RoCE under TCG moves 30-40 Mbit/s per rail here; at
# 4 Mbit/s the agent's 2 s phase deadline ends the pair as a timeout instead, rightly).
# Gate: every pod starts (a slow pair is a warning), and every verdict lists node-1's rxe0:1
# towards node-2 as the slowest pair, with its figure and the job's median (node-0's pair into
# node-1's rail 0 may be named too: its acknowledgements queue behind the shaped traffic); with
# NCCL_WRAP_GATE_REFUSE_SLOW=1 the same job stops on every pod with exit 125, the slow pair in the
# termination message. Ring: each node's agent (`watch --ring`, the peers from one name in
# /etc/hosts) tests its successor; node 1's metrics show rail 0's pair as warn with cause
# slow-pair and a bandwidth figure below rail 1's; no pair fails anywhere. (An agent compares
# only its own two rails, over a 200 ms run: under emulation an unshaped pair is now and then
# named slow too, and node 0's rail 0 pair into node 1 may rightly be, as its acknowledgements
# leave node 1 through the shaped queue; neither is asserted.)
. /lab/fabric/lib.sh

require "rail 0 up with rxe0" fab_rail 0
require "rail 1 up with rxe1" fab_rail 1
if [ "$LAB_NODE" = 1 ]; then
    require "tbf of 10 Mbit/s on what leaves eth1" $TC qdisc add dev eth1 root tbf rate 10mbit burst 32kb latency 10s
fi
gate_env
require "every node has its rails, the shaping in place" fab_barrier rails

gate_run gate
assert_eq "gate exit" 0 "$RC"
assert "the command ran" grep -q '^gate-started$' /tmp/fab.gate.out
assert_eq "verdict: go" true "$(gv_field /tmp/fab.gate.out go)"
assert_eq "verdict: pairs" 6 "$(gv_field /tmp/fab.gate.out pairs)"
n=$(gv_field /tmp/fab.gate.out slow_total)
assert "verdict: slow pairs listed (${n:-none})" test "${n:-0}" -ge 1
grep 'gate: SLOW ' /tmp/fab.gate.err | sed 's/^/      slow| /'
grep 'gate: SLOW ' /tmp/fab.gate.err | head -n1 >/tmp/fab.slow1
assert "the slowest is node-1's rail 0 towards node-2, with its figure and the median" \
    grep -q 'SLOW node-1 (rank 1) rxe0:1 -> node-2 (rank 2) rxe0:1: slow-pair: passes, but slowly: [0-9.]* [kMG]b/s: [0-9]* % of the job.s median [0-9.]* [kMG]b/s' /tmp/fab.slow1
# Others may be named too: node-0's pair into node-1's rail 0 (its acknowledgements queue behind
# the shaped traffic), and under emulation an unshaped pair whose short run came out far below
# the others; they are shown, not asserted.
grep 'gate: SLOW ' /tmp/fab.gate.err | grep -v 'SLOW node-1 (rank 1) rxe0:1 -> node-2' | sed 's/^/      also| /'
assert "the headline says so" grep -q "gate: every pair passes (6 pair(s) over 3 pod(s)); $n of them slow, named below" /tmp/fab.gate.err
require "every node's first gate is over" fab_barrier gate1

# Asked to refuse: the same job stops everywhere, the slow pair in the termination message.
export NCCL_WRAP_GATE_REFUSE_SLOW=1
gate_run refuse
unset NCCL_WRAP_GATE_REFUSE_SLOW
assert_eq "refuse-slow: exit" 125 "$RC"
assert "refuse-slow: the command did not run" sh -c '! grep -q gate-started /tmp/fab.refuse.out'
require "refuse-slow: a termination message" test -s /tmp/fab.gate.term
assert "refuse-slow: the slow pair in the termination message" \
    grep -q 'node-1 (rank 1) rxe0:1 -> node-2 (rank 2) rxe0:1: slow-pair: passes, but slowly' /tmp/fab.gate.term
require "every node's second gate is over" fab_barrier gate2

# The ring: one name for the three nodes, as a headless Service resolves.
echo 'multi on' >>/etc/host.conf
for n in $(seq 0 $((LAB_NODES - 1))); do echo "$(pod_addr "$n") agents"; done >>/etc/hosts
# Every agent runs until all have written three rounds (the ring's listeners stay up meanwhile, so
# the last round of each met its successor listening), then is stopped. SIGTERM ends an agent
# after the round in progress, and a fourth round begun towards a successor already stopped waits
# out the ring's timeout (20 s a rail under emulation): rounds 15 s apart keep the stop between
# rounds (the third written on every node well before any fourth begins).
$NCCL_WRAP watch --ring agents:18517 --ring-every 1 --ring-timeout-ms 20000 --interval 15 --jitter 0 \
    --metrics /tmp/fab.ring.prom --features /tmp/fab.ring.features >/tmp/fab.ring.out 2>/tmp/fab.ring.err &
agent=$!
echo "$agent" >>"$FAB_PIDS"
rounds() { sed -n 's/^nccl_wrap_rounds_total //p' /tmp/fab.ring.prom 2>/dev/null; }
for _ in $(seq 120); do [ "$(rounds)" -ge 3 ] 2>/dev/null && break; sleep 1; done
require "watch --ring: three rounds written" test "$(rounds)" -ge 3
require "every agent has three rounds" fab_barrier ring
kill "$agent"
wait "$agent"
RC=$?
assert_eq "watch --ring: stopped cleanly by SIGTERM" 0 "$RC"
grep 'ring' /tmp/fab.ring.err | sed 's/^/      err| /' | head -n 12
grep 'ring_pair' /tmp/fab.ring.prom | sed 's/^/      prom| /'
if [ "$LAB_NODE" = 1 ]; then
    assert "ring: rail 0's pair is slow (warn, slow-pair)" \
        grep -q '^nccl_wrap_ring_pair_status{peer="192.168.0.3",device="rxe0",port="1",cause="slow-pair"} 1$' /tmp/fab.ring.prom
    g0=$(sed -n 's/^nccl_wrap_ring_pair_bandwidth_bytes_per_second{.*device="rxe0".*} //p' /tmp/fab.ring.prom)
    g1=$(sed -n 's/^nccl_wrap_ring_pair_bandwidth_bytes_per_second{.*device="rxe1".*} //p' /tmp/fab.ring.prom)
    assert "ring: rail 0's figure ($g0 B/s) below rail 1's ($g1 B/s)" awk -v a="$g0" -v b="$g1" 'BEGIN {exit !(a > 0 && a < b)}'
    assert "ring: the slow pair said on stderr" grep -q 'ring: warn towards 192.168.0.3 .*rxe0:1 slow-pair' /tmp/fab.ring.err
fi
assert "ring: no pair fails" sh -c '! grep -q "^nccl_wrap_ring_pair_status{.*} 2$" /tmp/fab.ring.prom'
finish "slowest pair: $(sed 's/.*slowly: //' /tmp/fab.slow1 | cut -c1-80)"
