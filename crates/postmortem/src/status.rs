//! `nccl-wrap status`: the supervised ports now, the counters that moved since the start, and NCCL's
//! RAS view, for people or as JSON. Reads only, each read bounded; it must never signal or touch
//! the job. Exit status: 0 read, 1 RAS or a port names a problem, 2 no supervisor state.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use serde::Serialize;

use crate::postmortem::{self, Link, Moved};
use crate::state::{self, State};
use crate::{portwatch, ras};
use nw_nccl::ras::clean;
use nw_output::msg::PREFIX;

/// The RAS query's bound (plus `ras::REPORT_GRACE`): a person is waiting.
pub(crate) const RAS_DEADLINE: Duration = Duration::from_secs(2);
/// RAS lines printed, at most (`--json` has every one).
pub(crate) const MAX_SHOWN: usize = 256;

#[derive(Debug, Serialize)]
pub(crate) struct PortNow {
    pub(crate) port: String,
    pub(crate) start: Link,
    pub(crate) now: Link,
    /// Counters that moved since the start, errors first.
    pub(crate) counters: Vec<Moved>,
}

#[derive(Debug, Serialize)]
pub(crate) struct RasNow {
    pub(crate) addr: String,
    pub(crate) nccl_version: Option<String>,
    pub(crate) ms: f64,
    pub(crate) lines: Vec<String>,
    pub findings: Vec<nw_nccl::ras::Finding>,
    pub(crate) error: Option<String>,
}

#[derive(Debug, Serialize)]
pub(crate) struct Status {
    pub(crate) kind: &'static str,
    pub(crate) pid: u32,
    pub(crate) started: String,
    pub(crate) ports: Vec<PortNow>,
    pub(crate) ras: RasNow,
    pub(crate) problems: Vec<String>,
}

/// Reads everything; `Err` when there is no usable state file.
pub(crate) fn gather(state_path: &Path, sysfs_root: &Path) -> Result<Status, state::StateError> {
    let st: State = state::read(state_path)?;
    let mut problems = Vec::new();
    let read = |p: &state::PortStart| {
        let (dev, port) = state::plain_port(&p.port)?;
        let (now, counters) = portwatch::read_now(sysfs_root, dev, port, &mut problems);
        let start = Link { state: clean(&p.state), phys_state: clean(&p.phys_state) };
        Some(PortNow { port: p.port.clone(), start, now, counters: postmortem::moved(&p.counters, &counters) })
    };
    let ports = st.ports.iter().filter_map(read).collect();
    let ras = ask(&st.ras);
    Ok(Status { kind: "status", pid: st.pid, started: clean(&st.started), ports, ras, problems })
}

fn ask(addr: &str) -> RasNow {
    let reply = match addr.parse::<SocketAddr>() {
        Ok(a) => ras::query(a, false, RAS_DEADLINE).map_err(|e| e.to_string()),
        Err(_) => Err(format!("not asked: {}", clean(addr))),
    };
    let (ms, nccl_version, lines, findings, error) = match reply {
        Ok(r) => ((r.ms * 100.0).round() / 100.0, r.view.nccl_version, r.lines, r.view.findings, None),
        Err(e) => (0.0, None, Vec::new(), Vec::new(), Some(e)),
    };
    RasNow { addr: clean(addr), nccl_version, ms, lines, findings, error }
}

impl Status {
    /// Whether anything needs a look: a port not ACTIVE, an error counter moved, RAS findings.
    pub(crate) fn troubled(&self) -> bool {
        !self.ras.lines.is_empty()
            || self
                .ports
                .iter()
                .any(|p| p.now.state != "ACTIVE" || p.counters.iter().any(|m| m.kind == crate::meaning::Kind::Error))
    }

    pub fn human(&self) -> String {
        let mut out = format!("nccl-wrap status: command pid {}, started {}\n", self.pid, self.started);
        if self.ports.is_empty() {
            out.push_str("ports: none watched (NCCL on sockets?)\n");
        }
        for p in &self.ports {
            let was = if p.now == p.start { String::new() } else { format!(" (was {})", p.start) };
            out.push_str(&format!("port {} {}{was}\n", p.port, p.now));
            let moved: Vec<&Moved> =
                p.counters.iter().filter(|m| m.kind != crate::meaning::Kind::Traffic).take(10).collect();
            for m in &moved {
                let meaning = m.meaning.map(|t| format!(": {t}")).unwrap_or_default();
                out.push_str(&format!("  {} {} since the start{meaning}\n", m.name, m.change()));
            }
            if moved.is_empty() {
                out.push_str("  no error or congestion counter moved since the start\n");
            }
        }
        match (&self.ras.error, self.ras.lines.is_empty()) {
            (Some(e), _) => out.push_str(&format!("NCCL's RAS ({}): {e}\n", self.ras.addr)),
            (None, true) => out.push_str(&format!(
                "NCCL's RAS ({}, NCCL {}, {:.1} ms): every rank answers, no error\n",
                self.ras.addr,
                self.ras.nccl_version.as_deref().unwrap_or("?"),
                self.ras.ms
            )),
            (None, false) => {
                out.push_str(&format!("NCCL's RAS ({}, {:.1} ms):\n", self.ras.addr, self.ras.ms));
                for l in self.ras.lines.iter().take(MAX_SHOWN) {
                    out.push_str(&format!("  {l}\n"));
                }
                if let Some(n) = self.ras.lines.len().checked_sub(MAX_SHOWN).filter(|n| *n > 0) {
                    out.push_str(&format!("  ... and {n} more that RAS named (each in --json)\n"));
                }
            }
        }
        for p in &self.problems {
            out.push_str(&format!("unreadable: {p}\n"));
        }
        out
    }
}

/// The subcommand: prints, returns the exit status.
pub fn main(state_path: &Path, sysfs_root: &Path, json: bool) -> u8 {
    use std::io::Write as _;
    match gather(state_path, sysfs_root) {
        Ok(s) => {
            let text = if json {
                serde_json::to_string(&s)
                    .unwrap_or_else(|e| format!("{{\"kind\":\"status\",\"error\":{:?}}}", e.to_string()))
                    + "\n"
            } else {
                s.human()
            };
            let _ = std::io::stdout().write_all(text.as_bytes());
            u8::from(s.troubled())
        }
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "{PREFIX} {e}");
            2
        }
    }
}
