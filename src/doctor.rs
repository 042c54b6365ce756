//! `nccl-wrap doctor`: names the cause before NCCL hangs or silently falls back to TCP.
//!
//! Takes what the pipeline already decided (the [`Plan`] and the memlock outcome) and reads a
//! little more (uverbs nodes, IOMMU groups, GPU placement, the kernel command line), then turns
//! each concern into a check with a stable id, a status, the evidence read and the fix. Every
//! root is a parameter and verbs come in through the [`Verbs`] seam, so fixture nodes and the
//! real machine go through the same code. It only reads: it never writes to sysfs or /dev, and
//! opens character devices only to see whether this container may.
//!
//! Check ids (documented in `docs/doctor.md`): devices, ports, uverbs, gid, nccl-env, memlock,
//! iommu, gpudirect, topology, netns, selftest.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::fmt::Write as _;
use std::io::Write as _;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use rustix::fs::{Mode, OFlags};
use serde::Serialize;
use serde_json::{json, Map, Value};

use crate::detect::{Device, Vars};
use crate::gid;
use crate::memlock::{Memlock, Outcome};
use crate::nccl_env::{IB_DISABLE, IB_GID_INDEX, IB_HCA};
use crate::nccl_list::List;
use crate::plan::{Action, Plan};
use crate::probe::{SelftestOptions, Verbs, VerbsError};
use crate::report::PREFIX;
use crate::sysfs::{read_attr, Attachment, PortFacts, Sysfs};
use crate::topology::{self, Place, Relation};

/// NCCL registers at least its own communication buffers; a limit below this refuses them.
pub const REGISTER_BYTES: u64 = 64 << 20;
/// Exit status when doctor itself cannot run.
pub const EXIT_CANNOT_RUN: u8 = 2;

const SOCKET_IFNAME: &str = "NCCL_SOCKET_IFNAME";

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Pass,
    Warn,
    Fail,
}

impl Status {
    fn label(self) -> &'static str {
        match self {
            Status::Pass => "PASS",
            Status::Warn => "WARN",
            Status::Fail => "FAIL",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub id: &'static str,
    pub status: Status,
    pub summary: String,
    pub evidence: Map<String, Value>,
    pub hint: Option<String>,
}

impl Check {
    fn new(id: &'static str, status: Status, summary: impl Into<String>) -> Check {
        Check { id, status, summary: summary.into(), evidence: Map::new(), hint: None }
    }
    fn ev(mut self, key: &str, value: impl Into<Value>) -> Check {
        self.evidence.insert(key.to_string(), value.into());
        self
    }
    fn hint(mut self, hint: impl Into<String>) -> Check {
        self.hint = Some(hint.into());
        self
    }
}

/// A file that was read and what it held (`None`: it could not be read).
fn file(path: &Path, value: Option<&str>) -> Value {
    json!({ "file": path.display().to_string(), "value": value })
}

#[derive(Debug, Serialize)]
pub struct Report {
    pub checks: Vec<Check>,
    pub counts: BTreeMap<&'static str, usize>,
    /// 0 when nothing fails, 1 when something does.
    pub exit: u8,
}

/// Everything doctor reads, as parameters.
pub struct Inputs<'a> {
    pub plan: &'a Plan,
    pub memlock: &'a Memlock,
    pub vars: &'a Vars,
    pub sysfs: &'a Sysfs,
    pub proc_root: &'a Path,
    pub dev_root: &'a Path,
    pub verbs: &'a dyn Verbs,
    /// Run the loopback self-test through `verbs`, with these options (`None`: --no-selftest).
    pub selftest: Option<&'a SelftestOptions>,
}

#[derive(Debug, thiserror::Error)]
pub enum DoctorError {
    #[error("cannot read the sysfs root {path}: {source}")]
    SysfsRoot { path: PathBuf, source: std::io::Error },
    #[error("{path} is not a directory; is --sysfs-root (NCCL_WRAP_SYSFS_ROOT) right?")]
    NotADirectory { path: PathBuf },
}

/// Runs doctor and prints its report; the exit status says whether anything failed.
pub fn main(inp: &Inputs, json_out: bool) -> ExitCode {
    let report = match run(inp) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{PREFIX} doctor cannot run: {e}");
            return ExitCode::from(EXIT_CANNOT_RUN);
        }
    };
    let text = if json_out {
        match serde_json::to_string_pretty(&report) {
            Ok(t) => t + "\n",
            Err(e) => {
                eprintln!("{PREFIX} doctor cannot serialise its report: {e}");
                return ExitCode::from(EXIT_CANNOT_RUN);
            }
        }
    } else {
        human(inp, &report)
    };
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => ExitCode::from(report.exit),
        Err(e) => {
            eprintln!("{PREFIX} cannot write to stdout: {e}");
            ExitCode::from(EXIT_CANNOT_RUN)
        }
    }
}

pub fn run(inp: &Inputs) -> Result<Report, DoctorError> {
    let root = inp.sysfs.path("");
    match std::fs::metadata(&root) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return Err(DoctorError::NotADirectory { path: root }),
        Err(source) => return Err(DoctorError::SysfsRoot { path: root, source }),
    }
    let gpus = topology::gpus(inp.sysfs);
    let mut checks = vec![devices(inp)];
    checks.extend(ports(inp));
    checks.extend(uverbs(inp));
    checks.extend(gids(inp));
    checks.extend(nccl_env(inp));
    checks.push(memlock(inp));
    checks.extend(iommu(inp));
    checks.push(gpudirect(inp, &gpus));
    checks.push(placement(inp, &gpus));
    checks.push(netns(inp));
    checks.extend(selftest(inp));
    let mut counts = BTreeMap::from([("pass", 0), ("warn", 0), ("fail", 0)]);
    for c in &checks {
        let key = match c.status {
            Status::Pass => "pass",
            Status::Warn => "warn",
            Status::Fail => "fail",
        };
        *counts.entry(key).or_default() += 1;
    }
    let exit = u8::from(checks.iter().any(|c| c.status == Status::Fail));
    Ok(Report { checks, counts, exit })
}

// ---------------------------------------------------------------------------------------------
// devices, ports

