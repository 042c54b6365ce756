//! Apply and run, the last stages: the limits and the process the training command runs in.
//!
//! - `memlock`: raise RLIMIT_MEMLOCK (which the command inherits), explaining the outcome;
//! - `exec`: replace nccl-wrap with the command (PATH search, tini's 126/127);
//! - `supervise`: as PID 1 (or `--init`), run the command as a child, forward signals, reap;
//! - `sys`: the raw system calls supervision needs, the crate's other module allowed `unsafe`.
//!
//! Takes the argv and the finished environment; returns an exit code (or never returns).

pub mod exec;
pub mod memlock;
pub mod supervise;
#[allow(unsafe_code)] // Raw fork/exec/signal calls; see lib.rs for the crate's two unsafe modules.
pub mod sys;
