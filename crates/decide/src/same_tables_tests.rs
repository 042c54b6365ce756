//! The plan is the same whether a port's whole GID table comes from sysfs, read entry by entry,
//! or from a whole-table source (`detect::gid_source`, ibverbs' `ibv_query_gid_table` in
//! production): pinned on a node shaped like a busy shared one (255-entry tables, the host's
//! entries first, then the neighbours' with gaps where pods left, the pod's own entry at 200 or
//! 180, one device that holds none of the pod's addresses); and the modes that read no table far
//! (SR-IOV, the privileged fallback) never ask such a source at all. Tests only: never built into
//! the binary.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv6Addr};
use std::path::Path;

use nw_nccl::gid::RoceType;
use nw_observe::detect::devices::KindSource;
use nw_observe::detect::gid_source::{Entry, SysfsOnly, TableSource, Whole};
use nw_observe::detect::netif::OwnAddr;
use nw_observe::detect::sysfs::Sysfs;
use nw_observe::detect::{Detection, Inputs, Vars};

const LEN: u32 = 255;
/// Where the pod's IPv4 RoCE v2 entry sits on each device (`None`: the pod has no rail on it).
const POD_AT: [Option<u32>; 4] = [Some(200), Some(180), Some(200), None];
/// The pod's rails' interface indices in its namespace; every neighbour's child has the first
/// of them in its own namespace too (indices, like names, are per namespace).
const POD_IFINDEX: [u32; 3] = [4, 5, 6];

struct Row {
    gid: Ipv6Addr,
    roce: RoceType,
    ndev: String,
    ifindex: u32,
}

fn v4(a: [u8; 4]) -> Ipv6Addr {
    std::net::Ipv4Addr::from(a).to_ipv6_mapped()
}

fn link_local(tag: u16, d: u16) -> Ipv6Addr {
    Ipv6Addr::new(0xfe80, 0, 0, 0, 0x0858, 0x0aff, d, tag)
}

/// Device `d`'s port 1 table: index -> entry (absent: empty, all zeros in sysfs).
fn table(d: usize) -> BTreeMap<u32, Row> {
    let dd = u8::try_from(d).expect("d");
    let d16 = u16::from(dd);
    let mut t = BTreeMap::new();
    let mut put = |i: u32, gid, roce, ndev: &str, ifindex| {
        t.insert(i, Row { gid, roce, ndev: ndev.into(), ifindex });
    };
    let host = format!("ens{d}f0np0");
    put(0, link_local(1, d16), RoceType::V1, &host, 40 + u32::from(dd));
    put(1, link_local(1, d16), RoceType::V2, &host, 40 + u32::from(dd));
    put(2, v4([10, 0, dd, 1]), RoceType::V1, &host, 40 + u32::from(dd));
    put(3, v4([10, 0, dd, 1]), RoceType::V2, &host, 40 + u32::from(dd));
    let own = POD_AT[d];
    // Neighbours, four entries each (fe80 and IPv4, v1 and v2), every seventh gone (zeros), after
    // an empty entry.
    let mut i = 5;
    let mut k: u16 = 0;
    while i + 4 <= 230 {
        if own.is_some_and(|at| i + 3 == at) {
            let rail = POD_IFINDEX[d];
            put(i, link_local(0x200, d16), RoceType::V1, &format!("net{}", d + 1), rail);
            put(i + 1, link_local(0x200, d16), RoceType::V2, &format!("net{}", d + 1), rail);
            put(i + 2, v4([10, 9, dd, 200]), RoceType::V1, &format!("net{}", d + 1), rail);
            put(i + 3, v4([10, 9, dd, 200]), RoceType::V2, &format!("net{}", d + 1), rail);
        } else if k % 7 != 3 {
            let host_byte = u8::try_from(10 + k % 180).expect("k");
            put(i, link_local(0x100 + k, d16), RoceType::V1, "net1", POD_IFINDEX[0]);
            put(i + 1, link_local(0x100 + k, d16), RoceType::V2, "net1", POD_IFINDEX[0]);
            put(i + 2, v4([10, 9, dd, host_byte]), RoceType::V1, "net1", POD_IFINDEX[0]);
            put(i + 3, v4([10, 9, dd, host_byte]), RoceType::V2, "net1", POD_IFINDEX[0]);
        }
        i += 4;
        k += 1;
    }
    t
}

