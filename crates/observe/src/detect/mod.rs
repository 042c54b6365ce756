//! Detect, the first stage: which RDMA devices are this pod's, and what their ports are. Takes
//! the environment (a map, never `std::env`), the annotations file and a sysfs root; pure reads, no
//! decisions about what to export. docs/architecture.md lists what each module reads.

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
