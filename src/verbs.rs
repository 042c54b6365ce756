//! ibverbs through rdma-core, linked statically with every provider (see `build.rs`).
//!
//! This is the only module that may use `unsafe`. Every verbs object is held by one owner type
//! that frees it exactly once in `Drop`; lifetimes tie each object to the one it was created
//! from, so the compiler enforces the teardown order (QP, CQ, MR, PD, then the device context).
//!
//! It must never block without a deadline (completions are polled, no completion channel), never
//! panic or crash when the machine has no RDMA (an absent or empty device list is an ordinary
//! answer), and never keep a verbs object beyond the call that made it.
#![allow(unsafe_code)]

use std::alloc::{self, Layout};
use std::ffi::{c_int, CStr};
use std::io;
use std::marker::PhantomData;
use std::ptr::{self, NonNull};
use std::sync::Once;
use std::time::{Duration, Instant};

use rdma_sys as ffi;

use crate::probe::{SelftestOptions, SelftestResult, Verbs, VerbsError, VerbsPort};

mod providers {
    include!(concat!(env!("OUT_DIR"), "/static_providers.rs"));
}

pub(crate) use providers::STATIC_PROVIDERS;

impl Default for SelftestOptions {
    fn default() -> Self {
        SelftestOptions { buffer_bytes: 64 << 20, timeout_ms: 2000 }
    }
}

/// The real ibverbs, through the statically linked rdma-core.
#[derive(Debug, Default, Clone, Copy)]
pub struct IbVerbs;

impl IbVerbs {
    pub fn new() -> Self {
        IbVerbs
    }
}

impl Verbs for IbVerbs {
    fn device_names(&self) -> Result<Vec<String>, VerbsError> {
        let list = DeviceList::get().map_err(|e| VerbsError::DeviceList { errno: errno_text(&e) })?;
        Ok(list.names())
    }

    fn query_port(&self, device: &str, port: u8, gid_index: Option<u32>) -> Result<VerbsPort, VerbsError> {
        let ctx = Context::open(device)?;
        let attr = ctx.query_port(port)?;
        let gid = match gid_index {
            Some(index) => Some(format_gid(&ctx.query_gid(port, index)?)),
            None => None,
        };
        Ok(VerbsPort {
            state: port_state_name(attr.state),
            link_layer: link_layer_name(attr.link_layer).to_owned(),
            gid_tbl_len: u32::try_from(attr.gid_tbl_len).unwrap_or(0),
            gid,
        })
    }

    fn selftest(&self, device: &str, port: u8, gid_index: Option<u32>, opts: &SelftestOptions) -> SelftestResult {
        let start = Instant::now();
        let outcome = loopback(device, port, gid_index, opts, start);
        let micros = u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX);
        match outcome {
            Ok(()) => SelftestResult { passed: true, step: None, status: None, hint: None, micros },
            Err(f) => SelftestResult {
                passed: false,
                step: Some(f.step.to_owned()),
                status: Some(f.status),
                hint: f.hint,
                micros,
            },
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Pure naming and formatting (unit-tested without hardware).

/// `enum ibv_port_state` as NCCL and sysfs name it.
pub fn port_state_name(state: u32) -> String {
    match state {
        0 => "NOP".into(),
        1 => "DOWN".into(),
        2 => "INIT".into(),
        3 => "ARMED".into(),
        4 => "ACTIVE".into(),
        5 => "ACTIVE_DEFER".into(),
        n => format!("UNKNOWN({n})"),
    }
}

/// `IBV_LINK_LAYER_*` as sysfs spells it.
pub fn link_layer_name(link_layer: u8) -> &'static str {
    match link_layer {
        1 => "InfiniBand",
        2 => "Ethernet",
        _ => "Unspecified",
    }
}

/// `enum ibv_wc_status` by its C name. Our own table rather than `ibv_wc_status_str`, whose
/// prose ("local protection error") is not what people search for.
pub fn wc_status_name(status: u32) -> String {
    const NAMES: [&str; 24] = [
        "IBV_WC_SUCCESS",
        "IBV_WC_LOC_LEN_ERR",
        "IBV_WC_LOC_QP_OP_ERR",
        "IBV_WC_LOC_EEC_OP_ERR",
        "IBV_WC_LOC_PROT_ERR",
        "IBV_WC_WR_FLUSH_ERR",
        "IBV_WC_MW_BIND_ERR",
        "IBV_WC_BAD_RESP_ERR",
        "IBV_WC_LOC_ACCESS_ERR",
        "IBV_WC_REM_INV_REQ_ERR",
        "IBV_WC_REM_ACCESS_ERR",
        "IBV_WC_REM_OP_ERR",
        "IBV_WC_RETRY_EXC_ERR",
        "IBV_WC_RNR_RETRY_EXC_ERR",
        "IBV_WC_LOC_RDD_VIOL_ERR",
        "IBV_WC_REM_INV_RD_REQ_ERR",
        "IBV_WC_REM_ABORT_ERR",
        "IBV_WC_INV_EECN_ERR",
        "IBV_WC_INV_EEC_STATE_ERR",
        "IBV_WC_FATAL_ERR",
        "IBV_WC_RESP_TIMEOUT_ERR",
        "IBV_WC_GENERAL_ERR",
        "IBV_WC_TM_ERR",
        "IBV_WC_TM_RNDV_INCOMPLETE",
    ];
    match NAMES.get(status as usize) {
        Some(name) => (*name).to_owned(),
        None => format!("IBV_WC_STATUS_{status}"),
    }
}

/// A GID as sysfs prints it, so the two can be compared (one formatter, in `sysfs`).
pub fn format_gid(raw: &[u8; 16]) -> String {
    crate::sysfs::format_gid(&std::net::Ipv6Addr::from(*raw))
}

/// The OS error text, with the errno name people grep for.
fn errno_text(e: &io::Error) -> String {
    match e.raw_os_error().and_then(errno_name) {
        Some(name) => format!("{name}: {e}"),
        None => e.to_string(),
    }
}

fn errno_name(code: i32) -> Option<&'static str> {
    Some(match code {
        1 => "EPERM",
        2 => "ENOENT",
        5 => "EIO",
        11 => "EAGAIN",
        12 => "ENOMEM",
        13 => "EACCES",
        14 => "EFAULT",
        16 => "EBUSY",
        19 => "ENODEV",
        22 => "EINVAL",
        38 => "ENOSYS",
        61 => "ENODATA",
        95 => "EOPNOTSUPP",
        101 => "ENETUNREACH",
        110 => "ETIMEDOUT",
        113 => "EHOSTUNREACH",
        _ => return None,
    })
}

