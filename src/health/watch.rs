//! `nccl-wrap watch`, the node agent: every jittered interval, the node's checks in the node's view
//! (sysfs and procfs only) and both files rewritten whole; signals taken only between rounds. It
//! never exits on a transient failure after its first round.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nix::libc;

use super::metrics::Round;
use super::{read_counters, ring, summarize, write_outputs, Facts, Health, Outputs, View};
use crate::doctor::{self, DoctorError, Status};
use nw_decide as plan;
use nw_observe::detect::gid_source::SysfsOnly;
use nw_observe::detect::sysfs::Sysfs;
use nw_observe::detect::Vars;
use nw_observe::observation;
use nw_observe::verbs::{NoVerbs, Verbs};
use nw_output::msg::PREFIX;
use nw_pairtest::here;
use nw_pairtest::rdma::Rdma;
use nw_pid1::memlock::{self, Memlock};
use nw_pid1::sys::Blocked;

/// Exit status when the agent cannot start (signals, the first round's files).
pub const EXIT_CANNOT_RUN: u8 = 2;

#[derive(Debug, Clone)]
pub struct Options {
    pub interval: Duration,
    /// Each wait is the interval times 1 +/- up to this many percent.
    pub jitter_pct: u32,
    /// Stop after this many rounds (0: until a signal).
    pub rounds: u64,
    pub outputs: Outputs,
    /// `--ring`: the agents' ring ping, off when `None`.
    pub ring: Option<ring::Config>,
}

pub struct Roots<'a> {
    pub sysfs: &'a Sysfs,
    pub proc_root: &'a Path,
    pub dev_root: &'a Path,
    /// The agent's environment: only NCCL's GID preferences are read from it.
    pub vars: &'a Vars,
}

/// The node's devices observed and planned, taking no NCCL variable of the agent's environment
/// into account but its GID preferences.
pub fn node_plan(r: &Roots) -> (plan::Plan, BTreeMap<&'static str, usize>) {
    let (prefs, _) = plan::gid_prefs(r.vars);
    let roots = observation::Roots {
        sysfs: r.sysfs,
        proc_root: r.proc_root,
        dev_root: r.dev_root,
        image_root: Path::new("/"),
        annotations: Path::new(""),
        dra_metadata: Path::new(""),
        device_nodes: None,
    };
    let none = Vars::new();
    let seen = observation::observe(&roots, &none, observation::View::Node, &plan::gid_rule(prefs), &SysfsOnly);
    (plan::plan(seen.detection, &none, &prefs, plan::Choices::default()), seen.skipped)
}

/// One round: doctor's node checks over the node's plan, the counters.
pub fn round(
    r: &Roots,
    memlock: &Memlock,
    (plan, skipped): &(plan::Plan, BTreeMap<&'static str, usize>),
) -> Result<Health, DoctorError> {
    let none = Vars::new();
    let verbs = NoVerbs { reason: "the node agent reads sysfs only".into() };
    let inp = doctor::Inputs {
        plan,
        memlock,
        vars: &none,
        sysfs: r.sysfs,
        proc_root: r.proc_root,
        dev_root: r.dev_root,
        verbs: &verbs,
        selftest: None,
        // Node-scope checks ask for no pod addresses (whose GID entry is a pod's question).
        addrs: &|| Ok(Vec::new()),
    };
    let report = doctor::run_scoped(&inp, View::Node)?;
    let counters = read_counters(r.sysfs, plan);
    Ok(summarize(&Facts { view: View::Node, plan, report: &report, memlock, counters: &counters, skipped }))
}

/// The agent's side of the ring: its configuration, the pair test, whom it answers.
struct Ring<'a> {
    config: &'a ring::Config,
    fabric: std::sync::Arc<Rdma>,
    allowed: ring::Allowed,
    verbs: &'a dyn Verbs,
}

