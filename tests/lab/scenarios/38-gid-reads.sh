# What a run reads of a real kernel GID table (rxe's, under TCG: counts, not times). Four pods on
# macvlan children of one rxe device's net device, made in the order A, C, B, D: the pod under test
# (podB) has podA's entry (NCCL's own pick) and podC's before its own, podD's after; podC holds 201
# addresses, so podB's entry sits past index 200, as on a busy shared node. A run must
# stop at its own entry (no gids/N past it opened), read podC's entry by address alone (no
# gid_attrs of it: only NCCL's pick and the pod's own addresses get their type and net device read),
# and doctor must still read the whole table. With verbs (a run's default on the kernel's /sys) the
# far read is one ibv_query_gid_table per device: sysfs is read only up to NCCL's own pick, and the
# plan (NCCL_IB_HCA, the GID index) is the one --skip-verbs makes. Reports each command's syscall
# count (strace -f -c).
. "$(dirname "$0")/lib.sh"

command -v strace >/dev/null 2>&1 || skip "no strace in this guest (setup.sh installs it; amd64 only)"
require "rxe0 on veth0, no address on veth0" rxe_on rxe0 veth0
for p in A C B D; do
    require "pod$p: macvlan net1" lab_shared_pod "pod$p" veth0 macvlan "10.38.0.$((60 + $(printf '%d' "'$p") - 64))"
    if [ "$p" = C ]; then
        # podC holds 200 more addresses (an entry each in rxe's table): podB's own entry lands
        # past index 200, as on a busy shared node.
        for i in $(seq 1 200); do $IP -n podC addr add "10.38.1.$i/32" dev net1 || break; done
        require "podC's 200 more entries" wait_gid rxe0 10.38.1.200
    fi
done
require "entries for every pod" wait_gid rxe0 10.38.0.64
v2_index_of() { # DEV ADDR: the RoCE v2 entry of ADDR (the one NCCL and nccl-wrap take)
    _want=$(gid_hex "$2")
    for _g in /sys/class/infiniband/$1/ports/1/gids/*; do
        _i=${_g##*/}
        [ "$(cat "$_g")" = "$_want" ] && [ "$(cat "/sys/class/infiniband/$1/ports/1/gid_attrs/types/$_i" 2>/dev/null)" = "RoCE v2" ] && { echo "$_i"; return; }
    done
}
ia=$(v2_index_of rxe0 10.38.0.61)
ib=$(v2_index_of rxe0 10.38.0.62)
id=$(v2_index_of rxe0 10.38.0.64)
len=$(ls /sys/class/infiniband/rxe0/ports/1/gids | wc -l)
say "rxe0: $len entries; podA's IPv4 at $ia, podB's at $ib, podD's at $id"
assert "podB's entry sits between podA's and podD's" [ "$ia" -lt "$ib" -a "$ib" -lt "$id" ]
assert "podB's entry is past index 200" [ "$ib" -gt 200 ]

trace() { # trace FILE CMD...: nccl-wrap in podB under strace (every openat kept)
    _f=$1; shift
    $IP netns exec podB strace -f -qq -e trace=openat -o "$_f" "$NCCL_WRAP" "$@" >/dev/null 2>&1
}
count() { # count CMD...: the syscalls of one run in podB
    $IP netns exec podB strace -f -c -o /tmp/sc "$NCCL_WRAP" "$@" >/dev/null 2>&1
    awk '/total/ {print $4}' /tmp/sc
}
trace /tmp/run.trace -q --skip-verbs env
max=$(sed -n 's/.*"gids\/\([0-9]*\)".*/\1/p' /tmp/run.trace | sort -n | tail -n 1)
# NCCL's own pick is podA's entry ($ia: its type and net device are read, as NCCL's rule needs);
# podC's, between it and podB's own, is told by address alone.
ic=$(v2_index_of rxe0 10.38.0.63)
attrs=$(grep -c "gid_attrs/[a-z]*/$ic\"" /tmp/run.trace)
say "run: gids read up to $max (podB's entry $ib); podC's entry $ic, between NCCL's pick $ia and podB's, gid_attrs opened: $attrs"
assert "podC's entry sits between NCCL's pick and podB's" [ "$ia" -lt "$ic" -a "$ic" -lt "$ib" ]
assert_eq "run: no entry past the pod's own is read" "$ib" "$max"
assert_eq "run: podC's entry is read by address alone" 0 "$attrs"
trace /tmp/doctor.trace doctor --no-selftest
dmax=$(sed -n 's/.*"gids\/\([0-9]*\)".*/\1/p' /tmp/doctor.trace | sort -n | tail -n 1)
assert "doctor: reads the whole table (up to $((len - 1)))" [ "$dmax" -ge "$id" ]

