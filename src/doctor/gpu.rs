//! gpudirect and topology: can the NICs reach GPU memory directly, and how near each GPU is its nearest chosen NIC.

use super::*;

pub(super) fn gpudirect(inp: &Inputs, gpus: &[Place]) -> Check {
    let peermem =
        ["nvidia_peermem", "nv_peer_mem"].into_iter().find(|m| inp.sysfs.path(&format!("module/{m}")).exists());
    let drv_path = inp.proc_root.join("driver/nvidia/version");
    let driver = read_attr(&drv_path).ok();
    let open_modules = driver.as_deref().is_some_and(|d| d.contains("Open Kernel Module"));
    let os_path = inp.proc_root.join("sys/kernel/osrelease");
    let kernel = read_attr(&os_path).ok();
    let kernel_ok = kernel.as_deref().and_then(kernel_version).is_some_and(|v| v >= (5, 12));
    let dmabuf = open_modules && kernel_ok;
    let c = if gpus.is_empty() {
        let summary =
            "no NVIDIA GPU visible in sysfs (vendor 0x10de, class 0x0300xx/0x0302xx): GPUDirect RDMA not checked";
        Check::new("gpudirect", Status::Warn, summary)
    } else if let Some(m) = peermem {
        let summary = format!("{m} is loaded: NICs can DMA to and from the {} GPU(s)' memory", gpus.len());
        Check::new("gpudirect", Status::Pass, summary)
    } else if dmabuf {
        let summary = format!("nvidia_peermem is not loaded, but DMA-BUF is possible (open kernel modules, kernel {}): NCCL 2.19+ uses it", kernel.as_deref().unwrap_or("?"));
        Check::new("gpudirect", Status::Pass, summary)
    } else {
        let why = match (&driver, open_modules, kernel_ok) {
            (None, _, _) => format!("the driver version ({}) cannot be read", drv_path.display()),
            (Some(_), false, _) => "the driver is not the open kernel module flavour".to_string(),
            (Some(_), true, false) => "the kernel is older than 5.12".to_string(),
            _ => String::new(),
        };
        let summary = format!("nvidia_peermem is not loaded and DMA-BUF cannot be confirmed ({why}): NCCL will stage RDMA traffic through host memory");
        Check::new("gpudirect", Status::Warn, summary)
        .hint("load nvidia_peermem on the host (`modprobe nvidia-peermem`; GPU Operator: driver.rdma.enabled=true), or use the open kernel modules (driver 515+, kernel 5.12+) for DMA-BUF")
    };
    c.ev("gpus", json!(gpus.iter().map(|g| &g.pci).collect::<Vec<_>>()))
        .ev("peermem_module", json!(peermem))
        .ev("module_dir", inp.sysfs.path("module/nvidia_peermem").display().to_string())
        .ev("driver_version", file(&drv_path, driver.as_deref()))
        .ev("kernel", file(&os_path, kernel.as_deref()))
        .ev("dmabuf_possible", dmabuf)
}

pub(super) fn kernel_version(text: &str) -> Option<(u32, u32)> {
    let mut it = text.split(|c: char| !c.is_ascii_digit());
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

/// The pod's NICs that carry traffic (falling back to all the pod's devices), placed.
pub(super) fn chosen_nics(inp: &Inputs) -> Vec<(String, Place)> {
    let all = &inp.plan.detection.devices;
    let used: Vec<&Device> =
        all.iter().filter(|d| inp.plan.decisions.iter().any(|x| x.used && x.device == d.name)).collect();
    let devs = if used.is_empty() { all.iter().collect() } else { used };
    let place =
        |d: &&Device| Some((d.name.clone(), topology::place(inp.sysfs, &pci_function(inp.sysfs, &d.attachment)?)?));
    devs.iter().filter_map(place).collect()
}

pub(super) fn placement(inp: &Inputs, gpus: &[Place]) -> Check {
    let nics = chosen_nics(inp);
    let nic_rows: Vec<Value> =
        nics.iter().map(|(n, p)| json!({"name": n, "pci": p.pci, "numa": p.numa, "bridge": p.bridge()})).collect();
    if gpus.is_empty() {
        return Check::new("topology", Status::Warn, "no NVIDIA GPU visible in sysfs: GPU/NIC placement not checked")
            .ev("pci_devices", inp.sysfs.path("bus/pci/devices").display().to_string())
            .ev("nics", nic_rows);
    }
    if nics.is_empty() {
        let summary = format!("{} GPU(s), but no chosen NIC has a PCI function to place", gpus.len());
        return Check::new("topology", Status::Warn, summary);
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
                let numa = g.numa.map_or("-".to_string(), |n| n.to_string());
                far.push(format!("{} (NUMA {numa}) -> {n} {}", g.pci, r.name()));
            }
        }
        rows.push(json!({
            "pci": g.pci, "numa": g.numa, "bridge": g.bridge(),
            "nearest": near.map(|(n, _)| n), "relation": near.map(|(_, r)| r), "to": to,
        }));
    }
    let c = if far.is_empty() {
        let summary = format!(
            "each of {} GPU(s) has a chosen NIC at {} or nearer: NCCL uses GPUDirect RDMA for it by default",
            gpus.len(),
            worst.name()
        );
        Check::new("topology", Status::Pass, summary)
    } else {
        let summary = format!(
            "{} of {} GPU(s) have no chosen NIC behind a shared PCIe switch ({}): NCCL does not use GPUDirect RDMA past PXB by default (NCCL_NET_GDR_LEVEL) and stages through host memory{}",
            far.len(),
            gpus.len(),
            far.join(", "),
            if worst == Relation::Sys { ", across the CPU interconnect" } else { "" }
        );
        Check::new("topology", Status::Warn, summary)
        .hint("request VFs of the PFs that share the GPUs' PCIe switches, or align GPUs and NICs on one NUMA node (kubelet Topology Manager policy single-numa-node or restricted)")
    };
    c.ev("gpus", rows).ev("nics", nic_rows)
}
