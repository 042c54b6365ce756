//! The gate's frames (kinds 6-9, and the tag of a gate pair test's hello) and their checks: the
//! same framing and the same rule as ping's own (every field's range checked before anyone
//! reads it), kept apart only for the length of `wire.rs`.

use serde::{Deserialize, Serialize};

use super::{check_params, field, name, text, validate_port, PortInfo, WireError, MAX_GATE_SIZE, MAX_PORTS};

/// Who opens a gate pair test: the job and the rank of the initiating pod.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GateTag {
    pub job: String,
    pub rank: u32,
    /// With a job secret: its MAC over this tag, bound to the successor's nonce
    /// (`pairtest::seal::seal_tag`), so that only this job's pods are served.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
}

/// How a pod's NCCL bootstrap reaches rank 0: the interface nccl-wrap exported as
/// `NCCL_SOCKET_IFNAME` (or the user's, kept) and the family of its address towards the
/// coordinator, when known. NCCL's out-of-band sockets connect every rank to rank 0's: a pod whose
/// family differs cannot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bootstrap {
    pub ifname: String,
    /// `AF_INET` or `AF_INET6`; none where the user's interface was kept unread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub family: Option<String>,
}

/// The gate: a pod asks its job's coordinator (rank 0) to take part (pod -> coordinator).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Join {
    /// The job identity every pod of one job shares (`NCCL_WRAP_GATE_ID`).
    pub job: String,
    pub rank: u32,
    pub size: u32,
    pub host: String,
    /// The TCP port this pod serves its predecessor's pair test on.
    pub port: u16,
    /// This pod's rails, as ping describes them (empty when `problem` says why).
    pub ports: Vec<PortInfo>,
    /// Why this pod cannot take part in the pair tests (no usable port, ibverbs not used).
    pub problem: Option<String>,
    /// This pod's fresh nonce: every later frame of its session is bound to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nonce: Option<String>,
    /// This pod's bootstrap interface, compared with rank 0's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap: Option<Bootstrap>,
    /// The job secret's MAC over this frame (`pairtest::seal`); absent when the job has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
}

/// The gate: the coordinator's answer to a pod once every rank is in: whom to test, and how.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Assign {
    pub successor: u32,
    /// The successor's name, as it joined.
    pub successor_host: String,
    /// The successor's `HOST:PORT` as the coordinator reached it.
    pub target: String,
    pub predecessor: u32,
    /// The coordinator's test sizes: every pair of the job runs the same test.
    pub all_pairs: bool,
    pub bytes: u32,
    pub iters: u32,
    pub duration_ms: u32,
    pub timeout_ms: u32,
    /// How long the coordinator waits for every pod's results, from its sending this.
    pub results_ms: u32,
    /// This gate's nonce (the coordinator's, fresh each run): the rest of the session is bound
    /// to it, so that no frame of another gate run is taken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nonce: Option<String>,
    /// The successor's own nonce (its join's; rank 0's is the gate's): the pair test's hello
    /// towards it is bound to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub successor_nonce: Option<String>,
    /// The job secret's MAC over this frame (`pairtest::seal`); absent when the job has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
}

/// The gate: one finding about one pod or one pair, as the verdict names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Finding {
    pub rank: u32,
    pub host: String,
    pub peer_rank: Option<u32>,
    pub peer_host: Option<String>,
    /// The rail on `rank`'s side (`device:port`), and on the peer's.
    pub rail: Option<String>,
    pub peer_rail: Option<String>,
    /// `pass`, `warn` or `fail`.
    pub status: String,
    /// A cause id of ping's (docs/ping.md), or the gate's own (`missing`, `no-result`).
    pub cause: Option<String>,
    pub summary: String,
    pub hint: String,
    /// The pair's measured bandwidth, and the slower end's rated speed, in kb/s (what rank 0
    /// judges a slow pair by: `pairtest::slow`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kbps: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rated_kbps: Option<u64>,
}

/// The gate: one pod's pairs towards its successor (pod -> coordinator).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Report {
    pub rank: u32,
    pub pairs: Vec<Finding>,
    /// The job secret's MAC over this frame (`pairtest::seal`); absent when the job has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
}

/// The gate: the coordinator's decision, the same for every pod (coordinator -> pods).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Verdict {
    /// Start the command.
    pub go: bool,
    pub size: u32,
    /// Pairs tested, and how many failed.
    pub pairs: u32,
    pub failed_total: u32,
    /// The ranks that never joined (at most [`MAX_LISTED`](super::MAX_LISTED)), and how many in all.
    pub missing: Vec<u32>,
    pub missing_total: u32,
    /// What failed, most important first (at most [`MAX_LISTED`](super::MAX_LISTED)).
    pub findings: Vec<Finding>,
    /// The pairs that passed but slowly, slowest first (at most
    /// [`MAX_LISTED`](super::MAX_LISTED)), and how many in all; with a refusal of slow pairs
    /// asked for, they are failures instead.
    #[serde(default)]
    pub slow: Vec<Finding>,
    #[serde(default)]
    pub slow_total: u32,
    /// The job secret's MAC over this frame (`pairtest::seal`); absent when the job has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
}

