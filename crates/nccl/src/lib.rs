//! NCCL's own rules, as pure functions that every stage may use and that use no other stage:
//!
//! - `list`: the device-list syntax of `NCCL_IB_HCA` and `NCCL_SOCKET_IFNAME` (`^`, `=`, prefixes);
//! - `gid`: GID entries and the GID index NCCL picks on its own (`ncclUpdateGidIndex`);
//! - `env`: the variables' names and exact forms, the child's environment, shell quoting;
//! - `prefix`: an IP network prefix and whether an address is inside it;
//! - `ras`: the replies of NCCL's RAS (its STATUS report, text or JSON) read into findings.
//!
//! No I/O and no environment: values come in as arguments.

#![deny(unsafe_code)]

pub mod env;
pub mod gid;
pub mod list;
pub mod prefix;
pub mod ras;
