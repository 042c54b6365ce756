//! When the supervisor asks NCCL's RAS about the job (at the first SIGTERM or SIGINT, after a
//! failure, every stall period), and what it says of the answers. It must never change the exit
//! status, never ask when RAS is off, never wait past its bounds, and never scan the answers once
//! per line said.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use crate::postmortem::{Exit, Report, Section, Snapshot};
use crate::ras::{self, RasError, Target};
use crate::{say, utc};
use nw_nccl::ras::Progress;
use nw_output::msg::PREFIX;

/// The longest the kubelet's SIGTERM is held for RAS's answer (about 2 ms), far inside its 30 s.
pub(crate) const AT_SIGNAL: Duration = Duration::from_secs(2);
/// After the command has failed (its ranks on this node are usually gone: refused at once).
pub(crate) const AT_EXIT: Duration = Duration::from_secs(1);
/// A stall poll's bound: a signal arriving meanwhile waits at most this long to be forwarded.
pub(crate) const AT_POLL: Duration = Duration::from_millis(500);
/// Stall polls are never more frequent than this.
pub(crate) const MIN_PERIOD: Duration = Duration::from_secs(1);
/// While a query is under way the supervisor's wait wakes this often to take its answer.
pub(crate) const TICK: Duration = Duration::from_millis(5);
/// RAS lines said on stderr and on the time line, at most; the rest are counted (all in the JSON).
pub(crate) const MAX_SAID: usize = 256;

#[derive(Debug, Clone, Default)]
pub struct Config {
    /// `--stall-ms`: report when the collective counts have not moved for this long; 0: off.
    pub stall_ms: u64,
    /// Where the account goes for Kubernetes (`/dev/termination-log` when it exists).
    pub termination_log: Option<PathBuf>,
}

pub struct Hang {
    target: Target,
    config: Config,
    snapshots: Vec<Snapshot>,
    told_unanswered: bool,
    asked_at_signal: bool,
    /// The next stall poll; `None` while one is under way (or when there are none).
    next_poll: Option<Instant>,
    last_progress: Option<(Vec<Progress>, Instant)>,
    stalled_at: Option<String>,
    /// The query under way, at most one.
    asking: Option<Asking>,
}

/// Why a query has no answer: what is said, and whether nothing listened.
struct NoAnswer {
    text: String,
    refused: bool,
}

/// A query under way, and why it was asked.
struct Asking {
    why: &'static str,
    /// UTC, when it was asked.
    time: String,
    asked: ras::Asked,
}

impl Hang {
    /// `env`: the command's environment (the ranks read `NCCL_RAS_ADDR` from the same).
    pub fn new(config: &Config, env: &[(OsString, OsString)]) -> Hang {
        let target = ras::target(env);
        let stall = config.stall_ms > 0;
        if let (true, Target::Off(why)) = (stall, &target) {
            say(&format!("{PREFIX} warning: --stall-ms is set but {why}: no stall will be seen"));
        }
        let polled = stall && matches!(target, Target::At(_));
        Hang {
            target,
            config: config.clone(),
            snapshots: Vec::new(),
            told_unanswered: stall && !polled,
            asked_at_signal: false,
            next_poll: polled.then(|| Instant::now() + period(config.stall_ms)),
            last_progress: None,
            stalled_at: None,
            asking: None,
        }
    }

    /// A hang that never asks (exec failures, bad options).
    pub fn off() -> Hang {
        Hang::new(&Config::default(), &[(OsString::from("NCCL_RAS_ENABLE"), OsString::from("0"))])
    }

    /// How long the supervisor's wait may last: the next stall poll, or [`TICK`] while asking.
    pub fn timeout(&self, now: Instant) -> Option<Duration> {
        match &self.asking {
            Some(a) => Some(TICK.min(a.asked.until.saturating_duration_since(now))),
            None => self.next_poll.map(|t| t.saturating_duration_since(now)),
        }
    }

