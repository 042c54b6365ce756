//! This pod's pairs towards its successor, as the verdict's findings: the pair test
//! (`nw_pairtest`, through its [`PairTest`] seam: ibverbs in the binary, a stand-in on
//! 127.0.0.1 in the protocol's tests) driven once, a test that could not run being one finding.

use std::time::Instant;

use super::wire::Finding;
use nw_pairtest::edge::PairTest;
use nw_pairtest::Settings;

use super::verdict::{self, Pod};

/// This pod's pairs towards its successor, as findings; a test that could not run is one.
pub fn test(me: &Pod, next: &Pod, fabric: &dyn PairTest, target: &str, settings: &Settings) -> Vec<Finding> {
    // The successor listens before it joins: the connect needs no long wait.
    let wait_until = Instant::now() + settings.timeout * 2;
    match fabric.initiate(target, settings, wait_until) {
        Ok(results) => results.iter().map(|r| verdict::of_pair(me, next, r)).collect(),
        Err(c) => vec![verdict::of_pod(me, Some(next), &c)],
    }
}