/// Host names and addresses as a peer may name itself (never read by a shell or a terminal).
pub(super) fn host(what: &'static str, h: &str) -> Result<(), WireError> {
    let ok = !h.is_empty() && h.len() <= 253 && h.bytes().all(|b| b.is_ascii_alphanumeric() || b"-.:[]_".contains(&b));
    if !ok {
        return Err(field(what, format!("{:?}", h.escape_debug().to_string())));
    }
    Ok(())
}

/// A job identity: 1..=253 printable ASCII bytes (a Kubernetes name or UID, or HOST:PORT/SIZE).
pub fn check_job(job: &str) -> Result<(), WireError> {
    if job.is_empty() || job.len() > 253 || !job.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(field("job", format!("{:?} is not 1..=253 printable ASCII bytes", job.escape_debug().to_string())));
    }
    Ok(())
}

/// A MAC (64 hex digits) and a nonce (32) as the wire carries them.
pub(super) fn hex(what: &'static str, v: Option<&String>, len: usize) -> Result<(), WireError> {
    match v {
        Some(h) if h.len() != len || !h.bytes().all(|b| b.is_ascii_hexdigit()) => {
            Err(field(what, format!("not {len} hex digits ({} bytes)", h.len())))
        }
        _ => Ok(()),
    }
}

pub(super) fn validate_join(j: &Join) -> Result<(), WireError> {
    check_job(&j.job)?;
    hex("join.nonce", j.nonce.as_ref(), 32)?;
    hex("join.mac", j.mac.as_ref(), 64)?;
    host("join.host", &j.host)?;
    if !(1..=MAX_GATE_SIZE).contains(&j.size) || j.rank >= j.size {
        return Err(field("join.rank", format!("rank {} of size {} (size in 1..={MAX_GATE_SIZE})", j.rank, j.size)));
    }
    if j.port == 0 {
        return Err(field("join.port", "port 0"));
    }
    if j.ports.len() > MAX_PORTS || (j.ports.is_empty() && j.problem.is_none()) {
        return Err(field("join.ports", format!("{} ports, and no problem named", j.ports.len())));
    }
    if let Some(p) = &j.problem {
        text("join.problem", p)?;
    }
    if let Some(b) = &j.bootstrap {
        name("join.bootstrap.ifname", &b.ifname)?;
        if !matches!(b.family.as_deref(), None | Some("AF_INET" | "AF_INET6")) {
            return Err(field("join.bootstrap.family", format!("{:?}", b.family)));
        }
    }
    j.ports.iter().try_for_each(validate_port)
}

pub(super) fn validate_assign(a: &Assign) -> Result<(), WireError> {
    hex("assign.nonce", a.nonce.as_ref(), 32)?;
    hex("assign.successor_nonce", a.successor_nonce.as_ref(), 32)?;
    hex("assign.mac", a.mac.as_ref(), 64)?;
    if a.successor >= MAX_GATE_SIZE || a.predecessor >= MAX_GATE_SIZE {
        return Err(field("assign", "a rank over the largest job"));
    }
    host("assign.successor_host", &a.successor_host)?;
    let Some((h, port)) = a.target.rsplit_once(':') else {
        return Err(field("assign.target", "no :PORT"));
    };
    host("assign.target", h.trim_start_matches('[').trim_end_matches(']'))?;
    if !port.parse::<u16>().is_ok_and(|p| p > 0) {
        return Err(field("assign.target", format!("{port:?} is not a port")));
    }
    check_params(a.bytes, a.iters, a.duration_ms)?;
    if !(1..=600_000).contains(&a.timeout_ms) || a.results_ms > 24 * 3600 * 1000 {
        return Err(field("assign.timeout_ms", "out of range"));
    }
    Ok(())
}

pub(super) fn validate_finding(f: &Finding) -> Result<(), WireError> {
    host("finding.host", &f.host)?;
    if let Some(h) = &f.peer_host {
        host("finding.peer_host", h)?;
    }
    for r in [&f.rail, &f.peer_rail].into_iter().flatten() {
        name("finding.rail", r)?;
    }
    if !matches!(f.status.as_str(), "pass" | "warn" | "fail") {
        return Err(field("finding.status", format!("{:?}", f.status.escape_debug().to_string())));
    }
    if let Some(c) = &f.cause {
        if c.is_empty() || c.len() > 32 || !c.bytes().all(|b| b.is_ascii_lowercase() || b == b'-') {
            return Err(field("finding.cause", format!("{:?}", c.escape_debug().to_string())));
        }
    }
    if [f.kbps, f.rated_kbps].into_iter().flatten().any(|m| m > super::MAX_KBPS) {
        return Err(field("finding.kbps", format!("over {} kb/s", super::MAX_KBPS)));
    }
    text("finding.summary", &f.summary)?;
    text("finding.hint", &f.hint)
}
