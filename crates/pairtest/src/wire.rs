//! The ping protocol's messages and their framing: pure encode and decode, no I/O.
//!
//! A frame is `NCWPING` (7 bytes), the version (1 byte), the kind (1 byte), the payload length
//! (4 bytes, big-endian), then a JSON payload of at most [`MAX_PAYLOAD`] bytes. Decoding checks
//! every field's range (names, port numbers, GIDs, MTUs, QPNs, PSNs, counts) before anything else
//! sees it, so the rest of `ping` only ever holds values a real peer could have sent. It must
//! never panic or allocate more than the frame's declared (and bounded) length, whatever the
//! bytes: a fuzz target calls [`decode`].

use serde::{Deserialize, Serialize};

use super::clean;

pub(crate) const MAGIC: &[u8; 7] = b"NCWPING";
pub(crate) const VERSION: u8 = 1;
/// Magic, version, kind, length.
pub(crate) const HEADER_LEN: usize = 13;
/// Hard limit of one payload: a description of 32 ports is about 8 KiB.
pub(crate) const MAX_PAYLOAD: usize = 64 << 10;
/// NCCL reads at most 32 `NCCL_IB_HCA` entries; no pod has more rails.
pub(crate) const MAX_PORTS: usize = 32;
/// Every local x remote pair of two 32-port pods.
pub(crate) const MAX_PAIRS: usize = MAX_PORTS * MAX_PORTS;
/// Longest text a peer may send (a failure's detail, a refusal's reason).
pub const MAX_TEXT: usize = 1024;
/// Largest bandwidth message (1 GiB, what most adapters allow in one work request).
pub(crate) const MAX_BYTES: u32 = 1 << 30;
/// The gate: the most pods one job may have.
pub const MAX_GATE_SIZE: u32 = 1 << 16;
/// The gate: the most findings or missing ranks a verdict lists (the counts cover the rest).
pub const MAX_LISTED: usize = 64;
/// The fastest figure a port or a pair may carry, in kb/s (10 Tb/s: far above any port's rate).
pub(crate) const MAX_KBPS: u64 = 10_000_000_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum LinkLayer {
    InfiniBand,
    Ethernet,
}

impl LinkLayer {
    pub fn name(self) -> &'static str {
        match self {
            LinkLayer::InfiniBand => "InfiniBand",
            LinkLayer::Ethernet => "Ethernet",
        }
    }
}

/// One RDMA port as its owner describes it: what a connection to it needs, and what a failed
/// one is explained by.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortInfo {
    pub device: String,
    pub port: u8,
    pub link_layer: LinkLayer,
    /// RoCE: the GID index NCCL would use, and that GID in sysfs's form.
    pub gid_index: Option<u8>,
    pub gid: Option<String>,
    /// RoCE: `RoCE v2` or `IB/RoCE v1`, as `gid_attrs/types` says.
    pub gid_type: Option<String>,
    /// InfiniBand: the port's LID.
    pub lid: Option<u16>,
    /// Active MTU in bytes (256 ... 4096).
    pub mtu: u32,
    /// The partition key at index 0 (what the QP uses), InfiniBand.
    pub pkey: Option<u16>,
    /// The GID's net device (RoCE), for the route check and the evidence.
    pub netdev: Option<String>,
    /// The port's rated speed in kb/s (`ports/N/rate`), hardware ports only: what a slow pair
    /// is judged against (`pairtest::slow`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_kbps: Option<u64>,
}

/// The opening message of each side. The client's choices (pairing, sizes) rule the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hello {
    pub host: String,
    pub ports: Vec<PortInfo>,
    pub all_pairs: bool,
    pub bytes: u32,
    pub iters: u32,
    pub duration_ms: u32,
    /// The gate's pair test: the initiator's job and rank, so that a gate listener serves its
    /// predecessor and no one else. Plain ping leaves it out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate: Option<GateTag>,
}

/// Why one side could not go on with a pair: a cause id and what it saw.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fault {
    /// The step: `open`, `reg_mr`, `create_qp`, `INIT`, `RTR`, `RTS`, `latency`, `bandwidth`...
    pub step: String,
    /// The verbs error: `IBV_WC_RETRY_EXC_ERR`, `ENOMEM: ...`, or what was missing.
    pub error: String,
    /// The completion status number, when the error was a completion.
    pub wc_status: Option<u32>,
    /// The errno, when the error was a call's.
    pub errno: Option<i32>,
}

