//! The FFI fence: the only file under `verbs/` that may use `unsafe`. Each ibverbs object is freed
//! exactly once in `Drop`, lifetimes enforcing the teardown order (QP, CQ, MR, PD, context). It must
//! never block (completions are polled), never panic without RDMA, and never hand out a raw pointer.

use std::alloc::{self, Layout};
use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_uint, c_void, CStr, OsStr};
use std::io;
use std::marker::PhantomData;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::ptr::{self, NonNull};
use std::sync::Once;

use nix::libc;
use rdma_sys as ffi;

use super::nldev;
use super::probe::VerbsError;
use super::status::errno_text;
use crate::detect::gid_source::Raw;

extern "C" {
    /// verbs.h's `_ibv_query_gid_table` (rdma-core v31), behind its inline `ibv_query_gid_table`,
    /// which rdma-sys's bindings leave out. Returns the number of entries written, or a negated errno.
    fn _ibv_query_gid_table(
        context: *mut ffi::ibv_context,
        entries: *mut ffi::ibv_gid_entry,
        max_entries: usize,
        flags: u32,
        entry_size: usize,
    ) -> isize;
    /// libibverbs' sysfs root: `SYSFS_PATH` from the environment, or where sysfs is mounted.
    fn ibv_get_sysfs_path() -> *const c_char;
}

mod providers {
    include!(concat!(env!("OUT_DIR"), "/static_providers.rs"));
}

pub(crate) use providers::STATIC_PROVIDERS;

/// Functions of rdma-core parts nccl-wrap never reaches, answered so that the linker leaves them
/// out, and libibverbs' netlink discovery, forwarded to [`find_sysfs_devs_nl`] (build.rs).
mod stubs {
    include!(concat!(env!("OUT_DIR"), "/rdma_stubs.rs"));
}

/// ccan's `struct list_node` (rdma-core v44); a `struct list_head` is one of these.
#[repr(C)]
struct ListNode {
    next: *mut ListNode,
    prev: *mut ListNode,
}

/// libibverbs' `struct verbs_sysfs_dev`, rdma-core v44 (`vendor/verbs_sysfs_dev.h`), field for
/// field; filled only where build.rs forwards discovery here. The layout test compares.
#[repr(C)]
struct VerbsSysfsDev {
    entry: ListNode,
    provider_data: *mut c_void,
    matched: *const c_void,
    flags: c_uint,
    sysfs_name: [c_char; SYSFS_NAME_MAX],
    sysfs_cdev: u64,
    ibdev_name: [c_char; SYSFS_NAME_MAX],
    ibdev_path: [c_char; SYSFS_PATH_MAX],
    modalias: [c_char; 512],
    node_guid: u64,
    driver_id: u32,
    node_type: c_int,
    ibdev_idx: c_int,
    num_ports: u32,
    abi_ver: u32,
    time_created: [i64; 2],
}

/// `IBV_SYSFS_NAME_MAX`, `IBV_SYSFS_PATH_MAX` (verbs.h).
const SYSFS_NAME_MAX: usize = nldev::NAME_MAX;
const SYSFS_PATH_MAX: usize = 256;
/// `VSYSFS_READ_NODE_GUID`: the node GUID is known, not to be read from sysfs.
const VSYSFS_READ_NODE_GUID: c_uint = 1 << 1;

thread_local! {
    /// The one device a listing on this thread is for ([`DeviceList::get`]); `None`: all.
    static ONLY: RefCell<Option<String>> = const { RefCell::new(None) };
    /// The devices RDMA netlink showed, kept while a [`Discovery`] lives: one dump for several opens.
    static KEPT: RefCell<Kept> = const { RefCell::new(Kept::Off) };
}

enum Kept {
    /// No [`Discovery`]: each listing dumps afresh.
    Off,
    /// A [`Discovery`] lives; no dump yet.
    Waiting,
    Dump(Vec<nldev::NlDevice>),
    /// A [`Discovery`] lives and RDMA netlink did not answer: a listing for one device reads that
    /// device's sysfs files (`nldev::from_sysfs`); one that libibverbs had to scan for lists every
    /// device, and then serves them all (`whole`, [`Discovery::listed_from_sysfs`]).
    Sysfs {
        whole: bool,
    },
}

/// While it lives, listings on this thread share one RDMA netlink dump of the node's devices. For
/// the devices of one start; dropped before the command runs.
pub(crate) struct Discovery(());

impl Discovery {
    pub(crate) fn begin() -> Self {
        KEPT.with(|k| *k.borrow_mut() = Kept::Waiting);
        Discovery(())
    }

    /// Whether RDMA netlink did not answer, so that a listing holds every device of the node
    /// (libibverbs' sysfs discovery): the caller keeps that one listing for the other devices.
    pub(crate) fn listed_from_sysfs(&self) -> bool {
        KEPT.with(|k| matches!(*k.borrow(), Kept::Sysfs { whole: true }))
    }
}

impl Drop for Discovery {
    fn drop(&mut self) {
        KEPT.with(|k| *k.borrow_mut() = Kept::Off);
    }
}

