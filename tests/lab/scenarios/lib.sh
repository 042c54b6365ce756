# Shared helpers for lab scenarios (busybox sh). Sourced by /init and by every scenario.
# Busybox sh runs its own `ip` applet before anything on PATH, so iproute2 is always called by
# its full path.
IP=/usr/sbin/ip
RDMA=/usr/sbin/rdma
NCCL_WRAP=${NCCL_WRAP:-/usr/bin/nccl-wrap}
LAB_FAILED=
LAB_FIRST_FAILURE=

say() { echo "  [$LAB_SCENARIO $(cut -d" " -f1 /proc/uptime)] $*"; }

# --- state ---------------------------------------------------------------------------------------

# port_state DEV [PORT]: the number in ports/N/state ("4: ACTIVE" -> 4), empty if absent.
port_state() {
    cut -d: -f1 "/sys/class/infiniband/$1/ports/${2:-1}/state" 2>/dev/null
}

# wait_port_state DEV WANT [TENTHS]: poll until the port state number is WANT (4 ACTIVE, 1 DOWN).
wait_port_state() {
    _n=${3:-100}
    while [ "$_n" -gt 0 ]; do
        [ "$(port_state "$1")" = "$2" ] && return 0
        usleep 100000
        _n=$((_n - 1))
    done
    say "port $1/1 state is '$(cat /sys/class/infiniband/$1/ports/1/state 2>/dev/null)', wanted $2"
    return 1
}

# lab_veth_rxe VETH PEER RXE ADDR PEER_ADDR: a veth pair with IPv4 /24 addresses, both ends up,
# and an rxe device on VETH. Waits for the port to be ACTIVE.
lab_veth_rxe() {
    $IP link add "$1" type veth peer name "$2" || return 1
    $IP addr add "$4/24" dev "$1" || return 1
    $IP addr add "$5/24" dev "$2" || return 1
    $IP link set "$1" up && $IP link set "$2" up || return 1
    $RDMA link add "$3" type rxe netdev "$1" || return 1
    wait_port_state "$3" 4
}

# lab_pod_netns NS VETH PEER RXE ADDR PEER_ADDR: a "pod" network namespace NS owning VETH, with its
# own rxe device RXE created from inside. The veth moves first: moving a net device to another
# namespace deletes an rxe device bound to it. PEER stays in the host namespace.
lab_pod_netns() {
    $IP netns add "$1" || return 1
    $IP link add "$2" type veth peer name "$3" || return 1
    $IP link set "$2" netns "$1" || return 1
    $IP -n "$1" link set lo up || return 1
    $IP -n "$1" addr add "$5/24" dev "$2" || return 1
    $IP -n "$1" link set "$2" up || return 1
    $IP addr add "$6/24" dev "$3" || return 1
    $IP link set "$3" up || return 1
    $IP netns exec "$1" $RDMA link add "$4" type rxe netdev "$2" || return 1
    wait_port_state "$4" 4
}

# lab_link_down DEV [NS]: set a net device down (inside NS if given).
lab_link_down() {
    if [ -n "$2" ]; then $IP -n "$2" link set "$1" down; else $IP link set "$1" down; fi
}

# lab_reset: remove every rxe device, namespace and veth, so each scenario starts clean.
lab_reset() {
    for d in /sys/class/infiniband/*; do
        [ -e "$d" ] || continue
        $RDMA link delete "${d##*/}" 2>/dev/null
        for ns in $($IP netns list 2>/dev/null | cut -d' ' -f1); do
            $IP netns exec "$ns" $RDMA link delete "${d##*/}" 2>/dev/null
        done
    done
    for ns in $($IP netns list 2>/dev/null | cut -d' ' -f1); do
        $IP netns delete "$ns"
    done
    for l in $($IP -o link show type veth 2>/dev/null | sed -n 's/^[0-9]*: \([^@:]*\).*/\1/p'); do
        $IP link delete "$l" 2>/dev/null
    done
}

# uverbs_of DEV: the /dev/infiniband/uverbsN node of an RDMA device.
uverbs_of() {
    for u in /sys/class/infiniband_verbs/uverbs*; do
        [ "$(cat "$u/ibdev" 2>/dev/null)" = "$1" ] && { echo "/dev/infiniband/${u##*/}"; return 0; }
    done
    return 1
}

# --- nccl-wrap -----------------------------------------------------------------------------------

# wrap ARGS...: run nccl-wrap (in namespace $WRAP_NS when set); stdout to $OUT_FILE, stderr to
# $ERR_FILE, exit code in $WRAP_RC.
OUT_FILE=/tmp/wrap.out
ERR_FILE=/tmp/wrap.err
wrap() {
    if [ -n "${WRAP_NS:-}" ]; then
        $IP netns exec "$WRAP_NS" "$NCCL_WRAP" "$@" >"$OUT_FILE" 2>"$ERR_FILE"
    else
        "$NCCL_WRAP" "$@" >"$OUT_FILE" 2>"$ERR_FILE"
    fi
    WRAP_RC=$?
    say "${WRAP_NS:+[$WRAP_NS] }nccl-wrap $* -> exit $WRAP_RC"
    sed 's/^/      out| /' "$OUT_FILE" | head -n 40
    sed 's/^/      err| /' "$ERR_FILE" | head -n 40
    return 0
}

