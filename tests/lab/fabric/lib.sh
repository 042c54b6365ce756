# Helpers for fabric scenarios (busybox sh), sourced by node.sh and by every fabric scenario.
# Every guest of a fabric run is one node: LAB_NODE (0, 1, 2) of LAB_NODES, both from the kernel
# command line. NICs (named by node.sh from their MAC addresses):
#   eth0        pod network, 192.168.0.(1+node)/24, always up; busybox httpd on port 8000 serves
#               /tmp/www: the barrier flags and small values nodes exchange
#   eth(1+i)    rail i, 10.0.(100+i).(1+node)/24 once a scenario calls fab_rail i; rxe device rxe<i>
. /lab/scenarios/lib.sh
TC=/usr/sbin/tc
LAB_NODE=${LAB_NODE:-0}
LAB_NODES=${LAB_NODES:-1}
FAB_WWW=/tmp/www
FAB_HTTP_PORT=8000
FAB_PIDS=/tmp/fab-pids
# Knobs (fabric.sh passes every LAB_FABRIC_* variable of its environment on the kernel line).
FAB_PP_ITERS=${LAB_FABRIC_PP_ITERS:-20}        # ibv_rc_pingpong iterations per rail pair
FAB_WAIT=${LAB_FABRIC_WAIT:-60}                # seconds a node waits for a peer's flag
FAB_CLIENT_TIMEOUT=${LAB_FABRIC_CLIENT_TIMEOUT:-60}

say() { echo "  [$LAB_SCENARIO n$LAB_NODE $(cut -d" " -f1 /proc/uptime)] $*"; }

now() { cut -d' ' -f1 /proc/uptime; }
# since T0: seconds from T0 (a now value) until now, two decimals.
since() { awk -v a="$1" -v b="$(now)" 'BEGIN{printf "%.2f", b-a}'; }

pod_addr() { echo "192.168.0.$(($1 + 1))"; }
rail_addr() { echo "10.0.$((100 + $1)).$(($2 + 1))"; }  # rail_addr RAIL NODE
rail_dev() { echo "eth$(($1 + 1))"; }
next_node() { echo $(((LAB_NODE + 1) % LAB_NODES)); }
prev_node() { echo $(((LAB_NODE + LAB_NODES - 1) % LAB_NODES)); }

# --- exchange over the pod network (flags through busybox httpd, read with nc) ---------------------------------------------------------------

# fab_post NAME [VALUE]: publish a flag (value default 1) for this scenario; peers read it by HTTP.
fab_post() {
    mkdir -p "$FAB_WWW"
    printf '%s\n' "${2:-1}" >"$FAB_WWW/.tmp.$$"
    mv "$FAB_WWW/.tmp.$$" "$FAB_WWW/$LAB_SCENARIO.$1"
}

# fab_get NODE NAME: print a flag NODE published in this scenario; fails while it is not there.
fab_get() {
    if [ "$1" = "$LAB_NODE" ]; then
        cat "$FAB_WWW/$LAB_SCENARIO.$2" 2>/dev/null
    else
        # busybox wget (static Debian build) crashes; a plain HTTP/1.0 GET through nc instead.
        printf 'GET /%s HTTP/1.0\r\n\r\n' "$LAB_SCENARIO.$2" |
            nc -w 3 "$(pod_addr "$1")" "$FAB_HTTP_PORT" 2>/dev/null | tr -d '\r' |
            awk 'NR == 1 {ok = ($2 == "200"); next} ok && b {print} /^$/ {b = 1} END {exit !ok}'
    fi
}

# fab_wait NODE NAME [SECONDS]: wait for NODE's flag NAME and print its value.
fab_wait() {
    _w_end=$(awk -v a="$(now)" -v t="${3:-$FAB_WAIT}" 'BEGIN{print a+t}')
    while :; do
        fab_get "$1" "$2" && return 0
        awk -v a="$(now)" -v b="$_w_end" 'BEGIN{exit !(a>b)}' && break
        usleep 200000
    done
    say "no flag $2 from node $1 after ${3:-$FAB_WAIT}s"
    return 1
}