/// Verbs calls that return an errno value (0 on success) rather than setting `errno`. Some
/// providers return `-errno` or plain `-1`; the latter leaves the answer in `errno`.
fn check_ret(ret: c_int) -> io::Result<()> {
    match ret {
        0 => Ok(()),
        -1 => Err(io::Error::last_os_error()),
        r => Err(io::Error::from_raw_os_error(r.abs())),
    }
}

// ---------------------------------------------------------------------------------------------
// Owners of verbs objects.

static REGISTER_PROVIDERS: Once = Once::new();

/// The array `ibv_get_device_list` returns; the device pointers in it are valid while it lives.
struct DeviceList {
    list: NonNull<*mut ffi::ibv_device>,
    len: usize,
}

impl DeviceList {
    fn get() -> io::Result<Self> {
        // In a static link no provider is loaded from disk; see build.rs.
        REGISTER_PROVIDERS.call_once(providers::register_static_providers);
        let mut n: c_int = 0;
        // SAFETY: `n` is a valid place for the count. The returned array is owned by this
        // `DeviceList` and released once, in Drop, with ibv_free_device_list.
        let list = unsafe { ffi::ibv_get_device_list(&mut n) };
        match NonNull::new(list) {
            // NULL with errno set: ENOSYS when the kernel has no uverbs, ENOMEM.
            None => Err(io::Error::last_os_error()),
            Some(list) => Ok(DeviceList { list, len: usize::try_from(n).unwrap_or(0) }),
        }
    }

    fn devices(&self) -> impl Iterator<Item = *mut ffi::ibv_device> + '_ {
        // SAFETY: ibv_get_device_list returned an array of `len` device pointers (NULL
        // terminated after them) that stays valid until ibv_free_device_list in our Drop; `self`
        // is borrowed for as long as the iterator lives.
        (0..self.len).map(move |i| unsafe { *self.list.as_ptr().add(i) })
    }

    fn names(&self) -> Vec<String> {
        self.devices().filter_map(device_name).collect()
    }

    fn find(&self, name: &str) -> Option<*mut ffi::ibv_device> {
        self.devices().find(|&d| device_name(d).as_deref() == Some(name))
    }
}

impl Drop for DeviceList {
    fn drop(&mut self) {
        // SAFETY: `list` came from ibv_get_device_list and is freed only here, once. Contexts
        // opened from its devices stay valid after this (verbs.h: open, then free the list).
        unsafe { ffi::ibv_free_device_list(self.list.as_ptr()) }
    }
}

fn device_name(dev: *mut ffi::ibv_device) -> Option<String> {
    if dev.is_null() {
        return None;
    }
    // SAFETY: `dev` is a non-NULL entry of a live device list (callers borrow the DeviceList);
    // ibv_get_device_name returns a pointer into the device, a NUL-terminated kernel name
    // (IBV_SYSFS_NAME_MAX) that lives as long as the device, and we copy it out at once.
    unsafe {
        let name = ffi::ibv_get_device_name(dev);
        (!name.is_null()).then(|| CStr::from_ptr(name).to_string_lossy().into_owned())
    }
}

/// An open device (`ibv_open_device`), closed in Drop.
struct Context {
    ctx: NonNull<ffi::ibv_context>,
    name: String,
}

impl Context {
    /// Opens `name` if libibverbs lists it. Listing failures (no uverbs at all) read as "not
    /// listed": from the caller's side the device is just not there.
    fn open(name: &str) -> Result<Self, VerbsError> {
        let list = DeviceList::get().map_err(|_| VerbsError::NotListed(name.to_owned()))?;
        let dev = list.find(name).ok_or_else(|| VerbsError::NotListed(name.to_owned()))?;
        // SAFETY: `dev` is an entry of `list`, which is alive for this call. The context
        // returned is owned by this `Context` and closed once in Drop; it does not depend on
        // the list staying alive.
        let ctx = unsafe { ffi::ibv_open_device(dev) };
        let ctx = NonNull::new(ctx).ok_or_else(|| VerbsError::Open {
            device: name.to_owned(),
            errno: errno_text(&io::Error::last_os_error()),
        })?;
        Ok(Context { ctx, name: name.to_owned() })
    }

