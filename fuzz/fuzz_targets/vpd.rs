//! PCI Vital Product Data through `detect::vpd::parse`.
//!
//! Input: a function's `vpd` bytes as sysfs hands them over (any bytes). Besides not panicking:
//! what leaves the parser is printable ASCII and bounded, the same every time.

#![no_main]

use libfuzzer_sys::fuzz_target;
use nccl_wrap::detect::vpd;

fuzz_target!(|data: &[u8]| {
    let v = vpd::parse(data);
    assert!(v.fields.len() <= 64);
    let printable = |s: &str| s.chars().all(|c| c.is_ascii_graphic() || c == ' ') && s.len() <= 128;
    assert!(v.product.as_deref().is_none_or(printable), "{v:?}");
    for (k, val) in &v.fields {
        assert!(!k.is_empty() && printable(k) && printable(val), "{v:?}");
    }
    assert_eq!(vpd::parse(data), v, "not deterministic");
});
