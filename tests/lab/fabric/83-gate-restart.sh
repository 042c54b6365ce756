# lab-nodes: 2
# A job restarted in place, as JobSet's in-place restart agent runs it (main-container mode): an
# agent-like parent shell, not nccl-wrap, is the one that stays, and runs
#   nccl-wrap --supervise --gate -- COMMAND
# as its worker. Attempt 1's command fails (exit 3) after the gate let it start: nccl-wrap, a
# supervising child rather than PID 1, hands the 3 to its parent and says the post-mortem. The parent runs attempt 2 at once, on the same addresses and gate ports,
# while the kernel still holds attempt 1's gate connections in TIME_WAIT: the gate binds again,
# tests both rails of both edges, and the command runs (exit 0).
. /lab/fabric/lib.sh

require "rail 0 up with rxe0" fab_rail 0
require "rail 1 up with rxe1" fab_rail 1
gate_env
require "every node has its rails" fab_barrier rails

# attempt N EXIT: one worker run under the agent-like parent; the command prints its parent
# (nccl-wrap) and nccl-wrap's parent, then exits EXIT.
attempt() {
    _t0=$(now)
    timeout "$FAB_CLIENT_TIMEOUT" sh -c '
        "$@"; echo "agent-saw=$?"' agent $NCCL_WRAP --supervise --gate -- \
        sh -c 'echo "gate-started pid1=$(cat /proc/1/comm) wrap=$PPID wrap-parent=$(cut -d" " -f4 /proc/$PPID/stat)"; exit '"$2" \
        >"/tmp/fab.try$1.out" 2>"/tmp/fab.try$1.err"
    RC=$?
    SECS=$(since "$_t0")
    say "attempt $1: exit $RC after ${SECS}s"
    sed 's/^/      out| /' "/tmp/fab.try$1.out" | grep -v '"kind":"pair"' | head -n 8
    grep -v '^nccl-wrap:   \|^nccl-wrap: set \|RLIMIT_MEMLOCK' "/tmp/fab.try$1.err" | sed 's/^/      err| /' | head -n 12
}

attempt 1 3
assert "attempt 1: the gate let the command start" grep -q '^gate-started' /tmp/fab.try1.out
assert "attempt 1: nccl-wrap was not PID 1" sh -c '! grep -q "wrap=1 " /tmp/fab.try1.out'
assert "attempt 1: the agent saw the command's exit 3" grep -q '^agent-saw=3$' /tmp/fab.try1.out
# Its links did not move and RAS named nothing: no termination message, so that Kubernetes shows the
# command's own log tail (FallbackToLogsOnError) as the reason; the post-mortem says it on stderr.
assert "attempt 1: the post-mortem on stderr" grep -q 'post-mortem: the command exited with status 3' /tmp/fab.try1.err
assert "attempt 1: no termination message over the command's own log tail" test ! -e /tmp/fab.gate.term
ended=$(now)
held=$(cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | awk '$4 == "06" && substr($2, length($2)-4) == ":4854"' | wc -l)
say "connections on this node's gate port 18516 in TIME_WAIT: $held"
rm -f /tmp/fab.gate.term

attempt 2 0
gap=$(awk -v a="$ended" -v b="$_t0" 'BEGIN{printf "%.2f", b-a}')
assert "attempt 2 began within a second of attempt 1's end" awk -v g="$gap" 'BEGIN{exit !(g < 1)}'
assert "attempt 2: the command ran" grep -q '^gate-started' /tmp/fab.try2.out
assert "attempt 2: the agent saw exit 0" grep -q '^agent-saw=0$' /tmp/fab.try2.out
assert_eq "attempt 2: verdict go" true "$(gv_field /tmp/fab.try2.out go)"
assert_eq "attempt 2: pairs (2 edges x 2 rails)" 4 "$(gv_field /tmp/fab.try2.out pairs)"
assert "attempt 2: the gate port bound again" sh -c '! grep -q "Address already in use\|EADDRINUSE" /tmp/fab.try2.err'
assert "attempt 2: no termination message" test ! -e /tmp/fab.gate.term
finish "attempt 2 began ${gap}s after attempt 1 ended, with $held gate connection(s) in TIME_WAIT; verdict go in ${SECS}s"
