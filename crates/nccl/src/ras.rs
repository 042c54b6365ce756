//! NCCL's RAS replies (text `STATUS` and JSON), as NCCL 2.28 prints them, read into one [`View`]
//! and its lines, most important first. Pure, bounded and linear in the reply's size; it must
//! never trust the reply's shape (a malformed line is skipped, never a panic) and never do I/O.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde_json::Value;

/// Findings, and people per finding, kept; the rest are counted in `left_out`.
pub const MAX_ITEMS: usize = 256;
/// Bytes kept of any text taken from the reply (a node name, an error, a summary).
pub const MAX_TEXT: usize = 120;
/// Lines read between two asks of the budget ([`parse_within`]).
pub const STEP: usize = 4096;

/// What a finding says, most important first (the order lines are printed in).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// RAS considers the process dead: unreachable over its network.
    Dead,
    /// No data from the process or rank (stopped, hung in a system call, or just died).
    Missing,
    /// A rank reported an asynchronous error (`Remote process error`...).
    AsyncError,
    /// The ranks of a communicator have launched different numbers of one collective.
    Mismatch,
    /// Anything else RAS lists under Errors or Warnings.
    Other,
}

/// One process or rank a finding names; each part only when the reply said it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Who {
    pub(crate) rank: Option<u32>,
    pub pid: Option<u32>,
    pub(crate) node: Option<String>,
    pub(crate) gpu: Option<u32>,
    /// MISMATCH: the operation this rank has launched up to.
    pub(crate) op: Option<u64>,
    /// What the rank reported (`Remote process error`).
    pub(crate) what: Option<String>,
}

impl Who {
    /// `rank 1 (pid 610 on node n1, GPU 0)`, with what is known; `rank` is its own, or one filled
    /// in from another finding.
    fn name(&self, rank: Option<u32>) -> String {
        let pid_node = [self.pid.map(|p| format!("pid {p}")), self.node.as_ref().map(|n| format!("on node {n}"))];
        let mut inner = pid_node.into_iter().flatten().collect::<Vec<_>>().join(" ");
        if let Some(g) = self.gpu {
            inner = if inner.is_empty() { format!("GPU {g}") } else { format!("{inner}, GPU {g}") };
        }
        match (rank, inner.is_empty()) {
            (Some(r), false) => format!("rank {r} ({inner})"),
            (Some(r), true) => format!("rank {r}"),
            (None, false) => format!("process ({inner})"),
            (None, true) => "a process".to_string(),
        }
    }

    /// What tells one process from another: its pid and node, when the pid is known.
    fn process(&self) -> Option<(u32, Option<&str>)> {
        self.pid.map(|p| (p, self.node.as_deref()))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub kind: Kind,
    /// The communicator's hash, when the finding is about one.
    pub(crate) comm: Option<String>,
    /// MISMATCH: the collective whose counts disagree (`AllReduce`).
    pub(crate) collective: Option<String>,
    /// RAS's own summary line.
    pub summary: String,
    pub who: Vec<Who>,
}

/// One communicator's collective counts summed over its ranks (JSON only): a stall stops them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Progress {
    pub(crate) comm: String,
    pub(crate) ranks: u32,
    pub collectives: u64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Format {
    #[default]
    Text,
    Json,
}

/// What one RAS reply says.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct View {
    pub(crate) format: Format,
    /// `SERVER PROTOCOL N`, absent from servers asked without `CLIENT PROTOCOL`.
    pub protocol: Option<u32>,
    /// `2.28.9`.
    pub nccl_version: Option<String>,
    pub findings: Vec<Finding>,
    pub progress: Vec<Progress>,
    /// Findings or people past [`MAX_ITEMS`].
    pub(crate) left_out: usize,
    /// `ERROR:` lines the server sent before its report (an option it did not know).
    pub(crate) errors: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("the RAS server sent nothing")]
    Empty,
    #[error("the RAS server refused the request: {0}")]
    Refused(String),
    #[error("the reply is not NCCL's RAS report (it starts {0:?}); is another service listening on NCCL_RAS_ADDR?")]
    NotRas(String),
    #[error("the RAS report's JSON cannot be read ({0})")]
    Json(String),
    #[error("reading the RAS report used up its CPU budget: not read further")]
    Budget,
}

