//! The gate's frames (kinds 6 to 11) over the pair test's framing, beside its hello and refusal,
//! each field range-checked and each peer text made printable before anyone reads it. Pure: a
//! fuzz target calls [`decode`]. It never lets through a frame that `decode` would refuse.

use serde::{Deserialize, Serialize};

use nw_pairtest::clean;
use nw_pairtest::wire::{
    self, check_hex as hex, check_host as host, check_name as name, check_params, check_port, check_text as text,
    fail_if, field, Message, PortInfo, Protocol, WireError, MAX_KBPS, MAX_PAIRS, MAX_TEXT,
};

pub use nw_pairtest::wire::{check_job, MAX_PORTS};

/// The most pods one job may have.
pub const MAX_GATE_SIZE: u32 = wire::MAX_JOB_SIZE;
/// The most findings or missing ranks a verdict lists (the counts cover the rest).
pub const MAX_LISTED: usize = 64;

/// How a pod's NCCL bootstrap reaches rank 0: its `NCCL_SOCKET_IFNAME` and, when known, the
/// family of its address towards the coordinator.
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
    /// The coordinator's [`Challenge`] on this connection, which the join's MAC covers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub challenge: Option<String>,
    /// This pod's bootstrap interface, compared with rank 0's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap: Option<Bootstrap>,
    /// This pod asks for `--gate-prune`: rank 0 drops rails only where every pod does.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub prune: bool,
    /// The job secret's MAC over this frame (`gate::seal`), absent without a secret; assign, report and verdict too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
}

/// The gate: a pod asks the coordinator for a challenge before it joins (pod -> coordinator).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Knock {
    pub job: String,
    pub rank: u32,
}

/// The gate: the coordinator's challenge on one connection, which its join answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Challenge {
    pub nonce: String,
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
    /// This gate run's nonce: the rest of the session is bound to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nonce: Option<String>,
    /// The successor's join nonce (rank 0's: the gate's), which the hello towards it is bound to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub successor_nonce: Option<String>,
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
    /// The pair's measured bandwidth and the slower end's rated speed, in kb/s.
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
}

/// The gate: a rail dropped on every pod (`--gate-prune`): its place in each pod's list, and the
/// index of the first finding that failed over it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dropped {
    pub position: u32,
    pub finding: u32,
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
    /// The ranks that never joined (at most [`MAX_LISTED`]), and how many in all.
    pub missing: Vec<u32>,
    pub missing_total: u32,
    /// What failed, most important first (at most [`MAX_LISTED`]).
    pub findings: Vec<Finding>,
    /// The pairs that passed slowly, slowest first (at most [`MAX_LISTED`]), and how many in all.
    #[serde(default)]
    pub slow: Vec<Finding>,
    #[serde(default)]
    pub slow_total: u32,
    /// The rails every pod drops before NCCL starts (`--gate-prune`; only with `go`), by place.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dropped: Vec<Dropped>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
}

fn validate_join(j: &Join) -> Result<(), WireError> {
    check_job(&j.job)?;
    hex("join.nonce", j.nonce.as_ref(), 32)?;
    hex("join.challenge", j.challenge.as_ref(), 32)?;
    hex("join.mac", j.mac.as_ref(), 64)?;
    host("join.host", &j.host)?;
    fail_if(!(1..=MAX_GATE_SIZE).contains(&j.size) || j.rank >= j.size, "join.rank", || {
        format!("rank {} of size {} (size in 1..={MAX_GATE_SIZE})", j.rank, j.size)
    })?;
    fail_if(j.port == 0, "join.port", || "port 0")?;
    fail_if(j.ports.len() > MAX_PORTS || (j.ports.is_empty() && j.problem.is_none()), "join.ports", || {
        format!("{} ports, and no problem named", j.ports.len())
    })?;
    j.problem.iter().try_for_each(|p| text("join.problem", p))?;
    if let Some(b) = &j.bootstrap {
        name("join.bootstrap.ifname", &b.ifname)?;
        let family = matches!(b.family.as_deref(), None | Some("AF_INET" | "AF_INET6"));
        fail_if(!family, "join.bootstrap.family", || format!("{:?}", b.family))?;
    }
    j.ports.iter().try_for_each(check_port)
}

