//! Observation: every read nccl-wrap makes of the machine (`detect`, `verbs`, and `observation`,
//! the road's first stage), bounded and under a root it is given. It decides nothing that a caller
//! could decide from what it returns, and knows no caller.

// `unsafe` is denied in the crate; only `verbs::ffi` (ibverbs handles, in owner types) opts back
// in, at its `mod` line.
#![deny(unsafe_code)]

pub mod detect;
pub mod observation;
pub mod verbs;
