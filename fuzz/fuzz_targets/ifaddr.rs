//! The rtnetlink address dump (`RTM_GETADDR` replies), through `detect::netif::parse`: the
//! kernel's reply is bounded and parsed without trusting a length. The input is one datagram.

#![no_main]

use libfuzzer_sys::fuzz_target;
use nccl_wrap::detect::netif;

fuzz_target!(|data: &[u8]| {
    let mut out = Vec::new();
    let _ = netif::parse(data, &mut out);
    // Each message gives at most one address, and never loopback's (index 1).
    assert!(out.len() <= data.len() / 24);
    assert!(out.iter().all(|a| a.ifindex != 1));
});