# fab_barrier NAME [SECONDS]: publish NAME, then wait until every node has published it.
fab_barrier() {
    fab_post "$1"
    _b=0
    while [ "$_b" -lt "$LAB_NODES" ]; do
        fab_wait "$_b" "$1" "${2:-$FAB_WAIT}" >/dev/null || return 1
        _b=$((_b + 1))
    done
}

# --- rails ---------------------------------------------------------------------------------------

# fab_rail RAIL [MTU] [noaddr]: rail RAIL's NIC up with MTU (default 1500) and its IPv4 address
# (unless "noaddr"), and rxe<RAIL> on it; waits for the port to be ACTIVE.
fab_rail() {
    _dev=$(rail_dev "$1")
    $IP link set "$_dev" mtu "${2:-1500}" || return 1
    [ "$3" = noaddr ] || $IP addr add "$(rail_addr "$1" "$LAB_NODE")/24" dev "$_dev" || return 1
    $IP link set "$_dev" up || return 1
    $RDMA link add "rxe$1" type rxe netdev "$_dev" || return 1
    wait_port_state "rxe$1" 4
}

# fab_reset: rails back to a clean state between scenarios: programs a scenario left running
# stopped, rxe devices removed, rail NICs without addresses or tc qdiscs, MTU 1500, up.
fab_reset() {
    if [ -f "$FAB_PIDS" ]; then
        for p in $(cat "$FAB_PIDS"); do kill "$p" 2>/dev/null; done
        rm -f "$FAB_PIDS"
    fi
    for d in /sys/class/infiniband/*; do
        [ -e "$d" ] && $RDMA link delete "${d##*/}" 2>/dev/null
    done
    # Pod namespaces (shared-device scenarios), with the macvlan children they hold.
    for ns in $($IP netns list 2>/dev/null | cut -d' ' -f1); do $IP netns delete "$ns"; done
    for l in $($IP -o link show type vlan 2>/dev/null | sed -n 's/^[0-9]*: \([^@:]*\).*/\1/p'); do
        $IP link delete "$l" 2>/dev/null
    done
    for n in /sys/class/net/eth*; do
        n=${n##*/}
        [ "$n" = eth0 ] && continue
        $TC qdisc del dev "$n" clsact 2>/dev/null
        $TC qdisc del dev "$n" root 2>/dev/null
        $IP addr flush dev "$n" 2>/dev/null
        $IP link set "$n" mtu 1500 2>/dev/null
        $IP link set "$n" up 2>/dev/null
    done
    rm -f /tmp/fab.*
}

# gid_of DEV INDEX: the GID at INDEX of DEV's port 1 ("" when unreadable).
gid_of() { cat "/sys/class/infiniband/$1/ports/1/gids/$2" 2>/dev/null; }

# gid_table DEV: every non-zero GID of DEV's port 1 as "INDEX GID TYPE NDEV" lines.
gid_table() {
    _g=/sys/class/infiniband/$1/ports/1
    for f in "$_g"/gids/*; do
        _i=${f##*/}
        _v=$(cat "$f" 2>/dev/null) || continue
        case $_v in "" | 0000:0000:0000:0000:0000:0000:0000:0000) continue ;; esac
        echo "$_i $_v $(cat "$_g/gid_attrs/types/$_i" 2>/dev/null | tr ' ' _) $(cat "$_g/gid_attrs/ndevs/$_i" 2>/dev/null)"
    done | sort -n
}

# active_mtu DEV: the port's active MTU in bytes as ibv_devinfo reports it.
active_mtu() { ibv_devinfo -d "$1" 2>/dev/null | sed -n 's/^[ \t]*active_mtu:[ \t]*\([0-9]*\).*/\1/p' | head -n1; }