fn devices(inp: &Inputs) -> Check {
    let d = &inp.plan.detection;
    let class = inp.sysfs.path("class/infiniband");
    let sources: Vec<Value> = d
        .sources
        .iter()
        .map(|s| json!({"source": s.source, "status": s.status, "inputs": s.inputs, "problems": s.problems}))
        .collect();
    let devs: Vec<Value> =
        d.devices.iter().map(|x| json!({"name": x.name, "origin": x.origin, "attachment": x.attachment})).collect();
    let mut problems: Vec<String> = d.sources.iter().flat_map(|s| s.problems.iter().cloned()).collect();
    problems.extend(d.warnings.iter().cloned());
    let names: Vec<&str> = d.devices.iter().map(|x| x.name.as_str()).collect();
    let others = if d.not_ours.is_empty() {
        String::new()
    } else {
        format!(
            "; {} other RDMA device(s) visible that are not this pod's ({}): a privileged pod, or shared RDMA netns mode",
            d.not_ours.len(),
            abbreviate(&d.not_ours, 6)
        )
    };
    let (status, summary, hint) = if d.devices.is_empty() {
        (
            Status::Fail,
            format!(
                "no RDMA device of this pod found{}: NCCL would run over TCP sockets (about 1 GiB/s instead of 80+)",
                if d.not_ours.is_empty() { String::new() } else { format!(" among the {} visible", d.not_ours.len()) }
            ),
            Some("request an RDMA resource for the pod (an SR-IOV pool with isRdma: true, or an RDMA shared device plugin resource) and attach its network; `nccl-wrap env --json` shows what each source said".to_string()),
        )
    } else if !problems.is_empty() {
        (
            Status::Warn,
            format!(
                "{} RDMA device(s) of this pod from {} ({}), with {} problem(s) in the sources{others}",
                names.len(),
                d.source.describe(),
                names.join(", "),
                problems.len()
            ),
            Some("fix what the problems name; the devices listed were still found".to_string()),
        )
    } else {
        (
            Status::Pass,
            format!(
                "{} RDMA device(s) of this pod from {}: {}{others}",
                names.len(),
                d.source.describe(),
                names.join(", ")
            ),
            None,
        )
    };
    let mut c = Check::new("devices", status, summary)
        .ev("source", json!(d.source))
        .ev("sources", sources)
        .ev("devices", devs)
        .ev("not_ours", json!(d.not_ours))
        .ev("class_infiniband", class.display().to_string());
    if !problems.is_empty() {
        c = c.ev("problems", json!(problems));
    }
    c.hint = hint;
    c
}

fn ports(inp: &Inputs) -> Vec<Check> {
    let mut out = Vec::new();
    for dev in &inp.plan.detection.devices {
        let base = format!("class/infiniband/{}/ports", dev.name);
        if dev.ports.is_empty() {
            out.push(
                Check::new("ports", Status::Fail, format!("{}: no port readable in sysfs", dev.name))
                    .ev("device", dev.name.as_str())
                    .ev("ports_dir", inp.sysfs.path(&base).display().to_string())
                    .ev("problems", json!(dev.problems))
                    .hint("check that the device's driver is bound and its sysfs directory is readable"),
            );
            continue;
        }
        for p in &dev.ports {
            let at = |attr: &str| inp.sysfs.path(&format!("{base}/{}/{attr}", p.port));
            let what = format!(
                "{}:{} {} ({}), {}, {}",
                dev.name,
                p.port,
                p.state_name().unwrap_or("state unreadable"),
                p.phys_state_name().unwrap_or("physical state unreadable"),
                p.link_layer.as_deref().unwrap_or("link layer unreadable"),
                p.rate.as_deref().unwrap_or("rate unreadable")
            );
            let mut c = match crate::plan::link_problem(p) {
                None => Check::new("ports", Status::Pass, what),
                Some(why) => Check::new("ports", Status::Fail, format!("{what}: not usable, {why}")).hint(
                    "check the cable and the switch port (ibstat, `ip link` on its net device); for a VF, the PF's link and the VF's link state (`ip link set <pf> vf <n> state auto`); physical state Disabled means the port was disabled administratively (ibportstate, switch configuration)",
                ),
            };
            c = c
                .ev("device", dev.name.as_str())
                .ev("port", p.port)
                .ev("state", file(&at("state"), p.state.as_deref()))
                .ev("phys_state", file(&at("phys_state"), p.phys_state.as_deref()))
                .ev("link_layer", file(&at("link_layer"), p.link_layer.as_deref()))
                .ev("rate", file(&at("rate"), p.rate.as_deref()));
            if !p.problems.is_empty() {
                c = c.ev("problems", json!(p.problems));
            }
            out.push(c);
        }
    }
    if out.is_empty() {
        // The devices check already fails for this; one failure per cause.
        out.push(Check::new("ports", Status::Warn, "no RDMA port to check: this pod has no RDMA device"));
    }
    out
}

// ---------------------------------------------------------------------------------------------
// uverbs

/// RDMA device name -> `uverbsN`, from `class/infiniband_verbs/uverbs*/ibdev`.
fn uverbs_map(sysfs: &Sysfs) -> BTreeMap<String, String> {
    let mut problems = Vec::new();
    sysfs
        .list("class/infiniband_verbs", &mut problems)
        .into_iter()
        .filter(|n| n.starts_with("uverbs"))
        .filter_map(|n| sysfs.attr(&format!("class/infiniband_verbs/{n}/ibdev")).ok().map(|dev| (dev, n)))
        .collect()
}

fn uverbs(inp: &Inputs) -> Vec<Check> {
    let map = uverbs_map(inp.sysfs);
    let mut out = Vec::new();
    for dev in &inp.plan.detection.devices {
        let Some(uv) = map.get(&dev.name) else {
            out.push(
                Check::new(
                    "uverbs",
                    Status::Fail,
                    format!(
                        "{}: no uverbs device names it in class/infiniband_verbs: libibverbs cannot open it",
                        dev.name
                    ),
                )
                .ev("device", dev.name.as_str())
                .ev("class_infiniband_verbs", inp.sysfs.path("class/infiniband_verbs").display().to_string())
                .hint("load ib_uverbs on the host (modprobe ib_uverbs)"),
            );
            continue;
        };
        let ibdev = inp.sysfs.path(&format!("class/infiniband_verbs/{uv}/ibdev"));
        let sys_dev = inp.sysfs.attr(&format!("class/infiniband_verbs/{uv}/dev")).ok();
        let node = inp.dev_root.join("infiniband").join(uv);
        let base = Check::new("uverbs", Status::Pass, String::new())
            .ev("device", dev.name.as_str())
            .ev("uverbs", uv.as_str())
            .ev("ibdev", file(&ibdev, Some(&dev.name)))
            .ev("dev", node.display().to_string());
        let (status, summary, kind, hint) = match std::fs::metadata(&node) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => (
                Status::Fail,
                format!("{}: {} is not in this container: libibverbs will not list {} and NCCL cannot use it", dev.name, node.display(), dev.name),
                None,
                Some("the device plugin must mount it: set isRdma: true in the SR-IOV resource pool (or request the RDMA shared device plugin's resource); a privileged pod needs /dev/infiniband mounted"),
            ),
            Err(e) => (Status::Fail, format!("{}: cannot stat {}: {e}", dev.name, node.display()), None, None),
            Ok(m) => {
                let kind = if m.file_type().is_char_device() {
                    use std::os::unix::fs::MetadataExt;
                    let rdev = m.rdev();
                    format!("character device {}:{}", rustix::fs::major(rdev), rustix::fs::minor(rdev))
                } else if m.is_file() {
                    "regular file".to_string()
                } else {
                    "neither a character device nor a file".to_string()
                };
                let mismatch = m.file_type().is_char_device()
                    && sys_dev.as_deref().is_some_and(|s| !kind.ends_with(&format!(" {s}")));
                match open_rw(&node) {
                    Err(e) => (
                        Status::Fail,
                        format!("{}: {} is present but cannot be opened read-write: {e}", dev.name, node.display()),
                        Some(kind),
                        Some("the container's device cgroup or file mode refuses it: the device plugin must add it to the container's devices (or run privileged)"),
                    ),
                    Ok(()) if mismatch => (
                        Status::Fail,
                        format!("{}: {} is {kind}, but sysfs says {uv} is {}", dev.name, node.display(), sys_dev.as_deref().unwrap_or("?")),
                        Some(kind),
                        Some("the node under /dev/infiniband points at another device: remount /dev/infiniband from the host"),
                    ),
                    Ok(()) => (Status::Pass, format!("{}: {} present and opens read-write", dev.name, node.display()), Some(kind), None),
                }
            }
        };
        let mut c = base.ev("kind", json!(kind));
        if let Some(s) = &sys_dev {
            c = c.ev("sysfs_dev", file(&inp.sysfs.path(&format!("class/infiniband_verbs/{uv}/dev")), Some(s)));
        }
        c.status = status;
        c.summary = summary;
        c.hint = hint.map(String::from);
        out.push(c);
    }
    if out.is_empty() {
        out.push(Check::new("uverbs", Status::Warn, "no RDMA device of this pod: no uverbs node to check"));
    }
    out
}

