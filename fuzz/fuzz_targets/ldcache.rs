//! The image's `/etc/ld.so.cache`, through `detect::ldcache`: any bytes parse or are refused
//! without a panic, every entry kept is one the bytes hold, the loader's search in the bytes
//! finds only what they hold and, in a table in ldconfig's order, what the parsed list does, and
//! what is parsed encodes and parses back to itself (in that order).

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
    let again: Vec<(&str, &str, i32)> = entries.iter().map(|e| (e.name.as_str(), e.path.as_str(), e.flags)).collect();
    let sorted = encode(&again);
    let resorted = parse(&sorted).unwrap_or_default();
    for e in &entries {
        assert!(!e.name.contains('\0') && !e.path.contains('\0'));
        if let Some(first) = lookup(&entries, &e.name) {
            assert_eq!(first.name, e.name);
            assert!(first.is_native());
        }
        // The start path's search straight in the bytes (for a name that is valid UTF-8, as
        // every name it asks for is): anything it finds is the bytes' own; in ldconfig's order it
        // finds what the parsed list does.
        if !e.name.contains('\u{fffd}') {
            if let Some(f) = find(data, &e.name) {
                assert!(f.is_native() && f.name == e.name && entries.iter().any(|x| x.path == f.path));
            }
            assert_eq!(find(&sorted, &e.name).as_ref(), lookup(&resorted, &e.name));
        }
    }
    assert_eq!(parse(&encode(&resorted.iter().map(|e| (e.name.as_str(), e.path.as_str(), e.flags)).collect::<Vec<_>>())), Some(resorted.clone()));
});