# hw_counters DEV: rxe's non-zero port counters as "name=value ..." (sent_pkts, rcvd_pkts,
# retry_exceeded_err, send_err, ...).
hw_counters() {
    for f in /sys/class/infiniband/$1/ports/1/hw_counters/*; do
        [ -f "$f" ] || continue
        _v=$(cat "$f" 2>/dev/null)
        [ "${_v:-0}" = 0 ] || printf '%s=%s ' "${f##*/}" "$_v"
    done
}

# --- client/server pairs -------------------------------------------------------------------------

# wait_listen PORT [TENTHS]: until a TCP socket of this node listens on PORT (IPv4 or IPv6).
wait_listen() {
    _hex=$(printf ':%04X ' "$1")
    _n=${2:-150}
    while [ "$_n" -gt 0 ]; do
        cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | awk -v p="$_hex" \
            'substr($2, length($2)-4)" " == p && $4 == "0A" {f=1} END {exit !f}' && return 0
        usleep 100000
        _n=$((_n - 1))
    done
    return 1
}

# fab_serve CLIENT_NODE TAG PORT CMD...: run a server CMD listening on TCP PORT in the background,
# publish TAG.ready once it listens, then wait until it ends; when CLIENT_NODE has published
# TAG.done and the server still runs 3 s later, stop it (a server whose client failed would wait
# for ever). Output in /tmp/fab.TAG.srv, exit status in SRV_RC (SRV_KILLED=1 when stopped).
fab_serve() {
    _cn=$1 _tag=$2 _port=$3
    shift 3
    "$@" >"/tmp/fab.$_tag.srv" 2>&1 &
    _pid=$!
    echo "$_pid" >>"$FAB_PIDS"
    SRV_KILLED=
    if wait_listen "$_port"; then
        fab_post "$_tag.ready"
    else
        say "server $1 never listened on $_port"
        fab_post "$_tag.ready" nolisten
    fi
    _end=$(awk -v a="$(now)" -v t="$((FAB_CLIENT_TIMEOUT + FAB_WAIT))" 'BEGIN{print a+t}')
    _done_at=
    while kill -0 "$_pid" 2>/dev/null; do
        if [ -z "$_done_at" ] && fab_get "$_cn" "$_tag.done" >/dev/null; then _done_at=$(now); fi
        if { [ -n "$_done_at" ] && awk -v a="$(now)" -v b="$_done_at" 'BEGIN{exit !(a-b>3)}'; } ||
            awk -v a="$(now)" -v b="$_end" 'BEGIN{exit !(a>b)}'; then
            kill "$_pid" 2>/dev/null
            SRV_KILLED=1
            break
        fi
        usleep 200000
    done
    wait "$_pid"
    SRV_RC=$?
    say "server $1 -> exit $SRV_RC${SRV_KILLED:+ (stopped after the client ended)}"
    sed 's/^/      srv| /' "/tmp/fab.$_tag.srv" | head -n 40
}

# fab_client SERVER_NODE TAG SECONDS CMD...: wait for SERVER_NODE's TAG.ready, run CMD with a
# timeout of SECONDS, publish TAG.done. Output in /tmp/fab.TAG.cli, exit status in CLI_RC (124:
# timed out, 255: the server never became ready), wall time in CLI_SECS.
fab_client() {
    _sn=$1 _tag=$2 _to=$3
    shift 3
    CLI_SECS=0
    _r=$(fab_wait "$_sn" "$_tag.ready") || { CLI_RC=255; fab_post "$_tag.done" 255; return 0; }
    [ "$_r" = 1 ] || { say "server of $_tag not listening ($_r)"; CLI_RC=255; fab_post "$_tag.done" 255; return 0; }
    _t0=$(now)
    timeout "$_to" "$@" >"/tmp/fab.$_tag.cli" 2>&1
    CLI_RC=$?
    CLI_SECS=$(since "$_t0")
    # busybox timeout ends the program with SIGTERM and passes on its status (143), not 124.
    if [ "$CLI_RC" = 143 ] && awk -v a="$CLI_SECS" -v t="$_to" 'BEGIN{exit !(a >= t - 0.5)}'; then
        CLI_RC=124
    fi
    fab_post "$_tag.done" "$CLI_RC"
    say "client $1 -> exit $CLI_RC after ${CLI_SECS}s"
    sed 's/^/      cli| /' "/tmp/fab.$_tag.cli" | head -n 40
}

