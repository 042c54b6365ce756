//! Whether rail X (its GID's net device) has an IPv4 route to the peer, over this namespace's
//! main table: evidence for a failed pair (RoCE v2 is routed like IP), never a verdict alone.

use std::net::{IpAddr, Ipv4Addr};

pub use nw_observe::detect::route::Route;

/// What the routes say about reaching `peer` from `netdev`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reach {
    /// The longest matching route through `netdev`.
    Via(Route),
    /// No route through `netdev` covers the peer; the best one overall uses another device.
    NoRoute { elsewhere: Option<Route> },
}

fn best<'a>(routes: impl Iterator<Item = &'a Route>, peer: Ipv4Addr) -> Option<&'a Route> {
    routes.filter(|r| r.holds(&IpAddr::V4(peer))).max_by_key(|r| r.prefix)
}

pub(crate) fn reach(routes: &[Route], netdev: &str, peer: Ipv4Addr) -> Reach {
    match best(routes.iter().filter(|r| r.ifname == netdev), peer) {
        Some(r) => Reach::Via(r.clone()),
        None => Reach::NoRoute { elsewhere: best(routes.iter(), peer).cloned() },
    }
}

/// The IPv4 address of an IPv4-mapped GID (`::ffff:a.b.c.d`), as RoCE v2 over IPv4 uses.
pub(crate) fn gid_ipv4(gid: &[u8; 16]) -> Option<Ipv4Addr> {
    (gid[..10] == [0; 10] && gid[10..12] == [0xff, 0xff]).then(|| Ipv4Addr::new(gid[12], gid[13], gid[14], gid[15]))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    pub(crate) use nw_observe::detect::route::parse_v4 as parse;

    /// A pod with the pod network on eth0 (default route) and four rails, each on its own /24,
    /// as `cat /proc/net/route` shows it on x86_64; plus a rejected route and a down one.
    pub(crate) const POD_ROUTES: &str = "\
Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT
eth0\t00000000\t0100800A\t0003\t0\t0\t0\t00000000\t0\t0\t0
eth0\t0000800A\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0
net1\t006A000A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0
net2\t006B000A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0
net3\t00BE000A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0
net4\t00BF000A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0
net4\t0000000B\t00000000\t0201\t0\t0\t0\t000000FF\t0\t0\t0
net3\t0000000C\t00000000\t0000\t0\t0\t0\t000000FF\t0\t0\t0
garbage line
";

    #[test]
    fn parses_the_main_table_as_the_kernel_prints_it() {
        let r = parse(POD_ROUTES);
        assert_eq!(r.len(), 6, "{r:?}");
        assert_eq!(r[0].describe(), "default via 10.128.0.1 dev eth0");
        assert_eq!(r[1].describe(), "10.128.0.0/16 dev eth0");
        assert_eq!(r[2].describe(), "10.0.106.0/24 dev net1");
    }

    #[test]
    fn a_rail_reaches_its_own_subnet_only() {
        let r = parse(POD_ROUTES);
        let peer = Ipv4Addr::new(10, 0, 106, 8);
        assert_eq!(reach(&r, "net1", peer), Reach::Via(r[2].clone()));
        // net1 to rail 2's subnet: only net2 (and the pod network's default route) cover it.
        let peer = Ipv4Addr::new(10, 0, 107, 8);
        match reach(&r, "net1", peer) {
            Reach::NoRoute { elsewhere: Some(e) } => assert_eq!(e.describe(), "10.0.107.0/24 dev net2"),
            other => panic!("{other:?}"),
        }
        assert_eq!(reach(&r, "net2", peer), Reach::Via(r[3].clone()));
        // Rejected and down routes do not count.
        assert!(matches!(reach(&r, "net4", Ipv4Addr::new(11, 0, 0, 1)), Reach::NoRoute { .. }));
        assert!(matches!(reach(&r, "net3", Ipv4Addr::new(12, 0, 0, 1)), Reach::NoRoute { .. }));
    }

    #[test]
    fn longest_prefix_wins_and_default_routes_count() {
        let text = "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\n\
                    net1\t00000000\t0101000A\t0003\t0\t0\t0\t00000000\n\
                    net1\t0000000A\t00000000\t0001\t0\t0\t0\t000000FF\n";
        let r = parse(text);
        assert_eq!(reach(&r, "net1", Ipv4Addr::new(10, 9, 9, 9)), Reach::Via(r[1].clone()));
        assert_eq!(reach(&r, "net1", Ipv4Addr::new(192, 168, 0, 1)), Reach::Via(r[0].clone()));
    }

    #[test]
    fn odd_fields_are_skipped() {
        let text = "h\nnet1\tZZZZZZZZ\t00000000\t0001\t0\t0\t0\t00FFFFFF\n\
                    net1\t006A000A\t00000000\t0001\t0\t0\t0\tFF00FFFF\n\
                    net1\t006A0A\t00000000\t0001\t0\t0\t0\t00FFFFFF\n";
        assert!(parse(text).is_empty());
    }

    #[test]
    fn ipv4_mapped_gids_give_their_address() {
        let mut g = [0u8; 16];
        g[10] = 0xff;
        g[11] = 0xff;
        g[12..].copy_from_slice(&[10, 0, 106, 7]);
        assert_eq!(gid_ipv4(&g), Some(Ipv4Addr::new(10, 0, 106, 7)));
        g[0] = 0xfe;
        assert_eq!(gid_ipv4(&g), None);
    }
}
