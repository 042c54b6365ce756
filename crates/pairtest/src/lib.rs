//! The pair test: two pods test the RDMA rails between them, over the ports a run would hand
//! NCCL. One protocol layer under three front ends in the binary: `nccl-wrap ping`, the
//! gate (`--gate`) and the node agent's ring (`watch --ring`). It knows none of
//! them: a front end picks the peers, the test's [`Settings`] and what to do with the results.
//!
//! - `settings`: the one settings type of a test (sizes, pairing, deadline), and what a
//!   listener lets a peer ask for;
//! - `wire`: the pair test's messages and their framing (pure), and the checks a front end's own
//!   kinds are built from (the gate's protocol is the gate's);
//! - `exchange`: TCP with deadlines, hostile peers, the one dual-stack bind; `door`: the one
//!   policy of every listener (who, how many at once and from one source, how fast, how long,
//!   what a peer may ask); `desk`: a listener at work under it (first reads, what is kept open)
//!   and the serving of hellos; `ledger`: each source's share and the refusals said at a bounded
//!   rate; `ring`: a ring's step (serve the predecessor, test the successor);
//! - `clean`: peer-supplied text made printable and bounded before anything prints it;
//! - `here`: what this pod brings (ports, name, routes); `session`: one run with one peer from
//!   either end; `pair`: the verbs work; `edge`: this pod towards one peer, as results;
//! - `rdma`: the one adapter of [`edge::PairTest`] over ibverbs;
//! - `slow`: a pair that works but slowly, against the median and its rated speed (pure);
//! - `cause`: why a pair failed (pure); `route`: this namespace's IPv4 routes (pure parse);
//!   `output`: each pair's result, in the contract's form (the front ends print it).
//!
//! It must never print a peer's text unsanitised, and never register more than the listener's
//! own limit because a peer asked for it.

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
