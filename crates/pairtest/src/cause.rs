//! Why a pair failed (or warns), in doctor's form (id, summary, evidence, fix), from what both ends
//! described and the first verbs error. Pure. Ids are documented in docs/ping.md, never renamed.

use serde::Serialize;
use serde_json::{json, Map, Value};

use super::route::{gid_ipv4, Reach};
use super::wire::{parse_gid, Fault, LinkLayer, PortInfo};
use nw_observe::detect::netif::Owner;
use nw_observe::verbs::status::wc;

pub use nw_output::status::Status;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cause {
    pub id: &'static str,
    #[serde(skip)]
    pub(crate) status: Status,
    pub summary: String,
    pub evidence: Map<String, Value>,
    pub hint: String,
}

impl Cause {
    pub fn new(id: &'static str, status: Status, summary: impl Into<String>, hint: impl Into<String>) -> Cause {
        Cause { id, status, summary: summary.into(), evidence: Map::new(), hint: hint.into() }
    }
    pub(crate) fn ev(mut self, key: &str, value: impl Into<Value>) -> Cause {
        self.evidence.insert(key.to_owned(), value.into());
        self
    }
}

/// A failure: why a pair failed, or why the check cannot run at all (exit 2 for ping).
pub fn cannot(id: &'static str, summary: impl Into<String>, hint: impl Into<String>) -> Cause {
    Cause::new(id, Status::Fail, summary, hint)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    Local,
    Remote,
}

impl Side {
    fn name(self) -> &'static str {
        match self {
            Side::Local => "local",
            Side::Remote => "remote",
        }
    }
}

/// Everything known about one pair once it has run (or stopped).
#[derive(Debug, Clone)]
pub(crate) struct PairFacts<'a> {
    pub(crate) local: &'a PortInfo,
    pub(crate) remote: &'a PortInfo,
    /// The first fault of each end, if any.
    pub(crate) local_fault: Option<&'a Fault>,
    pub(crate) remote_fault: Option<&'a Fault>,
    /// The route verdict for the peer's address from the local rail, where known.
    pub(crate) reach: Option<&'a Reach>,
    /// The path MTU the queue pair used, in bytes.
    pub(crate) path_mtu: u32,
    /// The plan's entry at the local port's GID index, where the plan has one.
    pub(crate) plan_gid: Option<&'a PlanGid>,
}

/// The entry at a local port's GID index as the plan read it, and whose address it held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PlanGid {
    pub(crate) device: String,
    pub(crate) port: u8,
    pub(crate) index: u32,
    pub(crate) gid: String,
    pub(crate) address: String,
    pub(crate) owner: Option<Owner>,
}

/// The cause of a failed pair, or the warning of a passed one; `None` for a clean pass.
pub(crate) fn classify(f: &PairFacts) -> Option<Cause> {
    let fault = f.local_fault.map(|x| (Side::Local, x)).or(f.remote_fault.map(|x| (Side::Remote, x)));
    let Some((side, fault)) = fault else {
        return mtu_warning(f);
    };
    let cause = memlock(side, fault)
        .or_else(|| iommu(side, fault))
        .or_else(|| source_gid(side, fault, f))
        .or_else(|| gid_mismatch(f))
        .or_else(|| pkey_mismatch(f))
        .or_else(|| no_route(f))
        .unwrap_or_else(|| by_fault(f, side, fault));
    Some(with_ends(cause, f).ev("side", side.name()).ev("step", fault.step.clone()).ev("error", fault.error.clone()))
}

/// A port as the evidence shows it.
pub fn describe(p: &PortInfo) -> Value {
    json!({
        "device": format!("{}:{}", p.device, p.port),
        "link_layer": p.link_layer.name(),
        "gid_index": p.gid_index,
        "gid": p.gid,
        "gid_type": p.gid_type,
        "lid": p.lid,
        "pkey": p.pkey.map(|k| format!("{k:#06x}")),
        "mtu_bytes": p.mtu,
        "netdev": p.netdev,
    })
}

fn with_ends(c: Cause, f: &PairFacts) -> Cause {
    c.ev("local", describe(f.local)).ev("remote", describe(f.remote))
}

fn mtu_warning(f: &PairFacts) -> Option<Cause> {
    let (here, there, path) = (f.local.mtu, f.remote.mtu, f.path_mtu);
    let summary =
        format!("active MTU differs: {here} bytes here, {there} at the peer; the pair ran with path MTU {path}");
    let hint = "set the same MTU on every rail's net device and switch port (9000 gives RoCE its 4096 MTU); NCCL uses the smaller and loses bandwidth";
    let c = (here != there).then(|| Cause::new("mtu-mismatch", Status::Warn, summary, hint))?;
    Some(with_ends(c, f).ev("path_mtu_bytes", path))
}

