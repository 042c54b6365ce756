//! `nccl-wrap ping`: placeholder.
pub mod cause;
pub mod exchange;
pub mod ring;
pub mod route;
pub mod wire;
