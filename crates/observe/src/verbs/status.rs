//! ibverbs' numbers by the names people search for: port states, link layers, completion
//! statuses, errnos, and GIDs in sysfs's form. Pure: unit-tested without hardware.

use std::io;

/// `enum ibv_port_state` as NCCL and sysfs name it.
pub fn port_state_name(state: u32) -> String {
    const NAMES: [&str; 6] = ["NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER"];
    NAMES.get(state as usize).map_or_else(|| format!("UNKNOWN({state})"), |n| (*n).to_owned())
}

/// `IBV_LINK_LAYER_*` as sysfs spells it.
pub(crate) fn link_layer_name(link_layer: u8) -> &'static str {
    match link_layer {
        1 => "InfiniBand",
        2 => "Ethernet",
        _ => "Unspecified",
    }
}

/// `enum ibv_wc_status` by its C name. Our own table rather than `ibv_wc_status_str`, whose
/// prose ("local protection error") is not what people search for.
pub fn wc_status_name(status: u32) -> String {
    const NAMES: [&str; 24] = [
        "IBV_WC_SUCCESS",
        "IBV_WC_LOC_LEN_ERR",
        "IBV_WC_LOC_QP_OP_ERR",
        "IBV_WC_LOC_EEC_OP_ERR",
        "IBV_WC_LOC_PROT_ERR",
        "IBV_WC_WR_FLUSH_ERR",
        "IBV_WC_MW_BIND_ERR",
        "IBV_WC_BAD_RESP_ERR",
        "IBV_WC_LOC_ACCESS_ERR",
        "IBV_WC_REM_INV_REQ_ERR",
        "IBV_WC_REM_ACCESS_ERR",
        "IBV_WC_REM_OP_ERR",
        "IBV_WC_RETRY_EXC_ERR",
        "IBV_WC_RNR_RETRY_EXC_ERR",
        "IBV_WC_LOC_RDD_VIOL_ERR",
        "IBV_WC_REM_INV_RD_REQ_ERR",
        "IBV_WC_REM_ABORT_ERR",
        "IBV_WC_INV_EECN_ERR",
        "IBV_WC_INV_EEC_STATE_ERR",
        "IBV_WC_FATAL_ERR",
        "IBV_WC_RESP_TIMEOUT_ERR",
        "IBV_WC_GENERAL_ERR",
        "IBV_WC_TM_ERR",
        "IBV_WC_TM_RNDV_INCOMPLETE",
    ];
    NAMES.get(status as usize).map_or_else(|| format!("IBV_WC_STATUS_{status}"), |n| (*n).to_owned())
}

/// The completion statuses nccl-wrap explains (`enum ibv_wc_status`; `ffi`'s tests pin them).
pub mod wc {
    pub const LOC_PROT_ERR: u32 = 4;
    pub const LOC_ACCESS_ERR: u32 = 8;
    pub const REM_ACCESS_ERR: u32 = 10;
    pub const RETRY_EXC_ERR: u32 = 12;
    pub const RNR_RETRY_EXC_ERR: u32 = 13;
}

/// A GID as sysfs prints it, so the two can be compared (one formatter, in `sysfs`).
pub fn format_gid(raw: &[u8; 16]) -> String {
    crate::detect::sysfs::format_gid(&std::net::Ipv6Addr::from(*raw))
}

/// The OS error text, with the errno name people grep for.
pub fn errno_text(e: &io::Error) -> String {
    match e.raw_os_error().and_then(errno_name) {
        Some(name) => format!("{name}: {e}"),
        None => e.to_string(),
    }
}

fn errno_name(code: i32) -> Option<&'static str> {
    Some(match code {
        1 => "EPERM",
        2 => "ENOENT",
        5 => "EIO",
        11 => "EAGAIN",
        12 => "ENOMEM",
        13 => "EACCES",
        14 => "EFAULT",
        16 => "EBUSY",
        19 => "ENODEV",
        22 => "EINVAL",
        38 => "ENOSYS",
        61 => "ENODATA",
        95 => "EOPNOTSUPP",
        101 => "ENETUNREACH",
        110 => "ETIMEDOUT",
        113 => "EHOSTUNREACH",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gid_formats_like_sysfs() {
        let mut raw = [0u8; 16];
        raw[10] = 0xff;
        raw[11] = 0xff;
        raw[12..].copy_from_slice(&[10, 0, 106, 7]);
        assert_eq!(format_gid(&raw), "0000:0000:0000:0000:0000:ffff:0a00:6a07");
        let ll = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0x1b, 0x21, 0xff, 0xfe, 0xab, 0xcd, 0xef];
        assert_eq!(format_gid(&ll), "fe80:0000:0000:0000:021b:21ff:feab:cdef");
    }

    #[test]
    fn port_states_and_link_layers_are_named_as_nccl_does() {
        assert_eq!(port_state_name(1), "DOWN");
        assert_eq!(port_state_name(2), "INIT");
        assert_eq!(port_state_name(3), "ARMED");
        assert_eq!(port_state_name(4), "ACTIVE");
        assert_eq!(port_state_name(5), "ACTIVE_DEFER");
        assert_eq!(port_state_name(9), "UNKNOWN(9)");
        assert_eq!(link_layer_name(1), "InfiniBand");
        assert_eq!(link_layer_name(2), "Ethernet");
        assert_eq!(link_layer_name(0), "Unspecified");
    }

    #[test]
    fn errno_text_names_the_errno() {
        assert_eq!(
            errno_text(&io::Error::from_raw_os_error(12)),
            format!("ENOMEM: {}", io::Error::from_raw_os_error(12))
        );
    }
}
