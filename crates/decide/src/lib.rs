//! Plan: pure decisions over what detection found. Which ports are used (and why each other one
//! is not), which GID index to export, and which variables to set, keep or override. The plan is
//! a plain value, so `nccl-wrap env --json` shows exactly what a run would do. No I/O here.

#![deny(unsafe_code)]

use std::ffi::OsStr;

use serde::Serialize;

use crate::bootstrap::Bootstrap;
use nw_nccl::env::{self, IB_ADDR_RANGE, IB_DISABLE, IB_GID_INDEX, IB_HCA, IB_PKEY, MAX_HCA_ENTRIES};
use nw_nccl::gid::{self, AddrRange, Family, GidEntry, GidPrefs, RowTable};
use nw_observe::detect::netif::Owner;
use nw_observe::detect::port::{GidPick, PortFacts, VerbsCheck};
use nw_observe::detect::userspace::Userspace;
use nw_observe::detect::{Detection, Device, Source, Vars};
use nw_observe::verbs::verify;

pub mod bootstrap;
pub mod host;
pub mod rails;
mod ready;
mod reasons;
#[cfg(test)]
#[path = "same_tables_tests.rs"]
mod same_tables;
pub use ready::{asks, settle};
pub use reasons::index_is_kept;

#[derive(Debug, Clone, Serialize)]
pub struct PortDecision {
    pub device: String,
    pub port: u32,
    pub used: bool,
    /// Why it is not used; `None` when it is.
    pub reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// We set it.
    Set,
    /// The user had set it; we leave it as it is (`--override` not given).
    Kept,
    /// The user had set it; `--override` replaces it.
    Override,
}

impl Action {
    /// Kept where the user's `previous` is `wanted` already, or `--override` is not given.
    fn of(previous: Option<&str>, wanted: &str, override_user: bool) -> Action {
        match previous {
            None => Action::Set,
            Some(p) if p == wanted || !override_user => Action::Kept,
            Some(_) => Action::Override,
        }
    }
}

/// The user's value of `name`, if set.
fn user(vars: &Vars, name: &str) -> Option<String> {
    vars.get(OsStr::new(name)).map(|v| v.to_string_lossy().into_owned())
}

#[derive(Debug, Clone, Serialize)]
pub struct Var {
    pub name: &'static str,
    /// The value we would set.
    pub value: String,
    pub action: Action,
    /// The value already in the environment, if any.
    pub previous: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    #[serde(flatten)]
    pub detection: Detection,
    pub decisions: Vec<PortDecision>,
    /// `dev:port` of the ports handed to NCCL, in natural name order.
    pub hca: Vec<String>,
    pub gid_index: Option<u32>,
    /// `NCCL_IB_ADDR_RANGE`, where the ports' own entries differ in index (see `gid_choice`).
    pub addr_range: Option<String>,
    pub rdma: bool,
    pub vars: Vec<Var>,
    pub warnings: Vec<String>,
    /// What NCCL in this image will load (see `settle`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub userspace: Option<Userspace>,
    /// NCCL's and Gloo's bootstrap interface (see `settle`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bootstrap: Option<Bootstrap>,
    /// Lines the summary prints that are no warnings (a pin not set, and why).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub efa: Option<Efa>,
    /// Where every visible device is the pod's: the rails rule's verdict (docs/rails.md).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rails: Option<host::RailsReport>,
}

/// The pod's AWS EFA devices, which NCCL reaches through a net plugin (aws-ofi-nccl), never
/// through its IB transport: never put in `NCCL_IB_HCA`; what the plugin needs is checked instead.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Efa {
    pub devices: Vec<String>,
    /// The net plugin NCCL will load (filled by `settle`).
    pub plugin: Option<String>,
    /// `libfabric.so.1`, which aws-ofi-nccl loads (filled by `settle`).
    pub libfabric: Option<String>,
    /// What the image lacks for them, in words: a warning, and what `--require-rdma` refuses on.
    pub missing: Vec<String>,
}

/// Whether a device is an AWS EFA device: its function's kernel driver is `efa`.
pub fn is_efa(d: &Device) -> bool {
    d.driver.as_deref() == Some("efa")
}