# With verbs: the debug log names each whole-table call; strace keeps the files and the ioctls.
$IP netns exec podB env NCCL_WRAP_LOG=nw_observe::verbs::opened=debug \
    strace -f -qq -e trace=openat,ioctl -o /tmp/verbs.trace "$NCCL_WRAP" -q env >/tmp/verbs.out 2>/tmp/verbs.err
vmax=$(sed -n 's/.*"gids\/\([0-9]*\)".*/\1/p' /tmp/verbs.trace | sort -n | tail -n 1)
calls=$(grep -c "from one ibv_query_gid_table" /tmp/verbs.err)
vfiles=$(grep -c '"gids/\|gid_attrs/' /tmp/verbs.trace)
sfiles=$(grep -c '"gids/\|gid_attrs/' /tmp/run.trace)
ioctls=$(grep -c 'ioctl(' /tmp/verbs.trace)
say "verbs: gids read up to $vmax, $vfiles GID files opened (--skip-verbs: $sfiles), $calls ibv_query_gid_table call(s), $ioctls ioctls in all"
sed -n 's/.*\(rxe0: .*ibv_query_gid_table\).*/  \1/p' /tmp/verbs.err
assert_eq "verbs: one ibv_query_gid_table for the one device" 1 "$calls"
assert "verbs: no gids/N read past NCCL's own pick ($ia), short of podB's entry $ib" [ "${vmax:-0}" -le "$ia" ]
$IP netns exec podB "$NCCL_WRAP" -q --skip-verbs env >/tmp/skip.out 2>/dev/null
hca_v=$(grep '^export NCCL_IB_HCA=' /tmp/verbs.out)
hca_s=$(grep '^export NCCL_IB_HCA=' /tmp/skip.out)
gi_v=$(grep '^export NCCL_IB_GID_INDEX=' /tmp/verbs.out)
gi_s=$(grep '^export NCCL_IB_GID_INDEX=' /tmp/skip.out)
say "plan with verbs: $hca_v $gi_v; with --skip-verbs: $hca_s $gi_s"
assert_eq "the same NCCL_IB_HCA with and without verbs" "$hca_s" "$hca_v"
assert_eq "the same GID index with and without verbs" "$gi_s" "$gi_v"
assert_eq "the GID index is podB's own entry" "$ib" "$(echo "$gi_v" | sed "s/^export NCCL_IB_GID_INDEX=//; s/'//g")"

run_sc=$(count -q --skip-verbs -- /bin/true)
verbs_sc=$(count -q -- /bin/true)
doctor_sc=$(count doctor --no-selftest)
# The sysfs walk grows with podB's index (three files an entry, one for the neighbours' entries);
# the verbs path does not.
assert "a run with verbs makes fewer syscalls ($verbs_sc) than the sysfs walk to entry $ib ($run_sc)" [ "$verbs_sc" -lt "$run_sc" ]
finish "rxe0 ($len entries, podB's at $ib of 4 pods): a run read gids 0..$max, podC's entry $ic by address alone; with verbs gids 0..$vmax and $calls ibv_query_gid_table ($vfiles GID files against $sfiles); syscalls: run $run_sc, with verbs $verbs_sc, doctor $doctor_sc"