/// libibverbs' `find_sysfs_devs_nl`, forwarded here by build.rs: called inside
/// `ibv_get_device_list` (under its lock, on this thread) to fill `list` with the devices to list,
/// over RDMA netlink as `ibdev_nl.c` would, but only for the device the listing is for. Where
/// netlink does not answer, `-ENOSYS`: libibverbs then lists devices from sysfs.
#[allow(dead_code)] // Unused where build.rs links another rdma-core and leaves discovery to sysfs.
fn find_sysfs_devs_nl(list: *mut c_void) -> c_int {
    let only = ONLY.with(|o| o.borrow().clone());
    let reachable = |node: &str| rustix::fs::stat(Path::new(nldev::CDEV_DIR).join(node)).is_ok();
    let wanted = |d: &&nldev::NlDevice| only.as_deref().is_none_or(|o| o == d.name);
    // A kept dump is reused; one made while a Discovery lives is kept.
    let devices = KEPT.with(|k| {
        let mut k = k.borrow_mut();
        match &*k {
            Kept::Dump(all) => return Ok(all.iter().filter(wanted).cloned().collect::<Vec<_>>()),
            Kept::Sysfs { .. } => {
                let why = "RDMA netlink did not answer this start's first listing";
                return Err(nldev::Error::from(crate::detect::rtnetlink::Error::Reply(why.into())));
            }
            _ => {}
        }
        let all = nldev::devices().inspect_err(|_| {
            if matches!(*k, Kept::Waiting) {
                *k = Kept::Sysfs { whole: false };
            }
        })?;
        let picked = all.iter().filter(wanted).cloned().collect();
        if matches!(*k, Kept::Waiting) {
            *k = Kept::Dump(all);
        }
        Ok(picked)
    });
    // SAFETY: ibv_get_sysfs_path returns libibverbs' static, NUL-terminated root path, set once
    // and never freed.
    let root = unsafe { CStr::from_ptr(ibv_get_sysfs_path()) }.to_bytes().to_vec();
    let found = match devices.and_then(|picked| nldev::uverbs_of(&picked, reachable)) {
        Ok(found) => found,
        Err(e) => {
            match only.as_deref().and_then(|o| nldev::from_sysfs(Path::new(OsStr::from_bytes(&root)), o, reachable)) {
                Some(f) => {
                    log::debug!("{e}; {} listed from its own sysfs files", f.device.name);
                    vec![f]
                }
                None => {
                    log::debug!("{e}; libibverbs lists devices from sysfs");
                    KEPT.with(|k| {
                        if let Kept::Sysfs { whole } = &mut *k.borrow_mut() {
                            *whole = true;
                        }
                    });
                    return -38;
                }
            }
        }
    };
    for f in &found {
        match sysfs_dev(f, &root) {
            // SAFETY: `list` is the `struct list_head` libibverbs handed in (its local list in
            // ibverbs_get_device_list, initialised, and touched only by this thread for the
            // length of this call); `dev` is a fresh calloc'd entry that the list now owns
            // (libibverbs frees each entry with free()).
            Some(dev) => unsafe { list_add(list.cast(), dev) },
            None => log::debug!("{}: does not fit libibverbs' names; not listed", f.device.name),
        }
    }
    0
}

/// One discovered device as libibverbs' entry (`ibdev_nl.c`'s fields), or `None` where a name or
/// path does not fit.
fn sysfs_dev(f: &nldev::Found, root: &[u8]) -> Option<NonNull<VerbsSysfsDev>> {
    let path = [root, b"/class/infiniband/", f.device.name.as_bytes()].concat();
    let fits = |b: &[u8], max: usize| b.len() < max && !b.contains(&0);
    let (name, node) = (f.device.name.as_bytes(), f.uverbs.name.as_bytes());
    if !fits(name, SYSFS_NAME_MAX) || !fits(node, SYSFS_NAME_MAX) || !fits(&path, SYSFS_PATH_MAX) {
        return None;
    }
    // -1: unknown (a device read from sysfs), as rdma-core's own sysfs scan leaves it.
    let ibdev_idx = match f.device.index {
        nldev::UNKNOWN_INDEX => -1,
        i => c_int::try_from(i).ok()?,
    };
    let abi_ver = u32::try_from(f.uverbs.abi).ok()?;
    // SAFETY: calloc returns NULL or zeroed memory aligned for any fundamental type, and all
    // zeroes is a valid VerbsSysfsDev (null pointers, zero numbers, empty strings).
    let dev = NonNull::new(unsafe { libc::calloc(1, std::mem::size_of::<VerbsSysfsDev>()) }.cast::<VerbsSysfsDev>())?;
    // SAFETY: `dev` is a fresh, initialised and unaliased allocation.
    let d = unsafe { &mut *dev.as_ptr() };
    // A GUID of 0 is unknown (a device read from sysfs): libibverbs reads it when asked.
    d.flags = if f.device.node_guid != 0 { VSYSFS_READ_NODE_GUID } else { 0 };
    copy_c(&mut d.sysfs_name, node);
    d.sysfs_cdev = rustix::fs::makedev(f.uverbs.major, f.uverbs.minor);
    copy_c(&mut d.ibdev_name, name);
    copy_c(&mut d.ibdev_path, &path);
    d.node_guid = f.device.node_guid;
    // RDMA_DRIVER_UNKNOWN (0) where the kernel does not say.
    d.driver_id = f.uverbs.driver_id.unwrap_or(0);
    d.node_type = node_type(f.device.node_type);
    d.ibdev_idx = ibdev_idx;
    d.num_ports = f.device.ports;
    d.abi_ver = abi_ver;
    Some(dev)
}

/// The kernel's `RDMA_NODE_*` as `enum ibv_node_type` (the same numbers, 1 to 7).
fn node_type(knode: u8) -> c_int {
    match knode {
        1..=7 => c_int::from(knode),
        _ => ffi::ibv_node_type::IBV_NODE_UNKNOWN,
    }
}

/// `src` into `dst` with a NUL after it (callers check that it fits).
fn copy_c(dst: &mut [c_char], src: &[u8]) {
    dst.iter_mut().zip(src).for_each(|(d, s)| *d = *s as c_char);
}

/// ccan's `list_add`: `dev` at the head of `head`.
///
/// # Safety
/// `head` points to a valid, initialised list head that no other thread touches; `dev` is a valid
/// entry in no list, which the list owns from now on.
unsafe fn list_add(head: *mut ListNode, dev: NonNull<VerbsSysfsDev>) {
    let n = ptr::addr_of_mut!((*dev.as_ptr()).entry);
    (*n).next = (*head).next;
    (*n).prev = head;
    (*(*head).next).prev = n;
    (*head).next = n;
}

pub const PORT_ACTIVE: u32 = ffi::ibv_port_state::IBV_PORT_ACTIVE;
/// `IBV_LINK_LAYER_ETHERNET`: RoCE, routed by GID.
pub const LINK_LAYER_ETHERNET: u8 = 2;
pub const WC_SUCCESS: u32 = ffi::ibv_wc_status::IBV_WC_SUCCESS;

/// What `ibv_query_port` says, as plain values.
#[derive(Debug, Clone, Copy)]
pub struct PortAttr {
    pub state: u32,
    pub link_layer: u8,
    pub lid: u16,
    /// `enum ibv_mtu`: 1 = 256 bytes ... 5 = 4096 bytes.
    pub active_mtu: u32,
    pub max_msg_sz: u32,
    pub(crate) gid_tbl_len: i32,
}

/// One work completion, as plain values.
#[derive(Debug, Clone, Copy, Default)]
pub struct Completion {
    pub wr_id: u64,
    pub status: u32,
    pub vendor_err: u32,
}

/// Where a queue pair's packets go: to an InfiniBand LID, or (RoCE) to the peer's GID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    Lid(u16),
    Gid { dgid: [u8; 16], sgid_index: u8 },
}

