//! The verbs work of one pair: its queue pair, the connection to the peer's, the latency ping-pong
//! and the bandwidth run, memory registered as the self-test does. No `unsafe` here; every wait
//! polls the completion queue and ends at a deadline.

use std::io;
use std::time::{Duration, Instant};

use super::wire::{Fault, LinkLayer, PortInfo, QpInfo};
use nw_observe::verbs::ffi::{
    Completion, Context, Cq, DmaBuf, Mr, Pd, Qp, QpCaps, Route, RtrAttrs, RtsAttrs, SendWr, LINK_LAYER_ETHERNET,
    PORT_ACTIVE, WC_SUCCESS,
};
use nw_observe::verbs::status::{errno_text, format_gid, port_state_name, wc_status_name};

/// Size of one SEND/RECV message slot.
const MSG: usize = 64;
/// Receives kept posted on every queue pair.
const RECV_SLOTS: usize = 16;
/// RDMA WRITEs per signalled batch, and batches in flight.
const BATCH: usize = 16;
const BATCHES: usize = 4;
const SEND_DEPTH: u32 = (BATCH * BATCHES + 8) as u32;
const WR_SEND: u64 = 1;
const WR_WRITE: u64 = 2;
const WR_RECV: u64 = 0x100;
/// Retries of an unacknowledged packet before `IBV_WC_RETRY_EXC_ERR`. Not 7: the spec reserves
/// 7 for "retry for ever" on the RNR count only, but rxe (and perhaps others) treats a
/// `retry_cnt` of 7 the same way, so a path that drops RoCE would never complete there.
pub(crate) const RETRY_CNT: u8 = 6;
/// Bounds of the ACK timeout exponent: 4.096 us x 2^8 = 1 ms, x 2^20 = 4.3 s per try.
const ACK_TIMEOUT_MIN: u8 = 8;
const ACK_TIMEOUT_MAX: u8 = 20;

/// The ACK timeout exponent (8..=20) whose first try and [`RETRY_CNT`] retries (4.096 us x
/// 2^timeout each) fit in a quarter of `phase`, so a path dropping RoCE ends in
/// `IBV_WC_RETRY_EXC_ERR` before the phase gives up (3000 ms: 14).
pub(crate) fn ack_timeout(phase: Duration) -> u8 {
    let budget_ns = phase.as_nanos() / 4;
    let per_try_ns = |t: u8| 4096u128 << t;
    let tries = u128::from(RETRY_CNT) + 1;
    (ACK_TIMEOUT_MIN..=ACK_TIMEOUT_MAX).rev().find(|&t| tries * per_try_ns(t) <= budget_ns).unwrap_or(ACK_TIMEOUT_MIN)
}

/// How long a queue pair with ACK timeout `t` and [`RETRY_CNT`] retries takes to give up.
#[cfg(test)]
pub(crate) fn retry_span(t: u8) -> Duration {
    Duration::from_nanos((u64::from(RETRY_CNT) + 1) * (4096u64 << t))
}

/// A port of the plan, as the run will use it.
#[derive(Debug, Clone)]
pub struct Planned {
    pub(crate) device: String,
    pub(crate) port: u8,
    pub(crate) gid_index: Option<u32>,
    pub(crate) gid_type: Option<String>,
    pub(crate) netdev: Option<String>,
    /// The port's rated speed in kb/s, hardware ports only (`PortInfo::rate_kbps`).
    pub(crate) rate_kbps: Option<u64>,
}

/// A fault at `step` from an OS error.
pub(crate) fn os_fault(step: &str, e: &io::Error) -> Fault {
    Fault { step: step.into(), error: errno_text(e), wc_status: None, errno: e.raw_os_error() }
}

pub(crate) fn fault(step: &str, error: impl Into<String>) -> Fault {
    Fault { step: step.into(), error: error.into(), wc_status: None, errno: None }
}

fn wc_fault(step: &str, wc: &Completion, what: &str) -> Fault {
    Fault {
        step: step.into(),
        error: format!("{} (vendor_err {:#x}) on {what}", wc_status_name(wc.status), wc.vendor_err),
        wc_status: Some(wc.status),
        errno: None,
    }
}

