//! pcie-link: each chosen NIC's and GPU's PCIe link as trained against what both ends could do
//! (a link trained down halves the job's speed); one check per device, a VF's read at its PF.
//! Warns, never fails; a value that does not parse is no check, not a guess.

use super::*;

/// One end's link: speed in GT/s and width in lanes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Link {
    pub gts: f64,
    pub width: u32,
}

/// `32.0 GT/s PCIe` -> 32.0; `2.5 GT/s` -> 2.5; `Unknown` or garbage -> None.
pub(super) fn speed(text: &str) -> Option<f64> {
    let n: f64 = text.split_whitespace().next()?.parse().ok()?;
    (n.is_finite() && n > 0.0 && n <= 1024.0).then_some(n)
}

/// `16` -> 16; `0`, `255` (unknown) or garbage -> None.
pub(super) fn width(text: &str) -> Option<u32> {
    let n: u32 = text.trim().parse().ok()?;
    (1..=64).contains(&n).then_some(n)
}

fn read(sysfs: &Sysfs, pci: &str) -> Option<(Link, Link, String)> {
    let get = |dir: &str| -> Option<(Link, Link)> {
        let a = |f: &str| sysfs.attr(&format!("{dir}/{f}")).ok();
        let cur = Link { gts: speed(&a("current_link_speed")?)?, width: width(&a("current_link_width")?)? };
        let max = Link { gts: speed(&a("max_link_speed")?)?, width: width(&a("max_link_width")?)? };
        Some((cur, max))
    };
    let dir = format!("bus/pci/devices/{pci}");
    if let Some((c, m)) = get(&dir) {
        return Some((c, m, pci.to_string()));
    }
    // A VF: its PF's link.
    let pf = std::fs::read_link(sysfs.path(&format!("{dir}/physfn"))).ok()?;
    let pf = pf.file_name()?.to_str()?.to_string();
    looks_like_pci(&pf).then_some(())?;
    get(&format!("bus/pci/devices/{pf}")).map(|(c, m)| (c, m, pf))
}

/// The check of one device's link; `None` when its link files are absent or say `Unknown` (a
/// virtual function without a PF here, a paravirtual device): nothing to judge, nothing said.
pub(super) fn check_one(sysfs: &Sysfs, what: &str, device: &str, pci: &str) -> Option<Check> {
    let (cur, max, at) = read(sysfs, pci)?;
    let name = if device == at { format!("{what} {device}") } else { format!("{what} {device} ({at})") };
    if cur.gts >= max.gts && cur.width >= max.width {
        let summary = format!("{name}: PCIe link at its maximum, {} GT/s x{}", cur.gts, cur.width);
        return Some(Check::new("pcie-link", Status::Pass, summary).ev("device", device).ev("pci", pci));
    }
    let (Link { gts, width }, Link { gts: max_gts, width: max_width }) = (cur, max);
    let share = (gts * f64::from(width)) / (max_gts * f64::from(max_width));
    let summary = format!(
        "{name}: PCIe link trained down to {gts} GT/s x{width} (it can do {max_gts} GT/s x{max_width}): about {:.0} % of its bandwidth",
        share * 100.0
    );
    Some(Check::new("pcie-link", Status::Warn, summary).ev("device", device).ev("pci", pci).hint(
        "reseat the card or its riser, check the slot's BIOS setting (link speed, bifurcation), and compare with `lspci -vv` (LnkSta vs LnkCap)",
    ))
}

/// One check per chosen NIC and per GPU.
pub(super) fn checks(inp: &Inputs, gpus: &[Place]) -> Vec<Check> {
    let nics = gpu::chosen_nics(inp);
    let mut out: Vec<Check> = nics.iter().filter_map(|(n, place)| check_one(inp.sysfs, "NIC", n, &place.pci)).collect();
    out.extend(gpus.iter().filter_map(|g| check_one(inp.sysfs, "GPU", &g.pci, &g.pci)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_sysfs_prints_is_read_and_unknowns_are_not_numbers() {
        assert_eq!(speed("32.0 GT/s PCIe"), Some(32.0));
        assert_eq!(speed("2.5 GT/s"), Some(2.5));
        assert_eq!(speed("Unknown"), None);
        assert_eq!(speed("NaN GT/s"), None);
        assert_eq!(speed("1e400 GT/s"), None);
        assert_eq!(width("16"), Some(16));
        assert_eq!(width("255"), None);
        assert_eq!(width("0"), None);
        assert_eq!(width("x16"), None);
    }
}
