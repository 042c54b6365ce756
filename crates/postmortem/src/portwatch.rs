//! The supervisor's watch over the command's RDMA ports: a reading at start, the link state polled
//! (counters are firmware queries on mlx5, read only at start and exit), a reading at the end. It
//! must never fail the command or change its exit status: a read failure is a line in the report.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use rustix::fs::{Mode, OFlags};

use crate::kept::Kept;
use crate::postmortem::{self, Exit, Link, PortReport, Report, Seen, Transition};
use crate::{say, utc};
use nw_observe::detect::counters::{self, Counters};
use nw_observe::detect::file;
use nw_output::msg::PREFIX;

/// One port of one RDMA device, as the plan names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortId {
    pub device: String,
    pub port: u32,
}

/// What to watch and where to report; built from the options, the ports from the plan.
#[derive(Debug, Clone)]
pub struct Config {
    /// The sysfs root (`/sys`, or a fixture tree).
    pub root: PathBuf,
    pub ports: Vec<PortId>,
    /// Poll period; zero reads at start and exit only.
    pub every: Duration,
    /// Where to write the report as JSON.
    pub report: Option<PathBuf>,
}

impl Config {
    /// Nothing to watch and nowhere to report (a run whose options could not be read).
    pub fn none() -> Config {
        Config { root: PathBuf::from("/sys"), ports: Vec::new(), every: Duration::ZERO, report: None }
    }
}

struct Watched {
    name: String,
    dir: PathBuf,
    /// The port's directory, held open so a poll costs two `openat`s; reopened when a read fails.
    fd: Option<OwnedFd>,
    start: Link,
    last: Link,
    counters: Counters,
}

pub struct Watch {
    every: Duration,
    report: Option<PathBuf>,
    started: SystemTime,
    started_at: Instant,
    next: Option<Instant>,
    polls: u64,
    ports: Vec<Watched>,
    transitions: Kept<Transition>,
    problems: Vec<String>,
}

const UNREADABLE: &str = "unreadable";

fn open_dir(dir: &Path) -> Option<OwnedFd> {
    rustix::fs::open(dir, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty()).ok()
}

impl Watched {
    /// A port's first reading: its link, then its counters.
    fn open(root: &Path, device: &str, port: u32, problems: &mut Vec<String>) -> Watched {
        let dir = root.join(format!("class/infiniband/{device}/ports/{port}"));
        let mut w = Watched {
            name: format!("{device}:{port}"),
            fd: open_dir(&dir),
            dir,
            // Read just below: the link needs the directory held open first.
            start: Link::default(),
            last: Link::default(),
            counters: Counters::new(),
        };
        w.start = w.link(problems);
        w.last = w.start.clone();
        w.counters = counters::read(&w.dir, problems);
        w
    }

    fn attr(&mut self, name: &str) -> Result<String, file::FileError> {
        if let Some(fd) = &self.fd {
            if let Ok(text) = file::read_attr_at(fd, &self.dir, name) {
                return Ok(text);
            }
        }
        self.fd = open_dir(&self.dir);
        match &self.fd {
            Some(fd) => file::read_attr_at(fd, &self.dir, name),
            None => file::read_attr(&self.dir.join(name)),
        }
    }

    fn link(&mut self, problems: &mut Vec<String>) -> Link {
        let mut get = |name: &str| match self.attr(name) {
            // `4: ACTIVE` -> `ACTIVE`.
            Ok(text) => text.split_once(": ").map_or(text.as_str(), |(_, name)| name).trim().to_string(),
            Err(e) => {
                let text = e.to_string();
                if !problems.contains(&text) {
                    problems.push(text);
                }
                UNREADABLE.to_string()
            }
        };
        Link { state: get("state"), phys_state: get("phys_state") }
    }
}

impl Watch {
    /// The first reading, just before the command starts: each port's link state and counters.
    pub fn start(config: &Config) -> Watch {
        let t0 = Instant::now();
        let mut problems = Vec::new();
        let ports: Vec<Watched> =
            config.ports.iter().map(|p| Watched::open(&config.root, &p.device, p.port, &mut problems)).collect();
        let started_at = Instant::now();
        log::debug!("first reading of {} port(s) took {:?}", ports.len(), started_at - t0);
        let polling = !config.every.is_zero() && !ports.is_empty();
        log::debug!("watching {} port(s), every {:?}", ports.len(), config.every);
        Watch {
            every: config.every,
            report: config.report.clone(),
            started: SystemTime::now(),
            started_at,
            // A period past what the clock can hold (--watch-ms near 2^64) is no polling.
            next: if polling { started_at.checked_add(config.every) } else { None },
            polls: 0,
            ports,
            transitions: Kept::default(),
            problems,
        }
    }

    /// How long the supervisor may wait before the next poll is due; `None`: no polling.
    pub fn timeout(&self, now: Instant) -> Option<Duration> {
        self.next.map(|next| next.saturating_duration_since(now))
    }