/// One side's queue pair for one pair, or why it has none.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QpInfo {
    pub(crate) pair: u16,
    pub(crate) qpn: u32,
    pub(crate) psn: u32,
    /// The test buffer the peer may RDMA WRITE into, for this run only.
    pub(crate) addr: u64,
    pub(crate) rkey: u32,
    pub fault: Option<Fault>,
}

/// How one pair went on one side (after connecting, and after the run).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PairState {
    pub(crate) pair: u16,
    pub fault: Option<Fault>,
    /// The initiator's figures, so the listener can print them too (`done` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) figures: Option<Figures>,
}

/// What a pair measured.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Figures {
    pub median_us: Option<f64>,
    pub p99_us: Option<f64>,
    pub gbps: Option<f64>,
}

impl Eq for Figures {}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    Hello(Hello),
    /// Every pair's queue pair, in pair order.
    Setup(Vec<QpInfo>),
    /// Every pair connected (RTS, receives posted) or not.
    Ready(Vec<PairState>),
    /// The end of the run: each pair as this side saw it.
    Done(Vec<PairState>),
    /// The listener will not run with this peer (busy, bad hello).
    Refuse(String),
    /// The gate's coordination: join, assign, report, verdict.
    Join(Join),
    Assign(Assign),
    Report(Report),
    Verdict(Verdict),
}

impl Message {
    fn kind(&self) -> u8 {
        match self {
            Message::Hello(_) => 1,
            Message::Setup(_) => 2,
            Message::Ready(_) => 3,
            Message::Done(_) => 4,
            Message::Refuse(_) => 5,
            Message::Join(_) => 6,
            Message::Assign(_) => 7,
            Message::Report(_) => 8,
            Message::Verdict(_) => 9,
        }
    }
    pub fn name(&self) -> &'static str {
        kind_name(self.kind())
    }
}

