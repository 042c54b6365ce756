# Shared RDMA device, RoCE: pods on macvlan children of one rxe device's net device, every child
# named net1, every pod seeing the whole GID table (shared RDMA netns mode). Each pod must get its
# own address's entry, never the first pod's or the host's; doctor names whose entry a kept
# NCCL_IB_GID_INDEX points at. First without an address on the parent, then with one (the host's
# entry comes first) on a second device, which the first pods must not take.
. "$(dirname "$0")/lib.sh"

require "rxe0 on veth0, no address on veth0" rxe_on rxe0 veth0
require "podA: macvlan net1 10.9.0.51" lab_shared_pod podA veth0 macvlan 10.9.0.51
require "podB: macvlan net1 10.9.0.52" lab_shared_pod podB veth0 macvlan 10.9.0.52
require "entries for both" wait_gid rxe0 10.9.0.52
ia=$(gid_index_of rxe0 10.9.0.51)
ib=$(gid_index_of rxe0 10.9.0.52)
say "rxe0 table: podA at $ia, podB at $ib"
assert "the pods' entries differ" [ "$ia" != "$ib" ]

in_pod podB env
assert_eq "podB: env exit" 0 "$WRAP_RC"
assert_eq "podB: NCCL_IB_HCA" "=rxe0:1" "$(plan_var NCCL_IB_HCA)"
assert_eq "podB: NCCL_IB_GID_INDEX is its own entry" "$ib" "$(plan_var NCCL_IB_GID_INDEX)"
in_pod podB -- /bin/true
assert "podB: summary says how ownership was told" grep -q "rxe0: sysfs (shared device, via net1 10.9.0.52)" "$ERR_FILE"
assert "podB: summary names its own address and NCCL's other pick" grep -q "GID $ib (10.9.0.52) on net1, this pod's (NCCL alone would take $ia, 10.9.0.51, another namespace's)" "$ERR_FILE"
in_pod podA env
assert_eq "podA: NCCL_IB_GID_INDEX is its own entry" "$ia" "$(plan_var NCCL_IB_GID_INDEX)"

in_pod podB env --json
assert "podB: JSON gives the origin" grep -q '"origin":"sysfs (shared device, via net1 10.9.0.52)"' "$OUT_FILE"
assert "podB: JSON says the entry is the pod's" grep -q '"owner":"pod"' "$OUT_FILE"

in_pod podB doctor --no-selftest
assert_eq "podB: doctor exit" 0 "$WRAP_RC"
assert "podB: gid-owner passes" grep -q "PASS.*gid-owner.*rxe0:1: NCCL_IB_GID_INDEX=$ib points at index $ib: 10.9.0.52 on net1, this pod's address" "$OUT_FILE"

# A kept NCCL_IB_GID_INDEX pointing at the neighbour's entry: doctor fails, naming the address.
$IP netns exec podB env NCCL_IB_GID_INDEX="$ia" "$NCCL_WRAP" doctor --no-selftest >"$OUT_FILE" 2>"$ERR_FILE"
WRAP_RC=$?
sed 's/^/      out| /' "$OUT_FILE" | grep gid
assert_eq "podB with NCCL_IB_GID_INDEX=$ia: doctor exit" 1 "$WRAP_RC"
assert "podB: gid-owner fails naming 10.9.0.51" grep -q "FAIL.*gid-owner.*index $ia: 10.9.0.51 on net1, another namespace's address" "$OUT_FILE"
assert "podB: the hint gives its own index" grep -q "own entry on rxe0:1 is index $ib (10.9.0.52)" "$OUT_FILE"

# A second device whose net device has the host's address before any pod: its pods get their
# own entries, not the host's, and never rxe0, which holds none of their addresses.
require "rxe1 on veth2" rxe_on rxe1 veth2
$IP addr add 10.9.2.1/24 dev veth2
require "host entry on rxe1" wait_gid rxe1 10.9.2.1
require "podC: macvlan net1 10.9.2.53 on veth2" lab_shared_pod podC veth2 macvlan 10.9.2.53
require "podC entry" wait_gid rxe1 10.9.2.53
ih=$(gid_index_of rxe1 10.9.2.1)
ic=$(gid_index_of rxe1 10.9.2.53)
say "rxe1 table: host at $ih, podC at $ic"
in_pod podC env
assert_eq "podC: NCCL_IB_HCA (rxe0 holds none of its addresses)" "=rxe1:1" "$(plan_var NCCL_IB_HCA)"
assert_eq "podC: NCCL_IB_GID_INDEX is its own, not the host's $ih" "$ic" "$(plan_var NCCL_IB_GID_INDEX)"
$IP netns exec podC env NCCL_IB_GID_INDEX="$ih" "$NCCL_WRAP" doctor --no-selftest >"$OUT_FILE" 2>"$ERR_FILE"
sed 's/^/      out| /' "$OUT_FILE" | grep gid
assert "podC with the host's index: gid-owner warns" grep -q "WARN.*gid-owner.*index $ih: 10.9.2.1 on veth2, the host's address" "$OUT_FILE"
finish "macvlan pods get their own GID entries (podA $ia, podB $ib, podC $ic beside the host's $ih)"
