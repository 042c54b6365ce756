//! Detect, the first stage: which RDMA devices are this pod's, and what their ports are.
//!
//! Takes the environment (a map, never `std::env`), the annotations file and a sysfs root, and
//! returns a [`Detection`]: the devices a source named (each with its ports' facts), which source
//! that was and what the others said, the devices visible but not ours, and warnings. Pure reads:
//! no decisions about what to export, and nothing written anywhere.
//!
//! - `devices`: tries the sources in order and reads the chosen devices' ports;
//! - `dra_metadata` (with the walk that finds its files, `dra_files`): source 1, the KEP-5304
//!   device metadata files of the pod's DRA claims; `sriov_dra`: source 2, the SR-IOV DRA
//!   driver's `SRIOVNETWORK_*` variables; `dra_drivers`: the DRA NIC drivers and attribute keys
//!   both read, one row each with its source;
//! - `sriov`: source 3, the SR-IOV device plugin's `PCIDEVICE_*` variables;
//! - `annotation`: source 4, the network-status annotation (downward-API file);
//! - `sysfs`: source 5, and the bounded reader under a root that every source goes through;
//! - `gids`: a port's GID table, read lazily, each entry at most once;
//! - `gid_source`: the seam through which a whole table may come from ibverbs instead;
//! - `port`: the per-port facts that later stages read and fill;
//! - `counters`: a port's error and traffic counters (`counters/`, `hw_counters/`);
//! - `function`: what an InfiniBand PF says of itself (its VPD, read by `vpd`, its subsystem and
//!   PCIe link), which tells an NVSwitch management function from a data NIC;
//! - `file`: the one bounded, non-blocking way to read a file (regular files only);
//! - `names`: validation of every name that comes from outside;
//! - `uverbs`: which devices the container can open, by the uverbs nodes in its `/dev/infiniband`
//!   (a device without its node is never the pod's; where some have theirs, they tell the pod's);
//! - `netif`: this namespace's own addresses, and whose address a GID entry holds;
//! - `links`: the kind of each of this namespace's interfaces (rtnetlink), which says whose
//!   addresses can sit in another device's GID table; `children`: those interfaces, and when the
//!   walk of shared devices has seen them all;
//! - `rtnetlink`: the bounded dump request, receive loop and message walk `links` and `netif`
//!   share.
//! - `userspace`: what NCCL in the image will load (libibverbs, providers, NCCL, net plugins),
//!   with `ldcache`, the parser of the image's `/etc/ld.so.cache`;
//! - `route`: this namespace's routing table; `bootstrap`: the interface that reaches the job's
//!   coordinator, for NCCL's and Gloo's out-of-band sockets.

pub mod annotation;
pub mod bootstrap;
pub(crate) mod children;
pub(crate) mod claim;
pub mod counters;
pub mod devices;
pub mod dra_drivers;
pub mod dra_files;
pub mod dra_metadata;
pub mod file;
pub mod function;
pub mod gid_source;
pub(crate) mod gids;
pub(crate) mod host;
pub(crate) mod image;
pub mod ldcache;
pub mod links;
pub mod names;
pub mod netif;
pub mod port;
pub(crate) mod python;
pub mod rails;
pub mod route;
pub mod rtnetlink;
pub mod sriov;
pub mod sriov_dra;
pub mod sysfs;
pub mod sysfs_error;
pub mod topology;
pub mod userspace;
pub mod uverbs;
pub mod vpd;

pub use devices::{detect, Detection, Device, Inputs, Source, Vars};
pub use gids::GidRule;