# first_error FILE: the first line of FILE that reports an error (verbs tools and perftest).
first_error() {
    grep -m1 -iE 'failed|error|couldn|unable|can.t|invalid|unreachable' "$1" 2>/dev/null |
        sed 's/^[ \t]*//'
}

# probe_status FILE: the completion status number rc_probe reported ("" when none).
probe_status() { sed -n 's/^completion error: status \([0-9]*\) .*/\1/p' "$1" | head -n1; }
# probe_line FILE: rc_probe's result line (ok ... or completion error ...), or its first error.
probe_line() {
    _l=$(grep -m1 -E '^(ok |completion error|error:)' "$1" 2>/dev/null)
    [ -n "$_l" ] || _l=$(first_error "$1")
    echo "${_l:-no completion}"
}

# pp_iters FILE: "N iters in S seconds = U usec/iter" line of ibv_rc_pingpong, as "N U".
pp_iters() { sed -n 's/^\([0-9]*\) iters in [0-9.]* seconds = \([0-9.]*\) usec\/iter.*/\1 \2/p' "$1" | head -n1; }

# pair SERVER CLIENT TAG PORT SECONDS CMD...: CMD as the server on node SERVER (CMD -p PORT) and as
# the client on node CLIENT (CMD -p PORT <SERVER's pod address>, at most SECONDS); any other node
# does nothing. Sets RC (this node's exit status), OUT (its output file), SECS (client's time).
pair() {
    _ps=$1 _pc=$2 _pt=$3 _pp=$4 _pto=$5
    shift 5
    RC= OUT= SECS=
    if [ "$LAB_NODE" = "$_ps" ]; then
        fab_serve "$_pc" "$_pt" "$_pp" "$@" -p "$_pp"
        RC=$SRV_RC OUT=/tmp/fab.$_pt.srv
    elif [ "$LAB_NODE" = "$_pc" ]; then
        fab_client "$_ps" "$_pt" "$_pto" "$@" -p "$_pp" "$(pod_addr "$_ps")"
        RC=$CLI_RC OUT=/tmp/fab.$_pt.cli SECS=$CLI_SECS
    fi
}

# perf_pair SERVER CLIENT TAG PORT SECONDS CMD...: `pair` for a perftest reference run, tried once
# more (TAG.2 on PORT + 10) when either end exited non-zero. perftest is the yardstick here, not
# the code under test, and under TCG it has failed with exit 1 at both ends, the pair fine before
# and after. Both ends publish their status after each try and read the other's, so they agree on
# the second try and on the outcome. Sets RC, OUT and SECS as `pair` does; PERF_FAILED=1 when the
# last try failed at either end, PERF_NOTE to what each failed try printed first.
perf_pair() {
    _fs=$1 _fc=$2 _ft=$3 _fp=$4 _fto=$5
    shift 5
    PERF_NOTE= PERF_FAILED=
    [ "$LAB_NODE" = "$_fs" ] || [ "$LAB_NODE" = "$_fc" ] || return 0
    _fo=$_fs
    [ "$LAB_NODE" = "$_fs" ] && _fo=$_fc
    for _try in 1 2; do
        _tt=$_ft
        [ "$_try" = 1 ] || _tt=$_ft.$_try
        pair "$_fs" "$_fc" "$_tt" "$((_fp + 10 * (_try - 1)))" "$_fto" "$@"
        fab_post "$_tt.rc" "$RC"
        _frc=$(fab_wait "$_fo" "$_tt.rc") || _frc=unknown
        [ "$RC" = 0 ] && [ "$_frc" = 0 ] && { PERF_FAILED=; return 0; }
        PERF_FAILED=1
        PERF_NOTE="${PERF_NOTE:+$PERF_NOTE; }try $_try: exit $RC here, $_frc at the peer"
        _fe=$(first_error "$OUT")
        [ -z "$_fe" ] || PERF_NOTE="$PERF_NOTE ($_fe)"
        say "$1 failed on try $_try ($PERF_NOTE)"
    done
}

