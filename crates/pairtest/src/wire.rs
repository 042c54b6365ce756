//! The pair test's frames (`NCWPING`, version, kind, length, JSON payload) and the framing a front
//! end adds its own kinds to ([`Protocol`]): pure encode and decode, every field range-checked.
//! It must never panic or allocate more than the frame's bounded length, whatever the bytes.

use serde::{Deserialize, Serialize};

use super::clean;

pub(crate) const MAGIC: &[u8; 7] = b"NCWPING";
pub(crate) const VERSION: u8 = 1;
/// Magic, version, kind, length.
pub(crate) const HEADER_LEN: usize = 13;
/// Hard limit of one payload: a description of 32 ports is about 8 KiB.
pub(crate) const MAX_PAYLOAD: usize = 64 << 10;
/// NCCL reads at most 32 `NCCL_IB_HCA` entries; no pod has more rails.
pub const MAX_PORTS: usize = 32;
/// Every local x remote pair of two 32-port pods.
pub const MAX_PAIRS: usize = MAX_PORTS * MAX_PORTS;
/// Longest text a peer may send (a failure's detail, a refusal's reason).
pub const MAX_TEXT: usize = 1024;
/// Largest bandwidth message (1 GiB, what most adapters allow in one work request).
pub(crate) const MAX_BYTES: u32 = 1 << 30;
/// The most pods of one job a tagged test may come from (its rank is below it).
pub const MAX_JOB_SIZE: u32 = 1 << 16;
/// The fastest figure a port or a pair may carry, in kb/s (10 Tb/s: far above any port's rate).
pub const MAX_KBPS: u64 = 10_000_000_000;

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

/// One RDMA port as its owner describes it: what a connection needs and a failure is explained by.
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
    /// The port's rated speed in kb/s (`ports/N/rate`), hardware ports only.
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
    /// A test opened on a job's behalf, so a listener of that job serves only its predecessor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate: Option<Tag>,
}

/// Who opens a tagged test: the initiator's job and rank, and with a job secret the front end's
/// MAC over both; the pair test checks its form only, the front end the rest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tag {
    pub job: String,
    pub rank: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
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

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Figures {
    pub median_us: Option<f64>,
    pub p99_us: Option<f64>,
    pub gbps: Option<f64>,
}

impl Eq for Figures {}

/// A message's payload is its content's JSON alone (the kind is in the header).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
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
}

impl Message {
    pub fn kind(&self) -> u8 {
        match self {
            Message::Hello(_) => 1,
            Message::Setup(_) => 2,
            Message::Ready(_) => 3,
            Message::Done(_) => 4,
            Message::Refuse(_) => 5,
        }
    }
    pub fn name(&self) -> &'static str {
        kind_name(self.kind())
    }
}

/// The pair test's own kinds; a front end numbers its own above [`LAST_KIND`].
pub const LAST_KIND: u8 = 5;

pub(crate) fn kind_name(kind: u8) -> &'static str {
    ["unknown", "hello", "setup", "ready", "done", "refuse"].get(usize::from(kind)).unwrap_or(&"unknown")
}

/// The messages one connection carries: [`Message`], or a front end's that adds its kinds.
pub trait Protocol: Sized {
    /// Whether `kind` is one of this protocol's (else refused from the header).
    fn knows(kind: u8) -> bool;
    /// The message of `kind` from its payload: every field checked, every peer text printable.
    fn decode_payload(kind: u8, payload: &[u8]) -> Result<Self, WireError>;
    /// Its kind and payload, refused where decoding would refuse it.
    fn encode_payload(&self) -> Result<(u8, Vec<u8>), WireError>;
    fn name(&self) -> &'static str;
    /// The pair test's own message, where this is one (a session reports a refusal as the peer's).
    fn as_pair(&self) -> Option<&Message>;
}