/// INIT -> RTR: the remote end of the connection.
#[derive(Debug, Clone, Copy)]
pub struct RtrAttrs {
    pub port: u8,
    /// `enum ibv_mtu` of the path: the smaller of both ends' active MTU.
    pub path_mtu: u32,
    pub dest_qpn: u32,
    pub rq_psn: u32,
    pub route: Route,
}

/// RTR -> RTS: our send side.
#[derive(Debug, Clone, Copy)]
pub struct RtsAttrs {
    pub sq_psn: u32,
    /// Local ACK timeout, 4.096 us * 2^timeout per try.
    pub timeout: u8,
    /// Tries before `IBV_WC_RETRY_EXC_ERR`.
    pub retry_cnt: u8,
}

/// Sizes of a queue pair made by [`Qp::create_rc_with`].
#[derive(Debug, Clone, Copy)]
pub struct QpCaps {
    pub send_wr: u32,
    pub recv_wr: u32,
    /// Bytes a SEND may carry inline (0: none).
    pub inline: u32,
}

/// One send-queue work request for [`Qp::post`].
#[derive(Debug, Clone, Copy)]
pub struct SendWr {
    pub wr_id: u64,
    pub offset: usize,
    pub len: u32,
    /// `None`: a SEND; otherwise an RDMA WRITE to (address, rkey).
    pub remote: Option<(u64, u32)>,
    pub signaled: bool,
    /// Copy the bytes into the work request (small SENDs; needs the QP's inline size).
    pub inline: bool,
}

/// Verbs calls that return an errno (0 on success); some providers return `-errno`, or `-1` with
/// `errno` set.
fn check_ret(ret: c_int) -> io::Result<()> {
    match ret {
        0 => Ok(()),
        -1 => Err(io::Error::last_os_error()),
        r => Err(io::Error::from_raw_os_error(r.abs())),
    }
}

static REGISTER_PROVIDERS: Once = Once::new();

/// The array `ibv_get_device_list` returns; the device pointers in it are valid while it lives.
pub(crate) struct DeviceList {
    list: NonNull<*mut ffi::ibv_device>,
    len: usize,
}

impl DeviceList {
    /// Every device libibverbs lists, or `only` alone if it lists it (then only it is discovered).
    pub(crate) fn get(only: Option<&str>) -> Result<Self, VerbsError> {
        // In a static link no provider is loaded from disk; see build.rs.
        REGISTER_PROVIDERS.call_once(providers::register_static_providers);
        // Discovery on this thread is for `only` until the listing returns (it cannot unwind: a
        // panic in the discovery callback aborts at its `extern "C"` edge).
        ONLY.with(|o| *o.borrow_mut() = only.map(str::to_owned));
        let mut n: c_int = 0;
        // SAFETY: `n` is a valid place for the count. The returned array is owned by this
        // `DeviceList` and released once, in Drop, with ibv_free_device_list.
        let list = unsafe { ffi::ibv_get_device_list(&mut n) };
        let got = match NonNull::new(list) {
            // NULL with errno set: ENOSYS when the kernel has no uverbs, ENOMEM. Read before the
            // filter's string is freed below.
            None => Err(VerbsError::DeviceList { errno: errno_text(&io::Error::last_os_error()) }),
            Some(list) => Ok(DeviceList { list, len: usize::try_from(n).unwrap_or(0) }),
        };
        ONLY.with(|o| o.borrow_mut().take());
        got
    }