    /// At a signal, before it is forwarded: at the first SIGTERM or SIGINT, asks RAS and returns
    /// until when the signal may be held ([`AT_SIGNAL`]); `None`: forward at once.
    pub fn on_signal(&mut self, sig: i32) -> Option<Instant> {
        if (sig != nix::libc::SIGTERM && sig != nix::libc::SIGINT) || self.asked_at_signal {
            return None;
        }
        self.asked_at_signal = true;
        let held = Instant::now() + AT_SIGNAL;
        // A stall poll under way gives way (its thread ends by its own bound).
        if self.asking.as_ref().is_some_and(|a| a.why == "stall") {
            self.asking = None;
            self.next_poll = Some(Instant::now() + period(self.config.stall_ms));
        }
        self.start("signal", false, AT_SIGNAL).then_some(held)
    }

    /// Whether the query asked at the signal is still under way (takes any answer in; never waits).
    pub fn holding(&mut self, now: Instant) -> bool {
        self.answered(now);
        self.asking.as_ref().is_some_and(|a| a.why == "signal")
    }

    /// Takes the answer under way if it is in (never waits); `true` when none is under way.
    fn answered(&mut self, now: Instant) -> bool {
        let Some(a) = &self.asking else { return true };
        let Some(answer) = a.asked.try_take(now) else { return false };
        if let Some(a) = self.asking.take() {
            self.record(a, answer);
        }
        true
    }

    /// Once the command has ended: the signal's answer if still under way, then a query if the
    /// command failed and none was asked at a signal, each waited for at most [`AT_EXIT`].
    pub fn on_exit(&mut self, exit: &Exit) {
        // A stall poll under way no longer matters: the command has ended.
        if let Some(a) = self.asking.take().filter(|a| a.why != "stall") {
            let answer = a.asked.wait(Instant::now() + AT_EXIT);
            self.record(a, answer);
        }
        if (exit.code != 0 || exit.signal.is_some()) && !self.asked_at_signal && self.start("exit", false, AT_EXIT) {
            if let Some(a) = self.asking.take() {
                let answer = a.asked.wait(a.asked.until);
                self.record(a, answer);
            }
        }
    }

    /// With `--stall-ms`: takes a stall poll's answer when in, starts the next one when due.
    pub fn poll_if_due(&mut self, now: Instant) {
        if self.answered(now) && self.next_poll.is_some_and(|due| now >= due) {
            self.next_poll = None;
            self.start("stall", true, AT_POLL);
        }
    }

    /// Starts a query; `false` when RAS is not asked (off: the snapshot says why).
    fn start(&mut self, why: &'static str, json: bool, bound: Duration) -> bool {
        let time = utc::format(SystemTime::now());
        match &self.target {
            Target::At(addr) => {
                self.asking = Some(Asking { why, time, asked: ras::ask(*addr, json, bound) });
                true
            }
            Target::Off(off) => {
                self.keep(why, time, Err(NoAnswer { text: off.clone(), refused: false }));
                false
            }
        }
    }

    /// Keeps the answer of a query that was under way.
    fn record(&mut self, a: Asking, answer: Result<ras::Reply, ras::RasError>) {
        let answer =
            answer.map_err(|e| NoAnswer { refused: matches!(e, RasError::Refused { .. }), text: e.to_string() });
        if a.why == "stall" {
            self.stall_answer(a.asked.started.elapsed(), answer);
        } else {
            self.keep(a.why, a.time, answer);
        }
    }

    /// An answer as a snapshot; no answer said once.
    fn keep(&mut self, why: &'static str, time: String, answer: Result<ras::Reply, NoAnswer>) {
        if let Err(e) = &answer {
            // After the command has ended nothing listening is expected: kept, not said.
            if why != "exit" || !e.refused {
                self.say_once(&format!("{PREFIX} NCCL's RAS not asked about the job ({why}): {}", e.text));
            }
        }
        self.snapshots.push(snapshot(why, &time, answer.map_err(|e| e.text)));
    }

    /// Says that RAS does not answer, once a run.
    fn say_once(&mut self, text: &str) {
        if !std::mem::replace(&mut self.told_unanswered, true) {
            say(text);
        }
    }

