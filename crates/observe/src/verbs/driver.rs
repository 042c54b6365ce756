//! Which kernel driver backs an RDMA device, and whether this build links its provider: a device
//! libibverbs does not list is unreachable from this container (its fault) or served by a provider
//! this binary lacks (NCCL, loading the image's rdma-core, may still use it). Never opens a device.

use crate::detect::names;
use crate::detect::sysfs::Sysfs;
pub use crate::detect::userspace::provider_of_driver as provider_for;

/// The kernel driver behind `class/infiniband/<dev>`: the name of its `device/driver` link, or
/// `rdma_rxe` / `siw` for a software device; `None` where neither reads, or the name is outside
/// `[A-Za-z0-9_.:-]`.
pub fn driver(sysfs: &Sysfs, dev: &str) -> Option<String> {
    let base = format!("class/infiniband/{dev}");
    if let Ok(target) = std::fs::read_link(sysfs.path(&format!("{base}/device/driver"))) {
        return target.file_name()?.to_str().and_then(|n| names::device_id(n).ok()).map(str::to_owned);
    }
    // Software devices (rxe, siw) have no `device` link; the node type tells them apart.
    sysfs.attr(&format!("{base}/node_type")).ok().as_deref().and_then(software_driver).map(str::to_owned)
}

/// A software device's driver by its `node_type`: rxe is a channel adapter, siw an iWARP RNIC.
pub fn software_driver(node_type: &str) -> Option<&'static str> {
    match node_type.trim().split_once(':').map_or(node_type.trim(), |(n, _)| n) {
        "1" => Some("rdma_rxe"),
        "4" => Some("siw"),
        _ => None,
    }
}

/// Why a device of `driver` is missing from the device list of a libibverbs that has `linked`,
/// where no linked provider is known to serve it (for a "not checked" answer); `None`: one does,
/// so the container cannot reach the device (its uverbs node).
pub fn missing_provider(driver: Option<&str>, linked: &[&str]) -> Option<String> {
    let has = linked.join(", ");
    let Some(d) = driver else {
        return Some(format!(
            "libibverbs does not list it and its kernel driver cannot be read from sysfs, so whether this build has a provider for it is not known (the providers it has: {has})"
        ));
    };
    let known = match provider_for(d) {
        Some(p) if linked.contains(&p) => return None,
        Some(p) => format!("rdma-core's {p}"),
        None => "none is known for it".into(),
    };
    Some(format!("this build links no verbs provider for driver {d} ({known}; the providers it has: {has})"))
}

/// Fake sysfs trees of RDMA devices and their drivers, for this module's and `verify`'s tests.
#[cfg(test)]
pub(crate) mod tree {
    use super::Sysfs;
    use std::os::unix::fs::symlink;
    use std::path::{Path, PathBuf};

    /// A sysfs tree in a temporary directory, removed when dropped.
    pub(crate) struct Tree(PathBuf);

