//! Source 3: the SR-IOV network device plugin's `PCIDEVICE_<PREFIX>_<RESOURCE>_INFO` (v3.6+, with
//! `rdma.rdma_dev` from v3.10) and plain `PCIDEVICE_<PREFIX>_<RESOURCE>` lists. Parses only; never
//! lets a name it has not validated out.

use std::ffi::{OsStr, OsString};

use serde_json::value::RawValue;
use serde_json::Value;

use crate::detect::dra_metadata::Entries;
use crate::detect::names::{self, NameError};

/// Largest value we parse. Real values are a few hundred bytes per device.
pub(crate) const MAX_VALUE_BYTES: usize = 64 * 1024;

const PREFIX: &str = "PCIDEVICE_";
const INFO_SUFFIX: &str = "_INFO";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allocated {
    pub variable: String,
    /// PCI address or auxiliary device ID.
    pub device_id: String,
    /// The RDMA device name, where the plugin (v3.10+) says it.
    pub rdma_dev: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum SriovError {
    #[error(transparent)]
    Value(#[from] ValueError),
    #[error("{variable}: invalid JSON: {source}")]
    Json { variable: String, source: serde_json::Error },
    #[error("{variable}: expected a JSON object keyed by device ID, found {found}")]
    NotAnObject { variable: String, found: &'static str },
    #[error("{variable}: device ID refused: {source}")]
    BadDeviceId { variable: String, source: NameError },
    #[error("{variable}: rdma.rdma_dev of {device_id} refused ({source}); finding its RDMA device from the device ID instead")]
    BadRdmaDev { variable: String, device_id: String, source: NameError },
    #[error("{variable}: device {device_id} appears twice (first {first}, then {second}); using the second, as JSON decoders (the plugin's Go among them) do")]
    DuplicateId { variable: String, device_id: String, first: String, second: String },
    #[error("{info} and {plain} disagree: {detail}; using {info}")]
    TwinsDisagree { info: String, plain: String, detail: String },
}

#[derive(Debug, Default)]
pub struct Scan {
    pub devices: Vec<Allocated>,
    pub variables: Vec<String>,
    pub problems: Vec<SriovError>,
}

/// Reads every `PCIDEVICE_*` variable; a plain list is used only where its `_INFO` twin is not.
pub fn scan<'a>(vars: impl IntoIterator<Item = (&'a OsString, &'a OsString)>) -> Scan {
    let mut scan = Scan::default();
    let mut plain = Vec::new();
    let mut info_ok = Vec::new();
    for (name, value) in vars {
        let Some(name) = name.to_str().filter(|n| n.starts_with(PREFIX)) else { continue };
        let Some(text) = checked_value(name, value, MAX_VALUE_BYTES, &mut scan.problems) else { continue };
        if let Some(base) = name.strip_suffix(INFO_SUFFIX) {
            match parse_info(name, text, &mut scan.problems) {
                Ok(found) => {
                    scan.variables.push(name.to_string());
                    info_ok.push(base.to_string());
                    scan.devices.extend(found);
                }
                Err(e) => scan.problems.push(e),
            }
        } else {
            plain.push((name.to_string(), text.to_string()));
        }
    }
    for (name, text) in plain {
        if info_ok.contains(&name) {
            scan.problems.extend(twins_disagree(&name, &text, &scan.devices));
            continue;
        }
        scan.variables.push(name.clone());
        for id in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            match names::device_id(id) {
                Ok(id) => {
                    scan.devices.push(Allocated { variable: name.clone(), device_id: id.to_string(), rdma_dev: None })
                }
                Err(source) => scan.problems.push(SriovError::BadDeviceId { variable: name.clone(), source }),
            }
        }
    }
    scan
}

/// The plain list and its `_INFO` twin should name the same device IDs; say so when they do not.
fn twins_disagree(plain: &str, text: &str, from_info: &[Allocated]) -> Option<SriovError> {
    let info = format!("{plain}{INFO_SUFFIX}");
    let listed: Vec<&str> = text.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
    let in_info: Vec<&str> = from_info.iter().filter(|d| d.variable == info).map(|d| d.device_id.as_str()).collect();
    let only = |a: &[&str], b: &[&str]| a.iter().copied().filter(|id| !b.contains(id)).collect::<Vec<_>>().join(",");
    let sides = [(plain, "lists", only(&listed, &in_info)), (&info, "has", only(&in_info, &listed))];
    let detail: Vec<String> = sides
        .iter()
        .filter(|(.., ids)| !ids.is_empty())
        .map(|(v, verb, ids)| format!("only {v} {verb} {ids}"))
        .collect();
    let plain = plain.to_string();
    (!detail.is_empty()).then(|| SriovError::TwinsDisagree { info: info.clone(), plain, detail: detail.join("; ") })
}

/// A variable's value that cannot be read (here and in `sriov_dra`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValueError {
    #[error("{variable}: value is not UTF-8; ignored")]
    NotUtf8 { variable: String },
    #[error("{variable}: value is {len} bytes, over the {max}-byte bound; ignored")]
    TooLarge { variable: String, len: usize, max: usize },
}

