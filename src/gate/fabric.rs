//! What the gate asks of the fabric: this pod's rails, a test of its successor, an answer to its
//! predecessor. The real one is ping's edge over ibverbs; the protocol's tests hand in their own,
//! so that the coordination is tested on 127.0.0.1 without RDMA hardware.

use std::time::{Duration, Instant};

use crate::ping::cause::Cause;
use crate::ping::edge::{self, PairTest};
use crate::ping::exchange::Session;
use crate::ping::here::Here;
use crate::ping::output::PairResult;
use crate::ping::session::Limits;
use crate::ping::wire::{Finding, Hello, PortInfo};

use super::verdict::{self, Pod};

/// The pair test (ping's seam: the successor tested, the predecessor answered on the listener's
/// thread), and what the gate adds: the pod's name and rails.
pub trait Fabric: PairTest {
    /// This pod's name, as the verdict names it.
    fn host(&self) -> String;
    /// This pod's rails as the pairs will use them, or why it has none.
    fn ports(&self) -> Result<Vec<PortInfo>, Cause>;
}

/// ping's test over ibverbs, on the ports the plan hands NCCL.
pub struct Rdma {
    pub here: Result<Here, Cause>,
    pub host: String,
}

impl Fabric for Rdma {
    fn host(&self) -> String {
        self.host.clone()
    }
    fn ports(&self) -> Result<Vec<PortInfo>, Cause> {
        let here = self.here.as_ref().map_err(Clone::clone)?;
        // Opened and closed at once: what a peer needs to know, not resources to hold.
        Ok(edge::open(&here.planned)?.infos)
    }
}

impl PairTest for Rdma {
    fn initiate(&self, target: &str, limits: &Limits, wait_until: Instant) -> Result<Vec<PairResult>, Cause> {
        let here = self.here.as_ref().map_err(Clone::clone)?;
        edge::initiate(here, target, limits, wait_until)
    }
    fn answer(&self, s: Session, hello: &Hello, timeout: Duration) -> Result<Vec<PairResult>, String> {
        let here = self.here.as_ref().map_err(|c| c.summary.clone())?;
        // Contexts are opened on this (the listener's) thread: nothing of verbs crosses threads.
        let opened = edge::open(&here.planned).map_err(|c| c.summary)?;
        edge::answer(here, &opened, s, hello, timeout).map_err(|e| e.to_string())
    }
}

/// This pod's pairs towards its successor, as findings; a test that could not run is one.
pub fn edge(me: &Pod, next: &Pod, fabric: &dyn Fabric, target: &str, limits: &Limits) -> Vec<Finding> {
    // The successor listens before it joins: the connect needs no long wait.
    let wait_until = Instant::now() + limits.timeout * 2;
    match fabric.initiate(target, limits, wait_until) {
        Ok(results) => results.iter().map(|r| verdict::of_pair(me, next, r)).collect(),
        Err(c) => vec![verdict::of_pod(me, Some(next), &c)],
    }
}
