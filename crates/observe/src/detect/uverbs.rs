//! Which RDMA devices this container can open: the `uverbsN` nodes in its `/dev/infiniband`, named through
//! `class/infiniband_verbs/uverbsN/ibdev` (libibverbs lists only those); where every node is there (a privileged
//! pod) they tell nothing, and say so. Listings and `ibdev` reads only; never opens a device node.

use std::collections::BTreeSet;
use std::io;
use std::path::{Path, PathBuf};

use crate::detect::file;
use crate::detect::names;
use crate::detect::sysfs::Sysfs;

/// More uverbs nodes than a node has devices; the bound on the listing of `/dev/infiniband`.
const MAX_NODES: usize = 4096;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Nodes {
    /// They tell nothing, and why (a privileged pod's `/dev`, no uverbs class in sysfs).
    Silent(String),
    /// The devices whose uverbs node is in the container (`dir`): no other can be opened.
    Tell { openable: BTreeSet<String>, dir: PathBuf },
}

/// Reads `<dev_root>/infiniband` against `class/infiniband_verbs`.
pub fn read(sysfs: &Sysfs, dev_root: &Path) -> Nodes {
    // In listing order: nothing here needs them sorted.
    let class = sysfs.path("class/infiniband_verbs");
    let listed: Vec<String> = file::names(&class, MAX_NODES)
        .unwrap_or_default()
        .into_iter()
        .filter(|n| n.starts_with("uverbs") && names::device_name(n).is_ok())
        .collect();
    if listed.is_empty() {
        return Nodes::Silent(format!("{} lists no uverbs device (ib_uverbs not loaded?)", class.display()));
    }
    let dir = dev_root.join("infiniband");
    let present: BTreeSet<String> = match file::names(&dir, MAX_NODES) {
        Ok(names) => names.into_iter().filter(|n| n.starts_with("uverbs")).collect(),
        // No directory: no RDMA character device was given to the container at all.
        Err(e) if e.kind() == io::ErrorKind::NotFound => BTreeSet::new(),
        Err(e) => return Nodes::Silent(format!("cannot list {}: {e}", dir.display())),
    };
    if listed.iter().all(|n| present.contains(n)) {
        return Nodes::Silent(format!(
            "{} holds every uverbs node the node has (a privileged pod's /dev): it tells nothing of which devices are this pod's",
            dir.display()
        ));
    }
    let openable = listed
        .iter()
        .filter(|n| present.contains(*n))
        .filter_map(|n| sysfs.attr(&format!("class/infiniband_verbs/{n}/ibdev")).ok())
        .filter(|d| names::device_name(d).is_ok())
        .collect();
    Nodes::Tell { openable, dir }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/nodes").join(name)
    }

    impl Nodes {
        fn openable(&self, device: &str) -> Option<bool> {
            match self {
                Nodes::Silent(_) => None,
                Nodes::Tell { openable, .. } => Some(openable.contains(device)),
            }
        }
    }

    fn on(name: &str) -> Nodes {
        read(&Sysfs::new(node(name).join("sys")), &node(name).join("dev"))
    }

    #[test]
    fn the_nodes_in_the_container_name_the_devices_it_can_open() {
        let n = on("dranet-gb200-shared");
        assert_eq!((n.openable("mlx5_2"), n.openable("mlx5_3")), (Some(true), Some(true)));
        assert_eq!((n.openable("mlx5_0"), n.openable("mlx5_1")), (Some(false), Some(false)));
        // Renamed in the pod: the node's ibdev is the name the pod sees.
        let n = on("renamed-pod-device");
        assert_eq!((n.openable("rdma_net1"), n.openable("mlx5_7")), (Some(true), Some(false)));
    }

    #[test]
    fn a_dev_with_every_node_tells_nothing() {
        let n = on("h200-ib");
        assert!(matches!(&n, Nodes::Silent(why) if why.contains("privileged")), "{n:?}");
        assert_eq!(n.openable("mlx5_0"), None);
    }

    #[test]
    fn no_infiniband_directory_means_no_device_can_be_opened() {
        let n = read(&Sysfs::new(node("two-hcas-one-uverbs").join("sys")), Path::new("/nonexistent/dev"));
        assert_eq!((n.openable("erdma_0"), n.openable("erdma_1")), (Some(false), Some(false)));
        // No uverbs class: nothing to tell by.
        let n = read(&Sysfs::new("/nonexistent/sys"), &node("two-hcas-one-uverbs").join("dev"));
        assert!(matches!(n, Nodes::Silent(_)), "{n:?}");
    }
}