# --- nccl-wrap ping ------------------------------------------------------------------------------

# Sizes for TCG (a round trip costs 25-60 ms): 20 round trips, 64 KiB writes for 2 s, a 20 s
# phase deadline (ACK timeout 17, 0.54 s a try). LAB_FABRIC_PING_ARGS replaces them, commas for
# spaces and no "=" (the kernel command line carries it): --iters,50,--timeout-ms,30000.
FAB_PING_ARGS=$(echo "${LAB_FABRIC_PING_ARGS:-}" | tr ',' ' ')
FAB_PING_ARGS=${FAB_PING_ARGS:---iters=20 --bytes=65536 --duration-ms=2000 --timeout-ms=20000 --wait-ms=60000}

# ping_pair SERVER CLIENT TAG PORT SECONDS [ARGS...]: `nccl-wrap ping --listen PORT --json` on
# SERVER, `nccl-wrap ping <SERVER's pod address>:PORT --json` on CLIENT (at most SECONDS), both with
# $FAB_PING_ARGS then ARGS (the client's choices rule the run). Sets RC, OUT (this node's stdout
# and stderr; stderr alone in OUT.err) and SECS as `pair` does.
ping_pair() {
    _qs=$1 _qc=$2 _qt=$3 _qp=$4 _qto=$5
    shift 5
    RC= OUT= SECS=
    if [ "$LAB_NODE" = "$_qs" ]; then
        fab_serve "$_qc" "$_qt" "$_qp" sh -c "exec $NCCL_WRAP ping --listen $_qp --json $FAB_PING_ARGS $* 2>/tmp/fab.$_qt.srv.err"
        RC=$SRV_RC OUT=/tmp/fab.$_qt.srv
    elif [ "$LAB_NODE" = "$_qc" ]; then
        fab_client "$_qs" "$_qt" "$_qto" sh -c "exec $NCCL_WRAP ping $(pod_addr "$_qs"):$_qp --json $FAB_PING_ARGS $* 2>/tmp/fab.$_qt.cli.err"
        RC=$CLI_RC OUT=/tmp/fab.$_qt.cli SECS=$CLI_SECS
    fi
    [ -z "$OUT" ] || sed 's/^/      err| /' "$OUT.err" 2>/dev/null | head -n 20
}

# pj_pair FILE INDEX: the ping-pair line of pair INDEX (the first one, in ring mode too).
pj_pair() { grep "^{\"kind\":\"ping-pair\",\"index\":$2," "$1" | head -n1; }
# pj_count FILE: how many ping-pair lines.
pj_count() { grep -c '^{"kind":"ping-pair"' "$1"; }
# pj_status LINE / pj_cause LINE: a pair's status and cause id ("" when none).
pj_status() { echo "$1" | sed -n 's/.*"status":"\([a-z]*\)","latency_us".*/\1/p'; }
pj_cause() { echo "$1" | sed -n 's/.*"cause":{"id":"\([a-z-]*\)".*/\1/p'; }
# pj_summary_of LINE: the cause summary text.
pj_summary_of() { echo "$1" | sed -n 's/.*"cause":{"id":"[a-z-]*","summary":"\(\([^"\\]\|\\.\)*\)".*/\1/p'; }
# pj_median LINE / pj_p99 LINE / pj_gbps LINE: the figures ("" when null).
pj_median() { echo "$1" | sed -n 's/.*"latency_us":{"median":\([0-9.e+-]*\),.*/\1/p'; }
pj_p99() { echo "$1" | sed -n 's/.*"latency_us":{"median":[0-9.e+-]*,"p99":\([0-9.e+-]*\)}.*/\1/p'; }
pj_gbps() { echo "$1" | sed -n 's/.*"bandwidth_gbytes_per_s":\([0-9.e+-]*\),.*/\1/p'; }
# pj_remote_gid LINE: the peer port's GID.
pj_remote_gid() { echo "$1" | sed -n 's/.*"remote":{[^}]*"gid":"\([0-9a-f:]*\)".*/\1/p'; }
# pj_summary FILE: "pairs failed exit" of the ping-summary line (the last line).
pj_summary() {
    tail -n1 "$1" | sed -n 's/^{"kind":"ping-summary","pairs":\([0-9]*\),"failed":\([0-9]*\),"exit":\([0-9]*\)}$/\1 \2 \3/p'
}
# positive NUMBER: NUMBER is a number above 0.
positive() { [ -n "$1" ] && awk -v v="$1" 'BEGIN{exit !(v + 0 > 0)}'; }
# gid_hex_of ADDR: the last two groups of the IPv4-mapped GID of ADDR (10.0.100.1 -> 0a00:6401).
gid_hex_of() { echo "$1" | awk -F. '{printf "%02x%02x:%02x%02x\n", $1, $2, $3, $4}'; }
# has TEXT PATTERN: TEXT (a JSON line, say) matches the grep PATTERN.
has() { printf '%s\n' "$1" | grep -q -e "$2"; }

