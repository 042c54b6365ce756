//! The loopback self-test: one RC queue pair connected to itself through the chosen GID or LID, an
//! RDMA WRITE and a SEND/RECV, the bytes checked, every step under one deadline; memlock and IOMMU
//! failures show by name, with the fix. Safe code over the FFI fence.

use std::io;
use std::time::{Duration, Instant};

use super::ffi::{
    Completion, Context, Cq, DmaBuf, Mr, Pd, Qp, QpCaps, Route, RtrAttrs, RtsAttrs, SendWr, LINK_LAYER_ETHERNET,
    PORT_ACTIVE, WC_SUCCESS,
};
use super::probe::{SelftestOptions, VerbsError};
use super::status::{errno_text, port_state_name, wc_status_name};

/// Why the self-test stopped.
pub(crate) struct Failure {
    pub(crate) step: &'static str,
    pub(crate) status: String,
    pub(crate) hint: Option<String>,
}

impl Failure {
    fn new(step: &'static str, status: impl Into<String>, hint: Option<String>) -> Self {
        Failure { step, status: status.into(), hint }
    }
    fn os(step: &'static str, e: &io::Error, hint: Option<String>) -> Self {
        Failure::new(step, errno_text(e), hint)
    }
}

impl From<VerbsError> for Failure {
    fn from(e: VerbsError) -> Self {
        let step = match e {
            VerbsError::QueryPort { .. } => "query_port",
            VerbsError::QueryGid { .. } => "query_gid",
            _ => "open",
        };
        Failure::new(step, e.to_string(), None)
    }
}

const WR_WRITE: u64 = 1;
const WR_SEND: u64 = 2;
const WR_RECV: u64 = 3;
/// Size of the SEND/RECV message and of the separate receive region.
const MSG_BYTES: usize = 4096;