impl Protocol for Message {
    fn knows(kind: u8) -> bool {
        (1..=LAST_KIND).contains(&kind)
    }
    fn decode_payload(kind: u8, payload: &[u8]) -> Result<Message, WireError> {
        let name = kind_name(kind);
        let msg = match kind {
            1 => Message::Hello(json(name, payload)?),
            2 => Message::Setup(json(name, payload)?),
            3 => Message::Ready(json(name, payload)?),
            4 => Message::Done(json(name, payload)?),
            5 => Message::Refuse(json(name, payload)?),
            other => return Err(WireError::Kind(other)),
        };
        validate(&msg)?;
        Ok(printable(msg))
    }
    fn encode_payload(&self) -> Result<(u8, Vec<u8>), WireError> {
        validate(self)?;
        let payload =
            serde_json::to_vec(self).map_err(|e| WireError::Json { kind: self.name(), detail: e.to_string() })?;
        Ok((self.kind(), payload))
    }
    fn name(&self) -> &'static str {
        Message::name(self)
    }
    fn as_pair(&self) -> Option<&Message> {
        Some(self)
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

pub fn fail_if<D: Into<String>>(bad: bool, what: &'static str, detail: impl FnOnce() -> D) -> Result<(), WireError> {
    if bad {
        return Err(field(what, detail()));
    }
    Ok(())
}

pub fn field(field: &'static str, detail: impl Into<String>) -> WireError {
    WireError::Field { field, detail: detail.into() }
}

/// Checks a frame header: (kind, payload length), so an over-long frame is refused unread.
pub fn header(h: &[u8]) -> Result<(u8, usize), WireError> {
    header_as::<Message>(h)
}

/// [`header`] for the kinds of protocol `P`.
pub fn header_as<P: Protocol>(h: &[u8]) -> Result<(u8, usize), WireError> {
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
    if !P::knows(kind) {
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
    decode_as(bytes)
}

/// [`decode`] for protocol `P`.
pub fn decode_as<P: Protocol>(bytes: &[u8]) -> Result<P, WireError> {
    let (kind, len) = header_as::<P>(bytes)?;
    let payload = &bytes[HEADER_LEN..];
    if payload.len() != len {
        return Err(WireError::Length { declared: len, got: payload.len() });
    }
    P::decode_payload(kind, payload)
}

/// A payload's JSON as the message named `name`, unchecked (a front end's decoding starts here);
/// serde's message, which quotes the peer's bytes, made printable.
pub fn json<'a, T: Deserialize<'a>>(name: &'static str, payload: &'a [u8]) -> Result<T, WireError> {
    serde_json::from_slice(payload)
        .map_err(|e| WireError::Json { kind: name, detail: clean::bounded(&e.to_string(), clean::MAX_SHOWN) })
}

/// Every free text a peer sends (a refusal, a fault's error) made printable and bounded.
pub(crate) fn printable(mut msg: Message) -> Message {
    let fault = |f: &mut Fault| f.error = clean::bounded(&f.error, MAX_TEXT);
    match &mut msg {
        Message::Refuse(r) => *r = clean::bounded(r, MAX_TEXT),
        Message::Setup(qps) => qps.iter_mut().filter_map(|q| q.fault.as_mut()).for_each(fault),
        Message::Ready(st) | Message::Done(st) => st.iter_mut().filter_map(|s| s.fault.as_mut()).for_each(fault),
        Message::Hello(_) => {}
    }
    msg
}

/// A message to one frame. Fails only on a message that `decode` would refuse.
pub fn encode(msg: &Message) -> Result<Vec<u8>, WireError> {
    encode_as(msg)
}

/// [`encode`] for protocol `P`.
pub fn encode_as<P: Protocol>(msg: &P) -> Result<Vec<u8>, WireError> {
    let (kind, payload) = msg.encode_payload()?;
    if payload.len() > MAX_PAYLOAD {
        return Err(WireError::TooLong(payload.len() as u64));
    }
    let mut out = Vec::with_capacity(HEADER_LEN + payload.len());
    out.extend_from_slice(MAGIC);
    out.push(VERSION);
    out.push(kind);
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
                fail_if(q.qpn >= 1 << 24, "setup.qpn", || format!("{} is not a 24-bit queue pair number", q.qpn))?;
                fail_if(q.psn >= 1 << 24, "setup.psn", || format!("{} is not a 24-bit packet sequence number", q.psn))?;
                q.fault.as_ref().map_or(Ok(()), validate_fault)?;
            }
            Ok(())
        }
        Message::Ready(states) | Message::Done(states) => {
            count("pairs", states.len())?;
            for (i, s) in states.iter().enumerate() {
                order("pair", i, s.pair)?;
                s.fault.as_ref().map_or(Ok(()), validate_fault)?;
                for v in s.figures.iter().flat_map(|f| [f.median_us, f.p99_us, f.gbps]).flatten() {
                    let bad = !(v.is_finite() && (0.0..1e9).contains(&v));
                    fail_if(bad, "figures", || format!("{v} is not a measurement"))?;
                }
            }
            Ok(())
        }
        Message::Refuse(reason) => check_text("refuse", reason),
    }
}

fn count(what: &'static str, n: usize) -> Result<(), WireError> {
    fail_if(n > MAX_PAIRS, what, || format!("{n} pairs, more than {MAX_PAIRS}"))
}

/// Pairs come in order 0, 1, 2...: a peer cannot name a pair twice or skip one.
fn order(what: &'static str, i: usize, pair: u16) -> Result<(), WireError> {
    fail_if(usize::from(pair) != i, what, || format!("entry {i} names pair {pair}"))
}

/// A peer's free text: at most [`MAX_TEXT`] bytes (made printable after decoding).
pub fn check_text(what: &'static str, s: &str) -> Result<(), WireError> {
    fail_if(s.len() > MAX_TEXT, what, || format!("{} bytes, more than {MAX_TEXT}", s.len()))
}

/// Device and net-device names: what the kernel allows, nothing a terminal or shell reads.
pub fn check_name(what: &'static str, s: &str) -> Result<(), WireError> {
    let ok = !s.is_empty() && s.len() <= 64 && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"_.-@:".contains(&b));
    fail_if(!ok, what, || format!("{:?} is not a device name", s.escape_debug().to_string()))
}