/// Opens read-write as libibverbs does, without creating, blocking or taking a terminal.
fn open_rw(path: &Path) -> std::io::Result<()> {
    let flags = OFlags::RDWR | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY;
    rustix::fs::open(path, flags, Mode::empty()).map(drop).map_err(std::io::Error::from)
}

// ---------------------------------------------------------------------------------------------
// gid

fn roce_ports(plan: &Plan) -> Vec<(&Device, &PortFacts)> {
    plan.detection
        .devices
        .iter()
        .flat_map(|d| d.ports.iter().map(move |p| (d, p)))
        .filter(|(_, p)| p.link_layer.as_deref() == Some("Ethernet"))
        .collect()
}

fn user_var(vars: &Vars, name: &str) -> Option<String> {
    vars.get(OsStr::new(name)).map(|v| v.to_string_lossy().into_owned())
}

/// What `gids/<i>` and `gid_attrs/types/<i>` of one port hold.
fn gid_entry(sysfs: &Sysfs, dev: &str, port: u32, i: u32) -> (PathBuf, Option<String>, PathBuf, Option<String>) {
    let g = format!("class/infiniband/{dev}/ports/{port}/gids/{i}");
    let t = format!("class/infiniband/{dev}/ports/{port}/gid_attrs/types/{i}");
    (sysfs.path(&g), sysfs.attr(&g).ok(), sysfs.path(&t), sysfs.attr(&t).ok())
}

fn gids(inp: &Inputs) -> Vec<Check> {
    let roce = roce_ports(inp.plan);
    let mut out = Vec::new();
    let user_index = user_var(inp.vars, IB_GID_INDEX);
    let user_kept = inp.plan.vars.iter().all(|v| v.name != IB_GID_INDEX || v.action == Action::Kept);
    let mut agree: Vec<(String, u32)> = Vec::new();
    for (dev, p) in &roce {
        let label = format!("{}:{}", dev.name, p.port);
        let mut c = match &p.gid {
            None => Check::new("gid", Status::Fail, format!("{label}: GID table unreadable or empty")).hint(
                "check that the port's net device exists and is up; the kernel fills the GID table from its addresses",
            ),
            Some(g) => {
                let (gp, gv, tp, tv) = gid_entry(inp.sysfs, &dev.name, p.port, g.index);
                let ndev = g.ndev.as_deref().unwrap_or("?");
                let c = if g.full_match {
                    agree.push((label.clone(), g.index));
                    Check::new(
                        "gid",
                        Status::Pass,
                        format!("{label}: RoCE v2 {} at GID index {} ({ndev})", g.address, g.index),
                    )
                } else {
                    Check::new(
                        "gid",
                        Status::Fail,
                        format!(
                            "{label}: no RoCE v2 IPv4 GID; NCCL would settle on index {} ({}, {}), which cannot reach IPv4 RoCE v2 peers",
                            g.index,
                            g.address,
                            g.roce.map_or("type unknown", |r| if r.number() == 1 { "RoCE v1" } else { "RoCE v2" })
                        ),
                    )
                    .hint(format!(
                        "give net device {ndev} an IPv4 address (the kernel adds RoCE v1 and v2 GIDs for each address), or set NCCL_IB_ADDR_FAMILY=AF_INET6 if the fabric is IPv6"
                    ))
                };
                c.ev("index", g.index)
                    .ev("gid", file(&gp, gv.as_deref()))
                    .ev("type", file(&tp, tv.as_deref()))
                    .ev("ndev", json!(g.ndev))
            }
        };
        if let (Some(ui), true) = (&user_index, user_kept) {
            c = user_gid_index(inp, c, dev, p, ui);
        }
        out.push(c.ev("device", dev.name.as_str()).ev("port", p.port));
    }
    if !agree.is_empty() {
        out.push(gid_agreement(inp, &roce, &agree));
    }
    if out.is_empty() {
        let ib = inp.plan.detection.devices.iter().any(|d| !d.ports.is_empty());
        let (status, summary) = if ib {
            (Status::Pass, "no RoCE port: InfiniBand ports need no GID index")
        } else {
            (Status::Warn, "no RDMA port of this pod: no GID table to check")
        };
        out.push(Check::new("gid", status, summary));
    }
    out
}

/// A user-set `NCCL_IB_GID_INDEX` that nccl-wrap keeps: does it point at a usable entry here?
fn user_gid_index(inp: &Inputs, mut c: Check, dev: &Device, p: &PortFacts, value: &str) -> Check {
    let Ok(i) = value.trim().parse::<u32>() else {
        c.status = c.status.max(Status::Warn);
        c.summary += &format!("; NCCL_IB_GID_INDEX={value:?} is not an index");
        return c;
    };
    let (gp, gv, tp, tv) = gid_entry(inp.sysfs, &dev.name, p.port, i);
    let ok = gv.as_deref().and_then(gid::parse_gid).is_some_and(|g| {
        let entry = gid::GidEntry { index: i, gid: g, roce: tv.as_deref().and_then(gid::RoceType::parse) };
        gid::is_full_match(&entry, &crate::plan::gid_prefs(inp.vars).0)
    });
    if !ok {
        c.status = Status::Fail;
        c.summary += &format!(
            "; NCCL_IB_GID_INDEX={i} (set in the environment, kept) points at {} ({}) on this port",
            gv.as_deref().unwrap_or("no entry"),
            tv.as_deref().unwrap_or("no type")
        );
        c.hint = Some(format!(
            "unset NCCL_IB_GID_INDEX (NCCL 2.21.5+ and nccl-wrap pick the right entry per port) or pass --override{}",
            p.gid.as_ref().map(|g| format!("; this port wants {}", g.index)).unwrap_or_default()
        ));
    }
    c.ev("user_gid_index", json!({"value": value, "gid": file(&gp, gv.as_deref()), "type": file(&tp, tv.as_deref())}))
}