pub(crate) fn kind_name(kind: u8) -> &'static str {
    match kind {
        1 => "hello",
        2 => "setup",
        3 => "ready",
        4 => "done",
        5 => "refuse",
        6 => "join",
        7 => "assign",
        8 => "report",
        9 => "verdict",
        _ => "unknown",
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("{got} bytes is shorter than a ping header ({HEADER_LEN} bytes)")]
    Short { got: usize },
    #[error("not a nccl-wrap ping message (first bytes {0:?}); is the peer nccl-wrap ping on this port?")]
    Magic(String),
    #[error("protocol version {got}, this nccl-wrap speaks {VERSION}: run the same nccl-wrap on both ends")]
    Version { got: u8 },
    #[error("unknown message kind {0}")]
    Kind(u8),
    #[error("declared payload of {0} bytes is over the {MAX_PAYLOAD}-byte limit")]
    TooLong(u64),
    #[error("frame holds {got} payload bytes but declares {declared}")]
    Length { declared: usize, got: usize },
    #[error("payload is not valid JSON for a {kind} message: {detail}")]
    Json { kind: &'static str, detail: String },
    #[error("{field} is out of range: {detail}")]
    Field { field: &'static str, detail: String },
}

fn field(field: &'static str, detail: impl Into<String>) -> WireError {
    WireError::Field { field, detail: detail.into() }
}

/// Checks a frame header and returns (kind, payload length) without reading further: the
/// reader refuses an over-long frame before allocating for it.
pub fn header(h: &[u8]) -> Result<(u8, usize), WireError> {
    if h.len() < HEADER_LEN {
        return Err(WireError::Short { got: h.len() });
    }
    if &h[..7] != MAGIC {
        return Err(WireError::Magic(String::from_utf8_lossy(&h[..7]).escape_debug().to_string()));
    }
    if h[7] != VERSION {
        return Err(WireError::Version { got: h[7] });
    }
    let kind = h[8];
    if !(1..=9).contains(&kind) {
        return Err(WireError::Kind(kind));
    }
    let len = u32::from_be_bytes([h[9], h[10], h[11], h[12]]);
    if len as usize > MAX_PAYLOAD {
        return Err(WireError::TooLong(u64::from(len)));
    }
    Ok((kind, len as usize))
}

/// One whole frame to a message, every field checked.
pub fn decode(bytes: &[u8]) -> Result<Message, WireError> {
    let (kind, len) = header(bytes)?;
    let payload = &bytes[HEADER_LEN..];
    if payload.len() != len {
        return Err(WireError::Length { declared: len, got: payload.len() });
    }
    decode_payload(kind, payload)
}

pub(crate) fn decode_payload(kind: u8, payload: &[u8]) -> Result<Message, WireError> {
    let name = kind_name(kind);
    // serde's message quotes the peer's bytes (an unknown variant, a bad string): printable.
    let json = |e: serde_json::Error| WireError::Json { kind: name, detail: clean::text(&e.to_string()) };
    let msg = match kind {
        1 => Message::Hello(serde_json::from_slice(payload).map_err(json)?),
        2 => Message::Setup(serde_json::from_slice(payload).map_err(json)?),
        3 => Message::Ready(serde_json::from_slice(payload).map_err(json)?),
        4 => Message::Done(serde_json::from_slice(payload).map_err(json)?),
        5 => Message::Refuse(serde_json::from_slice(payload).map_err(json)?),
        6 => Message::Join(serde_json::from_slice(payload).map_err(json)?),
        7 => Message::Assign(serde_json::from_slice(payload).map_err(json)?),
        8 => Message::Report(serde_json::from_slice(payload).map_err(json)?),
        9 => Message::Verdict(serde_json::from_slice(payload).map_err(json)?),
        other => return Err(WireError::Kind(other)),
    };
    validate(&msg)?;
    Ok(printable(msg))
}

/// Every free text a peer sends (a refusal, a fault's error, a pod's problem, a finding's summary
/// and hint) made printable and bounded: whatever prints it later, a log line, JSON or the
/// termination message, never carries a peer's line break or escape sequence.
pub(crate) fn printable(mut msg: Message) -> Message {
    let fault = |f: &mut Fault| f.error = clean::bounded(&f.error, MAX_TEXT);
    let finding = |f: &mut Finding| {
        f.summary = clean::bounded(&f.summary, MAX_TEXT);
        f.hint = clean::bounded(&f.hint, MAX_TEXT);
    };
    match &mut msg {
        Message::Refuse(r) => *r = clean::bounded(r, MAX_TEXT),
        Message::Setup(qps) => qps.iter_mut().filter_map(|q| q.fault.as_mut()).for_each(fault),
        Message::Ready(st) | Message::Done(st) => st.iter_mut().filter_map(|s| s.fault.as_mut()).for_each(fault),
        Message::Join(j) => {
            if let Some(p) = &mut j.problem {
                *p = clean::bounded(p, MAX_TEXT);
            }
        }
        Message::Report(r) => r.pairs.iter_mut().for_each(finding),
        Message::Verdict(v) => v.findings.iter_mut().for_each(finding),
        Message::Hello(_) | Message::Assign(_) => {}
    }
    msg
}

/// A message to one frame. Fails only on a message that `decode` would refuse.
pub fn encode(msg: &Message) -> Result<Vec<u8>, WireError> {
    validate(msg)?;
    let payload = match msg {
        Message::Hello(h) => serde_json::to_vec(h),
        Message::Setup(q) => serde_json::to_vec(q),
        Message::Ready(s) | Message::Done(s) => serde_json::to_vec(s),
        Message::Refuse(r) => serde_json::to_vec(r),
        Message::Join(j) => serde_json::to_vec(j),
        Message::Assign(a) => serde_json::to_vec(a),
        Message::Report(r) => serde_json::to_vec(r),
        Message::Verdict(v) => serde_json::to_vec(v),
    }
    .map_err(|e| WireError::Json { kind: msg.name(), detail: e.to_string() })?;
    if payload.len() > MAX_PAYLOAD {
        return Err(WireError::TooLong(payload.len() as u64));
    }
    let mut out = Vec::with_capacity(HEADER_LEN + payload.len());
    out.extend_from_slice(MAGIC);
    out.push(VERSION);
    out.push(msg.kind());
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    out.extend_from_slice(&payload);
    Ok(out)
}

fn validate(msg: &Message) -> Result<(), WireError> {
    match msg {
        Message::Hello(h) => validate_hello(h),
        Message::Setup(qps) => {
            count("setup", qps.len())?;
            for (i, q) in qps.iter().enumerate() {
                order("setup.pair", i, q.pair)?;
                if q.qpn >= 1 << 24 {
                    return Err(field("setup.qpn", format!("{} is not a 24-bit queue pair number", q.qpn)));
                }
                if q.psn >= 1 << 24 {
                    return Err(field("setup.psn", format!("{} is not a 24-bit packet sequence number", q.psn)));
                }
                if let Some(f) = &q.fault {
                    validate_fault(f)?;
                }
            }
            Ok(())
        }
        Message::Ready(states) | Message::Done(states) => {
            count("pairs", states.len())?;
            for (i, s) in states.iter().enumerate() {
                order("pair", i, s.pair)?;
                if let Some(f) = &s.fault {
                    validate_fault(f)?;
                }
                if let Some(f) = &s.figures {
                    for v in [f.median_us, f.p99_us, f.gbps].into_iter().flatten() {
                        if !(v.is_finite() && (0.0..1e9).contains(&v)) {
                            return Err(field("figures", format!("{v} is not a measurement")));
                        }
                    }
                }
            }
            Ok(())
        }
        Message::Refuse(reason) => text("refuse", reason),
        Message::Join(j) => validate_join(j),
        Message::Assign(a) => validate_assign(a),
        Message::Report(r) => {
            gate::hex("report.mac", r.mac.as_ref(), 64)?;
            if r.pairs.len() > MAX_PAIRS {
                return Err(field("report.pairs", format!("{} findings, more than {MAX_PAIRS}", r.pairs.len())));
            }
            r.pairs.iter().try_for_each(validate_finding)
        }
        Message::Verdict(v) => {
            gate::hex("verdict.mac", v.mac.as_ref(), 64)?;
            if v.findings.len() > MAX_LISTED || v.missing.len() > MAX_LISTED || v.slow.len() > MAX_LISTED {
                return Err(field(
                    "verdict",
                    format!("more than {MAX_LISTED} findings, slow pairs or missing ranks listed"),
                ));
            }
            if (v.slow_total as usize) < v.slow.len() || v.slow_total > v.pairs {
                return Err(field("verdict.slow_total", "more slow pairs listed than counted, or than tested"));
            }
            if !(1..=MAX_GATE_SIZE).contains(&v.size) {
                return Err(field("verdict.size", format!("{} is not in 1..={MAX_GATE_SIZE}", v.size)));
            }
            if v.missing.iter().any(|&r| r >= v.size) || (v.missing_total as usize) < v.missing.len() {
                return Err(field("verdict.missing", "a rank outside the job, or more listed than counted"));
            }
            if (v.failed_total as usize) > v.pairs as usize + MAX_GATE_SIZE as usize {
                return Err(field("verdict.failed_total", format!("{} is out of range", v.failed_total)));
            }
            v.findings.iter().chain(&v.slow).try_for_each(validate_finding)
        }
    }
}

fn count(what: &'static str, n: usize) -> Result<(), WireError> {
    if n > MAX_PAIRS {
        return Err(field(what, format!("{n} pairs, more than {MAX_PAIRS}")));
    }
    Ok(())
}

/// Pairs come in order 0, 1, 2...: a peer cannot name a pair twice or skip one.
fn order(what: &'static str, i: usize, pair: u16) -> Result<(), WireError> {
    if usize::from(pair) != i {
        return Err(field(what, format!("entry {i} names pair {pair}")));
    }
    Ok(())
}

fn text(what: &'static str, s: &str) -> Result<(), WireError> {
    if s.len() > MAX_TEXT {
        return Err(field(what, format!("{} bytes, more than {MAX_TEXT}", s.len())));
    }
    Ok(())
}

/// Device and net-device names: what the kernel allows, and never anything a terminal or a
/// shell would read specially.
fn name(what: &'static str, s: &str) -> Result<(), WireError> {
    let ok = !s.is_empty() && s.len() <= 64 && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"_.-@:".contains(&b));
    if !ok {
        return Err(field(what, format!("{:?} is not a device name", s.escape_debug().to_string())));
    }
    Ok(())
}

