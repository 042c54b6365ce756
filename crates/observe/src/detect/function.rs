//! What an InfiniBand PF says of itself that tells an NVSwitch management function (HGX B200/B300,
//! docs/field-inputs.md section 6) from a data NIC: its VPD, subsystem IDs and PCIe link. Never
//! reads the function's counters (that floods the kernel log there). Reads only.

use serde::Serialize;

use crate::detect::file;
use crate::detect::sysfs::Sysfs;
use crate::detect::vpd;

/// The widest PCIe link whose function's VPD is read (see `read`).
pub const MAX_VPD_WIDTH: u32 = 8;

/// The facts; each `None` where sysfs did not have it (VPD: where it was not read).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct FunctionFacts {
    /// VPD's identifier string.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vpd_product: Option<String>,
    /// VPD's vendor-specific `SMDL` field (`SW_MNG` on the NVSwitch management bridge).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vpd_smdl: Option<String>,
    /// Why VPD could not be read (permissions: `vpd` is 0600 on most kernels).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vpd_unreadable: Option<String>,
    /// `subsystem_vendor:subsystem_device` without `0x` (`15b3:0087`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subsystem: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_link_width: Option<u32>,
    /// `16.0 GT/s PCIe`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_link_speed: Option<String>,
}

pub fn read(sysfs: &Sysfs, dev: &str) -> FunctionFacts {
    let attr = |name: &str| sysfs.attr(&format!("class/infiniband/{dev}/device/{name}")).ok();
    let hex = |name: &str| attr(name).map(|v| v.trim_start_matches("0x").to_ascii_lowercase());
    let subsystem = match (hex("subsystem_vendor"), hex("subsystem_device")) {
        (Some(v), Some(d)) if v.len() <= 4 && d.len() <= 4 => Some(format!("{v}:{d}")),
        _ => None,
    };
    let (max_link_width, max_link_speed) =
        (attr("max_link_width").and_then(|w| w.parse().ok()), attr("max_link_speed"));
    let mut facts = FunctionFacts { subsystem, max_link_width, max_link_speed, ..FunctionFacts::default() };
    // VPD is read through config space, milliseconds a device: only where the link is x8 or narrower
    // (data NICs are x16, the bridge's functions x2) or unknown.
    if facts.max_link_width.is_some_and(|w| w > MAX_VPD_WIDTH) {
        return facts;
    }
    match file::read(&sysfs.path(&format!("class/infiniband/{dev}/device/vpd")), vpd::MAX_BYTES) {
        Ok(bytes) => {
            let v = vpd::parse(&bytes);
            facts.vpd_smdl = v.field("SMDL").map(String::from);
            facts.vpd_product = v.product;
        }
        Err(e) if e.is_not_found() => facts.vpd_unreadable = Some("the function has no vpd".into()),
        Err(e) => facts.vpd_unreadable = Some(e.to_string()),
    }
    facts
}