fn memlock(side: Side, fault: &Fault) -> Option<Cause> {
    let hint = "registration pins memory under RLIMIT_MEMLOCK: give that container CAP_IPC_LOCK (securityContext.capabilities.add: [IPC_LOCK]) or an unlimited memlock limit; `nccl-wrap doctor` shows the limit";
    let summary = format!("memory registration refused on the {} end: {}", side.name(), fault.error);
    (fault.step == "reg_mr" && matches!(fault.errno, Some(1 | 11 | 12))).then(|| cannot("memlock", summary, hint))
}

fn iommu(side: Side, fault: &Fault) -> Option<Cause> {
    let hint = "usually the IOMMU translating DMA: boot that node with iommu=pt (or intel_iommu=on iommu=pt), and check PCIe ACS; `nccl-wrap doctor` reads the IOMMU group type";
    let summary = format!("the adapter on the {} end could not reach registered memory: {}", side.name(), fault.error);
    matches!(fault.wc_status, Some(wc::LOC_PROT_ERR | wc::LOC_ACCESS_ERR)).then(|| cannot("iommu", summary, hint))
}

fn family(p: &PortInfo) -> Option<&'static str> {
    let gid = parse_gid(p.gid.as_deref()?)?;
    Some(if gid_ipv4(&gid).is_some() { "IPv4" } else { "IPv6" })
}

fn gid_mismatch(f: &PairFacts) -> Option<Cause> {
    let (l, r) = (f.local, f.remote);
    if l.link_layer != r.link_layer {
        let summary = format!("link layers differ: {} here, {} at the peer", l.link_layer.name(), r.link_layer.name());
        let hint = "InfiniBand and RoCE ports cannot talk to each other: pair rails of the same fabric";
        return Some(cannot("gid-mismatch", summary, hint));
    }
    if l.link_layer != LinkLayer::Ethernet {
        return None;
    }
    let hint = "both ends must use the same RoCE version and address family: give every rail an IPv4 address (NCCL's default AF_INET) and the same NCCL_IB_ROCE_VERSION_NUM / NCCL_IB_ADDR_FAMILY on every pod";
    let differ = |what: &str, a: Option<&str>, b: Option<&str>| {
        let (a, b) = a.zip(b).filter(|(a, b)| a != b)?;
        let summary = format!("{what} differ: GID {} here is {a}, the peer's GID {} is {b}", idx(l), idx(r));
        Some(cannot("gid-mismatch", summary, hint))
    };
    differ("RoCE versions", l.gid_type.as_deref(), r.gid_type.as_deref())
        .or_else(|| differ("GID families", family(l), family(r)))
}

/// A completion error sent from a GID that is not this pod's, or changed since the plan read it:
/// named as that, not as firmware.
fn source_gid(side: Side, fault: &Fault, f: &PairFacts) -> Option<Cause> {
    let plan = f.plan_gid?;
    // This end's completion error, or either end's RTR (the peer resolves this end's GID there).
    let errored = match side {
        Side::Local => fault.wc_status.is_some() || fault.step == "RTR",
        Side::Remote => fault.step == "RTR",
    };
    if !errored || f.local.link_layer != LinkLayer::Ethernet {
        return None;
    }
    let netdev = f.local.netdev.as_deref().unwrap_or("its net device");
    let used = f.local.gid.as_deref().unwrap_or("?");
    if side == Side::Local && used != plan.gid {
        return Some(cannot(
            "gid-vanished",
            format!(
                "the source GID changed under the run: index {} held {} ({}) when nccl-wrap read it, {used} when the queue pair used it",
                plan.index, plan.gid, plan.address
            ),
            format!("this pod's address on {netdev} was removed or renumbered after start-up (a CNI that re-ran, a DHCP renewal): start the command after the network is final, and check the pod's addresses"),
        )
        .ev("plan_gid", plan.gid.clone()));
    }
    let whose = match plan.owner? {
        Owner::Pod => return None,
        o => o.describe(),
    };
    Some(
        cannot(
            "foreign-gid",
            format!(
                "the queue pair sends from GID index {} ({}), {whose} address, not this pod's: the peer's replies go to that address's owner, and on a shared device the kernel ends the queue pair ({} end: {})",
                plan.index,
                plan.address,
                side.name(),
                fault.error
            ),
            "unset NCCL_IB_GID_INDEX (or pass --override): nccl-wrap then exports this pod's own entry; `nccl-wrap doctor` (gid-owner) shows the table and whose each entry is",
        )
        .ev("owner", whose),
    )
}

fn idx(p: &PortInfo) -> String {
    p.gid_index.map_or("?".into(), |i| i.to_string())
}

fn pkey_mismatch(f: &PairFacts) -> Option<Cause> {
    if f.local.link_layer != LinkLayer::InfiniBand {
        return None;
    }
    let (Some(a), Some(b)) = (f.local.pkey, f.remote.pkey) else { return None };
    let (base_a, base_b) = (a & 0x7fff, b & 0x7fff);
    let both_limited = a & 0x8000 == 0 && b & 0x8000 == 0;
    (base_a != base_b || both_limited).then(|| {
        let summary = if base_a != base_b {
            format!("partition keys differ: {a:#06x} here, {b:#06x} at the peer")
        } else {
            format!("both ends are limited members of partition {base_a:#06x} ({a:#06x}, {b:#06x}): limited members cannot talk to each other")
        };
        let hint = "put both ports in the same partition, at least one as a full member (the subnet manager's partitions.conf; NCCL_IB_PKEY picks the index NCCL uses)";
        cannot("pkey-mismatch", summary, hint)
    })
}

