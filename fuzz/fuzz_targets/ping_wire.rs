//! The pair test's frames (`nccl-wrap ping`'s exchange) and the gate's (join, assign, report,
//! verdict, knock, challenge, sealed or not, the tagged hello), as a hostile peer would send them, through
//! `gate::wire::decode` (the gate's connections carry both) and `pairtest::wire::decode`: a frame
//! is refused with a typed error or decodes to a message whose
//! every field was checked and whose free texts are printable, whatever decodes encodes back to
//! a frame that decodes to the same message (the peer and we read one format), and the job
//! secret's check of a decoded gate frame answers without a panic.

#![no_main]

use libfuzzer_sys::fuzz_target;
use nccl_wrap::gate::seal::{self, Bound, Secret};
use nccl_wrap::gate::wire::{decode, encode, header, Frame};
use nccl_wrap::pairtest::clean;
use nccl_wrap::pairtest::wire::{self, Message};

/// Every free text a peer may send.
fn texts(m: &Frame) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    match m {
        Frame::Pair(Message::Refuse(r)) => out.push(r),
        Frame::Pair(Message::Setup(q)) => {
            out.extend(q.iter().filter_map(|q| q.fault.as_ref()).map(|f| f.error.as_str()))
        }
        Frame::Pair(Message::Ready(s) | Message::Done(s)) => {
            out.extend(s.iter().filter_map(|s| s.fault.as_ref()).map(|f| f.error.as_str()))
        }
        Frame::Join(j) => out.extend(j.problem.as_deref()),
        Frame::Report(r) => out.extend(r.pairs.iter().flat_map(|f| [f.summary.as_str(), f.hint.as_str()])),
        Frame::Verdict(v) => out.extend(v.findings.iter().flat_map(|f| [f.summary.as_str(), f.hint.as_str()])),
        Frame::Pair(Message::Hello(_)) | Frame::Assign(_) | Frame::Knock(_) | Frame::Challenge(_) => {}
    }
    out
}

fuzz_target!(|data: &[u8]| {
    // The header alone must decide a frame's length, and never over the bound.
    if let Ok((_, len)) = header(data) {
        assert!(len <= 64 * 1024, "header accepted a {len}-byte payload");
    }
    // The pair test alone reads its own kinds only, and the same frame the same way.
    match (wire::decode(data), decode(data)) {
        (Ok(m), Ok(f)) => assert_eq!(Frame::Pair(m), f),
        (Ok(m), Err(e)) => panic!("the pair test took {m:?}, the gate refused it: {e}"),
        _ => {}
    }
    if let Ok(msg) = decode(data) {
        for t in texts(&msg) {
            assert!(!t.chars().any(char::is_control), "peer text not printable: {t:?}");
            assert_eq!(clean::bounded(t, 1024), t, "cleaning is idempotent");
        }
        let again = encode(&msg).expect("a decoded message encodes");
        assert_eq!(decode(&again).expect("re-decodes"), msg);
        let key = Secret::new(b"fuzz").expect("key");
        let b = Bound { job: "uid-1", member: "0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a", gate: "" };
        let _ = seal::check(&msg, Some(&key), &b);
        let _ = seal::check(&msg, None, &b);
    }
});
