//! Source 4: the `k8s.v1.cni.cncf.io/network-status` annotation from the downward-API file (one
//! `key="value"` line each, Go-quoted), its entries' `device-info` (spec 1.1.0) `pci.rdma-device` or
//! `pci.pci-address`. Parsing only: no sysfs, no unvalidated names out.

use serde_json::Value;

use crate::detect::names::{self, NameError};

pub const NETWORK_STATUS: &str = "k8s.v1.cni.cncf.io/network-status";
/// Largest annotations file we read.
pub(crate) const MAX_FILE_BYTES: usize = 1024 * 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attached {
    /// The attachment's `name` (e.g. `default/sriov-rdma`), for messages.
    pub network: String,
    pub interface: Option<String>,
    pub rdma_dev: Option<String>,
    pub pci_address: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum AnnotationError {
    #[error("{path}: line {line}: value of {key} is not a valid Go-quoted string")]
    Quoting { path: String, line: usize, key: String },
    #[error("{path}: {NETWORK_STATUS} is not valid JSON: {source}")]
    Json { path: String, source: serde_json::Error },
    #[error("{path}: {NETWORK_STATUS} is not a JSON list")]
    NotAList { path: String },
    #[error("{path}: network {network:?}: {field} refused: {source}")]
    BadName { path: String, network: String, field: &'static str, source: NameError },
}

#[derive(Debug, Default)]
pub struct Scan {
    pub devices: Vec<Attached>,
    /// Whether the file held the network-status annotation at all.
    pub found: bool,
    pub problems: Vec<AnnotationError>,
}

/// Parses the annotations file's text; `path` is only used in messages.
pub fn scan(path: &str, text: &str) -> Scan {
    let mut scan = Scan::default();
    for (n, line) in text.lines().enumerate() {
        let Some((key, quoted)) = line.split_once('=') else { continue };
        if key.trim() != NETWORK_STATUS {
            continue;
        }
        scan.found = true;
        let Some(json) = go_unquote(quoted.trim()) else {
            scan.problems.push(AnnotationError::Quoting { path: path.into(), line: n + 1, key: NETWORK_STATUS.into() });
            continue;
        };
        match serde_json::from_str::<Value>(&json) {
            Ok(Value::Array(entries)) => entries.iter().for_each(|e| attachment(path, e, &mut scan)),
            Ok(_) => scan.problems.push(AnnotationError::NotAList { path: path.into() }),
            Err(source) => scan.problems.push(AnnotationError::Json { path: path.into(), source }),
        }
    }
    scan
}

fn attachment(path: &str, entry: &Value, scan: &mut Scan) {
    let network = entry.get("name").and_then(Value::as_str).unwrap_or("?").chars().take(100).collect::<String>();
    let Some(pci) = entry.pointer("/device-info/pci") else { return };
    let field = |f: &str| pci.get(f).and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty());
    let interface =
        entry.get("interface").and_then(Value::as_str).and_then(|i| names::device_name(i).ok()).map(String::from);
    let mut bad = |field: &'static str, source| {
        scan.problems.push(AnnotationError::BadName { path: path.into(), network: network.clone(), field, source })
    };
    let pci_address = field("pci-address").and_then(|a| names::device_id(a).map_err(|e| bad("pci-address", e)).ok());
    let pci_address = pci_address.map(String::from);
    let listed = field("rdma-device").into_iter().flat_map(|l| l.split(',')).map(str::trim).filter(|d| !d.is_empty());
    let mut rdma: Vec<Option<String>> = listed
        .filter_map(|dev| names::device_name(dev).map_err(|e| bad("rdma-device", e)).ok())
        .map(|d| Some(d.to_string()))
        .collect();
    // An address alone names the device too.
    if rdma.is_empty() && pci_address.is_some() {
        rdma.push(None);
    }
    for rdma_dev in rdma {
        let (network, interface, pci_address) = (network.clone(), interface.clone(), pci_address.clone());
        scan.devices.push(Attached { network, interface, rdma_dev, pci_address });
    }
}

/// Go's one-character escapes (`\n`) and, at the same place, the characters they stand for.
const ESCAPES: (&str, &str) = ("\"\\'ntrabfv", "\"\\'\n\t\r\u{7}\u{8}\u{c}\u{b}");

