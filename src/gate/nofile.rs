//! Rank 0 holds one connection per pod: its soft RLIMIT_NOFILE is raised towards the hard limit
//! for the gate, and put back before the command starts. It never raises the hard limit.

use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};

use nw_output::msg::PREFIX;

/// Descriptors rank 0 needs besides one per pod: the listener, the first reads and their
/// copies, the pair test, stdio and the binary's own.
const SPARE: u64 = 128;

/// The soft limit as it was, put back when dropped.
pub struct Raised {
    was: Option<Rlimit>,
}

/// The soft limit `pods` need, at most the hard limit; `None` when it is high enough.
pub fn target(soft: u64, hard: u64, pods: u32) -> Option<u64> {
    let need = u64::from(pods) + SPARE;
    (soft < need).then(|| need.min(hard)).filter(|&to| to > soft)
}

/// Raises the soft limit to what `pods` need (at most the hard limit); says so when even the
/// hard limit is too low.
pub fn raise(pods: u32) -> Raised {
    // rustix, as for memlock: `None` is RLIM_INFINITY.
    let was = getrlimit(Resource::Nofile);
    let (soft, hard) = (was.current.unwrap_or(u64::MAX), was.maximum.unwrap_or(u64::MAX));
    let need = u64::from(pods) + SPARE;
    if hard < need {
        eprintln!(
            "{PREFIX} gate: rank 0 may open {hard} descriptors (RLIMIT_NOFILE hard limit) and {pods} pods need about {need}: joins past it wait and retry; raise the container's nofile limit"
        );
    }
    let Some(to) = target(soft, hard, pods) else { return Raised { was: None } };
    let set = setrlimit(Resource::Nofile, Rlimit { current: Some(to), maximum: was.maximum });
    if let Err(e) = &set {
        eprintln!("{PREFIX} gate: cannot raise the open-descriptor limit from {soft} to {to}: {e}");
    }
    Raised { was: set.ok().map(|()| was) }
}

impl Drop for Raised {
    fn drop(&mut self) {
        if let Some(was) = self.was.take() {
            let soft = was.current.map_or_else(|| "unlimited".to_string(), |s| s.to_string());
            if let Err(e) = setrlimit(Resource::Nofile, was) {
                eprintln!("{PREFIX} gate: cannot put the open-descriptor limit back to {soft}: {e}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_soft_limit_rises_to_what_the_pods_need_within_the_hard_limit() {
        assert_eq!(target(1024, 1_048_576, 1024), Some(1024 + SPARE));
        assert_eq!(target(1024, 1_048_576, 16_384), Some(16_384 + SPARE));
        assert_eq!(target(1024, 4096, 16_384), Some(4096), "never past the hard limit");
        assert_eq!(target(65_536, 1_048_576, 1024), None, "high enough already");
        assert_eq!(target(1024, 1024, 4096), None, "no room to raise");
    }
}
