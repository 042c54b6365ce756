//! `nccl-wrap ping`: placeholder.
pub mod cause;
pub mod exchange;
pub mod ring;
pub mod route;
pub mod wire;
pub mod pair;
pub mod session;
pub mod output;