fn gid_agreement(inp: &Inputs, roce: &[(&Device, &PortFacts)], agree: &[(String, u32)]) -> Check {
    let index0: Map<String, Value> = roce
        .iter()
        .map(|(d, p)| {
            let (gp, gv, tp, tv) = gid_entry(inp.sysfs, &d.name, p.port, 0);
            (
                format!("{}:{}", d.name, p.port),
                json!({"gid": file(&gp, gv.as_deref()), "type": file(&tp, tv.as_deref())}),
            )
        })
        .collect();
    let indices: Map<String, Value> = agree.iter().map(|(l, i)| (l.clone(), json!(i))).collect();
    let old_nccl = "NCCL older than 2.21.5 defaults to NCCL_IB_GID_INDEX=0, the fe80 link-local entry (RoCE v1 on mlx5), on every port, and its RDMA connections fail across subnets";
    let first = agree[0].1;
    let c = if agree.iter().all(|(_, i)| *i == first) {
        let set = match inp.plan.gid_index {
            Some(i) => format!("; nccl-wrap exports NCCL_IB_GID_INDEX={i}"),
            None => String::new(),
        };
        let note = if first == 0 { String::new() } else { format!(" ({old_nccl}; the export prevents that)") };
        Check::new(
            "gid",
            Status::Pass,
            format!("all {} usable RoCE port(s) agree on GID index {first}{set}{note}", agree.len()),
        )
    } else {
        let list: Vec<String> = agree.iter().map(|(l, i)| format!("{l}={i}")).collect();
        Check::new(
            "gid",
            Status::Warn,
            format!(
                "RoCE ports disagree on the GID index ({}): NCCL_IB_GID_INDEX is one value for all ports, so none is exported; NCCL 2.21.5+ picks per port, but {old_nccl}",
                list.join(", ")
            ),
        )
        .hint("use NCCL 2.21.5 or later, or give every port's net device the same address layout so the tables agree")
    };
    c.ev("indices", indices).ev("exported", json!(inp.plan.gid_index)).ev("index_0", index0)
}

// ---------------------------------------------------------------------------------------------
// nccl-env

fn nccl_env(inp: &Inputs) -> Vec<Check> {
    let mut out = vec![ib_hca(inp)];
    if let Some(v) = user_var(inp.vars, SOCKET_IFNAME) {
        out.push(socket_ifname(inp, &v));
    }
    if let Some(v) = user_var(inp.vars, IB_DISABLE) {
        let on = v.trim().parse::<i64>().is_ok_and(|n| n != 0);
        let c = if on && inp.plan.rdma {
            Check::new(
                "nccl-env",
                Status::Fail,
                format!("NCCL_IB_DISABLE={v} is set though this pod has usable RDMA ports: NCCL will use TCP sockets"),
            )
            .hint("unset NCCL_IB_DISABLE in the pod spec")
        } else {
            Check::new("nccl-env", Status::Pass, format!("NCCL_IB_DISABLE={v}"))
        };
        out.push(c.ev("variable", IB_DISABLE).ev("value", v));
    }
    out
}

/// Every visible RDMA device with its port numbers: the pod's from detection, others from sysfs.
fn visible_ports(inp: &Inputs) -> Vec<(String, Vec<u32>)> {
    let d = &inp.plan.detection;
    let mut all: Vec<(String, Vec<u32>)> =
        d.devices.iter().map(|x| (x.name.clone(), x.ports.iter().map(|p| p.port).collect())).collect();
    for name in &d.not_ours {
        let mut problems = Vec::new();
        let ports = inp
            .sysfs
            .list(&format!("class/infiniband/{name}/ports"), &mut problems)
            .into_iter()
            .filter_map(|p| p.parse().ok())
            .collect();
        all.push((name.clone(), ports));
    }
    all.sort_by(|a, b| crate::names::natural_cmp(&a.0, &b.0));
    all
}

fn ib_hca(inp: &Inputs) -> Check {
    let plan = inp.plan;
    let ours: Vec<String> = plan.hca.clone();
    let Some(var) = plan.vars.iter().find(|v| v.name == IB_HCA) else {
        // Not in the plan: no usable port, so nccl-wrap sets NCCL_IB_DISABLE=1 instead.
        return match user_var(inp.vars, IB_HCA) {
            Some(v) => Check::new(
                "nccl-env",
                Status::Pass,
                format!("NCCL_IB_HCA={v} is set, but no usable RDMA port exists; NCCL_IB_DISABLE=1 takes precedence"),
            )
            .ev("variable", IB_HCA)
            .ev("value", v),
            None => Check::new(
                "nccl-env",
                Status::Pass,
                "NCCL_IB_HCA not set; no usable RDMA port, so nccl-wrap sets NCCL_IB_DISABLE=1",
            )
            .ev("variable", IB_HCA),
        };
    };
    let base =
        |c: Check| c.ev("variable", IB_HCA).ev("pod_ports", json!(ours)).ev("nccl_wrap_value", var.value.as_str());
    let user = match (&var.previous, &var.action) {
        (None, _) => {
            return base(Check::new(
                "nccl-env",
                Status::Pass,
                format!("NCCL_IB_HCA not set; nccl-wrap sets it exactly: {}", var.value),
            ))
        }
        (Some(prev), Action::Override) => {
            return base(Check::new(
                "nccl-env",
                Status::Pass,
                format!("NCCL_IB_HCA={prev} is replaced by {} (--override)", var.value),
            ))
            .ev("value", prev.as_str())
        }
        (Some(prev), _) => prev.clone(),
    };
    let list = List::parse(&user);
    let visible = visible_ports(inp);
    let names: Vec<&str> = visible.iter().map(|(n, _)| n.as_str()).collect();
    let selected: Vec<String> = visible
        .iter()
        .flat_map(|(n, ports)| ports.iter().map(move |p| (n, *p)))
        .filter(|(n, p)| list.selects(n, Some(i64::from(*p))))
        .map(|(n, p)| format!("{n}:{p}"))
        .collect();
    let pod_names: Vec<&str> = plan.detection.devices.iter().map(|d| d.name.as_str()).collect();
    let foreign: Vec<&String> =
        selected.iter().filter(|s| !pod_names.iter().any(|n| s.split(':').next() == Some(*n))).collect();
    let missing: Vec<&String> = ours.iter().filter(|p| !selected.contains(p)).collect();
    let over = list.over_matches(&names);
    let unmatched = list.unmatched(&names);

    let mut status = Status::Pass;
    let mut findings = vec![format!(
        "NCCL_IB_HCA={user} (set in the environment, kept) selects {}",
        if selected.is_empty() { "nothing".to_string() } else { selected.join(", ") }
    )];
    if selected.is_empty() {
        status = Status::Fail;
        findings.push("NCCL will find no IB device and fall back to TCP sockets silently".into());
    }
    for (entry, extra) in &over {
        status = status.max(Status::Warn);
        findings.push(format!("`{entry}` is a prefix and also matches {}", extra.join(", ")));
    }
    if !foreign.is_empty() {
        status = Status::Fail;
        findings.push(format!(
            "{} not this pod's",
            foreign.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
                + if foreign.len() == 1 { " is" } else { " are" }
        ));
    }
    if !unmatched.is_empty() {
        status = status.max(Status::Warn);
        findings.push(format!("{} match(es) no visible device", unmatched.join(", ")));
    }
    if !missing.is_empty() && !selected.is_empty() {
        status = status.max(Status::Warn);
        findings.push(format!(
            "leaves out this pod's {}",
            missing.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
        ));
    }
    let mut c = base(Check::new("nccl-env", status, findings.join("; ")))
        .ev("value", user.as_str())
        .ev("exclude", list.exclude)
        .ev("exact", list.exact)
        .ev("selects", json!(selected))
        .ev("visible", json!(names));
    if status != Status::Pass {
        c = c.hint(format!(
            "nccl-wrap keeps a user-set NCCL_IB_HCA: remove it from the pod spec, pass --override (NCCL_WRAP_OVERRIDE=1), or write it exactly: NCCL_IB_HCA='{}' ('=' makes names exact)",
            var.value
        ));
    }
    c
}

