//! The post-mortem: what the supervisor watches while the command runs (ports, NCCL's RAS), and
//! what it says when the job fails or hangs. It never signals or waits for a process.

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

/// Writes a line to stderr, ignoring failure (`eprintln!` panics when stderr's reader has gone).
pub fn say(text: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr().lock(), "{text}");
}