    fn stall_answer(&mut self, cost: Duration, answer: Result<ras::Reply, NoAnswer>) {
        // Never more often than ten times what an answer costs, nor than MIN_PERIOD.
        self.next_poll = Some(Instant::now() + period(self.config.stall_ms).max(cost * 10));
        let reply = match answer {
            Ok(reply) => reply,
            Err(NoAnswer { text, .. }) => {
                // Said once, early: --stall-ms promises a word on a stall.
                self.say_once(&format!("{PREFIX} warning: --stall-ms is set but NCCL's RAS does not answer ({text}): no stall will be seen until it does"));
                return;
            }
        };
        let progress = reply.view.progress.clone();
        if progress.iter().all(|p| p.collectives == 0) {
            return;
        }
        match &self.last_progress {
            Some((last, since)) if *last == progress => {
                let still = since.elapsed();
                if still >= Duration::from_millis(self.config.stall_ms) && self.stalled_at.is_none() {
                    let time = utc::format(SystemTime::now());
                    let snap = snapshot("stall", &time, Ok::<_, String>(reply));
                    let behind = if snap.lines.is_empty() { ": RAS names no rank behind" } else { ":" };
                    let secs = still.as_secs_f64();
                    say(&format!("{PREFIX} stall: no collective launched for {secs:.0} s (NCCL's RAS){behind}"));
                    for l in said(&snap.lines) {
                        say(&format!("{PREFIX}   {l}"));
                    }
                    self.stalled_at = Some(time);
                    self.snapshots.push(snap);
                }
            }
            _ => {
                self.last_progress = Some((progress, Instant::now()));
                self.stalled_at = None;
            }
        }
    }

    /// Where RAS is asked (`127.0.0.1:28028`), or `off: why`.
    pub fn addr(&self) -> String {
        match &self.target {
            Target::At(a) => a.to_string(),
            Target::Off(why) => format!("off: {why}"),
        }
    }

    /// The post-mortem's `ras` member, the snapshots moved into it; `None` if never asked.
    pub fn take_section(&mut self) -> Option<Section> {
        (!self.snapshots.is_empty()).then(|| Section {
            addr: self.addr(),
            stall_ms: self.config.stall_ms,
            stalled_at: self.stalled_at.clone(),
            snapshots: std::mem::take(&mut self.snapshots),
        })
    }

    /// After the post-mortem: RAS's findings and the ports' transitions on one time line, on
    /// stderr and as the termination message. Nothing when RAS named nothing.
    pub fn tell(&self, report: &Report) {
        let snapshots = report.ras.as_ref().map(|s| s.snapshots.as_slice()).unwrap_or_default();
        let Some(text) = account(snapshots, report) else {
            // A failed command whose ports moved still leaves their account as the reason.
            if let Some(text) = ports_account(report) {
                self.terminate(report, &text);
            }
            return;
        };
        // The headline's own `nccl-wrap:` is for the termination message, read without our prefix.
        let first = text[0].strip_prefix("nccl-wrap: ").unwrap_or(&text[0]);
        let rest = text[1..].iter().map(|l| format!("{PREFIX} {l}"));
        say(&std::iter::once(format!("{PREFIX} {first}")).chain(rest).collect::<Vec<_>>().join("\n"));
        self.terminate(report, &text);
    }

    /// The termination message only for a job that failed, not for a stall it got over.
    fn terminate(&self, report: &Report, text: &[String]) {
        if let Some(path) = self.config.termination_log.as_ref().filter(|_| report.command.code != 0) {
            let body = nw_output::termination::fit(&text[0], &text[1..], text.len() - 1);
            if let Err(e) = nw_output::termination::write(path, &body) {
                say(&format!("{PREFIX} cannot write the termination message to {}: {e}", path.display()));
            }
        }
    }
}

fn period(stall_ms: u64) -> Duration {
    (Duration::from_millis(stall_ms) / 4).max(MIN_PERIOD)
}

fn snapshot(why: &'static str, time: &str, answer: Result<ras::Reply, impl ToString>) -> Snapshot {
    let (ms, nccl_version, lines, findings, error) = match answer {
        Ok(r) => ((r.ms * 100.0).round() / 100.0, r.view.nccl_version, r.lines, r.view.findings, None),
        Err(e) => (0.0, None, Vec::new(), Vec::new(), Some(e.to_string())),
    };
    Snapshot { time: time.to_string(), why, ms, nccl_version, lines, findings, error }
}

/// A failed command's account from its ports alone, its headline first; `None` where nothing moved.
pub(crate) fn ports_account(report: &Report) -> Option<Vec<String>> {
    let mut lines: Vec<String> = report.transitions.iter().map(|t| format!("  {}", t.line())).collect();
    lines.extend(error_moves(report).map(|l| format!("  {l}")));
    if lines.is_empty() || report.command.code == 0 {
        return None;
    }
    lines.insert(0, format!("nccl-wrap: the command {}; the RDMA ports it used:", report.command.describe()));
    Some(lines)
}

