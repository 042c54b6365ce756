//! The devices of one start, opened once and lazily: whole GID tables for detection (one
//! `ibv_query_gid_table` a device, kernel 5.9+, bounded before and checked after), then the probe's
//! port checks. A failure is a debug line and `None` (sysfs is read); never held while the job runs.

use std::cell::{OnceCell, RefCell};
use std::collections::{BTreeMap, BTreeSet};

use super::ffi::{Context, DeviceList, Discovery, STATIC_PROVIDERS};
use super::ibverbs::{port_of, IbVerbs};
use super::probe::{SelftestOptions, Verbs, VerbsError};
use crate::detect::gid_source::{self, TableSource, Whole};
use crate::detect::port::{SelftestResult, VerbsPort};

/// More ports than an RDMA device has: a device claiming more is not asked for its table.
const MAX_PORTS: u8 = 16;

/// Devices opened for one start (see the module's header).
pub struct Opened {
    /// Whether this kernel has the one-ioctl table query (`one_ioctl`), asked once.
    kernel: OnceCell<Result<(), String>>,
    /// Each device asked for, listed alone and opened (or not) once.
    devices: RefCell<BTreeMap<String, Result<Device, VerbsError>>>,
    /// One RDMA netlink dump of the node's devices for all of those listings.
    discovery: Discovery,
    /// Where RDMA netlink does not answer, libibverbs lists every device of the node from sysfs
    /// whichever one is asked for: that first listing, kept for the other devices, so that a start
    /// lists the node's devices once and not once per device it opens.
    everything: RefCell<Option<DeviceList>>,
}

/// An open device, its ports' table lengths once read, and its last table answer.
struct Device {
    ctx: Context,
    lens: Option<BTreeMap<u32, u32>>,
    last: Last,
}

impl Default for Opened {
    fn default() -> Self {
        Opened {
            kernel: OnceCell::new(),
            devices: RefCell::default(),
            discovery: Discovery::begin(),
            everything: RefCell::default(),
        }
    }
}

impl Opened {
    /// Runs `f` on `device`'s open context, opening it the first time; a failure repeats after.
    fn with<T>(&self, device: &str, f: impl FnOnce(&mut Device) -> Result<T, VerbsError>) -> Result<T, VerbsError> {
        let mut devices = self.devices.borrow_mut();
        let entry = devices.entry(device.to_string()).or_insert_with(|| {
            let open = |list: &DeviceList| {
                Context::open_in(list, device).map(|ctx| Device { ctx, lens: None, last: Last::default() })
            };
            if let Some(all) = self.everything.borrow().as_ref() {
                return open(all);
            }
            let list = DeviceList::get(Some(device))?;
            let opened = open(&list);
            if self.discovery.listed_from_sysfs() {
                *self.everything.borrow_mut() = Some(list);
            }
            opened
        });
        f(entry.as_mut().map_err(|e| e.clone())?)
    }

    fn whole(&self, device: &str, port: u32) -> Result<Option<Whole>, VerbsError> {
        let refused = |why: String| VerbsError::QueryGidTable { device: device.to_string(), errno: why };
        let release = || rustix::system::uname().release().to_string_lossy().into_owned();
        self.kernel.get_or_init(|| one_ioctl(&release())).clone().map_err(refused)?;
        self.with(device, |dev| {
            if let Some(answer) = dev.last.take(port) {
                return Ok(answer);
            }
            if dev.lens.is_none() {
                dev.lens = Some(lens(&dev.ctx).map_err(refused)?);
            }
            let lens = dev.lens.clone().unwrap_or_default();
            let raw = dev.ctx.query_gid_table(gid_source::max_entries(&lens))?;
            let tables = gid_source::tables(&raw, &lens).map_err(|e| refused(e.to_string()))?;
            log::debug!("{device}: {} GID entries of {} ports from one ibv_query_gid_table", raw.len(), lens.len());
            Ok(dev.last.keep(tables, port))
        })
    }
}

/// Whether a kernel of this release (`uname -r`) has the one-ioctl `ibv_query_gid_table` (5.9).
fn one_ioctl(release: &str) -> Result<(), String> {
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    let mut number = || parts.next().and_then(|p| p.parse::<u32>().ok());
    match (number(), number()) {
        (Some(major), Some(minor)) if (major, minor) >= (5, 9) => Ok(()),
        (Some(_), Some(_)) => Err(format!(
            "kernel {release} predates the one-ioctl table query (5.9); libibverbs would read sysfs entry by entry"
        )),
        _ => Err(format!("kernel release {release:?} does not read as major.minor")),
    }
}

/// Each port's table length (`gid_tbl_len`), for the bound on the answer and to tell its end.
fn lens(ctx: &Context) -> Result<BTreeMap<u32, u32>, String> {
    let count = ctx.port_count().map_err(|e| e.to_string())?;
    if count > MAX_PORTS {
        return Err(format!("{count} ports, more than an RDMA device has ({MAX_PORTS})"));
    }
    let mut out = BTreeMap::new();
    for port in 1..=count {
        let attr = ctx.query_port(port).map_err(|e| e.to_string())?;
        out.insert(u32::from(port), u32::try_from(attr.gid_tbl_len).unwrap_or(0));
    }
    Ok(out)
}