/// Undoes Go's `strconv.Quote`: `"..."` with `\" \\ \n \t \r \a \b \f \v \xHH \uHHHH \UHHHHHHHH \ooo`.
pub fn go_unquote(s: &str) -> Option<String> {
    let inner = s.strip_prefix('"')?.strip_suffix('"')?;
    let mut out = String::with_capacity(inner.len());
    let mut bytes = Vec::new();
    let mut chars = inner.chars();
    let hex = |chars: &mut std::str::Chars, n: usize| -> Option<u32> {
        let digits: String = chars.by_ref().take(n).collect();
        (digits.len() == n).then_some(())?;
        u32::from_str_radix(&digits, 16).ok()
    };
    while let Some(mut c) = chars.next() {
        if c == '\\' {
            let e = chars.next()?;
            match e {
                'x' => {
                    bytes.push(u8::try_from(hex(&mut chars, 2)?).ok()?);
                    continue;
                }
                '0'..='7' => {
                    let rest: String = chars.by_ref().take(2).collect();
                    bytes.push(u8::try_from(u32::from_str_radix(&format!("{e}{rest}"), 8).ok()?).ok()?);
                    continue;
                }
                'u' | 'U' => c = char::from_u32(hex(&mut chars, if e == 'u' { 4 } else { 8 })?)?,
                _ => c = ESCAPES.1.chars().nth(ESCAPES.0.find(e)?)?,
            }
        }
        flush(&mut bytes, &mut out)?;
        out.push(c);
    }
    flush(&mut bytes, &mut out)?;
    Some(out)
}

/// Byte escapes (`\xHH`, octal) may spell UTF-8 sequences; decode them as a unit.
fn flush(bytes: &mut Vec<u8>, out: &mut String) -> Option<()> {
    if !bytes.is_empty() {
        out.push_str(std::str::from_utf8(bytes).ok()?);
        bytes.clear();
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"kubernetes.io/config.seen="2026-11-02T10:11:12.000000000Z"
k8s.v1.cni.cncf.io/network-status="[{\n    \"name\": \"ovn-kubernetes\",\n    \"interface\": \"eth0\",\n    \"ips\": [\n        \"10.128.2.17\"\n    ],\n    \"default\": true,\n    \"dns\": {}\n},{\n    \"name\": \"ml/rdma-net-1\",\n    \"interface\": \"net1\",\n    \"ips\": [\n        \"192.168.10.5\"\n    ],\n    \"mac\": \"ae:1f:62:5b:0c:3e\",\n    \"dns\": {},\n    \"device-info\": {\n        \"type\": \"pci\",\n        \"version\": \"1.1.0\",\n        \"pci\": {\n            \"pci-address\": \"0000:03:00.3\",\n            \"rdma-device\": \"mlx5_4\"\n        }\n    }\n},{\n    \"name\": \"ml/rdma-net-2\",\n    \"interface\": \"net2\",\n    \"device-info\": {\n        \"type\": \"pci\",\n        \"version\": \"1.1.0\",\n        \"pci\": {\n            \"pci-address\": \"0000:03:00.4\"\n        }\n    }\n}]"
"#;

    #[test]
    fn reads_rdma_device_and_falls_back_to_pci_address() {
        let s = scan("/etc/podnetinfo/annotations", FILE);
        assert!(s.found && s.problems.is_empty(), "{:?}", s.problems);
        assert_eq!(s.devices.len(), 2);
        assert_eq!(s.devices[0].rdma_dev.as_deref(), Some("mlx5_4"));
        assert_eq!(s.devices[0].interface.as_deref(), Some("net1"));
        assert_eq!(s.devices[1].rdma_dev, None);
        assert_eq!(s.devices[1].pci_address.as_deref(), Some("0000:03:00.4"));
    }

    #[test]
    fn comma_list_of_rdma_devices() {
        let f = r#"k8s.v1.cni.cncf.io/network-status="[{\"name\":\"a\",\"device-info\":{\"type\":\"pci\",\"pci\":{\"rdma-device\":\"mlx5_4,mlx5_5\"}}}]""#;
        let s = scan("f", f);
        let names: Vec<_> = s.devices.iter().filter_map(|d| d.rdma_dev.clone()).collect();
        assert_eq!(names, ["mlx5_4", "mlx5_5"]);
    }

    #[test]
    fn broken_json_and_quoting_are_reported_with_the_path() {
        let s = scan("/x", "k8s.v1.cni.cncf.io/network-status=\"[{\\\"name\\\": \"");
        assert!(s.problems[0].to_string().starts_with("/x: k8s.v1.cni.cncf.io/network-status is not valid JSON"));
        let s = scan("/x", "k8s.v1.cni.cncf.io/network-status=\"[\\q]\"");
        assert!(s.problems[0].to_string().contains("line 1"));
    }

    #[test]
    fn go_unquote_handles_escapes() {
        assert_eq!(go_unquote(r#""a\"b\\c\n\t\x41\u00e9\303\251""#).as_deref(), Some("a\"b\\c\n\tAéé"));
        assert_eq!(go_unquote("\"unterminated"), None);
        assert_eq!(go_unquote(r#""\xff""#), None);
    }
}
