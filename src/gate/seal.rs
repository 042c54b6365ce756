//! The job secret's HMAC-SHA256 on the gate's frames, bound to the job, the kind and the
//! session's nonces. Pure but for [`nonce`]. It never compares tags in variable time
//! (`verify_slice`), never prints the secret, and never takes a frame unchecked.

use std::net::SocketAddr;

use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::wire::{self, Frame};
use nw_pairtest::wire::{Protocol, Tag};

/// The most bytes a secret may have (a mounted Secret's file is read with this bound).
pub const MAX_SECRET: usize = 4096;
/// Domain of every MAC: a tag made for anything else never verifies here.
const DOMAIN: &[u8] = b"nccl-wrap gate frame v1";
/// Domain of the coordinator's challenges.
const CHALLENGE: &[u8] = b"nccl-wrap gate challenge v1";

#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Vec<u8>);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Secret({} bytes)", self.0.len())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    #[error("the job secret is empty")]
    Empty,
    #[error("the job secret is {0} bytes, more than {MAX_SECRET}")]
    TooLong(usize),
}

impl Secret {
    /// The secret from a variable's value or a file's bytes; the whitespace around it (a
    /// file's final newline) is not part of it.
    pub fn new(bytes: &[u8]) -> Result<Secret, SecretError> {
        if bytes.len() > MAX_SECRET {
            return Err(SecretError::TooLong(bytes.len()));
        }
        Some(bytes.trim_ascii()).filter(|s| !s.is_empty()).map(|s| Secret(s.to_vec())).ok_or(SecretError::Empty)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    #[error("carries no job-secret MAC, and this pod has a job secret: that pod has no NCCL_WRAP_GATE_SECRET (or _FILE), or is not of this job")]
    Missing,
    #[error("carries a job-secret MAC, and this pod has no job secret: set the same NCCL_WRAP_GATE_SECRET (or _FILE) on every pod of the job")]
    Unexpected,
    #[error("fails the job-secret MAC check: it was made with another secret (or for another job, pod or gate run)")]
    Wrong,
}

/// The session a frame belongs to.
#[derive(Debug, Clone, Copy)]
pub struct Bound<'a> {
    pub job: &'a str,
    /// The joining pod's nonce (its join's).
    pub member: &'a str,
    /// The coordinator's: the join's challenge, then the gate run's nonce; empty for a verdict
    /// sent before any assignment.
    pub gate: &'a str,
}

/// The coordinator's challenge on one connection, keyed by the gate's nonce over both addresses:
/// derived, so the listener that sends it and the roster that checks it share no state.
pub fn challenge(gate: &str, peer: SocketAddr, local: SocketAddr) -> String {
    let Ok(mut m) = Hmac::<Sha256>::new_from_slice(gate.as_bytes()) else { return String::new() };
    for part in [CHALLENGE, peer.to_string().as_bytes(), local.to_string().as_bytes()] {
        m.update(&(part.len() as u64).to_be_bytes());
        m.update(part);
    }
    hex(&m.finalize().into_bytes()[..16])
}