    fn devices(&self) -> impl Iterator<Item = *mut ffi::ibv_device> + '_ {
        // SAFETY: ibv_get_device_list returned an array of `len` device pointers (NULL
        // terminated after them) that stays valid until ibv_free_device_list in our Drop; `self`
        // is borrowed for as long as the iterator lives.
        (0..self.len).map(move |i| unsafe { *self.list.as_ptr().add(i) })
    }

    pub fn names(&self) -> Vec<String> {
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

/// An ibverbs object, freed exactly once in Drop by `free`, the call that undoes the one that made
/// it. Its owner type's borrows (a Pd borrows its Context, an Mr its Pd, a Qp its Pd and Cq) drop
/// every object made from it first.
struct Owned<T> {
    ptr: NonNull<T>,
    free: unsafe extern "C" fn(*mut T) -> c_int,
}

impl<T> Owned<T> {
    /// What a create call returned; NULL (with errno set) is its failure.
    ///
    /// # Safety
    /// A non-NULL `ptr` is a live object that `free` destroys and that nothing else frees.
    unsafe fn new(ptr: *mut T, free: unsafe extern "C" fn(*mut T) -> c_int) -> io::Result<Self> {
        Ok(Owned { ptr: NonNull::new(ptr).ok_or_else(io::Error::last_os_error)?, free })
    }

    fn as_ptr(&self) -> *mut T {
        self.ptr.as_ptr()
    }
}

impl<T> Drop for Owned<T> {
    fn drop(&mut self) {
        // SAFETY: `ptr` is live and `free` destroys it (Owned::new's contract); it is freed only
        // here, once, after every object made from it (see the type's header). Destroying a QP
        // stops any DMA it still had queued; see Mr for the buffer's order.
        unsafe { (self.free)(self.ptr.as_ptr()) };
    }
}

/// An open device (`ibv_open_device`), closed in Drop.
pub struct Context {
    ctx: Owned<ffi::ibv_context>,
    name: String,
}

impl Context {
    /// Opens `name` if libibverbs lists it; a listing failure reads as "not listed".
    pub fn open(name: &str) -> Result<Self, VerbsError> {
        let list = DeviceList::get(Some(name)).map_err(|_| VerbsError::NotListed(name.to_owned()))?;
        Self::open_in(&list, name)
    }

    /// Opens `name` from a list already read.
    pub(crate) fn open_in(list: &DeviceList, name: &str) -> Result<Self, VerbsError> {
        let dev = list.find(name).ok_or_else(|| VerbsError::NotListed(name.to_owned()))?;
        // SAFETY: `dev` is an entry of `list`, which is alive for this call. The context
        // returned is owned by this `Context` and closed once (ibv_close_device); it does not
        // depend on the list staying alive.
        let ctx = unsafe { Owned::new(ffi::ibv_open_device(dev), ffi::ibv_close_device) }
            .map_err(|e| VerbsError::Open { device: name.to_owned(), errno: errno_text(&e) })?;
        Ok(Context { ctx, name: name.to_owned() })
    }

    pub fn query_port(&self, port: u8) -> Result<PortAttr, VerbsError> {
        // SAFETY: ibv_port_attr is plain C data (integers only); all-zero is a valid value.
        let mut attr: ffi::ibv_port_attr = unsafe { std::mem::zeroed() };
        // SAFETY: `ctx` is an open context owned by self; `attr` is a writable ibv_port_attr.
        // The inline ___ibv_query_port passes sizeof(attr) to the provider, so a newer struct
        // is never overrun.
        let ret = unsafe { ffi::___ibv_query_port(self.ctx.as_ptr(), port, &mut attr) };
        check_ret(ret).map_err(|e| VerbsError::QueryPort { device: self.name.clone(), port, errno: errno_text(&e) })?;
        Ok(PortAttr {
            state: attr.state,
            link_layer: attr.link_layer,
            lid: attr.lid,
            active_mtu: attr.active_mtu,
            max_msg_sz: attr.max_msg_sz,
            gid_tbl_len: attr.gid_tbl_len,
        })
    }

    pub fn query_gid(&self, port: u8, index: u32) -> Result<[u8; 16], VerbsError> {
        let err = |e: io::Error| VerbsError::QueryGid { device: self.name.clone(), port, index, errno: errno_text(&e) };
        let idx = c_int::try_from(index).map_err(|_| err(io::Error::from_raw_os_error(22)))?;
        let mut gid = ffi::ibv_gid { raw: [0; 16] };
        // SAFETY: `ctx` is an open context owned by self; `gid` is a writable 16-byte union.
        let ret = unsafe { ffi::ibv_query_gid(self.ctx.as_ptr(), port, idx, &mut gid) };
        check_ret(ret).map_err(err)?;
        // SAFETY: every bit pattern of the union is a valid `[u8; 16]`.
        Ok(unsafe { gid.raw })
    }

    /// How many physical ports the device has (`ibv_query_device`).
    pub(crate) fn port_count(&self) -> Result<u8, VerbsError> {
        // SAFETY: ibv_device_attr is plain C data (integers and a char array); all-zero is valid.
        let mut attr: ffi::ibv_device_attr = unsafe { std::mem::zeroed() };
        // SAFETY: `ctx` is an open context owned by self; `attr` is a writable ibv_device_attr
        // of the size this libibverbs was built with (the same headers), which it fills and
        // does not keep.
        let ret = unsafe { ffi::ibv_query_device(self.ctx.as_ptr(), &mut attr) };
        check_ret(ret).map_err(|e| VerbsError::QueryDevice { device: self.name.clone(), errno: errno_text(&e) })?;
        Ok(attr.phys_port_cnt)
    }

    /// Every non-empty GID entry of every port in one call (one ioctl from kernel 5.9); more than
    /// `max_entries` valid entries is an error, not a truncated answer.
    pub(crate) fn query_gid_table(&self, max_entries: usize) -> Result<Vec<Raw>, VerbsError> {
        let err = |e: io::Error| VerbsError::QueryGidTable { device: self.name.clone(), errno: errno_text(&e) };
        // SAFETY: ibv_gid_entry is plain C data (a 16-byte union and integers); all-zero is valid.
        let zero = || -> ffi::ibv_gid_entry { unsafe { std::mem::zeroed() } };
        let mut entries: Vec<ffi::ibv_gid_entry> = (0..max_entries).map(|_| zero()).collect();
        // SAFETY: `ctx` is an open context owned by self. `entries` is an initialised, writable
        // array of `max_entries` elements of `entry_size` bytes each (a Vec's pointer is valid
        // and aligned even when empty), which the library fills up to `max_entries` and does not
        // keep; flags 0 is the only value verbs.h defines.
        let n = unsafe {
            _ibv_query_gid_table(
                self.ctx.as_ptr(),
                entries.as_mut_ptr(),
                max_entries,
                0,
                std::mem::size_of::<ffi::ibv_gid_entry>(),
            )
        };
        // A negated errno, or EOVERFLOW (75) where more came than asked.
        let n = usize::try_from(n)
            .map_err(|_| n.checked_neg().and_then(|e| i32::try_from(e).ok()).unwrap_or(22))
            .and_then(|n| if n <= max_entries { Ok(n) } else { Err(75) })
            .map_err(|errno| err(io::Error::from_raw_os_error(errno)))?;
        Ok(entries[..n]
            .iter()
            .map(|e| Raw {
                // SAFETY: every bit pattern of the union is a valid `[u8; 16]`.
                gid: unsafe { e.gid.raw },
                index: e.gid_index,
                port: e.port_num,
                gid_type: e.gid_type,
                ifindex: e.ndev_ifindex,
            })
            .collect())
    }

    /// The partition key at `index` of `port`, in host order (`ibv_query_pkey`).
    pub fn query_pkey(&self, port: u8, index: u16) -> io::Result<u16> {
        let mut pkey: ffi::__be16 = 0;
        // SAFETY: `ctx` is an open context owned by self; `pkey` is a writable u16 the library
        // fills (network order) and does not keep.
        let ret = unsafe { ffi::ibv_query_pkey(self.ctx.as_ptr(), port, c_int::from(index), &mut pkey) };
        check_ret(ret)?;
        Ok(u16::from_be(pkey))
    }
}

/// A protection domain, deallocated in Drop; cannot outlive its context.
pub struct Pd<'c> {
    pd: Owned<ffi::ibv_pd>,
    _ctx: PhantomData<&'c Context>,
}

impl<'c> Pd<'c> {
    pub fn alloc(ctx: &'c Context) -> io::Result<Self> {
        // SAFETY: `ctx` is an open context that outlives the returned Pd ('c). The PD is owned
        // by the Pd and deallocated once (ibv_dealloc_pd).
        let pd = unsafe { Owned::new(ffi::ibv_alloc_pd(ctx.ctx.as_ptr()), ffi::ibv_dealloc_pd) }?;
        Ok(Pd { pd, _ctx: PhantomData })
    }
}

/// Page-aligned, zeroed memory for the adapter. Held as a raw pointer, never a reference, while
/// registered: the device writes it behind the compiler's back.
pub struct DmaBuf {
    ptr: NonNull<u8>,
    layout: Layout,
}

impl DmaBuf {
    pub fn new(len: usize) -> io::Result<Self> {
        let layout = Layout::from_size_align(len.max(1), 4096).map_err(|_| io::Error::from_raw_os_error(22))?;
        // SAFETY: `layout` has a non-zero size. The memory is freed once in Drop with the same
        // layout.
        let ptr = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(ptr).ok_or_else(|| io::Error::from_raw_os_error(12))?;
        Ok(DmaBuf { ptr, layout })
    }

