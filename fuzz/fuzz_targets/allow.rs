//! `--allow` / `NCCL_WRAP_PING_ALLOW` (`pairtest::door::parse_allow`) and a job secret as a
//! variable or a mounted file holds it (`gate::seal::Secret::new`), as a user or a template
//! may write them: a list is refused with a typed error whose text is printable, or gives 1 to
//! 64 networks whose prefixes fit their family and which hold their own address, and every
//! address is matched without a panic; a secret is refused, or taken within its bound and never
//! shown by its `Debug`.

#![no_main]

use libfuzzer_sys::fuzz_target;
use nccl_wrap::pairtest::door::{parse_allow, Allow, MAX_NETS};
use nccl_wrap::gate::seal::{Secret, MAX_SECRET};

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        match parse_allow(text) {
            Ok(nets) => {
                assert!(!nets.is_empty() && nets.len() <= MAX_NETS);
                for n in &nets {
                    assert!(u32::from(n.prefix) <= if n.addr.is_ipv4() { 32 } else { 128 });
                    assert!(n.contains(n.addr));
                }
                let allow = Allow::Nets(nets);
                for ip in ["10.1.2.3", "::1", "::ffff:192.168.1.7", "fd00::1"] {
                    let _ = allow.refusal(ip.parse().expect("address"));
                }
            }
            Err(e) => {
                let shown = e.to_string();
                assert!(!shown.chars().any(char::is_control), "{shown:?}");
            }
        }
    }
    if let Ok(s) = Secret::new(data) {
        assert!(data.len() <= MAX_SECRET);
        assert!(format!("{s:?}").starts_with("Secret(") && format!("{s:?}").ends_with(" bytes)"));
    }
});
