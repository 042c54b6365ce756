# One node of a fabric run, sourced by /init once the modules are loaded (LAB_NODE set on the
# kernel command line). Names the NICs from their MACs, brings up the pod network and its HTTP
# flag server, then runs each scenario of LAB_FABRIC_LIST (comma-separated) in step with the other
# nodes: barrier "start", the scenario (which ends with its own LAB-RESULT line), barrier "end".
. /lab/fabric/lib.sh
export LAB_NODE LAB_NODES
for v in $(env | sed -n 's/^\(LAB_FABRIC_[A-Z0-9_]*\)=.*/\1/p'); do export "$v"; done
LAB_SCENARIO=boot
T_SCEN=${LAB_SCENARIO_TIMEOUT:-120}

# NICs: fabric.sh gives NIC s of node n the MAC 52:54:00:0s:00:0n; s 0 is the pod network, s 1+i
# rail i. Rename them eth<s> whatever order the kernel probed them in.
want=${LAB_NICS:-1}
n=0
while [ "$(ls -d /sys/class/net/eth* 2>/dev/null | wc -l)" -lt "$want" ] && [ "$n" -lt 100 ]; do
    usleep 100000
    n=$((n + 1))
done
for d in /sys/class/net/eth*; do
    [ -e "$d" ] || continue
    $IP link set "${d##*/}" name "tmp${d##*/eth}"
done
for d in /sys/class/net/tmp*; do
    [ -e "$d" ] || continue
    mac=$(cat "$d/address")
    s=$(echo "$mac" | cut -d: -f4)
    $IP link set "${d##*/}" name "eth$((0x$s))"
done
echo "lab: node $LAB_NODE of $LAB_NODES, NICs: $(for d in /sys/class/net/eth*; do printf '%s=%s ' "${d##*/}" "$(cat "$d/address")"; done)"

$IP addr add "$(pod_addr "$LAB_NODE")/24" dev eth0
$IP link set eth0 up
mkdir -p "$FAB_WWW"
httpd -p "$FAB_HTTP_PORT" -h "$FAB_WWW"
mkdir -p /tmp/lab-results

if ! fab_barrier up 60; then
    echo "LAB-RESULT fabric FAIL node $LAB_NODE: the other nodes never came up on the pod network"
    $IP addr show eth0
    netstat -ltn
    ping -c 2 -W 2 "$(pod_addr "$(next_node)")"
    printf 'GET /boot.up HTTP/1.0\r\n\r\n' | nc -w 3 "$(pod_addr "$(next_node)")" "$FAB_HTTP_PORT"
fi
echo "LAB-TIME up $(now)"

for name in $(echo "${LAB_FABRIC_LIST:-}" | tr ',' ' '); do
    LAB_SCENARIO=$name
    export LAB_SCENARIO
    fab_reset >/dev/null 2>&1
    echo "LAB-START $name $(now)"
    t0=$(now)
    if fab_barrier start "$((T_SCEN + 30))"; then
        timeout "$T_SCEN" sh "/lab/fabric/$name.sh" </dev/null 2>&1
        rc=$?
        [ -e "/tmp/lab-results/$name" ] ||
            echo "LAB-RESULT $name FAIL node $LAB_NODE: scenario ended without a result (exit $rc)"
    else
        echo "LAB-RESULT $name FAIL node $LAB_NODE: the other nodes never started it"
    fi
    fab_barrier end "$((T_SCEN + 30))" || say "the other nodes never ended $name"
    echo "LAB-TIME $name $(since "$t0")"
done
fab_reset >/dev/null 2>&1
echo "LAB-DONE $(now)"
# Stay up until every node is done (they read this node's flags), then a moment longer.
LAB_SCENARIO=zz-done
fab_barrier done 60 >/dev/null 2>&1
sleep 2
