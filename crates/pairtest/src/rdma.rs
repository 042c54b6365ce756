//! The one adapter of the pair test over ibverbs: [`PairTest`] on the ports this pod (or node)
//! brings. Contexts are opened on the calling thread and closed before each call returns.

use std::sync::Mutex;
use std::time::Instant;

use super::cause::Cause;
use super::edge::{self, Clamped, PairTest};
use super::exchange::Session;
use super::here::Here;
use super::output::PairResult;
use super::settings::Settings;
use super::wire::{Hello, PortInfo};

pub struct Rdma {
    here: Mutex<Result<Here, Cause>>,
    host: String,
}

impl Rdma {
    /// What this end brings (or why it brings nothing), and its name.
    pub fn new(here: Result<Here, Cause>, host: String) -> Rdma {
        Rdma { here: Mutex::new(here), host }
    }

    /// Replaces what this end brings (the ring: the node's ports, read again every round).
    pub fn renew(&self, here: Result<Here, Cause>) {
        *self.here.lock().unwrap_or_else(|p| p.into_inner()) = here;
    }

    fn here(&self) -> Result<Here, Cause> {
        self.here.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl PairTest for Rdma {
    fn host(&self) -> String {
        self.host.clone()
    }
    fn ports(&self) -> Result<Vec<PortInfo>, Cause> {
        // Opened and closed at once: what a peer needs to know, not resources to hold.
        Ok(edge::open(&self.here()?.planned)?.infos)
    }
    fn initiate(&self, target: &str, settings: &Settings, wait_until: Instant) -> Result<Vec<PairResult>, Cause> {
        edge::initiate(&self.here()?, target, settings, wait_until)
    }
    fn answer(
        &self,
        s: Session,
        hello: &Hello,
        settings: &Settings,
        said: Clamped<'_>,
    ) -> Result<Vec<PairResult>, String> {
        let here = self.here().map_err(|c| c.summary)?;
        let opened = edge::open(&here.planned).map_err(|c| c.summary)?;
        let clamped = edge::clamped(&opened, hello, settings);
        if !clamped.is_empty() {
            said(&s.peer, &clamped);
        }
        edge::answer(&here, &opened, s, hello, settings).map_err(|e| e.to_string())
    }
}
