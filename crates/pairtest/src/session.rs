//! One run with one peer, from either end: hello, setup, ready, the latency and bandwidth runs (or
//! the answering loop), done. Every phase is bounded by the session's deadline.

use std::time::{Duration, Instant};

use super::exchange::{ExchangeError, Session};
use super::pair::{self, Planned, Res, Stream};
use super::settings::Settings;
use super::wire::{Fault, Figures, Hello, Message, PairState, PortInfo, QpInfo};
use nw_observe::verbs::ffi::Context;

/// One pair as this end saw it.
#[derive(Debug, Clone)]
pub struct PairRun {
    pub local: PortInfo,
    pub remote: PortInfo,
    pub local_fault: Option<Fault>,
    pub remote_fault: Option<Fault>,
    pub figures: Option<Figures>,
}

/// This end's ports, opened (contexts and descriptions), and those that failed, with why.
pub struct Opened {
    pub(crate) ctxs: Vec<Context>,
    pub(crate) infos: Vec<PortInfo>,
    pub(crate) max_msg: Vec<u32>,
    pub(crate) failed: Vec<(Planned, Fault)>,
}

pub(crate) fn open_all(planned: &[Planned]) -> Opened {
    let mut o = Opened { ctxs: Vec::new(), infos: Vec::new(), max_msg: Vec::new(), failed: Vec::new() };
    for p in planned {
        match pair::open(p) {
            Ok((ctx, info, max)) => {
                o.ctxs.push(ctx);
                o.infos.push(info);
                o.max_msg.push(max);
            }
            Err(f) => o.failed.push((p.clone(), f)),
        }
    }
    o
}

/// (initiator's port, listener's port) of every pair: rail i with rail i, or every combination.
pub fn pairing(initiator: usize, listener: usize, all_pairs: bool) -> Vec<(usize, usize)> {
    if all_pairs {
        (0..initiator).flat_map(|i| (0..listener).map(move |j| (i, j))).collect()
    } else {
        (0..initiator.min(listener)).map(|i| (i, i)).collect()
    }
}

/// Bandwidth rounds: pairs that share no port on either end run at once.
pub fn rounds(pairs: &[(usize, usize)]) -> Vec<Vec<usize>> {
    let mut out: Vec<(Vec<usize>, Vec<usize>, Vec<usize>)> = Vec::new();
    for (k, &(a, b)) in pairs.iter().enumerate() {
        match out.iter_mut().find(|(l, r, _)| !l.contains(&a) && !r.contains(&b)) {
            Some((l, r, ks)) => {
                l.push(a);
                r.push(b);
                ks.push(k);
            }
            None => out.push((vec![a], vec![b], vec![k])),
        }
    }
    out.into_iter().map(|(_, _, ks)| ks).collect()
}

/// How long a whole run may take once both hellos are in.
pub fn budget(pairs: usize, rounds: usize, limits: &Settings) -> Duration {
    limits.timeout * (2 + pairs as u32) + Duration::from_millis(u64::from(limits.duration_ms)) * rounds as u32
}

fn peer_count<T>(s: &Session, got: &[T], want: usize, what: &'static str) -> Result<(), ExchangeError> {
    (got.len() == want).then_some(()).ok_or_else(|| s.unexpected(what, "message with another pair count"))
}

/// Each pair's first fault on this end and on the peer's, and the peer's queue pairs.
type Connected = (Vec<Option<Fault>>, Vec<Option<Fault>>, Vec<QpInfo>);

