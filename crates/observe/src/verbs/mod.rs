//! Verify, the second stage: ask ibverbs what sysfs already told us, as NCCL will ask it.
//!
//! Takes the [`Detection`](crate::detect::Detection) and a [`Verbs`]; records on each port what
//! ibverbs says (`detect::port::VerbsCheck`) and, with `--selftest`, how a loopback RDMA WRITE and
//! SEND went. What to do about it is the plan's decision.
//!
//! - `probe`: the seam (the `Verbs` trait, its errors, the stand-in `NoVerbs`): plain data;
//! - `verify`: the logic over the seam, tested with a fake;
//! - `driver`: a device's kernel driver, and whether this build links a provider for it;
//! - `ibverbs`: the real `Verbs`; `selftest`: the loopback test; `status`: ibverbs' numbers by name;
//! - `opened`: the devices of one start opened once, for detection's whole GID tables
//!   (`ibv_query_gid_table`) and then the probe;
//! - `ffi`: the FFI fence, the only module here allowed `unsafe` (owner types of every handle,
//!   and libibverbs' device discovery answered for the devices a listing is for);
//! - `nldev`: RDMA devices and their uverbs nodes as RDMA netlink tells them, for that discovery;
//! - `debug`: the hidden `nccl-wrap __verbs` entry the Soft-RoCE lab uses.

pub mod debug;
pub mod driver;
#[allow(unsafe_code)] // The FFI fence; see lib.rs for the crate's two unsafe modules.
pub mod ffi;
pub(crate) mod ibverbs;
pub mod nldev;
pub(crate) mod opened;
pub(crate) mod probe;
pub(crate) mod selftest;
pub mod status;
pub mod verify;

pub use ibverbs::IbVerbs;
pub use opened::Opened;
pub use probe::{NoVerbs, SelftestOptions, Verbs, VerbsError};