/// Why a device is an NVSwitch management function carrying no job traffic (the B200/B300
/// baseboard's ConnectX-7 bridge, docs/field-inputs.md section 6): its VPD's `SMDL=SW_MNG`, else
/// (VPD unreadable) its PCIe shape, weakly. Its device ID is the data NICs' own.
pub fn management_function(d: &Device) -> Option<Management> {
    let f = d.function.as_ref()?;
    if f.vpd_smdl.as_deref() == Some("SW_MNG") {
        return Some(Management {
            reason: format!(
                "an NVSwitch management function, not a data NIC (its PCI VPD says SMDL=SW_MNG{}, Fabric Manager's mark of the GPU baseboard's bridge): it carries no job traffic",
                f.vpd_product.as_deref().map(|p| format!(", product \"{p}\"")).unwrap_or_default()
            ),
            weak: false,
        });
    }
    let shape = f.subsystem.as_deref() == Some("15b3:0087") && f.max_link_width == Some(2);
    let why = f.vpd_unreadable.as_ref().filter(|_| shape)?;
    Some(Management {
        reason: format!(
            "probably an NVSwitch management function, not a data NIC: a PCIe x2 {}link with subsystem 15b3:0087, as the HGX B200 baseboard's ConnectX-7 bridge (weak evidence: its VPD, which would say SMDL=SW_MNG, cannot be read here: {why})",
            f.max_link_speed.as_deref().map(|s| format!("{s} ")).unwrap_or_default()
        ),
        weak: true,
    })
}

/// A function that carries no job traffic, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Management {
    pub reason: String,
    /// Told by its shape alone, its VPD unreadable.
    pub weak: bool,
}

/// Why an EFA port is not in `NCCL_IB_HCA`.
const EFA_REASON: &str = "an AWS EFA device: NCCL reaches it through its net plugin (aws-ofi-nccl over libfabric), not its IB transport, so it is never put in NCCL_IB_HCA";

impl Plan {
    /// Whether the plan hands `device`'s port `port` to NCCL.
    pub fn is_used(&self, device: &str, port: u32) -> bool {
        self.decisions.iter().any(|x| x.used && x.device == device && x.port == port)
    }

    /// The ports the plan hands to NCCL, with their device's name, in detection order.
    pub fn used_ports(&self) -> impl Iterator<Item = (&str, &PortFacts)> {
        self.detection
            .devices
            .iter()
            .flat_map(|d| d.ports.iter().map(move |p| (d.name.as_str(), p)))
            .filter(|(d, p)| self.is_used(d, p.port))
    }

    /// Why `--require-rdma` refuses on the rails: a `--rails` that matches no usable port.
    pub fn rails_refusal(&self) -> Option<&str> {
        self.rails.as_ref().filter(|r| r.verdict == "unmatched").and_then(|r| r.why.as_deref())
    }

    /// The plan without the rails `drop` (`dev:port`, each with why) the gate dropped on every pod
    /// (`--gate-prune`). Refused where a rail is not handed to NCCL or `NCCL_IB_HCA` is the user's.
    pub fn without(&self, drop: &[(String, String)]) -> Result<Plan, String> {
        self.rails_droppable()?;
        if let Some((rail, _)) = drop.iter().find(|(r, _)| !self.hca.contains(r)) {
            return Err(format!("{rail} is not a rail this pod hands NCCL"));
        }
        let mut p = self.clone();
        p.hca.retain(|h| !drop.iter().any(|(r, _)| r == h));
        let left = p.hca.iter().filter_map(|h| h.rsplit_once(':').and_then(|(d, n)| Some((d, n.parse().ok()?))));
        let value = env::hca_value(left);
        match p.vars.iter_mut().find(|v| v.name == IB_HCA) {
            Some(v) => v.value = value,
            // NCCL's default was left: the gate tested every port it takes, so name the rest.
            None => p.vars.push(Var { name: IB_HCA, value, action: Action::Set, previous: None }),
        }
        for d in &mut p.decisions {
            if let Some((_, why)) = drop.iter().find(|(r, _)| *r == format!("{}:{}", d.device, d.port)) {
                d.used = false;
                d.reason = Some(why.clone());
            }
        }
        Ok(p)
    }

    /// Whether `--gate-prune` could drop rails here: not where `NCCL_IB_HCA` is the user's, kept.
    pub fn rails_droppable(&self) -> Result<(), String> {
        match self.vars.iter().find(|v| v.name == IB_HCA) {
            Some(v) if v.action == Action::Kept => {
                Err("NCCL_IB_HCA is the user's, kept (--override replaces it): the rails cannot be dropped".into())
            }
            _ => Ok(()),
        }
    }

    /// The variables a run actually changes: (name, value).
    pub fn exports(&self) -> Vec<(&str, &str)> {
        self.vars.iter().filter(|v| v.action != Action::Kept).map(|v| (v.name, v.value.as_str())).collect()
    }
}

