//! The downward-API annotations file through `detect::annotation::scan`, and Go-unquoting.
//!
//! Input: the file's bytes, decoded as the binary decodes them (lossy UTF-8). Besides the scan's
//! own properties, the whole input is Go-quoted here and must unquote to itself, each escape form
//! (`\xHH`, octal, `\u`, `\U`, the single-letter ones, raw UTF-8) used in turn.

#![no_main]

use std::fmt::Write;

use libfuzzer_sys::fuzz_target;
use nccl_wrap::detect::annotation::{self, go_unquote, NETWORK_STATUS};
use nccl_wrap::detect::names;

fn put(out: &mut String, args: std::fmt::Arguments) {
    out.write_fmt(args).expect("writing to a String cannot fail");
}

/// Go's `strconv.Quote`, with the escape chosen per character by `seed` so that every form the
/// unquoter accepts is exercised.
fn go_quote(s: &str, seed: u8) -> String {
    let mut out = String::from("\"");
    for (i, c) in s.chars().enumerate() {
        let pick = (usize::from(seed) + i) % 5;
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{b}' => out.push_str("\\v"),
            '\u{c}' => out.push_str("\\f"),
            c if pick == 0 && c != '\'' => out.push(c),
            c if pick == 1 || u32::from(c) < 0x20 => {
                let mut buf = [0u8; 4];
                c.encode_utf8(&mut buf).bytes().for_each(|b| put(&mut out, format_args!("\\x{b:02x}")));
            }
            c if pick == 2 => {
                let mut buf = [0u8; 4];
                c.encode_utf8(&mut buf).bytes().for_each(|b| put(&mut out, format_args!("\\{b:03o}")));
            }
            c if pick == 3 && u32::from(c) <= 0xffff => put(&mut out, format_args!("\\u{:04X}", u32::from(c))),
            '\'' => out.push_str("\\'"),
            c => put(&mut out, format_args!("\\U{:08x}", u32::from(c))),
        }
    }
    out.push('"');
    out
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let scan = annotation::scan("/etc/podnetinfo/annotations", &text);
    if !scan.found {
        assert!(scan.devices.is_empty() && scan.problems.is_empty(), "{scan:?}");
    }
    for d in &scan.devices {
        // No name leaves the parser unvalidated, and each device names something to find it by.
        if let Some(n) = &d.rdma_dev {
            assert_eq!(names::device_name(n), Ok(n.as_str()), "{d:?}");
        }
        if let Some(i) = &d.interface {
            assert_eq!(names::device_name(i), Ok(i.as_str()), "{d:?}");
        }
        if let Some(a) = &d.pci_address {
            assert_eq!(names::device_id(a), Ok(a.as_str()), "{d:?}");
        }
        assert!(d.rdma_dev.is_some() || d.pci_address.is_some(), "{d:?}");
        assert!(d.network.chars().count() <= 100);
    }
    for p in &scan.problems {
        let _ = p.to_string();
    }

    // Unquoting undoes quoting, for any text.
    let seed = data.first().copied().unwrap_or(0);
    assert_eq!(go_unquote(&go_quote(&text, seed)).as_deref(), Some(&*text), "quoted with seed {seed}");
    // Whatever a network-status value unquotes to, quoting it again gives it back.
    for line in text.lines() {
        if let Some((key, value)) = line.split_once('=') {
            if key.trim() == NETWORK_STATUS {
                if let Some(s) = go_unquote(value.trim()) {
                    assert_eq!(go_unquote(&go_quote(&s, seed.wrapping_add(1))), Some(s));
                }
            }
        }
    }
});
