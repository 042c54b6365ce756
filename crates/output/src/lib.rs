//! What nccl-wrap writes for people and into files, shared by every layer: the prefix of every
//! line for people, how a check came out, the one atomic file replacement, and the termination
//! message Kubernetes shows. The lowest crate: it names no other.

#![deny(unsafe_code)]

pub mod msg;
pub mod status;
pub mod termination;
pub mod write;