fn mtu_bytes(e: u32) -> u32 {
    256u32 << e.clamp(1, 5).saturating_sub(1)
}

fn mtu_enum(bytes: u32) -> u32 {
    match bytes {
        0..=256 => 1,
        257..=512 => 2,
        513..=1024 => 3,
        1025..=2048 => 4,
        _ => 5,
    }
}

/// Opens a planned port and describes it for the peer. The context stays open for the run.
pub fn open(p: &Planned) -> Result<(Context, PortInfo, u32), Fault> {
    let ctx = Context::open(&p.device).map_err(|e| fault("open", e.to_string()))?;
    let attr = ctx.query_port(p.port).map_err(|e| fault("query_port", e.to_string()))?;
    if attr.state != PORT_ACTIVE {
        return Err(fault("query_port", format!("port {} is {}", p.port, port_state_name(attr.state))));
    }
    let roce = attr.link_layer == LINK_LAYER_ETHERNET;
    let mut info = PortInfo {
        device: p.device.clone(),
        port: p.port,
        link_layer: if roce { LinkLayer::Ethernet } else { LinkLayer::InfiniBand },
        gid_index: None,
        gid: None,
        gid_type: p.gid_type.clone(),
        lid: None,
        mtu: mtu_bytes(attr.active_mtu),
        pkey: None,
        netdev: p.netdev.clone(),
        rate_kbps: p.rate_kbps,
    };
    if roce {
        let index = p.gid_index.ok_or_else(|| fault("query_gid", "no GID index for a RoCE port"))?;
        let sgid = u8::try_from(index)
            .map_err(|_| fault("query_gid", format!("GID index {index} does not fit the 8-bit sgid_index")))?;
        let gid = ctx.query_gid(p.port, index).map_err(|e| fault("query_gid", e.to_string()))?;
        if gid == [0; 16] {
            return Err(fault("query_gid", format!("GID {index} is empty")));
        }
        info.gid_index = Some(sgid);
        info.gid = Some(format_gid(&gid));
    } else {
        info.lid = Some(attr.lid);
        info.pkey = Some(ctx.query_pkey(p.port, 0).map_err(|e| os_fault("query_pkey", &e))?);
    }
    let max_msg = attr.max_msg_sz.max(MSG as u32);
    Ok((ctx, info, max_msg))
}

/// One pair's resources on this end.
pub(crate) struct Res<'x> {
    pub(crate) qp: &'x Qp<'x>,
    pub(crate) cq: &'x Cq<'x>,
    pub(crate) mr: &'x Mr<'x>,
    inline: u32,
    bytes: usize,
}

