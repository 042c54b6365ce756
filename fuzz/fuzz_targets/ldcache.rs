//! The image's `/etc/ld.so.cache`, through `detect::ldcache`: any bytes parse or are refused
//! without a panic, every entry kept is one the bytes hold, and what is parsed encodes and parses
//! back to itself.

#![no_main]

use libfuzzer_sys::fuzz_target;
use nccl_wrap::detect::ldcache::{encode, lookup, parse, MAX_ENTRIES};

fuzz_target!(|data: &[u8]| {
    let Some(entries) = parse(data) else { return };
    assert!(entries.len() <= MAX_ENTRIES);
    for e in &entries {
        assert!(!e.name.contains('\0') && !e.path.contains('\0'));
        if let Some(first) = lookup(&entries, &e.name) {
            assert_eq!(first.name, e.name);
            assert!(first.is_native());
        }
    }
    let again: Vec<(&str, &str, i32)> = entries.iter().map(|e| (e.name.as_str(), e.path.as_str(), e.flags)).collect();
    assert_eq!(parse(&encode(&again)).as_deref(), Some(&entries[..]));
});