/// Printable ASCII, cut to [`MAX_TEXT`] bytes: what may reach a terminal or a log.
pub fn clean(s: &str) -> String {
    let mut out: String = s.trim().chars().map(|c| if c.is_ascii_graphic() || c == ' ' { c } else { '?' }).collect();
    if out.len() > MAX_TEXT {
        out.truncate(MAX_TEXT - 3);
        out.push_str("...");
    }
    out
}

/// Reads a reply, text or JSON, protocol line and `OK` included.
pub fn parse(reply: &str) -> Result<View, ParseError> {
    parse_within(reply, &mut || false)
}

/// [`parse`], asking `spent` every [`STEP`] lines and each communicator whether the caller's
/// budget is used up; `true` ends it with [`ParseError::Budget`].
pub fn parse_within(reply: &str, spent: &mut dyn FnMut() -> bool) -> Result<View, ParseError> {
    let mut protocol = None;
    let mut errors = Vec::new();
    let mut rest = reply;
    // The preamble: `SERVER PROTOCOL N`, `OK` (after SET FORMAT), `ERROR: ...` lines.
    loop {
        let (line, after) = rest.split_once('\n').unwrap_or((rest, ""));
        let t = line.trim();
        if let Some(n) = t.strip_prefix("SERVER PROTOCOL ") {
            protocol = n.trim().parse().ok();
        } else if let Some(e) = t.strip_prefix("ERROR:") {
            if errors.len() < 8 {
                errors.push(clean(e));
            }
        } else if t != "OK" && (!t.is_empty() || after.is_empty()) {
            break;
        }
        rest = after;
        if rest.is_empty() {
            break;
        }
    }
    let body = rest.trim_start();
    let view = if body.starts_with('{') {
        json(body, spent)?
    } else if body.starts_with("NCCL version") {
        text(body, spent)?
    } else if let Some(e) = errors.first() {
        return Err(ParseError::Refused(e.clone()));
    } else if body.is_empty() {
        return Err(ParseError::Empty);
    } else {
        return Err(ParseError::NotRas(clean(&body.chars().take(40).collect::<String>())));
    };
    Ok(View { protocol, errors, ..view })
}

fn push<T>(list: &mut Vec<T>, items: impl IntoIterator<Item = T>, left_out: &mut usize) {
    for item in items {
        if list.len() < MAX_ITEMS {
            list.push(item);
        } else {
            *left_out += 1;
        }
    }
}

/// The text report: the `Errors` and `Warnings` sections' blocks, each a header line and indented
/// lines under it. One pass, each line looked at with the next one only (an underline).
fn text(body: &str, spent: &mut dyn FnMut() -> bool) -> Result<View, ParseError> {
    let version = body.lines().next().and_then(|l| l.strip_prefix("NCCL version "));
    let mut view =
        View { nccl_version: version.and_then(|v| v.split_whitespace().next()).map(clean), ..View::default() };
    let mut in_sections = false;
    // The block under way: its header's kinds and communicator, and how many body lines it had.
    let mut block: Option<(Vec<Kind>, Option<String>, usize)> = None;
    // Its finding under way: a summary line, then the people under it.
    let mut current: Option<Finding> = None;
    let mut lines = body.lines().enumerate().peekable();
    while let Some((i, line)) = lines.next() {
        if i % STEP == STEP - 1 && spent() {
            return Err(ParseError::Budget);
        }
        let t = line.trim();
        let underline = lines.peek().is_some_and(|(_, n)| !n.is_empty() && n.bytes().all(|c| c == b'='));
        let section = (t == "Errors" || t == "Warnings") && underline;
        if !section && (!in_sections || line.bytes().all(|c| c == b'=')) {
            continue;
        }
        if section || t.is_empty() || !line.starts_with(' ') {
            // A section's title, a blank line or the next header ends the block and its finding.
            push(&mut view.findings, current.take(), &mut view.left_out);
            in_sections = true;
            block = (!section && !t.is_empty()).then(|| header(line));
            continue;
        }
        let Some((kinds, comm, n)) = block.as_mut() else { continue };
        if *n > MAX_ITEMS {
            continue;
        }
        *n += 1;
        if t.starts_with("Rank ") || t.starts_with("Process ") {
            if let Some(f) = current.as_mut() {
                push(&mut f.who, [who(t)], &mut view.left_out);
            }
            continue;
        }
        push(&mut view.findings, current.take(), &mut view.left_out);
        // Of the kind its summary speaks of, where the header names several.
        let kind = kind_of_summary(t).filter(|k| kinds.contains(k)).or(kinds.first().copied()).unwrap_or(Kind::Other);
        let collective =
            t.strip_prefix("Communicator ranks have different ").and_then(|r| r.split_whitespace().next()).map(clean);
        current = Some(Finding { kind, comm: comm.clone(), collective, summary: clean(t), who: Vec::new() });
    }
    push(&mut view.findings, current, &mut view.left_out);
    Ok(view)
}