impl Res<'_> {
    fn recv_offset(&self, slot: usize) -> usize {
        self.bytes + slot * MSG
    }
    fn send_offset(&self) -> usize {
        self.bytes + RECV_SLOTS * MSG
    }

    /// What the peer needs to reach this queue pair and its test buffer.
    pub(crate) fn info(&self, pair: u16, psn: u32) -> QpInfo {
        QpInfo { pair, qpn: self.qp.qp_num(), psn, addr: self.mr.addr(0), rkey: self.mr.rkey(), fault: None }
    }

    /// RESET -> INIT -> RTR -> RTS towards the peer, then every receive posted.
    /// `ack_timeout` is the exponent [`ack_timeout`] derives from the phase deadline.
    pub fn connect(
        &self,
        local: &PortInfo,
        remote: &PortInfo,
        peer: &QpInfo,
        psn: u32,
        ack_timeout: u8,
    ) -> Result<(), Fault> {
        self.qp.to_init(local.port).map_err(|e| os_fault("INIT", &e))?;
        let route = match (local.link_layer, local.gid_index, remote.gid.as_deref().and_then(super::wire::parse_gid)) {
            (LinkLayer::Ethernet, Some(sgid_index), Some(dgid)) => Route::Gid { dgid, sgid_index },
            (LinkLayer::Ethernet, _, _) => return Err(fault("RTR", "the peer sent no GID for a RoCE pair")),
            (LinkLayer::InfiniBand, _, _) => {
                Route::Lid(remote.lid.ok_or_else(|| fault("RTR", "the peer sent no LID for an InfiniBand pair"))?)
            }
        };
        let path_mtu = mtu_enum(local.mtu.min(remote.mtu));
        let rtr = RtrAttrs { port: local.port, path_mtu, dest_qpn: peer.qpn, rq_psn: peer.psn, route };
        self.qp.to_rtr(&rtr).map_err(|e| os_fault("RTR", &e))?;
        // A finite retry count and an ACK timeout under the phase deadline: a path that drops
        // RoCE ends in IBV_WC_RETRY_EXC_ERR (0.47 s with the default 3 s deadline).
        let rts = RtsAttrs { sq_psn: psn, timeout: ack_timeout, retry_cnt: RETRY_CNT };
        self.qp.to_rts(&rts).map_err(|e| os_fault("RTS", &e))?;
        for slot in 0..RECV_SLOTS {
            self.post_recv(slot)?;
        }
        Ok(())
    }

    fn post_recv(&self, slot: usize) -> Result<(), Fault> {
        self.qp
            .post_recv(WR_RECV + slot as u64, self.mr, self.recv_offset(slot), MSG as u32)
            .map_err(|e| os_fault("post_recv", &e))
    }

    fn send_msg(&self, step: &str) -> Result<(), Fault> {
        let w = SendWr {
            wr_id: WR_SEND,
            offset: self.send_offset(),
            len: 8,
            remote: None,
            signaled: true,
            inline: self.inline >= 8,
        };
        self.qp.post(self.mr, &w).map_err(|e| os_fault(step, &e))
    }

    /// The responder's share of the latency test: answers every message with one. Call it in
    /// a loop; returns how many completions it handled.
    pub(crate) fn respond(&self) -> Result<usize, Fault> {
        let mut wcs = [Completion::default(); 16];
        let n = self.cq.poll_many(&mut wcs).map_err(|e| os_fault("poll", &e))?;
        for wc in &wcs[..n] {
            if wc.status != WC_SUCCESS {
                return Err(wc_fault("latency", wc, if wc.wr_id >= WR_RECV { "RECV" } else { "SEND" }));
            }
            if wc.wr_id >= WR_RECV {
                self.post_recv((wc.wr_id - WR_RECV) as usize % RECV_SLOTS)?;
                self.send_msg("latency")?;
            }
        }
        Ok(n)
    }

    /// The initiator's latency test: `iters` round trips of an 8-byte SEND. Returns the
    /// one-way times (half the round trip, as ib_send_lat reports) in microseconds, in order.
    pub(crate) fn latency(&self, iters: u32, deadline: Instant) -> Result<Vec<f64>, Fault> {
        let mut out = Vec::with_capacity(iters as usize);
        let mut wcs = [Completion::default(); 16];
        let mut idle = Idle::default();
        for _ in 0..iters {
            let t0 = Instant::now();
            self.send_msg("latency")?;
            let (mut sent, mut got) = (false, false);
            while !(sent && got) {
                let n = self.cq.poll_many(&mut wcs).map_err(|e| os_fault("poll", &e))?;
                for wc in &wcs[..n] {
                    if wc.status != WC_SUCCESS {
                        return Err(wc_fault("latency", wc, if wc.wr_id >= WR_RECV { "RECV" } else { "SEND" }));
                    }
                    if wc.wr_id >= WR_RECV {
                        got = true;
                        self.post_recv((wc.wr_id - WR_RECV) as usize % RECV_SLOTS)?;
                    } else {
                        sent = true;
                    }
                }
                if n == 0 && idle.wait(deadline) {
                    return Err(fault("timeout", "no completion for the latency ping-pong before the deadline"));
                }
            }
            out.push(t0.elapsed().as_secs_f64() * 1e6 / 2.0);
        }
        Ok(out)
    }
}

/// Polling without sleeping: spin a while, then yield the CPU on each empty poll, and say when
/// the deadline has passed.
#[derive(Default)]
struct Idle {
    empty: u32,
}

impl Idle {
    fn wait(&mut self, deadline: Instant) -> bool {
        self.empty = self.empty.saturating_add(1);
        if self.empty < 256 {
            std::hint::spin_loop();
            return false;
        }
        std::thread::yield_now();
        Instant::now() >= deadline
    }
}

