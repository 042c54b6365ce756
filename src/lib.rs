//! nccl-wrap's front ends, above the layers (docs/architecture.md): the options, the summary and
//! the JSON plan, and each subcommand. The binary (`main.rs`) is the switch over them.
//!
//! - `cli`: options, each also an `NCCL_WRAP_*` variable;
//! - `report`: the summary on stderr and the JSON plan;
//! - `doctor`: checks that name what would make NCCL hang or fall back to TCP;
//! - `health`: doctor's findings as NFD labels and Prometheus metrics, and `watch`, the node agent
//!   (its `--ring` drives the pair test between nodes);
//! - `ping`: the pair test as a command, between two pods (or a ring of them);
//! - `gate`: the job's pods test each other before the command starts;
//! - `install`: copies the binary into a shared volume, for an init container;
//! - `run`: the interlocks, then the command exec'd or supervised.
//!
//! The front ends stand on the pair test (`nw_pairtest`) and never name each other.

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