/// `DEAD` -> ([Dead], None); `#0-0 (95613aa3907df2fe) INCOMPLETE,ERROR` -> ([Missing,
/// AsyncError], Some(hash)), no body line read yet. Each kind once, however often it is named.
fn header(line: &str) -> (Vec<Kind>, Option<String>, usize) {
    let t = line.trim();
    let (comm, kinds) = if t.starts_with('#') {
        let comm = t.split_once('(').and_then(|(_, r)| r.split_once(')')).map(|(h, _)| clean(h));
        (comm, t.rsplit(' ').next().unwrap_or(""))
    } else {
        (None, t)
    };
    let mut named = Vec::new();
    for k in kinds.split(',') {
        let k = match k.trim() {
            "DEAD" => Kind::Dead,
            "INCOMPLETE" => Kind::Missing,
            "ERROR" => Kind::AsyncError,
            "MISMATCH" => Kind::Mismatch,
            _ => Kind::Other,
        };
        if !named.contains(&k) {
            named.push(k);
        }
    }
    (named, comm, 0)
}

fn kind_of_summary(line: &str) -> Option<Kind> {
    [
        (line.contains("considered dead"), Kind::Dead),
        (line.starts_with("Missing "), Kind::Missing),
        (line.starts_with("Asynchronous error"), Kind::AsyncError),
        (line.contains("different") && line.contains("counts"), Kind::Mismatch),
    ]
    .into_iter()
    .find_map(|(hit, kind)| hit.then_some(kind))
}

/// `Process 610 on node 127.0.0.1 managing GPU 0`, `Rank 1 -- GPU 0 managed by process 610 on
/// node 127.0.0.1`, `Rank 1 has launched up to operation 613 -- ...`, `Rank 0 reported Remote
/// process error -- ...`: every part found by its keyword, in any order.
fn who(line: &str) -> Who {
    let head = line.split_once(" -- ").map_or(line, |(h, _)| h);
    let mut w = Who::default();
    let mut words = line.split_whitespace().peekable();
    while let (Some(k), Some(&v)) = (words.next(), words.peek()) {
        match k {
            "Rank" if w.rank.is_none() => w.rank = v.parse().ok(),
            "Process" | "process" if w.pid.is_none() => w.pid = v.parse().ok(),
            "node" if w.node.is_none() => w.node = Some(clean(v)),
            "GPU" if w.gpu.is_none() => w.gpu = v.parse().ok(),
            "operation" if w.op.is_none() => w.op = v.parse().ok(),
            _ => {}
        }
    }
    if let Some(r) = head.strip_prefix("Rank ").and_then(|r| r.split_once(" reported ")).map(|(_, r)| r) {
        w.what = Some(clean(r));
    }
    w
}

/// NCCL 2.28.9 omits the comma after `"nvml_dev": N` in `missing_ranks` entries: a line that ends
/// a value followed by one that starts a key (never so in valid JSON) gets it. One pass.
pub fn repair_json(body: &str) -> String {
    repair_within(body, &mut || false).unwrap_or_default()
}

