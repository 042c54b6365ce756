# lab-nodes: 2
# nccl-wrap ping run by uid 65534 with a 64 KiB memlock limit (no CAP_IPC_LOCK) against a root
# listener: registering the 64 KiB test buffer (plus message slots) is refused, and both ends
# name `memlock` for the pair; exit 1 on both. The uverbs nodes are opened up to nobody (0666).
. /lab/fabric/lib.sh

require "rail 0 up with rxe0" fab_rail 0
chmod 0666 /dev/infiniband/* 2>/dev/null
require "both nodes have their rails" fab_barrier rails

if [ "$LAB_NODE" = 0 ]; then
    ping_pair 0 1 mem 18515 "$FAB_CLIENT_TIMEOUT"
else
    fab_client 0 mem "$FAB_CLIENT_TIMEOUT" sh -c "ulimit -l 64 && exec su -s /bin/sh nobody -c 'exec $NCCL_WRAP ping $(pod_addr 0):18515 --json $FAB_PING_ARGS 2>/tmp/fab.mem.cli.err'"
    RC=$CLI_RC OUT=/tmp/fab.mem.cli
    sed 's/^/      err| /' /tmp/fab.mem.cli.err 2>/dev/null | head -n 20
fi
assert_eq "ping exit" 1 "$RC"
assert_eq "summary: pairs failed exit" "1 1 1" "$(pj_summary "$OUT")"
l=$(pj_pair "$OUT" 0)
assert_eq "pair status" fail "$(pj_status "$l")"
assert_eq "pair cause" memlock "$(pj_cause "$l")"
assert "evidence: reg_mr" has "$l" '"step":"reg_mr"'
if [ "$LAB_NODE" = 1 ]; then side=local; else side=remote; fi
assert "evidence: the $side side" has "$l" "\"side\":\"$side\""
finish "exit $RC: $(pj_cause "$l"): $(pj_summary_of "$l")"