    fn query_port(&self, port: u8) -> Result<ffi::ibv_port_attr, VerbsError> {
        // SAFETY: ibv_port_attr is plain C data (integers only); all-zero is a valid value.
        let mut attr: ffi::ibv_port_attr = unsafe { std::mem::zeroed() };
        // SAFETY: `ctx` is an open context owned by self; `attr` is a writable ibv_port_attr.
        // The inline ___ibv_query_port passes sizeof(attr) to the provider, so a newer struct
        // is never overrun.
        let ret = unsafe { ffi::___ibv_query_port(self.ctx.as_ptr(), port, &mut attr) };
        check_ret(ret).map_err(|e| VerbsError::QueryPort { device: self.name.clone(), port, errno: errno_text(&e) })?;
        Ok(attr)
    }

    fn query_gid(&self, port: u8, index: u32) -> Result<[u8; 16], VerbsError> {
        let err = |e: io::Error| VerbsError::QueryGid { device: self.name.clone(), port, index, errno: errno_text(&e) };
        let idx = c_int::try_from(index).map_err(|_| err(io::Error::from_raw_os_error(22)))?;
        let mut gid = ffi::ibv_gid { raw: [0; 16] };
        // SAFETY: `ctx` is an open context owned by self; `gid` is a writable 16-byte union.
        let ret = unsafe { ffi::ibv_query_gid(self.ctx.as_ptr(), port, idx, &mut gid) };
        check_ret(ret).map_err(err)?;
        // SAFETY: every bit pattern of the union is a valid `[u8; 16]`.
        Ok(unsafe { gid.raw })
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: `ctx` came from ibv_open_device and is closed only here; every object
        // created from it borrows this Context, so all of them were destroyed already.
        unsafe {
            ffi::ibv_close_device(self.ctx.as_ptr());
        }
    }
}

/// A protection domain, deallocated in Drop; cannot outlive its context.
struct Pd<'c> {
    pd: NonNull<ffi::ibv_pd>,
    _ctx: PhantomData<&'c Context>,
}

impl<'c> Pd<'c> {
    fn alloc(ctx: &'c Context) -> io::Result<Self> {
        // SAFETY: `ctx` is an open context that outlives the returned Pd ('c). The PD is owned
        // by the Pd and deallocated once in Drop.
        let pd = unsafe { ffi::ibv_alloc_pd(ctx.ctx.as_ptr()) };
        let pd = NonNull::new(pd).ok_or_else(io::Error::last_os_error)?;
        Ok(Pd { pd, _ctx: PhantomData })
    }
}

impl Drop for Pd<'_> {
    fn drop(&mut self) {
        // SAFETY: `pd` came from ibv_alloc_pd and is freed only here; MRs and QPs borrow the
        // Pd, so they were destroyed first.
        unsafe {
            ffi::ibv_dealloc_pd(self.pd.as_ptr());
        }
    }
}

/// Page-aligned, zeroed heap memory for the adapter to read and write. Held as a raw pointer,
/// never as a Rust reference, while it is registered: the device writes it behind the
/// compiler's back.
struct DmaBuf {
    ptr: NonNull<u8>,
    layout: Layout,
}

impl DmaBuf {
    fn new(len: usize) -> io::Result<Self> {
        let layout = Layout::from_size_align(len.max(1), 4096).map_err(|_| io::Error::from_raw_os_error(22))?;
        // SAFETY: `layout` has a non-zero size. The memory is freed once in Drop with the same
        // layout.
        let ptr = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(ptr).ok_or_else(|| io::Error::from_raw_os_error(12))?;
        Ok(DmaBuf { ptr, layout })
    }

    fn len(&self) -> usize {
        self.layout.size()
    }

    fn addr(&self, offset: usize) -> u64 {
        self.ptr.as_ptr() as u64 + offset as u64
    }

    /// Copies out `len` bytes at `offset`. Only called when no work request on this memory is
    /// outstanding (after its completion was polled), so the device is not writing it.
    fn read(&self, offset: usize, len: usize) -> Vec<u8> {
        assert!(offset.checked_add(len).is_some_and(|end| end <= self.len()));
        let mut out = vec![0u8; len];
        // SAFETY: the range is inside the allocation (asserted above); `out` is a distinct
        // allocation of `len` bytes. No DMA into the range is in flight (see above).
        unsafe { ptr::copy_nonoverlapping(self.ptr.as_ptr().add(offset), out.as_mut_ptr(), len) };
        out
    }

    /// Copies `data` in at `offset`, before any work request uses the range.
    fn write(&mut self, offset: usize, data: &[u8]) {
        assert!(offset.checked_add(data.len()).is_some_and(|end| end <= self.len()));
        // SAFETY: the range is inside the allocation (asserted above); `data` is a different
        // allocation. No DMA on the range is in flight when this is called.
        unsafe { ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.as_ptr().add(offset), data.len()) };
    }
}

impl Drop for DmaBuf {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from alloc_zeroed with `layout` and is freed only here. The MR
        // that registered it owns this DmaBuf and deregisters before its fields drop.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

/// A registered memory region that owns its buffer: deregistration (Drop) happens before the
/// buffer is freed (fields drop after `drop` returns).
struct Mr<'p> {
    mr: NonNull<ffi::ibv_mr>,
    buf: DmaBuf,
    _pd: PhantomData<&'p Pd<'p>>,
}

impl<'p> Mr<'p> {
    fn register(pd: &'p Pd<'_>, buf: DmaBuf) -> io::Result<Self> {
        let access = ffi::ibv_access_flags::IBV_ACCESS_LOCAL_WRITE
            | ffi::ibv_access_flags::IBV_ACCESS_REMOTE_WRITE
            | ffi::ibv_access_flags::IBV_ACCESS_REMOTE_READ;
        // SAFETY: `pd` outlives the Mr ('p). `buf` is a live allocation of `buf.len()` bytes
        // that the Mr takes ownership of, so it stays allocated until after ibv_dereg_mr in
        // Drop. None of these flags is an optional-access flag, so the exported ibv_reg_mr is
        // what the verbs.h macro would pick.
        let mr = unsafe { ffi::ibv_reg_mr(pd.pd.as_ptr(), buf.ptr.as_ptr().cast(), buf.len(), access.0 as c_int) };
        let mr = NonNull::new(mr).ok_or_else(io::Error::last_os_error)?;
        Ok(Mr { mr, buf, _pd: PhantomData })
    }