/// Median and 99th percentile of sorted samples.
pub(crate) fn percentiles(sorted: &[f64]) -> Option<(f64, f64)> {
    let at = |q: f64| sorted[((sorted.len() - 1) as f64 * q).round() as usize];
    (!sorted.is_empty()).then(|| (at(0.5), at(0.99)))
}

/// One write stream of the bandwidth run.
pub(crate) struct Stream<'a, 'x> {
    pub(crate) res: &'a Res<'x>,
    pub(crate) remote: (u64, u32),
    pub(crate) len: u32,
    in_flight: usize,
    done_bytes: u64,
    last: Option<Instant>,
    pub(crate) fault: Option<Fault>,
}

impl<'a, 'x> Stream<'a, 'x> {
    pub fn new(res: &'a Res<'x>, peer: &QpInfo, max_msg: u32) -> Self {
        let len = (res.bytes as u32).min(max_msg).max(8);
        Stream { res, remote: (peer.addr, peer.rkey), len, in_flight: 0, done_bytes: 0, last: None, fault: None }
    }

    fn post_batch(&mut self) -> Result<(), Fault> {
        for i in 0..BATCH {
            let w = SendWr {
                wr_id: WR_WRITE,
                offset: 0,
                len: self.len,
                remote: Some(self.remote),
                signaled: i == BATCH - 1,
                inline: false,
            };
            self.res.qp.post(self.res.mr, &w).map_err(|e| os_fault("bandwidth", &e))?;
        }
        self.in_flight += 1;
        Ok(())
    }

    fn reap(&mut self, wcs: &mut [Completion]) -> Result<usize, Fault> {
        let n = self.res.cq.poll_many(wcs).map_err(|e| os_fault("poll", &e))?;
        for wc in &wcs[..n] {
            if wc.status != WC_SUCCESS {
                return Err(wc_fault("bandwidth", wc, "RDMA WRITE"));
            }
            if wc.wr_id == WR_WRITE {
                self.in_flight = self.in_flight.saturating_sub(1);
                self.done_bytes += u64::from(self.len) * BATCH as u64;
                self.last = Some(Instant::now());
            }
        }
        Ok(n)
    }

    /// Gigabytes (10^9 bytes) per second from the start to the last completion.
    pub(crate) fn gbps(&self, start: Instant) -> Option<f64> {
        let secs = self.last?.duration_since(start).as_secs_f64();
        (secs > 0.0).then(|| self.done_bytes as f64 / secs / 1e9)
    }
}

/// Runs every stream at once for `duration` (rails are separate adapters, so one loop can keep
/// them all busy, as NCCL does), then waits for what is in flight until `deadline`.
pub(crate) fn bandwidth(streams: &mut [Stream<'_, '_>], duration: Duration, deadline: Instant) -> Instant {
    let start = Instant::now();
    let end = start + duration;
    let mut wcs = [Completion::default(); 32];
    let mut idle = Idle::default();
    loop {
        let posting = Instant::now() < end;
        let mut busy = false;
        let mut active = false;
        for s in streams.iter_mut().filter(|s| s.fault.is_none()) {
            let step = (|| {
                while posting && s.in_flight < BATCHES {
                    s.post_batch()?;
                }
                s.reap(&mut wcs)
            })();
            match step {
                Ok(n) => busy |= n > 0,
                Err(f) => s.fault = Some(f),
            }
            active |= s.fault.is_none() && (posting || s.in_flight > 0);
        }
        if !active {
            return start;
        }
        if busy {
            idle = Idle::default();
        } else if idle.wait(deadline) {
            for s in streams.iter_mut().filter(|s| s.fault.is_none() && s.in_flight > 0) {
                s.fault = Some(fault("timeout", "no completion for the RDMA WRITEs before the deadline"));
            }
            return start;
        }
    }
}

