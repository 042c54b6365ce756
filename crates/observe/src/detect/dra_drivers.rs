//! What the DRA NIC drivers publish about a device, as data with its sources: the driver names, the attribute keys
//! carrying a PCI address or an RDMA device, and device names' forms, for `dra_metadata` and `sriov_dra` to look
//! up. Facts and their checks only: never reads a file or the environment.

use crate::detect::names;
use crate::detect::sysfs::looks_like_pci;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Meaning {
    /// The device's PCI address (`0000:08:00.2`): how a device is matched to sysfs.
    PciAddress,
    /// The RDMA device's name on the host at allocation time: a hint only.
    RdmaDevice,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attribute {
    /// The qualified name, `<domain>/<id>`.
    pub key: &'static str,
    pub meaning: Meaning,
    /// Where the key was read: repository, path and commit, or document.
    pub source: &'static str,
}

/// How a driver names its devices in a ResourceSlice (and so in the metadata file).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceNameForm {
    /// `pci-0000-8a-00-0`: dranet's `NormalizePCIAddress`.
    PciPrefixed,
    /// `0000-08-00-2`: the PCI address with `:` and `.` made `-` (the SR-IOV DRA driver).
    PciDashed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Driver {
    /// The driver name, as in `ResourceSlice.spec.driver` and the metadata file's name.
    pub name: &'static str,
    pub device_names: DeviceNameForm,
    pub source: &'static str,
}

/// The drivers whose devices nccl-wrap takes from metadata (another driver's are not NICs).
/// dranet writes no metadata files (f258477); the SR-IOV DRA driver writes `v1alpha1` behind
/// `--enable-device-metadata`.
pub const DRIVERS: &[Driver] = &[
    Driver {
        name: "dra.net",
        device_names: DeviceNameForm::PciPrefixed,
        source: "kubernetes-sigs/dranet cmd/dranet/app.go (driverName), pkg/names/names.go @ f258477",
    },
    Driver {
        name: "sriovnetwork.k8snetworkplumbingwg.io",
        device_names: DeviceNameForm::PciDashed,
        source: "k8snetworkplumbingwg/dra-driver-sriov pkg/consts/consts.go (DriverName), cmd/dra-driver-sriov/main.go @ cd9404f",
    },
];

/// The attribute keys nccl-wrap reads (docs/field-inputs.md lists the others drivers publish); for a
/// PCI address the first present wins.
pub const ATTRIBUTES: &[Attribute] = &[
    Attribute {
        key: "resource.kubernetes.io/pciBusID",
        meaning: Meaning::PciAddress,
        source: "kubernetes/dynamic-resource-allocation deviceattribute/attribute.go (StandardDeviceAttributePCIBusID) @ 3d03671",
    },
    Attribute {
        key: "dra.net/pciAddress",
        meaning: Meaning::PciAddress,
        source: "kubernetes-sigs/dranet pkg/apis/attributes.go (AttrPCIAddress) @ f258477",
    },
    Attribute {
        key: "sriovnetwork.k8snetworkplumbingwg.io/pciAddress",
        meaning: Meaning::PciAddress,
        source: "k8snetworkplumbingwg/dra-driver-sriov pkg/consts/consts.go (AttributePciAddress) @ cd9404f",
    },
    Attribute {
        key: "dra.net/rdmaDevice",
        meaning: Meaning::RdmaDevice,
        source: "kubernetes-sigs/dranet pkg/apis/attributes.go (AttrRDMADevice) @ f258477",
    },
];

pub fn driver(name: &str) -> Option<&'static Driver> {
    DRIVERS.iter().find(|d| d.name == name)
}

/// The keys that carry `meaning`, in the table's order (its preference).
pub fn keys_for(meaning: Meaning) -> impl Iterator<Item = &'static str> {
    ATTRIBUTES.iter().filter(move |a| a.meaning == meaning).map(|a| a.key)
}

/// A PCI address in sysfs's form, `dddd:bb:ss.f` in lower case, from `s` in that form; anything
/// else is `None`, since the address becomes part of a sysfs path.
pub fn pci_address(s: &str) -> Option<String> {
    // The function number is 0..7 (3 bits; ARI's larger ones are spelled through the slot), the slot 5 bits.
    let ok = looks_like_pci(s) && s.as_bytes()[11] <= b'7' && u8::from_str_radix(&s[8..10], 16).is_ok_and(|s| s < 0x20);
    ok.then(|| s.to_ascii_lowercase())
}