pub(super) fn loopback(
    device: &str,
    port: u8,
    gid_index: Option<u32>,
    opts: &SelftestOptions,
    start: Instant,
) -> Result<(), Failure> {
    // Per-phase times, logged at debug level (NCCL_WRAP_LOG=debug).
    let mut last = start;
    let mut lap = |what: &str| {
        let now = Instant::now();
        log::debug!("selftest {device}/{port}: {what} {} us", now.duration_since(last).as_micros());
        last = now;
    };
    let deadline = start + Duration::from_millis(opts.timeout_ms);
    let ctx = Context::open(device)?;
    let attr = ctx.query_port(port)?;
    if attr.state != PORT_ACTIVE {
        let hint = "NCCL uses only ACTIVE ports: check the link (phys_state) and, on InfiniBand, the subnet manager";
        let status = format!("port {port} is {}", port_state_name(attr.state));
        return Err(Failure::new("query_port", status, Some(hint.into())));
    }
    let roce = attr.link_layer == LINK_LAYER_ETHERNET;
    let route = match (roce, gid_index) {
        (true, None) => {
            let hint = "RoCE needs a GID index (the RoCE v2 IPv4 entry)";
            return Err(Failure::new("query_gid", "no GID index given for a RoCE port", Some(hint.into())));
        }
        (true, Some(index)) => {
            let sgid = u8::try_from(index).map_err(|_| {
                Failure::new("query_gid", format!("GID index {index} does not fit the 8-bit sgid_index"), None)
            })?;
            let gid = ctx.query_gid(port, index)?;
            if gid == [0; 16] {
                let hint = "choose a populated RoCE v2 entry (see ports/N/gids and gid_attrs/types)";
                return Err(Failure::new("query_gid", format!("GID {index} is empty"), Some(hint.into())));
            }
            Route::Gid { dgid: gid, sgid_index: sgid }
        }
        (false, _) => Route::Lid(attr.lid),
    };

    let half = opts.buffer_bytes / 2;
    if half < MSG_BYTES {
        return Err(Failure::new("reg_mr", format!("buffer of {} bytes is too small", opts.buffer_bytes), None));
    }

    lap("open+query_port+query_gid");
    let pd = Pd::alloc(&ctx).map_err(|e| Failure::os("alloc_pd", &e, None))?;
    let mut buf = DmaBuf::new(opts.buffer_bytes).map_err(|e| Failure::os("reg_mr", &e, None))?;
    let pattern = test_pattern(half, start);
    buf.write(0, &pattern);
    lap("alloc+pattern");
    let mr = Mr::register(&pd, buf).map_err(|e| Failure::os("reg_mr", &e, reg_mr_hint(&e, opts.buffer_bytes)))?;
    let recv_buf = DmaBuf::new(MSG_BYTES).map_err(|e| Failure::os("reg_mr", &e, None))?;
    let recv_mr = Mr::register(&pd, recv_buf)
        .map_err(|e| Failure::os("reg_mr", &e, reg_mr_hint(&e, opts.buffer_bytes + MSG_BYTES)))?;
    lap("reg_mr");
    let cq = Cq::create(&ctx, 8).map_err(|e| Failure::os("create_cq", &e, None))?;
    let caps = QpCaps { send_wr: 4, recv_wr: 4, inline: 0 };
    let (qp, _) = Qp::create_rc_with(&pd, &cq, caps).map_err(|e| Failure::os("create_qp", &e, None))?;
    let send = |wr_id, offset, len: usize, remote| {
        let w = SendWr { wr_id, offset, len: len as u32, remote, signaled: true, inline: false };
        qp.post(&mr, &w).map_err(|e| Failure::os("post_send", &e, None))
    };

    connect_to_self(&qp, port, attr.active_mtu, &route)?;
    lap("create_cq+create_qp+modify_qp");

    // RDMA WRITE: first half -> second half, split where the port's message limit demands.
    let max_msg = (attr.max_msg_sz as usize).clamp(MSG_BYTES, 1 << 30);
    let mut off = 0;
    while off < half {
        let len = (half - off).min(max_msg);
        send(WR_WRITE, off, len, Some((mr.addr(half + off), mr.rkey())))?;
        wait_for(&cq, &[WR_WRITE], deadline, "RDMA WRITE")?;
        off += len;
    }
    lap("rdma_write");
    let dma = "data corruption on the DMA path: check IOMMU and PCIe ACS settings";
    let corrupt = |what: &str| Err(Failure::new("verify", what, Some(dma.into())));
    if mr.read(half, half) != pattern {
        return corrupt("RDMA WRITE completed but the target bytes differ");
    }

    lap("verify_write");
    // SEND/RECV: first MSG_BYTES of the pattern -> the separate receive region.
    qp.post_recv(WR_RECV, &recv_mr, 0, MSG_BYTES as u32).map_err(|e| Failure::os("post_recv", &e, None))?;
    send(WR_SEND, 0, MSG_BYTES, None)?;
    wait_for(&cq, &[WR_SEND, WR_RECV], deadline, "SEND/RECV")?;
    lap("send_recv");
    if recv_mr.read(0, MSG_BYTES) != pattern[..MSG_BYTES] {
        return corrupt("SEND completed but the received bytes differ");
    }
    Ok(())
    // Drop order: qp, cq, recv_mr, mr, pd, ctx.
}

/// RESET -> INIT -> RTR -> RTS with the QP as its own peer.
fn connect_to_self(qp: &Qp<'_>, port: u8, mtu: u32, route: &Route) -> Result<(), Failure> {
    let modify_hint = || {
        Some(match route {
            Route::Gid { sgid_index, .. } => format!(
                "the QP could not be routed through GID {sgid_index}: check the GID index is a populated RoCE v2 entry and its net device is up with an address"
            ),
            Route::Lid(lid) => format!("the QP could not be routed to LID {lid}: check the subnet manager assigned one"),
        })
    };
    let failed =
        |step: &str, e: io::Error| Failure::new("modify_qp", format!("{step}: {}", errno_text(&e)), modify_hint());
    qp.to_init(port).map_err(|e| failed("RESET->INIT", e))?;
    let rtr = RtrAttrs { port, path_mtu: mtu, dest_qpn: qp.qp_num(), rq_psn: 0, route: *route };
    qp.to_rtr(&rtr).map_err(|e| failed("INIT->RTR", e))?;
    // 4.096 us * 2^14 = 67 ms per try: a lost packet fails well inside the deadline.
    qp.to_rts(&RtsAttrs { sq_psn: 0, timeout: 14, retry_cnt: 7 }).map_err(|e| failed("RTR->RTS", e))?;
    Ok(())
}