fn validate_assign(a: &Assign) -> Result<(), WireError> {
    hex("assign.nonce", a.nonce.as_ref(), 32)?;
    hex("assign.successor_nonce", a.successor_nonce.as_ref(), 32)?;
    hex("assign.mac", a.mac.as_ref(), 64)?;
    let far = a.successor >= MAX_GATE_SIZE || a.predecessor >= MAX_GATE_SIZE;
    fail_if(far, "assign", || "a rank over the largest job")?;
    host("assign.successor_host", &a.successor_host)?;
    let Some((h, port)) = a.target.rsplit_once(':') else {
        return Err(field("assign.target", "no :PORT"));
    };
    host("assign.target", h.trim_start_matches('[').trim_end_matches(']'))?;
    fail_if(!port.parse::<u16>().is_ok_and(|p| p > 0), "assign.target", || format!("{port:?} is not a port"))?;
    check_params(a.bytes, a.iters, a.duration_ms)?;
    let bad = !(1..=600_000).contains(&a.timeout_ms) || a.results_ms > 24 * 3600 * 1000;
    fail_if(bad, "assign.timeout_ms", || "out of range")
}

fn validate_finding(f: &Finding) -> Result<(), WireError> {
    host("finding.host", &f.host)?;
    f.peer_host.iter().try_for_each(|h| host("finding.peer_host", h))?;
    [&f.rail, &f.peer_rail].into_iter().flatten().try_for_each(|r| name("finding.rail", r))?;
    let quoted = |t: &str| format!("{:?}", t.escape_debug().to_string());
    fail_if(!matches!(f.status.as_str(), "pass" | "warn" | "fail"), "finding.status", || quoted(&f.status))?;
    if let Some(c) = &f.cause {
        let bad = c.is_empty() || c.len() > 32 || !c.bytes().all(|b| b.is_ascii_lowercase() || b == b'-');
        fail_if(bad, "finding.cause", || quoted(c))?;
    }
    let fast = [f.kbps, f.rated_kbps].into_iter().flatten().any(|m| m > MAX_KBPS);
    fail_if(fast, "finding.kbps", || format!("over {MAX_KBPS} kb/s"))?;
    text("finding.summary", &f.summary)?;
    text("finding.hint", &f.hint)
}

/// What one connection of the gate carries: the pair test's own messages and the gate's. A gate
/// frame's payload is its struct's JSON alone (the kind is in the header).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Frame {
    Pair(Message),
    Join(Join),
    Assign(Assign),
    Report(Report),
    Verdict(Verdict),
    Knock(Knock),
    Challenge(Challenge),
}

impl Frame {
    fn kind(&self) -> u8 {
        match self {
            Frame::Pair(m) => m.kind(),
            Frame::Join(_) => 6,
            Frame::Assign(_) => 7,
            Frame::Report(_) => 8,
            Frame::Verdict(_) => 9,
            Frame::Knock(_) => 10,
            Frame::Challenge(_) => 11,
        }
    }
}

/// The gate's kinds' names, from kind 6 on.
const NAMES: [&str; 6] = ["join", "assign", "report", "verdict", "knock", "challenge"];

fn kind_name(kind: u8) -> &'static str {
    NAMES.get(usize::from(kind).wrapping_sub(6)).copied().unwrap_or("unknown")
}

