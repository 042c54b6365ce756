//! Apply and run, the last stages: the limit the command inherits and the process it runs in.
//!
//! - `memlock`: raise RLIMIT_MEMLOCK (which the command inherits), explaining the outcome;
//! - `exec`: replace nccl-wrap with the command (PATH search, tini's 126/127);
//! - `supervise`: as PID 1 (or `--supervise`), run the command as a child, forward signals, reap,
//!   and hand the post-mortem (`nw_postmortem`) what it watches;
//! - `sys`: the raw system calls supervision needs, the one module here allowed `unsafe`.
//!
//! Takes the argv and the finished environment; returns an exit code (or never returns). It
//! decides nothing about ports or variables.

#![deny(unsafe_code)]

pub mod exec;
pub mod memlock;
pub mod supervise;
#[allow(unsafe_code)] // Raw fork/exec/signal calls, fenced with SAFETY comments.
pub mod sys;
