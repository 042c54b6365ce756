//! The sysfs fallback's first question: which visible RDMA devices this namespace's net devices
//! make the pod's, asked from the pod's side so the cost follows its interfaces. A claimed device
//! keeps the directory and attachment that claimed it.

use crate::detect::sysfs::{Attachment, DeviceDir, Identity, NetDevs, Sysfs};

/// The visible devices this namespace's net devices make the pod's, and how: the RDMA devices on
/// each net device's function, and the software devices bound to one of them.
pub(crate) fn claimed(sysfs: &Sysfs, visible: &[String], netdevs: &NetDevs, problems: &mut Vec<String>) -> Vec<Claim> {
    let mut errs = Vec::new();
    let mut out: Vec<Claim> = Vec::new();
    let mut candidates: Vec<String> =
        netdevs.values().flatten().flat_map(|func| sysfs.rdma_devices_of(func, &mut errs)).collect();
    candidates.extend(sysfs.list("devices/virtual/infiniband", &mut errs));
    for dev in candidates {
        if !visible.contains(&dev) || out.iter().any(|c| c.name == dev) {
            continue;
        }
        // A device that cannot be looked up has no attachment to claim it by.
        let Ok(dir) = sysfs.open_device(&dev) else { continue };
        let attachment = sysfs.attachment_of(&dir);
        let Some(how) = owning_netdev(sysfs, &dev, &attachment, netdevs, problems) else { continue };
        out.push(Claim { name: dev, how, dir, attachment });
    }
    problems.extend(errs.iter().map(ToString::to_string));
    out
}

/// A device the pod's net devices claim, how, and its directory and attachment as read.
pub(crate) struct Claim {
    pub(crate) name: String,
    pub(crate) how: String,
    pub(crate) dir: DeviceDir,
    pub(crate) attachment: (Attachment, Option<String>),
}

/// Which net device of this namespace makes `dev` the pod's, and how that was told.
fn owning_netdev(
    sysfs: &Sysfs,
    dev: &str,
    attachment: &(Attachment, Option<String>),
    netdevs: &NetDevs,
    problems: &mut Vec<String>,
) -> Option<String> {
    match attachment {
        (Attachment::Software { parent }, _) if netdevs.contains_key(parent) => {
            match sysfs.software_identity(dev, parent) {
                Identity::Same => Some(format!("its parent net device {parent} is in this namespace, same MAC")),
                Identity::Different { mac, id } => {
                    log::debug!("{dev}: parent {parent} is another namespace's {parent}: identifier {id} is not from this {parent}'s MAC {mac}");
                    None
                }
                Identity::Unknown(why) => {
                    problems.push(format!(
                        "cannot tell whether {dev} is this pod's: its parent is named {parent}, as a net device here, but {why}; using it on the name alone (another pod's rail may have the same name)"
                    ));
                    Some(format!("a net device named like its parent, {parent}, is in this namespace"))
                }
            }
        }
        (Attachment::Software { .. }, _) => None,
        (_, Some(func)) => netdevs.iter().find(|(_, f)| f.as_ref() == Some(func)).map(|(n, _)| {
            match sysfs.attr(&format!("class/net/{n}/pkey")) {
                // IPoIB: the pod's child interface of a shared InfiniBand device, or its VF's ib0.
                Ok(pkey) if sysfs.attr(&format!("class/net/{n}/parent")).is_ok() => {
                    format!("shared device, via IPoIB child {n}, pkey {pkey}")
                }
                _ => format!("net device {n} is in this namespace"),
            }
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h100() -> Sysfs {
        Sysfs::new(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/nodes/h100-roce-sriov/sys"))
    }

    #[test]
    fn the_pods_vfs_are_claimed_by_their_net_devices_with_what_claimed_them() {
        let sysfs = h100();
        let mut errs = Vec::new();
        let visible = sysfs.rdma_devices(&mut errs);
        let netdevs = sysfs.netdevs(&mut errs);
        let mut problems = Vec::new();
        let claims = claimed(&sysfs, &visible, &netdevs, &mut problems);
        assert!(errs.is_empty() && problems.is_empty(), "{errs:?} {problems:?}");
        let names: Vec<&str> = claims.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["mlx5_6", "mlx5_7", "mlx5_10", "mlx5_11"]);
        // What claimed a device is what its reads go on from: its directory and its attachment,
        // the same as a fresh look-up gives.
        for c in &claims {
            assert_eq!(c.dir.name, c.name);
            assert_eq!(c.attachment, sysfs.attachment_of(&sysfs.open_device(&c.name).expect("device")));
            assert!(matches!(c.attachment.0, Attachment::Vf { .. }), "{:?}", c.attachment);
        }
        assert_eq!(claims[0].how, "net device net1 is in this namespace");
    }

    #[test]
    fn devices_no_net_device_here_sits_on_are_not_claimed() {
        let sysfs = h100();
        let mut errs = Vec::new();
        let visible = sysfs.rdma_devices(&mut errs);
        let only_net1: NetDevs =
            sysfs.netdevs(&mut errs).into_iter().filter(|(n, _)| n == "net1" || n == "eth0").collect();
        let claims = claimed(&sysfs, &visible, &only_net1, &mut Vec::new());
        assert_eq!(claims.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(), ["mlx5_6"]);
        // Nothing visible, nothing claimed, whatever the net devices.
        assert!(claimed(&sysfs, &[], &sysfs.netdevs(&mut errs), &mut Vec::new()).is_empty());
    }
}