    /// Polls the ports' state if a poll is due; logs each change on stderr as it is seen.
    pub fn poll_if_due(&mut self, now: Instant) {
        if self.next.is_none_or(|next| now < next) {
            return;
        }
        self.read_states(Seen::Poll, true);
        self.polls += 1;
        // One period from now: a busy supervisor skips polls rather than running them back to back.
        self.next = now.checked_add(self.every);
    }

    fn read_states(&mut self, seen: Seen, log_now: bool) {
        for i in 0..self.ports.len() {
            let now = self.ports[i].link(&mut self.problems);
            let w = &mut self.ports[i];
            if now == w.last {
                continue;
            }
            let t = Transition {
                time: utc::format(SystemTime::now()),
                port: w.name.clone(),
                from: std::mem::replace(&mut w.last, now.clone()),
                to: now,
                seen,
            };
            if log_now {
                say(&format!("{PREFIX} {}", t.line()));
            }
            self.transitions.push(t);
        }
    }

    /// The last reading, once the command has ended; builds the report.
    pub(crate) fn finish(mut self, exit: Exit) -> Report {
        self.read_states(Seen::Exit, false);
        let ended = SystemTime::now();
        let report = |w: &mut Watched| {
            let at_exit = counters::read(&w.dir, &mut self.problems);
            let counters = postmortem::moved(&w.counters, &at_exit);
            PortReport { port: w.name.clone(), start: w.start.clone(), exit: w.last.clone(), counters }
        };
        let ports = self.ports.iter_mut().map(report).collect();
        let (transitions, transitions_dropped) = self.transitions.into_parts();
        Report {
            kind: "postmortem",
            command: exit,
            started: utc::format(self.started),
            ended: utc::format(ended),
            seconds: self.started_at.elapsed().as_secs_f64(),
            watch_ms: u64::try_from(self.every.as_millis()).unwrap_or(u64::MAX),
            polls: self.polls,
            ports,
            transitions,
            transitions_dropped,
            problems: once_each(self.problems),
            ras: None,
        }
    }

    /// The first reading of each port, for `nccl-wrap status` (`state`).
    pub fn first_reading(&self) -> Vec<crate::state::PortStart> {
        self.ports
            .iter()
            .map(|w| crate::state::PortStart {
                port: w.name.clone(),
                state: w.start.state.clone(),
                phys_state: w.start.phys_state.clone(),
                counters: w.counters.clone(),
            })
            .collect()
    }

    /// When the first reading was taken (UTC).
    pub fn started(&self) -> String {
        utc::format(self.started)
    }

    /// Ends the watch once the command has ended: the last reading, the post-mortem told.
    pub fn end(self, exit: Exit, ras: Option<crate::postmortem::Section>) -> Report {
        let (path, has_ports) = (self.report.clone(), !self.ports.is_empty());
        let mut report = self.finish(exit);
        report.ras = ras;
        tell(&report, path.as_deref(), has_ports);
        report
    }
}

/// The problems in the order first seen, each once.
fn once_each(problems: Vec<String>) -> Vec<String> {
    let mut seen = std::collections::BTreeSet::new();
    problems.into_iter().filter(|p| seen.insert(p.clone())).collect()
}

/// One port's link and counters now (`nccl-wrap status`), reads that failed added to `problems`.
pub(crate) fn read_now(root: &Path, device: &str, port: u32, problems: &mut Vec<String>) -> (Link, Counters) {
    let w = Watched::open(root, device, port, problems);
    (w.start, w.counters)
}