    /// Whether `len` bytes at `offset` lie inside the buffer.
    fn holds(&self, offset: usize, len: usize) -> bool {
        offset.checked_add(len).is_some_and(|end| end <= self.layout.size())
    }

    pub(crate) fn addr(&self, offset: usize) -> u64 {
        self.ptr.as_ptr() as u64 + offset as u64
    }

    /// Copies out `len` bytes at `offset`; only called when no work request on it is outstanding.
    pub fn read(&self, offset: usize, len: usize) -> Vec<u8> {
        assert!(self.holds(offset, len));
        let mut out = vec![0u8; len];
        // SAFETY: the range is inside the allocation (asserted above); `out` is a distinct
        // allocation of `len` bytes. No DMA into the range is in flight (see above).
        unsafe { ptr::copy_nonoverlapping(self.ptr.as_ptr().add(offset), out.as_mut_ptr(), len) };
        out
    }

    /// Copies `data` in at `offset`, before any work request uses the range.
    pub fn write(&mut self, offset: usize, data: &[u8]) {
        assert!(self.holds(offset, data.len()));
        // SAFETY: the range is inside the allocation (asserted above); `data` is a different
        // allocation. No DMA on the range is in flight when this is called.
        unsafe { ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.as_ptr().add(offset), data.len()) };
    }
}

impl Drop for DmaBuf {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from alloc_zeroed with `layout` and is freed only here. The MR
        // that registered it owns this DmaBuf and is deregistered first (Mr's field order).
        unsafe { alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

/// What a memory region and a queue pair allow: local write, remote write and read.
const ACCESS: ffi::ibv_access_flags = ffi::ibv_access_flags(
    ffi::ibv_access_flags::IBV_ACCESS_LOCAL_WRITE.0
        | ffi::ibv_access_flags::IBV_ACCESS_REMOTE_WRITE.0
        | ffi::ibv_access_flags::IBV_ACCESS_REMOTE_READ.0,
);

/// A registered memory region that owns its buffer. Fields drop in order: `mr` is deregistered
/// before `buf` is freed, so that once ibv_dereg_mr returns the adapter can no longer reach `buf`
/// through it (a work request still naming it would complete in error).
pub struct Mr<'p> {
    mr: Owned<ffi::ibv_mr>,
    buf: DmaBuf,
    _pd: PhantomData<&'p Pd<'p>>,
}

impl<'p> Mr<'p> {
    pub fn register(pd: &'p Pd<'_>, buf: DmaBuf) -> io::Result<Self> {
        // SAFETY: `pd` outlives the Mr ('p). `buf` is a live allocation of `layout.size()` bytes
        // that the Mr takes ownership of, so it stays allocated until after ibv_dereg_mr (the
        // field order). None of these flags is an optional-access flag, so the exported
        // ibv_reg_mr is what the verbs.h macro would pick.
        let mr = unsafe {
            let mr = ffi::ibv_reg_mr(pd.pd.as_ptr(), buf.ptr.as_ptr().cast(), buf.layout.size(), ACCESS.0 as c_int);
            Owned::new(mr, ffi::ibv_dereg_mr)
        }?;
        Ok(Mr { mr, buf, _pd: PhantomData })
    }

    fn lkey(&self) -> u32 {
        // SAFETY: `mr` is a registered MR owned by self; lkey is set once by ibv_reg_mr.
        unsafe { (*self.mr.as_ptr()).lkey }
    }

    pub fn rkey(&self) -> u32 {
        // SAFETY: as for lkey.
        unsafe { (*self.mr.as_ptr()).rkey }
    }

    /// The address the adapter (and a peer holding the rkey) uses for `offset` in the buffer.
    pub fn addr(&self, offset: usize) -> u64 {
        self.buf.addr(offset)
    }

    /// Copies out `len` bytes at `offset`; see [`DmaBuf::read`] for when that is allowed.
    pub fn read(&self, offset: usize, len: usize) -> Vec<u8> {
        self.buf.read(offset, len)
    }
}

/// A completion queue without a completion channel: we only ever poll it.
pub struct Cq<'c> {
    cq: Owned<ffi::ibv_cq>,
    _ctx: PhantomData<&'c Context>,
}

impl<'c> Cq<'c> {
    pub fn create(ctx: &'c Context, entries: c_int) -> io::Result<Self> {
        // SAFETY: `ctx` is open and outlives the Cq ('c). No channel or user context pointer is
        // passed. The CQ is destroyed once (ibv_destroy_cq).
        let cq = unsafe {
            let cq = ffi::ibv_create_cq(ctx.ctx.as_ptr(), entries, ptr::null_mut(), ptr::null_mut(), 0);
            Owned::new(cq, ffi::ibv_destroy_cq)
        }?;
        Ok(Cq { cq, _ctx: PhantomData })
    }

    /// Polls up to `out.len()` completions (at most 32) without waiting; returns how many.
    pub fn poll_many(&self, out: &mut [Completion]) -> io::Result<usize> {
        // SAFETY: ibv_wc is plain C data; all-zero is a valid value.
        let mut wcs: [ffi::ibv_wc; 32] = unsafe { std::mem::zeroed() };
        let want = c_int::try_from(out.len().min(wcs.len())).unwrap_or(1);
        // SAFETY: `cq` is a live CQ owned by self; `wcs` has room for `want` <= 32 entries.
        let n = unsafe { ffi::ibv_poll_cq(self.cq.as_ptr(), want, wcs.as_mut_ptr()) };
        let n = usize::try_from(n).map_err(|_| io::Error::from_raw_os_error(n.abs()))?;
        for (o, wc) in out.iter_mut().zip(&wcs[..n]) {
            *o = Completion { wr_id: wc.wr_id, status: wc.status, vendor_err: wc.vendor_err };
        }
        Ok(n)
    }
}

/// A reliable-connected queue pair, destroyed in Drop before its CQ and PD.
pub struct Qp<'a> {
    qp: Owned<ffi::ibv_qp>,
    _deps: PhantomData<(&'a Pd<'a>, &'a Cq<'a>)>,
}

