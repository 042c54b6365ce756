#!/usr/bin/env bash
# Regenerates the seed inputs of every fuzz target in fuzz/corpus/<target>/ from the fixture
# nodes, plus hand-written tricky ones. Deterministic: the same fixtures give the same files.
# Rewrites only `seed-*` and `hand-*` files; what fuzz/merge.sh adds (hash-named) is kept.
#
#   bash fuzz/seed.sh
set -euo pipefail
cd "$(dirname "$0")"
fx=../fixtures/nodes
export LC_ALL=C
for t in sriov annotations nccl_list gid cli ping_wire netlink_links ifaddr driver ldcache route ras allow gid_table nldev dra_metadata sriov_dra vpd; do
  mkdir -p "corpus/$t"
  rm -f "corpus/$t"/seed-* "corpus/$t"/hand-*
done

# sriov: every node's plugin environment, each variant.
for f in "$fx"/*/env "$fx"/*/env.*; do
  [ -f "$f" ] || continue
  node=$(basename "$(dirname "$f")")
  cp "$f" "corpus/sriov/seed-$node-$(basename "$f")"
done

# annotations: every downward-API file.
for f in "$fx"/*/podnetinfo/annotations; do
  [ -f "$f" ] || continue
  cp "$f" "corpus/annotations/seed-$(basename "$(dirname "$(dirname "$f")")")"
done

# nccl_list: for each node, the value nccl-wrap would export (exact), a bare prefix and an
# exclusion, over the node's RDMA devices (port 1) and its interfaces (no port).
for d in "$fx"/*/; do
  node=$(basename "$d")
  devs=$(ls "$d/sys/class/infiniband" 2>/dev/null | sort -V || true)
  ifs=$(ls "$d/sys/class/net" 2>/dev/null | sort -V || true)
  names=$( { for n in $devs; do echo "$n 1"; done; for n in $ifs; do echo "$n"; done; } )
  first=$(echo $devs $ifs | awk '{print $1}')
  [ -n "$first" ] || continue
  exact="=$(for n in $devs; do printf '%s:1,' "$n"; done | sed 's/,$//')"
  [ "$exact" = "=" ] && exact="=$(echo $ifs | tr ' ' ,)"
  printf '%s\n%s\n' "$exact" "$names" > "corpus/nccl_list/seed-$node-exact"
  printf '%s\n%s\n' "$first" "$names" > "corpus/nccl_list/seed-$node-prefix"
  printf '^%s\n%s\n' "$first" "$names" > "corpus/nccl_list/seed-$node-exclude"
done

