//! Apply and run, the last stages: the limits and the process the training command runs in.
//!
//! - `memlock`: raise RLIMIT_MEMLOCK (which the command inherits), explaining the outcome;
//! - `exec`: replace nccl-wrap with the command (PATH search, tini's 126/127);
//! - `supervise`: as PID 1 (or `--supervise`), run the command as a child, forward signals, reap;
//! - `portwatch`: while supervising, the RDMA ports in use: read at start (their counters through
//!   `detect::counters`), polled, read at exit;
//! - `meaning`: what a moved counter usually means;
//! - `kept`: the bounded record of the transitions the watch sees (first and last kept);
//! - `ras`: the client of NCCL's RAS (bounded queries of its STATUS report);
//! - `hang`: when the supervisor asks RAS, and what it says of a hung or failed job;
//! - `state`, `status`: the supervisor's first reading kept for `nccl-wrap status`, and that command;
//! - `postmortem`: what changed between start and exit, for people and as JSON;
//! - `utc`: UTC timestamps for it;
//! - `sys`: the raw system calls supervision needs, the crate's other module allowed `unsafe`.
//!
//! Takes the argv and the finished environment; returns an exit code (or never returns).

pub mod exec;
pub mod hang;
pub mod kept;
pub mod meaning;
pub mod memlock;
pub mod portwatch;
pub mod postmortem;
pub mod ras;
pub mod state;
pub mod status;
pub mod supervise;
#[allow(unsafe_code)] // Raw fork/exec/signal calls; see lib.rs for the crate's two unsafe modules.
pub mod sys;
pub mod utc;
