//! The rails rule (docs/rails.md): on a node whose pod sees every RDMA port, which ports are the
//! compute fabric's and go to `NCCL_IB_HCA`, and why each other one does not. Pure; it must never
//! panic, and where the evidence disagrees it exports nothing and says so.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::IpAddr;

use serde::Serialize;

use nw_observe::detect::bootstrap::is_link_local;
pub use nw_observe::detect::rails::{IfAddr, Iface};

/// Where a port's PCIe function sits relative to the nearest GPU, closest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum GpuDistance {
    /// Behind the same PCIe switch as a GPU (NCCL's PIX/PXB).
    SameSwitch,
    /// Below the same root port as a GPU, no switch between (NCCL's PHB).
    SameRootPort,
    /// Only on the same NUMA node as a GPU (NCCL's NODE).
    SameNuma,
    /// Across the CPU interconnect from every GPU (NCCL's SYS).
    Far,
    /// Not known: no GPU found, or the PCIe path could not be read.
    Unknown,
}

impl GpuDistance {
    /// Next to a GPU: what the compute rails of a GPU node are.
    fn near(self) -> bool {
        matches!(self, GpuDistance::SameSwitch | GpuDistance::SameRootPort)
    }

    fn describe(self) -> &'static str {
        match self {
            GpuDistance::SameSwitch => "behind a GPU's PCIe switch",
            GpuDistance::SameRootPort => "on a GPU's PCIe root port",
            GpuDistance::SameNuma => "on a GPU's NUMA node only",
            GpuDistance::Far => "across the CPU interconnect from every GPU",
            GpuDistance::Unknown => "of unknown PCIe placement",
        }
    }
}

/// The link layers NCCL's IB transport takes (ports of any other never reach this rule).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LinkLayer {
    InfiniBand,
    Ethernet,
}

impl fmt::Display for LinkLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// The network `a` is on: (masked address, prefix length).
fn network(a: &IfAddr) -> (IpAddr, u8) {
    let p = a.prefix.min(if a.addr.is_ipv4() { 32 } else { 128 });
    let ip = match a.addr {
        IpAddr::V4(v4) => IpAddr::V4((u32::from(v4) & u32::MAX.checked_shl(32 - u32::from(p)).unwrap_or(0)).into()),
        IpAddr::V6(v6) => IpAddr::V6((u128::from(v6) & u128::MAX.checked_shl(128 - u32::from(p)).unwrap_or(0)).into()),
    };
    (ip, p)
}

/// One port NCCL alone would take: ACTIVE, LinkUp, InfiniBand or Ethernet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Port {
    pub device: String,
    pub port: u32,
    /// The PCI address of its function (`0000:1b:00.0`), where it has one.
    pub pci: Option<String>,
    pub link_layer: LinkLayer,
    /// Gb/s, from `ports/N/rate`, where readable.
    pub rate_gbps: Option<u32>,
    /// Its net devices: IPoIB interfaces, RoCE netdevs (a bond slave names its master).
    pub netdevs: Vec<Iface>,
    pub gpu: GpuDistance,
}

/// Everything the rule weighs.
#[derive(Debug, Clone, Copy)]
pub struct Inputs<'a> {
    pub ports: &'a [Port],
    /// The bond masters the ports' net devices are slaves of, with their own addresses and routes.
    pub masters: &'a [Iface],
    /// The job's coordinator as given (`MASTER_ADDR=10.0.2.117`), for messages.
    pub coordinator: Option<&'a str>,
    /// `--rails`, when given.
    pub selector: Option<&'a Selector>,
}

/// The rules of docs/rails.md, in the order they are applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Rule {
    /// 0. `--rails` named the rails.
    Override,
    /// 1. An Ethernet port whose interfaces hold no address beyond link-local.
    LinkLocalOnly,
    /// 2. The port whose interface (or its bond) carries the default route: the front end.
    FrontEnd,
    /// 2a. No other port remains: the front end is the compute network.
    SmallNode,
    /// 3. Some ports sit next to GPUs: those are the compute candidates, the rest are not.
    Placement,
    /// 4. Among the ports next to GPUs, the link layer most of them have.
    LinkLayer,
    /// 5. No port next to a GPU: the ports on the coordinator's network.
    CoordinatorNetwork,
    /// 6. No port next to a GPU, none on the coordinator's network: the ports, all on one network.
    OneNetwork,
}

impl Rule {
    pub fn name(self) -> &'static str {
        match self {
            Rule::Override => "--rails",
            Rule::LinkLocalOnly => "link-local only",
            Rule::FrontEnd => "front end",
            Rule::SmallNode => "small node",
            Rule::Placement => "PCIe placement",
            Rule::LinkLayer => "link layer",
            Rule::CoordinatorNetwork => "coordinator's network",
            Rule::OneNetwork => "one network",
        }
    }
}

