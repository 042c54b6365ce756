# The kernel adds a pod address's GID entries a moment after the address is configured. Measures
# that delay on this kernel, and checks that nccl-wrap started right after the address (as an
# entrypoint after CNI is) still finds the pod's own entry.
. "$(dirname "$0")/lib.sh"

require "rxe0 on veth0" rxe_on rxe0 veth0
require "podA: macvlan 10.9.6.51" lab_shared_pod podA veth0 macvlan 10.9.6.51
require "podA entry" wait_gid rxe0 10.9.6.51
require "podB: macvlan without an address" lab_shared_pod podB veth0 macvlan ""
# The child's link-local entry comes with the link.
usleep 300000
want=$(gid_hex 10.9.6.52)
t0=$(cut -d' ' -f1 /proc/uptime)
$IP -n podB addr add 10.9.6.52/24 dev net1
n=0
until grep -qx "$want" /sys/class/infiniband/rxe0/ports/1/gids/* 2>/dev/null; do
    n=$((n + 1))
    [ $n -gt 100000 ] && break
done
t1=$(cut -d' ' -f1 /proc/uptime)
say "GID entry for 10.9.6.52 appeared after $n polls, $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.0f", (b-a)*1000}') ms (uptime resolution 10 ms)"
echo "LAB-TIME gid-entry-delay-ms $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.0f", (b-a)*1000}')"
assert "entry appeared" [ "$n" -le 100000 ]

# Again, with nccl-wrap started at once after the address.
require "podC: macvlan without an address" lab_shared_pod podC veth0 macvlan ""
usleep 300000
$IP -n podC addr add 10.9.6.53/24 dev net1 && $IP netns exec podC env NCCL_WRAP_LOG=info "$NCCL_WRAP" env >"$OUT_FILE" 2>"$ERR_FILE"
WRAP_RC=$?
sed 's/^/      err| /' "$ERR_FILE" | head -n 20
assert_eq "podC: NCCL_IB_GID_INDEX is its own entry" "$(gid_index_of rxe0 10.9.6.53)" "$(plan_var NCCL_IB_GID_INDEX)"
waited=$(sed -n 's/.*rxe0: waited \([0-9]*\) ms for the pod.s GID entries.*/\1/p' "$ERR_FILE")
echo "LAB-TIME gid-entry-wait-ms ${waited:-0}"
finish "entry present at the first read after ip returned ($n polls); nccl-wrap started at once waited ${waited:-0} ms for it"
