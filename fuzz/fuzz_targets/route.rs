//! The routing tables (`/proc/net/route`, `/proc/net/ipv6_route`) and the bootstrap interface,
//! through `detect::route` and `detect::bootstrap`.
//!
//! Input: the first line is a coordinator (MASTER_ADDR), the second a comma list of rails, then
//! the IPv4 table (header first) up to a line `--`, then the IPv6 table. The chosen interface is
//! never a rail, loopback, or one without a routable address of this namespace.

#![no_main]

use std::net::IpAddr;

use libfuzzer_sys::fuzz_target;
use nccl_wrap::detect::bootstrap::Lookup;
use nccl_wrap::plan::bootstrap::{choose, unfit};
use nccl_wrap::detect::netif::OwnAddr;
use nccl_wrap::detect::route::{lookup, parse_v4, parse_v6, Table};
use nccl_wrap::detect::Vars;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let mut parts = text.splitn(3, '\n');
    let coordinator = parts.next().unwrap_or("");
    let rails: Vec<String> = parts.next().unwrap_or("").split(',').map(String::from).collect();
    let rest = parts.next().unwrap_or("");
    let (v4, v6) = rest.split_once("\n--\n").unwrap_or((rest, ""));
    let mut routes = parse_v4(v4);
    routes.extend(parse_v6(v6));
    for r in &routes {
        assert!(r.prefix <= if r.dest.is_ipv4() { 32 } else { 128 });
        // A route holds its own destination, so a lookup of it finds a route at least as long.
        let got = lookup(&routes, &r.dest).expect("a route holds its destination");
        assert!(got.prefix >= r.prefix);
    }
    // Each route's interface holds the route's destination as its address, and one of them a
    // link-local one: what getifaddrs would give.
    let addrs: Vec<OwnAddr> = routes
        .iter()
        .map(|r| OwnAddr { ifname: r.ifname.clone(), addr: r.dest, ifindex: None })
        .chain(std::iter::once(OwnAddr { ifname: "ll0".into(), addr: "169.254.1.1".parse().expect("ip"), ifindex: None }))
        .collect();
    let mut vars = Vars::new();
    if !coordinator.is_empty() {
        vars.insert("MASTER_ADDR".into(), coordinator.into());
    }
    let answer = Lookup::Addrs(vec![IpAddr::from([10, 0, 0, 1])]);
    let b = choose(&vars, None, &Table::given(routes.clone()), &addrs, &rails, Some(&answer));
    if let Some(i) = &b.ifname {
        assert!(unfit(i, &addrs, &rails).is_none(), "{b:?}");
    }
    assert!(!b.how.chars().any(|c| c.is_control()), "{:?}", b.how);
});
