//! PCI Vital Product Data (`device/vpd`): the product name and the vendor-specific keywords, whose
//! `SMDL=SW_MNG` marks an HGX B200/B300 NVSwitch management function (docs/field-inputs.md, section
//! 6). Layout: PCI Local Bus 3.0, 6.3. Pure: every length is checked against what is left.

/// What sysfs shows of VPD is at most the capability's 15-bit address space.
pub const MAX_BYTES: usize = 32 * 1024;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Vpd {
    /// The identifier string, printable ASCII only.
    pub product: Option<String>,
    /// The vendor-specific (`V0`..`VZ`) keywords' `NAME=VALUE` fields, `:`-separated, in order.
    pub fields: Vec<(String, String)>,
}

impl Vpd {
    /// A vendor-specific field's value (`SMDL` -> `SW_MNG`).
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
}

/// Parses VPD bytes; what cannot be read stops the walk and keeps what was read before it.
pub fn parse(bytes: &[u8]) -> Vpd {
    let mut out = Vpd::default();
    let b = &bytes[..bytes.len().min(MAX_BYTES)];
    let mut i = 0;
    while i < b.len() {
        let tag = b[i];
        if tag & 0x80 == 0 {
            // A small resource: the end tag stops the walk, any other is skipped.
            if tag & 0x78 == 0x78 {
                break;
            }
            i += 1 + usize::from(tag & 0x07);
            continue;
        }
        let Some(len) = b.get(i + 1..i + 3).map(|l| usize::from(u16::from_le_bytes([l[0], l[1]]))) else { break };
        let start = i + 3;
        let Some(data) = b.get(start..start + len) else { break };
        match tag {
            0x82 => out.product = Some(printable(data)).filter(|p| !p.is_empty()),
            0x90 | 0x91 => keywords(data, &mut out.fields),
            _ => {}
        }
        i = start + len;
    }
    out
}

/// The vendor-specific keywords of a VPD-R or VPD-W resource, as `NAME=VALUE` fields.
fn keywords(data: &[u8], fields: &mut Vec<(String, String)>) {
    let mut k = 0;
    while k + 3 <= data.len() {
        let (key, len) = ([data[k], data[k + 1]], usize::from(data[k + 2]));
        let Some(value) = data.get(k + 3..k + 3 + len) else { return };
        if key[0] == b'V' && key[1].is_ascii_alphanumeric() {
            let text = printable(value);
            let pairs = text.split(':').filter_map(|p| p.split_once('=')).filter(|(name, _)| !name.is_empty());
            fields.extend(pairs.map(|(n, v)| (n.to_string(), v.to_string())).take(64 - fields.len()));
        }
        k += 3 + len;
    }
}

/// Bytes for a message or a comparison: printable ASCII, at most 128 characters, the rest left out.
fn printable(b: &[u8]) -> String {
    b.iter().filter(|c| c.is_ascii_graphic() || **c == b' ').take(128).map(|c| char::from(*c)).collect::<String>()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(dev: &str) -> Vec<u8> {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures/nodes/hgx-b200-lpf/sys/class/infiniband")
            .join(dev)
            .join("device/vpd");
        std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    }

    #[test]
    fn the_management_bridges_vpd_says_sw_mng_and_a_data_nics_does_not() {
        let v = parse(&fixture("mlx5_0"));
        assert_eq!(v.product.as_deref(), Some("Nvidia ConnectX-7 mezz internal for Nvidia Umbriel system"));
        assert_eq!(v.field("SMDL"), Some("SW_MNG"));
        assert_eq!(v.field("MODL"), Some("C7010Z"));
        let v = parse(&fixture("mlx5_4"));
        assert!(v.product.as_deref().is_some_and(|p| p.contains("HHHL Adapter Card")), "{v:?}");
        assert_eq!(v.field("SMDL"), None);
    }

    #[test]
    fn truncated_or_garbage_vpd_is_read_as_far_as_it_goes() {
        let whole = fixture("mlx5_0");
        for n in 0..whole.len() {
            let v = parse(&whole[..n]);
            assert!(v.fields.len() <= 64);
        }
        assert_eq!(parse(&[0x82, 0xff, 0xff, b'a']), Vpd::default());
        assert_eq!(parse(&[0x90, 0x04, 0x00, b'V', b'A', 0x09, b'S']), Vpd::default());
        assert_eq!(parse(&[0x78, 0x82, 0x01, 0x00, b'x']), Vpd::default());
        assert_eq!(parse(&[0x91, 0x06, 0x00, b'V', b'Z', 0x03, b'a', b'=', b'b']).field("a"), Some("b"));
    }
}
