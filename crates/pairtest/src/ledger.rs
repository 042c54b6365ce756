//! Each source's token bucket at one listener, and its refusals said at a bounded rate (a source is
//! an IPv4 address or an IPv6 /64). It must never hold more than [`MAX_SOURCES`] entries, nor let
//! more than [`FULL_PER_WINDOW`] full and [`SUMS_PER_WINDOW`] + 1 count lines out a window.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::clean;
use super::exchange::ExchangeError;

/// How long one log window lasts: its refusals past the full ones are said once at its end.
pub(crate) const WINDOW: Duration = Duration::from_secs(10);
/// Refusals of one source said in full a window (the first of a scanner are worth reading).
pub(crate) const FULL_PER_SOURCE: u32 = 3;
/// Refusals said in full a window, every source together.
pub(crate) const FULL_PER_WINDOW: u32 = 16;
/// Sources with a count line of their own a window; the rest share one line.
pub(crate) const SUMS_PER_WINDOW: usize = 16;
/// Sources tracked at once; past it, a new source is neither limited nor named (counted).
pub(crate) const MAX_SOURCES: usize = 4096;

/// Where connections come from, as limits and lines count them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Source(IpAddr);

impl Source {
    /// An IPv4 address (an IPv4-mapped IPv6 one included) as itself; an IPv6 address as its /64.
    pub fn of(ip: IpAddr) -> Source {
        match ip.to_canonical() {
            IpAddr::V6(v6) => Source(IpAddr::V6((u128::from(v6) & (u128::MAX << 64)).into())),
            v4 => Source(v4),
        }
    }
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            IpAddr::V4(a) => write!(f, "{a}"),
            IpAddr::V6(a) => write!(f, "{a}/64"),
        }
    }
}

/// One source's bucket and its refusals of this window.
#[derive(Debug)]
struct Entry {
    tokens: f64,
    at: Instant,
    said: u32,
    counted: u64,
    last: String,
}

#[derive(Debug)]
struct Book {
    burst: f64,
    rate: f64,
    per: BTreeMap<Source, Entry>,
    window: Instant,
    said: u32,
    /// Refusals of sources past [`MAX_SOURCES`], counted only.
    others: u64,
}

impl Book {
    fn entry(&mut self, src: Source) -> Option<&mut Entry> {
        if !self.per.contains_key(&src) && self.per.len() >= MAX_SOURCES {
            return None;
        }
        let burst = self.burst;
        let e = self.per.entry(src).or_insert_with(|| Entry {
            tokens: burst,
            at: Instant::now(),
            said: 0,
            counted: 0,
            last: String::new(),
        });
        // The bucket refills at `rate` a second, up to `burst`.
        let now = Instant::now();
        e.tokens = (e.tokens + now.duration_since(e.at).as_secs_f64() * self.rate).min(burst);
        e.at = now;
        Some(e)
    }
}

/// One listener's book of its sources, shared by its desk and the front end above it.
#[derive(Debug, Clone)]
pub struct Ledger(Arc<Mutex<Book>>);

impl Ledger {
    /// A book whose sources may each start `burst` first reads at once, then `rate` a second.
    pub fn new(burst: u32, rate: u32) -> Ledger {
        Ledger(Arc::new(Mutex::new(Book {
            burst: f64::from(burst.max(1)),
            rate: f64::from(rate),
            per: BTreeMap::new(),
            window: Instant::now(),
            said: 0,
            others: 0,
        })))
    }

    /// The book of a listener under `policy`.
    pub fn of(policy: &super::door::Policy) -> Ledger {
        Ledger::new(policy.burst, policy.rate)
    }

    fn book(&self) -> MutexGuard<'_, Book> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes one of `src`'s tokens for a first read; false when it has none left.
    pub(crate) fn take(&self, src: Source) -> bool {
        let mut book = self.book();
        let Some(e) = book.entry(src) else { return true };
        let has = e.tokens >= 1.0;
        if has {
            e.tokens -= 1.0;
        }
        has
    }

    /// Gives back the token of a valid first message: real peers never run out, strays do.
    pub(crate) fn give_back(&self, src: Source) {
        let mut book = self.book();
        let burst = book.burst;
        if let Some(e) = book.entry(src) {
            e.tokens = (e.tokens + 1.0).min(burst);
        }
    }

    /// Counts a front end's refusal of `ip`'s first message (a token too); whether to say it.
    pub fn refused(&self, ip: IpAddr, why: &str) -> bool {
        self.count(Source::of(ip), why, true)
    }

    /// Counts one refusal of `src` (`charge`: it also costs a token); whether it is said in full.
    pub(crate) fn count(&self, src: Source, why: &str, charge: bool) -> bool {
        let mut book = self.book();
        let room = book.said < FULL_PER_WINDOW;
        let Some(e) = book.entry(src) else {
            book.others += 1;
            return false;
        };
        if charge {
            e.tokens = (e.tokens - 1.0).max(0.0);
        }
        if room && e.said < FULL_PER_SOURCE {
            e.said += 1;
            book.said += 1;
            return true;
        }
        e.counted += 1;
        e.last = clean::bounded(why, 200);
        false
    }

