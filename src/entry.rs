//! The binary's C entry point, in place of Rust's runtime start (`lang_start`), which costs every
//! pod's start about 0.1 ms for nothing nccl-wrap uses: it reads `/proc/self/maps` (and the CPU
//! affinity) to learn the main thread's stack bounds, and maps an alternate signal stack for a
//! stack-overflow message. What it did that nccl-wrap needs is done here, in one `poll` and one
//! `sigaction` (`process::sys::prepare_standard_io`): SIGPIPE ignored for nccl-wrap's own writes
//! (and given back to the command as inherited), and a closed descriptor 0, 1 or 2 opened on
//! `/dev/null`. The arguments and environment come from the standard library as before (glibc
//! hands them to its `.init_array` hook). The exit goes through `std::process::exit`, which
//! flushes standard output as a return from Rust's `main` would. A stack overflow is now a plain
//! SIGSEGV, without the runtime's message.
//!
//! Only the release binary has it: test builds keep the test harness's own `main`.

use std::ffi::{c_char, c_int};

// SAFETY (`no_mangle`): this is the binary's only `main` symbol: the crate is `#![no_main]`, so
// rustc emits none of its own, and the library defines none. glibc's start code calls it after
// its own initialisation and the `.init_array` hooks (the standard library's argument capture,
// `process::sys`'s SIGPIPE capture), with the C `main` signature declared here.
#[no_mangle]
extern "C" fn main(_argc: c_int, _argv: *const *const c_char) -> c_int {
    nccl_wrap::process::sys::prepare_standard_io();
    std::process::exit(i32::from(crate::start()))
}
