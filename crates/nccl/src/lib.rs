//! NCCL's own rules, pure: list syntax, the GID index NCCL picks, variable forms, IP prefixes and
//! RAS replies. No I/O and no environment: values come in as arguments.

#![deny(unsafe_code)]

pub mod env;
pub mod gid;
pub mod list;
pub mod prefix;
pub mod ras;