/// After the command ended: the post-mortem on stderr, and as JSON to `path` (else a warning).
fn tell(report: &Report, path: Option<&Path>, has_ports: bool) {
    let written = path.and_then(|p| match nw_output::write::atomic(p, format!("{}\n", report.json()).as_bytes()) {
        Ok(()) => Some(p.display().to_string()),
        Err(e) => {
            say(&format!(
                "{PREFIX} warning: cannot write the post-mortem to {} (--report): {e}; check that its directory exists and is writable",
                p.display()
            ));
            None
        }
    });
    if !has_ports {
        // No RDMA port was in use (NCCL on sockets): nothing on the fabric to report.
        return;
    }
    if report.command.code == 0 {
        if let Some(line) = report.clean_line() {
            say(&line);
        }
    } else {
        say(report.human(written.as_deref()).trim_end());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> tempfile::TempDir {
        let t = tempfile::tempdir().expect("tempdir");
        let port = t.path().join("class/infiniband/rxe0/ports/1");
        std::fs::create_dir_all(port.join("hw_counters")).expect("mkdir");
        std::fs::write(port.join("state"), "4: ACTIVE\n").expect("write");
        std::fs::write(port.join("phys_state"), "5: LinkUp\n").expect("write");
        std::fs::write(port.join("hw_counters/link_downed"), "0\n").expect("write");
        std::fs::write(port.join("hw_counters/sent_pkts"), "10\n").expect("write");
        t
    }

    fn config(t: &tempfile::TempDir) -> Config {
        Config {
            root: t.path().to_path_buf(),
            ports: vec![PortId { device: "rxe0".into(), port: 1 }],
            every: Duration::from_millis(10),
            report: None,
        }
    }

    fn exit(code: u8) -> Exit {
        Exit { code, signal: None, forwarded: None }
    }

    #[test]
    fn a_change_seen_by_a_poll_and_one_seen_only_at_exit_are_both_reported() {
        let t = tree();
        let port = t.path().join("class/infiniband/rxe0/ports/1");
        let mut w = Watch::start(&config(&t));
        let t0 = Instant::now();
        assert!(w.timeout(t0).is_some_and(|d| d <= Duration::from_millis(10)));
        std::fs::write(port.join("state"), "1: DOWN\n").expect("write");
        std::fs::write(port.join("phys_state"), "3: Disabled\n").expect("write");
        w.poll_if_due(t0); // not yet due: nothing read
        assert!(w.transitions.is_empty());
        w.poll_if_due(t0 + Duration::from_millis(20));
        assert_eq!(w.transitions.len(), 1);
        // Back up after the last poll, and a counter moved: seen at exit.
        std::fs::write(port.join("state"), "4: ACTIVE\n").expect("write");
        std::fs::write(port.join("phys_state"), "5: LinkUp\n").expect("write");
        std::fs::write(port.join("hw_counters/link_downed"), "1\n").expect("write");
        let r = w.finish(exit(1));
        let seen: Vec<(String, String, Seen)> =
            r.transitions.iter().map(|t| (t.from.to_string(), t.to.to_string(), t.seen)).collect();
        assert_eq!(
            seen,
            vec![
                ("ACTIVE/LinkUp".into(), "DOWN/Disabled".into(), Seen::Poll),
                ("DOWN/Disabled".into(), "ACTIVE/LinkUp".into(), Seen::Exit),
            ]
        );
        assert_eq!(r.ports[0].counters.len(), 1);
        assert_eq!((r.ports[0].counters[0].name.as_str(), r.ports[0].counters[0].delta), ("link_downed", Some(1)));
    }

    #[test]
    fn a_link_flapping_for_a_long_run_keeps_a_bounded_record_and_says_how_much_it_dropped() {
        let t = tree();
        let port = t.path().join("class/infiniband/rxe0/ports/1");
        let mut w = Watch::start(&config(&t));
        let t0 = Instant::now();
        for i in 1..=500u64 {
            let state = if i % 2 == 1 { "1: DOWN\n" } else { "4: ACTIVE\n" };
            std::fs::write(port.join("state"), state).expect("write");
            w.poll_if_due(t0 + Duration::from_millis(20 * i));
            assert!(w.transitions.len() <= 2 * crate::kept::HALF);
        }
        let r = w.finish(exit(1));
        assert_eq!(r.transitions.len(), 2 * crate::kept::HALF);
        assert_eq!(r.transitions_dropped, 500 - 2 * crate::kept::HALF as u64);
        assert_eq!(r.transitions[0].to.state, "DOWN", "the first change is kept");
        assert_eq!(r.transitions.last().map(|t| t.to.state.as_str()), Some("ACTIVE"), "the last change is kept");
        assert!(r.human(None).contains(&format!("... {} more state changes, not kept", r.transitions_dropped)));
    }

    #[test]
    fn a_port_that_vanishes_reads_unreadable_and_is_named() {
        let t = tree();
        let mut w = Watch::start(&config(&t));
        std::fs::remove_dir_all(t.path().join("class/infiniband/rxe0")).expect("rm");
        w.poll_if_due(Instant::now() + Duration::from_secs(1));
        let r = w.finish(exit(134));
        assert_eq!(r.transitions.len(), 1);
        assert_eq!(r.transitions[0].to.state, UNREADABLE);
        assert!(r.problems.iter().any(|p| p.contains("rxe0/ports/1/state")), "{:?}", r.problems);
        assert_eq!(once_each(r.problems.clone()), r.problems, "each problem once");
        assert!(r.ports[0].counters.is_empty(), "counters not read at exit are not 'moved'");
    }

    #[test]
    fn no_polling_when_asked_for_none() {
        let t = tree();
        let mut c = config(&t);
        c.every = Duration::ZERO;
        let w = Watch::start(&c);
        assert_eq!(w.timeout(Instant::now()), None);
        c.every = Duration::from_millis(u64::MAX);
        let mut w = Watch::start(&c);
        w.poll_if_due(Instant::now());
        assert!(w.timeout(Instant::now()).is_none_or(|d| d > Duration::from_secs(1 << 40)), "--watch-ms 2^64-1");
        c.every = Duration::from_secs(1);
        c.ports.clear();
        assert_eq!(Watch::start(&c).timeout(Instant::now()), None, "nothing to poll");
    }

    #[test]
    fn the_report_file_is_replaced_whole() {
        let t = tree();
        let path = t.path().join("report.json");
        std::fs::write(&path, "old").expect("write");
        nw_output::write::atomic(&path, b"{\"kind\":\"postmortem\"}\n").expect("write report");
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "{\"kind\":\"postmortem\"}\n");
        assert_eq!(std::fs::read_dir(t.path()).expect("list").count(), 2, "no temporary file left beside it");
        assert!(nw_output::write::atomic(&t.path().join("no/such/dir/r.json"), b"{}").is_err());
    }
}