/// NCCL's GID preferences as the environment sets them.
pub fn gid_prefs(vars: &Vars) -> (GidPrefs, Vec<String>) {
    let mut prefs = GidPrefs::default();
    let mut warnings = Vec::new();
    let get = |n: &str| user(vars, n).map(|v| v.trim().to_string());
    match get("NCCL_IB_ADDR_FAMILY").as_deref() {
        None | Some("AF_INET") => {}
        Some("AF_INET6") => prefs.family = Family::Inet6,
        Some(other) => warnings.push(format!(
            "NCCL_IB_ADDR_FAMILY={other:?} is neither AF_INET nor AF_INET6; assuming AF_INET as NCCL does"
        )),
    }
    if let Some(v) = get("NCCL_IB_ROCE_VERSION_NUM") {
        match v.parse::<u8>() {
            Ok(n @ (1 | 2)) => prefs.roce_version = n,
            _ => warnings.push(format!("NCCL_IB_ROCE_VERSION_NUM={v:?} is not 1 or 2; assuming 2")),
        }
    }
    if let Some(r) = get("NCCL_IB_ADDR_RANGE") {
        prefs.range = AddrRange::parse(&r);
        if prefs.range.is_none() {
            warnings.push(format!("NCCL_IB_ADDR_RANGE={r:?} is not an address/prefix-length; ignored"));
        }
    }
    (prefs, warnings)
}

/// NCCL's GID rule under `prefs`, as observation's walks take it.
pub fn gid_rule(prefs: GidPrefs) -> NcclGid {
    NcclGid(prefs)
}

/// NCCL's GID rule under its preferences ([`gid_rule`]).
pub struct NcclGid(GidPrefs);

impl nw_observe::detect::GidRule for NcclGid {
    fn choose(&self, table: &mut dyn gid::GidTable) -> Option<GidEntry> {
        gid::choose(table, &self.0)
    }
    fn accepts(&self, entry: &GidEntry) -> bool {
        gid::is_full_match(entry, &self.0)
    }
    fn family(&self) -> Family {
        self.0.family
    }
    fn for_family(&self, family: Family) -> Box<dyn nw_observe::detect::GidRule> {
        Box::new(NcclGid(GidPrefs { family, ..self.0 }))
    }
}

/// Why a port cannot carry NCCL traffic by what sysfs and ibverbs say (the self-test is `plan`'s).
pub fn port_problem(p: &PortFacts, prefs: &GidPrefs) -> Option<String> {
    link_problem(p).or_else(|| gid_problem(p, prefs)).or_else(|| verbs_problem(p))
}

fn verbs_problem(p: &PortFacts) -> Option<String> {
    match &p.verbs {
        Some(VerbsCheck::Unusable { error }) => Some(format!("ibverbs cannot use it: {error}")),
        Some(VerbsCheck::Port(v)) if v.state != "ACTIVE" => {
            Some(format!("sysfs reads ACTIVE but ibverbs reports {}; trusting ibverbs, as NCCL does", v.state))
        }
        _ => None,
    }
}

/// Whether the link can carry NCCL traffic at all: ACTIVE, LinkUp, InfiniBand or Ethernet.
pub fn link_problem(p: &PortFacts) -> Option<String> {
    let state = p.state_name().unwrap_or("unreadable");
    let phys = p.phys_state_name().unwrap_or("unreadable");
    if state != "ACTIVE" {
        return Some(format!("port state is {state} (physical state {phys}), not ACTIVE"));
    }
    if phys != "LinkUp" {
        return Some(format!("physical state is {phys}, not LinkUp"));
    }
    match p.link_layer.as_deref() {
        Some("InfiniBand" | "Ethernet") => None,
        Some(other) => Some(format!("link layer is {other}, not InfiniBand or Ethernet")),
        None => Some("link layer unreadable".into()),
    }
}

/// For RoCE, the GID NCCL would pick.
fn gid_problem(p: &PortFacts, prefs: &GidPrefs) -> Option<String> {
    if p.link_layer.as_deref() != Some("Ethernet") {
        return None;
    }
    match &p.gid {
        Some(g) if g.owner == Some(Owner::Other) => Some(format!(
            "no GID entry of this pod's addresses (shared device): NCCL would take index {}, {} on {}, another namespace's address, and its connections would fail",
            g.index,
            g.address,
            g.ndev.as_deref().unwrap_or("?")
        )),
        Some(g) if g.full_match => None,
        Some(g) => Some(format!(
            "no usable RoCE v{} {} GID (NCCL would fall back to index {}, {} {}): give its net device {} an address",
            prefs.roce_version,
            if prefs.family == Family::Inet { "IPv4" } else { "IPv6" },
            g.index,
            g.address,
            g.roce.map_or("of unknown type", |r| if r.number() == 1 { "RoCE v1" } else { "RoCE v2" }),
            g.ndev.as_deref().unwrap_or("?"),
        )),
        None => Some("no GID table (ports/N/gids unreadable or empty): NCCL's verbs transport needs a GID on a RoCE port, which this device's driver does not give".into()),
    }
}

