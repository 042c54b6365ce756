//! Everything known about one port, as plain data: what sysfs says, then what ibverbs and the
//! self-test say (defined here so that detection never names a later stage's type). No I/O.

use serde::Serialize;

use crate::detect::netif::Owner;
use nw_nccl::gid::RoceType;

#[derive(Debug, Clone, Default, Serialize)]
pub struct PortFacts {
    pub port: u32,
    pub state: Option<String>,
    pub phys_state: Option<String>,
    pub link_layer: Option<String>,
    pub rate: Option<String>,
    /// The entry a run uses, for RoCE ports: this pod's own address where the table holds one the rule
    /// accepts, else the rule's own pick.
    pub gid: Option<GidPick>,
    /// The rule's own pick where it differs from `gid` (on a shared device, another's address).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nccl_pick: Option<GidPick>,
    /// The table's non-empty entries, read when the pick is not this pod's (a shared device), `owner`
    /// always told: what the plan weighs and doctor shows.
    #[serde(skip_serializing_if = "Vec::is_empty", rename = "gid_table")]
    pub table: Vec<GidPick>,
    /// How many entries the table has, empty ones included (when `table` was read).
    #[serde(skip)]
    pub table_len: u32,
    /// The InfiniBand partition of this pod's IPoIB child on this port, and its pkey index.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pkey: Option<PkeyPick>,
    /// What ibverbs says of the port (filled by `verify`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verbs: Option<VerbsCheck>,
    /// The loopback self-test, when asked for (filled by `verify`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub selftest: Option<SelftestResult>,
    /// Reads that failed; reported with the device.
    #[serde(skip)]
    pub problems: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct GidPick {
    pub index: u32,
    pub gid: String,
    pub address: String,
    #[serde(rename = "type")]
    pub roce: Option<RoceType>,
    pub ndev: Option<String>,
    /// Valid, right family, right RoCE version and in range: what NCCL is looking for.
    pub full_match: bool,
    /// Whose address the entry holds, where this pod's addresses tell (see `netif`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<Owner>,
}

/// The partition an IPoIB child of this pod carries, and where the port's pkey table holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PkeyPick {
    /// The child interface (`class/net/<if>`).
    pub netdev: String,
    /// Its `pkey` attribute, e.g. `0x8001`.
    pub pkey: u16,
    /// Index of that partition in `ports/<n>/pkeys/`, `None` when the table lacks it.
    pub index: Option<u32>,
}

/// The state names of `ports/<n>/state` (`4: ACTIVE`) without the number.
fn state_name(raw: &str) -> &str {
    raw.split_once(": ").map_or(raw, |(_, name)| name).trim()
}

impl PortFacts {
    pub fn state_name(&self) -> Option<&str> {
        self.state.as_deref().map(state_name)
    }
    pub fn phys_state_name(&self) -> Option<&str> {
        self.phys_state.as_deref().map(state_name)
    }
}

/// What `ibv_query_port` (and `ibv_query_gid` for the chosen index) said about one port.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VerbsPort {
    /// `ibv_port_state` as NCCL names it: "ACTIVE", "DOWN", ...
    pub state: String,
    /// "InfiniBand", "Ethernet" or "Unspecified".
    pub link_layer: String,
    pub gid_tbl_len: u32,
    /// The GID at the index detection chose, in sysfs's colon-separated form, if one was asked for.
    pub gid: Option<String>,
}

/// Outcome of the loopback self-test on one port.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SelftestResult {
    pub passed: bool,
    /// Which step failed: "open", "query_port", "query_gid", "alloc_pd", "reg_mr", "create_cq",
    /// "create_qp", "modify_qp", "post_recv", "post_send", "poll", "timeout" or "verify".
    pub step: Option<String>,
    /// Completion status by name with vendor_err, or the OS error (`ENOMEM: ...`).
    pub status: Option<String>,
    /// Likely causes and fixes, in words.
    pub hint: Option<String>,
    /// Wall time of the whole test, opening the device included.
    #[serde(rename = "elapsed_us")]
    pub micros: u64,
}

/// What ibverbs said of one port.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "result")]
pub enum VerbsCheck {
    /// Opened and queried.
    Port(VerbsPort),
    /// Verbs cannot use it, so neither can NCCL (which uses the same library calls).
    Unusable { error: String },
    /// Not checked (verbs not available, or reading a sysfs tree other than the kernel's).
    NotChecked { reason: String },
}

/// A port's `rate` (`400 Gb/sec (4X NDR)`) in Mb/s; anything else -> None (not guessed).
pub fn rate_mbps(rate: &str) -> Option<u32> {
    let g: f64 = rate.split_whitespace().next()?.parse().ok()?;
    let m = (g * 1000.0).round();
    (m.is_finite() && (1.0..=10_000_000.0).contains(&m)).then_some(m as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_names() {
        assert_eq!(state_name("4: ACTIVE"), "ACTIVE");
        assert_eq!(state_name("5: LinkUp"), "LinkUp");
        assert_eq!(state_name("garbage"), "garbage");
    }
}
