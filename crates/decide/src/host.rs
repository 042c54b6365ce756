//! The rails rule at work in the plan where every visible device is the pod's: the ports NCCL
//! would take classified by [`rails::classify`], only the rails to `NCCL_IB_HCA`. Pure.

use serde::Serialize;

use crate::rails::{self, GpuDistance, Iface, LinkLayer, Port, Selector, Verdict};
use nw_observe::detect::port::PortFacts;
use nw_observe::detect::rails::Evidence;
use nw_observe::detect::topology::Relation;

/// What the plan needs to apply the rule.
#[derive(Debug, Clone, Copy)]
pub struct Rails<'a> {
    pub evidence: &'a Evidence,
    /// The coordinator as given (`MASTER_ADDR=10.0.2.117`), for messages.
    pub coordinator: Option<&'a str>,
    pub selector: Option<&'a Selector>,
}

/// The rule's verdict and what it weighed, shown as `rails` in `env --json`.
#[derive(Debug, Clone, Serialize)]
pub struct RailsReport {
    /// `confident`, `override`, `unmatched` or `disagreement`.
    pub verdict: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    pub ports: Vec<rails::Classified>,
    pub evidence: Evidence,
}

fn gpu(r: Option<Relation>) -> GpuDistance {
    match r {
        Some(Relation::Pix | Relation::Pxb) => GpuDistance::SameSwitch,
        Some(Relation::Phb) => GpuDistance::SameRootPort,
        Some(Relation::Node) => GpuDistance::SameNuma,
        Some(Relation::Sys) => GpuDistance::Far,
        None => GpuDistance::Unknown,
    }
}

/// `400 Gb/sec (4X NDR)` -> 400.
fn rate_gbps(rate: Option<&str>) -> Option<u32> {
    let n: f64 = rate?.split_whitespace().next()?.parse().ok()?;
    // A rate in sysfs is at most a few thousand Gb/s; anything else is not one.
    (n.is_finite() && (0.0..1.0e6).contains(&n)).then(|| n.round() as u32)
}

/// Classifies `used`; `None` where the rule does not apply: no usable port, a link layer it does
/// not weigh, no evidence (no GPU, default route, coordinator or `--rails`), or no address of any
/// port's interface here ("only link-local" would then be said on no evidence).
pub fn classify(used: &[(&str, &PortFacts)], r: Rails<'_>) -> Option<(rails::Decision, RailsReport)> {
    let ev = r.evidence;
    if used.is_empty() || ev.ifaces.iter().all(|i| i.addrs.is_empty()) {
        return None;
    }
    // No GPU, no default route, no coordinator: nothing to weigh, every usable port is taken.
    let nothing_to_weigh = ev.gpus == 0 && r.coordinator.is_none() && !ev.ifaces.iter().any(|i| i.default_route);
    if nothing_to_weigh && r.selector.is_none() {
        return None;
    }
    let mut ports = Vec::new();
    for (d, p) in used {
        let link_layer = match p.link_layer.as_deref() {
            Some("InfiniBand") => LinkLayer::InfiniBand,
            Some("Ethernet") => LinkLayer::Ethernet,
            _ => return None,
        };
        let seen = ev.ports.iter().find(|e| e.device == *d && e.port == p.port);
        let netdevs = seen
            .map(|e| e.netdevs.iter().filter_map(|n| ev.ifaces.iter().find(|i| i.name == *n)).cloned().collect())
            .unwrap_or_default();
        ports.push(Port {
            device: (*d).to_string(),
            port: p.port,
            pci: seen.and_then(|e| e.pci.clone()),
            link_layer,
            rate_gbps: rate_gbps(p.rate.as_deref()),
            netdevs,
            gpu: if ev.gpus == 0 { GpuDistance::Unknown } else { gpu(seen.and_then(|e| e.gpu)) },
        });
    }
    let masters: Vec<Iface> =
        ev.ifaces.iter().filter(|i| ev.ifaces.iter().any(|s| s.master.as_deref() == Some(&i.name))).cloned().collect();
    let inputs = rails::Inputs { ports: &ports, masters: &masters, coordinator: r.coordinator, selector: r.selector };
    let decision = rails::classify(&inputs);
    let (verdict, why) = match &decision.verdict {
        Verdict::Confident => ("confident", None),
        Verdict::Override => ("override", None),
        Verdict::Unmatched { selector } => {
            ("unmatched", Some(format!("--rails {selector} matches none of the {} usable ports", ports.len())))
        }
        Verdict::Disagreement { why } => ("disagreement", Some(why.clone())),
    };
    let ports = decision.ports.clone();
    Some((decision, RailsReport { verdict, why, ports, evidence: ev.clone() }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rails::Class;

    fn port(link_layer: &str) -> PortFacts {
        PortFacts {
            port: 1,
            state: Some("4: ACTIVE".into()),
            phys_state: Some("5: LinkUp".into()),
            link_layer: Some(link_layer.into()),
            rate: Some("200 Gb/sec (4X HDR)".into()),
            gid: None,
            nccl_pick: None,
            table: Vec::new(),
            table_len: 0,
            pkey: None,
            verbs: None,
            selftest: None,
            problems: Vec::new(),
        }
    }

    fn evidence(addr: Option<&str>) -> Evidence {
        use nw_observe::detect::rails::{IfAddr, Iface as Seen, PortEvidence};
        Evidence {
            ports: vec![PortEvidence {
                device: "mlx5_0".into(),
                port: 1,
                pci: Some("0000:1b:00.0".into()),
                netdevs: vec!["eth0".into()],
                gpu: Some(Relation::Pix),
            }],
            ifaces: vec![Seen {
                name: "eth0".into(),
                addrs: addr.map(|a| IfAddr { addr: a.parse().expect("ip"), prefix: 24 }).into_iter().collect(),
                master: None,
                default_route: false,
                coordinator_route: false,
            }],
            gpus: 1,
        }
    }

    #[test]
    fn without_any_address_of_the_ports_interfaces_nothing_is_weighed() {
        let p = port("Ethernet");
        let used = [("mlx5_0", &p)];
        let ev = evidence(None);
        let r = Rails { evidence: &ev, coordinator: None, selector: None };
        assert!(classify(&used, r).is_none(), "no address: no evidence, the plan as before");
        let ev = evidence(Some("10.0.0.5"));
        let r = Rails { evidence: &ev, coordinator: None, selector: None };
        let (_, report) = classify(&used, r).expect("weighed");
        assert_eq!(report.verdict, "confident");
        assert!(matches!(report.ports[0].class, Class::Rail { rule: rails::Rule::Placement, .. }));
        // A link layer the rule does not weigh: not applied.
        let iw = port("iWARP");
        assert!(classify(&[("mlx5_0", &iw)], r).is_none());
        assert!(classify(&[], r).is_none());
    }

    #[test]
    fn rates_read_as_sysfs_writes_them() {
        assert_eq!(rate_gbps(Some("400 Gb/sec (4X NDR)")), Some(400));
        assert_eq!(rate_gbps(Some("2.5 Gb/sec (1X SDR)")), Some(3));
        assert_eq!(rate_gbps(Some("fast")), None);
        assert_eq!(rate_gbps(None), None);
    }
}
