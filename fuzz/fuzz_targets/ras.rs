//! NCCL's RAS replies, through `nccl::ras`: any bytes the RAS port may send (text or JSON, with
//! or without the protocol line), read into a view and rendered to lines.
//!
//! Checks: never a panic; the view stays within its bounds; every line rendered is printable
//! ASCII of bounded length (it reaches stderr and the termination message); the JSON repair
//! leaves valid JSON as it was.

#![no_main]

use libfuzzer_sys::fuzz_target;
use nccl_wrap::nccl::ras::{self, MAX_ITEMS, MAX_TEXT};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(view) = ras::parse(&text) {
        assert!(view.findings.len() <= MAX_ITEMS);
        assert!(view.progress.len() <= MAX_ITEMS);
        for f in &view.findings {
            assert!(f.who.len() <= MAX_ITEMS);
            assert!(f.summary.len() <= MAX_TEXT);
        }
        for l in view.lines() {
            assert!(l.chars().all(|c| c.is_ascii_graphic() || c == ' '), "{l:?}");
            assert!(l.len() <= 8 * MAX_TEXT + 64 * MAX_ITEMS, "{}", l.len());
        }
    }
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) {
        let repaired: serde_json::Value = serde_json::from_str(&ras::repair_json(&text)).expect("valid JSON stays valid");
        assert_eq!(repaired, v);
    }
});
