//! nccl-wrap as a library: the pipeline's stages, from the bottom up. The binary (`main.rs`)
//! wires them in order; the fuzz targets (`fuzz/`) and benchmarks reach the parsers through here.
//!
//! - `msg`: the prefix of every line for people;
//! - `write`: the one atomic file replacement (health files, post-mortem report);
//! - `termination`: the termination message Kubernetes shows (the gate's refusal, a hung job's account);
//! - `nccl`: NCCL's own rules (list syntax, GID choice, variable forms), pure;
//! - `detect`: stage 1, the pod's RDMA devices and their ports (env, annotation, sysfs);
//! - `verbs`: stage 2, the same ports through ibverbs, and the loopback self-test;
//! - `plan`: stage 3, which ports, which GID index, which variables;
//! - `process`: stages 4-5, memlock, then exec or supervision as PID 1;
//! - `report`: the summary on stderr and the JSON plan;
//! - `doctor`: checks that name what would make NCCL hang or fall back to TCP;
//! - `health`: doctor's findings as NFD labels and Prometheus metrics, and `watch`, the node agent
//!   (its `--ring` drives the pair test between nodes);
//! - `pairtest`: the RDMA pair test between two pods (wire, exchange, sessions, causes, the one
//!   listener policy), below its three front ends, which never name each other:
//! - `ping`: the pair test as a command, between two pods (or a ring of them);
//! - `gate`: the job's pods test each other before the command starts (the pair test, a
//!   coordinator);
//! - `install`: copies the binary into a shared volume, for an init container;
//! - `cli`: options, each also an `NCCL_WRAP_*` variable.

// `unsafe` is denied in the whole crate (also by Cargo.toml's [lints]). Exactly two modules opt
// back in, each at its `mod` line: `verbs::ffi` (ibverbs handles, in owner types) and
// `process::sys` (fork, execve and signal calls). tests/layout.rs fails on any other.
#![deny(unsafe_code)]

pub mod cli;
pub mod detect;
pub mod doctor;
pub mod gate;
pub mod health;
pub mod install;
pub mod msg;
pub mod nccl;
pub mod pairtest;
pub mod ping;
pub mod plan;
pub mod process;
pub mod report;
pub mod termination;
pub mod verbs;
pub mod write;