/// Polls until each of `want` completed, the first failed completion, or the deadline; spins
/// briefly, then sleeps so that a software device on the same CPU gets to work.
pub(crate) fn wait_for(cq: &Cq<'_>, want: &[u64], deadline: Instant, what: &str) -> Result<(), Failure> {
    let mut pending: Vec<u64> = want.to_vec();
    let (mut spins, mut wc) = (0u32, [Completion::default()]);
    while !pending.is_empty() {
        let n = cq.poll_many(&mut wc).map_err(|e| Failure::os("poll", &e, None))?;
        match (n == 1).then_some(wc[0]) {
            Some(wc) if wc.status != WC_SUCCESS => {
                let name = wc_status_name(wc.status);
                let status = format!("{name} (vendor_err {:#x}) on {what}", wc.vendor_err);
                return Err(Failure::new("poll", status, wc_status_hint(wc.status)));
            }
            Some(wc) => pending.retain(|&id| id != wc.wr_id),
            None if Instant::now() >= deadline => {
                let hint = "the adapter accepted the work but never finished it: check the port's link and, for RoCE, the GID's net device; raise the timeout on slow (software) devices";
                let status = format!("no completion for {what} before the deadline");
                return Err(Failure::new("timeout", status, Some(hint.into())));
            }
            None if spins < 1000 => {
                spins += 1;
                std::hint::spin_loop();
            }
            None => std::thread::sleep(Duration::from_micros(100)),
        }
    }
    Ok(())
}

pub(crate) fn wc_status_hint(status: u32) -> Option<String> {
    use super::status::wc;
    Some(match status {
        wc::LOC_PROT_ERR => "the adapter could not reach the registered memory: usually the IOMMU translating DMA (boot with iommu=pt; check /sys/bus/pci/devices/<addr>/iommu_group/type) or PCIe ACS redirecting peer traffic".into(),
        wc::LOC_ACCESS_ERR | wc::REM_ACCESS_ERR => "memory access refused: registration flags or keys do not match (IOMMU or ACS can also cause this)".into(),
        wc::RETRY_EXC_ERR => "packets were not acknowledged: check the link, the GID/route (RoCE), MTU and, on lossless fabrics, PFC".into(),
        wc::RNR_RETRY_EXC_ERR => "the receiver had no buffer posted in time".into(),
        _ => return None,
    })
}

/// Registration pins memory: ENOMEM/EPERM/EAGAIN there almost always mean RLIMIT_MEMLOCK.
pub(crate) fn reg_mr_hint(e: &io::Error, bytes: usize) -> Option<String> {
    if !matches!(e.raw_os_error(), Some(1 | 11 | 12)) {
        return None;
    }
    let rustix::process::Rlimit { current, maximum } = rustix::process::getrlimit(rustix::process::Resource::Memlock);
    let show = |v: Option<u64>| v.map_or("unlimited".to_owned(), |b| format!("{} KiB", b / 1024));
    let limit = format!("RLIMIT_MEMLOCK is {} (hard {})", show(current), show(maximum));
    Some(format!(
        "registering {} MiB pins it in RAM; {limit}: raise the limit (needs CAP_SYS_RESOURCE above the hard limit) or give the container CAP_IPC_LOCK, which lifts it for RDMA registration",
        bytes >> 20
    ))
}

/// Bytes that could not be left over from an earlier run: a xorshift stream seeded by the clock.
fn test_pattern(len: usize, start: Instant) -> Vec<u8> {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0x9e37_79b9_7f4a_7c15, |d| d.as_nanos() as u64)
        ^ (start.elapsed().as_nanos() as u64);
    let mut x = seed | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(len);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pattern_is_not_constant() {
        let p = test_pattern(4096, Instant::now());
        assert_eq!(p.len(), 4096);
        assert!(p.iter().any(|&b| b != p[0]));
    }
}