fn socket_ifname(inp: &Inputs, value: &str) -> Check {
    let mut problems = Vec::new();
    let netdevs = inp.sysfs.netdevs(&mut problems);
    let names: Vec<&str> = netdevs.keys().map(String::as_str).collect();
    let list = List::parse(value);
    let selected: Vec<&str> = names.iter().copied().filter(|n| list.selects(n, None)).collect();
    let over = list.over_matches(&names);
    let unmatched = list.unmatched(&names);
    let mut status = Status::Pass;
    let mut findings = vec![format!(
        "NCCL_SOCKET_IFNAME={value} selects {}",
        if selected.is_empty() { "no interface".to_string() } else { selected.join(", ") }
    )];
    if selected.is_empty() {
        status = Status::Fail;
        findings.push("NCCL's bootstrap will find no socket interface and abort".into());
    }
    for (entry, extra) in &over {
        status = status.max(Status::Warn);
        findings.push(format!("`{entry}` is a prefix and also matches {}", extra.join(", ")));
    }
    if !unmatched.is_empty() {
        status = status.max(Status::Warn);
        findings.push(format!("{} match(es) no interface in this namespace", unmatched.join(", ")));
    }
    let mut c = Check::new("nccl-env", status, findings.join("; "))
        .ev("variable", SOCKET_IFNAME)
        .ev("value", value)
        .ev("selects", json!(selected))
        .ev("interfaces", json!(names))
        .ev("class_net", inp.sysfs.path("class/net").display().to_string());
    if status != Status::Pass {
        c = c.hint(
            "name this namespace's interfaces (`ip -br link`); put '=' before the list for exact names, '^' to exclude",
        );
    }
    c
}

// ---------------------------------------------------------------------------------------------
// memlock

fn memlock(inp: &Inputs) -> Check {
    let m = inp.memlock;
    let lim = |v: Option<u64>| v.map_or(json!("unlimited"), |b| json!(b));
    let soft = m.after.soft;
    let (status, summary, hint) = match (soft, m.cap_ipc_lock) {
        (None, _) => (Status::Pass, format!("{}: registrations are not bounded", m.describe()), None),
        (Some(_), Some(true)) => (Status::Pass, m.describe(), None),
        (Some(s), Some(false)) if s < REGISTER_BYTES => (
            Status::Fail,
            format!(
                "{}: registering a {} MiB buffer (NCCL's own buffers, at least) would be refused with ENOMEM",
                m.describe(),
                REGISTER_BYTES >> 20
            ),
            Some("add CAP_IPC_LOCK to the container's securityContext capabilities, or raise the runtime's memlock ulimit (containerd/CRI-O default_ulimits, `LimitMEMLOCK=infinity` for the runtime's systemd unit)"),
        ),
        (Some(_), Some(false)) => (
            Status::Warn,
            format!("{}: enough for {} MiB, but larger registrations (user buffers) may be refused", m.describe(), REGISTER_BYTES >> 20),
            Some("add CAP_IPC_LOCK, or make the memlock limit unlimited"),
        ),
        (Some(_), None) => (
            Status::Warn,
            format!("{}: cannot tell whether registrations over it are allowed", m.describe()),
            Some("capget failed (see NCCL_WRAP_LOG=debug); check CapEff in /proc/self/status for CAP_IPC_LOCK (bit 14) by hand"),
        ),
    };
    let mut c = Check::new("memlock", status, summary)
        .ev("soft_before", lim(m.before.soft))
        .ev("hard_before", lim(m.before.hard))
        .ev("soft", lim(m.after.soft))
        .ev("hard", lim(m.after.hard))
        .ev("raised", !matches!(m.outcome, Outcome::CappedAtHard | Outcome::Failed))
        .ev("cap_ipc_lock", json!(m.cap_ipc_lock))
        .ev("cap_sys_resource", json!(m.cap_sys_resource))
        .ev("capabilities_from", "capget(2)")
        .ev("register_bytes", REGISTER_BYTES);
    c.hint = hint.map(String::from);
    c
}

// ---------------------------------------------------------------------------------------------
// iommu

/// The PCI function behind a device: its own for PFs and VFs, the parent PF for a scalable
/// function (the SF's directory sits inside the PF's).
fn pci_function(sysfs: &Sysfs, att: &Attachment) -> Option<String> {
    match att {
        Attachment::Vf { pci, .. } | Attachment::Pf { pci } => Some(pci.clone()),
        Attachment::Sf { id } => {
            let link = std::fs::read_link(sysfs.path(&format!("bus/auxiliary/devices/{id}"))).ok()?;
            let parts: Vec<&str> = link.iter().filter_map(|c| c.to_str()).collect();
            parts.iter().rev().find(|c| crate::sysfs::looks_like_pci(c)).map(|s| s.to_string())
        }
        Attachment::Software { .. } | Attachment::Unknown => None,
    }
}

/// `iommu=pt` and neighbours from the kernel command line.
fn cmdline_iommu(proc_root: &Path) -> (PathBuf, Option<String>, Vec<String>, bool) {
    let path = proc_root.join("cmdline");
    let text = read_attr(&path).ok();
    let tokens: Vec<String> =
        text.as_deref().unwrap_or("").split_whitespace().filter(|t| t.contains("iommu")).map(String::from).collect();
    let pt = tokens.iter().any(|t| t == "iommu=pt" || t == "iommu.passthrough=1" || t == "iommu.passthrough=on");
    (path, text, tokens, pt)
}