/// The value of variable `name` as text, if within `max` bytes and UTF-8; else says why not.
pub(crate) fn checked_value<'v, E: From<ValueError>>(
    name: &str,
    value: &'v OsStr,
    max: usize,
    problems: &mut Vec<E>,
) -> Option<&'v str> {
    let variable = name.to_string();
    if value.len() > max {
        problems.push(ValueError::TooLarge { variable, len: value.len(), max }.into());
        return None;
    }
    let text = value.to_str();
    if text.is_none() {
        problems.push(ValueError::NotUtf8 { variable }.into());
    }
    text
}

/// Parses one `_INFO` value: an error makes it unusable, an entry's problem goes to `problems` (a
/// refused `rdma_dev` keeps its device).
fn parse_info(variable: &str, text: &str, problems: &mut Vec<SriovError>) -> Result<Vec<Allocated>, SriovError> {
    let json = |source| SriovError::Json { variable: variable.to_string(), source };
    let found = match serde_json::from_str::<Value>(text).map_err(json)? {
        Value::Object(_) => None,
        Value::Bool(_) => Some("a boolean"),
        Value::Number(_) => Some("a number"),
        Value::String(_) => Some("a string"),
        Value::Null => Some("null"),
        Value::Array(_) => Some("an array"),
    };
    if let Some(found) = found {
        return Err(SriovError::NotAnObject { variable: variable.to_string(), found });
    }
    let Entries::<&RawValue>(entries) = serde_json::from_str(text).map_err(json)?;
    let mut map: Vec<(String, &RawValue)> = Vec::with_capacity(entries.len());
    for (id, providers) in entries {
        match map.iter_mut().find(|(k, _)| *k == id) {
            Some((_, old)) => {
                let (first, second) = (compact(old), compact(providers));
                problems.push(SriovError::DuplicateId { variable: variable.to_string(), device_id: id, first, second });
                *old = providers;
            }
            None => map.push((id, providers)),
        }
    }
    let mut out = Vec::new();
    for (id, providers) in &map {
        let variable = variable.to_string();
        let bad_id = |source| SriovError::BadDeviceId { variable: variable.clone(), source };
        let Ok(device_id) = names::device_id(id).map_err(|e| problems.push(bad_id(e))) else { continue };
        let device_id = device_id.to_string();
        // Only `rdma.rdma_dev` is read; any other shape leaves the device to its ID.
        let named = serde_json::from_str::<Providers>(providers.get()).ok().and_then(|p| p.rdma?.rdma_dev);
        let rdma_dev = named.as_deref().map(names::device_name).transpose().map_err(|source| {
            problems.push(SriovError::BadRdmaDev { variable: variable.clone(), device_id: device_id.clone(), source })
        });
        let rdma_dev = rdma_dev.ok().flatten().map(String::from);
        out.push(Allocated { variable, device_id, rdma_dev });
    }
    Ok(out)
}