/// The account of the snapshots and the post-mortem: a headline, RAS's latest findings, then the
/// time line; `None` when RAS named nothing.
pub(crate) fn account(snapshots: &[Snapshot], report: &Report) -> Option<Vec<String>> {
    let last = snapshots.iter().rev().find(|s| !s.lines.is_empty())?;
    // When each line was first said: one pass over the snapshots, in the order they were taken.
    let mut first: BTreeMap<&str, &str> = BTreeMap::new();
    for s in snapshots {
        for l in &s.lines {
            first.entry(l.as_str()).or_insert(s.time.as_str());
        }
    }
    let first_seen = |line: &str| first.get(line).copied().unwrap_or(&last.time);
    let when = match last.why {
        "signal" => "when nccl-wrap was told to stop",
        "exit" => "after the command failed",
        _ => "when the job stalled",
    };
    let mut lines =
        vec![format!("nccl-wrap: the command {}; NCCL's RAS {when} ({}):", report.command.describe(), last.time)];
    let kept = &last.lines[..last.lines.len().min(MAX_SAID)];
    for l in kept {
        lines.push(format!("  {l} (first seen {})", first_seen(l)));
    }
    lines.extend(more(last.lines.len()).map(|m| format!("  {m}")));
    // Within one millisecond: a port's move, then RAS (asked later), then the counters at exit.
    let mut timeline: Vec<(&str, u8, String)> = report.transitions.iter().map(|t| (&*t.time, 0, t.line())).collect();
    for l in kept {
        let at = first_seen(l);
        timeline.push((at, 1, format!("{at} RAS: {l}")));
    }
    timeline.extend(error_moves(report).map(|l| (&*report.ended, 2, format!("{} {l}", report.ended))));
    timeline.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
    lines.push("time line:".into());
    lines.extend(timeline.into_iter().map(|(_, _, l)| format!("  {l}")));
    if report.transitions.is_empty() {
        if report.ports.is_empty() {
            lines.push("  no RDMA port was watched (NCCL on sockets?): look at the process named above".into());
        } else if error_moves(report).next().is_some() {
            lines.push("  no port changed state, but error counters moved (above, and the post-mortem)".into());
        } else {
            lines.push("  no port moved: look at the process named above".into());
        }
    }
    Some(lines)
}

/// The error counters that moved, read at start and exit only.
fn error_moves(report: &Report) -> impl Iterator<Item = String> + '_ {
    report.ports.iter().flat_map(|p| {
        p.counters.iter().filter(|m| m.kind == crate::meaning::Kind::Error).map(move |m| {
            let change = m.delta.map_or_else(|| "reset".to_string(), |d| format!("+{d}"));
            format!("{} {} {change} since the start (read at exit)", p.port, m.name)
        })
    })
}

/// The first [`MAX_SAID`] lines, then how many more there are, as a line of their own.
fn said(lines: &[String]) -> impl Iterator<Item = String> + '_ {
    lines.iter().take(MAX_SAID).cloned().chain(more(lines.len()))
}