fn iommu(inp: &Inputs) -> Vec<Check> {
    let (cmd_path, cmd_text, tokens, pt) = cmdline_iommu(inp.proc_root);
    let cmd = json!({
        "kernel_cmdline": file(&cmd_path, cmd_text.as_deref()),
        "iommu_options": tokens,
        "iommu_pt": pt,
    });
    let fix = "boot with iommu=pt (next to intel_iommu=on / amd_iommu=on) so devices get identity (passthrough) domains, or switch the group to identity (unbind the device, write `identity` to /sys/kernel/iommu_groups/<N>/type, rebind); if errors persist in passthrough, check PCIe ACS on the switches between GPU and NIC (ACS sends peer-to-peer traffic up through the root complex: disable it in the BIOS or with setpci)";
    let mut out = Vec::new();
    for dev in &inp.plan.detection.devices {
        let Some(pci) = pci_function(inp.sysfs, &dev.attachment) else {
            let (status, summary) = match dev.attachment {
                Attachment::Software { .. } => {
                    (Status::Pass, format!("{}: software RDMA device, no DMA through an IOMMU", dev.name))
                }
                _ => (Status::Warn, format!("{}: its PCI function cannot be found; IOMMU mode unknown", dev.name)),
            };
            out.push(Check::new("iommu", status, summary).ev("device", dev.name.as_str()).ev("cmdline", cmd.clone()));
            continue;
        };
        let group_rel = format!("bus/pci/devices/{pci}/iommu_group");
        let group = std::fs::read_link(inp.sysfs.path(&group_rel))
            .ok()
            .and_then(|l| l.file_name().and_then(|n| n.to_str()).map(String::from));
        let type_path = inp.sysfs.path(&format!("{group_rel}/type"));
        let ty = inp.sysfs.attr(&format!("{group_rel}/type")).ok();
        let (status, summary, hint) = match (&group, ty.as_deref()) {
            (None, _) => (
                Status::Pass,
                format!("{} ({pci}): no IOMMU group, so the IOMMU is off for it and DMA is untranslated", dev.name),
                None,
            ),
            (Some(g), Some("identity")) => (
                Status::Pass,
                format!("{} ({pci}): IOMMU group {g} is identity (passthrough){}", dev.name, if pt { ", iommu=pt on the command line" } else { "" }),
                None,
            ),
            (Some(g), Some(t @ ("DMA" | "DMA-FQ"))) => (
                Status::Fail,
                format!(
                    "{} ({pci}): IOMMU group {g} is {t} (translated){}: the known cause of IBV_WC_LOC_PROT_ERR (vendor_err 81) on every RDMA send with GPUDirect RDMA",
                    dev.name,
                    if pt { "" } else { ", and the kernel command line has no iommu=pt" }
                ),
                Some(fix),
            ),
            (Some(g), Some(t)) => (
                Status::Warn,
                format!("{} ({pci}): IOMMU group {g} has type {t:?}, neither identity nor DMA", dev.name),
                Some(fix),
            ),
            (Some(g), None) if pt => (
                Status::Pass,
                format!("{} ({pci}): IOMMU group {g} has no readable type (kernel before 5.11?), and iommu=pt is on the command line", dev.name),
                None,
            ),
            (Some(g), None) => (
                Status::Warn,
                format!("{} ({pci}): IOMMU group {g} has no readable type and the command line has no iommu=pt: DMA may be translated", dev.name),
                Some(fix),
            ),
        };
        let mut c = Check::new("iommu", status, summary)
            .ev("device", dev.name.as_str())
            .ev("pci", pci.as_str())
            .ev("group", json!(group))
            .ev("type", file(&type_path, ty.as_deref()))
            .ev("cmdline", cmd.clone());
        c.hint = hint.map(String::from);
        out.push(c);
    }
    if out.is_empty() {
        out.push(
            Check::new("iommu", Status::Warn, "no RDMA device of this pod: no IOMMU group to check").ev("cmdline", cmd),
        );
    }
    out
}

// ---------------------------------------------------------------------------------------------
// gpudirect, topology

fn gpudirect(inp: &Inputs, gpus: &[Place]) -> Check {
    let peermem =
        ["nvidia_peermem", "nv_peer_mem"].into_iter().find(|m| inp.sysfs.path(&format!("module/{m}")).exists());
    let drv_path = inp.proc_root.join("driver/nvidia/version");
    let driver = read_attr(&drv_path).ok();
    let open_modules = driver.as_deref().is_some_and(|d| d.contains("Open Kernel Module"));
    let os_path = inp.proc_root.join("sys/kernel/osrelease");
    let kernel = read_attr(&os_path).ok();
    let kernel_ok = kernel.as_deref().and_then(kernel_version).is_some_and(|v| v >= (5, 12));
    let dmabuf = open_modules && kernel_ok;
    let gpu_list: Vec<&str> = gpus.iter().map(|g| g.pci.as_str()).collect();
    let (status, summary, hint) = if gpus.is_empty() {
        (
            Status::Warn,
            "no NVIDIA GPU visible in sysfs (vendor 0x10de, class 0x0300xx/0x0302xx): GPUDirect RDMA not checked"
                .to_string(),
            None,
        )
    } else if let Some(m) = peermem {
        (Status::Pass, format!("{m} is loaded: NICs can DMA to and from the {} GPU(s)' memory", gpus.len()), None)
    } else if dmabuf {
        (
            Status::Pass,
            format!("nvidia_peermem is not loaded, but DMA-BUF is possible (open kernel modules, kernel {}): NCCL 2.19+ uses it", kernel.as_deref().unwrap_or("?")),
            None,
        )
    } else {
        let why = match (&driver, open_modules, kernel_ok) {
            (None, _, _) => format!("the driver version ({}) cannot be read", drv_path.display()),
            (Some(_), false, _) => "the driver is not the open kernel module flavour".to_string(),
            (Some(_), true, false) => "the kernel is older than 5.12".to_string(),
            _ => String::new(),
        };
        (
            Status::Warn,
            format!("nvidia_peermem is not loaded and DMA-BUF cannot be confirmed ({why}): NCCL will stage RDMA traffic through host memory"),
            Some("load nvidia_peermem on the host (`modprobe nvidia-peermem`; GPU Operator: driver.rdma.enabled=true), or use the open kernel modules (driver 515+, kernel 5.12+) for DMA-BUF".to_string()),
        )
    };
    let mut c = Check::new("gpudirect", status, summary)
        .ev("gpus", json!(gpu_list))
        .ev("peermem_module", json!(peermem))
        .ev("module_dir", inp.sysfs.path("module/nvidia_peermem").display().to_string())
        .ev("driver_version", file(&drv_path, driver.as_deref()))
        .ev("kernel", file(&os_path, kernel.as_deref()))
        .ev("dmabuf_possible", dmabuf);
    c.hint = hint;
    c
}