/// A fresh nonce: 16 random bytes from the kernel, in hex. Without them (a kernel refusing
/// getrandom), the time and the process id: still unique per run, if not secret.
pub fn nonce() -> String {
    let mut b = [0u8; 16];
    if rustix::rand::getrandom(&mut b, rustix::rand::GetRandomFlags::empty()) != Ok(b.len()) {
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        b[..12].copy_from_slice(&t.to_le_bytes()[..12]);
        b[12..].copy_from_slice(&std::process::id().to_le_bytes());
    }
    hex(&b)
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The bytes of an even-length hex string (an odd one's last pair is out of range: none).
fn unhex(h: &str) -> Option<Vec<u8>> {
    (0..h.len()).step_by(2).map(|i| h.get(i..i + 2).and_then(|p| u8::from_str_radix(p, 16).ok())).collect()
}

/// The MAC field of a sealed kind of frame.
fn mac_of(msg: &mut Frame) -> Option<&mut Option<String>> {
    match msg {
        Frame::Join(j) => Some(&mut j.mac),
        Frame::Assign(a) => Some(&mut a.mac),
        Frame::Report(r) => Some(&mut r.mac),
        Frame::Verdict(v) => Some(&mut v.mac),
        _ => None,
    }
}

/// The frame's MAC, and the payload the MAC covers (the frame's without its MAC).
fn parts(msg: &Frame) -> Option<(Option<String>, Vec<u8>)> {
    let mut bare = msg.clone();
    let mac = mac_of(&mut bare)?.take();
    Some((mac, bare.encode_payload().ok()?.1))
}

/// The MAC state over one frame; `None` only if HMAC refused the key (it takes any length).
fn keyed(key: &Secret, kind: &str, b: &Bound, body: &[u8]) -> Option<Hmac<Sha256>> {
    let mut m = Hmac::<Sha256>::new_from_slice(&key.0).ok()?;
    // Each part length-prefixed: no two different sessions or frames give the same input.
    for part in [DOMAIN, kind.as_bytes(), b.job.as_bytes(), b.member.as_bytes(), b.gate.as_bytes(), body] {
        m.update(&(part.len() as u64).to_be_bytes());
        m.update(part);
    }
    Some(m)
}

/// Puts the MAC on a gate frame, its peer texts made printable first (as the peer decodes them).
/// Without a key, or on another kind, the frame is left as it is.
pub fn seal(msg: Frame, key: Option<&Secret>, b: &Bound) -> Frame {
    let mut msg = wire::printable(msg);
    let Some(key) = key else { return msg };
    let Some((_, body)) = parts(&msg) else { return msg };
    let tag = keyed(key, msg.name(), b, &body).map(|m| hex(&m.finalize().into_bytes()));
    if let Some(mac) = mac_of(&mut msg) {
        *mac = tag;
    }
    msg
}

/// The gate's pair-test tag with its MAC (kind `hello`), bound to the successor's nonce: the
/// successor serves it only if it proves the job's secret. Without a key, the tag as it is.
pub fn seal_tag(tag: Tag, key: Option<&Secret>, b: &Bound) -> Tag {
    let Some(key) = key else { return tag };
    let body = serde_json::to_vec(&Tag { mac: None, ..tag.clone() }).unwrap_or_default();
    let mac = keyed(key, "hello", b, &body).map(|m| hex(&m.finalize().into_bytes()));
    Tag { mac, ..tag }
}

/// Whether a pair-test tag proves this pod's key (none: it must carry no MAC).
pub fn check_tag(tag: &Tag, key: Option<&Secret>, b: &Bound) -> Result<(), SealError> {
    let body = serde_json::to_vec(&Tag { mac: None, ..tag.clone() }).map_err(|_| SealError::Wrong)?;
    verify(key, tag.mac.as_deref(), "hello", b, &body)
}

/// Whether a decoded gate frame is authentic for this pod's key (none: it must carry no MAC).
pub fn check(msg: &Frame, key: Option<&Secret>, b: &Bound) -> Result<(), SealError> {
    let Some((mac, body)) = parts(msg) else { return Ok(()) };
    verify(key, mac.as_deref(), msg.name(), b, &body)
}

fn verify(key: Option<&Secret>, mac: Option<&str>, kind: &str, b: &Bound, body: &[u8]) -> Result<(), SealError> {
    match (key, mac) {
        (None, None) => Ok(()),
        (None, Some(_)) => Err(SealError::Unexpected),
        (Some(_), None) => Err(SealError::Missing),
        (Some(key), Some(tag)) => {
            let tag = unhex(tag).ok_or(SealError::Wrong)?;
            keyed(key, kind, b, body).ok_or(SealError::Wrong)?.verify_slice(&tag).map_err(|_| SealError::Wrong)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::wire::{decode, encode, Join, Report};

    fn join() -> Frame {
        Frame::Join(Join {
            job: "train-0:18516/4".into(),
            rank: 1,
            size: 4,
            host: "train-1".into(),
            port: 18516,
            ports: Vec::new(),
            problem: Some("no usable port\nverdict: GO".into()),
            nonce: Some("00112233445566778899aabbccddeeff".into()),
            challenge: None,
            bootstrap: None,
            prune: false,
            mac: None,
        })
    }

    fn key(s: &str) -> Secret {
        Secret::new(s.as_bytes()).expect("secret")
    }

    const B: Bound = Bound { job: "train-0:18516/4", member: "00112233445566778899aabbccddeeff", gate: "" };

    #[test]
    fn a_sealed_frame_checks_after_the_wire_and_nothing_else_does() {
        let k = key("s3cret");
        let sealed = seal(join(), Some(&k), &B);
        let back = decode(&encode(&sealed).expect("encode")).expect("decode");
        assert_eq!(check(&back, Some(&k), &B), Ok(()));
        // Another secret, none, or none expected.
        assert_eq!(check(&back, Some(&key("other")), &B), Err(SealError::Wrong));
        assert_eq!(check(&back, None, &B), Err(SealError::Unexpected));
        assert_eq!(check(&seal(join(), None, &B), Some(&k), &B), Err(SealError::Missing));
        assert_eq!(check(&seal(join(), None, &B), None, &B), Ok(()));
        // Another job, pod nonce or gate run.
        for other in [
            Bound { job: "train-0:18516/8", ..B },
            Bound { member: "ffffffffffffffffffffffffffffffff", ..B },
            Bound { gate: "0123456789abcdef0123456789abcdef", ..B },
        ] {
            assert_eq!(check(&back, Some(&k), &other), Err(SealError::Wrong), "{other:?}");
        }
        // A field changed after sealing.
        let Frame::Join(mut j) = back.clone() else { panic!("a join") };
        j.rank = 2;
        assert_eq!(check(&Frame::Join(j), Some(&k), &B), Err(SealError::Wrong));
    }

    #[test]
    fn a_tag_is_bound_to_its_kind() {
        let k = key("s3cret");
        let r = seal(Frame::Report(Report { rank: 1, pairs: Vec::new(), mac: None }), Some(&k), &B);
        let Frame::Report(r) = r else { panic!("a report") };
        // The same tag on a verdict-shaped frame of the same session does not verify.
        let v = crate::gate::wire::Verdict {
            go: true,
            size: 2,
            pairs: 2,
            failed_total: 0,
            missing: Vec::new(),
            missing_total: 0,
            findings: Vec::new(),
            slow: Vec::new(),
            slow_total: 0,
            dropped: Vec::new(),
            mac: r.mac.clone(),
        };
        assert_eq!(check(&Frame::Verdict(v), Some(&k), &B), Err(SealError::Wrong));
        assert_eq!(check(&Frame::Report(r), Some(&k), &B), Ok(()));
    }

    #[test]
    fn secrets_are_trimmed_bounded_and_never_printed() {
        assert_eq!(key("  s3cret\n"), key("s3cret"));
        assert_eq!(Secret::new(b" \n"), Err(SecretError::Empty));
        assert_eq!(Secret::new(&[b'x'; MAX_SECRET + 1]), Err(SecretError::TooLong(MAX_SECRET + 1)));
        assert_eq!(format!("{:?}", key("s3cret")), "Secret(6 bytes)");
        let (a, b) = (nonce(), nonce());
        assert!(a.len() == 32 && a != b && a.bytes().all(|c| c.is_ascii_hexdigit()), "{a} {b}");
        assert_eq!(unhex("0aff"), Some(vec![10, 255]));
        assert_eq!(unhex("0g"), None);
    }

    #[test]
    fn a_challenge_is_fresh_for_each_run_and_each_connection() {
        let (peer, local) = ("10.0.0.2:40000".parse().expect("addr"), "10.0.0.1:18516".parse().expect("addr"));
        let c = challenge("0123456789abcdef0123456789abcdef", peer, local);
        assert!(c.len() == 32 && c.bytes().all(|b| b.is_ascii_hexdigit()), "{c}");
        assert_eq!(c, challenge("0123456789abcdef0123456789abcdef", peer, local), "derived, not drawn");
        assert_ne!(c, challenge("fedcba9876543210fedcba9876543210", peer, local), "another run");
        assert_ne!(c, challenge("0123456789abcdef0123456789abcdef", "10.0.0.2:40001".parse().expect("a"), local));
    }
}