/// Binds the ring's port and answers peers on a thread for the agent's life, and says so.
fn start_ring<'a>(r: &Roots, config: &'a ring::Config, verbs: &'a dyn Verbs) -> Result<Ring<'a>, String> {
    // The pair test's one dual-stack bind: every address, both families.
    let listener = nw_pairtest::exchange::bind_any(config.port).map_err(|e| format!("ring: {e}"))?;
    let not_yet = nw_pairtest::edge::cannot("no-port", "the first ring round has not run yet", "wait for it");
    let fabric = std::sync::Arc::new(Rdma::new(Err(not_yet), here::hostname(r.proc_root, r.vars)));
    // The peers known before the listener starts: a predecessor whose first ring round comes
    // before this agent's is answered, not refused as a stranger.
    let allowed = ring::Allowed::new(std::sync::Mutex::new(ring::resolve(&config.service).unwrap_or_default()));
    let (f, a, timeout) = (std::sync::Arc::clone(&fabric), std::sync::Arc::clone(&allowed), config.timeout);
    std::thread::Builder::new()
        .name("ring".into())
        .spawn(move || ring::serve(&listener, f.as_ref(), &a, timeout, None))
        .map_err(|e| format!("ring: cannot start the listener's thread: {e}"))?;
    eprintln!(
        "{PREFIX} watch: ring ping every {} round(s) towards the next of {}'s addresses, answering on port {}",
        config.every, config.service, config.port
    );
    Ok(Ring { config, fabric, allowed, verbs })
}

/// One ring round: the node view's ports (PFs) renewed, then the test of the successor.
fn ring_round(r: &Roots, plan: &plan::Plan, ring: &Ring) -> ring::Report {
    ring.fabric.renew(here::read(&here::Inputs { plan, vars: r.vars, proc_root: r.proc_root, verbs: ring.verbs }));
    let own = nw_observe::detect::netif::read().map(|a| a.into_iter().map(|o| o.addr).collect());
    let round = ring::Round {
        config: ring.config,
        resolve: &ring::resolve,
        own,
        allowed: &ring.allowed,
        timestamp: unix_now(),
    };
    ring::round(&round, ring.fabric.as_ref())
}

/// Runs the agent until a signal (or `rounds`); returns the exit status. `verbs` are the pair
/// test's, used by `--ring` only.
pub fn main(r: &Roots, opts: &Options, verbs: &dyn Verbs) -> u8 {
    agent(r, opts, verbs).unwrap_or_else(|e| {
        eprintln!("{PREFIX} {e}");
        EXIT_CANNOT_RUN
    })
}

