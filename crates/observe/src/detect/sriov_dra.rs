//! Source 2: the SR-IOV DRA driver's `SRIOVNETWORK_*` variables (k8snetworkplumbingwg/dra-driver-sriov,
//! pkg/cdi/cdi.go @ cd9404f), per device `<dev>` (its DRA name, `0000-08-00-2`, with `-` made `_`): `VF_DEVICE_<dev>`
//! (the PCI address that finds it in sysfs), `<dev>_RDMA_{UVERB,UMAD,ISSM,CM}`, `<dev>_RDMA_DEVICE` (the host's name
//! at prepare time: a hint), `<dev>_VFIO_DEVICE`; once, `NET_ATTACH_DEF_NAME` (one value survives) and
//! `PCI_ADDRESSES` (every device prepared for the pod). Parses only; never lets an unchecked name, address or path out.

use std::collections::BTreeMap;
use std::ffi::OsString;

use crate::detect::dra_drivers;
use crate::detect::sriov::{checked_value, ValueError};

pub const PREFIX: &str = "SRIOVNETWORK_";
/// Largest value read. Real values are a device path or an address list of a few hundred bytes.
pub const MAX_VALUE_BYTES: usize = 16 * 1024;
/// At most this many devices are read; a pod has a handful, a node some hundreds of VFs.
pub const MAX_DEVICES: usize = 1024;

const VF_DEVICE: &str = "SRIOVNETWORK_VF_DEVICE_";
const NAD: &str = "SRIOVNETWORK_NET_ATTACH_DEF_NAME";
const PCI_ADDRESSES: &str = "SRIOVNETWORK_PCI_ADDRESSES";

