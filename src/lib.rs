//! nccl-wrap's front ends, above the layers (docs/architecture.md): `cli`, `report`, `doctor`,
//! `health` (with `watch`), `ping`, `gate`, `install` and `run`. The binary (`main.rs`) is the switch
//! over them; they stand on the pair test (`nw_pairtest`) and never name each other.

#![deny(unsafe_code)]

pub mod cli;
pub mod doctor;
pub mod gate;
pub mod health;
pub mod install;
pub mod ping;
pub mod report;
pub mod run;

/// The layers under their old names, for the integration tests, fuzz targets and benchmarks that
/// reach a parser directly; the front ends above name the crates themselves.
pub use nw_decide as plan;
pub use nw_nccl as nccl;
pub use nw_observe::{detect, verbs};
pub use nw_output::{msg, termination, write};
pub use nw_pairtest as pairtest;

/// The command's process (`nw_pid1`) and the post-mortem (`nw_postmortem`), under their old
/// common name, for the integration tests.
pub mod process {
    pub use nw_pid1::{exec, memlock, supervise, sys};
    pub use nw_postmortem::{hang, kept, meaning, portwatch, postmortem, ras, state, status, utc};
}
