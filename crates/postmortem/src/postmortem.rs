//! What changed on the job's RDMA ports between start and end, for people and as JSON. Pure. It
//! must never change the exit status, and a clean exit gets at most one line from it.

use serde::Serialize;

use crate::meaning::{self, Kind};
use nw_nccl::ras::Finding;
use nw_observe::detect::counters::{self, Counters};
use nw_output::msg::PREFIX;

/// Counter lines in the block on stderr; the rest is counted, and in the JSON.
const MAX_COUNTER_LINES: usize = 10;

/// A port's link as sysfs names it (`ACTIVE`, `LinkUp`), or `unreadable`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub(crate) struct Link {
    pub(crate) state: String,
    pub(crate) phys_state: String,
}

impl std::fmt::Display for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.state, self.phys_state)
    }
}

/// Where a transition was seen: by a poll during the run, or by the last read at exit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Seen {
    Poll,
    Exit,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Transition {
    /// UTC, when it was seen (at most one poll period after it happened).
    pub(crate) time: String,
    /// `dev:port`.
    pub(crate) port: String,
    pub(crate) from: Link,
    pub(crate) to: Link,
    pub(crate) seen: Seen,
}

impl Transition {
    /// The line logged when it is seen, repeated in the post-mortem and a failed command's account.
    pub(crate) fn line(&self) -> String {
        format!("{} {} port state {} -> {}", self.time, self.port, self.from, self.to)
    }
}

/// A counter whose value at exit differs from its value at start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Moved {
    pub(crate) name: String,
    /// `counters` or `hw_counters`.
    pub(crate) group: String,
    pub(crate) start: u64,
    pub(crate) exit: u64,
    /// `exit - start`; `None` when it went down (the counter was reset during the run).
    pub(crate) delta: Option<u64>,
    pub(crate) kind: Kind,
    pub(crate) meaning: Option<&'static str>,
}

impl Moved {
    pub(crate) fn change(&self) -> String {
        match self.delta {
            Some(d) => format!("+{d}"),
            None => format!("reset ({} -> {})", self.start, self.exit),
        }
    }
}