/// A rule is shown by its name (`env --json`).
impl Serialize for Rule {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// What the rule made of one port; in `env --json`, `class` is `rail`, `left_out` or `unsettled`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "class", rename_all = "snake_case")]
pub enum Class {
    Rail {
        rule: Rule,
        evidence: String,
    },
    /// Not handed to NCCL; `fix` says what to set if that is wrong.
    LeftOut {
        rule: Rule,
        evidence: String,
        fix: String,
    },
    /// The rules did not settle it (the verdict is a disagreement).
    Unsettled,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Classified {
    pub device: String,
    pub port: u32,
    #[serde(flatten)]
    pub class: Class,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The evidence agrees: export the rails.
    Confident,
    /// `--rails` chose them.
    Override,
    /// `--rails` matches no port NCCL could use: the caller refuses rather than guess.
    Unmatched { selector: String },
    /// The evidence disagrees or does not tell: export nothing (NCCL's default), and warn.
    Disagreement { why: String },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// One entry per input port, in input order.
    pub ports: Vec<Classified>,
    pub verdict: Verdict,
}

impl Decision {
    /// The rails to export as `NCCL_IB_HCA`, in input order; `None` where nothing is exported.
    pub fn rails(&self) -> Option<Vec<(&str, u32)>> {
        let rails = self.ports.iter().filter(|c| matches!(c.class, Class::Rail { .. }));
        matches!(self.verdict, Verdict::Confident | Verdict::Override)
            .then(|| rails.map(|c| (c.device.as_str(), c.port)).collect())
    }
}

impl Classified {
    /// Why a port left out is: rule, evidence, what to set; `None` for the others.
    pub fn left_out(&self) -> Option<String> {
        let Class::LeftOut { rule, evidence, fix } = &self.class else { return None };
        Some(format!("left out ({}): {evidence}; {fix}", rule.name()))
    }
}

/// What the rule knows of a port once its bond is resolved.
struct Facts<'a> {
    port: &'a Port,
    /// The interfaces that speak for it: its net devices, each slave replaced by its master.
    role: Vec<&'a Iface>,
    /// `enp1s0f0np0 (slave of bond0)`: how it is named in messages (`mlx5_0:1` with no interface).
    label: String,
}

impl Facts<'_> {
    fn addrs(&self) -> impl Iterator<Item = &IfAddr> {
        self.role.iter().flat_map(|i| i.addrs.iter())
    }
    fn default_route(&self) -> Option<&str> {
        self.role.iter().find(|i| i.default_route).map(|i| i.name.as_str())
    }
    fn coordinator_route(&self) -> Option<&str> {
        self.role.iter().find(|i| i.coordinator_route).map(|i| i.name.as_str())
    }
    fn link_local_only(&self) -> bool {
        self.port.link_layer == LinkLayer::Ethernet && self.addrs().all(|a| is_link_local(&a.addr))
    }
    /// The networks it is on: its interfaces' subnets, or for InfiniBand the one IB fabric.
    fn networks(&self) -> BTreeSet<Network> {
        match self.port.link_layer {
            LinkLayer::InfiniBand => BTreeSet::from([Network::InfiniBand]),
            LinkLayer::Ethernet => {
                self.addrs().filter(|a| !is_link_local(&a.addr)).map(network).map(|(n, p)| Network::Ip(n, p)).collect()
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Network {
    InfiniBand,
    Ip(IpAddr, u8),
}

impl fmt::Display for Network {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Network::InfiniBand => f.write_str("the InfiniBand fabric"),
            Network::Ip(a, p) => write!(f, "{a}/{p}"),
        }
    }
}

/// Left out by `rule`, where naming the rails is the fix.
fn left_out(rule: Rule, evidence: String) -> Class {
    let fix = "if it is a rail, name every rail with --rails (DEVICE[:PORT], netdev:INTERFACE or pci:ADDRESS patterns)";
    Class::LeftOut { rule, evidence, fix: fix.into() }
}

fn facts<'a>(p: &'a Port, masters: &'a [Iface]) -> Facts<'a> {
    let mut role = Vec::new();
    let mut shown = Vec::new();
    for n in &p.netdevs {
        match n.master.as_deref().and_then(|m| masters.iter().find(|x| x.name == m)) {
            Some(m) => {
                shown.push(format!("{} (slave of {})", n.name, m.name));
                if !role.iter().any(|r: &&Iface| r.name == m.name) {
                    role.push(m);
                }
            }
            None => {
                shown.push(n.name.clone());
                role.push(n);
            }
        }
    }
    let label = if shown.is_empty() { format!("{}:{}", p.device, p.port) } else { shown.join(", ") };
    Facts { port: p, role, label }
}

/// The most common value, the smallest on a tie; `None` for none.
fn mode<T: Ord + Copy>(xs: impl Iterator<Item = T>) -> Option<(T, usize)> {
    let mut counts: BTreeMap<T, usize> = BTreeMap::new();
    for x in xs {
        *counts.entry(x).or_default() += 1;
    }
    // The smallest of the most frequent values: a later value wins only with a higher count.
    counts.into_iter().fold(None, |best, (v, c)| match best {
        Some((_, bc)) if bc >= c => best,
        _ => Some((v, c)),
    })
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// How a left-out port differs from the rails: the corroborating evidence.
struct Compute {
    count: usize,
    near: bool,
    link_layer: Option<LinkLayer>,
    rate: Option<u32>,
}

impl Compute {
    fn of(rails: &[&Facts<'_>]) -> Self {
        Compute {
            count: rails.len(),
            near: rails.iter().any(|f| f.port.gpu.near()),
            link_layer: mode(rails.iter().map(|f| f.port.link_layer)).map(|m| m.0),
            rate: mode(rails.iter().filter_map(|f| f.port.rate_gbps)).map(|m| m.0),
        }
    }

    /// The ways `f` is unlike the rails, as clauses.
    fn unlike(&self, f: &Facts<'_>) -> Vec<String> {
        let (rails, are, sit, run) = if self.count == 1 {
            ("the rail".to_string(), "is", "sits", "runs")
        } else {
            (format!("the {} rails", self.count), "are", "sit", "run")
        };
        let (p, gpu) = (f.port, f.port.gpu.describe());
        let placed = (self.near && !p.gpu.near()).then(|| format!("{gpu} while {rails} {sit} next to GPUs"));
        let ll = self.link_layer.filter(|ll| *ll != p.link_layer);
        let ll = ll.map(|ll| format!("{} where {rails} {are} {ll}", p.link_layer));
        let rate = self.rate.zip(p.rate_gbps).filter(|(r, mine)| r != mine);
        let rate = rate.map(|(r, mine)| format!("{mine} Gb/s where {rails} {run} at {r}"));
        [placed, ll, rate].into_iter().flatten().collect()
    }
}

/// The rule at work: every port's facts, and what the rules settled so far.
struct Run<'a> {
    inputs: &'a Inputs<'a>,
    all: Vec<Facts<'a>>,
    class: Vec<Option<Class>>,
}

/// How one of the later rules ended: the rails it chose, or why the evidence disagrees.
type Step = Result<Vec<usize>, String>;

/// Applies the rules of docs/rails.md, in order, to `inputs`.
pub fn classify<'a>(inputs: &'a Inputs<'a>) -> Decision {
    let all: Vec<Facts<'a>> = inputs.ports.iter().map(|p| facts(p, inputs.masters)).collect();
    let mut run = Run { inputs, class: all.iter().map(|_| None).collect(), all };
    if let Some(sel) = inputs.selector {
        let verdict = run.selected(sel);
        return run.finish(verdict);
    }
    run.link_local_only();
    // 2. The front end: the default route leaves by the port's interface (or its bond).
    let (front, rest): (Vec<usize>, Vec<usize>) =
        run.open().into_iter().partition(|&i| run.all.get(i).is_some_and(|f| f.default_route().is_some()));
    if rest.is_empty() {
        let verdict = run.small_node(&front);
        return run.finish(verdict);
    }
    let near: Vec<usize> =
        rest.iter().copied().filter(|&i| run.all.get(i).is_some_and(|f| f.port.gpu.near())).collect();
    let step = if near.is_empty() { run.unplaced(&rest) } else { run.placed(&rest, &near) };
    let verdict = match step {
        Ok(rails) => run.front_end(&front, &rails),
        Err(why) => Verdict::Disagreement { why },
    };
    run.finish(verdict)
}

impl<'a> Run<'a> {
    fn set(&mut self, i: usize, c: Class) {
        if let Some(slot) = self.class.get_mut(i) {
            *slot = Some(c);
        }
    }

    /// The ports no rule has settled yet.
    fn open(&self) -> Vec<usize> {
        self.class.iter().enumerate().filter(|(_, c)| c.is_none()).map(|(i, _)| i).collect()
    }

    fn coordinator(&self) -> &'a str {
        self.inputs.coordinator.unwrap_or("no coordinator given")
    }

    fn finish(self, verdict: Verdict) -> Decision {
        let ports = self
            .inputs
            .ports
            .iter()
            .zip(self.class)
            .map(|(p, c)| Classified { device: p.device.clone(), port: p.port, class: c.unwrap_or(Class::Unsettled) })
            .collect();
        Decision { ports, verdict }
    }

    /// Rule 0: the user's word; nothing else is weighed.
    fn selected(&mut self, sel: &Selector) -> Verdict {
        for (f, slot) in self.all.iter().zip(&mut self.class) {
            *slot = Some(match sel.matching_term(f.port) {
                Some(t) => Class::Rail { rule: Rule::Override, evidence: format!("matched by --rails term {t}") },
                None => Class::LeftOut {
                    rule: Rule::Override,
                    evidence: format!("not matched by --rails {}", sel.text),
                    fix: "add a term for it to --rails if it is a rail".into(),
                },
            });
        }
        if self.class.iter().flatten().any(|c| matches!(c, Class::Rail { .. })) {
            Verdict::Override
        } else {
            Verdict::Unmatched { selector: sel.text.clone() }
        }
    }

    /// Rule 1; never InfiniBand ports (the IB transport addresses by LID and GID, not IPoIB's).
    fn link_local_only(&mut self) {
        for (f, slot) in self.all.iter().zip(&mut self.class).filter(|(f, _)| f.link_local_only()) {
            let addrs = f.addrs().take(3).map(|a| format!("{}/{}", a.addr, a.prefix)).collect::<Vec<_>>().join(", ");
            let evidence = if f.role.is_empty() {
                format!("{} has no net device: its RoCE GIDs are link-local only", f.label)
            } else if addrs.is_empty() {
                format!("{} holds no address: its RoCE GIDs are link-local only", f.label)
            } else {
                format!("{} holds only link-local addresses ({addrs}), which reach only its own link", f.label)
            };
            let fix = format!(
                "give {} an address on the compute network; if the link-local network is the job's (nodes cabled back to back), name the rails with --rails",
                f.role.first().map_or(f.port.device.as_str(), |r| r.name.as_str())
            );
            *slot = Some(Class::LeftOut { rule: Rule::LinkLocalOnly, evidence, fix });
        }
    }

    /// Rule 2a: no port left but the front end's (if any): on a node this small it is the compute network.
    fn small_node(&mut self, front: &[usize]) -> Verdict {
        if self.all.is_empty() {
            return Verdict::Disagreement { why: "no active RDMA port: nothing to choose from".into() };
        }
        if front.is_empty() {
            return Verdict::Disagreement {
                why: "no port qualifies: every active port holds only link-local addresses, so NCCL's default takes them all; if they are the job's network (two nodes cabled back to back), name them with --rails".into(),
            };
        }
        for &i in front {
            let Some(f) = self.all.get(i) else { continue };
            let via = f.default_route().unwrap_or("its interface");
            let coord = if f.coordinator_route().is_some() { " and a route to the coordinator" } else { "" };
            let evidence = format!(
                "{via} carries the default route{coord}, and no other port is usable: on a node this small the front end is the compute network"
            );
            self.set(i, Class::Rail { rule: Rule::SmallNode, evidence });
        }
        Verdict::Confident
    }

    /// Rules 3 and 4: of `rest`, `near` are candidates, and a link layer most of them hold wins.
    fn placed(&mut self, rest: &[usize], near: &[usize]) -> Step {
        let Some((ll, n)) = mode(near.iter().filter_map(|&i| self.all.get(i)).map(|f| f.port.link_layer))
            .filter(|(_, n)| n.saturating_mul(2) > near.len())
        else {
            return Err(format!(
                "the {} ports next to GPUs split evenly between InfiniBand and Ethernet: nothing tells which is the compute fabric; name the rails with --rails",
                near.len()
            ));
        };
        let mut rails = Vec::new();
        for &i in near {
            let Some(f) = self.all.get(i) else { continue };
            let c = if f.port.link_layer == ll {
                rails.push(i);
                let others = plural(n.saturating_sub(1), "other port", "other ports");
                Class::Rail {
                    rule: Rule::Placement,
                    evidence: format!("{}, {ll} like {others} next to GPUs", f.port.gpu.describe()),
                }
            } else {
                let evidence =
                    format!("{} where {n} of the {} ports next to GPUs are {ll}", f.port.link_layer, near.len());
                left_out(Rule::LinkLayer, evidence)
            };
            self.set(i, c);
        }
        let compute = Compute::of(&rails.iter().filter_map(|&i| self.all.get(i)).collect::<Vec<_>>());
        for &i in rest.iter().filter(|i| !near.contains(i)) {
            let Some(f) = self.all.get(i) else { continue };
            // The rails sit next to GPUs and this port does not: the first clause says so.
            let evidence = compute.unlike(f).join("; ");
            self.set(i, left_out(Rule::Placement, evidence));
        }
        Ok(rails)
    }

    /// Rules 5 and 6, where no port of `rest` sits next to a GPU.
    fn unplaced(&mut self, rest: &[usize]) -> Step {
        if rest.iter().filter_map(|&i| self.all.get(i)).map(|f| f.port.link_layer).collect::<BTreeSet<_>>().len() > 1 {
            return Err(format!(
                "no port sits next to a GPU and the {} ports left mix InfiniBand and Ethernet: nothing tells which is the compute fabric; name the rails with --rails",
                rest.len()
            ));
        }
        let coordinator = self.coordinator();
        let routes = |i: &usize| self.all.get(*i).is_some_and(|f| f.coordinator_route().is_some());
        let on: Vec<usize> = rest.iter().copied().filter(routes).collect();
        if on.is_empty() {
            return self.one_network(rest);
        }
        // 5. The coordinator's network is the compute fabric.
        for &i in rest {
            let Some(f) = self.all.get(i) else { continue };
            let c = match f.coordinator_route() {
                Some(via) => Class::Rail {
                    rule: Rule::CoordinatorNetwork,
                    evidence: format!(
                        "{via} has a route to the coordinator ({coordinator}): with no port next to a GPU, the coordinator's network is the compute fabric"
                    ),
                },
                None => {
                    let nets = f.networks().iter().map(ToString::to_string).collect::<Vec<_>>().join(", ");
                    let evidence = format!(
                        "{} ({nets}) has no route to the coordinator ({coordinator}): a network of its own, such as a direct link",
                        f.label
                    );
                    left_out(Rule::CoordinatorNetwork, evidence)
                }
            };
            self.set(i, c);
        }
        Ok(on)
    }

    /// Rule 6: the ports of `rest`, all on one network (InfiniBand ports: the one IB fabric).
    fn one_network(&mut self, rest: &[usize]) -> Step {
        let coordinator = self.coordinator();
        let nets: Vec<BTreeSet<Network>> = rest.iter().filter_map(|&i| self.all.get(i)).map(Facts::networks).collect();
        let common = nets
            .iter()
            .skip(1)
            .fold(nets.first().cloned().unwrap_or_default(), |acc, n| acc.intersection(n).copied().collect());
        let Some(net) = common.into_iter().next() else {
            let every: BTreeSet<String> = nets.iter().flatten().map(ToString::to_string).collect();
            return Err(format!(
                "no port sits next to a GPU, none has a route to the coordinator ({coordinator}), and the {} ports left are on {} ({}): nothing tells the compute fabric from a direct link; name the rails with --rails, or give a coordinator on the compute fabric",
                rest.len(),
                plural(every.len(), "network", "networks"),
                every.into_iter().collect::<Vec<_>>().join(", ")
            ));
        };
        let evidence = format!(
            "no port sits next to a GPU and none has a route to the coordinator ({coordinator}); all {} are on {net}",
            plural(rest.len(), "port left", "ports left")
        );
        for &i in rest {
            self.set(i, Class::Rail { rule: Rule::OneNetwork, evidence: evidence.clone() });
        }
        Ok(rest.to_vec())
    }

    /// Rule 2, once the rails are known; a front end that looks like a rail otherwise disagrees.
    fn front_end(&mut self, front: &[usize], rails: &[usize]) -> Verdict {
        let compute = Compute::of(&rails.iter().filter_map(|&i| self.all.get(i)).collect::<Vec<_>>());
        for &i in front {
            let Some(f) = self.all.get(i) else { continue };
            let via = f.default_route().unwrap_or("its interface");
            let looks_like_a_rail = f.port.gpu.near()
                && compute.link_layer.is_none_or(|ll| ll == f.port.link_layer)
                && compute.rate.is_none_or(|r| f.port.rate_gbps == Some(r));
            if looks_like_a_rail {
                return Verdict::Disagreement {
                    why: format!(
                        "{} carries the default route, so it is the front end, yet it is {} and {} at {} Gb/s like the {}: the evidence disagrees; name the rails with --rails",
                        f.label,
                        f.port.gpu.describe(),
                        f.port.link_layer,
                        f.port.rate_gbps.map_or_else(|| "unknown".to_string(), |r| r.to_string()),
                        plural(compute.count, "rail", "rails")
                    ),
                };
            }
            let own: Vec<&str> = f.port.netdevs.iter().map(|n| n.name.as_str()).collect();
            let who = if own.contains(&via) {
                via.to_string()
            } else {
                format!("{} is a slave of {via}, which", own.join(", "))
            };
            let coord = if f.coordinator_route().is_some() { " and a route to the coordinator" } else { "" };
            let mut clauses = vec![format!("{who} carries the default route{coord}")];
            clauses.extend(compute.unlike(f));
            self.set(i, left_out(Rule::FrontEnd, clauses.join("; ")));
        }
        Verdict::Confident
    }
}

/// The most terms one `--rails` value may hold (NCCL reads at most 32 HCAs).
pub const MAX_TERMS: usize = 64;
/// The longest `--rails` value read.
pub const MAX_LEN: usize = 4096;
/// Longest RDMA device name (IB_DEVICE_NAME_MAX - 1) and net device name (IFNAMSIZ - 1).
const MAX_DEVICE: usize = 63;
const MAX_IFNAME: usize = 15;

/// One term of `--rails`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Term {
    /// `mlx5_*`, `mlx5_3:1`: RDMA device name pattern, optionally one port.
    Device { glob: String, port: Option<u32> },
    /// `netdev:rdma*`: the pattern matches one of the port's net devices or its bond master.
    Netdev { glob: String },
    /// `pci:0000:1b:00.0` (`pci:1b:00.0` means domain 0000): the port's function, exactly.
    Pci { addr: PciAddr },
}

