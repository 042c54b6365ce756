//! Node health: doctor's findings reduced to one [`Health`] value, rendered as NFD labels
//! (`features`) and Prometheus metrics (`metrics`) by `doctor --features/--metrics` and `watch`.
//! Names are documented in `docs/health.md`; nothing here decides anything doctor did not.

pub mod counters;
pub mod features;
pub mod metrics;
pub mod ring;
pub mod watch;

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::Value;

use crate::doctor::{Report, Status, View};
use nw_decide::Plan;
use nw_observe::detect::sysfs::Sysfs;
use nw_pid1::memlock::Memlock;

pub use counters::Counter;

/// Whose view the figures are, as the files name it: a pod's devices (doctor) or the node's (watch).
pub fn view_name(view: View) -> &'static str {
    match view {
        View::Pod => "pod",
        View::Node => "node",
    }
}

/// Where to write the two files; either may be absent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outputs {
    pub features: Option<PathBuf>,
    pub metrics: Option<PathBuf>,
}

impl Outputs {
    pub fn is_empty(&self) -> bool {
        self.features.is_none() && self.metrics.is_none()
    }
}

/// One port as the health files show it.
#[derive(Debug, Clone, PartialEq)]
pub struct PortHealth {
    pub device: String,
    pub port: u32,
    /// `pf`, `vf`, `sf`, `software` or `unknown`.
    pub kind: &'static str,
    pub link_layer: Option<String>,
    /// As sysfs prints it: `400 Gb/sec (4X NDR)`.
    pub rate: Option<String>,
    /// The number of `ports/N/state` (4 ACTIVE) and `phys_state` (5 LinkUp).
    pub state: Option<u32>,
    pub phys_state: Option<u32>,
    /// Pod view: the plan hands it to NCCL; node view: its link can carry traffic.
    pub usable: bool,
    /// The RoCE v2 GID index NCCL would pick, where the port has one of the wanted family.
    pub gid_index: Option<u32>,
    pub counters: Vec<Counter>,
}

/// One check's outcome, keyed as the metrics key it: id and what it is about.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct CheckKey {
    pub id: &'static str,
    pub device: Option<String>,
    pub port: Option<u32>,
    /// For `nccl-env`: the variable the check is about.
    pub variable: Option<String>,
}

/// Everything the two files say, as plain data.
#[derive(Debug, Clone, PartialEq)]
pub struct Health {
    pub view: View,
    pub ports: Vec<PortHealth>,
    /// Devices per kind (`pf`, `vf`, ...), the ones left out of the node's view included.
    pub devices: BTreeMap<&'static str, usize>,
    /// At least one usable port and no failed check (memlock aside: see [`healthy`]).
    pub healthy: bool,
    /// Every usable RoCE port with a RoCE v2 GID of the wanted family has it at one index.
    pub gid_consistent: bool,
    pub gid_index: Option<u32>,
    /// The soft RLIMIT_MEMLOCK a process gets here (`None`: unlimited).
    pub memlock_bytes: Option<u64>,
    pub cap_ipc_lock: Option<bool>,
    /// Every PCI RDMA device's IOMMU group is untranslated; `None` when that cannot be told.
    pub iommu_passthrough: Option<bool>,
    /// GPUs are visible and nvidia_peermem is loaded or DMA-BUF is possible.
    pub gpudirect: bool,
    /// Worst status per check and subject.
    pub checks: BTreeMap<CheckKey, Status>,
    /// watch --ring: the last ring round's outcome, kept until the next; not part of `healthy`
    /// (a failed pair may be the successor's fault).
    pub ring: Option<ring::Report>,
}

impl Health {
    pub fn usable(&self) -> usize {
        self.ports.iter().filter(|p| p.usable).count()
    }

    /// `ethernet`, `infiniband` or `mixed`, over every port.
    pub fn link_layer(&self) -> Option<&'static str> {
        let word = |p: &PortHealth| match p.link_layer.as_deref() {
            Some("Ethernet") => Some("ethernet"),
            Some("InfiniBand") => Some("infiniband"),
            _ => None,
        };
        let seen: std::collections::BTreeSet<&'static str> = self.ports.iter().filter_map(word).collect();
        (seen.len() > 1).then_some("mixed").or(seen.first().copied())
    }

    /// The slowest usable port's rate in Gb/s.
    pub fn min_rate_gbps(&self) -> Option<f64> {
        let rates = self.ports.iter().filter(|p| p.usable).filter_map(|p| parse_rate_gbps(p.rate.as_deref()?));
        rates.min_by(|a, b| a.total_cmp(b))
    }

    pub fn worst_by_id(&self) -> BTreeMap<&'static str, Status> {
        let mut out: BTreeMap<&'static str, Status> = BTreeMap::new();
        for (k, s) in &self.checks {
            let e = out.entry(k.id).or_insert(*s);
            *e = (*e).max(*s);
        }
        out
    }
}