    /// Whether refusals are counted and not yet said.
    pub(crate) fn pending(&self) -> bool {
        let book = self.book();
        book.others > 0 || book.per.values().any(|e| e.counted > 0)
    }

    /// When the window ends (or `now`), its count lines, the busiest source first, at most
    /// [`SUMS_PER_WINDOW`] and one for the rest; idle sources are forgotten.
    pub(crate) fn due(&self, now: bool) -> Vec<ExchangeError> {
        let mut book = self.book();
        let over = book.window.elapsed();
        if !now && over < WINDOW {
            return Vec::new();
        }
        let secs = over.as_secs().max(1);
        let mut counted: Vec<(Source, u64, String)> = book
            .per
            .iter_mut()
            .filter(|(_, e)| e.counted > 0)
            .map(|(s, e)| (*s, e.counted, std::mem::take(&mut e.last)))
            .collect();
        counted.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let rest = counted.split_off(counted.len().min(SUMS_PER_WINDOW));
        let mut out: Vec<ExchangeError> = counted
            .into_iter()
            .map(|(s, count, last)| ExchangeError::Counted { count, from: s.to_string(), secs, last })
            .collect();
        let (n, sources) = (rest.iter().map(|r| r.1).sum::<u64>() + book.others, rest.len());
        if n > 0 {
            let from = if sources > 0 { format!("{sources} other source(s)") } else { "untracked sources".to_owned() };
            out.push(ExchangeError::Counted { count: n, from, secs, last: String::new() });
        }
        // A new window: budgets whole, quiet sources with full buckets forgotten.
        let (burst, rate) = (book.burst, book.rate);
        book.per.retain(|_, e| {
            e.said = 0;
            e.counted = 0;
            e.tokens + e.at.elapsed().as_secs_f64() * rate < burst
        });
        book.said = 0;
        book.others = 0;
        book.window = Instant::now();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("test address")
    }

    #[test]
    fn a_source_is_an_ipv4_address_or_an_ipv6_64() {
        assert_eq!(Source::of(ip("::ffff:10.0.0.9")), Source::of(ip("10.0.0.9")));
        assert_eq!(Source::of(ip("fd00:1:2:3::9")), Source::of(ip("fd00:1:2:3:ffff::1")));
        assert_ne!(Source::of(ip("fd00:1:2:3::9")), Source::of(ip("fd00:1:2:4::9")));
        assert_eq!(Source::of(ip("fd00:1:2:3::9")).to_string(), "fd00:1:2:3::/64");
        assert_eq!(Source::of(ip("10.0.0.9")).to_string(), "10.0.0.9");
    }

    #[test]
    fn a_source_out_of_tokens_is_refused_and_its_real_peers_never_run_out() {
        let l = Ledger::new(4, 0);
        let (flood, peer) = (Source::of(ip("10.0.0.9")), Source::of(ip("10.0.0.2")));
        // Strays spend their tokens: the fifth first read of the flood is refused.
        assert!((0..4).all(|_| l.take(flood)));
        assert!(!l.take(flood));
        // Another source is untouched; its valid first messages give their tokens back.
        for _ in 0..100 {
            assert!(l.take(peer));
            l.give_back(peer);
        }
        // A front end's refusal costs the token given back.
        assert!(l.take(peer));
        l.give_back(peer);
        for _ in 0..4 {
            l.refused(ip("10.0.0.2"), "not served");
        }
        assert!(!l.take(peer));
    }

    #[test]
    fn a_flood_of_refusals_is_a_few_full_lines_and_one_count_a_window() {
        let l = Ledger::new(64, 32);
        let full = (0..10_000).filter(|_| l.count(Source::of(ip("10.0.0.9")), "sent nothing", false)).count();
        assert_eq!(full, FULL_PER_SOURCE as usize);
        assert!(l.pending());
        assert!(l.due(false).is_empty(), "the window has not ended");
        let lines = l.due(true);
        assert_eq!(lines.len(), 1, "{lines:?}");
        let text = lines[0].to_string();
        assert!(text.starts_with("9,997 connection(s) refused from 10.0.0.9 in the last 1 s"), "{text}");
        assert!(text.ends_with("(the last: sent nothing)"), "{text}");
        assert!(!l.pending());
        // A new window: its budget is whole again.
        assert!(l.count(Source::of(ip("10.0.0.9")), "again", false));
    }

    #[test]
    fn many_sources_are_bounded_in_full_lines_and_count_lines() {
        let l = Ledger::new(64, 32);
        let mut full = 0;
        for k in 0..1000u32 {
            let a = IpAddr::from([10, 1, (k >> 8) as u8, k as u8]);
            full += (0..5).filter(|_| l.refused(a, "garbage")).count();
        }
        assert_eq!(full, FULL_PER_WINDOW as usize);
        let lines = l.due(true);
        assert_eq!(lines.len(), SUMS_PER_WINDOW + 1, "{lines:?}");
        assert!(lines[SUMS_PER_WINDOW].to_string().contains("other source(s)"), "{lines:?}");
    }
}