fn validate(f: &Frame) -> Result<(), WireError> {
    match f {
        Frame::Pair(_) => Ok(()),
        Frame::Knock(k) => {
            check_job(&k.job)?;
            fail_if(k.rank >= MAX_GATE_SIZE, "knock.rank", || format!("{} is over the largest job", k.rank))
        }
        Frame::Challenge(c) => hex("challenge.nonce", Some(&c.nonce), 32),
        Frame::Join(j) => validate_join(j),
        Frame::Assign(a) => validate_assign(a),
        Frame::Report(r) => {
            hex("report.mac", r.mac.as_ref(), 64)?;
            let n = r.pairs.len();
            fail_if(n > MAX_PAIRS, "report.pairs", || format!("{n} findings, more than {MAX_PAIRS}"))?;
            r.pairs.iter().try_for_each(validate_finding)
        }
        Frame::Verdict(v) => {
            hex("verdict.mac", v.mac.as_ref(), 64)?;
            let (size, failed, listed) = (v.size, v.failed_total, MAX_LISTED);
            let long = [v.findings.len(), v.missing.len(), v.slow.len()].into_iter().any(|n| n > listed);
            fail_if(long, "verdict", || format!("more than {listed} findings, slow pairs or missing ranks listed"))?;
            let slow = (v.slow_total as usize) < v.slow.len() || v.slow_total > v.pairs;
            fail_if(slow, "verdict.slow_total", || "more slow pairs listed than counted, or than tested")?;
            let bad = !(1..=MAX_GATE_SIZE).contains(&size);
            fail_if(bad, "verdict.size", || format!("{size} is not in 1..={MAX_GATE_SIZE}"))?;
            let outside = v.missing.iter().any(|&r| r >= v.size) || (v.missing_total as usize) < v.missing.len();
            fail_if(outside, "verdict.missing", || "a rank outside the job, or more listed than counted")?;
            let over = failed as usize > v.pairs as usize + MAX_GATE_SIZE as usize;
            fail_if(over, "verdict.failed_total", || format!("{failed} is out of range"))?;
            v.findings.iter().chain(&v.slow).try_for_each(validate_finding)?;
            // The dropped rails: only with `go`, in rising places below MAX_PORTS, each naming a pair.
            let mut last = None;
            for d in &v.dropped {
                let pair = v.findings.get(d.finding as usize).filter(|f| f.rail.is_some() && f.peer_rail.is_some());
                let bad = !v.go || d.position as usize >= MAX_PORTS || last >= Some(d.position) || pair.is_none();
                fail_if(bad, "verdict.dropped", || format!("position {} (finding {})", d.position, d.finding))?;
                last = Some(d.position);
            }
            Ok(())
        }
    }
}

/// Every free text a pod sends (its problem, a finding's or a slow pair's summary and hint) made printable and
/// bounded, so that no log line, JSON or termination message carries a pod's escape sequence.
pub(crate) fn printable(mut f: Frame) -> Frame {
    let finding = |f: &mut Finding| {
        f.summary = clean::bounded(&f.summary, MAX_TEXT);
        f.hint = clean::bounded(&f.hint, MAX_TEXT);
    };
    match &mut f {
        Frame::Join(j) => j.problem.iter_mut().for_each(|p| *p = clean::bounded(p, MAX_TEXT)),
        Frame::Report(r) => r.pairs.iter_mut().for_each(finding),
        Frame::Verdict(v) => v.findings.iter_mut().chain(&mut v.slow).for_each(finding),
        Frame::Pair(_) | Frame::Assign(_) | Frame::Knock(_) | Frame::Challenge(_) => {}
    }
    f
}

impl Protocol for Frame {
    fn knows(kind: u8) -> bool {
        Message::knows(kind) || (6..=11).contains(&kind)
    }
    fn decode_payload(kind: u8, payload: &[u8]) -> Result<Frame, WireError> {
        let name = kind_name(kind);
        let f = match kind {
            6 => Frame::Join(wire::json(name, payload)?),
            7 => Frame::Assign(wire::json(name, payload)?),
            8 => Frame::Report(wire::json(name, payload)?),
            9 => Frame::Verdict(wire::json(name, payload)?),
            10 => Frame::Knock(wire::json(name, payload)?),
            11 => Frame::Challenge(wire::json(name, payload)?),
            other => return Message::decode_payload(other, payload).map(Frame::Pair),
        };
        validate(&f)?;
        Ok(printable(f))
    }
    fn encode_payload(&self) -> Result<(u8, Vec<u8>), WireError> {
        if let Frame::Pair(m) = self {
            return m.encode_payload();
        }
        validate(self)?;
        let payload =
            serde_json::to_vec(self).map_err(|e| WireError::Json { kind: self.name(), detail: e.to_string() })?;
        Ok((self.kind(), payload))
    }
    fn name(&self) -> &'static str {
        self.as_pair().map_or_else(|| kind_name(self.kind()), Message::name)
    }
    fn as_pair(&self) -> Option<&Message> {
        let Frame::Pair(m) = self else { return None };
        Some(m)
    }
}

/// One whole frame of the gate's connections, every field checked.
pub fn decode(bytes: &[u8]) -> Result<Frame, WireError> {
    wire::decode_as(bytes)
}

