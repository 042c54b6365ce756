//! Observation: every read nccl-wrap makes of the machine, bounded and under a root it is given.
//!
//! - `detect`: the pod's RDMA devices and their ports (variables, annotation, sysfs, netlink,
//!   routes, the image);
//! - `verbs`: the same ports through ibverbs, and the loopback self-test;
//! - `observation`: the road's first stage for every subcommand, in two rounds (what any
//!   decision needs, then the far reads a decision asks for).
//!
//! It decides nothing that a caller could decide from what it returns, and knows no caller.

// `unsafe` is denied in the crate; only `verbs::ffi` (ibverbs handles, in owner types) opts back
// in, at its `mod` line.
#![deny(unsafe_code)]

pub mod detect;
pub mod observation;
pub mod verbs;