impl fmt::Display for Term {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Term::Device { glob, port: None } => f.write_str(glob),
            Term::Device { glob, port: Some(p) } => write!(f, "{glob}:{p}"),
            Term::Netdev { glob } => write!(f, "netdev:{glob}"),
            Term::Pci { addr } => write!(f, "pci:{addr}"),
        }
    }
}

/// A PCI address, normalised: `dddd:bb:dd.f`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PciAddr {
    domain: u32,
    bus: u8,
    dev: u8,
    func: u8,
}

impl fmt::Display for PciAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:04x}:{:02x}:{:02x}.{:x}", self.domain, self.bus, self.dev, self.func)
    }
}

impl PciAddr {
    /// `[domain:]bus:device.function`, hexadecimal; `None` for anything else.
    pub fn parse(s: &str) -> Option<Self> {
        let hex = |x: &str, max: usize| {
            (!x.is_empty() && x.len() <= max && x.bytes().all(|b| b.is_ascii_hexdigit()))
                .then(|| u32::from_str_radix(x, 16).ok())
                .flatten()
        };
        let (head, func) = s.rsplit_once('.')?;
        let parts: Vec<&str> = head.split(':').collect();
        let (domain, bus, dev) = match parts.as_slice() {
            [b, d] => (0, *b, *d),
            [dom, b, d] => (hex(dom, 8)?, *b, *d),
            _ => return None,
        };
        let byte = |x: &str, max: usize| hex(x, max).and_then(|n| u8::try_from(n).ok());
        let (bus, dev, func) = (byte(bus, 2)?, byte(dev, 2)?, byte(func, 1)?);
        (dev <= 0x1f && func <= 7).then_some(PciAddr { domain, bus, dev, func })
    }
}

