//! The one settings type of a pair test and its conversions (options, the hello, what a listener
//! allows). Pure. It must never let a peer's hello decide more than the listener's own settings
//! allow: at most its own size per pair and [`MAX_REGISTERED`] in all.

use std::time::Duration;

use super::wire::{self, Hello, PortInfo, Tag, WireError};

/// The most a listener registers for one peer, all pairs together: 32 rails x 8 MiB.
pub(crate) const MAX_REGISTERED: u64 = 256 << 20;

/// What one test does: pairing, sizes, round trips, deadlines, and who opens it for the gate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    pub all_pairs: bool,
    pub bytes: u32,
    pub iters: u32,
    pub duration_ms: u32,
    /// Each pair's deadline, per phase.
    pub timeout: Duration,
    /// A test on a job's behalf (the gate's): who this end is (plain ping and the ring: none).
    pub gate: Option<Tag>,
}

impl Settings {
    /// The ranges every front end checks before anything is opened.
    pub fn check(&self) -> Result<(), WireError> {
        wire::check_params(self.bytes, self.iters, self.duration_ms)?;
        let ms = self.timeout.as_millis();
        wire::fail_if(!(1..=600_000).contains(&ms), "timeout_ms", || format!("{ms} is not in 1..=600000"))
    }

    /// The initiator's hello.
    pub(crate) fn hello(&self, host: &str, ports: Vec<PortInfo>) -> Hello {
        Hello {
            host: host.to_owned(),
            ports,
            all_pairs: self.all_pairs,
            bytes: self.bytes,
            iters: self.iters,
            duration_ms: self.duration_ms,
            gate: self.gate.clone(),
        }
    }

    /// What a listener with these settings runs for `hello` (never more than its own, nor
    /// [`MAX_REGISTERED`] over `pairs` pairs), and what it clamped.
    pub fn answer(&self, hello: &Hello, pairs: usize) -> (Settings, Vec<String>) {
        let mut clamped = Vec::new();
        let per_pair_total = u32::try_from(MAX_REGISTERED / pairs.max(1) as u64).unwrap_or(u32::MAX);
        let most_bytes = self.bytes.min(per_pair_total).max(8);
        let mut pick = |what: &str, asked: u32, most: u32| {
            if asked > most {
                clamped.push(format!("{what} {asked} clamped to {most}"));
            }
            asked.min(most)
        };
        let run = Settings {
            all_pairs: hello.all_pairs,
            bytes: pick("bytes", hello.bytes, most_bytes),
            iters: pick("iters", hello.iters, self.iters),
            duration_ms: pick("duration_ms", hello.duration_ms, self.duration_ms),
            timeout: self.timeout,
            gate: None,
        };
        (run, clamped)
    }

    /// The timeout in the wire's milliseconds.
    pub fn timeout_ms(&self) -> u32 {
        u32::try_from(self.timeout.as_millis()).unwrap_or(u32::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ours() -> Settings {
        Settings {
            all_pairs: false,
            bytes: 1 << 20,
            iters: 1000,
            duration_ms: 1000,
            timeout: Duration::from_secs(3),
            gate: None,
        }
    }

    #[test]
    fn a_hello_asking_for_more_than_the_listener_allows_is_clamped_and_said_so() {
        let s = ours();
        let greedy = Hello { bytes: 1 << 30, iters: 1_000_000, ..s.hello("h", Vec::new()) };
        let (run, said) = s.answer(&greedy, 1);
        assert_eq!((run.bytes, run.iters, run.duration_ms), (1 << 20, 1000, 1000));
        assert_eq!(said, vec!["bytes 1073741824 clamped to 1048576", "iters 1000000 clamped to 1000"]);
        // The total over many pairs is bounded too.
        let big = Settings { bytes: 1 << 30, ..ours() };
        let (run, said) = big.answer(&greedy, 1024);
        assert!(u64::from(run.bytes) * 1024 <= MAX_REGISTERED, "{}", run.bytes);
        assert_eq!(said.len(), 2);
        // A modest hello is taken as it is.
        let small = Hello { bytes: 4096, iters: 10, duration_ms: 0, ..s.hello("h", Vec::new()) };
        let (run, said) = s.answer(&small, 4);
        assert_eq!((run.bytes, run.iters, run.duration_ms, said.len()), (4096, 10, 0, 0));
    }
}
