//! `detect::netif::read` (one rtnetlink address dump and a SIOCGIFNAME per interface) against
//! libc's `getifaddrs` (a link dump, then the address dump) in the same loop, in this network
//! namespace: the mean of each, in microseconds.
//!
//!   cargo run --release --example netif_read [CALLS]      # default 5000

use std::time::Instant;

fn main() {
    let calls: u32 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(5000);
    let mut n = 0usize;
    // Warm both paths once (page faults, the socket code's first use).
    n += nccl_wrap::detect::netif::read().map_or(0, |a| a.len());
    n += nix::ifaddrs::getifaddrs().map_or(0, |a| a.count());
    let t = Instant::now();
    for _ in 0..calls {
        n += nccl_wrap::detect::netif::read().map_or(0, |a| a.len());
    }
    let dump = t.elapsed().as_secs_f64() * 1e6 / f64::from(calls);
    let t = Instant::now();
    for _ in 0..calls {
        n += nix::ifaddrs::getifaddrs().map_or(0, |a| a.count());
    }
    let libc = t.elapsed().as_secs_f64() * 1e6 / f64::from(calls);
    println!("netif::read  {dump:7.1} us per call");
    println!("getifaddrs   {libc:7.1} us per call");
    println!("({calls} calls each; {n} entries seen in all)");
}