fn no_route(f: &PairFacts) -> Option<Cause> {
    let Some(Reach::NoRoute { elsewhere }) = f.reach else { return None };
    let peer = f.remote.gid.as_deref().and_then(parse_gid).and_then(|g| gid_ipv4(&g))?;
    let netdev = f.local.netdev.clone().unwrap_or_else(|| "?".into());
    let summary = format!(
        "the peer's address {peer} is on a subnet {netdev} has no route to (this namespace's main routing table)"
    );
    let hint = "pair rails that share a subnet (rail i with rail i, the default), or add a route for the peer's rail subnet through this rail's net device (the IPAM's routes, or the fabric routing between rails)";
    let mut c = cannot("no-route", summary, hint).ev("peer_address", peer.to_string());
    if let Some(e) = elsewhere {
        c = c.ev("best_route", format!("{} (another device: RoCE from {netdev} cannot use it)", e.describe()));
    }
    Some(c)
}

fn by_fault(f: &PairFacts, side: Side, fault: &Fault) -> Cause {
    let s = side.name();
    match (fault.step.as_str(), fault.wc_status) {
        ("INIT" | "RTR" | "RTS", _) => cannot(
            "qp-transition",
            format!("the {s} end's queue pair was refused {}: {}", transition(&fault.step), fault.error),
            transition_hint(&fault.step, f),
        ),
        (_, Some(wc::RETRY_EXC_ERR)) => cannot(
            "retry-exceeded",
            format!("the {s} end's packets were never acknowledged ({})", fault.error),
            "the path drops RoCE while TCP flows: check the VLAN of both rails, PFC/ECN on the switch ports, ACLs or firewalls on UDP 4791, and that rail i is paired with the peer's rail i",
        ),
        (_, Some(wc::RNR_RETRY_EXC_ERR | wc::REM_ACCESS_ERR | 9 | 11 | 7)) => cannot(
            "peer",
            format!("the peer's end rejected the work ({})", fault.error),
            "the peer's queue pair or buffer was not ready or not as described: run the same nccl-wrap version on both ends",
        ),
        (_, Some(_)) => cannot(
            "qp-transition",
            format!("the {s} end's queue pair went to the error state: {}", fault.error),
            "a completion error outside the usual ones: check the adapter's firmware log (dmesg) on that node",
        ),
        ("timeout", _) | ("latency" | "bandwidth", None) => cannot(
            "timeout",
            format!("no completion on the {s} end before the deadline ({})", fault.error),
            "the path drops RoCE or the adapter stalls: check the VLAN of both rails, PFC/ECN, ACLs on UDP 4791 and the rail pairing; on software RoCE raise --timeout-ms",
        ),
        ("open" | "query_port" | "query_gid" | "query_pkey" | "alloc_pd" | "create_cq" | "create_qp" | "reg_mr", _) => {
            cannot(
                "no-port",
                format!("the {s} end could not set up a queue pair at {}: {}", fault.step, fault.error),
                "the port cannot run RDMA from this container: run `nccl-wrap doctor` there (uverbs nodes, memlock, the port's state)",
            )
        }
        _ => cannot(
            "peer",
            format!("the {s} end stopped at {}: {}", fault.step, fault.error),
            "run the same nccl-wrap version on both ends and look at the other end's output",
        ),
    }
}

fn transition(step: &str) -> &'static str {
    match step {
        "INIT" => "RESET->INIT (port, pkey index 0, access flags)",
        "RTR" => "INIT->RTR (path MTU, destination QPN, RQ PSN, and the address vector: GID and sgid index, or LID)",
        _ => "RTR->RTS (timeout, retry count, SQ PSN)",
    }
}

fn transition_hint(step: &str, f: &PairFacts) -> String {
    match (step, f.local.link_layer) {
        ("RTR", LinkLayer::Ethernet) => format!(
            "the kernel could not resolve the peer's GID {} from GID {} on {}: check the rail's net device is up with its address, and that a route and ARP entry to the peer exist",
            f.remote.gid.as_deref().unwrap_or("?"),
            idx(f.local),
            f.local.netdev.as_deref().unwrap_or("?")
        ),
        ("RTR", LinkLayer::InfiniBand) => {
            "the address vector was refused: check the peer's LID is assigned (subnet manager) and the port is ACTIVE".into()
        }
        ("INIT", _) => "the port or pkey index 0 was refused: check the port is ACTIVE and has a partition key".into(),
        _ => "the send-side attributes were refused: this is an adapter or driver limit; report it with dmesg".into(),
    }
}

#[cfg(test)]
#[path = "cause_tests.rs"]
mod tests;
