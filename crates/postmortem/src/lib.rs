//! The post-mortem: what the supervisor watches while the command runs, and what it says when
//! the job fails or hangs.
//!
//! - `portwatch`: the RDMA ports in use: read at start (their counters through
//!   `nw_observe::detect::counters`), polled, read at exit;
//! - `meaning`: what a moved counter usually means;
//! - `kept`: the bounded record of the transitions the watch sees (first and last kept);
//! - `ras`: the client of NCCL's RAS (bounded queries of its STATUS report);
//! - `hang`: when the supervisor asks RAS, and what it says of a hung or failed job;
//! - `state`, `status`: the supervisor's first reading kept for `nccl-wrap status`, and that command;
//! - `postmortem`: what changed between start and exit, for people and as JSON;
//! - `utc`: UTC timestamps for it.
//!
//! It never signals or waits for a process: the supervisor (`nw_pid1`) does, and calls in here.

#![deny(unsafe_code)]

pub mod hang;
pub mod kept;
pub mod meaning;
pub mod portwatch;
pub mod postmortem;
pub mod ras;
pub mod state;
pub mod status;
pub mod utc;