/// The character devices and name the driver gives an RDMA-capable VF.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rdma {
    /// The host's RDMA device name when the claim was prepared (checked); a hint only.
    pub device: Option<String>,
    /// `/dev/infiniband/uverbsN`, checked to be exactly that form.
    pub uverbs: Option<String>,
    pub umad: Option<String>,
    pub issm: Option<String>,
    pub rdma_cm: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Vf {
    /// The `<dev>` part of the variables' names (`0000_08_00_2`).
    pub key: String,
    /// Checked, `dddd:bb:ss.f`: from `SRIOVNETWORK_VF_DEVICE_<dev>`, else spelled by `<dev>`.
    pub pci_address: Option<String>,
    /// `None` when no `_RDMA_*` variable names the device (a VF not RDMA-capable).
    pub rdma: Option<Rdma>,
    /// `/dev/vfio/<group>` for a VF bound to vfio-pci (no RDMA through it).
    pub vfio_device: Option<String>,
}

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Scan {
    /// By key, in key order.
    pub devices: Vec<Vf>,
    pub net_attach_def: Option<String>,
    /// `SRIOVNETWORK_PCI_ADDRESSES`, each checked (the pod's, other containers' VFs included).
    pub pci_addresses: Vec<String>,
    /// The variables read, sorted.
    pub variables: Vec<String>,
    /// `SRIOVNETWORK_*` variables of no form this reader knows (a newer driver's), sorted.
    pub unknown: Vec<String>,
    pub problems: Vec<SriovDraError>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SriovDraError {
    #[error(transparent)]
    Value(#[from] ValueError),
    #[error("{variable}: device key {key:?} has characters outside [A-Za-z0-9_]; ignored")]
    BadKey { variable: String, key: String },
    #[error("{variable}: {value:?} is not a PCI address")]
    BadPciAddress { variable: String, value: String },
    #[error("{variable}: {value:?} is not {expected}; ignored")]
    BadPath { variable: String, value: String, expected: &'static str },
    #[error("{variable}: {value:?} is not an RDMA device name; the PCI address finds the device instead")]
    BadRdmaDevice { variable: String, value: String },
    #[error("{variable}: {value:?} is not a NetworkAttachmentDefinition name; ignored")]
    BadNetAttachDef { variable: String, value: String },
    #[error("device {key}: no {VF_DEVICE}{key}; the address is taken from the key")]
    NoVfDevice { key: String },
    #[error("{variable}={value} but its name spells {from_key}; using {value}")]
    KeyDisagrees { variable: String, value: String, from_key: String },
    #[error("{PCI_ADDRESSES} and the VF_DEVICE variables disagree: {detail}")]
    AddressesDisagree { detail: String },
    #[error("more than {MAX_DEVICES} devices; the rest are ignored")]
    TooManyDevices,
}

pub fn scan<'a>(vars: impl IntoIterator<Item = (&'a OsString, &'a OsString)>) -> Scan {
    let mut out = Scan::default();
    let mut by_key: BTreeMap<String, Vf> = BTreeMap::new();
    let mut listed = None;
    for (name, value) in vars {
        let Some(name) = name.to_str().filter(|n| n.starts_with(PREFIX)) else { continue };
        // The name as messages show it: a variable's name is bytes from outside too.
        let shown = quoted(name);
        let Some(value) = checked_value(&shown, value, MAX_VALUE_BYTES, &mut out.problems) else { continue };
        let variable = name.to_string();
        if name == NAD {
            // A NetworkAttachmentDefinition name is a DNS subdomain.
            if dra_drivers::k8s_name(value) {
                out.net_attach_def = Some(value.to_string());
            } else {
                out.problems.push(SriovDraError::BadNetAttachDef { variable: shown, value: quoted(value) });
            }
        } else if name == PCI_ADDRESSES {
            let list = value.split(',').map(str::trim).filter(|s| !s.is_empty()).filter_map(|a| {
                let found = dra_drivers::pci_address(a);
                if found.is_none() {
                    out.problems.push(SriovDraError::BadPciAddress { variable: shown.clone(), value: quoted(a) });
                }
                found
            });
            listed = Some(list.collect::<Vec<_>>());
        } else if let Some((key, field)) = split(name) {
            if !key_ok(key) {
                out.problems.push(SriovDraError::BadKey { variable: shown, key: quoted(key) });
                continue;
            }
            if !by_key.contains_key(key) && by_key.len() >= MAX_DEVICES {
                if !out.problems.contains(&SriovDraError::TooManyDevices) {
                    out.problems.push(SriovDraError::TooManyDevices);
                }
                continue;
            }
            let vf = by_key.entry(key.to_string()).or_insert_with(|| Vf { key: key.to_string(), ..Vf::default() });
            field.apply(vf, &shown, value, &mut out.problems);
        } else {
            out.unknown.push(variable);
            continue;
        }
        out.variables.push(variable);
    }

    for vf in by_key.values_mut() {
        let from_key = key_address(&vf.key);
        match (&vf.pci_address, from_key) {
            (None, from_key) => {
                out.problems.push(SriovDraError::NoVfDevice { key: vf.key.clone() });
                vf.pci_address = from_key;
            }
            (Some(a), Some(k)) if *a != k => {
                let (variable, value) = (format!("{VF_DEVICE}{}", vf.key), a.clone());
                out.problems.push(SriovDraError::KeyDisagrees { variable, value, from_key: k })
            }
            _ => {}
        }
    }
    out.devices = by_key.into_values().collect();
    if let Some(list) = listed {
        let mine: Vec<&str> = out.devices.iter().filter_map(|d| d.pci_address.as_deref()).collect();
        let missing: Vec<&str> = mine.iter().copied().filter(|a| !list.iter().any(|l| l == a)).collect();
        if !missing.is_empty() {
            let detail = format!("{} not in {PCI_ADDRESSES}", missing.join(","));
            out.problems.push(SriovDraError::AddressesDisagree { detail });
        }
        out.pci_addresses = list;
    }
    out.variables.sort();
    out.unknown.sort();
    out
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    VfDevice,
    Uverb,
    Umad,
    Issm,
    Cm,
    RdmaDevice,
    Vfio,
}

const SUFFIXES: &[(&str, Field)] = &[
    ("_RDMA_UVERB", Field::Uverb),
    ("_RDMA_UMAD", Field::Umad),
    ("_RDMA_ISSM", Field::Issm),
    ("_RDMA_CM", Field::Cm),
    ("_RDMA_DEVICE", Field::RdmaDevice),
    ("_VFIO_DEVICE", Field::Vfio),
];

/// `SRIOVNETWORK_VF_DEVICE_<key>` or `SRIOVNETWORK_<key><suffix>`.
fn split(name: &str) -> Option<(&str, Field)> {
    if let Some(key) = name.strip_prefix(VF_DEVICE) {
        return Some((key, Field::VfDevice));
    }
    let rest = name.strip_prefix(PREFIX)?;
    SUFFIXES.iter().find_map(|(suffix, f)| rest.strip_suffix(suffix).map(|key| (key, *f)))
}

impl Field {
    fn apply(self, vf: &mut Vf, variable: &str, value: &str, problems: &mut Vec<SriovDraError>) {
        const RDMA_CM: &str = "/dev/infiniband/rdma_cm";
        let variable = variable.to_string();
        let (slot, prefix, expected) = match self {
            Field::VfDevice => {
                match dra_drivers::pci_address(value) {
                    Some(a) => vf.pci_address = Some(a),
                    None => problems.push(SriovDraError::BadPciAddress { variable, value: quoted(value) }),
                }
                return;
            }
            Field::RdmaDevice => {
                let rdma = rdma(vf);
                if dra_drivers::name_ok(value, dra_drivers::MAX_RDMA_NAME) {
                    rdma.device = Some(value.to_string());
                } else {
                    problems.push(SriovDraError::BadRdmaDevice { variable, value: quoted(value) });
                }
                return;
            }
            Field::Vfio => (&mut vf.vfio_device, "/dev/vfio/", "/dev/vfio/<group>"),
            Field::Uverb => (&mut rdma(vf).uverbs, "/dev/infiniband/uverbs", "/dev/infiniband/uverbs<N>"),
            Field::Umad => (&mut rdma(vf).umad, "/dev/infiniband/umad", "/dev/infiniband/umad<N>"),
            Field::Issm => (&mut rdma(vf).issm, "/dev/infiniband/issm", "/dev/infiniband/issm<N>"),
            Field::Cm => (&mut rdma(vf).rdma_cm, RDMA_CM, RDMA_CM),
        };
        // `rdma_cm` alone has no number; the others end in a decimal one of at most 10 digits.
        let digits =
            |n: &str| n.is_empty() == (self == Field::Cm) && n.len() <= 10 && n.bytes().all(|b| b.is_ascii_digit());
        let ok = value.strip_prefix(prefix).is_some_and(digits);
        if !ok {
            problems.push(SriovDraError::BadPath { variable, value: quoted(value), expected });
        }
        *slot = ok.then(|| value.to_string());
    }
}

fn rdma(vf: &mut Vf) -> &mut Rdma {
    vf.rdma.get_or_insert_with(Rdma::default)
}

/// The key `0000_08_00_2` spells `0000:08:00.2`.
fn key_address(key: &str) -> Option<String> {
    dra_drivers::pci_address_from_name(dra_drivers::DeviceNameForm::PciDashed, &key.replace('_', "-"))
}

/// An environment variable name's part: `[A-Za-z0-9_]`, at most 253 bytes.
fn key_ok(key: &str) -> bool {
    !key.is_empty() && key.len() <= 253 && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

fn quoted(s: &str) -> String {
    dra_drivers::printable(s, 100)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(lines: &str) -> BTreeMap<OsString, OsString> {
        lines.lines().filter_map(|l| l.split_once('=')).map(|(k, v)| (OsString::from(k), OsString::from(v))).collect()
    }

    const TWO: &str = "SRIOVNETWORK_VF_DEVICE_0000_08_00_2=0000:08:00.2
SRIOVNETWORK_0000_08_00_2_RDMA_UVERB=/dev/infiniband/uverbs5
SRIOVNETWORK_0000_08_00_2_RDMA_UMAD=/dev/infiniband/umad5
SRIOVNETWORK_0000_08_00_2_RDMA_ISSM=/dev/infiniband/issm5
SRIOVNETWORK_0000_08_00_2_RDMA_CM=/dev/infiniband/rdma_cm
SRIOVNETWORK_0000_08_00_2_RDMA_DEVICE=mlx5_5
SRIOVNETWORK_VF_DEVICE_0000_08_00_3=0000:08:00.3
SRIOVNETWORK_0000_08_00_3_RDMA_UVERB=/dev/infiniband/uverbs6
SRIOVNETWORK_0000_08_00_3_RDMA_DEVICE=mlx5_6
SRIOVNETWORK_NET_ATTACH_DEF_NAME=rdma-rail
SRIOVNETWORK_PCI_ADDRESSES=0000:08:00.2,0000:08:00.3
PATH=/usr/bin
PCIDEVICE_X=0000:3b:02.6";

    #[test]
    fn the_drivers_variables_become_devices() {
        let s = scan(&vars(TWO));
        assert!(s.problems.is_empty() && s.unknown.is_empty(), "{s:?}");
        assert_eq!(s.devices.len(), 2);
        let d = &s.devices[0];
        assert_eq!((d.key.as_str(), d.pci_address.as_deref()), ("0000_08_00_2", Some("0000:08:00.2")));
        let r = d.rdma.as_ref().expect("rdma");
        assert_eq!(r.device.as_deref(), Some("mlx5_5"));
        assert_eq!(r.uverbs.as_deref(), Some("/dev/infiniband/uverbs5"));
        assert_eq!(r.rdma_cm.as_deref(), Some("/dev/infiniband/rdma_cm"));
        assert_eq!(s.devices[1].rdma.as_ref().and_then(|r| r.umad.clone()), None);
        assert_eq!(s.net_attach_def.as_deref(), Some("rdma-rail"));
        assert_eq!(s.pci_addresses, ["0000:08:00.2", "0000:08:00.3"]);
        assert_eq!(s.variables.len(), 11);
        assert!(s.variables.iter().all(|v| v.starts_with(PREFIX)));
    }

    #[test]
    fn the_committed_fixture_env_reads() {
        let Some(text) = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .ancestors()
            .find_map(|d| std::fs::read_to_string(d.join("fixtures/nodes/dra-sriov-env/env")).ok())
        else {
            eprintln!("fixtures not beside this build; skipped");
            return;
        };
        let s = scan(&vars(&text));
        assert!(s.problems.is_empty(), "{:?}", s.problems);
        let found: Vec<_> =
            s.devices.iter().map(|d| (d.pci_address.clone(), d.rdma.as_ref().and_then(|r| r.device.clone()))).collect();
        assert_eq!(
            found,
            [
                (Some("0000:08:00.2".into()), Some("mlx5_5".into())),
                (Some("0000:08:00.3".into()), Some("mlx5_6".into()))
            ]
        );
    }

    #[test]
    fn a_vf_without_rdma_has_none() {
        let s = scan(&vars(
            "SRIOVNETWORK_VF_DEVICE_0000_08_00_4=0000:08:00.4\nSRIOVNETWORK_0000_08_00_4_VFIO_DEVICE=/dev/vfio/42",
        ));
        assert_eq!(s.devices[0].rdma, None);
        assert_eq!(s.devices[0].vfio_device.as_deref(), Some("/dev/vfio/42"));
        assert!(s.problems.is_empty(), "{:?}", s.problems);
    }

    #[test]
    fn hostile_values_are_refused_and_the_address_still_finds_the_device() {
        let s = scan(&vars(
            "SRIOVNETWORK_VF_DEVICE_0000_08_00_2=0000:08:00.2
SRIOVNETWORK_0000_08_00_2_RDMA_DEVICE=mlx5_1,mlx5_2
SRIOVNETWORK_0000_08_00_2_RDMA_UVERB=/dev/infiniband/../../etc/shadow
SRIOVNETWORK_0000_08_00_2_RDMA_CM=/dev/infiniband/rdma_cm2
SRIOVNETWORK_0000_08_00_2_VFIO_DEVICE=/dev/vfio/
SRIOVNETWORK_NET_ATTACH_DEF_NAME=Rdma Rail;x
SRIOVNETWORK_PCI_ADDRESSES=0000:08:00.2,,../x
SRIOVNETWORK_a/b_RDMA_DEVICE=mlx5_0",
        ));
        let d = &s.devices[0];
        assert_eq!(d.pci_address.as_deref(), Some("0000:08:00.2"));
        assert_eq!(d.rdma, Some(Rdma::default()), "every RDMA value refused, the device kept");
        assert_eq!((d.vfio_device.as_ref(), s.net_attach_def.as_ref()), (None, None));
        assert_eq!(s.pci_addresses, ["0000:08:00.2"]);
        assert_eq!(s.problems.len(), 7, "{:#?}", s.problems);
        assert!(s.problems.iter().all(|p| !p.to_string().contains(char::is_control)));
    }

    #[test]
    fn a_device_named_only_by_rdma_variables_takes_its_address_from_the_key() {
        let s = scan(&vars("SRIOVNETWORK_0000_3b_02_6_RDMA_UVERB=/dev/infiniband/uverbs4"));
        assert_eq!(s.devices[0].pci_address.as_deref(), Some("0000:3b:02.6"));
        assert!(matches!(&s.problems[..], [SriovDraError::NoVfDevice { .. }]));
        let s = scan(&vars("SRIOVNETWORK_vf0_RDMA_UVERB=/dev/infiniband/uverbs4"));
        assert_eq!(s.devices[0].pci_address, None);
    }

    #[test]
    fn disagreements_are_reported() {
        let s =
            scan(&vars("SRIOVNETWORK_VF_DEVICE_0000_08_00_2=0000:08:00.3\nSRIOVNETWORK_PCI_ADDRESSES=0000:08:00.2"));
        let msgs: Vec<String> = s.problems.iter().map(ToString::to_string).collect();
        assert!(msgs.iter().any(|m| m.contains("its name spells 0000:08:00.2; using 0000:08:00.3")), "{msgs:?}");
        assert!(msgs.iter().any(|m| m.contains("0000:08:00.3 not in SRIOVNETWORK_PCI_ADDRESSES")), "{msgs:?}");
    }

    #[test]
    fn unknown_driver_variables_are_listed_not_read() {
        let s = scan(&vars("SRIOVNETWORK_0000_08_00_2_NEW_THING=1\nSRIOVNETWORKX=2"));
        assert_eq!(s.unknown, ["SRIOVNETWORK_0000_08_00_2_NEW_THING"]);
        assert!(s.devices.is_empty() && s.variables.is_empty());
    }

    #[test]
    fn non_utf8_and_oversized_values_are_reported() {
        use std::os::unix::ffi::OsStringExt;
        let mut v = BTreeMap::new();
        v.insert(OsString::from("SRIOVNETWORK_VF_DEVICE_A"), OsString::from_vec(vec![0xff, 0xfe]));
        v.insert(OsString::from("SRIOVNETWORK_PCI_ADDRESSES"), OsString::from("0".repeat(10 << 20)));
        let s = scan(&v);
        let msgs: Vec<String> = s.problems.iter().map(ToString::to_string).collect();
        assert!(
            msgs.iter().any(|m| m.contains("not UTF-8"))
                && msgs.iter().any(|m| m.contains("over the 16384-byte bound")),
            "{msgs:?}"
        );
        assert!(s.devices.is_empty());
    }

    #[test]
    fn a_variable_name_is_shown_printable() {
        // Found by the fuzz target: a name's bytes reached a message as they were.
        let v =
            vars("SRIOVNETWORK_VF_DE\u{0}\u{1b}[2J_0000_08_00_3=0000:08:00.3\nSRIOVNETWORK_\u{1b}_RDMA_UVERB=/dev/x");
        let s = scan(&v);
        assert_eq!((s.problems.len(), s.unknown.len()), (1, 1), "{s:?}");
        assert!(s.problems.iter().all(|p| !p.to_string().contains(char::is_control)), "{:?}", s.problems);
    }

    #[test]
    fn the_device_count_is_bounded() {
        let text: String =
            (0..MAX_DEVICES + 5).map(|i| format!("SRIOVNETWORK_VF_DEVICE_d{i}=0000:08:00.2\n")).collect();
        let s = scan(&vars(&text));
        assert_eq!(s.devices.len(), MAX_DEVICES);
        assert_eq!(s.problems.iter().filter(|p| **p == SriovDraError::TooManyDevices).count(), 1);
    }

    #[test]
    fn the_order_of_the_environment_does_not_matter() {
        let v = vars(TWO);
        assert_eq!(scan(&v), scan(v.iter().rev()));
    }
}