/// A device's last answer and the ports already handed theirs: a port asked again gets a fresh
/// answer (detection asks again only to see entries added since), the other ports share the call.
#[derive(Default)]
struct Last {
    tables: BTreeMap<u32, Whole>,
    served: BTreeSet<u32>,
    any: bool,
}

impl Last {
    /// The port's table from the last answer, when there is one it has not had yet.
    fn take(&mut self, port: u32) -> Option<Option<Whole>> {
        if !self.any || !self.served.insert(port) {
            return None;
        }
        Some(self.tables.get(&port).cloned())
    }

    /// Keeps a fresh answer and hands `port` its table.
    fn keep(&mut self, tables: BTreeMap<u32, Whole>, port: u32) -> Option<Whole> {
        let mine = tables.get(&port).cloned();
        *self = Last { tables, served: BTreeSet::from([port]), any: true };
        mine
    }
}

impl TableSource for Opened {
    fn table(&self, device: &str, port: u32) -> Option<Whole> {
        self.whole(device, port).unwrap_or_else(|e| {
            log::debug!("{device}:{port}: GID table read from sysfs ({e})");
            None
        })
    }
}

impl Verbs for Opened {
    fn device_names(&self) -> Result<Vec<String>, VerbsError> {
        DeviceList::get(None).map(|l| l.names())
    }

    /// Listed: opened, or listed and failing to open.
    fn is_listed(&self, device: &str) -> Result<bool, VerbsError> {
        match self.with(device, |_| Ok(())) {
            Ok(()) | Err(VerbsError::Open { .. }) => Ok(true),
            Err(VerbsError::NotListed(_)) => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn query_port(&self, device: &str, port: u8, gid_index: Option<u32>) -> Result<VerbsPort, VerbsError> {
        self.with(device, |dev| port_of(&dev.ctx, port, gid_index))
    }

    fn selftest(&self, device: &str, port: u8, gid_index: Option<u32>, opts: &SelftestOptions) -> SelftestResult {
        IbVerbs.selftest(device, port, gid_index, opts)
    }

    fn providers(&self) -> Option<&[&'static str]> {
        Some(&STATIC_PROVIDERS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn whole(len: u32) -> Whole {
        Whole { len, entries: BTreeMap::new() }
    }

    #[test]
    fn one_answer_serves_each_port_once_then_is_asked_afresh() {
        let mut last = Last::default();
        assert_eq!(last.take(1), None, "no answer yet: ask");
        let t = BTreeMap::from([(1, whole(255)), (2, whole(16))]);
        assert_eq!(last.keep(t, 1), Some(whole(255)));
        // Port 2 shares the call that port 1 made.
        assert_eq!(last.take(2), Some(Some(whole(16))));
        // Asked again (detection polling for entries the kernel is adding): a fresh answer.
        assert_eq!(last.take(1), None);
        assert_eq!(last.take(2), None);
        // A port the answer does not hold reads sysfs.
        let t = BTreeMap::from([(1, whole(255))]);
        assert_eq!(last.keep(t, 3), None);
        assert_eq!(last.take(1), Some(Some(whole(255))));
    }

    #[test]
    fn the_one_ioctl_query_is_asked_for_from_5_9_on() {
        for ok in ["5.9.0", "5.15.0-1053-nvidia", "6.1.0-56-amd64", "6.18.44-fc-v657-gpu", "10.0"] {
            assert_eq!(one_ioctl(ok), Ok(()), "{ok}");
        }
        for old in ["5.8.18", "4.18.0-513.el8.x86_64", "3.10.0-1160.el7.x86_64"] {
            assert!(one_ioctl(old).is_err_and(|e| e.contains("predates")), "{old}");
        }
        for odd in ["", "linux", "5", "5.x", "99999999999.1"] {
            assert!(one_ioctl(odd).is_err_and(|e| e.contains("does not read")), "{odd}");
        }
    }

    /// Without RDMA (this build host, CI) every table is `None` and the probe's answers are
    /// those of the plain verbs: detection reads sysfs, and nothing fails.
    #[test]
    fn no_rdma_means_sysfs_and_the_same_answers_as_plain_verbs() {
        if std::path::Path::new("/dev/infiniband").exists() {
            eprintln!("SKIP: this machine has RDMA devices; the lab covers real ones");
            return;
        }
        let o = Opened::default();
        assert_eq!(o.table("mlx5_0", 1), None);
        // Asked whether it lists the device, each says the same (no list, or not listed), and
        // neither can query it.
        assert_eq!(o.is_listed("mlx5_0"), IbVerbs.is_listed("mlx5_0"));
        assert!(!matches!(o.is_listed("mlx5_0"), Ok(true)));
        assert!(o.query_port("mlx5_0", 1, None).is_err() && IbVerbs.query_port("mlx5_0", 1, None).is_err());
        assert_eq!(o.providers(), IbVerbs.providers());
    }
}