/// The pod's addresses as `netif::read` gives them, with their interfaces' indices.
fn pod_addrs() -> Vec<OwnAddr> {
    let mut out = vec![OwnAddr { ifname: "eth0".into(), addr: "10.244.1.7".parse().expect("ip"), ifindex: Some(3) }];
    for (d, at) in POD_AT.iter().enumerate() {
        if at.is_none() {
            continue;
        }
        let dd = u8::try_from(d).expect("d");
        let ifname = format!("net{}", d + 1);
        let ifindex = Some(POD_IFINDEX[d]);
        out.push(OwnAddr { ifname: ifname.clone(), addr: IpAddr::V4([10, 9, dd, 200].into()), ifindex });
        let ll = link_local(0x200, u16::from(dd));
        out.push(OwnAddr { ifname, addr: IpAddr::V6(ll), ifindex });
    }
    out
}

/// The node's sysfs; `cut`: only the entries before the neighbours' (0..=3) are left, so a run
/// that still walked sysfs past them would see a four-entry table.
fn tree(root: &Path, cut: bool) {
    let w = |rel: String, text: &str| {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, format!("{text}\n")).expect("write");
    };
    for d in 0..POD_AT.len() {
        let base = format!("class/infiniband/mlx5_{d}");
        std::fs::create_dir_all(root.join(&base)).expect("mkdir");
        let pci = format!("../../../0000:{:02x}:00.0", 0x1b + 0x20 * d);
        std::os::unix::fs::symlink(pci, root.join(format!("{base}/device"))).expect("symlink");
        let port = format!("{base}/ports/1");
        w(format!("{port}/state"), "4: ACTIVE");
        w(format!("{port}/phys_state"), "5: LinkUp");
        w(format!("{port}/link_layer"), "Ethernet");
        w(format!("{port}/rate"), "400 Gb/sec (4X NDR)");
        let t = table(d);
        for i in 0..if cut { 4 } else { LEN } {
            let gid = t.get(&i).map_or(Ipv6Addr::UNSPECIFIED, |r| r.gid);
            w(format!("{port}/gids/{i}"), &nw_observe::detect::sysfs::format_gid(&gid));
            // Empty entries' attributes fail with EINVAL in a real tree: absent here.
            if let Some(r) = t.get(&i) {
                let ty = if r.roce == RoceType::V1 { "IB/RoCE v1" } else { "RoCE v2" };
                w(format!("{port}/gid_attrs/types/{i}"), ty);
                w(format!("{port}/gid_attrs/ndevs/{i}"), &r.ndev);
            }
        }
    }
}

/// Answers as ibverbs would on this node: every entry, with its type and net device index.
struct Fake {
    asked: Cell<u32>,
}

impl TableSource for Fake {
    fn table(&self, device: &str, port: u32) -> Option<Whole> {
        self.asked.set(self.asked.get() + 1);
        let d: usize = device.strip_prefix("mlx5_")?.parse().ok()?;
        (port == 1 && d < POD_AT.len()).then(|| Whole {
            len: LEN,
            entries: table(d)
                .into_iter()
                .map(|(i, r)| (i, Entry { gid: r.gid, roce: Some(r.roce), ifindex: Some(r.ifindex) }))
                .collect(),
        })
    }
}

fn detect(root: &Path, tables: &dyn TableSource) -> Detection {
    detect_with(root, tables, &|| None)
}

/// `detect`, with the pod's interfaces' kinds as `links::read` would give them.
fn detect_with(root: &Path, tables: &dyn TableSource, kinds: KindSource) -> Detection {
    let vars = Vars::new();
    let sysfs = Sysfs::new(root);
    let (prefs, _) = crate::gid_prefs(&vars);
    nw_observe::detect::detect(&Inputs {
        vars: &vars,
        sysfs: &sysfs,
        annotations: Path::new("/nonexistent/nccl-wrap-annotations"),
        dra_metadata: None,
        device_nodes: None,
        rule: &crate::gid_rule(prefs),
        addrs: &|| Ok(pod_addrs()),
        kinds,
        tables,
    })
}

/// What the plan and its report see of a detection, the skipped table lengths included, with
/// the tree's root left out of the paths it names.
fn seen(d: &Detection, root: &Path) -> (String, Vec<u32>) {
    let lens = d.devices.iter().flat_map(|x| x.ports.iter().map(|p| p.table_len)).collect();
    let text = serde_json::to_string_pretty(d).expect("json").replace(&root.display().to_string(), "ROOT");
    (text, lens)
}