    fn lkey(&self) -> u32 {
        // SAFETY: `mr` is a registered MR owned by self; lkey is set once by ibv_reg_mr.
        unsafe { (*self.mr.as_ptr()).lkey }
    }

    fn rkey(&self) -> u32 {
        // SAFETY: as for lkey.
        unsafe { (*self.mr.as_ptr()).rkey }
    }
}

impl Drop for Mr<'_> {
    fn drop(&mut self) {
        // SAFETY: `mr` came from ibv_reg_mr and is deregistered only here. Once ibv_dereg_mr
        // returns the adapter can no longer reach `buf` through this MR (a work request still
        // naming it would complete in error), so `buf`, freed after this returns, is never
        // touched by DMA after it is freed.
        unsafe {
            ffi::ibv_dereg_mr(self.mr.as_ptr());
        }
    }
}

/// A completion queue without a completion channel: we only ever poll it.
struct Cq<'c> {
    cq: NonNull<ffi::ibv_cq>,
    _ctx: PhantomData<&'c Context>,
}

impl<'c> Cq<'c> {
    fn create(ctx: &'c Context, entries: c_int) -> io::Result<Self> {
        // SAFETY: `ctx` is open and outlives the Cq ('c). No channel or user context pointer is
        // passed. The CQ is destroyed once in Drop.
        let cq = unsafe { ffi::ibv_create_cq(ctx.ctx.as_ptr(), entries, ptr::null_mut(), ptr::null_mut(), 0) };
        let cq = NonNull::new(cq).ok_or_else(io::Error::last_os_error)?;
        Ok(Cq { cq, _ctx: PhantomData })
    }

    /// One non-blocking poll; `Ok(None)` when the queue is empty.
    fn poll_one(&self) -> io::Result<Option<ffi::ibv_wc>> {
        // SAFETY: ibv_wc is plain C data; all-zero is a valid value.
        let mut wc: ffi::ibv_wc = unsafe { std::mem::zeroed() };
        // SAFETY: `cq` is a live CQ owned by self; `wc` has room for the one entry asked for.
        // The provider's poll_cq never blocks.
        let n = unsafe { ffi::ibv_poll_cq(self.cq.as_ptr(), 1, &mut wc) };
        match n {
            0 => Ok(None),
            n if n > 0 => Ok(Some(wc)),
            n => Err(io::Error::from_raw_os_error(n.abs())),
        }
    }
}

impl Drop for Cq<'_> {
    fn drop(&mut self) {
        // SAFETY: `cq` came from ibv_create_cq and is destroyed only here; the QP using it
        // borrows the Cq and was destroyed first.
        unsafe {
            ffi::ibv_destroy_cq(self.cq.as_ptr());
        }
    }
}

/// A reliable-connected queue pair, destroyed in Drop before its CQ and PD.
struct Qp<'a> {
    qp: NonNull<ffi::ibv_qp>,
    _deps: PhantomData<(&'a Pd<'a>, &'a Cq<'a>)>,
}

impl<'a> Qp<'a> {
    fn create_rc(pd: &'a Pd<'_>, cq: &'a Cq<'_>) -> io::Result<Self> {
        // SAFETY: ibv_qp_init_attr is plain C data (pointers and integers); zero is valid.
        let mut init: ffi::ibv_qp_init_attr = unsafe { std::mem::zeroed() };
        init.send_cq = cq.cq.as_ptr();
        init.recv_cq = cq.cq.as_ptr();
        init.qp_type = ffi::ibv_qp_type::IBV_QPT_RC;
        init.sq_sig_all = 1;
        init.cap.max_send_wr = 4;
        init.cap.max_recv_wr = 4;
        init.cap.max_send_sge = 1;
        init.cap.max_recv_sge = 1;
        // SAFETY: `pd` and `cq` are live and outlive the Qp ('a); `init` is a valid
        // ibv_qp_init_attr that libibverbs only reads (and updates cap in place). The QP is
        // destroyed once in Drop.
        let qp = unsafe { ffi::ibv_create_qp(pd.pd.as_ptr(), &mut init) };
        let qp = NonNull::new(qp).ok_or_else(io::Error::last_os_error)?;
        Ok(Qp { qp, _deps: PhantomData })
    }

    fn qp_num(&self) -> u32 {
        // SAFETY: `qp` is a live QP owned by self; qp_num is fixed at creation.
        unsafe { (*self.qp.as_ptr()).qp_num }
    }

    fn modify(&self, attr: &mut ffi::ibv_qp_attr, mask: ffi::ibv_qp_attr_mask) -> io::Result<()> {
        // SAFETY: `qp` is live; `attr` is a valid ibv_qp_attr with every field named in `mask`
        // set by the caller. libibverbs does not keep the pointer.
        let ret = unsafe { ffi::ibv_modify_qp(self.qp.as_ptr(), attr, mask.0 as c_int) };
        check_ret(ret)
    }