fn kernel_version(text: &str) -> Option<(u32, u32)> {
    let mut it = text.split(|c: char| !c.is_ascii_digit());
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

/// The pod's NICs that carry traffic (falling back to all the pod's devices), placed.
fn chosen_nics(inp: &Inputs) -> Vec<(String, Place)> {
    let plan = inp.plan;
    let used: Vec<&Device> =
        plan.detection.devices.iter().filter(|d| plan.decisions.iter().any(|x| x.used && x.device == d.name)).collect();
    let devs: Vec<&Device> = if used.is_empty() { plan.detection.devices.iter().collect() } else { used };
    devs.into_iter()
        .filter_map(|d| {
            let pci = pci_function(inp.sysfs, &d.attachment)?;
            topology::place(inp.sysfs, &pci).map(|p| (d.name.clone(), p))
        })
        .collect()
}

fn placement(inp: &Inputs, gpus: &[Place]) -> Check {
    let nics = chosen_nics(inp);
    let nic_rows: Vec<Value> =
        nics.iter().map(|(n, p)| json!({"name": n, "pci": p.pci, "numa": p.numa, "bridge": p.bridge()})).collect();
    if gpus.is_empty() {
        return Check::new("topology", Status::Warn, "no NVIDIA GPU visible in sysfs: GPU/NIC placement not checked")
            .ev("pci_devices", inp.sysfs.path("bus/pci/devices").display().to_string())
            .ev("nics", nic_rows);
    }
    if nics.is_empty() {
        return Check::new(
            "topology",
            Status::Warn,
            format!("{} GPU(s), but no chosen NIC has a PCI function to place", gpus.len()),
        );
    }
    let mut worst = Relation::Pix;
    let mut far = Vec::new();
    let mut rows = Vec::new();
    for g in gpus {
        let to: Map<String, Value> = nics.iter().map(|(n, p)| (n.clone(), json!(topology::relation(g, p)))).collect();
        let near = topology::nearest(g, &nics);
        if let Some((n, r)) = near {
            worst = worst.max(r);
            if r > Relation::Pxb {
                far.push(format!("{} (NUMA {}) -> {n} {}", g.pci, numa_text(g.numa), r.name()));
            }
        }
        rows.push(json!({
            "pci": g.pci, "numa": g.numa, "bridge": g.bridge(),
            "nearest": near.map(|(n, _)| n), "relation": near.map(|(_, r)| r), "to": to,
        }));
    }
    let c = if far.is_empty() {
        Check::new(
            "topology",
            Status::Pass,
            format!(
                "each of {} GPU(s) has a chosen NIC at {} or nearer: NCCL uses GPUDirect RDMA for it by default",
                gpus.len(),
                worst.name()
            ),
        )
    } else {
        Check::new(
            "topology",
            Status::Warn,
            format!(
                "{} of {} GPU(s) have no chosen NIC behind a shared PCIe switch ({}): NCCL does not use GPUDirect RDMA past PXB by default (NCCL_NET_GDR_LEVEL) and stages through host memory{}",
                far.len(),
                gpus.len(),
                far.join(", "),
                if worst == Relation::Sys { ", across the CPU interconnect" } else { "" }
            ),
        )
        .hint("request VFs of the PFs that share the GPUs' PCIe switches, or align GPUs and NICs on one NUMA node (kubelet Topology Manager policy single-numa-node or restricted)")
    };
    c.ev("gpus", rows).ev("nics", nic_rows)
}

fn numa_text(n: Option<u32>) -> String {
    n.map_or("-".to_string(), |n| n.to_string())
}

// ---------------------------------------------------------------------------------------------
// netns, selftest

fn netns(inp: &Inputs) -> Check {
    let rel = "module/ib_core/parameters/netns_mode";
    let path = inp.sysfs.path(rel);
    let value = inp.sysfs.attr(rel).ok();
    let d = &inp.plan.detection;
    let (status, summary) = match inp.sysfs.netns_exclusive() {
        Some(true) => (Status::Pass, "exclusive: this namespace shows only its own RDMA devices".to_string()),
        Some(false) if d.not_ours.is_empty() => {
            (Status::Pass, "shared (the default): every RDMA device appears in every namespace".to_string())
        }
        Some(false) => (
            Status::Pass,
            format!(
                "shared (the default): {} RDMA device(s) here are not this pod's; an exact NCCL_IB_HCA keeps NCCL off them",
                d.not_ours.len()
            ),
        ),
        None if value.is_none() && !inp.sysfs.path("module/ib_core").exists() => {
            (Status::Warn, "ib_core is not loaded: no RDMA stack on this node".to_string())
        }
        None => (Status::Warn, format!("RDMA netns mode unknown ({}: {:?})", path.display(), value)),
    };
    Check::new("netns", status, summary)
        .ev("netns_mode", file(&path, value.as_deref()))
        .ev("not_ours", d.not_ours.len())
}

fn selftest(inp: &Inputs) -> Vec<Check> {
    let Some(opts) = inp.selftest else {
        return vec![Check::new("selftest", Status::Warn, "loopback self-test skipped (--no-selftest)")];
    };
    let names = match inp.verbs.device_names() {
        Ok(n) => n,
        Err(VerbsError::Unavailable(reason)) => {
            return vec![Check::new("selftest", Status::Warn, format!("loopback self-test not run: {reason}"))
                .hint("run doctor inside the pod, against the kernel's /sys, without --skip-verbs")];
        }
        Err(e) => {
            return vec![Check::new("selftest", Status::Fail, format!("cannot list verbs devices: {e}"))
                .hint("check that /dev/infiniband is mounted and the uverbs check passes")];
        }
    };
    let mut out = Vec::new();
    for dev in &inp.plan.detection.devices {
        for p in &dev.ports {
            if !inp.plan.decisions.iter().any(|x| x.used && x.device == dev.name && x.port == p.port) {
                continue;
            }
            let Ok(port) = u8::try_from(p.port) else { continue };
            let label = format!("{}:{}", dev.name, p.port);
            let gid_index = p.gid.as_ref().map(|g| g.index);
            let base =
                |c: Check| c.ev("device", dev.name.as_str()).ev("port", p.port).ev("gid_index", json!(gid_index));
            if !names.contains(&dev.name) {
                out.push(
                    base(Check::new(
                        "selftest",
                        Status::Fail,
                        format!("{label}: {}", VerbsError::NotListed(dev.name.clone())),
                    ))
                    .hint("see the uverbs check for this device"),
                );
                continue;
            }
            let queried = inp.verbs.query_port(&dev.name, port, gid_index);
            let r = inp.verbs.selftest(&dev.name, port, gid_index, opts);
            let mut c = if r.passed {
                Check::new("selftest", Status::Pass, format!("{label}: loopback RC send passed in {} us", r.micros))
            } else {
                let c = Check::new(
                    "selftest",
                    Status::Fail,
                    format!(
                        "{label}: loopback RC send failed at {}: {}",
                        r.step.as_deref().unwrap_or("?"),
                        r.status.as_deref().unwrap_or("?")
                    ),
                );
                match &r.hint {
                    Some(h) => c.hint(h.as_str()),
                    None => c,
                }
            };
            c = c.ev("result", json!(r));
            c = match queried {
                Ok(vp) => c.ev("query_port", json!(vp)),
                Err(e) => c.ev("query_port_error", e.to_string()),
            };
            out.push(base(c));
        }
    }
    if out.is_empty() {
        out.push(Check::new("selftest", Status::Warn, "no usable RDMA port to test"));
    }
    out
}

// ---------------------------------------------------------------------------------------------
// human form

fn abbreviate(names: &[String], n: usize) -> String {
    let mut s = names.iter().take(n).cloned().collect::<Vec<_>>().join(", ");
    if names.len() > n {
        let _ = write!(s, ", ... ({} more)", names.len() - n);
    }
    s
}

/// One line per check; evidence and fix under every check that does not pass; then the
/// GPU/NIC matrix when GPUs are visible.
pub fn human(inp: &Inputs, report: &Report) -> String {
    let mut out = String::new();
    for c in &report.checks {
        let _ = writeln!(out, "{} {:<9} {}", c.status.label(), c.id, c.summary);
        if c.status == Status::Pass {
            continue;
        }
        for line in evidence_lines(&c.evidence) {
            let _ = writeln!(out, "     evidence: {line}");
        }
        if let Some(h) = &c.hint {
            let _ = writeln!(out, "     fix: {h}");
        }
    }
    if let Some(t) = report.checks.iter().find(|c| c.id == "topology") {
        out += &matrix(t);
    }
    let count = |k| report.counts.get(k).copied().unwrap_or(0);
    let _ = writeln!(
        out,
        "{} fail, {} warn, {} pass ({} RDMA port(s) usable, from {})",
        count("fail"),
        count("warn"),
        count("pass"),
        inp.plan.hca.len(),
        inp.plan.detection.source.describe()
    );
    out
}

/// Evidence as people read it: `file = value` for each file read (at any depth), `key: value`
/// for the rest.
fn evidence_lines(ev: &Map<String, Value>) -> Vec<String> {
    let mut out = Vec::new();
    for (k, v) in ev {
        evidence_walk(k, v, &mut out);
    }
    out
}

fn evidence_walk(key: &str, v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(o) if o.contains_key("file") => out.push(file_line(o)),
        Value::Object(o) => {
            for (k, x) in o {
                evidence_walk(&format!("{key}.{k}"), x, out);
            }
        }
        Value::Array(a) if a.iter().any(Value::is_object) => {
            out.push(format!("{key}: {} entries (--json shows them)", a.len()));
        }
        Value::String(s) => out.push(format!("{key}: {s}")),
        other => out.push(format!("{key}: {other}")),
    }
}