impl<'a> Qp<'a> {
    /// A queue pair whose sends are signaled only when asked, with room for `caps`; returned with the
    /// inline size the provider granted.
    pub fn create_rc_with(pd: &'a Pd<'_>, cq: &'a Cq<'_>, caps: QpCaps) -> io::Result<(Self, u32)> {
        // SAFETY: ibv_qp_init_attr is plain C data (pointers and integers); zero is valid.
        let mut init: ffi::ibv_qp_init_attr = unsafe { std::mem::zeroed() };
        init.send_cq = cq.cq.as_ptr();
        init.recv_cq = cq.cq.as_ptr();
        init.qp_type = ffi::ibv_qp_type::IBV_QPT_RC;
        init.sq_sig_all = 0;
        init.cap.max_send_wr = caps.send_wr;
        init.cap.max_recv_wr = caps.recv_wr;
        init.cap.max_send_sge = 1;
        init.cap.max_recv_sge = 1;
        init.cap.max_inline_data = caps.inline;
        // SAFETY: `pd` and `cq` are live and outlive the Qp ('a); `init` is a valid
        // ibv_qp_init_attr that libibverbs only reads (and updates cap in place). The QP is
        // destroyed once (ibv_destroy_qp).
        let qp = unsafe { Owned::new(ffi::ibv_create_qp(pd.pd.as_ptr(), &mut init), ffi::ibv_destroy_qp) }?;
        Ok((Qp { qp, _deps: PhantomData }, init.cap.max_inline_data))
    }

    /// Posts one SEND (`remote == None`) or RDMA WRITE as `w` describes.
    pub fn post(&self, mr: &Mr<'_>, w: &SendWr) -> io::Result<()> {
        let mut sge = ffi::ibv_sge { addr: mr.buf.addr(w.offset), length: w.len, lkey: mr.lkey() };
        // SAFETY: ibv_send_wr is plain C data; zero is valid.
        let mut wr: ffi::ibv_send_wr = unsafe { std::mem::zeroed() };
        wr.wr_id = w.wr_id;
        wr.sg_list = &mut sge;
        wr.num_sge = 1;
        let flag = |on: bool, f: ffi::ibv_send_flags| if on { f.0 } else { 0 };
        wr.send_flags = flag(w.signaled, ffi::ibv_send_flags::IBV_SEND_SIGNALED)
            | flag(w.inline, ffi::ibv_send_flags::IBV_SEND_INLINE);
        match w.remote {
            None => wr.opcode = ffi::ibv_wr_opcode::IBV_WR_SEND,
            Some((remote_addr, rkey)) => {
                wr.opcode = ffi::ibv_wr_opcode::IBV_WR_RDMA_WRITE;
                wr.wr.rdma = ffi::rdma_t { remote_addr, rkey };
            }
        }
        if !mr.buf.holds(w.offset, w.len as usize) {
            return Err(io::Error::from_raw_os_error(22));
        }
        let mut bad: *mut ffi::ibv_send_wr = ptr::null_mut();
        // SAFETY: `qp` is live, `wr`/`sge` are valid for the call and copied by the provider
        // (inline data is copied out of the buffer before it returns), and the range they name
        // lies inside `mr`'s buffer (checked above), which outlives any DMA (see post_recv).
        let ret = unsafe { ffi::ibv_post_send(self.qp.as_ptr(), &mut wr, &mut bad) };
        check_ret(ret)
    }

    pub fn qp_num(&self) -> u32 {
        // SAFETY: `qp` is a live QP owned by self; qp_num is fixed at creation.
        unsafe { (*self.qp.as_ptr()).qp_num }
    }

    /// `ibv_modify_qp` with a zeroed attribute that `set` fills: every field `mask` names.
    fn modify(&self, mask: ffi::ibv_qp_attr_mask, set: impl FnOnce(&mut ffi::ibv_qp_attr)) -> io::Result<()> {
        // SAFETY: ibv_qp_attr is plain C data (integers and an address vector of integers); all-zero
        // is a valid value.
        let mut attr: ffi::ibv_qp_attr = unsafe { std::mem::zeroed() };
        set(&mut attr);
        // SAFETY: `qp` is live; `attr` is a valid ibv_qp_attr with every field named in `mask`
        // set by `set`. libibverbs does not keep the pointer.
        let ret = unsafe { ffi::ibv_modify_qp(self.qp.as_ptr(), &mut attr, mask.0 as c_int) };
        check_ret(ret)
    }

    /// RESET -> INIT on `port`, pkey index 0, remote write/read allowed.
    pub fn to_init(&self, port: u8) -> io::Result<()> {
        use ffi::ibv_qp_attr_mask as M;
        self.modify(M::IBV_QP_STATE | M::IBV_QP_PKEY_INDEX | M::IBV_QP_PORT | M::IBV_QP_ACCESS_FLAGS, |a| {
            a.qp_state = ffi::ibv_qp_state::IBV_QPS_INIT;
            a.pkey_index = 0;
            a.port_num = port;
            a.qp_access_flags = ACCESS.0;
        })
    }

    /// INIT -> RTR towards the peer `r` describes.
    pub fn to_rtr(&self, r: &RtrAttrs) -> io::Result<()> {
        use ffi::ibv_qp_attr_mask as M;
        let mask = M::IBV_QP_STATE
            | M::IBV_QP_AV
            | M::IBV_QP_PATH_MTU
            | M::IBV_QP_DEST_QPN
            | M::IBV_QP_RQ_PSN
            | M::IBV_QP_MAX_DEST_RD_ATOMIC
            | M::IBV_QP_MIN_RNR_TIMER;
        self.modify(mask, |a| {
            a.qp_state = ffi::ibv_qp_state::IBV_QPS_RTR;
            a.path_mtu = r.path_mtu;
            a.dest_qp_num = r.dest_qpn;
            a.rq_psn = r.rq_psn;
            a.max_dest_rd_atomic = 1;
            a.min_rnr_timer = 12;
            a.ah_attr.port_num = r.port;
            match r.route {
                Route::Lid(lid) => a.ah_attr.dlid = lid,
                Route::Gid { dgid, sgid_index } => {
                    a.ah_attr.is_global = 1;
                    a.ah_attr.grh.dgid = ffi::ibv_gid { raw: dgid };
                    a.ah_attr.grh.sgid_index = sgid_index;
                    a.ah_attr.grh.hop_limit = 64;
                }
            }
        })
    }

