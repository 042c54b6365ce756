//! The rtnetlink link dump (`RTM_GETLINK` replies), through `detect::links::parse`: the kernel's
//! reply is bounded and parsed without trusting a length. The input is one datagram.

#![no_main]

use libfuzzer_sys::fuzz_target;
use nccl_wrap::detect::links::{self, Kinds};

fuzz_target!(|data: &[u8]| {
    let mut kinds = Kinds::new();
    let _ = links::parse(data, &mut kinds);
    for (name, kind) in &kinds {
        // Only plausible names leave the parser: they reach messages and decisions.
        assert!(!name.is_empty() && name.len() <= 64 && name.bytes().all(|b| b.is_ascii_graphic()));
        if let Some(k) = kind {
            assert!(!k.is_empty() && k.len() <= 64 && k.bytes().all(|b| b.is_ascii_graphic()));
        }
        let _ = links::may_be_upper(kind.as_deref());
    }
});