    impl Tree {
        pub fn new(tag: &str) -> Tree {
            let root = std::env::temp_dir().join(format!("nccl-wrap-driver-{tag}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&root);
            std::fs::create_dir_all(&root).expect("mkdir");
            Tree(root)
        }
        /// A hardware device: its `device` link to `func`, whose `driver` link names `driver`.
        pub(crate) fn hw(&self, dev: &str, func: &str, bus: &str, driver: &str) -> &Tree {
            let fdir = self.0.join("devices/pci0000:00").join(func);
            std::fs::create_dir_all(&fdir).expect("mkdir");
            let ddir = self.0.join("bus").join(bus).join("drivers").join(driver);
            std::fs::create_dir_all(&ddir).expect("mkdir");
            symlink(&ddir, fdir.join("driver")).expect("symlink");
            let cdir = self.0.join("class/infiniband").join(dev);
            std::fs::create_dir_all(&cdir).expect("mkdir");
            symlink(&fdir, cdir.join("device")).expect("symlink");
            self
        }
        pub(crate) fn soft(&self, dev: &str, node_type: &str) -> &Tree {
            let cdir = self.0.join("class/infiniband").join(dev);
            std::fs::create_dir_all(&cdir).expect("mkdir");
            std::fs::write(cdir.join("parent"), "eth0\n").expect("write");
            std::fs::write(cdir.join("node_type"), format!("{node_type}\n")).expect("write");
            self
        }
        pub(crate) fn sysfs(&self) -> Sysfs {
            Sysfs::new(self.path())
        }
        pub fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for Tree {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::tree::Tree;
    use super::*;

    #[test]
    fn drivers_are_read_from_the_device_link_and_software_parents() {
        let t = Tree::new("read");
        t.hw("mlx5_0", "0000:19:00.0", "pci", "mlx5_core")
            .hw("mlx5_2", "mlx5_core.sf.2", "auxiliary", "mlx5_core.sf")
            .hw("mlx4_0", "0000:02:00.0", "pci", "mlx4_core")
            .soft("rxe0", "1: CA")
            .soft("siw0", "4: RNIC")
            .soft("odd0", "9: something");
        std::fs::create_dir_all(t.path().join("class/infiniband/gone0")).expect("mkdir");
        // siw may have no `parent` file: its node type still names it.
        std::fs::create_dir_all(t.path().join("class/infiniband/siw1")).expect("mkdir");
        std::fs::write(t.path().join("class/infiniband/siw1/node_type"), "4: RNIC\n").expect("write");
        let s = t.sysfs();
        assert_eq!(driver(&s, "mlx5_0"), Some("mlx5_core".into()));
        assert_eq!(driver(&s, "mlx5_2"), Some("mlx5_core.sf".into()));
        assert_eq!(driver(&s, "mlx4_0"), Some("mlx4_core".into()));
        assert_eq!(driver(&s, "rxe0"), Some("rdma_rxe".into()));
        assert_eq!(driver(&s, "siw0"), Some("siw".into()));
        assert_eq!(driver(&s, "siw1"), Some("siw".into()));
        assert_eq!(driver(&s, "odd0"), None);
        assert_eq!(driver(&s, "gone0"), None);
        assert_eq!(driver(&s, "absent0"), None);
    }

    #[test]
    fn hostile_driver_link_names_are_unreadable_not_printed() {
        let t = Tree::new("hostile");
        t.hw("mlx5_0", "0000:19:00.0", "pci", "bad\u{1b}[31mname");
        t.hw("mlx5_1", "0000:1a:00.0", "pci", &"x".repeat(200));
        assert_eq!(driver(&t.sysfs(), "mlx5_0"), None);
        assert_eq!(driver(&t.sysfs(), "mlx5_1"), None);
    }

    #[test]
    fn providers_by_driver() {
        assert_eq!(provider_for("mlx5_core"), Some("mlx5"));
        assert_eq!(provider_for("mlx5_core.sf"), Some("mlx5"));
        assert_eq!(provider_for("bnxt_en"), Some("bnxt_re"));
        assert_eq!(provider_for("ice"), Some("irdma"));
        assert_eq!(provider_for("rdma_rxe"), Some("rxe"));
        assert_eq!(provider_for("mlx4_core"), Some("mlx4"));
        assert_eq!(provider_for("ionic"), None);
        assert_eq!(provider_for(""), None);
    }

    #[test]
    fn a_device_without_a_linked_provider_is_not_checked_and_says_what_the_build_has() {
        let linked = ["mlx5", "rxe"];
        assert_eq!(missing_provider(Some("mlx5_core"), &linked), None);
        assert_eq!(missing_provider(Some("rdma_rxe"), &linked), None);
        assert_eq!(
            missing_provider(Some("mlx4_core"), &linked),
            Some(
                "this build links no verbs provider for driver mlx4_core (rdma-core's mlx4; the providers it has: mlx5, rxe)"
                    .into()
            )
        );
        assert!(matches!(missing_provider(Some("ionic"), &linked),
            Some(r) if r.contains("driver ionic (none is known")));
        assert!(matches!(missing_provider(None, &linked),
            Some(r) if r.contains("cannot be read") && r.ends_with("(the providers it has: mlx5, rxe)")));
    }

    #[test]
    fn software_node_types() {
        assert_eq!(software_driver("1: CA"), Some("rdma_rxe"));
        assert_eq!(software_driver("4: RNIC\n"), Some("siw"));
        assert_eq!(software_driver("4"), Some("siw"));
        assert_eq!(software_driver(""), None);
        assert_eq!(software_driver("2: switch"), None);
    }
}
