//! `nccl-wrap doctor`: names the cause before NCCL hangs or silently falls back to TCP, one check
//! per concern with a stable id (docs/doctor.md), one file per family; this file holds the check
//! type, the inputs and the order. It only reads, through roots and the [`Verbs`] seam.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::fmt::Write as _;
use std::io::Write as _;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

use rustix::fs::{Mode, OFlags};
use serde::Serialize;
use serde_json::{json, Map, Value};

use nw_decide::{Action, Plan};
use nw_nccl::env::{IB_DISABLE, IB_GID_INDEX, IB_HCA};
use nw_nccl::list::List;
use nw_observe::detect::port::PortFacts;
use nw_observe::detect::sysfs::{looks_like_pci, read_attr, Attachment, Sysfs};
use nw_observe::detect::{Device, Vars};
use nw_observe::verbs::{SelftestOptions, Verbs, VerbsError};
use nw_output::msg::PREFIX;
use nw_pid1::memlock::{Memlock, Outcome};

mod bootstrap;
mod devices;
mod efa;
mod gid;
mod gpu;
mod human;
mod iommu;
mod memlock;
mod nccl_env;
mod netns;
mod pcie;
mod rate;
mod selftest;
mod userspace;
mod uverbs;

pub use human::human;
use nw_observe::detect::topology::{self, Place, Relation};
pub use nw_observe::observation::View;

/// NCCL registers at least its own communication buffers; a limit below this refuses them.
pub const REGISTER_BYTES: u64 = 64 << 20;
/// Exit status when doctor itself cannot run.
pub const EXIT_CANNOT_RUN: u8 = 2;

const SOCKET_IFNAME: &str = "NCCL_SOCKET_IFNAME";

pub use nw_output::status::Status;

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
    fn hint(self, hint: impl Into<String>) -> Check {
        self.hint_opt(Some(hint))
    }
    fn hint_opt(mut self, hint: Option<impl Into<String>>) -> Check {
        self.hint = hint.map(Into::into);
        self
    }
    /// `hint` as the fix, unless the check passes.
    fn fix(self, hint: impl Into<String>) -> Check {
        let fails = self.status != Status::Pass;
        self.hint_opt(Some(hint).filter(|_| fails))
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
    /// This namespace's addresses, where detection did not read them (a device plugin's VFs).
    pub addrs: nw_observe::detect::devices::AddrSource<'a>,
}

#[derive(Debug, thiserror::Error)]
pub enum DoctorError {
    #[error("cannot read the sysfs root {path}: {source}")]
    SysfsRoot { path: PathBuf, source: std::io::Error },
    #[error("{path} is not a directory; is --sysfs-root (NCCL_WRAP_SYSFS_ROOT) right?")]
    NotADirectory { path: PathBuf },
}

/// How the report is printed: as JSON, or for people (`quiet`: only what does not pass).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    Json,
    Human { quiet: bool },
}

/// Runs doctor and prints its report, then `after` with it (the health files): the exit status
/// says whether anything failed, or is 2 where `after` fails.
pub fn main(inp: &Inputs, form: Form, after: impl FnOnce(&Report) -> Result<(), String>) -> u8 {
    report_then(inp, form, after).unwrap_or_else(|e| {
        eprintln!("{PREFIX} {e}");
        EXIT_CANNOT_RUN
    })
}

/// [`main`], its error the line that says why doctor could not finish.
fn report_then(inp: &Inputs, form: Form, after: impl FnOnce(&Report) -> Result<(), String>) -> Result<u8, String> {
    let report = run_scoped(inp, View::Pod).map_err(|e| format!("doctor cannot run: {e}"))?;
    let text = match form {
        Form::Json => {
            serde_json::to_string(&report).map_err(|e| format!("doctor cannot serialise its report: {e}"))? + "\n"
        }
        Form::Human { quiet } => human(inp, &report, quiet),
    };
    let mut out = std::io::stdout().lock();
    let written = out.write_all(text.as_bytes()).and_then(|()| out.flush());
    written.map_err(|e| format!("cannot write to stdout: {e}"))?;
    after(&report).map_err(|e| format!("doctor cannot write its health files: {e}"))?;
    Ok(report.exit)
}

/// Runs the check families of `view`, in doctor's order: a pod's doctor runs every family; the
/// node agent only those about the node (not one container's `/dev`, environment and verbs, nor
/// the addresses a pod's rails carry).
pub fn run_scoped(inp: &Inputs, view: View) -> Result<Report, DoctorError> {
    let pod = view == View::Pod;
    let root = inp.sysfs.path("");
    match std::fs::metadata(&root) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return Err(DoctorError::NotADirectory { path: root }),
        Err(source) => return Err(DoctorError::SysfsRoot { path: root, source }),
    }
    let gpus = topology::gpus(inp.sysfs);
    let mut checks = vec![devices::check(inp)];
    checks.extend(devices::ports(inp));
    if pod {
        checks.extend(uverbs::checks(inp));
        checks.extend(gid::checks(inp));
        checks.extend(gid::owner_checks(inp));
        checks.extend(nccl_env::checks(inp));
        checks.extend(userspace::check(inp));
        checks.extend(efa::check(inp));
        checks.extend(bootstrap::checks(inp));
    }
    checks.push(memlock::check(inp));
    checks.extend(iommu::checks(inp));
    checks.push(gpu::gpudirect(inp, &gpus));
    checks.push(gpu::placement(inp, &gpus));
    checks.extend(pcie::checks(inp, &gpus));
    checks.extend(rate::checks(inp));
    checks.push(netns::check(inp));
    if pod {
        checks.extend(selftest::checks(inp));
    }
    let mut counts = BTreeMap::from([("pass", 0), ("warn", 0), ("fail", 0)]);
    for c in &checks {
        *counts.entry(status_word(c.status)).or_default() += 1;
    }
    let exit = u8::from(checks.iter().any(|c| c.status == Status::Fail));
    Ok(Report { checks, counts, exit })
}