# plan_var NAME: the value `nccl-wrap env` (in $OUT_FILE) gives NAME, by evaluating the output as
# POSIX sh in a clean subshell; prints "<unset>" when it does not set NAME.
plan_var() {
    (
        for v in $(env | sed -n 's/^\(NCCL_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done
        eval "$(cat "$OUT_FILE")" >/dev/null 2>&1 || { echo "<eval failed>"; exit; }
        eval "[ \"\${$1+set}\" = set ] && printf '%s\n' \"\$$1\" || echo '<unset>'"
    )
}

# exec_env_var NAME FILE: value of NAME in an `env` listing in FILE, "<unset>" if absent.
exec_env_var() {
    _l=$(grep "^$1=" "$2" | head -n1)
    if [ -n "$_l" ]; then printf '%s\n' "${_l#*=}"; else echo '<unset>'; fi
}

# --- assertions and results ----------------------------------------------------------------------

fail_note() {
    LAB_FAILED=1
    [ -n "$LAB_FIRST_FAILURE" ] || LAB_FIRST_FAILURE=$1
}

# assert DESC CMD...: run CMD, record a failure (first one becomes the result detail) if it fails.
assert() {
    _desc=$1
    shift
    if "$@" >/tmp/assert.out 2>&1; then
        say "ok   $_desc"
    else
        say "FAIL $_desc"
        sed 's/^/      | /' /tmp/assert.out | head -n 20
        fail_note "$_desc"
    fi
}

# assert_eq DESC EXPECTED ACTUAL
assert_eq() {
    if [ "$2" = "$3" ]; then
        say "ok   $1 = '$3'"
    else
        say "FAIL $1: expected '$2', got '$3'"
        fail_note "$1: expected '$2', got '$3'"
    fi
}

# require DESC CMD...: like assert, but a failed precondition ends the scenario at once.
require() {
    assert "$@"
    [ -z "$LAB_FAILED" ] || finish
}

# result STATUS DETAIL...: print the one machine-readable line for this scenario and end it.
result() {
    _st=$1
    shift
    mkdir -p /tmp/lab-results
    echo "$_st" >"/tmp/lab-results/$LAB_SCENARIO"
    echo "LAB-RESULT $LAB_SCENARIO $_st $*"
    exit 0
}

skip() { result SKIP "$*"; }

# finish [DETAIL]: PASS with DETAIL unless an assertion failed.
finish() {
    if [ -n "$LAB_FAILED" ]; then
        result FAIL "$LAB_FIRST_FAILURE"
    else
        result PASS "${1:-all assertions held}"
    fi
}

# --- shared RDMA devices (macvlan / ipvlan children of an rxe device's net device) ------------------

# lab_shared_pod NS PARENT KIND ADDR: a pod namespace NS (made if missing) with a KIND (macvlan or
# ipvlan) child of PARENT, named net1 inside as Multus names every pod's first rail, with ADDR/24.
# A second call for the same NS adds net2, and so on.
lab_shared_pod() {
    $IP netns list 2>/dev/null | grep -q "^$1\( \|$\)" || { $IP netns add "$1" && $IP -n "$1" link set lo up; } || return 1
    _n=1
    while $IP -n "$1" link show "net$_n" >/dev/null 2>&1; do _n=$((_n + 1)); done
    case $3 in
        macvlan) $IP link add "tmp$$" link "$2" type macvlan mode bridge || return 1 ;;
        ipvlan) $IP link add "tmp$$" link "$2" type ipvlan mode l2 || return 1 ;;
        *) say "lab_shared_pod: kind $3?"; return 1 ;;
    esac
    $IP link set "tmp$$" netns "$1" || return 1
    $IP -n "$1" link set "tmp$$" name "net$_n" || return 1
    $IP -n "$1" link set "net$_n" up || return 1
    [ -z "$4" ] || $IP -n "$1" addr add "$4/24" dev "net$_n" || return 1
}

# gid_hex ADDR: an IPv4 address as the GID sysfs shows (0000:...:ffff:0a09:0034).
gid_hex() {
    _o=$(echo "$1" | tr . ' ')
    # shellcheck disable=SC2086
    printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x\n' $_o
}

# gid_index_of DEV ADDR [PORT]: the index of ADDR's entry in DEV's GID table, empty if none.
gid_index_of() {
    _want=$(gid_hex "$2")
    for _g in /sys/class/infiniband/$1/ports/${3:-1}/gids/*; do
        [ "$(cat "$_g" 2>/dev/null)" = "$_want" ] && { echo "${_g##*/}"; return 0; }
    done
}

# wait_gid DEV ADDR: poll (up to 5 s) until ADDR has an entry in DEV's table.
wait_gid() {
    _n=50
    while [ "$_n" -gt 0 ]; do
        [ -n "$(gid_index_of "$1" "$2")" ] && return 0
        usleep 100000
        _n=$((_n - 1))
    done
    say "no GID entry for $2 on $1"
    return 1
}

# in_pod NS ARGS...: `wrap` in namespace NS.
in_pod() {
    _ns=$1
    shift
    WRAP_NS=$_ns wrap "$@"
}

# rxe_on DEV NETDEV: an rxe device on NETDEV (a veth end brought up, no address), ACTIVE.
rxe_on() {
    $IP link show "$2" >/dev/null 2>&1 || { $IP link add "$2" type veth peer name "$2p" && $IP link set "$2p" up; } || return 1
    $IP link set "$2" up || return 1
    $RDMA link add "$1" type rxe netdev "$2" || return 1
    wait_port_state "$1" 4
}