/// Creates this end's resources for every pair and hands them to `f`; everything is destroyed
/// (QPs, CQs, MRs, PDs, in that order) when `f` returns. `local_of[k]` is pair k's local port
/// (an index into `ctxs`); a pair whose resources cannot be made gets its fault instead.
pub(crate) fn with_pairs<R>(
    ctxs: &[Context],
    local_of: &[usize],
    bytes: u32,
    f: impl for<'x> FnOnce(Vec<Result<Res<'x>, Fault>>) -> R,
) -> R {
    let pds: Vec<Result<Pd<'_>, Fault>> =
        ctxs.iter().map(|c| Pd::alloc(c).map_err(|e| os_fault("alloc_pd", &e))).collect();
    let len = bytes as usize + (RECV_SLOTS + 1) * MSG;
    let mrs: Vec<Result<Mr<'_>, Fault>> = local_of
        .iter()
        .map(|&l| {
            let pd = pds[l].as_ref().map_err(Clone::clone)?;
            let buf = DmaBuf::new(len).map_err(|e| os_fault("reg_mr", &e))?;
            Mr::register(pd, buf).map_err(|e| os_fault("reg_mr", &e))
        })
        .collect();
    let cqs: Vec<Result<Cq<'_>, Fault>> = local_of
        .iter()
        .map(|&l| {
            Cq::create(&ctxs[l], (SEND_DEPTH as usize + RECV_SLOTS + 8) as i32).map_err(|e| os_fault("create_cq", &e))
        })
        .collect();
    let caps = QpCaps { send_wr: SEND_DEPTH, recv_wr: RECV_SLOTS as u32, inline: 64 };
    let qps: Vec<Result<(Qp<'_>, u32), Fault>> = local_of
        .iter()
        .zip(&cqs)
        .map(|(&l, cq)| {
            let pd = pds[l].as_ref().map_err(Clone::clone)?;
            let cq = cq.as_ref().map_err(Clone::clone)?;
            Qp::create_rc_with(pd, cq, caps)
                .or_else(|_| Qp::create_rc_with(pd, cq, QpCaps { inline: 0, ..caps }))
                .map_err(|e| os_fault("create_qp", &e))
        })
        .collect();
    let res = qps
        .iter()
        .zip(&cqs)
        .zip(&mrs)
        .map(|((qp, cq), mr)| {
            let mr = mr.as_ref().map_err(Clone::clone)?;
            let cq = cq.as_ref().map_err(Clone::clone)?;
            let (qp, inline) = qp.as_ref().map_err(Clone::clone)?;
            Ok(Res { qp, cq, mr, inline: *inline, bytes: bytes as usize })
        })
        .collect();
    f(res)
}

/// A starting packet sequence number that differs between runs (the low 24 bits count).
pub(crate) fn psn(seed: u64) -> u32 {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    ((u64::from(t) ^ seed.wrapping_mul(0x9e37_79b9)) & 0xff_ffff) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mtus_convert_both_ways() {
        for (e, b) in [(1, 256), (2, 512), (3, 1024), (4, 2048), (5, 4096)] {
            assert_eq!(mtu_bytes(e), b);
            assert_eq!(mtu_enum(b), e);
        }
    }

    #[test]
    fn percentiles_of_sorted_samples() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentiles(&v), Some((51.0, 99.0)));
        assert_eq!(percentiles(&[3.0]), Some((3.0, 3.0)));
        assert_eq!(percentiles(&[]), None);
    }

    #[test]
    fn retries_end_within_a_quarter_of_the_deadline() {
        // The default --timeout-ms keeps the usual 14 (67 ms a try).
        assert_eq!(ack_timeout(Duration::from_millis(3000)), 14);
        assert!(retry_span(14) < Duration::from_millis(500));
        for ms in [100, 1000, 3000, 6000, 20_000, 60_000, 600_000] {
            let d = Duration::from_millis(ms);
            let t = ack_timeout(d);
            assert!((8..=20).contains(&t), "{ms} ms: {t}");
            if t > 8 {
                assert!(retry_span(t) <= d / 4, "{ms} ms: timeout {t} takes {:?}", retry_span(t));
            }
            if t < 20 {
                assert!(retry_span(t + 1) > d / 4, "{ms} ms: {t} is not the largest");
            }
        }
        assert_eq!(ack_timeout(Duration::from_millis(6000)), 15);
        assert_eq!(ack_timeout(Duration::ZERO), 8);
        assert_eq!(ack_timeout(Duration::from_secs(3600)), 20);
        // Never 7: rxe retries for ever with 7.
        assert_eq!(RETRY_CNT, 6);
    }

    #[test]
    fn psns_fit_24_bits() {
        assert!(psn(u64::MAX) < 1 << 24);
    }
}