// Helpers more than one check family uses.

/// The word a status is counted and labelled by.
pub fn status_word(s: Status) -> &'static str {
    match s {
        Status::Pass => "pass",
        Status::Warn => "warn",
        Status::Fail => "fail",
    }
}

fn user_var(vars: &Vars, name: &str) -> Option<String> {
    vars.get(OsStr::new(name)).map(|v| v.to_string_lossy().into_owned())
}

/// The PCI function behind a device: its own for PFs and VFs, the parent PF for a scalable
/// function (the SF's directory sits inside the PF's).
fn pci_function(sysfs: &Sysfs, att: &Attachment) -> Option<String> {
    match att {
        Attachment::Vf { pci, .. } | Attachment::Pf { pci } => Some(pci.clone()),
        Attachment::Sf { id } => {
            let link = std::fs::read_link(sysfs.path(&format!("bus/auxiliary/devices/{id}"))).ok()?;
            link.iter().filter_map(|c| c.to_str()).rev().find(|c| looks_like_pci(c)).map(String::from)
        }
        Attachment::Software { .. } | Attachment::Unknown => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_versions() {
        assert_eq!(gpu::kernel_version("5.14.0-284.73.1.el9_2.x86_64"), Some((5, 14)));
        assert_eq!(gpu::kernel_version("6.1.0-21-amd64"), Some((6, 1)));
        assert_eq!(gpu::kernel_version("garbage"), None);
    }

    #[test]
    fn evidence_reads_as_file_equals_value() {
        let mut m = Map::new();
        m.insert("state".into(), file(Path::new("/sys/x/state"), Some("1: DOWN")));
        m.insert("type".into(), file(Path::new("/sys/y/type"), None));
        m.insert("device".into(), json!("mlx5_3"));
        let lines = human::evidence_lines(&m);
        assert!(lines.contains(&"/sys/x/state = \"1: DOWN\"".to_string()), "{lines:?}");
        assert!(lines.contains(&"/sys/y/type: unreadable".to_string()), "{lines:?}");
        assert!(lines.contains(&"device: mlx5_3".to_string()), "{lines:?}");
    }

    use nw_observe::detect::port::{SelftestResult, VerbsPort};
    use nw_pid1::memlock::Limits;

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
        let (prefs, _) = nw_decide::gid_prefs(&vars);
        let annotations = root.join("podnetinfo/annotations");
        let det = nw_observe::detect::detect(&nw_observe::detect::Inputs {
            vars: &vars,
            sysfs: &sysfs,
            annotations: &annotations,
            dra_metadata: None,
            device_nodes: None,
            rule: &nw_decide::gid_rule(prefs),
            addrs: &|| Ok(Vec::new()),
            kinds: &|| None,
            tables: &nw_observe::detect::gid_source::SysfsOnly,
        });
        let mut plan = nw_decide::plan(det, &vars, &prefs, nw_decide::Choices::default());
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
            addrs: &|| Ok(Vec::new()),
        };
        let report = run_scoped(&inp, View::Pod).expect("doctor runs");
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

        // A device this build links no provider for was not checked: its test is not run, and
        // that is a warning, not a failure of the device.
        let reason =
            "this build links no verbs provider for driver mlx4_core (rdma-core's mlx4; the providers it has: mlx5)";
        for d in plan.detection.devices.iter_mut().filter(|d| d.name == "mlx5_11") {
            for p in &mut d.ports {
                p.verbs = Some(nw_observe::detect::port::VerbsCheck::NotChecked { reason: reason.into() });
            }
        }
        let inp = Inputs {
            plan: &plan,
            memlock: &memlock,
            vars: &vars,
            sysfs: &sysfs,
            proc_root: &root.join("proc"),
            dev_root: &root.join("dev"),
            verbs: &FakeVerbs,
            selftest: Some(&SelftestOptions { buffer_bytes: 1 << 20, timeout_ms: 2000 }),
            addrs: &|| Ok(Vec::new()),
        };
        let report = run_scoped(&inp, View::Pod).expect("doctor runs");
        let mlx5_11 = report.checks.iter().find(|c| c.id == "selftest" && c.summary.starts_with("mlx5_11"));
        assert!(
            mlx5_11.is_some_and(|c| c.status == Status::Warn && c.summary.ends_with(&format!("not run: {reason}"))),
            "{mlx5_11:?}"
        );
    }

    fn memlock_status(inp: &Inputs) -> Status {
        memlock::check(inp).status
    }

    #[test]
    fn status_order_makes_fail_the_worst() {
        assert!(Status::Fail > Status::Warn && Status::Warn > Status::Pass);
    }
}