/// The PCI address a device name of `form` spells (`pci-0000-8a-00-0`, `0000-08-00-2`), if any.
pub fn pci_address_from_name(form: DeviceNameForm, name: &str) -> Option<String> {
    let dashed = match form {
        DeviceNameForm::PciPrefixed => name.strip_prefix("pci-")?,
        DeviceNameForm::PciDashed => name,
    };
    let b = dashed.as_bytes();
    if b.len() != 12 || b[4] != b'-' || b[7] != b'-' || b[10] != b'-' {
        return None;
    }
    pci_address(&format!("{}:{}:{}.{}", &dashed[..4], &dashed[5..7], &dashed[8..10], &dashed[11..]))
}

/// Longest RDMA device name the kernel allows (IB_DEVICE_NAME_MAX - 1).
pub const MAX_RDMA_NAME: usize = 63;
/// Longest interface name the kernel allows (IFNAMSIZ - 1).
pub const MAX_IFNAME: usize = 15;

/// Whether `name` is a device or interface name of at most `max` bytes safe for `NCCL_IB_HCA` and a
/// sysfs path (`detect::names`' rule).
pub fn name_ok(name: &str, max: usize) -> bool {
    name.len() <= max && names::device_name(name).is_ok()
}

/// A Kubernetes object name: a DNS subdomain (lower-case alphanumerics, `-`, `.`, at most 253).
pub(crate) fn k8s_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.bytes().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-' || c == b'.')
        && !s.starts_with(['-', '.'])
        && !s.ends_with(['-', '.'])
}

/// A string from outside, fit for a message: printable ASCII, the rest `?`, at most `max` chars.
pub(crate) fn printable(s: &str, max: usize) -> String {
    s.chars().take(max).map(|c| if c.is_ascii_graphic() || c == ' ' { c } else { '?' }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_names_its_source_and_no_key_or_driver_is_listed_twice() {
        for (i, a) in ATTRIBUTES.iter().enumerate() {
            assert!(!a.source.is_empty() && a.key.contains('/'), "{a:?}");
            assert!(ATTRIBUTES[..i].iter().all(|b| b.key != a.key), "{} twice", a.key);
        }
        for (i, d) in DRIVERS.iter().enumerate() {
            assert!(!d.source.is_empty(), "{d:?}");
            assert!(DRIVERS[..i].iter().all(|e| e.name != d.name), "{} twice", d.name);
        }
    }

    #[test]
    fn the_standard_pci_key_comes_first() {
        let keys: Vec<_> = keys_for(Meaning::PciAddress).collect();
        assert_eq!(keys[0], "resource.kubernetes.io/pciBusID");
        assert_eq!(keys.len(), 3);
        let attribute = |key| ATTRIBUTES.iter().find(|a| a.key == key);
        assert_eq!(attribute("dra.net/rdmaDevice").map(|a| a.meaning), Some(Meaning::RdmaDevice));
        assert!(driver("sriov.k8snetworkplumbingwg.io").is_none(), "only the name the driver registers");
    }

    #[test]
    fn pci_addresses_are_checked_and_lower_cased() {
        assert_eq!(pci_address("0000:08:00.2").as_deref(), Some("0000:08:00.2"));
        assert_eq!(pci_address("0000:8A:1F.7").as_deref(), Some("0000:8a:1f.7"));
        for bad in [
            "",
            "08:00.2",
            "0000:08:00.8",
            "0000:08:20.0",
            "0000:08:00.2\n",
            "0000_08_00_2",
            "../../x/yy.z",
            "0000:0g:00.0",
        ] {
            assert_eq!(pci_address(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn device_names_spell_addresses_in_each_drivers_form() {
        assert_eq!(
            pci_address_from_name(DeviceNameForm::PciPrefixed, "pci-0101-00-00-0").as_deref(),
            Some("0101:00:00.0")
        );
        assert_eq!(pci_address_from_name(DeviceNameForm::PciDashed, "0000-08-00-2").as_deref(), Some("0000:08:00.2"));
        assert_eq!(pci_address_from_name(DeviceNameForm::PciPrefixed, "0000-08-00-2"), None);
        assert_eq!(pci_address_from_name(DeviceNameForm::PciDashed, "gpu0rdma0"), None);
        assert_eq!(pci_address_from_name(DeviceNameForm::PciDashed, "0000-08-00-9"), None);
    }

    #[test]
    fn names_that_would_leave_a_path_or_split_a_list_are_refused() {
        assert!(name_ok("rdma_0_1_0", MAX_RDMA_NAME) && name_ok("net1", MAX_IFNAME));
        for bad in ["", ".", "..", "mlx5_1,mlx5_2", "a/b", "mlx5_1;rm", "é", "sixteen-chars-xx"] {
            assert!(!name_ok(bad, MAX_IFNAME), "{bad:?}");
        }
    }
}