/// `--rails TERM[,TERM...]`, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector {
    terms: Vec<Term>,
    /// The value as given, for messages.
    text: String,
}

/// Why a `--rails` value was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    #[error("--rails is empty: give DEVICE[:PORT], netdev:INTERFACE or pci:ADDRESS terms, comma-separated")]
    Empty,
    #[error("--rails is {0} bytes long; at most {MAX_LEN} are read")]
    TooLong(usize),
    #[error("--rails has {0} terms; at most {MAX_TERMS} are allowed (NCCL takes at most 32 HCAs)")]
    TooManyTerms(usize),
    #[error("--rails term {0} is empty (two commas in a row, or one at an end)")]
    EmptyTerm(usize),
    #[error("--rails {0:?}: '^' and '=' are NCCL_IB_HCA's syntax; --rails lists the rails to take, each a pattern (set NCCL_IB_HCA itself to pass NCCL a list as is)")]
    NcclSyntax(String),
    #[error("--rails {0:?}: unknown kind {1:?}; a term is DEVICE[:PORT], netdev:INTERFACE or pci:ADDRESS")]
    UnknownKind(String, String),
    #[error("--rails {0:?}: {1}")]
    BadPattern(String, &'static str),
    #[error("--rails {0:?}: the port must be a number from 1 to 255")]
    BadPort(String),
    #[error(
        "--rails {0:?}: not a PCI address; write [DOMAIN:]BUS:DEVICE.FUNCTION in hexadecimal, such as pci:0000:1b:00.0"
    )]
    BadPci(String),
}

/// A name pattern: `*` any run of characters, `?` one, the rest as the kernel's names allow.
fn check_glob(term: &str, glob: &str, max: usize) -> Result<(), SelectorError> {
    let why = if glob.is_empty() {
        "the pattern is empty"
    } else if !glob.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-' | b'*' | b'?')) {
        "a pattern holds letters, digits, '_', '.', '-' and the wildcards '*' and '?'"
    } else if glob.bytes().filter(|b| *b != b'*').count() <= max {
        return Ok(());
    } else if max == MAX_IFNAME {
        "longer than any interface name (at most 15 characters)"
    } else {
        "longer than any RDMA device name (at most 63 characters)"
    };
    Err(SelectorError::BadPattern(term.into(), why))
}

/// Whether `name` matches `glob` (`*`, `?`): the linear two-cursor match, no recursion.
fn glob_match(glob: &str, name: &str) -> bool {
    let (g, n) = (glob.as_bytes(), name.as_bytes());
    let (mut gi, mut ni) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        match g.get(gi) {
            Some(b'*') => {
                star = Some((gi, ni));
                gi += 1;
            }
            Some(&c) if c == b'?' || Some(&c) == n.get(ni) => {
                gi += 1;
                ni += 1;
            }
            _ => match star {
                Some((sg, sn)) => {
                    gi = sg + 1;
                    ni = sn + 1;
                    star = Some((sg, sn + 1));
                }
                None => return false,
            },
        }
    }
    g.get(gi..).is_some_and(|rest| rest.iter().all(|c| *c == b'*'))
}

