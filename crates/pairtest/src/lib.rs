//! The pair test: two pods test the RDMA rails between them, one protocol layer under `ping`,
//! `--gate` and `watch --ring`, knowing none of them. It must never print a peer's text
//! unsanitised, nor register more than the listener's own limit because a peer asked.

#![deny(unsafe_code)]

pub mod cause;
pub mod clean;
pub mod desk;
pub mod door;
pub mod edge;
pub mod exchange;
pub mod here;
pub mod ledger;
pub mod output;
pub(crate) mod pair;
pub mod rdma;
pub mod ring;
pub(crate) mod route;
pub mod session;
pub(crate) mod settings;
pub mod slow;
pub mod wire;

pub use settings::Settings;