fn validate_fault(f: &Fault) -> Result<(), WireError> {
    fail_if(
        f.step.is_empty() || f.step.len() > 32 || !f.step.bytes().all(|b| b.is_ascii_graphic()),
        "fault.step",
        || format!("{:?}", f.step.escape_debug().to_string()),
    )?;
    check_text("fault.error", &f.error)
}

/// Range of `--bytes`, `--iters` and `--duration-ms` a listener accepts from a client.
pub fn check_params(bytes: u32, iters: u32, duration_ms: u32) -> Result<(), WireError> {
    fail_if(!(8..=MAX_BYTES).contains(&bytes), "bytes", || format!("{bytes} is not in 8..={MAX_BYTES}"))?;
    fail_if(!(1..=1_000_000).contains(&iters), "iters", || format!("{iters} is not in 1..=1000000"))?;
    fail_if(duration_ms > 60_000, "duration_ms", || format!("{duration_ms} is over 60000"))
}

/// Host names and addresses as a peer may name itself (never read by a shell or a terminal).
pub fn check_host(what: &'static str, h: &str) -> Result<(), WireError> {
    let ok = !h.is_empty() && h.len() <= 253 && h.bytes().all(|b| b.is_ascii_alphanumeric() || b"-.:[]_".contains(&b));
    fail_if(!ok, what, || format!("{:?}", h.escape_debug().to_string()))
}

/// A job identity: 1..=253 printable ASCII bytes (a Kubernetes name or UID, or HOST:PORT/SIZE).
pub fn check_job(job: &str) -> Result<(), WireError> {
    fail_if(job.is_empty() || job.len() > 253 || !job.bytes().all(|b| b.is_ascii_graphic()), "job", || {
        format!("{:?} is not 1..=253 printable ASCII bytes", job.escape_debug().to_string())
    })
}

/// A MAC (64 hex digits) or a nonce (32) as the wire carries them.
pub fn check_hex(what: &'static str, v: Option<&String>, len: usize) -> Result<(), WireError> {
    match v {
        Some(h) if h.len() != len || !h.bytes().all(|b| b.is_ascii_hexdigit()) => {
            Err(field(what, format!("not {len} hex digits ({} bytes)", h.len())))
        }
        _ => Ok(()),
    }
}

fn validate_hello(h: &Hello) -> Result<(), WireError> {
    check_host("hello.host", &h.host)?;
    if let Some(g) = &h.gate {
        check_job(&g.job)?;
        check_hex("hello.gate.mac", g.mac.as_ref(), 64)?;
        fail_if(g.rank >= MAX_JOB_SIZE, "hello.gate.rank", || format!("{} is over the largest job", g.rank))?;
    }
    let n = h.ports.len();
    fail_if(n == 0 || n > MAX_PORTS, "hello.ports", || format!("{n} ports, not 1..={MAX_PORTS}"))?;
    check_params(h.bytes, h.iters, h.duration_ms)?;
    h.ports.iter().try_for_each(check_port)
}

/// One port as a peer describes it: every field in range.
pub fn check_port(p: &PortInfo) -> Result<(), WireError> {
    check_name("port.device", &p.device)?;
    p.netdev.iter().try_for_each(|n| check_name("port.netdev", n))?;
    fail_if(p.port == 0, "port.port", || "port numbers start at 1")?;
    fail_if(p.rate_kbps.is_some_and(|r| r == 0 || r > MAX_KBPS), "port.rate_kbps", || {
        format!("{:?} is not in 1..={MAX_KBPS}", p.rate_kbps)
    })?;
    fail_if(![256, 512, 1024, 2048, 4096].contains(&p.mtu), "port.mtu", || {
        format!("{} is not an IB MTU (256..4096)", p.mtu)
    })?;
    if let Some(g) = p.gid.as_deref().filter(|g| parse_gid(g).is_none()) {
        return Err(field("port.gid", format!("{:?} is not a GID", g.escape_debug().to_string())));
    }
    match p.link_layer {
        LinkLayer::Ethernet => {
            fail_if(p.gid.is_none(), "port.gid", || "a RoCE port without a GID")?;
            fail_if(p.gid_index.is_none(), "port.gid_index", || "a RoCE port without a GID index")?;
            if let Some(t) = p.gid_type.as_deref().filter(|t| !matches!(*t, "RoCE v2" | "IB/RoCE v1")) {
                return Err(field("port.gid_type", format!("{:?}", t.escape_debug().to_string())));
            }
        }
        LinkLayer::InfiniBand => {
            let lid = p.lid.unwrap_or(0);
            fail_if(lid == 0, "port.lid", || "an InfiniBand port without a LID")?;
            fail_if(lid >= 0xc000, "port.lid", || format!("{lid:#x} is a multicast LID, not a port's"))?;
        }
    }
    Ok(())
}

/// A GID in sysfs's form (eight groups of four hex digits) to its 16 bytes.
pub(crate) fn parse_gid(text: &str) -> Option<[u8; 16]> {
    nw_nccl::gid::parse_fixed(text).map(|a| a.octets())
}

#[cfg(test)]
#[path = "wire_tests.rs"]
pub(crate) mod tests;