    fn post_recv(&self, wr_id: u64, mr: &Mr<'_>, offset: usize, len: u32) -> io::Result<()> {
        let mut sge = ffi::ibv_sge { addr: mr.buf.addr(offset), length: len, lkey: mr.lkey() };
        let mut wr = ffi::ibv_recv_wr { wr_id, next: ptr::null_mut(), sg_list: &mut sge, num_sge: 1 };
        let mut bad: *mut ffi::ibv_recv_wr = ptr::null_mut();
        // SAFETY: `qp` is live; `wr` and `sge` are valid for this call (the provider copies
        // them into its queue before returning). The SGE names `mr`'s buffer by address and
        // lkey: the adapter reaches it only through the MR, and the buffer is freed only after
        // ibv_dereg_mr (see Mr's Drop), so DMA cannot land in freed memory.
        let ret = unsafe { ffi::ibv_post_recv(self.qp.as_ptr(), &mut wr, &mut bad) };
        check_ret(ret)
    }

    /// Posts one signaled SEND (`remote == None`) or RDMA WRITE to `remote` = (addr, rkey).
    fn post_send(
        &self,
        wr_id: u64,
        mr: &Mr<'_>,
        offset: usize,
        len: u32,
        remote: Option<(u64, u32)>,
    ) -> io::Result<()> {
        let mut sge = ffi::ibv_sge { addr: mr.buf.addr(offset), length: len, lkey: mr.lkey() };
        // SAFETY: ibv_send_wr is plain C data (pointers, integers, unions of them); zero is
        // valid.
        let mut wr: ffi::ibv_send_wr = unsafe { std::mem::zeroed() };
        wr.wr_id = wr_id;
        wr.sg_list = &mut sge;
        wr.num_sge = 1;
        wr.send_flags = ffi::ibv_send_flags::IBV_SEND_SIGNALED.0;
        match remote {
            None => wr.opcode = ffi::ibv_wr_opcode::IBV_WR_SEND,
            Some((remote_addr, rkey)) => {
                wr.opcode = ffi::ibv_wr_opcode::IBV_WR_RDMA_WRITE;
                wr.wr.rdma = ffi::rdma_t { remote_addr, rkey };
            }
        }
        let mut bad: *mut ffi::ibv_send_wr = ptr::null_mut();
        // SAFETY: as for post_recv: `qp` is live, `wr`/`sge` are valid for the call and copied
        // by the provider, and the buffer they name outlives any DMA on it.
        let ret = unsafe { ffi::ibv_post_send(self.qp.as_ptr(), &mut wr, &mut bad) };
        check_ret(ret)
    }
}

