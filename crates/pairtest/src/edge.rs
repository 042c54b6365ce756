//! One edge of a test (this pod towards one peer, or serving it) and [`PairTest`], the one seam
//! every front end drives a test through. Nothing here prints; every context, queue pair and
//! registration an edge opens is closed before it returns.

use std::time::{Duration, Instant};

pub use super::cause::cannot;
use super::cause::Cause;
use super::exchange::{self, ExchangeError, Session};
use super::here::Here;
use super::output::{self, PairResult};
use super::pair::Planned;
use super::session::{self, Opened};
use super::settings::Settings;
use super::wire::{Hello, PortInfo};

/// The peer's failure as a cause: it never came, or it came and misbehaved.
pub fn peer_cause(e: &ExchangeError) -> Cause {
    let hint = if e.no_peer() {
        "start the other end, check the address and that TCP is open between the pods; --wait-ms sets how long to wait"
    } else {
        "run the same nccl-wrap version on both ends, and make sure nothing else uses the port"
    };
    cannot("peer", e.to_string(), hint)
}

/// Opens every planned port; fails only when none opens.
pub(crate) fn open(planned: &[Planned]) -> Result<Opened, Cause> {
    let opened = session::open_all(planned);
    if opened.infos.is_empty() {
        let why: Vec<String> =
            opened.failed.iter().map(|(p, f)| format!("{}:{} at {}: {}", p.device, p.port, f.step, f.error)).collect();
        let summary = format!("no port of the plan can be opened through ibverbs: {}", why.join("; "));
        return Err(cannot(
            "no-port",
            summary,
            "run `nccl-wrap doctor` (uverbs nodes in the container, the port's state)",
        ));
    }
    Ok(opened)
}

/// The ports that opened on neither end's account: each a failed pair, numbered from 1000.
fn unopened(opened: &Opened, peer: &str) -> Vec<PairResult> {
    opened
        .failed
        .iter()
        .enumerate()
        .map(|(k, (p, f))| {
            let summary = format!("{}:{} cannot be opened at {}: {}", p.device, p.port, f.step, f.error);
            let c = cannot("no-port", summary, "run `nccl-wrap doctor`; this rail is left out of the pairing");
            output::unopened(1000 + k, peer, &p.device, p.port, c)
        })
        .collect()
}

/// A test of one peer, and the answer to one: [`super::rdma::Rdma`], or a stand-in in tests.
pub trait PairTest: Send + Sync {
    /// This pod's name, as results and the gate's verdict name it.
    fn host(&self) -> String;
    /// This pod's rails as the pairs will use them, or why it has none.
    fn ports(&self) -> Result<Vec<PortInfo>, Cause>;
    /// Tests the peer at `target`: every pair's result, or why the test could not run.
    fn initiate(&self, target: &str, settings: &Settings, wait_until: Instant) -> Result<Vec<PairResult>, Cause>;
    /// Answers a peer within `settings`, telling `clamped` first what they cut of its hello.
    fn answer(
        &self,
        s: Session,
        hello: &Hello,
        settings: &Settings,
        clamped: Clamped<'_>,
    ) -> Result<Vec<PairResult>, String>;
}

/// Where a listener says what of a peer's hello its own settings cut: (the peer, what was cut).
pub type Clamped<'a> = &'a dyn Fn(&str, &[String]);

/// Tests `target` from this pod; Err: the peer never came or misbehaved, or no port opened.
pub(crate) fn initiate(
    here: &Here,
    target: &str,
    limits: &Settings,
    wait_until: Instant,
) -> Result<Vec<PairResult>, Cause> {
    let opened = open(&here.planned)?;
    let (mut s, hello) = greet(target, wait_until, |s| session::greet(s, &opened, &here.host, limits), limits)
        .map_err(|e| peer_cause(&e))?;
    let (runs, theirs) = session::initiate(&mut s, &opened, hello, limits).map_err(|e| peer_cause(&e))?;
    let mut out = unopened(&opened, target);
    out.extend(runs.iter().enumerate().map(|(k, r)| output::result(k, target, r, here.local())));
    out.extend(output::unpaired(runs.len(), target, &opened.infos, &theirs, limits.all_pairs, &here.dropped));
    Ok(out)
}

/// How long a client waits before it connects again to a listener that closed it unread.
pub(crate) const AGAIN: Duration = Duration::from_millis(50);

/// Connects to `target` and exchanges the first messages (`first`), connecting again until
/// `wait_until` while a busy listener closes without a word; a refusal, garbage or silence is the
/// peer's answer, not retried.
pub fn greet<T>(
    target: &str,
    wait_until: Instant,
    mut first: impl FnMut(&mut Session) -> Result<T, ExchangeError>,
    limits: &Settings,
) -> Result<(Session, T), ExchangeError> {
    loop {
        let mut s = exchange::connect(target, wait_until, limits.timeout)?;
        match first(&mut s) {
            Ok(t) => return Ok((s, t)),
            Err(ExchangeError::Closed { got: 0, .. }) if Instant::now() + AGAIN < wait_until => {
                std::thread::sleep(AGAIN);
            }
            Err(e) => return Err(e),
        }
    }
}

/// What of `hello` this listener's `settings` clamp, for the caller to say before it answers.
pub(crate) fn clamped(opened: &Opened, hello: &Hello, settings: &Settings) -> Vec<String> {
    let pairs = session::pairing(hello.ports.len(), opened.infos.len(), hello.all_pairs);
    settings.answer(hello, pairs.len()).1
}

/// Answers one peer, with ports opened by this thread, within `settings` ([`clamped`]).
pub(crate) fn answer(
    here: &Here,
    opened: &Opened,
    mut s: Session,
    hello: &Hello,
    settings: &Settings,
) -> Result<Vec<PairResult>, ExchangeError> {
    let runs = session::answer(&mut s, hello, opened, &here.host, settings)?;
    let peer = format!("{} ({})", s.peer, hello.host);
    let mut out: Vec<PairResult> =
        runs.iter().enumerate().map(|(k, r)| output::result(k, &peer, r, here.local())).collect();
    out.extend(output::unpaired(runs.len(), &peer, &opened.infos, &hello.ports, hello.all_pairs, &here.dropped));
    Ok(out)
}