/// What the user asked for that bears on decisions.
#[derive(Debug, Clone, Copy, Default)]
pub struct Choices {
    /// Replace variables the user already set.
    pub override_user: bool,
    /// A failed self-test drops the port (otherwise it warns).
    pub require_rdma: bool,
    /// The gate refuses a failing job (`--gate`, not `--gate=warn`).
    pub gate: bool,
}

pub fn plan(detection: Detection, vars: &Vars, prefs: &GidPrefs, choices: Choices) -> Plan {
    plan_with(detection, vars, prefs, choices, None)
}

/// [`plan`], with the rails rule's evidence where every visible device is the pod's: only the
/// rails it chooses are handed to NCCL.
pub fn plan_with(
    detection: Detection,
    vars: &Vars,
    prefs: &GidPrefs,
    choices: Choices,
    rails: Option<host::Rails<'_>>,
) -> Plan {
    let override_user = choices.override_user;
    let mut warnings = Vec::new();
    let mut decisions = Vec::new();
    let mut used: Vec<(&str, &PortFacts)> = Vec::new();
    let mut efa = Vec::new();
    for dev in &detection.devices {
        if dev.ports.is_empty() {
            warnings.push(format!("{}: no ports readable in sysfs", dev.name));
        }
        let on_efa = is_efa(dev);
        if on_efa {
            efa.push(dev.name.clone());
        }
        let management = management_function(dev);
        if let Some(m) = management.as_ref().filter(|m| m.weak) {
            warnings.push(format!("{}: left out, {}", dev.name, m.reason));
        }
        for p in &dev.ports {
            let mut reason = match &management {
                Some(m) => Some(m.reason.clone()),
                None if on_efa => Some(match p.state_name() {
                    Some("ACTIVE") => EFA_REASON.to_string(),
                    other => format!("{EFA_REASON}; its port is {}", other.unwrap_or("in an unreadable state")),
                }),
                None => port_problem(p, prefs),
            };
            if let (None, Some(VerbsCheck::Port(v)), Some(g)) = (&reason, &p.verbs, &p.gid) {
                if let Some(vg) = v.gid.as_deref().filter(|vg| *vg != g.gid) {
                    let (d, port, i) = (&dev.name, p.port, g.index);
                    warnings.push(format!("{d}:{port}: GID {i} reads {} in sysfs but {vg} through ibverbs", g.gid));
                }
            }
            if let (None, Some(t)) = (&reason, p.selftest.as_ref().filter(|t| !t.passed)) {
                let line = verify::describe_failure(&dev.name, p.port, t);
                if choices.require_rdma {
                    reason = Some(line);
                } else {
                    warnings.push(format!("{line}; the port is kept (--require-rdma would drop it)"));
                }
            }
            if reason.is_none() {
                used.push((&dev.name, p));
            }
            decisions.push(PortDecision { device: dev.name.clone(), port: p.port, used: reason.is_none(), reason });
        }
    }
    let mut rails_report = None;
    // On a disagreement (or a --rails that matches nothing), NCCL_IB_HCA is left to NCCL.
    let mut hca_default = false;
    if let Some((decision, report)) = rails.filter(|_| detection.every_visible).and_then(|r| host::classify(&used, r)) {
        let left_to_nccl = match &decision.verdict {
            rails::Verdict::Disagreement { why } => Some(format!("rails not chosen: {why}")),
            rails::Verdict::Unmatched { .. } => Some(format!(
                "{}: NCCL_IB_HCA is left to NCCL's default (every active port); --require-rdma would refuse",
                report.why.as_deref().unwrap_or("--rails matches no port")
            )),
            rails::Verdict::Confident | rails::Verdict::Override => {
                for c in &decision.ports {
                    let Some(why) = c.left_out() else { continue };
                    used.retain(|(d, p)| !(*d == c.device && p.port == c.port));
                    if let Some(x) = decisions.iter_mut().find(|x| x.device == c.device && x.port == c.port) {
                        x.used = false;
                        x.reason = Some(why);
                    }
                }
                None
            }
        };
        hca_default = left_to_nccl.is_some();
        warnings.extend(left_to_nccl);
        rails_report = Some(report);
    }
    if used.len() > MAX_HCA_ENTRIES {
        warnings.push(format!(
            "{} usable ports, but NCCL reads at most {MAX_HCA_ENTRIES} NCCL_IB_HCA entries; using the first {MAX_HCA_ENTRIES}",
            used.len()
        ));
        used.truncate(MAX_HCA_ENTRIES);
    }

    let (gid_index, addr_range) = gid_choice(&used, prefs, &mut warnings);
    let pkey = pkey_choice(&used, &mut warnings);
    let mut wanted: Vec<(&'static str, String)> = Vec::new();
    let hca: Vec<String> = used.iter().map(|(d, p)| format!("{d}:{}", p.port)).collect();
    let rdma = !used.is_empty();
    if rdma {
        wanted.extend((!hca_default).then(|| (IB_HCA, env::hca_value(used.iter().map(|(d, p)| (*d, p.port))))));
        wanted.extend(gid_index.map(|i| (IB_GID_INDEX, i.to_string())));
        wanted.extend(addr_range.clone().map(|r| (IB_ADDR_RANGE, r)));
        wanted.extend(pkey.map(|k| (IB_PKEY, k.to_string())));
    } else if efa.is_empty() {
        wanted.push((IB_DISABLE, "1".into()));
        warnings.push(match detection.source {
            Source::None => "no RDMA device found: NCCL will run over TCP sockets (about 1 GiB/s instead of 80+ on RDMA); NCCL_IB_DISABLE=1 is set so it does not try".into(),
            _ => "no usable RDMA port among this pod's devices: NCCL will run over TCP sockets (about 1 GiB/s instead of 80+ on RDMA); NCCL_IB_DISABLE=1 is set".into(),
        });
    }

    let vars_out = wanted
        .into_iter()
        .map(|(name, value)| {
            let previous = user(vars, name);
            let action = Action::of(previous.as_deref(), &value, override_user);
            Var { name, value, action, previous }
        })
        .collect::<Vec<_>>();
    for v in vars_out.iter().filter(|v| v.action == Action::Kept && v.previous.as_deref() != Some(v.value.as_str())) {
        warnings.push(format!(
            "{} is already set to {:?}; kept (nccl-wrap would set {:?}; pass --override or NCCL_WRAP_OVERRIDE=1 to replace it)",
            v.name,
            v.previous.as_deref().unwrap_or(""),
            v.value
        ));
    }
    if let Some(hca) = user(vars, IB_HCA).filter(|_| !(override_user && rdma)) {
        let list = nw_nccl::list::List::parse(&hca);
        let prefixes = list.prefix_names();
        if !prefixes.is_empty() {
            warnings.push(format!(
                "NCCL_IB_HCA={hca:?} is a prefix match: {} also selects devices whose names merely start with it (mlx5_1 selects mlx5_10..mlx5_19); put '=' before the list",
                prefixes.join(", ")
            ));
        }
    }
    for (d, p) in &used {
        let Some(g) = p.gid.as_ref().filter(|g| g.owner == Some(Owner::Host)) else { continue };
        warnings.push(format!(
            "{d}:{}: the GID NCCL will use, index {} ({}), is the host's address, not one of this pod's; RDMA from the pod sourced from it may fail: give the pod an address on this device (a macvlan or ipvlan rail)",
            p.port, g.index, g.address
        ));
    }
    Plan {
        detection,
        decisions,
        hca,
        gid_index,
        addr_range,
        rdma,
        vars: vars_out,
        warnings,
        userspace: None,
        bootstrap: None,
        notes: Vec::new(),
        efa: (!efa.is_empty()).then(|| Efa { devices: efa, ..Efa::default() }),
        rails: rails_report,
    }
}

/// The GID index to export (every port's entry at one index), or else an address range that
/// makes NCCL's own rule land on each port's entry, or neither, with a warning that says why.
fn gid_choice(
    used: &[(&str, &PortFacts)],
    prefs: &GidPrefs,
    warnings: &mut Vec<String>,
) -> (Option<u32>, Option<String>) {
    let roce: Vec<(String, &PortFacts, &GidPick)> =
        used.iter().filter_map(|(d, p)| p.gid.as_ref().map(|g| (format!("{d}:{}", p.port), *p, g))).collect();
    let Some(((_, _, first), rest)) = roce.split_first() else { return (None, None) };
    if rest.iter().all(|(_, _, g)| g.index == first.index) {
        return (Some(first.index), None);
    }
    let list: Vec<String> = roce.iter().map(|(l, _, g)| format!("{l}={}", g.index)).collect();
    if !roce.iter().any(|(_, p, _)| p.nccl_pick.is_some()) {
        // NCCL's own per-port pick is each port's entry already.
        warnings.push(format!(
            "RoCE ports disagree on the GID index ({}); NCCL_IB_GID_INDEX is one value for all ports, so it is left unset and NCCL 2.21.5+ picks per port (older NCCL would use index 0 and fail)",
            list.join(", ")
        ));
        return (None, None);
    }
    let addrs: Vec<_> = roce.iter().filter_map(|(_, _, g)| gid::parse_gid(&g.gid)).collect();
    let range = gid::covering_range(&addrs, prefs.family).filter(|r| {
        let narrowed = GidPrefs { range: Some(*r), ..*prefs };
        roce.iter().all(|(_, p, g)| nccl_lands_on(p, g, &narrowed))
    });
    if let Some(r) = range {
        return (None, Some(r.to_string()));
    }
    let rows: Vec<String> = roce
        .iter()
        .map(|(l, p, g)| {
            let nccl = p.nccl_pick.as_ref().unwrap_or(g);
            let whose = nccl.owner.map_or("owner unknown", Owner::describe);
            format!(
                "{l}: own index {} ({}), NCCL would take {} ({}, {whose})",
                g.index, g.address, nccl.index, nccl.address
            )
        })
        .collect();
    warnings.push(format!(
        "this pod's GID entries sit at different indices on its ports, and NCCL_IB_GID_INDEX is one index for all ports (NVIDIA/nccl#890); no NCCL_IB_ADDR_RANGE makes NCCL's rule land on them either, so neither is exported and NCCL will take other pods' or the host's entries: {}. Fix: give each pod its rails in the same order on every device (the kernel numbers entries in the order addresses appear), or put pods' rail addresses in a subnet of their own (then NCCL_IB_ADDR_RANGE selects them), or use one rail",
        rows.join("; ")
    ));
    (None, None)
}

/// Whether NCCL's rule under `prefs` picks `want` on port `p`: simulated over the table when it
/// was read; otherwise `want` is NCCL's unnarrowed pick, which a range that holds it keeps.
fn nccl_lands_on(p: &PortFacts, want: &GidPick, prefs: &GidPrefs) -> bool {
    if p.table.is_empty() {
        return want.full_match
            && gid::parse_gid(&want.gid).is_some_and(|g| prefs.range.is_none_or(|r: AddrRange| r.contains(&g)));
    }
    let entries: Vec<GidEntry> = p
        .table
        .iter()
        .filter_map(|r| gid::parse_gid(&r.gid).map(|g| GidEntry { index: r.index, gid: g, roce: r.roce }))
        .collect();
    gid::choose(&mut RowTable { entries: &entries, len: p.table_len }, prefs).is_some_and(|e| e.index == want.index)
}

/// `NCCL_IB_PKEY`: the pod's IPoIB partition's pkey index, where not 0 and every port agrees.
fn pkey_choice(used: &[(&str, &PortFacts)], warnings: &mut Vec<String>) -> Option<u32> {
    let picks: Vec<(String, &nw_observe::detect::port::PkeyPick)> =
        used.iter().filter_map(|(d, p)| p.pkey.as_ref().map(|k| (format!("{d}:{}", p.port), k))).collect();
    for (l, k) in picks.iter().filter(|(_, k)| k.index.is_none()) {
        warnings.push(format!(
            "{l}: IPoIB interface {} is in partition 0x{:04x}, which the port's pkey table does not hold; NCCL's queue pairs use pkey index 0: check the subnet manager's partition configuration",
            k.netdev, k.pkey
        ));
    }
    let indices: Vec<(&String, u32)> = picks.iter().filter_map(|(l, k)| k.index.map(|i| (l, i))).collect();
    let (_, first) = *indices.first()?;
    if indices.iter().any(|(_, i)| *i != first) {
        let list: Vec<String> = indices.iter().map(|(l, i)| format!("{l}={i}")).collect();
        warnings.push(format!(
            "the pod's IPoIB partitions sit at different pkey indices ({}); NCCL_IB_PKEY is one index for all ports, so it is not set",
            list.join(", ")
        ));
        return None;
    }
    (first != 0).then_some(first)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nw_nccl::gid::RoceType;

    /// A RoCE port whose table holds `rows` (address, owner) from index 0, all RoCE v2; its entry
    /// is the pod's first full match and NCCL's pick is the first valid IPv4 entry.
    fn port(rows: &[(&str, Owner)]) -> PortFacts {
        let table: Vec<GidPick> = rows
            .iter()
            .enumerate()
            .map(|(i, (a, o))| {
                let ip: std::net::IpAddr = a.parse().expect("ip");
                let g = nw_observe::detect::netif::as_gid(ip);
                GidPick {
                    index: u32::try_from(i).expect("index"),
                    gid: nw_observe::detect::sysfs::format_gid(&g),
                    address: gid::display(&g),
                    roce: Some(RoceType::V2),
                    ndev: Some("net1".into()),
                    full_match: gid::valid(&g),
                    owner: Some(*o),
                }
            })
            .collect();
        let mine = table.iter().find(|r| r.full_match && r.owner == Some(Pod)).cloned();
        let nccl = table.iter().find(|r| r.full_match).cloned();
        let differs = mine.as_ref().map(|m| m.index) != nccl.as_ref().map(|n| n.index);
        PortFacts {
            port: 1,
            state: Some("4: ACTIVE".into()),
            phys_state: Some("5: LinkUp".into()),
            link_layer: Some("Ethernet".into()),
            rate: None,
            gid: mine.or(nccl.clone()),
            nccl_pick: if differs { nccl } else { None },
            table_len: u32::try_from(table.len()).expect("len"),
            table,
            pkey: None,
            verbs: None,
            selftest: None,
            problems: Vec::new(),
        }
    }

    use Owner::{Host, Other, Pod};

    #[test]
    fn one_own_index_on_every_port_is_exported_as_the_gid_index() {
        let a = port(&[("fe80::1", Host), ("10.9.0.51", Other), ("10.9.0.52", Pod)]);
        let b = port(&[("fe80::2", Host), ("10.9.1.51", Other), ("10.9.1.52", Pod)]);
        let mut w = Vec::new();
        assert_eq!(gid_choice(&[("mlx5_0", &a), ("mlx5_1", &b)], &GidPrefs::default(), &mut w), (Some(2), None));
        assert!(w.is_empty(), "{w:?}");
    }

    #[test]
    fn differing_own_indices_get_a_range_when_nccls_rule_lands_on_them() {
        let a = port(&[("fe80::1", Host), ("10.9.0.51", Other), ("10.20.0.53", Pod)]);
        let b = port(&[("fe80::2", Host), ("10.20.1.53", Pod), ("10.9.1.51", Other)]);
        let mut w = Vec::new();
        let got = gid_choice(&[("mlx5_0", &a), ("mlx5_1", &b)], &GidPrefs::default(), &mut w);
        assert_eq!(got, (None, Some("10.20.0.0/23".into())), "{w:?}");
    }

    #[test]
    fn no_index_or_range_lands_on_a_neighbour_while_the_pod_has_its_own() {
        // The range over the pod's addresses, 10.9.0.0/23, holds the neighbour's 10.9.1.51, which
        // comes first on the second port.
        let a = port(&[("fe80::1", Host), ("10.9.0.52", Pod), ("10.9.0.51", Other)]);
        let b = port(&[("fe80::2", Host), ("10.9.1.51", Other), ("10.9.1.52", Pod)]);
        let mut w = Vec::new();
        assert_eq!(gid_choice(&[("mlx5_0", &a), ("mlx5_1", &b)], &GidPrefs::default(), &mut w), (None, None));
        assert!(
            w[0].contains("mlx5_1:1: own index 2 (10.9.1.52), NCCL would take 1 (10.9.1.51, another namespace's)"),
            "{w:?}"
        );
    }

    #[test]
    fn a_user_range_is_honoured_in_the_simulation() {
        let a = port(&[("fe80::1", Host), ("10.9.0.51", Other), ("10.20.0.53", Pod)]);
        let b = port(&[("fe80::2", Host), ("10.20.1.53", Pod)]);
        // The user's range already excludes the neighbour: NCCL's rule lands on 2 and 1 as is, and
        // the covering range (inside the user's) says the same.
        let prefs = GidPrefs { range: AddrRange::parse("10.20.0.0/16"), ..GidPrefs::default() };
        let mut w = Vec::new();
        assert_eq!(gid_choice(&[("mlx5_0", &a), ("mlx5_1", &b)], &prefs, &mut w).1, Some("10.20.0.0/23".into()));
    }

    #[test]
    fn a_management_function_is_told_by_its_vpd_else_weakly_by_its_shape() {
        use nw_observe::detect::function::FunctionFacts;
        let dev = |f: FunctionFacts| Device {
            name: "mlx5_0".into(),
            origin: "test".into(),
            attachment: nw_observe::detect::sysfs::Attachment::Pf { pci: "0000:05:00.0".into() },
            ports: Vec::new(),
            problems: Vec::new(),
            named_as: None,
            driver: None,
            function: Some(f),
        };
        let bridge = FunctionFacts {
            subsystem: Some("15b3:0087".into()),
            max_link_width: Some(2),
            max_link_speed: Some("16.0 GT/s PCIe".into()),
            ..FunctionFacts::default()
        };
        let strong = management_function(&dev(FunctionFacts { vpd_smdl: Some("SW_MNG".into()), ..bridge.clone() }));
        assert!(strong.as_ref().is_some_and(|m| !m.weak && m.reason.contains("SMDL=SW_MNG")), "{strong:?}");
        let weak = management_function(&dev(FunctionFacts { vpd_unreadable: Some("EACCES".into()), ..bridge.clone() }));
        assert!(weak.as_ref().is_some_and(|m| m.weak && m.reason.contains("weak evidence")), "{weak:?}");
        // A readable VPD without the mark is a data NIC, whatever its shape; so is an x16 card.
        assert_eq!(management_function(&dev(bridge.clone())), None);
        let x16 = FunctionFacts { max_link_width: Some(16), vpd_unreadable: Some("EACCES".into()), ..bridge };
        assert_eq!(management_function(&dev(x16)), None);
    }

    #[test]
    fn a_rail_the_gate_drops_leaves_nccl_ib_hca_and_the_watched_ports() {
        let dev = |name: &str, n: u8| Device {
            name: name.into(),
            origin: "test".into(),
            attachment: nw_observe::detect::sysfs::Attachment::Pf { pci: format!("0000:0{n}:00.0") },
            ports: vec![port(&[(format!("10.9.{n}.52").as_str(), Pod)])],
            problems: Vec::new(),
            named_as: None,
            driver: None,
            function: None,
        };
        let detection = || Detection {
            source: Source::Annotation,
            sources: Vec::new(),
            devices: vec![dev("mlx5_0", 1), dev("mlx5_1", 2), dev("mlx5_2", 3)],
            not_ours: Vec::new(),
            not_openable: Vec::new(),
            warnings: Vec::new(),
            addresses: Vec::new(),
            every_visible: false,
        };
        let vars = Vars::new();
        let p = plan(detection(), &vars, &GidPrefs::default(), Choices::default());
        assert_eq!(p.hca, ["mlx5_0:1", "mlx5_1:1", "mlx5_2:1"]);
        let why = "dropped by the gate (--gate-prune)".to_string();
        let pruned = p.without(&[("mlx5_1:1".into(), why.clone())]).expect("pruned");
        assert_eq!(pruned.hca, ["mlx5_0:1", "mlx5_2:1"]);
        assert!(pruned.exports().contains(&(IB_HCA, "=mlx5_0:1,mlx5_2:1")), "{:?}", pruned.exports());
        assert!(!pruned.is_used("mlx5_1", 1) && pruned.is_used("mlx5_2", 1));
        let d = pruned.decisions.iter().find(|d| d.device == "mlx5_1").expect("decision");
        assert_eq!(d.reason.as_deref(), Some(why.as_str()));
        // A rail not handed to NCCL, or a user's NCCL_IB_HCA kept: refused.
        assert!(p.without(&[("mlx5_9:1".into(), why.clone())]).is_err_and(|e| e.contains("mlx5_9:1 is not a rail")));
        let mut user = Vars::new();
        user.insert("NCCL_IB_HCA".into(), "=mlx5_0,mlx5_1,mlx5_2".into());
        let kept = plan(detection(), &user, &GidPrefs::default(), Choices::default());
        assert!(kept.without(&[("mlx5_1:1".into(), why.clone())]).is_err_and(|e| e.contains("the user's, kept")));
        // NCCL's default left (the rails rule could not tell; no user value): the rails left are
        // named from now on.
        let mut default = p.clone();
        default.vars.retain(|v| v.name != IB_HCA);
        let named = default.without(&[("mlx5_1:1".into(), why)]).expect("named");
        assert!(named.exports().contains(&(IB_HCA, "=mlx5_0:1,mlx5_2:1")), "{:?}", named.exports());
    }

    #[test]
    fn another_namespaces_pick_without_an_own_entry_drops_the_port() {
        let mut p = port(&[("fe80::1", Host), ("10.9.0.51", Other)]);
        p.gid.as_mut().expect("gid").owner = Some(Other);
        let why = port_problem(&p, &GidPrefs::default()).expect("dropped");
        assert!(why.contains("another namespace's address"), "{why}");
    }
}