impl Drop for Qp<'_> {
    fn drop(&mut self) {
        // SAFETY: `qp` came from ibv_create_qp and is destroyed only here, before the CQ, MRs
        // and PD it uses (they are borrowed by, or declared before, the Qp). Destroying it
        // stops any DMA it still had queued.
        unsafe {
            ffi::ibv_destroy_qp(self.qp.as_ptr());
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The loopback self-test.

/// Why the self-test stopped.
struct Failure {
    step: &'static str,
    status: String,
    hint: Option<String>,
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

fn loopback(
    device: &str,
    port: u8,
    gid_index: Option<u32>,
    opts: &SelftestOptions,
    start: Instant,
) -> Result<(), Failure> {
    let mut phases = Phases::new(device, port, start);
    let deadline = start + Duration::from_millis(opts.timeout_ms);
    let ctx = Context::open(device)?;
    let attr = ctx.query_port(port)?;
    if attr.state != ffi::ibv_port_state::IBV_PORT_ACTIVE {
        return Err(Failure::new(
            "query_port",
            format!("port {port} is {}", port_state_name(attr.state)),
            Some(
                "NCCL uses only ACTIVE ports: check the link (phys_state) and, on InfiniBand, the subnet manager"
                    .into(),
            ),
        ));
    }
    let roce = attr.link_layer == 2;
    let route = match (roce, gid_index) {
        (true, None) => {
            return Err(Failure::new(
                "query_gid",
                "no GID index given for a RoCE port",
                Some("RoCE needs a GID index (the RoCE v2 IPv4 entry)".into()),
            ))
        }
        (true, Some(index)) => {
            let sgid = u8::try_from(index).map_err(|_| {
                Failure::new("query_gid", format!("GID index {index} does not fit the 8-bit sgid_index"), None)
            })?;
            let gid = ctx.query_gid(port, index)?;
            if gid == [0; 16] {
                return Err(Failure::new(
                    "query_gid",
                    format!("GID {index} is empty"),
                    Some("choose a populated RoCE v2 entry (see ports/N/gids and gid_attrs/types)".into()),
                ));
            }
            Route::Gid { gid, sgid_index: sgid }
        }
        (false, _) => Route::Lid(attr.lid),
    };

    let half = opts.buffer_bytes / 2;
    if half < MSG_BYTES {
        return Err(Failure::new("reg_mr", format!("buffer of {} bytes is too small", opts.buffer_bytes), None));
    }

    phases.lap("open+query_port+query_gid");
    let pd = Pd::alloc(&ctx).map_err(|e| Failure::os("alloc_pd", &e, None))?;
    let mut buf = DmaBuf::new(opts.buffer_bytes).map_err(|e| Failure::os("reg_mr", &e, None))?;
    let pattern = test_pattern(half, start);
    buf.write(0, &pattern);
    phases.lap("alloc+pattern");
    let mr = Mr::register(&pd, buf).map_err(|e| Failure::os("reg_mr", &e, reg_mr_hint(&e, opts.buffer_bytes)))?;
    let recv_buf = DmaBuf::new(MSG_BYTES).map_err(|e| Failure::os("reg_mr", &e, None))?;
    let recv_mr = Mr::register(&pd, recv_buf)
        .map_err(|e| Failure::os("reg_mr", &e, reg_mr_hint(&e, opts.buffer_bytes + MSG_BYTES)))?;
    phases.lap("reg_mr");
    let cq = Cq::create(&ctx, 8).map_err(|e| Failure::os("create_cq", &e, None))?;
    let qp = Qp::create_rc(&pd, &cq).map_err(|e| Failure::os("create_qp", &e, None))?;

    connect_to_self(&qp, port, attr.active_mtu, &route)?;
    phases.lap("create_cq+create_qp+modify_qp");

    // RDMA WRITE: first half -> second half, split where the port's message limit demands.
    let max_msg = (attr.max_msg_sz as usize).clamp(MSG_BYTES, 1 << 30);
    let mut off = 0;
    while off < half {
        let len = (half - off).min(max_msg);
        qp.post_send(WR_WRITE, &mr, off, len as u32, Some((mr.buf.addr(half + off), mr.rkey())))
            .map_err(|e| Failure::os("post_send", &e, None))?;
        wait_for(&cq, &[WR_WRITE], deadline, "RDMA WRITE")?;
        off += len;
    }
    phases.lap("rdma_write");
    if mr.buf.read(half, half) != pattern {
        return Err(Failure::new(
            "verify",
            "RDMA WRITE completed but the target bytes differ",
            Some("data corruption on the DMA path: check IOMMU and PCIe ACS settings".into()),
        ));
    }

    phases.lap("verify_write");
    // SEND/RECV: first MSG_BYTES of the pattern -> the separate receive region.
    qp.post_recv(WR_RECV, &recv_mr, 0, MSG_BYTES as u32).map_err(|e| Failure::os("post_recv", &e, None))?;
    qp.post_send(WR_SEND, &mr, 0, MSG_BYTES as u32, None).map_err(|e| Failure::os("post_send", &e, None))?;
    wait_for(&cq, &[WR_SEND, WR_RECV], deadline, "SEND/RECV")?;
    phases.lap("send_recv");
    if recv_mr.buf.read(0, MSG_BYTES) != pattern[..MSG_BYTES] {
        return Err(Failure::new(
            "verify",
            "SEND completed but the received bytes differ",
            Some("data corruption on the DMA path: check IOMMU and PCIe ACS settings".into()),
        ));
    }
    Ok(())
    // Drop order: qp, cq, recv_mr, mr, pd, ctx.
}

/// Per-phase times of the self-test, logged at debug level (NCCL_WRAP_LOG=debug).
struct Phases<'a> {
    device: &'a str,
    port: u8,
    last: Instant,
}

impl<'a> Phases<'a> {
    fn new(device: &'a str, port: u8, start: Instant) -> Self {
        Phases { device, port, last: start }
    }
    fn lap(&mut self, what: &str) {
        let now = Instant::now();
        log::debug!("selftest {}/{}: {what} {} us", self.device, self.port, now.duration_since(self.last).as_micros());
        self.last = now;
    }
}

enum Route {
    Lid(u16),
    Gid { gid: [u8; 16], sgid_index: u8 },
}

/// RESET -> INIT -> RTR -> RTS with the QP as its own peer.
fn connect_to_self(qp: &Qp<'_>, port: u8, mtu: u32, route: &Route) -> Result<(), Failure> {
    use ffi::ibv_qp_attr_mask as M;
    let modify_hint = || {
        Some(match route {
            Route::Gid { sgid_index, .. } => format!(
                "the QP could not be routed through GID {sgid_index}: check the GID index is a populated RoCE v2 entry and its net device is up with an address"
            ),
            Route::Lid(lid) => format!("the QP could not be routed to LID {lid}: check the subnet manager assigned one"),
        })
    };

    // SAFETY: ibv_qp_attr is plain C data; all-zero is valid.
    let mut a: ffi::ibv_qp_attr = unsafe { std::mem::zeroed() };
    a.qp_state = ffi::ibv_qp_state::IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = port;
    a.qp_access_flags = (ffi::ibv_access_flags::IBV_ACCESS_LOCAL_WRITE
        | ffi::ibv_access_flags::IBV_ACCESS_REMOTE_WRITE
        | ffi::ibv_access_flags::IBV_ACCESS_REMOTE_READ)
        .0;
    qp.modify(&mut a, M::IBV_QP_STATE | M::IBV_QP_PKEY_INDEX | M::IBV_QP_PORT | M::IBV_QP_ACCESS_FLAGS)
        .map_err(|e| Failure::new("modify_qp", format!("RESET->INIT: {}", errno_text(&e)), modify_hint()))?;

    // SAFETY: as above.
    let mut a: ffi::ibv_qp_attr = unsafe { std::mem::zeroed() };
    a.qp_state = ffi::ibv_qp_state::IBV_QPS_RTR;
    a.path_mtu = mtu;
    a.dest_qp_num = qp.qp_num();
    a.rq_psn = 0;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12;
    a.ah_attr.port_num = port;
    match *route {
        Route::Lid(lid) => a.ah_attr.dlid = lid,
        Route::Gid { gid, sgid_index } => {
            a.ah_attr.is_global = 1;
            a.ah_attr.grh.dgid = ffi::ibv_gid { raw: gid };
            a.ah_attr.grh.sgid_index = sgid_index;
            a.ah_attr.grh.hop_limit = 64;
        }
    }
    qp.modify(
        &mut a,
        M::IBV_QP_STATE
            | M::IBV_QP_AV
            | M::IBV_QP_PATH_MTU
            | M::IBV_QP_DEST_QPN
            | M::IBV_QP_RQ_PSN
            | M::IBV_QP_MAX_DEST_RD_ATOMIC
            | M::IBV_QP_MIN_RNR_TIMER,
    )
    .map_err(|e| Failure::new("modify_qp", format!("INIT->RTR: {}", errno_text(&e)), modify_hint()))?;

    // SAFETY: as above.
    let mut a: ffi::ibv_qp_attr = unsafe { std::mem::zeroed() };
    a.qp_state = ffi::ibv_qp_state::IBV_QPS_RTS;
    a.sq_psn = 0;
    a.timeout = 14; // 4.096 us * 2^14 = 67 ms per try: a lost packet fails well inside the deadline
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 1;
    qp.modify(
        &mut a,
        M::IBV_QP_STATE
            | M::IBV_QP_TIMEOUT
            | M::IBV_QP_RETRY_CNT
            | M::IBV_QP_RNR_RETRY
            | M::IBV_QP_SQ_PSN
            | M::IBV_QP_MAX_QP_RD_ATOMIC,
    )
    .map_err(|e| Failure::new("modify_qp", format!("RTR->RTS: {}", errno_text(&e)), modify_hint()))?;
    Ok(())
}

/// Polls until a successful completion has arrived for each of `want`, the first failed
/// completion, or the deadline. Spins briefly, then sleeps between polls so a software device
/// (rxe) running on the same CPU gets to do the work.
fn wait_for(cq: &Cq<'_>, want: &[u64], deadline: Instant, what: &str) -> Result<(), Failure> {
    let mut pending: Vec<u64> = want.to_vec();
    let mut spins = 0u32;
    while !pending.is_empty() {
        match cq.poll_one().map_err(|e| Failure::os("poll", &e, None))? {
            Some(wc) => {
                if wc.status != ffi::ibv_wc_status::IBV_WC_SUCCESS {
                    let name = wc_status_name(wc.status);
                    return Err(Failure::new(
                        "poll",
                        format!("{name} (vendor_err {:#x}) on {what}", wc.vendor_err),
                        wc_status_hint(wc.status),
                    ));
                }
                pending.retain(|&id| id != wc.wr_id);
            }
            None if Instant::now() >= deadline => {
                return Err(Failure::new(
                    "timeout",
                    format!("no completion for {what} before the deadline"),
                    Some("the adapter accepted the work but never finished it: check the port's link and, for RoCE, the GID's net device; raise the timeout on slow (software) devices".into()),
                ));
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

fn wc_status_hint(status: u32) -> Option<String> {
    use ffi::ibv_wc_status as S;
    Some(match status {
        S::IBV_WC_LOC_PROT_ERR => "the adapter could not reach the registered memory: usually the IOMMU translating DMA (boot with iommu=pt; check /sys/bus/pci/devices/<addr>/iommu_group/type) or PCIe ACS redirecting peer traffic".into(),
        S::IBV_WC_LOC_ACCESS_ERR | S::IBV_WC_REM_ACCESS_ERR => "memory access refused: registration flags or keys do not match (IOMMU or ACS can also cause this)".into(),
        S::IBV_WC_RETRY_EXC_ERR => "packets were not acknowledged: check the link, the GID/route (RoCE), MTU and, on lossless fabrics, PFC".into(),
        S::IBV_WC_RNR_RETRY_EXC_ERR => "the receiver had no buffer posted in time".into(),
        _ => return None,
    })
}

/// Registration pins memory: ENOMEM/EPERM/EAGAIN there almost always mean RLIMIT_MEMLOCK.
fn reg_mr_hint(e: &io::Error, bytes: usize) -> Option<String> {
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

// ---------------------------------------------------------------------------------------------
// Hidden debug entry (`nccl-wrap __verbs ...`), used by the Soft-RoCE lab. One JSON line out.

/// `list` | `port DEV PORT [GID]` | `selftest DEV PORT GID|- [BYTES] [TIMEOUT_MS]`. Exit 0 when
/// the answer is good (device listed, port queried, self-test passed), 1 otherwise, 2 on usage.
pub fn debug_main(args: Vec<String>) -> i32 {
    // main owns logging setup; this entry runs before it, so it sets up the same filter itself.
    let _ = env_logger::Builder::from_env(env_logger::Env::new().filter("NCCL_WRAP_LOG")).try_init();
    let v = IbVerbs::new();
    let start = Instant::now();
    let micros = |s: Instant| u64::try_from(s.elapsed().as_micros()).unwrap_or(u64::MAX);
    let arg = |i: usize| args.get(i).map(String::as_str);
    let num = |i: usize| arg(i).and_then(|s| s.parse::<u64>().ok());
    let gid = |i: usize| arg(i).filter(|s| *s != "-").and_then(|s| s.parse::<u32>().ok());
    let (ok, out) = match (arg(0), arg(1), num(2)) {
        (Some("list"), _, _) => match v.device_names() {
            Ok(d) => (true, serde_json::json!({"providers": STATIC_PROVIDERS, "devices": d, "micros": micros(start)})),
            Err(e) => (
                false,
                serde_json::json!({"providers": STATIC_PROVIDERS, "error": e.to_string(), "micros": micros(start)}),
            ),
        },
        (Some("port"), Some(dev), Some(port)) => match v.query_port(dev, port as u8, gid(3)) {
            Ok(p) => (true, serde_json::json!({"device": dev, "port": port, "attr": p, "micros": micros(start)})),
            Err(e) => (
                false,
                serde_json::json!({"device": dev, "port": port, "error": e.to_string(), "micros": micros(start)}),
            ),
        },
        (Some("selftest"), Some(dev), Some(port)) => {
            let d = SelftestOptions::default();
            let opts = SelftestOptions {
                buffer_bytes: num(4).map_or(d.buffer_bytes, |b| b as usize),
                timeout_ms: num(5).unwrap_or(d.timeout_ms),
            };
            let r = v.selftest(dev, port as u8, gid(3), &opts);
            (
                r.passed,
                serde_json::json!({"device": dev, "port": port, "buffer_bytes": opts.buffer_bytes, "timeout_ms": opts.timeout_ms, "result": r}),
            )
        }
        _ => {
            eprintln!(
                "usage: nccl-wrap __verbs list | port DEV PORT [GID] | selftest DEV PORT GID|- [BYTES] [TIMEOUT_MS]"
            );
            return 2;
        }
    };
    println!("{out}");
    if ok {
        0
    } else {
        1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gid_formats_like_sysfs() {
        let mut raw = [0u8; 16];
        raw[10] = 0xff;
        raw[11] = 0xff;
        raw[12..].copy_from_slice(&[10, 0, 106, 7]);
        assert_eq!(format_gid(&raw), "0000:0000:0000:0000:0000:ffff:0a00:6a07");
        let ll = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0x1b, 0x21, 0xff, 0xfe, 0xab, 0xcd, 0xef];
        assert_eq!(format_gid(&ll), "fe80:0000:0000:0000:021b:21ff:feab:cdef");
    }

    #[test]
    fn wc_status_names_match_verbs_h() {
        use ffi::ibv_wc_status as S;
        assert_eq!(wc_status_name(S::IBV_WC_SUCCESS), "IBV_WC_SUCCESS");
        assert_eq!(wc_status_name(S::IBV_WC_LOC_PROT_ERR), "IBV_WC_LOC_PROT_ERR");
        assert_eq!(wc_status_name(S::IBV_WC_WR_FLUSH_ERR), "IBV_WC_WR_FLUSH_ERR");
        assert_eq!(wc_status_name(S::IBV_WC_RETRY_EXC_ERR), "IBV_WC_RETRY_EXC_ERR");
        assert_eq!(wc_status_name(S::IBV_WC_GENERAL_ERR), "IBV_WC_GENERAL_ERR");
        assert_eq!(wc_status_name(S::IBV_WC_TM_RNDV_INCOMPLETE), "IBV_WC_TM_RNDV_INCOMPLETE");
        assert_eq!(wc_status_name(99), "IBV_WC_STATUS_99");
        // Our table covers exactly the statuses this libibverbs knows: it has text for 0..=23
        // and calls 24 "unknown".
        let text = |s: u32| {
            // SAFETY: ibv_wc_status_str returns a pointer to a static NUL-terminated string for
            // any value, "unknown" outside the enum.
            unsafe { CStr::from_ptr(ffi::ibv_wc_status_str(s)) }.to_string_lossy().into_owned()
        };
        for s in 0..24 {
            assert_ne!(text(s), "unknown", "status {s}");
            assert!(!wc_status_name(s).starts_with("IBV_WC_STATUS_"), "status {s}");
        }
        assert_eq!(text(24), "unknown");
    }

    #[test]
    fn port_states_and_link_layers_are_named_as_nccl_does() {
        use ffi::ibv_port_state as P;
        assert_eq!(port_state_name(P::IBV_PORT_DOWN), "DOWN");
        assert_eq!(port_state_name(P::IBV_PORT_INIT), "INIT");
        assert_eq!(port_state_name(P::IBV_PORT_ARMED), "ARMED");
        assert_eq!(port_state_name(P::IBV_PORT_ACTIVE), "ACTIVE");
        assert_eq!(port_state_name(P::IBV_PORT_ACTIVE_DEFER), "ACTIVE_DEFER");
        assert_eq!(port_state_name(9), "UNKNOWN(9)");
        assert_eq!(link_layer_name(1), "InfiniBand");
        assert_eq!(link_layer_name(2), "Ethernet");
        assert_eq!(link_layer_name(0), "Unspecified");
    }

    #[test]
    fn errno_text_names_the_errno() {
        assert_eq!(
            errno_text(&io::Error::from_raw_os_error(12)),
            format!("ENOMEM: {}", io::Error::from_raw_os_error(12))
        );
    }

    #[test]
    fn every_debian_provider_is_linked() {
        for p in ["mlx5", "mlx4", "efa", "mana", "rxe", "siw", "bnxt_re", "irdma", "hns", "erdma"] {
            assert!(STATIC_PROVIDERS.contains(&p), "{p} missing from {STATIC_PROVIDERS:?}");
        }
    }

    #[test]
    fn pattern_is_not_constant() {
        let p = test_pattern(4096, Instant::now());
        assert_eq!(p.len(), 4096);
        assert!(p.iter().any(|&b| b != p[0]));
    }

    /// On a machine without RDMA (this build host, CI) the real verbs must answer cleanly.
    #[test]
    fn no_rdma_is_a_clean_answer() {
        let v = IbVerbs::new();
        match v.device_names() {
            Ok(names) => {
                assert!(!names.iter().any(|n| n == "mlx5_0") || std::path::Path::new("/dev/infiniband").exists())
            }
            Err(e) => assert!(matches!(e, VerbsError::DeviceList { .. }), "{e}"),
        }
        if !std::path::Path::new("/dev/infiniband").exists() {
            assert_eq!(v.query_port("mlx5_0", 1, None), Err(VerbsError::NotListed("mlx5_0".into())));
            let r = v.selftest("mlx5_0", 1, Some(3), &SelftestOptions::default());
            assert!(!r.passed);
            assert_eq!(r.step.as_deref(), Some("open"));
        }
    }
}
