//! `nccl-wrap ping`'s exchange frames and the gate's (join, assign, report, verdict, the tagged
//! hello), as a hostile peer would send them, through
//! `pairtest::wire::decode`: a frame is refused with a typed error or decodes to a message whose every
//! field was checked, and whatever decodes encodes back to a frame that decodes to the same
//! message (the peer and we read one format).

#![no_main]

use libfuzzer_sys::fuzz_target;
use nccl_wrap::pairtest::wire::{decode, encode, header};

fuzz_target!(|data: &[u8]| {
    // The header alone must decide a frame's length, and never over the bound.
    if let Ok((_, len)) = header(data) {
        assert!(len <= 64 * 1024, "header accepted a {len}-byte payload");
    }
    if let Ok(msg) = decode(data) {
        let again = encode(&msg).expect("a decoded message encodes");
        assert_eq!(decode(&again).expect("re-decodes"), msg);
    }
});