/// A frame of the gate's to bytes; fails only on a frame that [`decode`] would refuse.
pub fn encode(f: &Frame) -> Result<Vec<u8>, WireError> {
    wire::encode_as(f)
}

/// A frame's header: (kind, payload length), an unknown kind or an over-long frame refused.
pub fn header(h: &[u8]) -> Result<(u8, usize), WireError> {
    wire::header_as::<Frame>(h)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_ports::roce_port;
    use nw_pairtest::wire::{Hello, Tag};

    fn hello() -> Hello {
        Hello {
            host: "train-0.train".into(),
            ports: vec![roce_port("mlx5_6", 7), roce_port("mlx5_7", 7)],
            all_pairs: false,
            bytes: 1 << 20,
            iters: 1000,
            duration_ms: 1000,
            gate: None,
        }
    }

    fn frame(kind: u8, payload: &[u8]) -> Vec<u8> {
        let mut f = b"NCWPING".to_vec();
        f.push(1);
        f.push(kind);
        f.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        f.extend_from_slice(payload);
        f
    }

    fn payload_of(f: &Frame) -> Vec<u8> {
        match f {
            Frame::Pair(Message::Hello(h)) => serde_json::to_vec(h),
            Frame::Pair(other) => panic!("not a gate test's frame: {other:?}"),
            Frame::Join(j) => serde_json::to_vec(j),
            Frame::Assign(a) => serde_json::to_vec(a),
            Frame::Report(r) => serde_json::to_vec(r),
            Frame::Verdict(v) => serde_json::to_vec(v),
            Frame::Knock(k) => serde_json::to_vec(k),
            Frame::Challenge(c) => serde_json::to_vec(c),
        }
        .expect("json")
    }

    fn join() -> Join {
        Join {
            job: "llm-train-master-0:18516/4".into(),
            rank: 2,
            size: 4,
            host: "llm-train-worker-1".into(),
            port: 18516,
            ports: vec![roce_port("mlx5_6", 9)],
            problem: None,
            nonce: None,
            challenge: None,
            bootstrap: Some(Bootstrap { ifname: "eth0".into(), family: Some("AF_INET".into()) }),
            prune: true,
            mac: None,
        }
    }

    fn finding(status: &str, cause: Option<&str>) -> Finding {
        Finding {
            rank: 1,
            host: "train-1".into(),
            peer_rank: Some(2),
            peer_host: Some("train-2".into()),
            rail: Some("mlx5_6:1".into()),
            peer_rail: Some("mlx5_6:1".into()),
            status: status.into(),
            cause: cause.map(str::to_owned),
            summary: "the local end's packets were never acknowledged".into(),
            hint: "check the VLAN".into(),
            kbps: None,
            rated_kbps: None,
        }
    }

    fn assign() -> Assign {
        Assign {
            successor: 3,
            successor_host: "train-3".into(),
            target: "10.0.0.9:18516".into(),
            predecessor: 1,
            all_pairs: false,
            bytes: 1 << 20,
            iters: 1000,
            duration_ms: 1000,
            timeout_ms: 3000,
            results_ms: 9000,
            nonce: None,
            successor_nonce: None,
            mac: None,
        }
    }

    #[test]
    fn the_gate_frames_round_trip() {
        let mut tagged = hello();
        tagged.gate = Some(Tag { job: "uid-1".into(), rank: 3, mac: None });
        let verdict = Verdict {
            go: false,
            size: 4,
            pairs: 4,
            failed_total: 1,
            missing: vec![],
            missing_total: 0,
            findings: vec![finding("fail", Some("retry-exceeded"))],
            slow: vec![Finding {
                status: "warn".into(),
                cause: Some("slow-pair".into()),
                kbps: Some(120_000_000),
                rated_kbps: Some(400_000_000),
                ..finding("warn", None)
            }],
            slow_total: 1,
            dropped: vec![],
            mac: None,
        };
        let pruned = Verdict {
            go: true,
            dropped: vec![Dropped { position: 1, finding: 0 }, Dropped { position: 3, finding: 0 }],
            ..verdict.clone()
        };
        let msgs = vec![
            Frame::Pair(Message::Hello(tagged)),
            Frame::Join(join()),
            Frame::Join(Join { ports: vec![], problem: Some("no usable RDMA port".into()), ..join() }),
            Frame::Assign(assign()),
            Frame::Assign(Assign { target: "[fd00::1]:18516".into(), ..assign() }),
            Frame::Join(Join { nonce: Some("0a".repeat(16)), mac: Some("ff".repeat(32)), ..join() }),
            Frame::Join(Join { challenge: Some("0c".repeat(16)), ..join() }),
            Frame::Knock(Knock { job: "uid-1".into(), rank: 2 }),
            Frame::Challenge(Challenge { nonce: "0d".repeat(16) }),
            Frame::Assign(Assign { nonce: Some("0b".repeat(16)), mac: Some("ee".repeat(32)), ..assign() }),
            Frame::Report(Report {
                rank: 1,
                pairs: vec![finding("pass", None), finding("warn", Some("mtu-mismatch"))],
                mac: None,
            }),
            Frame::Verdict(verdict),
            Frame::Verdict(pruned),
        ];
        for m in msgs {
            let f = encode(&m).expect("encode");
            assert_eq!(decode(&f).expect("decode"), m);
        }
        // Plain ping's hello carries no gate tag, so older peers read it as before.
        let plain = encode(&Frame::Pair(Message::Hello(hello()))).expect("encode");
        assert!(!String::from_utf8_lossy(&plain).contains("gate"));
    }

    #[test]
    fn a_verdicts_peer_texts_decode_printable() {
        let escape = |f: Finding| Finding { summary: "slow\u{1b}]0;pwned\u{7}".into(), hint: "\u{1b}[2J".into(), ..f };
        let v = Verdict {
            go: true,
            size: 4,
            pairs: 4,
            failed_total: 0,
            missing: vec![],
            missing_total: 0,
            findings: vec![escape(finding("warn", None))],
            slow: vec![escape(finding("warn", Some("slow-pair")))],
            slow_total: 1,
            dropped: vec![],
            mac: None,
        };
        let m = Frame::Verdict(v);
        let Ok(Frame::Verdict(got)) = decode(&frame(m.kind(), &payload_of(&m))) else { panic!("verdict") };
        for f in got.findings.iter().chain(&got.slow) {
            let text = format!("{}{}", f.summary, f.hint);
            assert!(!text.contains('\u{1b}') && !text.contains('\u{7}'), "{text:?}");
        }
    }

    #[test]
    fn gate_fields_are_checked() {
        let check = |m: Frame, want: &str| match decode(&frame(m.kind(), &payload_of(&m))) {
            Err(WireError::Field { field, .. }) => assert_eq!(field, want, "{m:?}"),
            other => panic!("{want}: {other:?}"),
        };
        check(Frame::Join(Join { job: "a b".into(), ..join() }), "job");
        check(Frame::Join(Join { job: String::new(), ..join() }), "job");
        check(Frame::Join(Join { rank: 4, ..join() }), "join.rank");
        check(Frame::Join(Join { size: MAX_GATE_SIZE + 1, rank: 0, ..join() }), "join.rank");
        check(Frame::Join(Join { host: "a\u{1b}[2J".into(), ..join() }), "join.host");
        check(Frame::Join(Join { port: 0, ..join() }), "join.port");
        check(Frame::Join(Join { ports: vec![], ..join() }), "join.ports");
        check(Frame::Assign(Assign { target: "$(reboot):1".into(), ..assign() }), "assign.target");
        check(Frame::Assign(Assign { target: "h:0".into(), ..assign() }), "assign.target");
        check(Frame::Assign(Assign { target: "h".into(), ..assign() }), "assign.target");
        check(Frame::Assign(Assign { bytes: 0, ..assign() }), "bytes");
        check(Frame::Assign(Assign { timeout_ms: 0, ..assign() }), "assign.timeout_ms");
        check(Frame::Join(Join { mac: Some("ff".repeat(31)), ..join() }), "join.mac");
        check(Frame::Assign(Assign { successor_nonce: Some("0".into()), ..assign() }), "assign.successor_nonce");
        check(Frame::Join(Join { nonce: Some("zz".repeat(16)), ..join() }), "join.nonce");
        check(Frame::Join(Join { challenge: Some("0c".repeat(15)), ..join() }), "join.challenge");
        check(Frame::Knock(Knock { job: "a\nb".into(), rank: 1 }), "job");
        check(Frame::Knock(Knock { job: "j".into(), rank: MAX_GATE_SIZE }), "knock.rank");
        check(Frame::Challenge(Challenge { nonce: "g".repeat(32) }), "challenge.nonce");
        check(Frame::Assign(Assign { mac: Some("g".repeat(64)), ..assign() }), "assign.mac");
        check(Frame::Report(Report { rank: 0, pairs: vec![], mac: Some(String::new()) }), "report.mac");
        check(Frame::Report(Report { rank: 0, pairs: vec![finding("ok", None)], mac: None }), "finding.status");
        check(
            Frame::Report(Report { rank: 0, pairs: vec![finding("fail", Some("Retry!"))], mac: None }),
            "finding.cause",
        );
        let mut rail = finding("fail", None);
        rail.rail = Some("mlx5_6:1;rm".into());
        check(Frame::Report(Report { rank: 0, pairs: vec![rail], mac: None }), "finding.rail");
        let mut long = finding("fail", None);
        long.summary = "x".repeat(MAX_TEXT + 1);
        check(Frame::Report(Report { rank: 0, pairs: vec![long], mac: None }), "finding.summary");
        let v = Verdict {
            go: true,
            size: 2,
            pairs: 2,
            failed_total: 0,
            missing: vec![2],
            missing_total: 1,
            findings: vec![],
            slow: vec![],
            slow_total: 0,
            dropped: vec![],
            mac: None,
        };
        check(Frame::Verdict(v.clone()), "verdict.missing");
        // A dropped rail out of any pod's range, twice, without go, or naming no failed pair.
        let failed = vec![finding("fail", Some("retry-exceeded"))];
        let drop = |position, finding| Dropped { position, finding };
        for (go, dropped) in [
            (true, vec![drop(MAX_PORTS as u32, 0)]),
            (true, vec![drop(1, 0), drop(1, 0)]),
            (false, vec![drop(1, 0)]),
            (true, vec![drop(1, 1)]),
        ] {
            let v = Verdict { go, missing: vec![], findings: failed.clone(), dropped, ..v.clone() };
            check(Frame::Verdict(v), "verdict.dropped");
        }
        let mut fast = finding("pass", None);
        fast.kbps = Some(u64::MAX);
        check(Frame::Report(Report { rank: 0, pairs: vec![fast], mac: None }), "finding.kbps");
        let unix = Bootstrap { ifname: "eth0".into(), family: Some("AF_UNIX".into()) };
        check(Frame::Join(Join { bootstrap: Some(unix), ..join() }), "join.bootstrap.family");
        let escape = Bootstrap { ifname: "eth0\u{1b}[2J".into(), family: None };
        check(Frame::Join(Join { bootstrap: Some(escape), ..join() }), "join.bootstrap.ifname");
        let listed = Verdict { missing: vec![], slow: vec![finding("warn", None); 2], slow_total: 1, ..v.clone() };
        check(Frame::Verdict(listed), "verdict.slow_total");
        check(
            Frame::Verdict(Verdict {
                missing: vec![],
                findings: vec![finding("fail", None); MAX_LISTED + 1],
                ..v.clone()
            }),
            "verdict",
        );
        check(Frame::Verdict(Verdict { missing: vec![], size: 0, ..v }), "verdict.size");
        let mut h = hello();
        h.gate = Some(Tag { job: "x\ny".into(), rank: 0, mac: None });
        check(Frame::Pair(Message::Hello(h)), "job");
    }

    #[test]
    fn the_gate_seeds_of_the_fuzz_corpus_decode() {
        // fuzz/seed.sh writes them; a seed that does not decode would leave the fuzzer outside the
        // gate's frames.
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/ping_wire");
        for (name, kind) in [
            ("gate-hello", 1),
            ("join", 6),
            ("join-problem", 6),
            ("assign", 7),
            ("report", 8),
            ("verdict", 9),
            ("join-sealed", 6),
            ("assign-sealed", 7),
            ("report-sealed", 8),
            ("verdict-sealed", 9),
            ("refuse-forged", 5),
            ("knock", 10),
            ("challenge", 11),
            ("join-challenged", 6),
        ] {
            let bytes = std::fs::read(dir.join(format!("hand-{name}"))).expect("seed");
            let m = decode(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(m.kind(), kind, "{name}");
        }
    }
}