# --- the gate (nccl-wrap --gate) -----------------------------------------------------------------

# gate_env [TIMEOUT_MS]: this node (hostname node-N) as rank LAB_NODE of a LAB_NODES-pod job through torchrun's
# variables (PET_*), node-0 the coordinator by name (/etc/hosts), ping's knobs small for TCG, a
# 40 s wait for late pods (a failed node ends the others' gate well before the client timeout),
# the verdict also as JSON on stdout, the termination message in /tmp/fab.gate.term.
gate_env() {
    hostname "node-$LAB_NODE"
    for _n in $(seq 0 $((LAB_NODES - 1))); do echo "$(pod_addr "$_n") node-$_n"; done >>/etc/hosts
    grep -q '^hosts:' /etc/nsswitch.conf 2>/dev/null || echo 'hosts: files dns' >>/etc/nsswitch.conf
    export PET_NODE_RANK=$LAB_NODE PET_NNODES=$LAB_NODES PET_MASTER_ADDR=node-0
    export NCCL_WRAP_PING_ITERS=20 NCCL_WRAP_PING_BYTES=65536 NCCL_WRAP_PING_DURATION_MS=500
    export NCCL_WRAP_PING_TIMEOUT_MS=${1:-20000} NCCL_WRAP_PING_JSON=1
    export NCCL_WRAP_TERMINATION_LOG=/tmp/fab.gate.term NCCL_WRAP_GATE_WAIT_MS=40000
    rm -f /tmp/fab.gate.term
}

# gate_run TAG [ARGS...]: `nccl-wrap --init --gate ARGS -- sh -c ...` under the client timeout; the
# command prints `gate-started` and the parent's (nccl-wrap's) open descriptors. Sets RC and SECS;
# stdout in /tmp/fab.TAG.out, stderr in /tmp/fab.TAG.err (both shown).
gate_run() {
    _tag=$1
    shift
    _t0=$(now)
    timeout "$FAB_CLIENT_TIMEOUT" $NCCL_WRAP --init --gate "$@" -- \
        sh -c 'echo gate-started; ls -l /proc/$PPID/fd' >"/tmp/fab.$_tag.out" 2>"/tmp/fab.$_tag.err"
    RC=$?
    SECS=$(since "$_t0")
    say "gate: exit $RC after ${SECS}s"
    sed 's/^/      out| /' "/tmp/fab.$_tag.out" | head -n 20
    grep -v '^nccl-wrap:   \|^nccl-wrap: set \|RLIMIT_MEMLOCK' "/tmp/fab.$_tag.err" | sed 's/^/      err| /' | head -n 30
}

# gv_field FILE KEY: a number or boolean of the gate-verdict JSON line.
gv_field() { grep '^{"kind":"gate-verdict"' "$1" | head -n1 | sed -n "s/.*\"$2\":\([a-z0-9]*\).*/\1/p"; }