fn repair_within(body: &str, spent: &mut dyn FnMut() -> bool) -> Result<String, ParseError> {
    let mut out = String::with_capacity(body.len() + 16);
    // Where the comma would go after the last line that held something, if it ended a value.
    let mut open: Option<usize> = None;
    for (i, line) in body.lines().enumerate() {
        if i % STEP == STEP - 1 && spent() {
            return Err(ParseError::Budget);
        }
        let t = line.trim();
        // Any other line that holds something sets or clears `open` below.
        if let Some(at) = open.filter(|_| t.starts_with('"')) {
            out.insert(at, ',');
        }
        out.push_str(line);
        let end = line.trim_end();
        let ends_value = end
            .chars()
            .last()
            .is_some_and(|c| c.is_ascii_digit() || c == '"' || c == 'e' || c == 'l' || c == '}' || c == ']');
        if ends_value && !end.ends_with(':') {
            open = Some(out.len());
        } else if !t.is_empty() {
            open = None;
        }
        out.push('\n');
    }
    Ok(out)
}

fn json(body: &str, spent: &mut dyn FnMut() -> bool) -> Result<View, ParseError> {
    let unread = |e: serde_json::Error| ParseError::Json(clean(&e.to_string()));
    let v: Value = match serde_json::from_str(body) {
        Ok(v) => v,
        Err(_) => serde_json::from_str(&repair_within(body, spent)?).map_err(unread)?,
    };
    let nccl_version = v.get("nccl_version").and_then(Value::as_str).map(clean);
    let mut view = View { format: Format::Json, nccl_version, ..View::default() };
    let comms = v.get("communicators").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    let small = |v: &Value, k: &str| v.get(k).and_then(Value::as_u64).and_then(|n| u32::try_from(n).ok());
    let person = |r: &Value| Who {
        rank: small(r, "rank"),
        pid: small(r, "pid"),
        node: r.get("host").and_then(|h| h.as_str()).map(clean),
        gpu: small(r, "cuda_dev"),
        ..Who::default()
    };
    for c in comms.iter().take(MAX_ITEMS) {
        if spent() {
            return Err(ParseError::Budget);
        }
        let comm = c.get("hash").and_then(|h| h.as_str()).map(|h| clean(h.trim_start_matches("0x")));
        let ranks = c.get("ranks").and_then(|r| r.as_array()).map(Vec::as_slice).unwrap_or_default();
        let missing = c.get("missing_ranks").and_then(|r| r.as_array()).map(Vec::as_slice).unwrap_or_default();
        let (mut dead, mut gone) = (Vec::new(), Vec::new());
        for m in missing.iter().take(MAX_ITEMS) {
            let is_dead = m.pointer("/status/considered_dead").and_then(Value::as_bool) == Some(true);
            (if is_dead { &mut dead } else { &mut gone }).push(person(m));
        }
        view.left_out += missing.len().saturating_sub(MAX_ITEMS);
        let mut errs = Vec::new();
        let mut counts: BTreeMap<String, Vec<(Who, u64)>> = BTreeMap::new();
        let mut total = 0u64;
        for r in ranks.iter().take(MAX_ITEMS) {
            if let Some(e) = r.pointer("/status/async_error").and_then(Value::as_u64).filter(|&e| e != 0) {
                errs.push(Who { what: Some(format!("async_error {e}")), ..person(r) });
            }
            for (name, n) in r.get("collective_counts").and_then(Value::as_object).into_iter().flatten().take(32) {
                let n = n.as_u64().unwrap_or(0);
                total = total.saturating_add(n);
                counts.entry(clean(name)).or_default().push((person(r), n));
            }
        }
        for (kind, who, summary) in [
            (Kind::Dead, dead, "considered dead (unreachable via the RAS network)"),
            (Kind::Missing, gone, "missing communicator data"),
            (Kind::AsyncError, errs, "asynchronous error"),
        ] {
            if !who.is_empty() {
                let f = Finding { kind, comm: comm.clone(), collective: None, summary: summary.into(), who };
                push(&mut view.findings, [f], &mut view.left_out);
            }
        }
        for (name, list) in counts {
            if list.iter().any(|(_, n)| *n != list[0].1) {
                let who = list.into_iter().map(|(w, n)| Who { op: Some(n), ..w }).collect();
                let summary = format!("Communicator ranks have different {name} operation counts");
                let f = Finding { kind: Kind::Mismatch, comm: comm.clone(), summary, collective: Some(name), who };
                push(&mut view.findings, [f], &mut view.left_out);
            }
        }
        if let Some(comm) = comm {
            let f = Progress { comm, ranks: u32::try_from(ranks.len()).unwrap_or(u32::MAX), collectives: total };
            push(&mut view.progress, [f], &mut view.left_out);
        }
    }
    view.left_out += comms.len().saturating_sub(MAX_ITEMS);
    view.findings.sort_by_key(|f| f.kind);
    Ok(view)
}

