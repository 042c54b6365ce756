//! The image's `/etc/ld.so.cache`, through `detect::ldcache`: any bytes parse or are refused
//! without a panic, every entry kept is one the bytes hold, the search in the bytes finds what the
//! parsed list does, and what is parsed encodes and parses back to itself.

#![no_main]

use libfuzzer_sys::fuzz_target;
use nccl_wrap::detect::ldcache::{count, encode, find, lookup, parse, MAX_ENTRIES};

fuzz_target!(|data: &[u8]| {
    let Some(entries) = parse(data) else {
        assert_eq!(count(data), None);
        return;
    };
    assert!(entries.len() <= MAX_ENTRIES);
    assert!(count(data).is_some_and(|n| n >= entries.len() && n <= MAX_ENTRIES));
    for e in &entries {
        assert!(!e.name.contains('\0') && !e.path.contains('\0'));
        if let Some(first) = lookup(&entries, &e.name) {
            assert_eq!(first.name, e.name);
            assert!(first.is_native());
        }
        // The start path's search straight in the bytes finds what the parsed list does (for a
        // name that is valid UTF-8, as every name it asks for is).
        if std::str::from_utf8(e.name.as_bytes()).is_ok() && !e.name.contains('\u{fffd}') {
            assert_eq!(find(data, &e.name).as_ref(), lookup(&entries, &e.name));
        }
    }
    let again: Vec<(&str, &str, i32)> = entries.iter().map(|e| (e.name.as_str(), e.path.as_str(), e.flags)).collect();
    assert_eq!(parse(&encode(&again)).as_deref(), Some(&entries[..]));
});