pub struct Facts<'a> {
    pub view: View,
    pub plan: &'a Plan,
    pub report: &'a Report,
    pub memlock: &'a Memlock,
    /// Counters per (device, port), read by [`counters::read`].
    pub counters: &'a BTreeMap<(String, u32), Vec<Counter>>,
    /// Devices of each kind the view left out (the node's view skips VFs and SFs).
    pub skipped: &'a BTreeMap<&'static str, usize>,
}

/// Reads the counters of every port but a management function's (NVSwitch): reading those floods
/// the kernel log (prometheus/node_exporter#3434) and says nothing of the job's fabric.
pub fn read_counters(sysfs: &Sysfs, plan: &Plan) -> BTreeMap<(String, u32), Vec<Counter>> {
    // Inserted one by one: collecting into the map would build a sort of its own into the binary.
    let mut out = BTreeMap::new();
    for d in plan.detection.devices.iter().filter(|d| nw_decide::management_function(d).is_none()) {
        for p in &d.ports {
            out.insert((d.name.clone(), p.port), counters::read(sysfs, &d.name, p.port));
        }
    }
    out
}

/// Doctor's findings and the plan, reduced to what the files say. Pure.
pub fn summarize(f: &Facts) -> Health {
    let plan = f.plan;
    let mut ports = Vec::new();
    let mut devices: BTreeMap<&'static str, usize> = f.skipped.clone();
    for d in &plan.detection.devices {
        *devices.entry(d.attachment.kind()).or_default() += 1;
        for p in &d.ports {
            let usable = match f.view {
                View::Pod => plan.is_used(&d.name, p.port),
                View::Node => nw_decide::link_problem(p).is_none() && nw_decide::management_function(d).is_none(),
            };
            ports.push(PortHealth {
                device: d.name.clone(),
                port: p.port,
                kind: d.attachment.kind(),
                link_layer: p.link_layer.clone(),
                rate: p.rate.clone(),
                state: p.state.as_deref().and_then(state_number),
                phys_state: p.phys_state.as_deref().and_then(state_number),
                usable,
                gid_index: p.gid.as_ref().filter(|g| g.full_match).map(|g| g.index),
                counters: f.counters.get(&(d.name.clone(), p.port)).cloned().unwrap_or_default(),
            });
        }
    }
    let indices: Vec<u32> = ports.iter().filter(|p| p.usable).filter_map(|p| p.gid_index).collect();
    let gid_consistent = indices.windows(2).all(|w| w[0] == w[1]);
    let gid_index = if gid_consistent { indices.first().copied() } else { None };

    let mut checks: BTreeMap<CheckKey, Status> = BTreeMap::new();
    for c in &f.report.checks {
        let text = |k: &str| c.evidence.get(k).and_then(Value::as_str).map(String::from);
        let key = CheckKey {
            id: c.id,
            device: text("device"),
            port: c.evidence.get("port").and_then(Value::as_u64).and_then(|n| u32::try_from(n).ok()),
            variable: text("variable"),
        };
        let e = checks.entry(key).or_insert(c.status);
        *e = (*e).max(c.status);
    }
    let iommu = checks.iter().filter(|(k, _)| k.id == "iommu" && k.device.is_some()).map(|(_, s)| *s).max();
    let iommu_passthrough = iommu.filter(|s| *s != Status::Warn).map(|s| s == Status::Pass);
    let gpudirect = f.report.checks.iter().any(|c| c.id == "gpudirect" && c.status == Status::Pass);
    let mut h = Health {
        view: f.view,
        ports,
        devices,
        healthy: false,
        gid_consistent,
        gid_index,
        memlock_bytes: f.memlock.after.soft,
        cap_ipc_lock: f.memlock.cap_ipc_lock,
        iommu_passthrough,
        gpudirect,
        checks,
        ring: None,
    };
    h.healthy = healthy(&h);
    h
}

/// Writes the files `out` names; every failure is named, none stops the other file.
pub fn write_outputs(
    out: &Outputs,
    h: &Health,
    round: &metrics::Round,
    written_by: &str,
    expiry: Option<u64>,
) -> Result<(), String> {
    let mut errors = Vec::new();
    if let Some(path) = &out.features {
        let (text, refused) = features::render(h, written_by, round.timestamp as u64, expiry);
        for r in refused {
            log::warn!("feature left out, not valid as a Kubernetes label: {r}");
        }
        let (n, max) = (text.len(), features::NFD_MAX_BYTES);
        if n > max {
            errors.push(format!(
                "{}: {n} bytes, over NFD's {max} byte limit for a feature file; not written",
                path.display()
            ));
        } else if let Err(e) = nw_output::write::atomic(path, text.as_bytes()) {
            errors.push(format!("features: {e}"));
        }
    }
    if let Some(path) = &out.metrics {
        if let Err(e) = nw_output::write::atomic(path, metrics::render(h, round).as_bytes()) {
            errors.push(format!("metrics: {e}"));
        }
    }
    errors.is_empty().then_some(()).ok_or_else(|| errors.join("; "))
}