impl View {
    /// The findings as lines for people, most important first: each process once, with its rank
    /// where any entry names it. Linear in the people kept (looked up, not searched).
    pub fn lines(&self) -> Vec<String> {
        let mut findings: Vec<&Finding> = self.findings.iter().collect();
        findings.sort_by_key(|f| f.kind);
        // The first rank named for each process, in the reply's order.
        let mut ranked: BTreeMap<(u32, Option<&str>), u32> = BTreeMap::new();
        for w in self.findings.iter().flat_map(|f| f.who.iter()) {
            if let (Some(p), Some(r)) = (w.process(), w.rank) {
                ranked.entry(p).or_insert(r);
            }
        }
        let rank_of = |w: &Who| w.rank.or_else(|| w.process().and_then(|p| ranked.get(&p).copied()));
        // Said already: processes by pid and node; ranks said without a pid, by rank.
        let mut said_processes: BTreeSet<(u32, Option<&str>)> = BTreeSet::new();
        let mut said_ranks: BTreeSet<u32> = BTreeSet::new();
        let mut out = Vec::new();
        for f in findings {
            let on = f.comm.as_deref().map(|c| format!(" in communicator {c}")).unwrap_or_default();
            match f.kind {
                Kind::Dead | Kind::Missing => {
                    let state = if f.kind == Kind::Dead {
                        "dead: unreachable via NCCL's RAS network"
                    } else {
                        "not answering: RAS has no data from it (stopped, hung, or just died)"
                    };
                    for named in &f.who {
                        let rank = rank_of(named);
                        // Kept once said: the process where its pid is known, else the rank.
                        let fresh = match (named.process(), rank) {
                            (Some(p), r) => !r.is_some_and(|r| said_ranks.contains(&r)) && said_processes.insert(p),
                            (None, Some(r)) => said_ranks.insert(r),
                            (None, None) => true,
                        };
                        if fresh {
                            out.push(format!("{} {state}", named.name(rank)));
                        }
                    }
                }
                Kind::AsyncError => {
                    out.extend(f.who.iter().map(|w| {
                        format!("{} reported {}{on}", w.name(w.rank), w.what.as_deref().unwrap_or("an error"))
                    }))
                }
                Kind::Mismatch => {
                    let most = f.who.iter().filter_map(|w| w.op).max().unwrap_or(0);
                    let behind: Vec<String> = f
                        .who
                        .iter()
                        .filter_map(|w| {
                            w.op.filter(|&o| o < most).map(|o| format!("{} behind by {}", w.name(w.rank), most - o))
                        })
                        .collect();
                    let coll = f.collective.as_deref().unwrap_or("collective");
                    let behind = if behind.is_empty() {
                        String::new()
                    } else {
                        format!(": {} (of {most} launched)", behind.join("; "))
                    };
                    out.push(format!("{coll} counts disagree{on}{behind}"));
                }
                Kind::Other => out.push(format!("RAS: {}{on}", f.summary)),
            }
        }
        if self.left_out > 0 {
            out.push(format!("... and {} more in RAS's report", self.left_out));
        }
        out
    }
}

#[cfg(test)]
#[path = "ras_tests.rs"]
mod tests;