# gid: every distinct GID table of the fixtures (one line per index: `GID TYPE`, an empty line
# for an empty entry), after the last non-empty entry's GID and type, no range, default prefs.
find "$fx" -path '*/ports/*/gids' -type d | sort | while read -r g; do
  port=$(dirname "$g")
  table=$(ls "$g" | sort -n | while read -r i; do
    gid=$(tr -d '\n' < "$g/$i")
    type=""; [ -f "$port/gid_attrs/types/$i" ] && type=$(tr -d "\n" < "$port/gid_attrs/types/$i")
    if [ "$gid" = "0000:0000:0000:0000:0000:0000:0000:0000" ] && [ -z "$type" ]; then echo; else echo "$gid $type"; fi
  done)
  last=$(printf '%s\n' "$table" | grep -v '^$' | tail -1)
  out=$(printf '%s\n%s\n\n\n%s\n' "${last%% *}" "${last#* }" "$table")
  sum=$(printf '%s' "$out" | sha1sum | cut -c1-12)
  node=${g#"$fx"/}; node=${node%%/*}
  printf '%s' "$out" > "corpus/gid/seed-$node-$sum"
done

# ras: every captured RAS reply.
for f in ../fixtures/ras/*.txt; do
  cp "$f" "corpus/ras/seed-$(basename "$f" .txt)"
done

# Hand-written: shapes the fixtures do not have.
h() { printf '%b' "$2" > "corpus/$1/hand-$3"; }
h sriov 'PCIDEVICE_A_INFO={"0000:3b:02.6":{"rdma":{"rdma_dev":"mlx5_3"}},"mlx5_core.sf.2":{}}\nPCIDEVICE_A=0000:3b:02.6\n' two-forms
h sriov 'PCIDEVICE_A_INFO={"0000:3b:02.6":{"rdma":\nPCIDEVICE_A=0000:3b:02.6, 0000:3b:02.7,,\n' truncated-info
h sriov 'PCIDEVICE_A_INFO=[1,2]\nPCIDEVICE_B_INFO="x"\nPCIDEVICE_C_INFO=null\nPCIDEVICE_D=..\nPCIDEVICE_E=\xff\xfe\n' not-objects
h sriov 'PCIDEVICE_A_INFO={"../../etc":{"rdma":{"rdma_dev":".."}},"0000:3b:02.6":{"rdma":{"rdma_dev":"mlx5_1,mlx5_2"}}}\n' hostile
h sriov 'PCIDEVICE_A_INFO={"0000:3b:02.6":{"rdma":{"rdma_dev":"mlx5_\\u0033"}},"0000:3b:02.6":{"rdma":{"rdma_dev":7}}}\n' dup-keys
h annotations 'k8s.v1.cni.cncf.io/network-status="[{\\"name\\":\\"a\\",\\"interface\\":\\"net1\\",\\"device-info\\":{\\"type\\":\\"pci\\",\\"pci\\":{\\"rdma-device\\":\\"mlx5_4, mlx5_5,\\",\\"pci-address\\":\\"0000:03:00.3\\"}}}]"\n' comma-list
h annotations 'k8s.v1.cni.cncf.io/network-status="[{\\"name\\": \\"' broken-json
h annotations 'k8s.v1.cni.cncf.io/network-status="[\\q]"\nk8s.v1.cni.cncf.io/network-status = "{}"\n' bad-quoting
h annotations 'k8s.v1.cni.cncf.io/network-status="\\x5b\\x5d\\303\\251\\u00e9\\U0001F600\\a\\b\\f\\v\\t\\r\\n\\\\\\"\\x27"\n' escapes
h annotations 'k8s.v1.cni.cncf.io/network-status="[{\\"name\\":\\"n\\",\\"device-info\\":{\\"pci\\":{\\"rdma-device\\":\\"../x\\",\\"pci-address\\":\\"a/b\\"}}},{\\"device-info\\":{\\"pci\\":7}}]"\n' hostile
h nccl_list 'mlx5_1\nmlx5_0 1\nmlx5_1 1\nmlx5_10 1\nmlx5_11 1\n' prefix-mlx5_1
h nccl_list '^=mlx5_1,mlx5_0\nmlx5_0 1\nmlx5_1 1\nmlx5_10 1\n' exclude-exact
h nccl_list '=^mlx5_1\n^mlx5_1 1\nmlx5_1 1\n' caret-after-equals
h nccl_list 'mlx5_6:1,mlx5_7:2,mlx5_8:x,mlx5_9:-1,mlx5_10: +3\nmlx5_6 1\nmlx5_7 1\nmlx5_8 1\nmlx5_9 1\nmlx5_10 3\n' ports
h nccl_list ',,:1,\nmlx5_0 1\n' empty-entries
h nccl_list '^\nmlx5_0 1\neth0\n' caret-only
h nccl_list 'eth,ib\neth0\neth1\nib0\nlo\n' interfaces
h nccl_list "$(seq -s, -f 'd%g' 0 40)\nd0\nd31\nd32\n" over-32
h gid 'fe80:0000:0000:0000:0ac0:ebff:fe3d:ca54\nRoCE v2\n10.0.0.0/8\n\nfe80:0000:0000:0000:0ac0:ebff:fe3d:ca54 IB/RoCE v1\nfe80:0000:0000:0000:0ac0:ebff:fe3d:ca54 RoCE v2\n0000:0000:0000:0000:0000:ffff:0a6e:0021 IB/RoCE v1\n0000:0000:0000:0000:0000:ffff:0a6e:0021 RoCE v2\n' mlx5-range
h gid '::ffff:10.0.0.7\n  RoCE v1\n192.168.0.0/16\n6 1\nfe80::1 RoCE v2\n\nfd00::7 IB/RoCE v1\nfd00::7 RoCE v2\n::ffff:192.168.1.9 RoCE v2\n' v6-prefs
h gid 'ff0e::ffff:1.2.3.4\nRoCE v3\nfd00::/129\n\n::ffff:10.0.0.1\n' mapped-multicast
h gid '::\nIB/RoCE v1\n::ffff:0.0.0.0/96\n6\n::\n' unspecified
h gid '::ffff:10.1.2.3\n\nfd00::/8\n\nfe80::1 RoCE v2\n::ffff:10.1.2.3 RoCE v2\n' range-other-family
h gid '1:2:3:4:5:6:7:8\nRoCE v2\n0.0.0.0/0\n\n' range-all
h cli 'env\n--json\n' env-json
h cli 'doctor\n--json\n--no-selftest\n--sysfs-root\nfixtures/nodes/h200-ib/sys\n' doctor
h cli '-q\n--require-rdma=yes\n--init=false\n--grace\n5\n--\ntorchrun\n--nproc-per-node=8\ntrain.py\n' run
h cli 'NCCL_WRAP_REQUIRE_RDMA=1\nNCCL_WRAP_SELFTEST_BYTES=1048576\nNCCL_WRAP_INIT=off\nNCCL_WRAP_GRACE=x\n--\npython\n' env-vars
h cli '--bogus\n--\ntorchrun\n--\nx\n' bad-option
h cli 'NCCL_WRAP_GATE=1\nNCCL_WRAP_GATE_SIZE=four\nNCCL_WRAP_REQUIRE_RDAM=1\n--requre-memlock\n--grace\n--\npython\n' interlock-typos
h cli 'NCCL_WRAP_GATE=maybe\nNCCL_WRAP_PING_ITERS=many\n--verbose\n3\n--watch-ms=99999999999\n--\ntorchrun\n' bad-values
h cli '--selftest-timeout-ms=18446744073709551616\n--selftest-bytes\n-1\n--\n\xff\xfe\n' overflow
h cli 'env\n--\ntorchrun\n' env-with-command
h cli 'ping\ntrain-0.train:18515\n--json\n--iters=10\n' ping-connect
h cli 'ping\n--ring\n--peer-template\ntrain-{index}.train\n--size\n4\n' ping-ring
h cli 'install\n/opt/nccl-wrap\n' install
h driver 'mlx5_core\n\nmlx5\nrxe\n' mlx5-linked
h driver 'mlx5_core.sf\n\nefa\n' sf-not-linked
h driver 'mlx4_core\n\nbnxt_re\nefa\nerdma\nirdma\nmana\nmlx5\nrxe\n' mlx4-left-out
h driver '\n1: CA\nrxe\n' rxe-parent
h driver '\n4: RNIC\nmlx5\n' siw-parent
h driver 'bad\x1b[31mname\n9: x\n\n' hostile
h driver '../../etc\n4\nmlx5\n' dotdot

# ping_wire: exchange frames as a peer sends them (magic, version, kind, big-endian length, JSON).
python3 - <<'PY'
import json, struct
def frame(kind, payload, version=1, magic=b"NCWPING", length=None):
    body = json.dumps(payload, separators=(",", ":")).encode() if not isinstance(payload, bytes) else payload
    return magic + bytes([version, kind]) + struct.pack(">I", len(body) if length is None else length) + body
port = lambda dev, last, mtu=4096: {"device": dev, "port": 1, "link_layer": "Ethernet", "gid_index": 3,
    "gid": "0000:0000:0000:0000:0000:ffff:0a00:6a%02x" % last, "gid_type": "RoCE v2", "lid": None,
    "mtu": mtu, "pkey": None, "netdev": "net1"}
ib = {"device": "mlx5_0", "port": 1, "link_layer": "InfiniBand", "gid_index": None, "gid": None,
      "gid_type": None, "lid": 17, "mtu": 4096, "pkey": 65535, "netdev": None}
hello = {"host": "train-0.train", "ports": [port("mlx5_6", 7), port("mlx5_7", 7, 1024), ib], "all_pairs": False,
         "bytes": 1 << 20, "iters": 1000, "duration_ms": 1000}
fault = {"step": "RTR", "error": "ETIMEDOUT: Connection timed out", "wc_status": None, "errno": 110}
seeds = {
    "hello": frame(1, hello),
    "setup": frame(2, [{"pair": 0, "qpn": 17, "psn": 4242, "addr": 140737488355328, "rkey": 4660, "fault": None},
                       {"pair": 1, "qpn": 0, "psn": 0, "addr": 0, "rkey": 0, "fault": fault}]),
    "ready": frame(3, [{"pair": 0, "fault": None}]),
    "done": frame(4, [{"pair": 0, "fault": None, "figures": {"median_us": 4.1, "p99_us": 6.8, "gbps": 48.7}},
                      {"pair": 1, "fault": {"step": "bandwidth", "error": "IBV_WC_RETRY_EXC_ERR", "wc_status": 12, "errno": None}}]),
    "refuse": frame(5, "busy: serving another peer"),
    "oversized": frame(1, b"{}", length=0xFFFFFFFF),
    "magic": frame(1, hello, magic=b"GARBAGE"),
    "version": frame(1, hello, version=9),
    "truncated": frame(1, hello)[:40],
    # The gate's frames (kinds 6-11) and a gate pair test's tagged hello.
    "gate-hello": frame(1, dict(hello, gate={"job": "llm-train", "rank": 3})),
    "join": frame(6, {"job": "llm-train-master-0:18516/4", "rank": 2, "size": 4, "host": "llm-train-worker-1",
                      "port": 18516, "ports": [port("mlx5_6", 9), ib], "problem": None}),
    "join-problem": frame(6, {"job": "uid-1", "rank": 1, "size": 2, "host": "w-1", "port": 18516, "ports": [],
                              "problem": "no usable RDMA port in this pod"}),
    "assign": frame(7, {"successor": 3, "successor_host": "train-3", "target": "10.0.0.9:18516", "predecessor": 1,
                        "all_pairs": False, "bytes": 1 << 20, "iters": 1000, "duration_ms": 1000,
                        "timeout_ms": 3000, "results_ms": 9000}),
    "report": frame(8, {"rank": 1, "pairs": [{"rank": 1, "host": "train-1", "peer_rank": 2, "peer_host": "train-2",
        "rail": "mlx5_6:1", "peer_rail": "mlx5_6:1", "status": "fail", "cause": "retry-exceeded",
        "summary": "the local end's packets were never acknowledged", "hint": "check the VLAN"}]}),
    "verdict": frame(9, {"go": False, "size": 4, "pairs": 3, "failed_total": 1, "missing": [3], "missing_total": 1,
        "findings": [{"rank": 1, "host": "train-1", "peer_rank": None, "peer_host": None, "rail": None,
                      "peer_rail": None, "status": "fail", "cause": "no-port", "summary": "no usable RDMA port",
                      "hint": "nccl-wrap doctor"}]}),
    # Sealed gate frames (the job secret's MAC and the session nonces), and forged peer text.
    "join-sealed": frame(6, {"job": "uid-1", "rank": 1, "size": 2, "host": "w-1", "port": 18516, "ports": [],
                             "problem": "no usable RDMA port", "nonce": "0a" * 16, "mac": "5f" * 32}),
    "assign-sealed": frame(7, {"successor": 0, "successor_host": "w-0", "target": "10.0.0.9:18516", "predecessor": 0,
                               "all_pairs": False, "bytes": 4096, "iters": 10, "duration_ms": 0,
                               "timeout_ms": 3000, "results_ms": 9000, "nonce": "1b" * 16, "mac": "c3" * 32}),
    "report-sealed": frame(8, {"rank": 1, "pairs": [], "mac": "00" * 32}),
    "verdict-sealed": frame(9, {"go": True, "size": 2, "pairs": 2, "failed_total": 0, "missing": [],
                                "missing_total": 0, "findings": [], "mac": "ff" * 32}),
    "refuse-forged": frame(5, "busy\nnccl-wrap: gate: verdict: GO\u001b[2J\u2028\u202e"),
    # The knock before a join, rank 0's challenge on that connection, and a join answering it.
    "knock": frame(10, {"job": "llm-train", "rank": 2}),
    "challenge": frame(11, {"nonce": "3c" * 16}),
    "join-challenged": frame(6, {"job": "uid-1", "rank": 1, "size": 2, "host": "w-1", "port": 18516, "ports": [],
                                 "problem": "no usable RDMA port", "nonce": "0a" * 16, "challenge": "3c" * 16,
                                 "mac": "5f" * 32}),
}
for name, data in seeds.items():
    open(f"corpus/ping_wire/hand-{name}", "wb").write(data)
PY

# netlink_links: real RTM_GETLINK dumps, as the kernel answers them, from a fresh network namespace
# holding a veth pair (where this machine can make one; otherwise the namespace's loopback alone),
# and from this namespace; each datagram one input.
capture='
import socket, struct, sys
s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
s.bind((0, 0))
ext = struct.pack("=HHI", 8, 29, 1 << 3)
req = struct.pack("=IHHII", 16 + 16 + len(ext), 18, 0x301, 1, 0) + bytes(16) + ext
s.send(req)
n = 0
while True:
    d = s.recv(65536)
    open(f"{sys.argv[1]}-{n}", "wb").write(d)
    n += 1
    if struct.unpack_from("=H", d, 4)[0] in (2, 3) or n > 16:
        break
'
unshare --net -- sh -c 'ip link add eth0 type veth peer name eth0p 2>/dev/null; exec python3 -c "$1" "$2"' sh "$capture" corpus/netlink_links/seed-netns \
  || python3 -c "$capture" corpus/netlink_links/seed-here

# ifaddr: real RTM_GETADDR dumps (AF_UNSPEC: IPv4 then IPv6), from a fresh network namespace with
# lo up (127.0.0.1, 127.0.0.2, ::1) and a veth holding an IPv4, a point-to-point IPv4 (IFA_LOCAL
# and IFA_ADDRESS differ), an IPv6 and its link-local; and from this namespace. Each datagram one
# input; the kernel may put NLMSG_DONE in the last datagram of addresses, so every message's type
# is looked at.
capture='
import socket, struct, sys
s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
s.settimeout(1)
s.bind((0, 0))
s.send(struct.pack("=IHHII", 16 + 8, 22, 0x301, 1, 0) + bytes(8))
n, done = 0, False
while not done and n <= 16:
    d = s.recv(65536)
    open(f"{sys.argv[1]}-{n}", "wb").write(d)
    n += 1
    o = 0
    while o + 16 <= len(d):
        length, ty = struct.unpack_from("=IH", d, o)
        done = done or ty in (2, 3)
        o += max(16, (length + 3) & ~3)
'
unshare --net -- sh -c 'ip link set lo up && ip addr add 127.0.0.2/8 dev lo \
  && ip link add eth0 type veth peer name eth0p && ip link set eth0p up && ip link set eth0 up \
  && ip addr add 10.9.0.52/24 dev eth0 && ip addr add 10.9.9.1 peer 10.9.9.2/32 dev eth0 label eth0:1 \
  && ip addr add fd00::52/64 dev eth0 nodad; exec python3 -c "$1" "$2"' sh "$capture" corpus/ifaddr/seed-netns
python3 -c "$capture" corpus/ifaddr/seed-here

# ldcache: small caches in glibc's current format and the combined old+new one (python writes the
# same layout as detect::ldcache::encode).
python3 - <<'PY'
import struct
def new(entries):
    strings = b""; table = b""; end = 48 + 24 * len(entries)
    for name, path, flags in entries:
        k = end + len(strings); strings += name + b"\0"
        v = end + len(strings); strings += path + b"\0"
        table += struct.pack("<iIIIQ", flags, k, v, 0, 0)
    return b"glibc-ld.so.cache1.1" + struct.pack("<II4s16s", len(entries), len(strings), b"\2\0\0\0", b"\0" * 16) + table + strings
e = [(b"libibverbs.so.1", b"/usr/lib/x86_64-linux-gnu/libibverbs.so.1", 0x303),
     (b"libnccl.so.2", b"/usr/lib/x86_64-linux-gnu/libnccl.so.2", 0x303),
     (b"libnccl.so.2", b"/usr/lib32/libnccl.so.2", 0x803)]
open("corpus/ldcache/seed-debian", "wb").write(new(e))
old = b"ld.so-1.7.0\0" + struct.pack("<I", 1) + b"\0" * 12
old += b"\0" * (-len(old) % 8)
open("corpus/ldcache/seed-combined", "wb").write(old + new(e[:1]))
open("corpus/ldcache/hand-count-overflow", "wb").write(b"glibc-ld.so.cache1.1" + struct.pack("<II", 0xffffffff, 0) + b"\0" * 20)
PY

# route: a pod's tables (eth0 default, two rails, IPv6 rails), MASTER_ADDR first, rails second.
printf '%s\n' 10.9.0.9 net1,net2 \
  'Iface	Destination	Gateway 	Flags	RefCnt	Use	Metric	Mask		MTU	Window	IRTT' \
  'eth0	00000000	0100800A	0003	0	0	0	00000000	0	0	0' \
  'eth0	0000800A	00000000	0001	0	0	0	0000FFFF	0	0	0' \
  'net1	0000090A	00000000	0001	0	0	0	00FFFFFF	0	0	0' \
  'net2	0001090A	00000000	0001	0	0	0	00FFFFFF	0	0	0' -- \
  'fd000000000000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001     net1' \
  '00000000000000000000000000000000 00 00000000000000000000000000000000 00 fe800000000000000000000000000001 00000400 00000001 00000000 00000003     eth0' \
  '00000000000000000000000000000000 00 00000000000000000000000000000000 00 00000000000000000000000000000000 ffffffff 00000001 00000000 00200200       lo' \
  > corpus/route/seed-pod
printf 'trainer-0.job\n\nIface\tDestination\nlo\t00000000\t00000000\t0001\t0\t0\t0\t00000000\n' > corpus/route/hand-loopback-default

# allow: `--allow` / NCCL_WRAP_PING_ALLOW lists, and job secrets as a variable or file holds them.
h allow '10.0.0.0/8,fd00::/8' pod-networks
h allow '192.168.1.7, ::ffff:10.0.0.1/128 ,0.0.0.0/0' mixed
h allow '10.0.0.0/33,fe80::%eth0/64,,' bad
h allow 'job-7f3a-secret\n' secret

# gid_table: ibv_query_gid_table's answers as the kernel lays them out, one port of 255 entries:
# a shared port (the host's fe80 and IPv4 entries, two neighbours, the pod's pair at 200), an
# answer whose entries run past the table, and one of two ports with an entry given twice.
python3 - <<'PY'
import ipaddress, struct
def e(gid, index, port, ty, ifindex):
    return ipaddress.IPv6Address(gid).packed + struct.pack("<IIII", index, port, ty, ifindex)
def head(*lens):
    return bytes([len(lens)]) + b"".join(struct.pack("<H", l) for l in lens)
shared = head(255) + e("fe80::858:aff:fe00:1", 0, 1, 1, 4) + e("fe80::858:aff:fe00:1", 1, 1, 2, 4) \
    + e("::ffff:10.0.0.1", 2, 1, 1, 4) + e("::ffff:10.0.0.1", 3, 1, 2, 4) \
    + e("::ffff:10.9.0.11", 7, 1, 2, 3) + e("::ffff:10.9.0.12", 11, 1, 2, 3) \
    + e("::ffff:10.9.0.200", 199, 1, 1, 5) + e("::ffff:10.9.0.200", 200, 1, 2, 5)
open("corpus/gid_table/seed-shared-255", "wb").write(shared)
open("corpus/gid_table/hand-past-end", "wb").write(head(4) + e("::ffff:10.9.0.1", 9, 1, 2, 3))
open("corpus/gid_table/hand-twice", "wb").write(head(16, 16) + e("fe80::1", 0, 2, 2, 3) + e("fe80::2", 0, 2, 2, 3))
PY

# nldev: the kernel's own answers to the device discovery, captured in the lab (fixtures/nldev),
# and one dump message made of both devices' datagrams.
for f in ../fixtures/nldev/*.bin; do cp "$f" "corpus/nldev/seed-$(basename "$f" .bin)"; done
cat ../fixtures/nldev/dump-rxe0.bin ../fixtures/nldev/dump-rxe1.bin ../fixtures/nldev/dump-done.bin > corpus/nldev/hand-dump-two

# dra_metadata: every metadata file of the fixtures.
find "$fx" -path '*/var/run/kubernetes.io/dra-device-attributes/*-metadata.json' | sort | while read -r f; do
  node=${f#"$fx"/}; node=${node%%/*}
  rel=${f#*dra-device-attributes/}
  cp "$f" "corpus/dra_metadata/seed-$node-$(echo "${rel%/*}" | tr / -)"
done
# sriov_dra: every env file that sets SRIOVNETWORK_ variables.
for f in "$fx"/*/env "$fx"/*/env.*; do
  [ -f "$f" ] && grep -q '^SRIOVNETWORK_' "$f" || continue
  cp "$f" "corpus/sriov_dra/seed-$(basename "$(dirname "$f")")-$(basename "$f")"
done

# dra_metadata, sriov_dra: by hand, what the fixtures lack (a dranet device named only by its name,
# hostile values, a repeated header, deep nesting, escapes, bytes that are not UTF-8).
m='"kind":"DeviceMetadata","apiVersion":"metadata.resource.k8s.io'
h dra_metadata "{$m/v1beta1\",\"requests\":[{\"name\":\"nics\",\"devices\":[{\"driver\":\"dra.net\",\"pool\":\"p\",\"name\":\"pci-0101-00-00-0\",\"attributes\":{\"dra.net/rdmaDevice\":{\"string\":\"mlx5_0\"},\"resource.kubernetes.io/numaNode\":{\"ints\":[0,1]}}}]}]}\n" dranet-by-name
h dra_metadata "{$m/v2\",\"x\":1}\n{$m/v1alpha1\",\"requests\":[{\"name\":\"r\",\"devices\":[{\"driver\":\"sriovnetwork.k8snetworkplumbingwg.io\",\"pool\":\"p\",\"name\":\"0000-08-00-2\",\"attributes\":{\"resource.kubernetes.io/pciBusID\":{\"string\":\"0000:08:00.2\"},\"resource.kubernetes.io/pciBusID\":{\"string\":\"../x\"}},\"networkData\":{\"interfaceName\":\"net1;x\",\"ips\":[\"10.0.0.1\",\"fd00::1/129\"],\"hardwareAddress\":\"zz\"}}]}]}\n" hostile
h dra_metadata "{$m/v1beta1\",\"apiVersion\":\"x\"}" dup-header
h dra_metadata '[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]' deep
h dra_metadata "{$m/v1beta1\",\"requests\":[{\"name\":\"r\",\"devices\":[{\"driver\":\"d\",\"name\":\"\\\\u0000\\\\\"\",\"attributes\":{\"a/b\":{\"int\":1,\"bool\":true}}}]}]} trailing" escapes
h dra_metadata '\xff\xfe{}' not-utf8
h sriov_dra 'SRIOVNETWORK_0000_3b_02_6_RDMA_UVERB=/dev/infiniband/uverbs4\nSRIOVNETWORK_VF_DEVICE_0000_08_00_2=0000:08:00.3\nSRIOVNETWORK_PCI_ADDRESSES=0000:08:00.2,,x\n' key-only
h sriov_dra 'SRIOVNETWORK_VF_DEVICE_0000_08_00_2=0000:08:00.2\nSRIOVNETWORK_0000_08_00_2_RDMA_DEVICE=mlx5_1,mlx5_2\nSRIOVNETWORK_0000_08_00_2_RDMA_UVERB=/dev/infiniband/../../etc/shadow\nSRIOVNETWORK_0000_08_00_2_RDMA_CM=/dev/infiniband/rdma_cm2\nSRIOVNETWORK_a/b_RDMA_UMAD=/dev/infiniband/umad1\nSRIOVNETWORK_NET_ATTACH_DEF_NAME=\x1b[2J\n' hostile
h sriov_dra 'SRIOVNETWORK_VF_DE\x00\x1b[2J_0000_08_00_3=0000:08:00.3\n' control-name
h sriov_dra 'SRIOVNETWORK_VF_DEVICE_0000_08_00_4=0000:08:00.4\nSRIOVNETWORK_0000_08_00_4_VFIO_DEVICE=/dev/vfio/42\nSRIOVNETWORK_0000_08_00_4_NEW=1\nSRIOVNETWORK_VF_DEVICE_A=\xff\n' vfio-unknown

# vpd: every function's VPD of the fixtures (the HGX B200 bridge's with SMDL=SW_MNG, the data NICs'),
# and by hand: a length past the end, a keyword past its resource, bytes after the end tag.
find "$fx" -path '*/sys/devices/*' -name vpd -type f | sort | while read -r f; do
  cp "$f" "corpus/vpd/seed-$(basename "$(dirname "$f")" | tr : -)"
done
h vpd '\x82\xff\xffabc' past-end
h vpd '\x90\x04\x00VA\x09SMDL' keyword-past-resource
h vpd '\x82\x02\x00ok\x78\x90\x06\x00VAz=y' after-end