/// [`main`]'s loop; its error is the line that stops the agent.
fn agent(r: &Roots, opts: &Options, verbs: &dyn Verbs) -> Result<u8, String> {
    let blocked = Blocked::block().map_err(|e| format!("watch cannot block signals: {e}"))?;
    let memlock = memlock::raise();
    let mut files = Vec::new();
    for p in [&opts.outputs.features, &opts.outputs.metrics].into_iter().flatten() {
        nw_output::write::sweep(p);
        files.push(p.display().to_string());
    }
    eprintln!(
        "{PREFIX} watch: the node's RDMA health from {} every {} s (+/- {}%), into {}",
        r.sysfs.path("").display(),
        opts.interval.as_secs_f64(),
        opts.jitter_pct,
        if files.is_empty() { "no file (stderr only)".to_string() } else { files.join(" and ") }
    );
    let ring = opts.ring.as_ref().map(|c| start_ring(r, c, verbs)).transpose().map_err(|e| format!("watch: {e}"))?;
    let mut last_ring: Option<ring::Report> = None;
    let mut rng = seed();
    let mut last: Option<String> = None;
    let mut n: u64 = 0;
    loop {
        n += 1;
        let started = Instant::now();
        let timestamp = unix_now();
        // One observation and one plan a round, for the ring and the node's checks alike.
        let node = node_plan(r);
        if let Some(ring) = ring.as_ref().filter(|g| (n - 1) % g.config.every.max(1) == 0) {
            let report = ring_round(r, &node.0, ring);
            if last_ring.as_ref().map(ring::Report::key) != Some(report.key()) {
                eprintln!("{PREFIX} watch: {}", report.line());
            }
            last_ring = Some(report);
        }
        let health = round(r, &memlock, &node)
            .map(|h| Health { ring: last_ring.clone(), ..h })
            .map_err(|e| format!("doctor cannot run: {e}"));
        let written = health.as_ref().map_err(String::clone).and_then(|h| {
            let usage = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_SELF).ok();
            let secs = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
            let round_info = Round {
                timestamp,
                duration: Some(started.elapsed().as_secs_f64()),
                rounds: Some(n),
                interval: Some(opts.interval.as_secs_f64()),
                cpu_seconds: usage.map(|u| secs(u.user_time()) + secs(u.system_time())),
                max_rss_bytes: usage.and_then(|u| u64::try_from(u.max_rss()).ok()).map(|kib| kib * 1024),
            };
            let expiry = timestamp as u64 + (opts.interval * 3).max(Duration::from_secs(120)).as_secs();
            write_outputs(&opts.outputs, h, &round_info, "nccl-wrap watch", Some(expiry))
        });
        match written {
            Err(e) if n == 1 => return Err(format!("watch: round 1: {e}")),
            Err(e) => eprintln!("{PREFIX} watch: round {n}: {e}"),
            Ok(()) => {}
        }
        if let Some(verdict) = health.ok().map(|h| verdict(&h)).filter(|v| last.as_ref() != Some(v)) {
            eprintln!("{PREFIX} watch: {verdict}");
            last = Some(verdict);
        }
        if opts.rounds != 0 && n >= opts.rounds {
            return Ok(0);
        }
        let deadline = started + jittered(opts.interval, opts.jitter_pct, &mut rng);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            match blocked.wait(Some(left)) {
                Ok(Some(sig)) if [libc::SIGTERM, libc::SIGINT, libc::SIGQUIT].contains(&sig) => {
                    eprintln!("{PREFIX} watch: stopping on signal {sig} after {n} round(s); the files are whole");
                    return Ok(0);
                }
                Ok(Some(libc::SIGHUP)) => break,
                Ok(_) | Err(nix::errno::Errno::EINTR) => {}
                Err(e) => return Err(format!("watch: cannot wait for signals: {e}")),
            }
        }
    }
}

/// The line people read: healthy or not, usable ports, and what fails.
pub fn verdict(h: &Health) -> String {
    let failing = h.checks.iter().filter(|(_, s)| **s == Status::Fail).map(|(k, _)| match (&k.device, k.port) {
        (Some(d), Some(p)) => format!("{} {d}:{p}", k.id),
        (Some(d), None) => format!("{} {d}", k.id),
        _ => k.id.to_string(),
    });
    let failing: Vec<String> = failing.collect();
    let state = if h.healthy { "healthy" } else { "NOT healthy" };
    let failing = if failing.is_empty() { String::new() } else { format!("; failing: {}", failing.join(", ")) };
    format!("{state}: {} of {} RDMA port(s) usable{failing}", h.usable(), h.ports.len())
}

pub fn unix_now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

fn seed() -> u64 {
    let t = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1);
    (t ^ (u64::from(std::process::id()) << 32)) | 1
}

/// `interval` times 1 +/- up to `pct` percent (xorshift64*: spread, not secrecy).
pub fn jittered(interval: Duration, pct: u32, state: &mut u64) -> Duration {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    let r = state.wrapping_mul(0x2545_f491_4f6c_dd1d);
    let unit = (r >> 11) as f64 / (1u64 << 53) as f64; // [0, 1)
    let factor = 1.0 + f64::from(pct.min(100)) / 100.0 * (2.0 * unit - 1.0);
    interval.mul_f64(factor.max(0.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_stays_within_its_bound_and_spreads() {
        let mut s = 42;
        let base = Duration::from_secs(60);
        let waits: Vec<Duration> = (0..1000).map(|_| jittered(base, 10, &mut s)).collect();
        assert!(waits.iter().all(|w| *w >= Duration::from_secs(54) && *w <= Duration::from_secs(66)));
        assert!(
            waits.iter().any(|w| *w < Duration::from_secs(57)) && waits.iter().any(|w| *w > Duration::from_secs(63))
        );
        assert_eq!(jittered(base, 0, &mut s), base);
    }
}