/// `doctor --features/--metrics`, where given: the pod's view of the report doctor just printed.
pub fn write_for_doctor(inp: &crate::doctor::Inputs, report: &Report, out: &Outputs) -> Result<(), String> {
    if out.is_empty() {
        return Ok(());
    }
    let counters = read_counters(inp.sysfs, inp.plan);
    let (plan, memlock, skipped) = (inp.plan, inp.memlock, &BTreeMap::new());
    let h = summarize(&Facts { view: View::Pod, plan, report, memlock, counters: &counters, skipped });
    let round = metrics::Round { timestamp: watch::unix_now(), ..Default::default() };
    write_outputs(out, &h, &round, "nccl-wrap doctor", None)
}

/// At least one usable port, and no check failed but memlock: pods with CAP_IPC_LOCK are not bound
/// by the limit (it has a label of its own), or every OpenShift node would be unhealthy.
pub fn healthy(h: &Health) -> bool {
    h.usable() > 0 && !h.checks.iter().any(|(k, s)| *s == Status::Fail && k.id != "memlock")
}

/// The leading number of `4: ACTIVE`.
pub fn state_number(raw: &str) -> Option<u32> {
    raw.split(':').next()?.trim().parse().ok()
}

/// Gb/s from sysfs's `rate` (`400 Gb/sec (4X NDR)`, `2.5 Gb/sec (1X SDR)`, `100 Mb/sec`).
pub fn parse_rate_gbps(rate: &str) -> Option<f64> {
    let mut it = rate.split_whitespace();
    let n: f64 = it.next()?.parse().ok().filter(|n: &f64| n.is_finite() && *n >= 0.0)?;
    match it.next()? {
        "Gb/sec" => Some(n),
        "Mb/sec" => Some(n / 1000.0),
        _ => None,
    }
}

/// A small health value for the renderers' tests: two ports, one down, a failing ports check.
#[cfg(test)]
pub(crate) fn sample() -> Health {
    let port = |device: &str, up: bool| PortHealth {
        device: device.into(),
        port: 1,
        kind: "pf",
        link_layer: Some("Ethernet".into()),
        rate: Some("400 Gb/sec (4X NDR)".into()),
        state: Some(if up { 4 } else { 1 }),
        phys_state: Some(if up { 5 } else { 3 }),
        usable: up,
        gid_index: Some(3),
        counters: vec![Counter { dir: "hw_counters", name: "out_of_sequence".into(), value: 17 }],
    };
    let key = |id: &'static str, device: Option<&str>, port: Option<u32>| CheckKey {
        id,
        device: device.map(String::from),
        port,
        variable: None,
    };
    let checks = BTreeMap::from([
        (key("ports", Some("mlx5_0"), Some(1)), Status::Pass),
        (key("ports", Some("mlx5_1"), Some(1)), Status::Fail),
        (key("memlock", None, None), Status::Fail),
        (key("topology", None, None), Status::Warn),
    ]);
    let mut h = Health {
        view: View::Node,
        ports: vec![port("mlx5_0", true), port("mlx5_1", false)],
        devices: BTreeMap::from([("pf", 2), ("vf", 4)]),
        healthy: false,
        gid_consistent: true,
        gid_index: Some(3),
        memlock_bytes: Some(8 << 20),
        cap_ipc_lock: Some(false),
        iommu_passthrough: Some(true),
        gpudirect: false,
        checks,
        ring: None,
    };
    h.healthy = healthy(&h);
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn healthy_needs_a_usable_port_and_no_failure_but_memlock() {
        let mut h = sample();
        assert!(!h.healthy, "a port check fails");
        h.checks.retain(|k, _| !(k.id == "ports" && k.device.as_deref() == Some("mlx5_1")));
        assert!(healthy(&h), "memlock alone does not make a node unhealthy");
        h.ports.iter_mut().for_each(|p| p.usable = false);
        assert!(!healthy(&h), "no usable port");
        assert_eq!(sample().worst_by_id().get("ports"), Some(&Status::Fail));
        assert_eq!(sample().link_layer(), Some("ethernet"));
        assert_eq!(sample().min_rate_gbps(), Some(400.0));
    }

    #[test]
    fn rates_and_states_parse_as_sysfs_prints_them() {
        assert_eq!(parse_rate_gbps("400 Gb/sec (4X NDR)"), Some(400.0));
        assert_eq!(parse_rate_gbps("2.5 Gb/sec (1X SDR)"), Some(2.5));
        assert_eq!(parse_rate_gbps("100 Mb/sec"), Some(0.1));
        assert_eq!(parse_rate_gbps("fast"), None);
        assert_eq!(parse_rate_gbps("-1 Gb/sec"), None);
        assert_eq!(parse_rate_gbps("NaN Gb/sec"), None);
        assert_eq!(state_number("4: ACTIVE"), Some(4));
        assert_eq!(state_number("5: LinkUp"), Some(5));
        assert_eq!(state_number("ACTIVE"), None);
    }
}