/// Equal, or the first line where they differ.
fn same(a: &(String, Vec<u32>), b: &(String, Vec<u32>)) {
    let diff = a.0.lines().zip(b.0.lines()).enumerate().find(|(_, (x, y))| x != y);
    assert!(diff.is_none() && a == b, "first difference: {diff:?}; table lengths {:?} {:?}", a.1, b.1);
}

fn plan_of(d: Detection, root: &Path) -> String {
    let vars = Vars::new();
    let (prefs, _) = crate::gid_prefs(&vars);
    let plan = crate::plan(d, &vars, &prefs, crate::Choices::default());
    serde_json::to_string_pretty(&plan).expect("json").replace(&root.display().to_string(), "ROOT")
}

#[test]
fn a_whole_table_source_gives_the_plan_sysfs_gives_on_a_busy_shared_node() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let tmp = tmp.path();
    let (full, cut) = (tmp.join("full"), tmp.join("cut"));
    tree(&full, false);
    tree(&cut, true);

    let by_sysfs = detect(&full, &SysfsOnly);
    // The node is what it claims to be: the pod's entries found deep in its three rails' tables.
    let picks: Vec<_> = by_sysfs
        .devices
        .iter()
        .map(|d| d.ports[0].gid.as_ref().map(|g| (d.name.clone(), g.index, g.ndev.clone())))
        .collect();
    assert_eq!(
        picks,
        [
            Some(("mlx5_0".into(), 200, Some("net1".into()))),
            Some(("mlx5_1".into(), 180, Some("net2".into()))),
            Some(("mlx5_2".into(), 200, Some("net3".into()))),
        ],
        "{picks:?}"
    );
    assert_eq!(by_sysfs.not_ours, ["mlx5_3"]);

    let fake = Fake { asked: Cell::new(0) };
    let by_source = detect(&full, &fake);
    let want = seen(&by_sysfs, &full);
    same(&seen(&by_source, &full), &want);
    // The far reads were the source's: with the neighbours' and the pod's entries gone from
    // sysfs, the same detection (the pod's rails named by their interface index).
    let asked = fake.asked.get();
    let by_source_only = detect(&cut, &fake);
    same(&seen(&by_source_only, &cut), &want);
    assert!(fake.asked.get() - asked >= 4, "one table per device at least: {}", fake.asked.get() - asked);
    // Without the source, that cut tree is another node (the proof that the test can see a walk).
    assert_ne!(seen(&detect(&cut, &SysfsOnly), &cut), want);

    let plan = plan_of(by_sysfs, &full);
    assert_eq!(plan_of(by_source, &full), plan);
    assert_eq!(plan_of(by_source_only, &cut), plan);
}

/// The devices a source was asked for, in order, answered by `Fake`.
struct Asked(std::cell::RefCell<Vec<String>>, Fake);

impl Asked {
    fn new() -> Self {
        Asked(std::cell::RefCell::default(), Fake { asked: Cell::new(0) })
    }

    fn devices(&self) -> Vec<String> {
        let mut d = self.0.borrow().clone();
        d.sort();
        d.dedup();
        d
    }
}

impl TableSource for Asked {
    fn table(&self, device: &str, port: u32) -> Option<Whole> {
        self.0.borrow_mut().push(device.to_string());
        self.1.table(device, port)
    }
}