    /// RTR -> RTS.
    pub fn to_rts(&self, r: &RtsAttrs) -> io::Result<()> {
        use ffi::ibv_qp_attr_mask as M;
        let mask = M::IBV_QP_STATE
            | M::IBV_QP_TIMEOUT
            | M::IBV_QP_RETRY_CNT
            | M::IBV_QP_RNR_RETRY
            | M::IBV_QP_SQ_PSN
            | M::IBV_QP_MAX_QP_RD_ATOMIC;
        self.modify(mask, |a| {
            a.qp_state = ffi::ibv_qp_state::IBV_QPS_RTS;
            a.sq_psn = r.sq_psn;
            a.timeout = r.timeout;
            a.retry_cnt = r.retry_cnt;
            a.rnr_retry = 7;
            a.max_rd_atomic = 1;
        })
    }

    pub fn post_recv(&self, wr_id: u64, mr: &Mr<'_>, offset: usize, len: u32) -> io::Result<()> {
        let mut sge = ffi::ibv_sge { addr: mr.buf.addr(offset), length: len, lkey: mr.lkey() };
        let mut wr = ffi::ibv_recv_wr { wr_id, next: ptr::null_mut(), sg_list: &mut sge, num_sge: 1 };
        let mut bad: *mut ffi::ibv_recv_wr = ptr::null_mut();
        // SAFETY: `qp` is live; `wr` and `sge` are valid for this call (the provider copies
        // them into its queue before returning). The SGE names `mr`'s buffer by address and
        // lkey: the adapter reaches it only through the MR, and the buffer is freed only after
        // ibv_dereg_mr (Mr's field order), so DMA cannot land in freed memory.
        let ret = unsafe { ffi::ibv_post_recv(self.qp.as_ptr(), &mut wr, &mut bad) };
        check_ret(ret)
    }
}