/// One entry's providers: only `rdma.rdma_dev` is read, the rest skipped unread.
#[derive(serde::Deserialize)]
struct Providers<'a> {
    #[serde(borrow, default)]
    rdma: Option<Rdma<'a>>,
}

#[derive(serde::Deserialize)]
struct Rdma<'a> {
    #[serde(borrow, default)]
    rdma_dev: Option<std::borrow::Cow<'a, str>>,
}

/// An entry as one line of JSON, for a message (the variable's own spacing is not kept).
fn compact(raw: &RawValue) -> String {
    serde_json::from_str::<Value>(raw.get()).map_or_else(|_| raw.get().to_string(), |v| v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn vars(pairs: &[(&str, &str)]) -> BTreeMap<OsString, OsString> {
        pairs.iter().map(|(k, v)| (OsString::from(k), OsString::from(v))).collect()
    }

    const V310: &str = r#"{"0000:3b:02.6":{"generic":{"deviceID":"0000:3b:02.6"},"rdma":{"issm":"/dev/infiniband/issm4","rdma_cm":"/dev/infiniband/rdma_cm","rdma_dev":"mlx5_3","umad":"/dev/infiniband/umad4","uverbs":"/dev/infiniband/uverbs4"}}}"#;

    #[test]
    fn a_device_listed_twice_is_reported_with_both_values() {
        let info = r#"{"0000:3b:02.6":{"rdma":{"rdma_dev":"mlx5_3"}},"0000:3b:02.6":{"rdma":{"rdma_dev":"mlx5_4"}}}"#;
        let v = vars(&[("PCIDEVICE_X_INFO", info)]);
        let scan = scan(&v);
        assert_eq!(scan.devices.len(), 1);
        assert_eq!(scan.devices[0].rdma_dev.as_deref(), Some("mlx5_4"));
        let msg = scan.problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n");
        assert!(msg.contains("device 0000:3b:02.6 appears twice"), "{msg}");
        assert!(msg.contains("mlx5_3") && msg.contains("mlx5_4") && msg.contains("using the second"), "{msg}");
    }

    #[test]
    fn a_plain_list_that_disagrees_with_its_info_twin_is_reported() {
        let v = vars(&[("PCIDEVICE_X_INFO", V310), ("PCIDEVICE_X", "0000:3b:02.6,0000:3b:02.7")]);
        let scan = scan(&v);
        assert_eq!(scan.devices.len(), 1, "the _INFO twin wins");
        let msg = scan.problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n");
        assert!(msg.contains("only PCIDEVICE_X lists 0000:3b:02.7; using PCIDEVICE_X_INFO"), "{msg}");
        let agree = vars(&[("PCIDEVICE_X_INFO", V310), ("PCIDEVICE_X", "0000:3b:02.6")]);
        assert!(super::scan(&agree).problems.is_empty());
    }

    #[test]
    fn v3_10_info_names_the_rdma_device() {
        let v = vars(&[
            ("PCIDEVICE_OPENSHIFT_IO_MLX_RDMA", "0000:3b:02.6"),
            ("PCIDEVICE_OPENSHIFT_IO_MLX_RDMA_INFO", V310),
        ]);
        let s = scan(&v);
        assert!(s.problems.is_empty(), "{:?}", s.problems);
        assert_eq!(
            s.devices,
            [Allocated {
                variable: "PCIDEVICE_OPENSHIFT_IO_MLX_RDMA_INFO".into(),
                device_id: "0000:3b:02.6".into(),
                rdma_dev: Some("mlx5_3".into())
            }]
        );
    }

    #[test]
    fn truncated_info_falls_back_to_the_plain_list_and_names_the_position() {
        let v = vars(&[
            ("PCIDEVICE_INTEL_COM_SRIOV_RDMA", "0000:3b:02.6,0000:3b:02.7"),
            ("PCIDEVICE_INTEL_COM_SRIOV_RDMA_INFO", &V310[..60]),
        ]);
        let s = scan(&v);
        assert_eq!(s.devices.len(), 2);
        assert!(s.devices.iter().all(|d| d.rdma_dev.is_none()));
        let msg = s.problems[0].to_string();
        assert!(msg.starts_with("PCIDEVICE_INTEL_COM_SRIOV_RDMA_INFO: invalid JSON: EOF while parsing"), "{msg}");
        assert!(msg.ends_with("at line 1 column 60"), "{msg}");
    }

    #[test]
    fn hostile_rdma_dev_is_refused_not_passed_on() {
        let bad = V310.replace("mlx5_3", "mlx5_3;rm -rf /");
        let v = vars(&[("PCIDEVICE_X_INFO", &bad)]);
        let s = scan(&v);
        assert_eq!(s.devices.len(), 1);
        assert_eq!(s.devices[0].rdma_dev, None);
        assert!(s.problems[0].to_string().contains("refused"));
    }

    #[test]
    fn an_rdma_map_of_another_shape_leaves_the_device_to_its_id() {
        // No name is taken from a map that is not the plugin's: the device is still allocated,
        // and sysfs finds its RDMA device from the PCI address, as before v3.10.0.
        for providers in [
            r#"{"rdma":"mlx5_3"}"#,
            r#"{"rdma":{"rdma_dev":3}}"#,
            r#"{"rdma":{"rdma_dev":"mlx5_3"},"rdma":{"rdma_dev":"mlx5_4"}}"#,
            r#"{"rdma":{"rdma_dev":"mlx5_3","rdma_dev":"mlx5_4"}}"#,
            r#"[1,2]"#,
            r#"{"generic":{"deviceID":"0000:3b:02.6"},"extra":{"a":[{"b":null}]}}"#,
        ] {
            let info = format!(r#"{{"0000:3b:02.6":{providers}}}"#);
            let v = vars(&[("PCIDEVICE_X_INFO", &info)]);
            let s = scan(&v);
            assert_eq!(s.devices.len(), 1, "{providers}");
            assert_eq!(s.devices[0].device_id, "0000:3b:02.6");
            assert_eq!(s.devices[0].rdma_dev, None, "{providers}");
        }
        // Keys the plugin adds around it are skipped, unread.
        let info = r#"{"0000:3b:02.6":{"vfio":{"x":"y"},"rdma":{"uverbs":"/dev/infiniband/uverbs4","rdma_dev":"mlx5_3","new":[1]}}}"#;
        assert_eq!(scan(&vars(&[("PCIDEVICE_X_INFO", info)])).devices[0].rdma_dev.as_deref(), Some("mlx5_3"));
    }

    #[test]
    fn non_object_and_oversized_values_are_reported() {
        let big = "0".repeat(MAX_VALUE_BYTES + 1);
        let v = vars(&[("PCIDEVICE_A_INFO", "[1,2]"), ("PCIDEVICE_B", &big)]);
        let s = scan(&v);
        let msgs: Vec<String> = s.problems.iter().map(ToString::to_string).collect();
        assert!(msgs.iter().any(|m| m.contains("found an array")), "{msgs:?}");
        assert!(msgs.iter().any(|m| m.contains("over the 65536-byte bound")), "{msgs:?}");
    }

    #[test]
    fn unrelated_variables_are_ignored() {
        let v = vars(&[("PATH", "/bin"), ("PCIDEVICEX", "y")]);
        let s = scan(&v);
        assert!(s.devices.is_empty() && s.problems.is_empty());
    }

    #[test]
    fn non_utf8_value_is_reported() {
        use std::os::unix::ffi::OsStringExt;
        let mut v = BTreeMap::new();
        v.insert(OsString::from("PCIDEVICE_A"), OsString::from_vec(vec![0xff, 0xfe]));
        let s = scan(&v);
        assert!(s.problems[0].to_string().contains("not UTF-8"));
    }
}
