//! nccl-wrap's front ends, above the layers (docs/architecture.md): `cli`, `report`, `doctor`,
//! `health` (with `watch`), `ping`, `gate`, `install` and `run`. The binary (`main.rs`) is the switch
//! over them; they stand on the pair test (`nw_pairtest`) and never name each other.

#![deny(unsafe_code)]

pub mod cli;
pub mod doctor;
pub mod gate;
pub mod health;
pub mod install;
pub mod ping;
pub mod report;
pub mod run;

/// A RoCE port as a pod describes it to its peer, for the front ends' unit tests.
#[cfg(test)]
mod test_ports {
    use nw_pairtest::wire::{LinkLayer, PortInfo};

    pub(crate) fn roce_port(dev: &str, last: u8) -> PortInfo {
        PortInfo {
            device: dev.into(),
            port: 1,
            link_layer: LinkLayer::Ethernet,
            gid_index: Some(3),
            gid: Some(format!("0000:0000:0000:0000:0000:ffff:0a00:6a{last:02x}")),
            gid_type: Some("RoCE v2".into()),
            lid: None,
            mtu: 4096,
            pkey: None,
            netdev: Some("net1".into()),
            rate_kbps: None,
        }
    }
}

/// The layers under their old names, for the integration tests, fuzz targets and benchmarks that
/// reach a parser directly; the front ends above name the crates themselves.
pub use nw_decide as plan;
pub use nw_nccl as nccl;
pub use nw_observe::{detect, verbs};
pub use nw_output::{msg, termination, write};
pub use nw_pairtest as pairtest;

/// The command's process (`nw_pid1`) and the post-mortem (`nw_postmortem`), under their old
/// common name, for the integration tests.
pub mod process {
    pub use nw_pid1::{exec, memlock, supervise, sys};
    pub use nw_postmortem::{hang, kept, meaning, portwatch, postmortem, ras, state, status, utc};
}
