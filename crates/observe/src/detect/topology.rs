//! GPU and NIC placement on the PCIe tree, as `nvidia-smi topo -m` sees it (PIX, PXB, PHB, NODE,
//! SYS), from `bus/pci/devices` links and attributes through [`Sysfs`]. Reads only; never follows a
//! name it has not validated.

use serde::Serialize;

use crate::detect::names;
use crate::detect::sysfs::{looks_like_pci, Sysfs};

const NVIDIA: &str = "0x10de";

/// How far apart two PCI functions are, nearest first (the order NCCL ranks paths in).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Relation {
    /// Through at most one PCIe bridge or switch.
    Pix,
    /// Through several bridges, without crossing the host bridge.
    Pxb,
    /// Through the PCIe host bridge (same root complex).
    Phb,
    /// Between host bridges of one NUMA node.
    Node,
    /// Across the interconnect between NUMA nodes.
    Sys,
}

impl Relation {
    pub fn name(self) -> &'static str {
        match self {
            Relation::Pix => "PIX",
            Relation::Pxb => "PXB",
            Relation::Phb => "PHB",
            Relation::Node => "NODE",
            Relation::Sys => "SYS",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Place {
    pub pci: String,
    /// The host bridge component (`pci0000:15`), if the link could be read.
    pub root: Option<String>,
    /// PCI ancestors, root port first, the function itself excluded.
    pub bridges: Vec<String>,
    /// `None` when sysfs says -1 or cannot be read.
    pub numa: Option<u32>,
}

impl Place {
    /// The nearest upstream bridge, as `nvidia-smi topo` would name the switch.
    pub fn bridge(&self) -> Option<&str> {
        self.bridges.last().map(String::as_str)
    }
}

/// Where `pci` sits: one readlink of `bus/pci/devices/<pci>` and one read of `numa_node`.
pub fn place(sysfs: &Sysfs, pci: &str) -> Option<Place> {
    let pci = names::device_id(pci).ok().filter(|p| looks_like_pci(p))?;
    let link = std::fs::read_link(sysfs.path(&format!("bus/pci/devices/{pci}"))).ok()?;
    let parts: Vec<String> = link.iter().filter_map(|c| c.to_str()).map(String::from).collect();
    let root = parts.iter().find(|c| c.starts_with("pci") && c.len() > 3 && c.contains(':')).cloned();
    let mut bridges: Vec<String> = parts.into_iter().filter(|c| looks_like_pci(c)).collect();
    if bridges.last().map(String::as_str) == Some(pci) {
        bridges.pop();
    }
    let numa = sysfs.attr(&format!("bus/pci/devices/{pci}/numa_node")).ok().and_then(|n| n.parse::<u32>().ok());
    Some(Place { pci: pci.to_string(), root, bridges, numa })
}

/// The relation between two placed functions. With a common ancestor: PIX where both ends are at
/// most two levels below a switch port (one below a root port), else PXB; without: PHB under one
/// host bridge, SYS across known NUMA nodes, else NODE.
pub fn relation(a: &Place, b: &Place) -> Relation {
    let common = a.bridges.iter().zip(&b.bridges).take_while(|(x, y)| x == y).count();
    if common > 0 {
        let (da, db) = (a.bridges.len() - common + 1, b.bridges.len() - common + 1);
        let lca_is_root_port = common == 1;
        let limit = if lca_is_root_port { 1 } else { 2 };
        return if da <= limit && db <= limit { Relation::Pix } else { Relation::Pxb };
    }
    if a.root.is_some() && a.root == b.root {
        return Relation::Phb;
    }
    match (a.numa, b.numa) {
        (Some(x), Some(y)) if x != y => Relation::Sys,
        _ => Relation::Node,
    }
}

/// NVIDIA GPUs (vendor 0x10de, class 0x0300xx or 0x0302xx) in `bus/pci/devices`, in address order.
pub fn gpus(sysfs: &Sysfs) -> Vec<Place> {
    let mut problems = Vec::new();
    let mut out: Vec<Place> = sysfs
        .list("bus/pci/devices", &mut problems)
        .into_iter()
        .filter(|addr| looks_like_pci(addr))
        .filter(|addr| {
            let class = sysfs.attr(&format!("bus/pci/devices/{addr}/class")).unwrap_or_default();
            (class.starts_with("0x0302") || class.starts_with("0x0300"))
                && sysfs.attr(&format!("bus/pci/devices/{addr}/vendor")).ok().as_deref() == Some(NVIDIA)
        })
        .filter_map(|addr| place(sysfs, &addr))
        .collect();
    out.sort_unstable_by(|a, b| a.pci.cmp(&b.pci));
    out
}

/// The nearest of `nics` (name, place) to `gpu`; ties go to the first in order.
pub fn nearest<'a>(gpu: &Place, nics: &'a [(String, Place)]) -> Option<(&'a str, Relation)> {
    // `min_by_key` keeps the first of equal minima.
    nics.iter().map(|(n, p)| (n.as_str(), relation(gpu, p))).min_by_key(|(_, r)| *r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(root: &str, bridges: &[&str], pci: &str, numa: Option<u32>) -> Place {
        Place {
            pci: pci.into(),
            root: Some(root.into()),
            bridges: bridges.iter().map(|s| s.to_string()).collect(),
            numa,
        }
    }

    // h100-roce-sriov: root port 15:01.0 -> switch up 16:00.0 -> down 17:0N.0 -> function.
    const SW: [&str; 2] = ["0000:15:01.0", "0000:16:00.0"];

    #[test]
    fn same_switch_is_pix() {
        let gpu = p("pci0000:15", &[SW[0], SW[1], "0000:17:00.0"], "0000:18:00.0", Some(0));
        let nic = p("pci0000:15", &[SW[0], SW[1], "0000:17:02.0"], "0000:1a:00.2", Some(0));
        assert_eq!(relation(&gpu, &nic), Relation::Pix);
    }

    #[test]
    fn switch_behind_switch_is_pxb() {
        let gpu =
            p("pci0000:15", &[SW[0], SW[1], "0000:17:00.0", "0000:18:00.0", "0000:19:00.0"], "0000:1a:00.0", None);
        let nic = p("pci0000:15", &[SW[0], SW[1], "0000:17:02.0"], "0000:1b:00.0", None);
        assert_eq!(relation(&gpu, &nic), Relation::Pxb);
    }

    #[test]
    fn under_one_root_port_siblings_are_pix_but_a_switch_below_it_is_pxb() {
        let nic = p("pci0000:17", &["0000:17:01.0"], "0000:1a:00.2", Some(0));
        let nic2 = p("pci0000:17", &["0000:17:01.0"], "0000:1a:00.3", Some(0));
        assert_eq!(relation(&nic, &nic2), Relation::Pix);
        let gpu = p("pci0000:17", &["0000:17:01.0", "0000:18:00.0", "0000:19:00.0"], "0000:1b:00.0", Some(0));
        assert_eq!(relation(&gpu, &nic), Relation::Pxb);
    }

    #[test]
    fn host_bridge_numa_node_and_system() {
        let a = p("pci0000:15", &["0000:15:01.0"], "0000:16:00.0", Some(0));
        let b = p("pci0000:15", &["0000:15:02.0"], "0000:17:00.0", Some(0));
        assert_eq!(relation(&a, &b), Relation::Phb);
        let c = p("pci0000:37", &["0000:37:01.0"], "0000:38:00.0", Some(0));
        assert_eq!(relation(&a, &c), Relation::Node);
        let d = p("pci0000:97", &["0000:97:01.0"], "0000:98:00.0", Some(1));
        assert_eq!(relation(&a, &d), Relation::Sys);
        let e = p("pci0000:97", &["0000:97:01.0"], "0000:98:00.0", None);
        assert_eq!(relation(&a, &e), Relation::Node);
    }

    #[test]
    fn nearest_prefers_the_closer_then_the_first() {
        let gpu = p("pci0000:15", &[SW[0], SW[1], "0000:17:00.0"], "0000:18:00.0", Some(0));
        let far = p("pci0000:97", &["0000:97:01.0"], "0000:98:00.0", Some(1));
        let near = p("pci0000:15", &[SW[0], SW[1], "0000:17:02.0"], "0000:1a:00.2", Some(0));
        let nics =
            vec![("mlx5_9".to_string(), far), ("mlx5_2".to_string(), near.clone()), ("mlx5_3".to_string(), near)];
        assert_eq!(nearest(&gpu, &nics), Some(("mlx5_2", Relation::Pix)));
    }
}