#[cfg(test)]
mod tests {
    use super::super::status::{port_state_name, wc_status_name};
    use super::*;

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
        use super::super::status::wc;
        assert_eq!(wc::LOC_PROT_ERR, S::IBV_WC_LOC_PROT_ERR);
        assert_eq!(wc::LOC_ACCESS_ERR, S::IBV_WC_LOC_ACCESS_ERR);
        assert_eq!(wc::REM_ACCESS_ERR, S::IBV_WC_REM_ACCESS_ERR);
        assert_eq!(wc::RETRY_EXC_ERR, S::IBV_WC_RETRY_EXC_ERR);
        assert_eq!(wc::RNR_RETRY_EXC_ERR, S::IBV_WC_RNR_RETRY_EXC_ERR);
    }

    #[test]
    fn port_state_numbers_match_verbs_h() {
        use ffi::ibv_port_state as P;
        assert_eq!(port_state_name(P::IBV_PORT_DOWN), "DOWN");
        assert_eq!(port_state_name(P::IBV_PORT_ACTIVE), "ACTIVE");
        assert_eq!(port_state_name(P::IBV_PORT_ACTIVE_DEFER), "ACTIVE_DEFER");
        assert_eq!(PORT_ACTIVE, 4);
        assert_eq!(ffi::ibv_port_state::IBV_PORT_ACTIVE, 4);
    }

    #[test]
    fn the_gpu_node_providers_are_linked_and_no_others() {
        let mut linked = STATIC_PROVIDERS.to_vec();
        linked.sort_unstable();
        assert_eq!(linked, ["bnxt_re", "efa", "erdma", "irdma", "mlx5", "rxe"]);
    }

    /// `struct verbs_sysfs_dev`'s offsets and size in rdma-core v44 on x86_64 and aarch64 alike,
    /// as `cc` gives them for `vendor/verbs_sysfs_dev.h`.
    const V44_LAYOUT: [(&str, usize); 17] = [
        ("entry", 0),
        ("provider_data", 16),
        ("match", 24),
        ("flags", 32),
        ("sysfs_name", 36),
        ("sysfs_cdev", 104),
        ("ibdev_name", 112),
        ("ibdev_path", 176),
        ("modalias", 432),
        ("node_guid", 944),
        ("driver_id", 952),
        ("node_type", 956),
        ("ibdev_idx", 960),
        ("num_ports", 964),
        ("abi_ver", 968),
        ("time_created", 976),
        ("size", 992),
    ];

    #[test]
    fn the_discovery_entry_has_rdma_core_v44s_layout() {
        use std::mem::offset_of;
        let ours = [
            offset_of!(VerbsSysfsDev, entry),
            offset_of!(VerbsSysfsDev, provider_data),
            offset_of!(VerbsSysfsDev, matched),
            offset_of!(VerbsSysfsDev, flags),
            offset_of!(VerbsSysfsDev, sysfs_name),
            offset_of!(VerbsSysfsDev, sysfs_cdev),
            offset_of!(VerbsSysfsDev, ibdev_name),
            offset_of!(VerbsSysfsDev, ibdev_path),
            offset_of!(VerbsSysfsDev, modalias),
            offset_of!(VerbsSysfsDev, node_guid),
            offset_of!(VerbsSysfsDev, driver_id),
            offset_of!(VerbsSysfsDev, node_type),
            offset_of!(VerbsSysfsDev, ibdev_idx),
            offset_of!(VerbsSysfsDev, num_ports),
            offset_of!(VerbsSysfsDev, abi_ver),
            offset_of!(VerbsSysfsDev, time_created),
            std::mem::size_of::<VerbsSysfsDev>(),
        ];
        for ((field, want), got) in V44_LAYOUT.iter().zip(ours) {
            assert_eq!(got, *want, "{field}");
        }
        assert_eq!(std::mem::align_of::<VerbsSysfsDev>(), 8);
    }

    /// The constants above are the vendored header's, as the C compiler lays it out here.
    #[test]
    fn the_vendored_header_lays_out_as_the_constants_say() {
        let dir = std::env::temp_dir().join(format!("nccl-wrap-layout-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let fields: String = V44_LAYOUT
            .iter()
            .map(|(f, _)| match *f {
                "size" => "printf(\"size %zu\\n\", sizeof(struct verbs_sysfs_dev));\n".to_string(),
                f => format!("printf(\"{f} %zu\\n\", offsetof(struct verbs_sysfs_dev, {f}));\n"),
            })
            .collect();
        let src = format!(
            "#include <stdio.h>\n#include <stddef.h>\n#include \"{}/src/verbs/vendor/verbs_sysfs_dev.h\"\nint main(void) {{\n{fields}return 0;\n}}\n",
            env!("CARGO_MANIFEST_DIR")
        );
        std::fs::write(dir.join("layout.c"), src).expect("write");
        let built =
            std::process::Command::new("cc").arg("-o").arg(dir.join("layout")).arg(dir.join("layout.c")).status();
        let out = built
            .ok()
            .filter(|s| s.success())
            .and_then(|_| std::process::Command::new(dir.join("layout")).output().ok());
        std::fs::remove_dir_all(&dir).ok();
        let out = out.expect("cc compiles and runs the vendored header (needs a C compiler and libibverbs-dev)");
        let printed: Vec<(String, usize)> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split_once(' ').and_then(|(f, n)| Some((f.to_string(), n.parse().ok()?))))
            .collect();
        let want: Vec<(String, usize)> = V44_LAYOUT.iter().map(|(f, n)| (f.to_string(), *n)).collect();
        assert_eq!(printed, want);
    }

    fn found(name: &str, index: u32, node: &str, minor: u32) -> nldev::Found {
        nldev::Found {
            device: nldev::NlDevice { index, name: name.into(), node_type: 1, node_guid: 0x1122, ports: 2 },
            uverbs: nldev::Uverbs { name: node.into(), abi: 1, major: 231, minor, driver_id: Some(1) },
        }
    }

    fn c_text(b: &[c_char]) -> String {
        let end = b.iter().position(|&c| c == 0).expect("NUL");
        b[..end].iter().map(|&c| c as u8 as char).collect()
    }

    #[test]
    fn discovered_devices_become_libibverbs_list_entries() {
        let mut head = ListNode { next: ptr::null_mut(), prev: ptr::null_mut() };
        let h: *mut ListNode = &mut head;
        head.next = h;
        head.prev = h;
        for f in [found("mlx5_3", 3, "uverbs3", 195), found("mlx5_10", 10, "uverbs10", 202)] {
            let dev = sysfs_dev(&f, b"/sys").expect("fits");
            // SAFETY: `h` is this test's initialised list head; `dev` is in no list.
            unsafe { list_add(h, dev) };
        }
        let mut seen = Vec::new();
        let mut at = head.next;
        while at != h {
            // SAFETY: every node after the head is the `entry` (first field) of an entry added above.
            let d = unsafe { &*at.cast::<VerbsSysfsDev>() };
            // SAFETY: as above; the neighbours point back.
            unsafe { assert_eq!((*d.entry.next).prev, at) };
            seen.push((
                c_text(&d.ibdev_name),
                c_text(&d.sysfs_name),
                c_text(&d.ibdev_path),
                d.sysfs_cdev,
                d.ibdev_idx,
                d.num_ports,
                d.node_type,
                d.flags,
            ));
            assert!(d.provider_data.is_null() && d.matched.is_null() && d.modalias[0] == 0);
            at = d.entry.next;
        }
        // list_add puts each at the head: the last added comes first, as libibverbs' own does.
        assert_eq!(
            seen,
            vec![
                (
                    "mlx5_10".into(),
                    "uverbs10".into(),
                    "/sys/class/infiniband/mlx5_10".into(),
                    rustix::fs::makedev(231, 202),
                    10,
                    2,
                    ffi::ibv_node_type::IBV_NODE_CA,
                    VSYSFS_READ_NODE_GUID
                ),
                (
                    "mlx5_3".into(),
                    "uverbs3".into(),
                    "/sys/class/infiniband/mlx5_3".into(),
                    rustix::fs::makedev(231, 195),
                    3,
                    2,
                    ffi::ibv_node_type::IBV_NODE_CA,
                    VSYSFS_READ_NODE_GUID
                ),
            ]
        );
        let mut at = head.next;
        while at != h {
            // SAFETY: each entry came from calloc in sysfs_dev and is freed once, after reading its next.
            let next = unsafe { (*at).next };
            // SAFETY: as above.
            unsafe { libc::free(at.cast()) };
            at = next;
        }
    }

    #[test]
    fn a_device_whose_names_do_not_fit_is_not_made_an_entry() {
        assert!(sysfs_dev(&found("mlx5_0", 0, "uverbs0", 192), &[b'x'; 240]).is_none(), "path over 256 bytes");
        assert!(sysfs_dev(&found("mlx5_0", 1 << 31, "uverbs0", 192), b"/sys").is_none(), "index past an int");
        let unknown = sysfs_dev(&found("mlx5_0", nldev::UNKNOWN_INDEX, "uverbs0", 192), b"/sys").expect("entry");
        // SAFETY: `unknown` is the fresh calloc'd entry sysfs_dev returned, in no list; read, then freed once.
        let idx = unsafe { (*unknown.as_ptr()).ibdev_idx };
        // SAFETY: as above; nothing else holds the pointer.
        unsafe { libc::free(unknown.as_ptr().cast()) };
        assert_eq!(idx, -1, "a device read from sysfs: its index unknown, as rdma-core's scan leaves it");
        let mut long = found("mlx5_0", 0, "uverbs0", 192);
        long.device.name = "d".repeat(64);
        assert!(sysfs_dev(&long, b"/sys").is_none(), "name of 64 bytes leaves no room for its NUL");
        assert_eq!(node_type(4), ffi::ibv_node_type::IBV_NODE_RNIC);
        assert_eq!(node_type(0), ffi::ibv_node_type::IBV_NODE_UNKNOWN);
        assert_eq!(node_type(200), ffi::ibv_node_type::IBV_NODE_UNKNOWN);
    }

    #[test]
    fn the_parts_left_out_answer_as_rdma_core_without_them_would() {
        let names: Vec<&str> = stubs::STUBS.iter().map(|s| s.0).collect();
        // Debian's rdma-core has all three parts; another build may lack one, and then has no stubs for it.
        assert!(names.is_empty() || names.iter().any(|n| n.ends_with("neigh_init_resources")), "{names:?}");
        // Discovery is forwarded to nccl-wrap's own where build.rs knows the rdma-core (Debian 12's
        // 44), and stubbed (libibverbs scans sysfs) where it does not.
        let stubbed = names.iter().any(|n| n.ends_with("find_sysfs_devs_nl"));
        assert_eq!(stubbed, !stubs::DISCOVERY && !names.is_empty(), "{names:?}");
        for (name, ret, stub) in stubs::STUBS {
            if name.contains("neigh") {
                assert_eq!(ret, -38, "{name}: -ENOSYS");
            }
            if name.ends_with("is_mlx5_vfio_dev") {
                assert_eq!(ret, 0, "{name}: no device is a VFIO one");
            }
            if name.ends_with("get_copy_on_fork") {
                assert_eq!(ret, 0, "{name}: copy-on-fork not known (false)");
            }
            assert_eq!(stub(), ret, "{name}");
        }
    }
}