fn file_line(o: &Map<String, Value>) -> String {
    let f = o.get("file").and_then(Value::as_str).unwrap_or("?");
    match o.get("value") {
        Some(Value::String(s)) => format!("{f} = {s:?}"),
        Some(Value::Null) | None => format!("{f}: unreadable"),
        Some(other) => format!("{f} = {other}"),
    }
}

/// `nvidia-smi topo -m` style: a row per GPU, a column per chosen NIC, NUMA and bridge last.
fn matrix(topo: &Check) -> String {
    let (Some(gpus), Some(nics)) =
        (topo.evidence.get("gpus").and_then(Value::as_array), topo.evidence.get("nics").and_then(Value::as_array))
    else {
        return String::new();
    };
    if gpus.is_empty() || nics.is_empty() {
        return String::new();
    }
    let s = |v: &Value, k: &str| {
        v.get(k).map_or("-".to_string(), |x| x.as_str().map_or_else(|| x.to_string(), String::from))
    };
    let names: Vec<String> = nics.iter().map(|n| s(n, "name")).collect();
    let w = names.iter().map(String::len).max().unwrap_or(4).max(4) + 2;
    let mut out = String::from("\nGPU/NIC topology (chosen NICs; PIX same switch, PXB several bridges, PHB host bridge, NODE same NUMA node, SYS across NUMA nodes)\n");
    let _ = write!(out, "{:<14}", "");
    for n in &names {
        let _ = write!(out, "{n:<w$}");
    }
    let _ = writeln!(out, "{:<6}bridge", "NUMA");
    for (i, g) in gpus.iter().enumerate() {
        let _ = write!(out, "{:<14}", format!("GPU{i}"));
        for n in &names {
            let r = g.get("to").and_then(|t| t.get(n)).and_then(Value::as_str).unwrap_or("-");
            let _ = write!(out, "{r:<w$}");
        }
        let numa = g.get("numa").and_then(Value::as_u64).map_or("-".into(), |n| n.to_string());
        let _ = writeln!(out, "{numa:<6}{} ({})", s(g, "bridge"), s(g, "pci"));
    }
    for n in nics {
        let numa = n.get("numa").and_then(Value::as_u64).map_or("-".into(), |n| n.to_string());
        let _ = writeln!(
            out,
            "{:<14}{:<w2$}{numa:<6}{} ({})",
            s(n, "name"),
            "",
            s(n, "bridge"),
            s(n, "pci"),
            w2 = w * names.len()
        );
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_versions() {
        assert_eq!(kernel_version("5.14.0-284.73.1.el9_2.x86_64"), Some((5, 14)));
        assert_eq!(kernel_version("6.1.0-21-amd64"), Some((6, 1)));
        assert_eq!(kernel_version("garbage"), None);
    }

    #[test]
    fn evidence_reads_as_file_equals_value() {
        let mut m = Map::new();
        m.insert("state".into(), file(Path::new("/sys/x/state"), Some("1: DOWN")));
        m.insert("type".into(), file(Path::new("/sys/y/type"), None));
        m.insert("device".into(), json!("mlx5_3"));
        let lines = evidence_lines(&m);
        assert!(lines.contains(&"/sys/x/state = \"1: DOWN\"".to_string()), "{lines:?}");
        assert!(lines.contains(&"/sys/y/type: unreadable".to_string()), "{lines:?}");
        assert!(lines.contains(&"device: mlx5_3".to_string()), "{lines:?}");
    }

    use crate::memlock::Limits;
    use crate::probe::{SelftestResult, VerbsPort};

    /// Answers like a real verbs build would: mlx5_6 passes, the rest fail the send as a
    /// translated IOMMU makes them fail.
    struct FakeVerbs;

    impl Verbs for FakeVerbs {
        fn device_names(&self) -> Result<Vec<String>, VerbsError> {
            Ok(vec!["mlx5_6".into(), "mlx5_7".into(), "mlx5_10".into()])
        }
        fn query_port(&self, _: &str, _: u8, _: Option<u32>) -> Result<VerbsPort, VerbsError> {
            Ok(VerbsPort { state: "ACTIVE".into(), link_layer: "Ethernet".into(), gid_tbl_len: 8, gid: None })
        }
        fn selftest(&self, device: &str, _: u8, gid: Option<u32>, _: &SelftestOptions) -> SelftestResult {
            let ok = device == "mlx5_6" && gid == Some(3);
            SelftestResult {
                passed: ok,
                step: (!ok).then(|| "poll".into()),
                status: (!ok).then(|| "IBV_WC_LOC_PROT_ERR".into()),
                hint: (!ok).then(|| "check the IOMMU mode".into()),
                micros: 120,
            }
        }
    }

    #[test]
    fn a_real_verbs_implementation_plugs_into_the_selftest_check() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/nodes/h100-roce-sriov");
        let vars = Vars::new();
        let sysfs = Sysfs::new(root.join("sys"));
        let (prefs, _) = crate::plan::gid_prefs(&vars);
        let annotations = root.join("podnetinfo/annotations");
        let det = crate::detect::detect(&crate::detect::Inputs {
            vars: &vars,
            sysfs: &sysfs,
            annotations: &annotations,
            prefs: &prefs,
        });
        let plan = crate::plan::plan(det, &vars, &prefs, crate::plan::Choices::default());
        let lim = Limits { soft: None, hard: None };
        let memlock = Memlock {
            before: lim,
            after: lim,
            outcome: Outcome::AlreadyUnlimited,
            cap_ipc_lock: Some(false),
            cap_sys_resource: Some(false),
            error: None,
        };
        let inp = Inputs {
            plan: &plan,
            memlock: &memlock,
            vars: &vars,
            sysfs: &sysfs,
            proc_root: &root.join("proc"),
            dev_root: &root.join("dev"),
            verbs: &FakeVerbs,
            selftest: Some(&SelftestOptions { buffer_bytes: 1 << 20, timeout_ms: 2000 }),
        };
        let report = run(&inp).expect("doctor runs");
        let st: Vec<(String, Status)> = report
            .checks
            .iter()
            .filter(|c| c.id == "selftest")
            .map(|c| (c.summary.split(':').next().unwrap_or("").to_string(), c.status))
            .collect();
        assert_eq!(
            st,
            [
                ("mlx5_6".to_string(), Status::Pass),
                ("mlx5_7".to_string(), Status::Fail),
                ("mlx5_10".to_string(), Status::Fail),
                ("mlx5_11".to_string(), Status::Fail),
            ]
        );
        let mlx5_11 = report.checks.iter().find(|c| c.id == "selftest" && c.summary.starts_with("mlx5_11"));
        assert!(mlx5_11.is_some_and(|c| c.summary.contains("lists no device named mlx5_11")), "{mlx5_11:?}");
        assert_eq!(report.exit, 1);
        assert_eq!(memlock_status(&inp), Status::Pass);
    }

    fn memlock_status(inp: &Inputs) -> Status {
        memlock(inp).status
    }

    #[test]
    fn status_order_makes_fail_the_worst() {
        assert!(Status::Fail > Status::Warn && Status::Warn > Status::Pass);
    }
}