/// The pod's rails are macvlans (each on one device) and its primary interface a veth: the walk
/// stops at the device that holds the last rail, and the devices after it are never read. The
/// detection, and so the plan, is the one the whole walk gives (kinds unknown: every device read).
#[test]
fn the_walk_stops_once_every_child_interface_is_found() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let tmp = tmp.path();
    tree(tmp, false);
    let kinds = |rails: &str| {
        let mut k = nw_observe::detect::links::Kinds::new();
        k.insert("eth0".into(), Some("veth".into()));
        for n in ["net1", "net2", "net3"] {
            k.insert(n.into(), Some(rails.into()));
        }
        Some(k)
    };
    let all = ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"];
    let whole = Asked::new();
    let want = seen(&detect(tmp, &whole), tmp);
    assert_eq!(whole.devices(), all, "every device read without the kinds");
    // Veths stand in for children in fixtures: they sit on no device, so nothing stops the walk.
    let veths = Asked::new();
    same(&seen(&detect_with(tmp, &veths, &|| kinds("veth")), tmp), &want);
    assert_eq!(veths.devices(), all);
    let children = Asked::new();
    let d = detect_with(tmp, &children, &|| kinds("macvlan"));
    assert_eq!(children.devices(), all[..3], "mlx5_3, after the last rail, is not read");
    same(&seen(&d, tmp), &want);
    assert_eq!(plan_of(d, tmp), plan_of(detect(tmp, &SysfsOnly), tmp));
    // A child the tables do not hold (here eth0 as an ipvlan of a NIC without RDMA) keeps the
    // walk going to the end.
    let stray = Asked::new();
    let with_stray = || {
        let mut k = kinds("macvlan")?;
        k.insert("eth0".into(), Some("ipvlan".into()));
        Some(k)
    };
    same(&seen(&detect_with(tmp, &stray, &with_stray), tmp), &want);
    assert_eq!(stray.devices(), all);
}

/// Calls every table empty, as no RoCE port's is.
struct Empty;

impl TableSource for Empty {
    fn table(&self, _: &str, _: u32) -> Option<Whole> {
        Some(Whole::default())
    }
}

#[test]
fn a_source_that_calls_a_table_empty_is_not_believed() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let tmp = tmp.path();
    tree(tmp, false);
    same(&seen(&detect(tmp, &Empty), tmp), &seen(&detect(tmp, &SysfsOnly), tmp));
}

/// Counts what it is asked, answers nothing.
struct Counting(Cell<u32>);

impl TableSource for Counting {
    fn table(&self, _: &str, _: u32) -> Option<Whole> {
        self.0.set(self.0.get() + 1);
        None
    }
}

/// SR-IOV (the device plugin's variables) and the privileged fallback (VFs claimed by their net
/// devices' functions) read no table far, so a whole-table source is never asked there: no device
/// is opened for it, and those modes stay as flat as they were.
#[test]
fn sriov_and_the_privileged_fallback_never_ask_for_a_whole_table() {
    let node = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/nodes/h100-roce-sriov");
    let sysfs = Sysfs::new(node.join("sys"));
    let env = std::fs::read_to_string(node.join("env")).expect("env");
    let plugin: Vars = env.lines().filter_map(|l| l.split_once('=')).map(|(k, v)| (k.into(), v.into())).collect();
    let a = |ifname: &str, addr: &str, ifindex| OwnAddr {
        ifname: ifname.into(),
        addr: addr.parse().expect("ip"),
        ifindex: Some(ifindex),
    };
    let addrs = || {
        Ok(vec![
            a("eth0", "10.128.4.7", 3),
            a("net1", "10.0.106.7", 4),
            a("net2", "10.0.107.7", 5),
            a("net3", "10.0.190.7", 6),
            a("net4", "10.0.191.7", 7),
        ])
    };
    let kinds = || {
        let mut k = nw_observe::detect::links::Kinds::new();
        k.insert("eth0".into(), Some("veth".into()));
        for n in ["net1", "net2", "net3", "net4"] {
            k.insert(n.into(), None);
        }
        Some(k)
    };
    let (prefs, _) = crate::gid_prefs(&Vars::new());
    for (mode, vars) in [("SR-IOV", plugin), ("privileged fallback", Vars::new())] {
        let run = |tables: &dyn TableSource| {
            nw_observe::detect::detect(&Inputs {
                vars: &vars,
                sysfs: &sysfs,
                annotations: Path::new("/nonexistent/nccl-wrap-annotations"),
                dra_metadata: None,
                device_nodes: None,
                rule: &crate::gid_rule(prefs),
                addrs: &addrs,
                kinds: &kinds,
                tables,
            })
        };
        let counting = Counting(Cell::new(0));
        let d = run(&counting);
        assert_eq!(counting.0.get(), 0, "{mode}: asked for a whole table");
        let names: Vec<&str> = d.devices.iter().map(|x| x.name.as_str()).collect();
        assert_eq!(names, ["mlx5_6", "mlx5_7", "mlx5_10", "mlx5_11"], "{mode}");
        let root = node.join("sys");
        same(&seen(&d, &root), &seen(&run(&SysfsOnly), &root));
    }
}
