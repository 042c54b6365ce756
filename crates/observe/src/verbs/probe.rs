//! The seam between port-probing logic and ibverbs ([`Verbs`]; the real one is `ibverbs.rs`, tests
//! hand in a fake). Plain data only; never touches FFI.

use crate::detect::port::{SelftestResult, VerbsPort};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelftestOptions {
    /// Registered as one MR; the RDMA WRITE copies its first half to its second half.
    pub buffer_bytes: usize,
    /// Deadline for the whole test, opening the device included.
    pub timeout_ms: u64,
}

impl Default for SelftestOptions {
    fn default() -> Self {
        SelftestOptions { buffer_bytes: 64 << 20, timeout_ms: 2000 }
    }
}

/// Why verbs could not answer for a device.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum VerbsError {
    #[error("libibverbs lists no device named {0} (is /dev/infiniband/uverbsN for it mounted in the container?)")]
    NotListed(String),
    #[error("ibv_open_device({device}) failed: {errno}")]
    Open { device: String, errno: String },
    #[error("ibv_query_port({device}, {port}) failed: {errno}")]
    QueryPort { device: String, port: u8, errno: String },
    #[error("ibv_get_device_list failed: {errno} (no RDMA support in this kernel, or /sys/class/infiniband_verbs not visible)")]
    DeviceList { errno: String },
    #[error("ibverbs not consulted: {0}")]
    Unavailable(String),
    #[error("ibv_query_gid({device}, {port}, {index}) failed: {errno}")]
    QueryGid { device: String, port: u8, index: u32, errno: String },
    #[error("ibv_query_device({device}) failed: {errno}")]
    QueryDevice { device: String, errno: String },
    #[error("ibv_query_gid_table({device}) failed: {errno}")]
    QueryGidTable { device: String, errno: String },
}

/// What port-probing logic needs from ibverbs.
pub trait Verbs {
    /// Names of the devices `ibv_get_device_list` returns (those whose uverbs node is here).
    fn device_names(&self) -> Result<Vec<String>, VerbsError>;
    /// Whether `ibv_get_device_list` lists `device` (the real verbs ask about that device alone).
    fn is_listed(&self, device: &str) -> Result<bool, VerbsError> {
        self.device_names().map(|names| names.iter().any(|n| n == device))
    }
    /// Open `device`, query `port`, and read the GID at `gid_index` when given.
    fn query_port(&self, device: &str, port: u8, gid_index: Option<u32>) -> Result<VerbsPort, VerbsError>;
    /// Loopback RC self-test through `gid_index` (RoCE) or the LID (InfiniBand, `None`).
    fn selftest(&self, device: &str, port: u8, gid_index: Option<u32>, opts: &SelftestOptions) -> SelftestResult;
    /// The rdma-core providers behind these verbs, where known (a device no provider serves is never
    /// listed); `None`: every provider assumed present.
    fn providers(&self) -> Option<&[&'static str]> {
        None
    }
}

/// Stands in where ibverbs must not be asked; every answer says why.
pub struct NoVerbs {
    pub reason: String,
}

impl Verbs for NoVerbs {
    fn device_names(&self) -> Result<Vec<String>, VerbsError> {
        Err(VerbsError::Unavailable(self.reason.clone()))
    }
    fn query_port(&self, _: &str, _: u8, _: Option<u32>) -> Result<VerbsPort, VerbsError> {
        Err(VerbsError::Unavailable(self.reason.clone()))
    }
    fn selftest(&self, _: &str, _: u8, _: Option<u32>, _: &SelftestOptions) -> SelftestResult {
        let status = Some(VerbsError::Unavailable(self.reason.clone()).to_string());
        SelftestResult { status, ..SelftestResult::default() }
    }
}
