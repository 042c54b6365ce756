//! The real [`Verbs`]: rdma-core through the FFI fence (`ffi`), as NCCL itself will call it.

use std::time::Instant;

use super::ffi::{Context, DeviceList, STATIC_PROVIDERS};
use super::probe::SelftestOptions;
use super::probe::{Verbs, VerbsError};
use super::selftest;
use super::status::{format_gid, link_layer_name, port_state_name};
use crate::detect::port::{SelftestResult, VerbsPort};

/// The real ibverbs, through the statically linked rdma-core.
#[derive(Debug, Default, Clone, Copy)]
pub struct IbVerbs;

impl Verbs for IbVerbs {
    fn device_names(&self) -> Result<Vec<String>, VerbsError> {
        Ok(DeviceList::get(None)?.names())
    }

    fn is_listed(&self, device: &str) -> Result<bool, VerbsError> {
        Ok(DeviceList::get(Some(device))?.names().iter().any(|n| n == device))
    }

    fn query_port(&self, device: &str, port: u8, gid_index: Option<u32>) -> Result<VerbsPort, VerbsError> {
        port_of(&Context::open(device)?, port, gid_index)
    }

    fn providers(&self) -> Option<&[&'static str]> {
        Some(&STATIC_PROVIDERS)
    }

    fn selftest(&self, device: &str, port: u8, gid_index: Option<u32>, opts: &SelftestOptions) -> SelftestResult {
        let start = Instant::now();
        let outcome = selftest::loopback(device, port, gid_index, opts, start);
        let micros = u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX);
        match outcome {
            Ok(()) => SelftestResult { passed: true, micros, ..SelftestResult::default() },
            Err(f) => SelftestResult {
                step: Some(f.step.to_owned()),
                status: Some(f.status),
                hint: f.hint,
                micros,
                passed: false,
            },
        }
    }
}

/// What an open device says of `port`, and of the GID at `gid_index` when given.
pub(crate) fn port_of(ctx: &Context, port: u8, gid_index: Option<u32>) -> Result<VerbsPort, VerbsError> {
    let attr = ctx.query_port(port)?;
    let gid = gid_index.map(|index| ctx.query_gid(port, index).map(|g| format_gid(&g))).transpose()?;
    Ok(VerbsPort {
        state: port_state_name(attr.state),
        link_layer: link_layer_name(attr.link_layer).to_owned(),
        gid_tbl_len: u32::try_from(attr.gid_tbl_len).unwrap_or(0),
        gid,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On a machine without RDMA (this build host, CI) the real verbs must answer cleanly.
    #[test]
    fn no_rdma_is_a_clean_answer() {
        let v = IbVerbs;
        match v.device_names() {
            Ok(names) => {
                assert!(!names.iter().any(|n| n == "mlx5_0") || std::path::Path::new("/dev/infiniband").exists())
            }
            Err(e) => assert!(matches!(e, VerbsError::DeviceList { .. }), "{e}"),
        }
        if !std::path::Path::new("/dev/infiniband").exists() {
            assert_eq!(v.query_port("mlx5_0", 1, None), Err(VerbsError::NotListed("mlx5_0".into())));
            let r = v.selftest("mlx5_0", 1, Some(3), &SelftestOptions::default());
            assert!(!r.passed);
            assert_eq!(r.step.as_deref(), Some("open"));
        }
    }
}