fn validate_fault(f: &Fault) -> Result<(), WireError> {
    if f.step.is_empty() || f.step.len() > 32 || !f.step.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(field("fault.step", format!("{:?}", f.step.escape_debug().to_string())));
    }
    text("fault.error", &f.error)
}

/// Range of `--bytes`, `--iters` and `--duration-ms` a listener accepts from a client.
pub(crate) fn check_params(bytes: u32, iters: u32, duration_ms: u32) -> Result<(), WireError> {
    if !(8..=MAX_BYTES).contains(&bytes) {
        return Err(field("bytes", format!("{bytes} is not in 8..={MAX_BYTES}")));
    }
    if !(1..=1_000_000).contains(&iters) {
        return Err(field("iters", format!("{iters} is not in 1..=1000000")));
    }
    if duration_ms > 60_000 {
        return Err(field("duration_ms", format!("{duration_ms} is over 60000")));
    }
    Ok(())
}

fn validate_hello(h: &Hello) -> Result<(), WireError> {
    host("hello.host", &h.host)?;
    if let Some(g) = &h.gate {
        check_job(&g.job)?;
        gate::hex("hello.gate.mac", g.mac.as_ref(), 64)?;
        if g.rank >= MAX_GATE_SIZE {
            return Err(field("hello.gate.rank", format!("{} is over the largest job", g.rank)));
        }
    }
    if h.ports.is_empty() || h.ports.len() > MAX_PORTS {
        return Err(field("hello.ports", format!("{} ports, not 1..={MAX_PORTS}", h.ports.len())));
    }
    check_params(h.bytes, h.iters, h.duration_ms)?;
    for p in &h.ports {
        validate_port(p)?;
    }
    Ok(())
}