impl Selector {
    pub fn parse(value: &str) -> Result<Self, SelectorError> {
        if value.len() > MAX_LEN {
            return Err(SelectorError::TooLong(value.len()));
        }
        let value = value.trim();
        if value.is_empty() {
            return Err(SelectorError::Empty);
        }
        let raw: Vec<&str> = value.split(',').map(str::trim).collect();
        if raw.len() > MAX_TERMS {
            return Err(SelectorError::TooManyTerms(raw.len()));
        }
        let mut terms = Vec::with_capacity(raw.len());
        for (k, t) in raw.iter().enumerate() {
            if t.is_empty() {
                return Err(SelectorError::EmptyTerm(k.saturating_add(1)));
            }
            if t.starts_with('^') || t.starts_with('=') {
                return Err(SelectorError::NcclSyntax((*t).into()));
            }
            let term = if let Some(g) = t.strip_prefix("netdev:") {
                check_glob(t, g, MAX_IFNAME)?;
                Term::Netdev { glob: g.into() }
            } else if let Some(a) = t.strip_prefix("pci:") {
                Term::Pci { addr: PciAddr::parse(a).ok_or_else(|| SelectorError::BadPci((*t).into()))? }
            } else if let Some((g, p)) = t.split_once(':') {
                if !p.bytes().all(|b| b.is_ascii_digit()) || p.is_empty() {
                    // Not DEVICE:PORT: a prefix of a kind this parser does not know.
                    return Err(SelectorError::UnknownKind((*t).into(), g.into()));
                }
                let port = p.parse::<u32>().ok().filter(|n| (1..=255).contains(n));
                let port = port.ok_or_else(|| SelectorError::BadPort((*t).into()))?;
                check_glob(t, g, MAX_DEVICE)?;
                Term::Device { glob: g.into(), port: Some(port) }
            } else {
                check_glob(t, t, MAX_DEVICE)?;
                Term::Device { glob: (*t).into(), port: None }
            };
            terms.push(term);
        }
        Ok(Selector { terms, text: value.to_string() })
    }

    /// The first term that takes `p`.
    pub fn matching_term(&self, p: &Port) -> Option<&Term> {
        self.terms.iter().find(|t| match t {
            Term::Device { glob, port } => glob_match(glob, &p.device) && port.is_none_or(|n| n == p.port),
            Term::Netdev { glob } => p
                .netdevs
                .iter()
                .any(|n| glob_match(glob, &n.name) || n.master.as_deref().is_some_and(|m| glob_match(glob, m))),
            Term::Pci { addr } => p.pci.as_deref().and_then(PciAddr::parse).is_some_and(|a| a == *addr),
        })
    }
}

#[cfg(test)]
mod tests {
    // The fixture nodes of fixtures/nodes.py (host-*), written out by hand.
    use super::*;

    fn addr(s: &str) -> IfAddr {
        let (ip, p) = s.split_once('/').expect("address/prefix");
        IfAddr { addr: ip.parse().expect("ip"), prefix: p.parse().expect("prefix") }
    }

    fn iface(name: &str, addrs: &[&str]) -> Iface {
        let addrs = addrs.iter().map(|a| addr(a)).collect();
        Iface { name: name.into(), addrs, master: None, default_route: false, coordinator_route: false }
    }

    fn port(device: &str, ll: LinkLayer, rate: u32, gpu: GpuDistance, net: Iface) -> Port {
        Port {
            device: device.into(),
            port: 1,
            pci: None,
            link_layer: ll,
            rate_gbps: Some(rate),
            netdevs: vec![net],
            gpu,
        }
    }

    use GpuDistance::{SameNuma, SameSwitch, Unknown};
    use LinkLayer::{Ethernet, InfiniBand};

    fn run(ports: &[Port], masters: &[Iface], coordinator: Option<&str>, selector: Option<&Selector>) -> Decision {
        classify(&Inputs { ports, masters, coordinator, selector })
    }

    fn rails(d: &Decision) -> Vec<String> {
        d.rails().expect("rails exported").into_iter().map(|(d, _)| d.to_string()).collect()
    }

