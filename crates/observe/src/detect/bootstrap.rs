//! Reads for NCCL's bootstrap interface: each device's net devices (rails) and the coordinator's
//! name, resolved within [`RESOLVE_WAIT`]. `nw_decide::bootstrap` decides from them.

use std::net::IpAddr;
use std::sync::mpsc;
use std::time::Duration;

use crate::detect::devices::Device;
use crate::detect::port::PortFacts;
use crate::detect::sysfs::Sysfs;

/// How long a coordinator's name may take to resolve at start.
pub const RESOLVE_WAIT: Duration = Duration::from_millis(1000);

pub enum Lookup {
    Addrs(Vec<IpAddr>),
    Failed(String),
    TimedOut,
}

/// Resolves `name` on a thread of its own, waiting at most `wait` (a late lookup is left unread).
pub fn resolve(name: &str, wait: Duration) -> Lookup {
    use std::net::ToSocketAddrs;
    let (tx, rx) = mpsc::channel();
    let host = name.to_string();
    let spawned = std::thread::Builder::new().name("resolve".into()).spawn(move || {
        let r = (host.as_str(), 0).to_socket_addrs().map(|a| a.map(|s| s.ip()).collect::<Vec<_>>());
        let _ = tx.send(r);
    });
    if let Err(e) = spawned {
        return Lookup::Failed(format!("cannot start the lookup: {e}"));
    }
    match rx.recv_timeout(wait) {
        Ok(Ok(a)) => Lookup::Addrs(a),
        Ok(Err(e)) => Lookup::Failed(e.to_string()),
        Err(_) => Lookup::TimedOut,
    }
}

/// A device's net devices (rails, never the bootstrap's): those its ports named, else what
/// `device/net` lists.
pub fn rails(sysfs: &Sysfs, d: &Device) -> Vec<String> {
    let ndev = |p: &PortFacts| {
        p.gid.as_ref().and_then(|g| g.ndev.clone()).or_else(|| p.pkey.as_ref().map(|k| k.netdev.clone()))
    };
    let named: Vec<String> = d.ports.iter().filter_map(ndev).collect();
    if !d.ports.is_empty() && named.len() == d.ports.len() {
        return named;
    }
    let mut problems = Vec::new();
    sysfs.list(&format!("class/infiniband/{}/device/net", d.name), &mut problems)
}

/// Which of `names` sit on one of `functions`: the other net devices of a rail's function (such as
/// a VLAN child's parent).
pub fn on_functions<'a>(sysfs: &Sysfs, names: impl IntoIterator<Item = &'a str>, functions: &[&str]) -> Vec<String> {
    if functions.is_empty() {
        return Vec::new();
    }
    names
        .into_iter()
        .filter(|n| sysfs.netdev_function(n).is_some_and(|f| functions.contains(&f.as_str())))
        .map(String::from)
        .collect()
}

/// fe80::/10 or 169.254.0.0/16: an address that reaches only its own link.
pub fn is_link_local(a: &IpAddr) -> bool {
    match a {
        IpAddr::V4(v4) => v4.is_link_local(),
        IpAddr::V6(v6) => v6.segments()[0] & 0xffc0 == 0xfe80,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// mlx5_6 of the h100 node (a VF whose netdev is net1, on 0000:3c:00.2), as detection reads it.
    fn h100_vf() -> (Sysfs, Device) {
        let sysfs = Sysfs::new(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/nodes/h100-roce-sriov/sys"),
        );
        let mut problems = Vec::new();
        let ports = sysfs.ports("mlx5_6", &crate::detect::gids::rule::DEFAULT, &mut problems);
        let (attachment, _) = sysfs.attachment_of(&sysfs.open_device("mlx5_6").expect("mlx5_6"));
        let d = Device {
            name: "mlx5_6".into(),
            origin: "test".into(),
            attachment,
            ports,
            problems: Vec::new(),
            named_as: None,
            driver: None,
            function: None,
        };
        (sysfs, d)
    }

    #[test]
    fn a_devices_rails_are_its_ports_net_devices_and_device_net_only_where_a_port_named_none() {
        let (sysfs, mut d) = h100_vf();
        assert_eq!(rails(&sysfs, &d), vec!["net1".to_string()]);
        // Named by the port: the listing is not what answered (a name it does not hold).
        d.ports[0].gid.as_mut().expect("pick").ndev = Some("net1.7".into());
        assert_eq!(rails(&sysfs, &d), vec!["net1.7".to_string()]);
        // A port without a net device: device/net is listed.
        d.ports[0].gid = None;
        assert_eq!(rails(&sysfs, &d), vec!["net1".to_string()]);
    }

    #[test]
    fn interfaces_on_a_rails_function_are_rails() {
        let (sysfs, d) = h100_vf();
        let f = crate::detect::devices::function(&d.attachment).expect("a VF");
        assert_eq!(on_functions(&sysfs, ["eth0", "net1", "net2", "no/such"], &[f]), vec!["net1".to_string()]);
        assert!(on_functions(&sysfs, ["net1"], &[]).is_empty());
    }
}