fn validate_port(p: &PortInfo) -> Result<(), WireError> {
    name("port.device", &p.device)?;
    if let Some(n) = &p.netdev {
        name("port.netdev", n)?;
    }
    if p.port == 0 {
        return Err(field("port.port", "port numbers start at 1"));
    }
    if p.rate_kbps.is_some_and(|r| r == 0 || r > MAX_KBPS) {
        return Err(field("port.rate_kbps", format!("{:?} is not in 1..={MAX_KBPS}", p.rate_kbps)));
    }
    if ![256, 512, 1024, 2048, 4096].contains(&p.mtu) {
        return Err(field("port.mtu", format!("{} is not an IB MTU (256..4096)", p.mtu)));
    }
    match p.link_layer {
        LinkLayer::Ethernet => {
            let gid = p.gid.as_deref().ok_or_else(|| field("port.gid", "a RoCE port without a GID"))?;
            if parse_gid(gid).is_none() {
                return Err(field("port.gid", format!("{:?} is not a GID", gid.escape_debug().to_string())));
            }
            if p.gid_index.is_none() {
                return Err(field("port.gid_index", "a RoCE port without a GID index"));
            }
            if let Some(t) = &p.gid_type {
                if !matches!(t.as_str(), "RoCE v2" | "IB/RoCE v1") {
                    return Err(field("port.gid_type", format!("{:?}", t.escape_debug().to_string())));
                }
            }
        }
        LinkLayer::InfiniBand => match p.lid {
            Some(0) | None => return Err(field("port.lid", "an InfiniBand port without a LID")),
            Some(lid) if lid >= 0xc000 => {
                return Err(field("port.lid", format!("{lid:#x} is a multicast LID, not a port's")));
            }
            Some(_) => {}
        },
    }
    if let Some(g) = &p.gid {
        if parse_gid(g).is_none() {
            return Err(field("port.gid", format!("{:?} is not a GID", g.escape_debug().to_string())));
        }
    }
    Ok(())
}

/// A GID in sysfs's form (eight groups of four hex digits) to its 16 bytes.
pub(crate) fn parse_gid(text: &str) -> Option<[u8; 16]> {
    let groups: Vec<&str> = text.split(':').collect();
    if groups.len() != 8 || groups.iter().any(|g| g.len() != 4 || !g.bytes().all(|b| b.is_ascii_hexdigit())) {
        return None;
    }
    let mut out = [0u8; 16];
    for (i, g) in groups.iter().enumerate() {
        let v = u16::from_str_radix(g, 16).ok()?;
        out[2 * i..2 * i + 2].copy_from_slice(&v.to_be_bytes());
    }
    Some(out)
}

#[path = "wire_gate.rs"]
mod gate;
pub use gate::{check_job, Assign, Bootstrap, Finding, GateTag, Join, Report, Verdict};
use gate::{host, validate_assign, validate_finding, validate_join};

#[cfg(test)]
#[path = "wire_tests.rs"]
pub(crate) mod tests;
