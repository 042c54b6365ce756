//! iommu: is DMA from each device translated (the known cause of `IBV_WC_LOC_PROT_ERR`).

use super::*;

pub(super) fn checks(inp: &Inputs) -> Vec<Check> {
    // `iommu=pt` and neighbours from the kernel command line.
    let cmd_path = inp.proc_root.join("cmdline");
    let cmd_text = read_attr(&cmd_path).ok();
    let tokens: Vec<&str> =
        cmd_text.as_deref().unwrap_or("").split_whitespace().filter(|t| t.contains("iommu")).collect();
    let pt = tokens.iter().any(|t| ["iommu=pt", "iommu.passthrough=1", "iommu.passthrough=on"].contains(t));
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
        let link = std::fs::read_link(inp.sysfs.path(&group_rel)).ok();
        let group = link.and_then(|l| l.file_name().and_then(|n| n.to_str()).map(String::from));
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
        let c = Check::new("iommu", status, summary)
            .hint_opt(hint)
            .ev("device", dev.name.as_str())
            .ev("pci", pci.as_str())
            .ev("group", json!(group))
            .ev("type", file(&type_path, ty.as_deref()));
        out.push(c.ev("cmdline", cmd.clone()));
    }
    if out.is_empty() {
        let summary = "no RDMA device of this pod: no IOMMU group to check";
        out.push(Check::new("iommu", Status::Warn, summary).ev("cmdline", cmd));
    }
    out
}