/// The counters whose values at start and exit differ, by kind (errors first), then by name.
pub(crate) fn moved(start: &Counters, exit: &Counters) -> Vec<Moved> {
    let moved = |(key, &before): (&String, &u64)| {
        let after = *exit.get(key).filter(|&&after| after != before)?;
        let (group, name) = counters::split(key);
        let (kind, meaning) = meaning::of(name);
        Some(Moved {
            name: name.to_string(),
            group: group.to_string(),
            start: before,
            exit: after,
            delta: after.checked_sub(before),
            kind,
            meaning,
        })
    };
    let mut out: Vec<Moved> = start.iter().filter_map(moved).collect();
    out.sort_unstable_by(|a, b| (a.kind, &a.name).cmp(&(b.kind, &b.name)));
    out
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct PortReport {
    /// `dev:port`.
    pub(crate) port: String,
    pub(crate) start: Link,
    pub(crate) exit: Link,
    pub(crate) counters: Vec<Moved>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Exit {
    /// nccl-wrap's own exit status: the command's code, or 128+N.
    pub code: u8,
    /// The signal that ended the command (`SIGKILL`), if one did.
    pub signal: Option<String>,
    /// The last signal nccl-wrap forwarded to the command (the kubelet's SIGTERM), if any.
    pub forwarded: Option<String>,
}

impl Exit {
    pub fn describe(&self) -> String {
        let how = match &self.signal {
            Some(sig) => format!("was killed by {sig} (exit status {})", self.code),
            None => format!("exited with status {}", self.code),
        };
        match &self.forwarded {
            Some(f) => format!("{how}; nccl-wrap had forwarded {f} to it"),
            None => how,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub(crate) kind: &'static str,
    pub(crate) command: Exit,
    /// UTC, when the watch took its first reading and when the command's end was seen.
    pub(crate) started: String,
    pub(crate) ended: String,
    pub(crate) seconds: f64,
    /// The poll period, in milliseconds (0: read at start and exit only).
    pub(crate) watch_ms: u64,
    pub(crate) polls: u64,
    pub(crate) ports: Vec<PortReport>,
    /// The state changes in the order seen: the first and the last ones (`kept::HALF` each).
    pub(crate) transitions: Vec<Transition>,
    /// State changes seen between those kept, counted, not kept (a link flapping for days).
    pub(crate) transitions_dropped: u64,
    /// Reads that failed (a counter file that holds no number, a port that vanished...).
    pub(crate) problems: Vec<String>,
    /// What NCCL's RAS said of the job, when the supervisor asked it (`hang`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) ras: Option<Section>,
}

impl Report {
    /// Moved counters of kinds worth a person's attention, with their port.
    fn notable(&self, kinds: &[Kind]) -> Vec<(&str, &Moved)> {
        self.ports
            .iter()
            .flat_map(|p| p.counters.iter().filter(|m| kinds.contains(&m.kind)).map(move |m| (p.port.as_str(), m)))
            .collect()
    }

    /// The block on stderr after a failed command; `report_path` named where the JSON was written.
    pub fn human(&self, report_path: Option<&str>) -> String {
        let mut out = String::new();
        let mut line = |text: String| out.push_str(&format!("{PREFIX} {text}\n"));
        let counters = self.notable(&[Kind::Error, Kind::Congestion, Kind::Unknown]);
        let (command, after) = (self.command.describe(), format!("after {:.1} s", self.seconds));
        if self.transitions.is_empty() && counters.is_empty() {
            let states = self.ports.iter().map(|p| format!("{} {}", p.port, p.exit)).collect::<Vec<_>>().join(", ");
            line(format!("post-mortem: the command {command} {after}; its RDMA ports kept their state ({states}) and no error counter moved: the failure is probably not on these links"));
        } else {
            let names = self.ports.iter().map(|p| p.port.as_str()).collect::<Vec<_>>().join(", ");
            line(format!("post-mortem: the command {command} {after}; on its RDMA ports ({names}) since it started:"));
            for (i, t) in self.transitions.iter().enumerate() {
                if i == crate::kept::HALF && self.transitions_dropped > 0 {
                    line(format!("  ... {} more state changes, not kept", self.transitions_dropped));
                }
                let when = if t.seen == Seen::Exit { " (seen at exit)" } else { "" };
                line(format!("  {}{when}", t.line()));
            }
            for (port, m) in counters.iter().take(MAX_COUNTER_LINES) {
                let meaning = m.meaning.unwrap_or("no meaning on file for this counter");
                line(format!("  {port} {} {}: {meaning}", m.name, m.change()));
            }
            if counters.len() > MAX_COUNTER_LINES {
                line(format!("  ... and {} more counters (see --report)", counters.len() - MAX_COUNTER_LINES));
            }
        }
        if let Some(path) = report_path {
            line(format!("post-mortem as JSON: {path}"));
        }
        out
    }

    /// At most one line after a clean exit: a port changed state or an error counter moved.
    pub(crate) fn clean_line(&self) -> Option<String> {
        let errors = self.notable(&[Kind::Error]);
        if self.transitions.is_empty() && errors.is_empty() {
            return None;
        }
        let mut parts = Vec::new();
        if !self.transitions.is_empty() {
            let seen: Vec<String> =
                self.transitions.iter().map(|t| format!("{} {} -> {} at {}", t.port, t.from, t.to, t.time)).collect();
            parts.push(seen.join(", "));
            if self.transitions_dropped > 0 {
                parts.push(format!("{} more state changes not kept", self.transitions_dropped));
            }
        }
        if !errors.is_empty() {
            let named: Vec<String> =
                errors.iter().take(4).map(|(p, m)| format!("{p} {} {}", m.name, m.change())).collect();
            let more = if errors.len() > 4 { format!(" and {} more", errors.len() - 4) } else { String::new() };
            parts.push(format!("error counters moved: {}{more}", named.join(", ")));
        }
        Some(format!("{PREFIX} the command exited 0, but its RDMA ports changed during the run: {}", parts.join("; ")))
    }

    pub(crate) fn json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| format!("{{\"kind\":\"postmortem\",\"error\":\"{e}\"}}"))
    }
}

/// One answer (or why there was none).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Snapshot {
    /// UTC, when it was asked.
    pub(crate) time: String,
    /// `signal`, `exit` or `stall`.
    pub(crate) why: &'static str,
    /// How long the answer took, in milliseconds.
    pub(crate) ms: f64,
    pub(crate) nccl_version: Option<String>,
    /// The findings as people read them, most important first.
    pub(crate) lines: Vec<String>,
    pub(crate) findings: Vec<Finding>,
    /// Why there was no answer.
    pub(crate) error: Option<String>,
}

/// The post-mortem's `ras` member.
#[derive(Debug, Clone, Serialize)]
pub struct Section {
    /// Where RAS was asked (`127.0.0.1:28028`), or why not.
    pub(crate) addr: String,
    /// `--stall-ms` (0: off).
    pub(crate) stall_ms: u64,
    /// When a stall was seen (the collective counts had not moved for stall_ms), if one was.
    pub(crate) stalled_at: Option<String>,
    pub(crate) snapshots: Vec<Snapshot>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(pairs: &[(&str, u64)]) -> Counters {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    fn link(state: &str, phys: &str) -> Link {
        Link { state: state.into(), phys_state: phys.into() }
    }

    fn report(code: u8, transitions: Vec<Transition>, counters: Vec<Moved>) -> Report {
        Report {
            kind: "postmortem",
            command: Exit { code, signal: None, forwarded: None },
            started: "2026-11-23T18:00:00.000Z".into(),
            ended: "2026-11-23T18:01:00.000Z".into(),
            seconds: 60.0,
            watch_ms: 1000,
            polls: 60,
            ports: vec![PortReport {
                port: "mlx5_6:1".into(),
                start: link("ACTIVE", "LinkUp"),
                exit: link("ACTIVE", "LinkUp"),
                counters,
            }],
            transitions,
            transitions_dropped: 0,
            problems: Vec::new(),
            ras: None,
        }
    }

    #[test]
    fn only_counters_that_differ_are_kept_errors_first() {
        let start = c(&[
            ("counters/link_downed", 0),
            ("counters/port_xmit_data", 100),
            ("counters/symbol_error", 3),
            ("hw_counters/np_cnp_sent", 5),
            ("hw_counters/vendor_thing", 1),
            ("hw_counters/gone_at_exit", 1),
        ]);
        let exit = c(&[
            ("counters/link_downed", 1),
            ("counters/port_xmit_data", 900),
            ("counters/symbol_error", 3),
            ("hw_counters/np_cnp_sent", 9),
            ("hw_counters/vendor_thing", 4),
            ("hw_counters/new_at_exit", 7),
        ]);
        let m = moved(&start, &exit);
        let names: Vec<(&str, Kind, Option<u64>)> = m.iter().map(|m| (m.name.as_str(), m.kind, m.delta)).collect();
        assert_eq!(
            names,
            vec![
                ("link_downed", Kind::Error, Some(1)),
                ("np_cnp_sent", Kind::Congestion, Some(4)),
                ("vendor_thing", Kind::Unknown, Some(3)),
                ("port_xmit_data", Kind::Traffic, Some(800)),
            ],
            "unchanged, and read only once, are left out"
        );
        assert_eq!(m[0].group, "counters");
        assert!(m[0].meaning.is_some_and(|t| t.contains("link went down")));
    }

    #[test]
    fn a_counter_that_went_down_is_a_reset_not_a_huge_delta() {
        let m = moved(&c(&[("hw_counters/rcvd_seq_err", 10)]), &c(&[("hw_counters/rcvd_seq_err", 2)]));
        assert_eq!(m[0].delta, None);
        assert_eq!(m[0].change(), "reset (10 -> 2)");
    }

    #[test]
    fn the_failure_block_names_port_change_time_and_counters_with_meanings() {
        let t = Transition {
            time: "2026-11-23T18:00:30.000Z".into(),
            port: "mlx5_6:1".into(),
            from: link("ACTIVE", "LinkUp"),
            to: link("DOWN", "Disabled"),
            seen: Seen::Poll,
        };
        let counters = moved(
            &c(&[("counters/link_downed", 0), ("counters/port_rcv_data", 1)]),
            &c(&[("counters/link_downed", 1), ("counters/port_rcv_data", 50)]),
        );
        let r = report(1, vec![t], counters);
        let text = r.human(Some("/tmp/r.json"));
        assert!(text.lines().all(|l| l.starts_with("nccl-wrap: ")), "{text}");
        assert!(text.contains("exited with status 1 after 60.0 s"), "{text}");
        assert!(text.contains("2026-11-23T18:00:30.000Z mlx5_6:1 port state ACTIVE/LinkUp -> DOWN/Disabled"), "{text}");
        assert!(text.contains("mlx5_6:1 link_downed +1: the link went down"), "{text}");
        assert!(!text.contains("port_rcv_data"), "traffic is not news: {text}");
        assert!(text.ends_with("post-mortem as JSON: /tmp/r.json\n"), "{text}");
    }

    #[test]
    fn nothing_changed_says_so_in_one_line() {
        let mut r = report(137, vec![], vec![]);
        r.command.signal = Some("SIGKILL".into());
        r.command.forwarded = Some("SIGTERM".into());
        let text = r.human(None);
        assert_eq!(text.lines().count(), 1, "{text}");
        assert!(
            text.contains("was killed by SIGKILL (exit status 137); nccl-wrap had forwarded SIGTERM to it"),
            "{text}"
        );
        assert!(text.contains("kept their state (mlx5_6:1 ACTIVE/LinkUp)"), "{text}");
        assert_eq!(r.clean_line(), None);
    }

    #[test]
    fn a_clean_exit_gets_one_line_only_for_a_transition_or_an_error_counter() {
        let congestion = moved(&c(&[("hw_counters/np_cnp_sent", 0)]), &c(&[("hw_counters/np_cnp_sent", 9)]));
        assert_eq!(report(0, vec![], congestion).clean_line(), None, "congestion alone is no news");
        let errors = moved(
            &c(&[("hw_counters/out_of_sequence", 0), ("counters/symbol_error", 1)]),
            &c(&[("hw_counters/out_of_sequence", 4), ("counters/symbol_error", 2)]),
        );
        let line = report(0, vec![], errors).clean_line().expect("a line");
        assert!(!line.contains('\n'));
        assert!(line.contains("mlx5_6:1 out_of_sequence +4, mlx5_6:1 symbol_error +1"), "{line}");
    }

    #[test]
    fn long_lists_are_cut_on_stderr_and_whole_in_json() {
        let start: Counters = (0..15).map(|i| (format!("hw_counters/x{i:02}"), 0)).collect();
        let exit: Counters = (0..15).map(|i| (format!("hw_counters/x{i:02}"), 1)).collect();
        let r = report(1, vec![], moved(&start, &exit));
        let text = r.human(None);
        assert!(text.contains("... and 5 more counters"), "{text}");
        let v: serde_json::Value = serde_json::from_str(&r.json()).expect("json");
        assert_eq!(v["ports"][0]["counters"].as_array().map(Vec::len), Some(15));
        assert_eq!(v["ports"][0]["counters"][0]["kind"], "unknown");
        assert_eq!(v["ports"][0]["counters"][0]["meaning"], serde_json::Value::Null);
    }
}