    fn class<'a>(d: &'a Decision, device: &str) -> &'a Class {
        &d.ports.iter().find(|c| c.device == device).expect("port").class
    }

    fn left_out(d: &Decision, device: &str) -> (Rule, String) {
        match class(d, device) {
            Class::LeftOut { rule, evidence, .. } => (*rule, evidence.clone()),
            other => panic!("{device} is {other:?}"),
        }
    }

    fn rail_rule(d: &Decision, device: &str) -> Rule {
        match class(d, device) {
            Class::Rail { rule, .. } => *rule,
            other => panic!("{device} is {other:?}"),
        }
    }

    fn disagreement(d: &Decision) -> String {
        match &d.verdict {
            Verdict::Disagreement { why } => why.clone(),
            other => panic!("verdict {other:?}, ports {:#?}", d.ports),
        }
    }

    /// host-oci-h100: mlx5_0..mlx5_17; eth0 on mlx5_2 (default route, coordinator), eth1 on
    /// mlx5_11 (fe80 only), rails rdma0..rdma15 two per GPU switch, 10.224.N.17/12.
    fn oci() -> Vec<Port> {
        let buses = ["10", "2e", "3e", "4e", "8e", "ae", "be", "ce"];
        let mut out = Vec::new();
        let mut rail = 0usize;
        for k in 0..18 {
            let dev = format!("mlx5_{k}");
            let p = match k {
                2 => {
                    let mut eth0 = iface("eth0", &["10.0.2.17/24", "fe80::210:e0ff:fe4c:2011/64"]);
                    eth0.default_route = true;
                    eth0.coordinator_route = true;
                    Port { pci: Some("0000:1b:00.0".into()), ..port(&dev, Ethernet, 100, SameNuma, eth0) }
                }
                11 => Port {
                    pci: Some("0000:9b:00.0".into()),
                    ..port(&dev, Ethernet, 100, SameNuma, iface("eth1", &["fe80::210:e0ff:fe4c:2111/64"]))
                },
                _ => {
                    let net = iface(
                        &format!("rdma{rail}"),
                        &[&format!("10.224.{rail}.17/12"), "fe80::a288:c2ff:fe3e:405c/64"],
                    );
                    let pci = format!("0000:{}:00.{}", buses[rail / 2], rail % 2);
                    rail += 1;
                    Port { pci: Some(pci), ..port(&dev, Ethernet, 200, SameSwitch, net) }
                }
            };
            out.push(p);
        }
        out
    }

    /// Oracle's published NCCL_IB_HCA for BM.GPU.H100.8.
    const ORACLE: &str = "mlx5_0,mlx5_1,mlx5_3,mlx5_4,mlx5_5,mlx5_6,mlx5_7,mlx5_8,mlx5_9,mlx5_10,mlx5_12,mlx5_13,mlx5_14,mlx5_15,mlx5_16,mlx5_17";

    /// host-ib-roce-frontend: IB rails mlx5_0, 1, 4..9 behind GPU switches; the CX-6 Dx front end
    /// mlx5_2 (default route, coordinator) and mlx5_3 (storage subnet) on a CPU root port.
    fn ib_frontend() -> Vec<Port> {
        let mut out = Vec::new();
        let mut rail = 0;
        for k in 0..10 {
            let dev = format!("mlx5_{k}");
            out.push(match k {
                2 => {
                    let mut f0 = iface("enp50s0f0np0", &["10.10.4.21/24", "fe80::e42:a1ff:fe7d:314a/64"]);
                    f0.default_route = true;
                    f0.coordinator_route = true;
                    port(&dev, Ethernet, 100, SameNuma, f0)
                }
                3 => port(&dev, Ethernet, 100, SameNuma, iface("enp50s0f1np1", &["172.16.4.21/24"])),
                _ => {
                    let ib = iface(&format!("ib{rail}"), &[&format!("10.{}.4.21/16", 60 + rail)]);
                    rail += 1;
                    port(&dev, InfiniBand, 400, SameSwitch, ib)
                }
            });
        }
        out
    }

    /// host-gh200-bond: mlx5_0/mlx5_1 slaves of bond0 (default route, coordinator), mlx5_2 IB with
    /// an fe80-only ib0; nothing next to the GPU.
    fn gh200() -> (Vec<Port>, Vec<Iface>) {
        let slave = |n: &str| Iface { master: Some("bond0".into()), ..iface(n, &[]) };
        let ports = vec![
            port("mlx5_0", Ethernet, 100, SameNuma, slave("enp1s0f0np0")),
            port("mlx5_1", Ethernet, 100, SameNuma, slave("enp1s0f1np1")),
            port("mlx5_2", InfiniBand, 400, SameNuma, iface("ib0", &["fe80::a288:c203:d2:bb10/64"])),
        ];
        let mut bond = iface("bond0", &["10.40.1.21/24", "fe80::bae9:24ff:fe5a:e40/64"]);
        bond.default_route = true;
        bond.coordinator_route = true;
        (ports, vec![bond])
    }

    /// host-dgx-spark: port 1's halves on the cluster subnet, port 2's on a /30 direct link and a
    /// 169.254 link; the default route is on enP7s7, which has no RDMA port. `cluster`: the
    /// coordinator is on the cluster subnet (`env`), else behind enP7s7 (`env.mgmt`).
    fn spark(cluster: bool) -> Vec<Port> {
        let p = |dev: &str, ifn: &str, a: &str, coord: bool| {
            let mut i = iface(ifn, &[a, "fe80::4ebb:47ff:fe2d:10a0/64"]);
            i.coordinator_route = coord;
            port(dev, Ethernet, 200, SameNuma, i)
        };
        vec![
            p("rocep1s0f0", "enp1s0f0np0", "192.168.100.11/24", cluster),
            p("rocep1s0f1", "enp1s0f1np1", "10.10.10.1/30", false),
            p("roceP2p1s0f0", "enP2p1s0f0np0", "192.168.100.111/24", cluster),
            p("roceP2p1s0f1", "enP2p1s0f1np1", "169.254.33.7/16", false),
        ]
    }

    /// host-single-nic: mlx5_0, the only port, with the default route and the coordinator's.
    fn single() -> Vec<Port> {
        let mut i = iface("ens1np0", &["10.20.3.14/24", "fe80::e42:a1ff:fe3c:58e2/64"]);
        i.default_route = true;
        i.coordinator_route = true;
        vec![port("mlx5_0", Ethernet, 100, SameNuma, i)]
    }

    // ---- one test per rule ------------------------------------------------------------------

    /// Rule 0. The Spark whose coordinator is behind its management port: the evidence cannot
    /// tell the cluster halves from the direct link, and --rails can; OCI's worked example.
    #[test]
    fn rails_option_takes_exactly_the_ports_it_names() {
        let ports = spark(false);
        assert!(disagreement(&run(&ports, &[], Some("MASTER_ADDR=192.168.1.51"), None)).contains("direct link"));
        let sel = Selector::parse("netdev:enp1s0f0np0, netdev:enP2p1s0f0np0").expect("parse");
        let d = run(&ports, &[], Some("MASTER_ADDR=192.168.1.51"), Some(&sel));
        assert_eq!(d.verdict, Verdict::Override);
        assert_eq!(rails(&d), ["rocep1s0f0", "roceP2p1s0f0"]);
        assert_eq!(left_out(&d, "rocep1s0f1").0, Rule::Override);

        let oci = oci();
        for value in ["netdev:rdma*", ORACLE] {
            let sel = Selector::parse(value).expect("parse");
            let d = run(&oci, &[], None, Some(&sel));
            assert_eq!(rails(&d).join(","), ORACLE, "--rails {value}");
        }
        // The same 16 by PCI address, domain left out.
        let pci: Vec<String> = oci
            .iter()
            .filter_map(|p| p.pci.clone())
            .filter(|a| a != "0000:1b:00.0" && a != "0000:9b:00.0")
            .map(|a| format!("pci:{}", &a[5..]))
            .collect();
        let d = run(&oci, &[], None, Some(&Selector::parse(&pci.join(",")).expect("parse")));
        assert_eq!(rails(&d).join(","), ORACLE);

        let none = Selector::parse("bnxt_re*").expect("parse");
        let d = run(&oci, &[], None, Some(&none));
        assert_eq!(d.verdict, Verdict::Unmatched { selector: "bnxt_re*".into() });
        assert_eq!(d.rails(), None);
    }

    /// Rule 1. The Spark's autoconfigured half and OCI's eth1 (fe80 only) are left out by it; a
    /// node whose ports are all link-local gets NCCL's default with the warning, not rails. The
    /// GH200's fe80-only ib0 does not touch its InfiniBand HCA: the IB transport does not address
    /// by IPoIB.
    #[test]
    fn a_link_local_only_port_is_never_a_rail() {
        let d = run(&spark(true), &[], Some("MASTER_ADDR=192.168.100.12"), None);
        let (rule, evidence) = left_out(&d, "roceP2p1s0f1");
        assert_eq!(rule, Rule::LinkLocalOnly);
        assert!(evidence.contains("169.254.33.7/16"), "{evidence}");
        let d = run(&oci(), &[], Some("MASTER_ADDR=10.0.2.117"), None);
        assert_eq!(left_out(&d, "mlx5_11").0, Rule::LinkLocalOnly);

        // NVIDIA's two-Spark playbook: port 2's halves, link-local addresses only.
        let ports: Vec<Port> = spark(false)
            .into_iter()
            .filter(|p| p.device.ends_with("f1"))
            .map(|mut p| {
                p.netdevs[0].addrs.retain(|a| is_link_local(&a.addr));
                p.netdevs[0].addrs.push(addr("169.254.7.9/16"));
                p
            })
            .collect();
        assert!(disagreement(&run(&ports, &[], None, None)).contains("only link-local"));

        let (ports, masters) = gh200();
        assert_eq!(rails(&run(&ports, &masters, None, None)), ["mlx5_2"]);
    }

    /// Rule 2. OCI's eth0 is the front end. Where placement cannot help (GPUs not found), the
    /// default route alone keeps it out; without it the coordinator's route would make eth0 the
    /// only rail.
    #[test]
    fn the_port_with_the_default_route_is_the_front_end() {
        let d = run(&oci(), &[], Some("MASTER_ADDR=10.0.2.117"), None);
        assert_eq!(d.verdict, Verdict::Confident);
        assert_eq!(rails(&d).join(","), ORACLE);
        let (rule, evidence) = left_out(&d, "mlx5_2");
        assert_eq!(rule, Rule::FrontEnd);
        for part in [
            "eth0 carries the default route and a route to the coordinator",
            "next to GPUs",
            "100 Gb/s where the 16 rails run at 200",
        ] {
            assert!(evidence.contains(part), "{part:?} in {evidence}");
        }

        let unplaced: Vec<Port> = oci().into_iter().map(|p| Port { gpu: Unknown, ..p }).collect();
        let d = run(&unplaced, &[], Some("MASTER_ADDR=10.0.2.117"), None);
        assert_eq!(rails(&d).join(","), ORACLE);
        assert_eq!(rail_rule(&d, "mlx5_0"), Rule::OneNetwork);
        assert_eq!(left_out(&d, "mlx5_2").0, Rule::FrontEnd);
    }

    /// Rule 2, bonds: the GH200's bond slaves hold no address and no route of their own; they take
    /// bond0's, the front end's. Without that, nothing would tell them from the IB HCA.
    #[test]
    fn a_bond_slave_takes_its_bonds_role() {
        let (ports, masters) = gh200();
        let d = run(&ports, &masters, Some("MASTER_ADDR=10.40.1.22"), None);
        assert_eq!(d.verdict, Verdict::Confident);
        assert_eq!(rails(&d), ["mlx5_2"]);
        assert_eq!(rail_rule(&d, "mlx5_2"), Rule::OneNetwork);
        let (rule, evidence) = left_out(&d, "mlx5_0");
        assert_eq!(rule, Rule::FrontEnd);
        assert_eq!(
            evidence,
            "enp1s0f0np0 is a slave of bond0, which carries the default route and a route to the coordinator; \
             Ethernet where the rail is InfiniBand; 100 Gb/s where the rail runs at 400"
        );
        // A bond named by --rails takes its slaves' ports.
        let sel = Selector::parse("netdev:bond0").expect("parse");
        assert_eq!(rails(&run(&ports, &masters, None, Some(&sel))), ["mlx5_0", "mlx5_1"]);
    }

    /// Rule 2a. A node whose only port carries the default route uses it.
    #[test]
    fn a_node_whose_only_port_is_the_front_end_uses_it() {
        let d = run(&single(), &[], Some("MASTER_ADDR=10.20.3.11"), None);
        assert_eq!(d.verdict, Verdict::Confident);
        assert_eq!(rails(&d), ["mlx5_0"]);
        assert_eq!(rail_rule(&d, "mlx5_0"), Rule::SmallNode);
    }

    /// Rule 3. The IB node's storage port is not next to a GPU; nor is an IB storage HCA on a CPU
    /// root port (DGX H100's storage ports), which matches the rails in every other way.
    #[test]
    fn ports_away_from_the_gpus_are_left_out_where_others_are_next_to_them() {
        let d = run(&ib_frontend(), &[], Some("MASTER_ADDR=10.10.4.11"), None);
        assert_eq!(d.verdict, Verdict::Confident);
        assert_eq!(rails(&d), ["mlx5_0", "mlx5_1", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_7", "mlx5_8", "mlx5_9"]);
        let (rule, evidence) = left_out(&d, "mlx5_3");
        assert_eq!(rule, Rule::Placement);
        assert!(evidence.contains("Ethernet where the 8 rails are InfiniBand"), "{evidence}");
        assert_eq!(left_out(&d, "mlx5_2").0, Rule::FrontEnd);

        let mut ports = ib_frontend();
        ports[3] = port("mlx5_3", InfiniBand, 400, SameNuma, iface("ib8", &["10.68.4.21/16"]));
        let d = run(&ports, &[], Some("MASTER_ADDR=10.10.4.11"), None);
        assert_eq!(rails(&d).len(), 8);
        assert_eq!(left_out(&d, "mlx5_3").0, Rule::Placement);
    }

    /// Rule 4. The IB node with its front-end card in a GPU switch's spare slot: the storage port
    /// sits next to a GPU but is Ethernet among InfiniBand rails. An even split is a disagreement.
    #[test]
    fn the_link_layer_most_ports_next_to_gpus_share_wins() {
        let mut ports = ib_frontend();
        ports[2].gpu = SameSwitch;
        ports[3].gpu = SameSwitch;
        let d = run(&ports, &[], Some("MASTER_ADDR=10.10.4.11"), None);
        assert_eq!(rails(&d).len(), 8);
        let (rule, evidence) = left_out(&d, "mlx5_3");
        assert_eq!(rule, Rule::LinkLayer);
        assert!(evidence.contains("Ethernet where 8 of the 9 ports next to GPUs are InfiniBand"), "{evidence}");

        // Four InfiniBand ports and four Ethernet ones next to GPUs.
        let split: Vec<Port> = ib_frontend()
            .into_iter()
            .enumerate()
            .map(|(k, mut p)| {
                if k >= 6 {
                    p.link_layer = Ethernet;
                }
                p
            })
            .collect();
        assert!(disagreement(&run(&split, &[], None, None)).contains("split evenly"));
    }

    /// Rule 5. The Spark with its coordinator on the cluster switch: port 1's two halves are the
    /// rails, port 2's direct link is not.
    #[test]
    fn a_port_off_the_coordinators_network_is_left_out_where_no_port_is_next_to_a_gpu() {
        let d = run(&spark(true), &[], Some("MASTER_ADDR=192.168.100.12"), None);
        assert_eq!(d.verdict, Verdict::Confident);
        assert_eq!(rails(&d), ["rocep1s0f0", "roceP2p1s0f0"]);
        assert_eq!(rail_rule(&d, "rocep1s0f0"), Rule::CoordinatorNetwork);
        let (rule, evidence) = left_out(&d, "rocep1s0f1");
        assert_eq!(rule, Rule::CoordinatorNetwork);
        assert!(evidence.contains("10.10.10.0/30") && evidence.contains("MASTER_ADDR=192.168.100.12"), "{evidence}");
    }

    /// Rule 6. The Spark with its direct link unplugged and the coordinator behind enP7s7: both
    /// halves are on one subnet, so they are the rails. A GH200 node with four IB HCAs: one fabric.
    #[test]
    fn ports_all_on_one_network_are_the_rails_where_nothing_else_tells() {
        let ports: Vec<Port> = spark(false).into_iter().filter(|p| p.device.ends_with("f0")).collect();
        let d = run(&ports, &[], Some("MASTER_ADDR=192.168.1.51"), None);
        assert_eq!(d.verdict, Verdict::Confident);
        assert_eq!(rails(&d), ["rocep1s0f0", "roceP2p1s0f0"]);
        assert_eq!(rail_rule(&d, "roceP2p1s0f0"), Rule::OneNetwork);

        let (mut ports, masters) = gh200();
        for k in 3..6 {
            ports.push(port(&format!("mlx5_{k}"), InfiniBand, 400, SameNuma, iface(&format!("ib{}", k - 2), &[])));
        }
        assert_eq!(rails(&run(&ports, &masters, None, None)), ["mlx5_2", "mlx5_3", "mlx5_4", "mlx5_5"]);
    }

    /// Rate corroborates: OCI's front end moved into a GPU switch's slot is still told apart by
    /// its 100 Gb/s against the rails' 200.
    #[test]
    fn rate_tells_a_front_end_next_to_a_gpu_from_a_rail() {
        let mut ports = oci();
        ports[2].gpu = SameSwitch;
        let d = run(&ports, &[], Some("MASTER_ADDR=10.0.2.117"), None);
        assert_eq!(d.verdict, Verdict::Confident);
        let (rule, evidence) = left_out(&d, "mlx5_2");
        assert_eq!(rule, Rule::FrontEnd);
        assert!(evidence.contains("100 Gb/s where the 16 rails run at 200"), "{evidence}");
    }

    /// The fallback: a front end that looks like a rail in every other way, and a Spark where
    /// nothing tells the networks apart, export nothing and say why.
    #[test]
    fn evidence_that_disagrees_exports_nothing_and_says_why() {
        let mut ports = oci();
        ports[2].gpu = SameSwitch;
        ports[2].rate_gbps = Some(200);
        let d = run(&ports, &[], Some("MASTER_ADDR=10.0.2.117"), None);
        assert_eq!(d.rails(), None);
        let why = disagreement(&d);
        assert!(why.contains("eth0 carries the default route") && why.contains("--rails"), "{why}");

        let d = run(&spark(false), &[], Some("MASTER_ADDR=192.168.1.51"), None);
        let why = disagreement(&d);
        assert!(why.contains("3 ports left are on 2 networks (10.10.10.0/30, 192.168.100.0/24)"), "{why}");
        assert_eq!(class(&d, "rocep1s0f0"), &Class::Unsettled);
    }

    // ---- the summary and the selector ----------------------------------------------------------

    #[test]
    fn every_port_left_out_is_named_with_rule_evidence_and_fix() {
        let d = run(&oci(), &[], Some("MASTER_ADDR=10.0.2.117"), None);
        let lines: Vec<String> =
            d.ports.iter().filter_map(|c| Some(format!("{}:{} {}", c.device, c.port, c.left_out()?))).collect();
        assert_eq!(lines.len(), 2, "{lines:#?}");
        assert!(lines[0].starts_with("mlx5_2:1 left out (front end): eth0 carries the default route"), "{}", lines[0]);
        assert!(lines[0]
            .ends_with("name every rail with --rails (DEVICE[:PORT], netdev:INTERFACE or pci:ADDRESS patterns)"));
        assert!(lines[1].starts_with("mlx5_11:1 left out (link-local only): eth1 holds only link-local addresses (fe80::210:e0ff:fe4c:2111/64)"), "{}", lines[1]);
        assert!(lines[1].contains("give eth1 an address on the compute network"));
    }

    #[test]
    fn selector_terms_parse_and_match() {
        let s = Selector::parse(" mlx5_1?:1 ,netdev:rdma*, pci:1b:00.0,pci:10000:00:1f.7,rocep*").expect("parse");
        assert_eq!(
            s.terms.iter().map(ToString::to_string).collect::<Vec<_>>(),
            ["mlx5_1?:1", "netdev:rdma*", "pci:0000:1b:00.0", "pci:10000:00:1f.7", "rocep*"]
        );
        let p = |dev: &str, n: u32| Port { port: n, ..port(dev, Ethernet, 200, SameSwitch, iface("x", &[])) };
        assert!(s.matching_term(&p("mlx5_13", 1)).is_some());
        assert!(s.matching_term(&p("mlx5_13", 2)).is_none());
        assert!(s.matching_term(&p("mlx5_1", 1)).is_none(), "'?' is exactly one character");
        assert!(
            glob_match("*", "")
                && glob_match("a*b*c", "axxbyyc")
                && !glob_match("a*b", "ab c")
                && glob_match("**x", "x")
        );
        assert!(!glob_match("mlx5_1", "mlx5_10"), "a name is not a prefix (unlike NCCL_IB_HCA)");
    }

    #[test]
    fn bad_selectors_are_refused_with_their_reason() {
        use SelectorError as E;
        let err = |s: &str| Selector::parse(s).expect_err(s);
        assert_eq!(err("  "), E::Empty);
        assert_eq!(err("mlx5_0,,mlx5_1"), E::EmptyTerm(2));
        assert_eq!(err("mlx5_0,"), E::EmptyTerm(2));
        assert_eq!(err("^mlx5_2"), E::NcclSyntax("^mlx5_2".into()));
        assert_eq!(err("=mlx5_0,mlx5_1"), E::NcclSyntax("=mlx5_0".into()));
        assert_eq!(err("ifname:eth0"), E::UnknownKind("ifname:eth0".into(), "ifname".into()));
        assert_eq!(err("mlx5_0:0"), E::BadPort("mlx5_0:0".into()));
        assert_eq!(err("mlx5_0:256"), E::BadPort("mlx5_0:256".into()));
        assert_eq!(err("pci:1b:00"), E::BadPci("pci:1b:00".into()));
        assert_eq!(err("pci:0000:1b:20.0"), E::BadPci("pci:0000:1b:20.0".into()));
        assert_eq!(err("pci:0000:1b:00.8"), E::BadPci("pci:0000:1b:00.8".into()));
        assert!(matches!(err("netdev:"), E::BadPattern(_, _)));
        assert!(matches!(err("netdev:eth0;rm"), E::BadPattern(_, _)));
        assert!(matches!(err("netdev:abcdefghijklmnop"), E::BadPattern(_, m) if m.contains("15")));
        assert!(matches!(err("mlx5/../x"), E::BadPattern(_, _)));
        assert!(matches!(err("mlx5_\u{e9}"), E::BadPattern(_, _)));
        assert_eq!(err(&"a,".repeat(65)), E::TooManyTerms(66));
        assert_eq!(err(&"a".repeat(5000)), E::TooLong(5000));
        assert!(err("^x").to_string().contains("NCCL_IB_HCA's syntax"));
    }

    #[test]
    fn odd_inputs_decide_without_panicking() {
        let d = run(&[], &[], None, None);
        assert!(disagreement(&d).contains("no active RDMA port"));
        // A slave whose master is not described speaks for itself; a RoCE port without a net
        // device has only its link-local GIDs; an IB port without one is still an IB port.
        let orphan = Iface { master: Some("bond9".into()), ..iface("eth5", &["10.1.1.1/24"]) };
        let ports = [
            port("a", Ethernet, 100, Unknown, orphan),
            Port { netdevs: Vec::new(), ..port("b", Ethernet, 100, Unknown, iface("x", &[])) },
            Port { netdevs: Vec::new(), ..port("c", InfiniBand, 400, Unknown, iface("x", &[])) },
        ];
        let d = run(&ports, &[], None, None);
        assert!(left_out(&d, "b").1.contains("b:1 has no net device"));
        assert!(disagreement(&d).contains("mix InfiniBand and Ethernet"));
        assert_eq!(class(&d, "a"), &Class::Unsettled);
        // Prefix lengths past the family's are clamped; malformed PCI addresses are none.
        assert_eq!(network(&IfAddr { addr: "10.0.0.1".parse().expect("ip"), prefix: 200 }).1, 32);
        assert!(["", ":::.", "zz:00.0", "0000:1b:00", "1:2:3:4.0"].iter().all(|a| PciAddr::parse(a).is_none()));
        // Many ports, each on a network of its own: bounded work, a plain disagreement.
        let many: Vec<Port> = (0..2000)
            .map(|k| {
                port(
                    &format!("d{k}"),
                    Ethernet,
                    100,
                    Unknown,
                    iface(&format!("e{k}"), &[&format!("10.{}.{}.1/24", k / 256, k % 256)]),
                )
            })
            .collect();
        assert!(disagreement(&run(&many, &[], None, None)).contains("2000 ports left are on 2000 networks"));
    }
}