/// setup and ready, shared by both ends: each pair's faults (local, remote), the peer's QPs.
fn connect(
    s: &mut Session,
    res: &[Result<Res<'_>, Fault>],
    ends: &[(PortInfo, PortInfo)],
    timeout: Duration,
) -> Result<Connected, ExchangeError> {
    let ack_timeout = pair::ack_timeout(timeout);
    let n = res.len();
    let psns: Vec<u32> = (0..n).map(|k| pair::psn(k as u64 + 1)).collect();
    let qp = |(k, r): (usize, &Result<Res<'_>, Fault>)| match r {
        Ok(r) => r.info(k as u16, psns[k]),
        Err(f) => QpInfo { pair: k as u16, qpn: 0, psn: 0, addr: 0, rkey: 0, fault: Some(f.clone()) },
    };
    let mine: Vec<QpInfo> = res.iter().enumerate().map(qp).collect();
    let mut local: Vec<Option<Fault>> = mine.iter().map(|q| q.fault.clone()).collect();
    s.send(&Message::Setup(mine))?;
    let theirs = s.expect("setup", |m| if let Message::Setup(q) = m { Some(q) } else { None })?;
    peer_count(s, &theirs, n, "setup")?;
    let mut remote: Vec<Option<Fault>> = theirs.iter().map(|q| q.fault.clone()).collect();
    for (k, r) in res.iter().enumerate() {
        if let (Ok(r), None, None) = (r, &local[k], &remote[k]) {
            if let Err(f) = r.connect(&ends[k].0, &ends[k].1, &theirs[k], psns[k], ack_timeout) {
                local[k] = Some(f);
            }
        }
    }
    let states = local.iter().enumerate().map(|(k, f)| PairState { pair: k as u16, fault: f.clone(), figures: None });
    s.send(&Message::Ready(states.collect()))?;
    let ready = s.expect("ready", |m| if let Message::Ready(v) = m { Some(v) } else { None })?;
    peer_count(s, &ready, n, "ready")?;
    for (k, st) in ready.into_iter().enumerate() {
        remote[k] = remote[k].take().or(st.fault);
    }
    Ok((local, remote, theirs))
}

/// Every pair's run from its ends, faults and `figures`.
fn runs(
    ends: &[(PortInfo, PortInfo)],
    local: &[Option<Fault>],
    remote: &[Option<Fault>],
    figures: &dyn Fn(usize) -> Option<Figures>,
) -> Vec<PairRun> {
    let run = |(k, (l, r)): (usize, &(PortInfo, PortInfo))| PairRun {
        local: l.clone(),
        remote: r.clone(),
        local_fault: local[k].clone(),
        remote_fault: remote[k].clone(),
        figures: figures(k),
    };
    ends.iter().enumerate().map(run).collect()
}

/// The initiating end's hellos: ours, and the listener's answer (with the sizes it will run).
pub(crate) fn greet(s: &mut Session, opened: &Opened, host: &str, asked: &Settings) -> Result<Hello, ExchangeError> {
    s.send(&Message::Hello(asked.hello(host, opened.infos.clone())))?;
    s.expect("hello", |m| if let Message::Hello(h) = m { Some(h) } else { None })
}

/// The initiating end after [`greet`]: every pair's tests, as this end saw them.
pub(crate) fn initiate(
    s: &mut Session,
    opened: &Opened,
    theirs: Hello,
    asked: &Settings,
) -> Result<(Vec<PairRun>, Vec<PortInfo>), ExchangeError> {
    // Both ends run the smaller test, should the listener have clamped it.
    let limits = &Settings {
        bytes: asked.bytes.min(theirs.bytes),
        iters: asked.iters.min(theirs.iters),
        duration_ms: asked.duration_ms.min(theirs.duration_ms),
        ..asked.clone()
    };
    let pairs = pairing(opened.infos.len(), theirs.ports.len(), limits.all_pairs);
    let rounds = rounds(&pairs);
    s.set_deadline(s.deadline.max(Instant::now() + budget(pairs.len(), rounds.len(), limits)));
    let ends: Vec<(PortInfo, PortInfo)> =
        pairs.iter().map(|&(l, r)| (opened.infos[l].clone(), theirs.ports[r].clone())).collect();
    let local_of: Vec<usize> = pairs.iter().map(|p| p.0).collect();
    let runs = pair::with_pairs(&opened.ctxs, &local_of, limits.bytes, |res| {
        let (mut local, mut remote, qps) = connect(s, &res, &ends, limits.timeout)?;
        let mut figures: Vec<Figures> = vec![Figures { median_us: None, p99_us: None, gbps: None }; pairs.len()];
        for (k, r) in res.iter().enumerate() {
            let (Ok(r), None, None) = (r, &local[k], &remote[k]) else { continue };
            match r.latency(limits.iters, Instant::now() + limits.timeout) {
                Ok(mut samples) => {
                    // The first round trips warm caches and address translation: leave them out.
                    samples.drain(..samples.len().min(10).min(samples.len() / 10));
                    samples.sort_unstable_by(f64::total_cmp);
                    if let Some((median, p99)) = pair::percentiles(&samples) {
                        figures[k].median_us = Some(median);
                        figures[k].p99_us = Some(p99);
                    }
                }
                Err(f) => local[k] = Some(f),
            }
        }
        let duration = Duration::from_millis(u64::from(limits.duration_ms));
        for round in &rounds {
            let (ks, mut only): (Vec<usize>, Vec<Stream<'_, '_>>) = round
                .iter()
                .filter(|&&k| local[k].is_none() && remote[k].is_none())
                .filter_map(|&k| {
                    res[k].as_ref().ok().map(|r| (k, Stream::new(r, &qps[k], opened.max_msg[local_of[k]])))
                })
                .unzip();
            if only.is_empty() || duration.is_zero() {
                continue;
            }
            let start = pair::bandwidth(&mut only, duration, Instant::now() + duration + limits.timeout);
            for (st, k) in only.into_iter().zip(ks) {
                match st.fault {
                    Some(f) => local[k] = Some(f),
                    None => figures[k].gbps = st.gbps(start),
                }
            }
        }
        let done = (0..pairs.len())
            .map(|k| PairState { pair: k as u16, fault: local[k].clone(), figures: Some(figures[k]) })
            .collect();
        s.send(&Message::Done(done))?;
        let back = s.expect("done", |m| if let Message::Done(v) = m { Some(v) } else { None })?;
        peer_count(s, &back, pairs.len(), "done")?;
        for (k, st) in back.into_iter().enumerate() {
            remote[k] = remote[k].take().or(st.fault);
        }
        Ok(runs(&ends, &local, &remote, &|k| Some(figures[k])))
    })?;
    Ok((runs, theirs.ports))
}

/// The listening end after the hello: answer it, serve every pair until done, within `ours`.
pub fn answer(
    s: &mut Session,
    hello: &Hello,
    opened: &Opened,
    host: &str,
    ours: &Settings,
) -> Result<Vec<PairRun>, ExchangeError> {
    let pairs = pairing(hello.ports.len(), opened.infos.len(), hello.all_pairs);
    let (limits, _) = ours.answer(hello, pairs.len());
    // This end's hello carries the sizes it will run, so that the initiator runs the same.
    s.send(&Message::Hello(limits.hello(host, opened.infos.clone())))?;
    s.set_deadline(s.deadline.max(Instant::now() + budget(pairs.len(), rounds(&pairs).len(), &limits)));
    let ends: Vec<(PortInfo, PortInfo)> =
        pairs.iter().map(|&(r, l)| (opened.infos[l].clone(), hello.ports[r].clone())).collect();
    let local_of: Vec<usize> = pairs.iter().map(|p| p.1).collect();
    let runs = pair::with_pairs(&opened.ctxs, &local_of, limits.bytes, |res| {
        let (mut local, mut remote, _) = connect(s, &res, &ends, limits.timeout)?;
        // Answer every ready pair's messages until the initiator's `done` arrives.
        let mut polls = 0u32;
        let mut last_check = Instant::now();
        loop {
            let mut any = false;
            for (k, r) in res.iter().enumerate() {
                let (Ok(r), None, None) = (r, &local[k], &remote[k]) else { continue };
                match r.respond() {
                    Ok(n) => any |= n > 0,
                    Err(f) => local[k] = Some(f),
                }
            }
            polls = polls.wrapping_add(1);
            if !any && (polls % 256 == 0 || last_check.elapsed() > Duration::from_millis(2)) {
                last_check = Instant::now();
                if s.readable()? {
                    break;
                }
                if Instant::now() >= s.deadline {
                    let (peer, what) = (s.peer.clone(), "the end of the run");
                    return Err(ExchangeError::Timeout { peer, what, got: 0, want: 1 });
                }
                std::thread::yield_now();
            }
        }
        let theirs = s.expect("done", |m| if let Message::Done(v) = m { Some(v) } else { None })?;
        peer_count(s, &theirs, pairs.len(), "done")?;
        let done = (0..pairs.len()).map(|k| PairState { pair: k as u16, fault: local[k].clone(), figures: None });
        s.send(&Message::Done(done.collect()))?;
        for (k, st) in theirs.iter().enumerate() {
            remote[k] = remote[k].take().or(st.fault.clone());
        }
        Ok(runs(&ends, &local, &remote, &|k| theirs[k].figures))
    })?;
    Ok(runs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rails_pair_in_order_and_all_pairs_cover_every_combination() {
        assert_eq!(pairing(4, 4, false), vec![(0, 0), (1, 1), (2, 2), (3, 3)]);
        assert_eq!(pairing(4, 2, false), vec![(0, 0), (1, 1)]);
        assert_eq!(pairing(2, 3, true).len(), 6);
        assert_eq!(pairing(2, 3, true)[4], (1, 1));
    }

    #[test]
    fn bandwidth_rounds_never_share_a_port() {
        assert_eq!(rounds(&pairing(4, 4, false)), vec![vec![0, 1, 2, 3]]);
        let p = pairing(4, 4, true);
        let r = rounds(&p);
        assert_eq!(r.len(), 4);
        for round in &r {
            let mut l: Vec<usize> = round.iter().map(|&k| p[k].0).collect();
            let mut m: Vec<usize> = round.iter().map(|&k| p[k].1).collect();
            l.dedup();
            m.sort_unstable();
            m.dedup();
            assert_eq!((l.len(), m.len()), (round.len(), round.len()));
        }
        assert_eq!(r.iter().map(Vec::len).sum::<usize>(), 16);
    }

    #[test]
    fn the_budget_grows_with_pairs_and_rounds() {
        let l = Settings {
            all_pairs: false,
            bytes: 1 << 20,
            iters: 1000,
            duration_ms: 1000,
            timeout: Duration::from_secs(2),
            gate: None,
        };
        assert_eq!(budget(4, 1, &l), Duration::from_secs(13));
    }
}
