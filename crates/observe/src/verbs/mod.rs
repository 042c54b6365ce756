//! Verify, the second stage: ask ibverbs what sysfs already told us, as NCCL will ask it, and
//! record the answers (and, with `--selftest`, a loopback RDMA WRITE and SEND) on each port. What to
//! do about them is the plan's decision. `ffi` is the only module here allowed `unsafe`.

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