/// `... and N more`, for the lines past [`MAX_SAID`] of `total`.
fn more(total: usize) -> Option<String> {
    let n = total.checked_sub(MAX_SAID).filter(|n| *n > 0)?;
    Some(format!("... and {n} more that RAS named (each in the post-mortem's JSON, --report)"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::postmortem::{Link, Seen, Transition};

    fn report(transitions: Vec<Transition>) -> Report {
        Report {
            kind: "postmortem",
            command: Exit { code: 143, signal: Some("SIGTERM".into()), forwarded: Some("SIGTERM".into()) },
            started: "2026-11-24T18:20:00.000Z".into(),
            ended: "2026-11-24T18:25:00.000Z".into(),
            seconds: 300.0,
            watch_ms: 1000,
            polls: 300,
            ports: Vec::new(),
            transitions,
            transitions_dropped: 0,
            problems: Vec::new(),
            ras: None,
        }
    }

    fn snap(time: &str, why: &'static str, lines: &[&str]) -> Snapshot {
        Snapshot {
            time: time.into(),
            why,
            ms: 2.0,
            nccl_version: None,
            lines: lines.iter().map(|s| s.to_string()).collect(),
            findings: Vec::new(),
            error: None,
        }
    }

    /// mlx5_10:1 going from ACTIVE to DOWN at 18:24:29, as the port watch records it.
    fn mlx5_10_went_down() -> Transition {
        let link = |s: &str| Link { state: s.into(), phys_state: "LinkUp".into() };
        Transition {
            time: "2026-11-24T18:24:29.000Z".into(),
            port: "mlx5_10:1".into(),
            from: link("ACTIVE"),
            to: link("DOWN"),
            seen: Seen::Poll,
        }
    }

    #[test]
    fn ras_and_the_ports_share_one_time_line_with_first_seen_times() {
        let t = mlx5_10_went_down();
        let snaps = [
            snap("2026-11-24T18:24:31.000Z", "stall", &["rank 21 (pid 7 on node b, GPU 3) not answering"]),
            snap("2026-11-24T18:30:00.000Z", "signal", &["rank 21 (pid 7 on node b, GPU 3) not answering"]),
        ];
        let a = account(&snaps, &report(vec![t])).expect("named");
        assert!(a[0].contains("when nccl-wrap was told to stop"), "{}", a[0]);
        assert_eq!(a[1], "  rank 21 (pid 7 on node b, GPU 3) not answering (first seen 2026-11-24T18:24:31.000Z)");
        assert_eq!(a[3], "  2026-11-24T18:24:29.000Z mlx5_10:1 port state ACTIVE/LinkUp -> DOWN/LinkUp");
        assert_eq!(a[4], "  2026-11-24T18:24:31.000Z RAS: rank 21 (pid 7 on node b, GPU 3) not answering");
    }

    /// Regression: a port's move and RAS's answer in one millisecond were ordered by their text,
    /// which put RAS (asked later) first.
    #[test]
    fn within_one_millisecond_the_port_comes_before_what_ras_said_later() {
        let link = |s: &str| Link { state: s.into(), phys_state: "LinkUp".into() };
        let at = "2026-11-24T23:11:35.677Z";
        let t = Transition {
            time: at.into(),
            port: "mlx5_6:1".into(),
            from: link("ACTIVE"),
            to: link("DOWN"),
            seen: Seen::Poll,
        };
        let a = account(&[snap(at, "signal", &["rank 1 (pid 610 on node a, GPU 0) dead"])], &report(vec![t]))
            .expect("named");
        assert_eq!(a[3], format!("  {at} mlx5_6:1 port state ACTIVE/LinkUp -> DOWN/LinkUp"));
        assert_eq!(a[4], format!("  {at} RAS: rank 1 (pid 610 on node a, GPU 0) dead"));
    }

    #[test]
    fn error_counters_that_moved_stand_on_the_time_line_at_exit() {
        use crate::postmortem::{Moved, PortReport};
        let link = Link { state: "ACTIVE".into(), phys_state: "LinkUp".into() };
        let mut r = report(Vec::new());
        r.ports = vec![PortReport {
            port: "mlx5_6:1".into(),
            start: link.clone(),
            exit: link,
            counters: vec![Moved {
                name: "symbol_error".into(),
                group: "counters".into(),
                start: 2,
                exit: 9,
                delta: Some(7),
                kind: crate::meaning::Kind::Error,
                meaning: None,
            }],
        }];
        let a = account(&[snap("2026-11-24T18:24:31.000Z", "signal", &["rank 1 dead"])], &r).expect("named");
        assert!(
            a.contains(
                &"  2026-11-24T18:25:00.000Z mlx5_6:1 symbol_error +7 since the start (read at exit)".to_string()
            ),
            "{:?}",
            a
        );
        assert!(a.last().is_some_and(|l| l.contains("error counters moved")), "{:?}", a);
    }

    /// The supervisor's side of the hold: asking returns at once, with until when the signal
    /// may be held; while the answer is not in the wait wakes every TICK; asked once; at exit
    /// the unanswered query is waited for at most AT_EXIT and kept as such.
    #[test]
    fn a_signal_is_held_only_while_the_query_is_under_way_and_within_its_bound() {
        use crate::ras::standin::{Mode, Server};
        let s = Server::start(Mode::Silent);
        let env = [(OsString::from("NCCL_RAS_ADDR"), OsString::from(s.addr.to_string()))];
        let mut h = Hang::new(&Config::default(), &env);
        let t = Instant::now();
        let until = h.on_signal(nix::libc::SIGTERM).expect("held for RAS");
        assert!(t.elapsed() < Duration::from_millis(200), "asking waited: {:?}", t.elapsed());
        assert!(until <= t + AT_SIGNAL + Duration::from_millis(200), "held past AT_SIGNAL");
        assert!(h.holding(Instant::now()), "a silent server has not answered");
        assert!(h.timeout(Instant::now()).is_some_and(|d| d <= TICK));
        assert_eq!(h.on_signal(nix::libc::SIGTERM), None, "asked at the first signal only");
        assert_eq!(h.on_signal(nix::libc::SIGUSR1), None);
        let exit = Exit { code: 143, signal: Some("SIGTERM".into()), forwarded: Some("SIGTERM".into()) };
        let t = Instant::now();
        h.on_exit(&exit);
        assert!(t.elapsed() < AT_EXIT + Duration::from_millis(500), "waited {:?} at exit", t.elapsed());
        let section = h.take_section().expect("asked");
        assert_eq!(section.snapshots.len(), 1, "no second query at exit");
        assert_eq!(section.snapshots[0].why, "signal");
        assert!(section.snapshots[0].error.is_some());
        assert!(h.take_section().is_none(), "moved into the report");
        assert_eq!(Hang::off().on_signal(nix::libc::SIGTERM), None, "RAS off: forwarded at once");
    }

    /// Regression (issue 40): the account looked for each line's first sighting in every line of
    /// every snapshot (65,536 lines: billions of comparisons); and said every line on stderr.
    #[test]
    fn regression_the_account_of_65536_lines_is_linear_and_says_at_most_max_said() {
        let many: Vec<String> = (0..65_536).map(|r| format!("rank {r} not answering")).collect();
        let refs: Vec<&str> = many.iter().map(String::as_str).collect();
        let snaps = [
            snap("2026-11-24T18:24:31.000Z", "stall", &refs[..1000]),
            snap("2026-11-24T18:30:00.000Z", "signal", &refs),
        ];
        let t = Instant::now();
        let a = account(&snaps, &report(Vec::new())).expect("named");
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
        assert_eq!(a[1], "  rank 0 not answering (first seen 2026-11-24T18:24:31.000Z)");
        assert_eq!(a[MAX_SAID], "  rank 255 not answering (first seen 2026-11-24T18:24:31.000Z)");
        assert_eq!(a[MAX_SAID + 1], "  ... and 65280 more that RAS named (each in the post-mortem's JSON, --report)");
        assert!(a.len() < 2 * MAX_SAID + 8, "{}", a.len());
    }

    #[test]
    fn without_a_port_change_the_process_is_blamed_and_silence_says_nothing() {
        let snaps = [snap("2026-11-24T18:30:00.000Z", "signal", &["rank 1 dead"])];
        let a = account(&snaps, &report(Vec::new())).expect("named");
        assert!(a.last().is_some_and(|l| l.contains("look at the process")), "{:?}", a);
        assert!(account(&[snap("t", "signal", &[])], &report(Vec::new())).is_none(), "a healthy answer adds nothing");
    }

    #[test]
    fn a_failed_command_whose_link_went_down_is_told_by_its_ports_where_ras_named_nothing() {
        let t = mlx5_10_went_down();
        let mut r = report(vec![t]);
        r.command = Exit { code: 1, signal: None, forwarded: None };
        let a = ports_account(&r).expect("told");
        assert!(a[0].starts_with("nccl-wrap: the command "), "{}", a[0]);
        assert!(a[0].ends_with("; the RDMA ports it used:"), "{}", a[0]);
        assert_eq!(a[1], "  2026-11-24T18:24:29.000Z mlx5_10:1 port state ACTIVE/LinkUp -> DOWN/LinkUp");
        // Nothing moved, or the command succeeded: nothing to tell.
        r.transitions.clear();
        assert!(ports_account(&r).is_none());
        let ok = report(Vec::new());
        assert!(ports_account(&Report { command: Exit { code: 0, signal: None, forwarded: None }, ..ok }).is_none());
    }
}
