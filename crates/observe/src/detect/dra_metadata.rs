//! Source 1, KEP-5304 device metadata (k8s.io/dynamic-resource-allocation api/metadata/doc.go @ 3d03671): a file's
//! stream of one `DeviceMetadata` per API version, newest first, of which the first known is read, as upstream's
//! decoder does. Parses only bytes it is handed; never panics, never lets an unchecked name, address or interface out.

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::detect::dra_drivers::{self, k8s_name, printable, Meaning};

/// The versions this reader knows, newest first (the SR-IOV DRA driver writes `v1alpha1`).
pub const KNOWN_VERSIONS: &[&str] = &["metadata.resource.k8s.io/v1beta1", "metadata.resource.k8s.io/v1alpha1"];
/// Where the files are mounted in a container.
pub const CONTAINER_DIR: &str = "/var/run/kubernetes.io/dra-device-attributes";
/// Subdirectory for claims the pod names directly (`resourceClaimName`).
pub const RESOURCE_CLAIMS_DIR: &str = "resourceclaims";
/// Subdirectory for claims made from a template, keyed by the pod's own claim name.
pub const RESOURCE_CLAIM_TEMPLATES_DIR: &str = "resourceclaimtemplates";
/// Every metadata file's name ends so, after the driver's name.
pub const FILE_SUFFIX: &str = "-metadata.json";
/// A size bound for callers without a better one (8 NICs with every attribute are some 6 KiB).
pub const DEFAULT_MAX_BYTES: usize = 1 << 20;
/// Deepest nesting accepted (the shape is 8 deep), checked before serde_json parses.
pub const MAX_DEPTH: usize = 32;
/// At most this many addresses per interface (`NetworkDeviceData.ips`, k8s.io/api resource/v1).
pub const MAX_ADDRESSES: usize = 16;

#[derive(Debug, thiserror::Error)]
pub enum MetadataError {
    #[error("metadata file is {len} bytes, over the {max}-byte bound; not read")]
    TooLarge { len: usize, max: usize },
    #[error("metadata file is not UTF-8 (first bad byte at offset {valid_up_to}); not read")]
    NotUtf8 { valid_up_to: usize },
    #[error("metadata file nests arrays and objects deeper than {max} (at byte {offset}); not read")]
    TooDeep { offset: usize, max: usize },
    #[error("metadata file holds no JSON object")]
    Empty,
    #[error("object {object} of the metadata stream is not valid JSON: {source}")]
    Json { object: usize, source: serde_json::Error },
    #[error("object {object} of the metadata stream is not a JSON object")]
    NotAnObject { object: usize },
    #[error("object {object} of the metadata stream has an unreadable apiVersion or kind: {source}")]
    Header { object: usize, source: serde_json::Error },
    #[error("object {object} of the metadata stream has no apiVersion")]
    NoApiVersion { object: usize },
    #[error("object {object} is {api_version} but of kind {kind:?}, not DeviceMetadata")]
    WrongKind { object: usize, api_version: &'static str, kind: Option<String> },
    #[error("object {object} ({api_version}) does not have DeviceMetadata's shape: {source}")]
    Shape { object: usize, api_version: &'static str, source: serde_json::Error },
    #[error("no metadata version this reader knows ({}) in the stream; it has {}", KNOWN_VERSIONS.join(", "), .unknown.join(", "))]
    NoKnownVersion { unknown: Vec<String> },
}

/// Something wrong with one piece of a file that was read; the rest stands.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    #[error("claim metadata field {field} refused ({value:?})")]
    BadClaimField { field: &'static str, value: String },
    #[error("a device of request {request:?} has no driver or name; left out")]
    IncompleteDevice { request: String },
    #[error("device {device}: attribute {key:?} appears more than once; the last one is used, as Go's decoder does")]
    DuplicateAttribute { device: String, key: String },
    #[error("device {device}: attribute name {key:?} is not a qualified name; left out")]
    BadAttributeKey { device: String, key: String },
    #[error("device {device}: attribute {key} has no value this reader knows ({why}); left out")]
    BadAttributeValue { device: String, key: String, why: String },
    #[error("device {device}: {key} is not a PCI address ({value:?})")]
    BadPciAddress { device: String, key: &'static str, value: String },
    #[error("device {device}: {key} says {value} but {first_key} said {first}; using {first}")]
    AddressesDisagree { device: String, first_key: &'static str, first: String, key: &'static str, value: String },
    #[error("device {device}: {key} is not an RDMA device name ({value:?})")]
    BadRdmaDevice { device: String, key: &'static str, value: String },
    #[error("device {device}: networkData.interfaceName {value:?} is not an interface name")]
    BadInterfaceName { device: String, value: String },
    #[error("device {device}: networkData.ips entry {value:?} is not an address with a prefix length")]
    BadAddress { device: String, value: String },
    #[error("device {device}: networkData.ips has {count} entries; the first {MAX_ADDRESSES} are used")]
    TooManyAddresses { device: String, count: usize },
    #[error("device {device}: networkData.hardwareAddress {value:?} is not a hardware address")]
    BadHardwareAddress { device: String, value: String },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimKind {
    /// `resourceclaims/<claim>/...`: a claim the pod names.
    Claim,
    /// `resourceclaimtemplates/<podClaim>/...`: made from a template; the name is the pod's own.
    Template,
}

/// What a metadata file's path says, relative to [`CONTAINER_DIR`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilePath {
    pub kind: ClaimKind,
    pub claim: String,
    pub request: String,
    pub driver: String,
}

/// Recognises a metadata file's path below [`CONTAINER_DIR`], each part a Kubernetes name.
pub fn file_path(rel: &str) -> Option<FilePath> {
    let mut parts = rel.split('/');
    let kind = match parts.next()? {
        RESOURCE_CLAIMS_DIR => ClaimKind::Claim,
        RESOURCE_CLAIM_TEMPLATES_DIR => ClaimKind::Template,
        _ => return None,
    };
    let (claim, request, file) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let names = [claim, request, file.strip_suffix(FILE_SUFFIX)?];
    // A request name is a DNS label (a subrequest is cut off by the writer).
    let [claim, request, driver] = names.map(String::from);
    names.iter().all(|s| k8s_name(s)).then_some(FilePath { kind, claim, request, driver })
}

/// A ResourceSlice attribute value (`DeviceAttribute`, k8s.io/api resource/v1: exactly one member).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Int(i64),
    Bool(bool),
    String(String),
    Version(String),
    Ints(Vec<i64>),
    Bools(Vec<bool>),
    Strings(Vec<String>),
    Versions(Vec<String>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Address {
    pub ip: IpAddr,
    pub prefix: u8,
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.ip, self.prefix)
    }
}

/// `networkData`: what the driver learned from CNI, written after the sandbox's network was made.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetworkData {
    /// The interface's name in the pod (checked: `[A-Za-z0-9_.-]`, at most 15 bytes).
    pub interface_name: Option<String>,
    pub addresses: Vec<Address>,
    /// Lower-case, colon-separated hex (6 bytes for Ethernet, 20 for IPoIB).
    pub hardware_address: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressFrom {
    /// An attribute of that key (`dra_drivers::ATTRIBUTES`).
    Attribute(&'static str),
    /// The device's name in the driver's form (`pci-0000-8a-00-0`, `0000-08-00-2`).
    DeviceName,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    /// The claim request it was allocated for.
    pub request: String,
    pub driver: String,
    pub pool: String,
    pub name: String,
    /// Whether `driver` is a NIC driver of `dra_drivers::DRIVERS` (others' devices are not NICs).
    pub nic_driver: bool,
    /// Checked, `dddd:bb:ss.f`: how the device is found in sysfs.
    pub pci_address: Option<String>,
    pub pci_address_from: Option<AddressFrom>,
    /// The host's RDMA device name at allocation (`dra.net/rdmaDevice`): a hint only.
    pub rdma_device_hint: Option<String>,
    /// Every attribute with a value this reader understands, by key (a repeated key's last value).
    pub attributes: BTreeMap<String, Value>,
    pub network: Option<NetworkData>,
}

/// The claim the file describes (its `metadata`), as far as its fields passed their checks.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct Claim {
    pub name: Option<String>,
    pub namespace: Option<String>,
    pub uid: Option<String>,
    /// Grows when deferred data (interface names, addresses after CNI) is written.
    pub generation: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Metadata {
    /// The version that was read (one of [`KNOWN_VERSIONS`]).
    pub api_version: &'static str,
    /// The unknown versions skipped before it, as the file spells them (printable ASCII, cut).
    pub skipped: Vec<String>,
    pub claim: Claim,
    pub pod_claim_name: Option<String>,
    pub devices: Vec<Device>,
    pub problems: Vec<Problem>,
}

pub fn parse(bytes: &[u8], max_bytes: usize) -> Result<Metadata, MetadataError> {
    if bytes.len() > max_bytes {
        return Err(MetadataError::TooLarge { len: bytes.len(), max: max_bytes });
    }
    let text = std::str::from_utf8(bytes).map_err(|e| MetadataError::NotUtf8 { valid_up_to: e.valid_up_to() })?;
    check_depth(text.as_bytes())?;
    let mut skipped = Vec::new();
    let stream = serde_json::Deserializer::from_str(text).into_iter::<&RawValue>();
    for (object, raw) in stream.enumerate() {
        let raw = raw.map_err(|source| MetadataError::Json { object, source })?;
        if !raw.get().starts_with('{') {
            return Err(MetadataError::NotAnObject { object });
        }
        let head: Head = serde_json::from_str(raw.get()).map_err(|source| MetadataError::Header { object, source })?;
        let Some(version) = head.api_version else { return Err(MetadataError::NoApiVersion { object }) };
        let Some(&api_version) = KNOWN_VERSIONS.iter().find(|v| **v == version) else {
            // An unknown version, of this group or another: skipped, as upstream does.
            skipped.push(printable(&version, 100));
            continue;
        };
        if head.kind.as_deref() != Some("DeviceMetadata") {
            return Err(MetadataError::WrongKind { object, api_version, kind: head.kind.map(|k| printable(&k, 100)) });
        }
        let body: RawMetadata =
            serde_json::from_str(raw.get()).map_err(|source| MetadataError::Shape { object, api_version, source })?;
        return Ok(read(api_version, skipped, body));
    }
    Err(if skipped.is_empty() { MetadataError::Empty } else { MetadataError::NoKnownVersion { unknown: skipped } })
}

fn read(api_version: &'static str, skipped: Vec<String>, body: RawMetadata) -> Metadata {
    let mut problems = Vec::new();
    let meta = body.metadata.unwrap_or_default();
    let mut checked = |field: &'static str, v: Option<String>, ok: fn(&str) -> bool| {
        if let Some(bad) = v.as_deref().filter(|v| !ok(v)) {
            problems.push(Problem::BadClaimField { field, value: printable(bad, 100) });
        }
        v.filter(|v| ok(v))
    };
    let claim = Claim {
        name: checked("metadata.name", meta.name, k8s_name),
        namespace: checked("metadata.namespace", meta.namespace, k8s_name),
        uid: checked("metadata.uid", meta.uid, uid),
        generation: meta.generation,
    };
    let pod_claim_name = checked("podClaimName", body.pod_claim_name, k8s_name);
    let mut devices = Vec::new();
    for request in body.requests {
        for raw in request.devices {
            match device(&request.name, raw, &mut problems) {
                Some(d) => devices.push(d),
                None => problems.push(Problem::IncompleteDevice { request: printable(&request.name, 100) }),
            }
        }
    }
    Metadata { api_version, skipped, claim, pod_claim_name, devices, problems }
}

fn device(request: &str, raw: RawDevice, problems: &mut Vec<Problem>) -> Option<Device> {
    let (driver, name) = (raw.driver?, raw.name?);
    let label = format!("{}/{}", printable(&driver, 64), printable(&name, 64));
    let mut attributes = BTreeMap::new();
    let entries = raw.attributes.map(|a| a.0).unwrap_or_default();
    for (i, (key, value)) in entries.iter().enumerate() {
        if entries[i + 1..].iter().any(|(k, _)| k == key) {
            problems.push(Problem::DuplicateAttribute { device: label.clone(), key: printable(key, 100) });
            continue; // the last one is taken
        }
        if !qualified_name(key) {
            problems.push(Problem::BadAttributeKey { device: label.clone(), key: printable(key, 100) });
            continue;
        }
        match attribute_value(value) {
            Ok(v) => {
                attributes.insert(key.clone(), v);
            }
            Err(why) => problems.push(Problem::BadAttributeValue { device: label.clone(), key: key.clone(), why }),
        }
    }

    // A value of a known meaning that fails its check leaves the map too.
    let mut refused = Vec::new();
    let mut pci_address: Option<(String, AddressFrom)> = None;
    for key in dra_drivers::keys_for(Meaning::PciAddress) {
        let Some(Value::String(s)) = attributes.get(key) else { continue };
        match (dra_drivers::pci_address(s), &pci_address) {
            (None, _) => {
                problems.push(Problem::BadPciAddress { device: label.clone(), key, value: printable(s, 64) });
                refused.push(key);
            }
            (Some(a), None) => pci_address = Some((a, AddressFrom::Attribute(key))),
            (Some(a), Some((first, AddressFrom::Attribute(first_key)))) if *first != a => {
                let (device, first) = (label.clone(), first.clone());
                problems.push(Problem::AddressesDisagree { device, first_key, first, key, value: a })
            }
            (Some(_), Some(_)) => {}
        }
    }
    let known = dra_drivers::driver(&driver);
    let from_name = || known.and_then(|d| dra_drivers::pci_address_from_name(d.device_names, &name));
    let pci_address = pci_address.or_else(|| from_name().map(|a| (a, AddressFrom::DeviceName)));
    let mut rdma_device_hint = None;
    for key in dra_drivers::keys_for(Meaning::RdmaDevice) {
        let Some(Value::String(s)) = attributes.get(key) else { continue };
        if dra_drivers::name_ok(s, dra_drivers::MAX_RDMA_NAME) {
            rdma_device_hint.get_or_insert_with(|| s.clone());
        } else {
            problems.push(Problem::BadRdmaDevice { device: label.clone(), key, value: printable(s, 64) });
            refused.push(key);
        }
    }
    for key in refused {
        attributes.remove(key);
    }
    let network = raw.network_data.map(|n| network(&label, n, problems));
    let (pci_address, pci_address_from) = pci_address.unzip();
    Some(Device {
        request: request.to_string(),
        nic_driver: known.is_some(),
        driver,
        pool: raw.pool.unwrap_or_default(),
        name,
        pci_address,
        pci_address_from,
        rdma_device_hint,
        attributes,
        network,
    })
}

fn network(label: &str, raw: RawNetworkData, problems: &mut Vec<Problem>) -> NetworkData {
    let name_ok = |n: &str| dra_drivers::name_ok(n, dra_drivers::MAX_IFNAME);
    let interface_name = raw.interface_name.filter(|n| !n.is_empty());
    if let Some(n) = interface_name.as_deref().filter(|n| !name_ok(n)) {
        problems.push(Problem::BadInterfaceName { device: label.to_string(), value: printable(n, 64) });
    }
    let interface_name = interface_name.filter(|n| name_ok(n));
    if raw.ips.len() > MAX_ADDRESSES {
        problems.push(Problem::TooManyAddresses { device: label.to_string(), count: raw.ips.len() });
    }
    let mut addresses = Vec::new();
    for ip in raw.ips.iter().take(MAX_ADDRESSES) {
        match cidr(ip) {
            Some(a) => addresses.push(a),
            None => problems.push(Problem::BadAddress { device: label.to_string(), value: printable(ip, 64) }),
        }
    }
    let hardware = raw.hardware_address.filter(|h| !h.is_empty());
    let hardware_address = hardware.as_deref().and_then(hw_address);
    if let (Some(h), None) = (&hardware, &hardware_address) {
        problems.push(Problem::BadHardwareAddress { device: label.to_string(), value: printable(h, 64) });
    }
    NetworkData { interface_name, addresses, hardware_address }
}

/// `10.0.1.5/24`, `2001:db8::5/64`: the form `NetworkDeviceData.ips` holds.
fn cidr(s: &str) -> Option<Address> {
    let (ip, prefix) = s.split_once('/')?;
    let ip: IpAddr = ip.parse().ok()?;
    // Digits only: `u8::from_str` would take a leading `+`.
    if prefix.is_empty() || prefix.len() > 3 || !prefix.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let prefix: u8 = prefix.parse().ok()?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    (prefix <= max).then_some(Address { ip, prefix })
}

/// Colon-separated hex bytes, 1 to 20 of them, lower-cased.
fn hw_address(s: &str) -> Option<String> {
    let parts: Vec<&str> = s.split(':').collect();
    let ok = (1..=20).contains(&parts.len())
        && parts.iter().all(|p| p.len() == 2 && p.bytes().all(|b| b.is_ascii_hexdigit()));
    ok.then(|| s.to_ascii_lowercase())
}

fn attribute_value(raw: &RawValue) -> Result<Value, String> {
    let v: RawAttribute = serde_json::from_str(raw.get()).map_err(|e| format!("unreadable: {e}"))?;
    let members = [
        v.int.map(Value::Int),
        v.bool.map(Value::Bool),
        v.string.map(Value::String),
        v.version.map(Value::Version),
        v.ints.map(Value::Ints),
        v.bools.map(Value::Bools),
        v.strings.map(Value::Strings),
        v.versions.map(Value::Versions),
    ];
    let mut set: Vec<Value> = members.into_iter().flatten().collect();
    match set.len() {
        1 => Ok(set.remove(0)),
        0 => Err("no member this reader knows".to_string()),
        n => Err(format!("{n} members set, exactly one allowed")),
    }
}

/// Refuses input nested deeper than [`MAX_DEPTH`], by a scan that knows strings and escapes.
fn check_depth(b: &[u8]) -> Result<(), MetadataError> {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for (offset, &c) in b.iter().enumerate() {
        if in_string {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Err(MetadataError::TooDeep { offset, max: MAX_DEPTH });
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

fn uid(s: &str) -> bool {
    !s.is_empty() && s.len() <= 64 && s.bytes().all(|c| c.is_ascii_hexdigit() || c == b'-')
}

/// `<domain>/<id>` or `<id>` (k8s.io/api resource/v1 `QualifiedName`).
fn qualified_name(s: &str) -> bool {
    let (domain, id) = s.split_once('/').map_or((None, s), |(d, i)| (Some(d), i));
    let id_ok = !id.is_empty()
        && id.len() <= 32
        && id.bytes().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-'));
    id_ok && domain.is_none_or(|d| d.len() <= 63 && k8s_name(d))
}

/// Only what decides how to read an object.
#[derive(Deserialize)]
struct Head {
    kind: Option<String>,
    #[serde(rename = "apiVersion")]
    api_version: Option<String>,
}

/// `DeviceMetadata` (api/metadata/v1alpha1/types.go); unread fields are skipped.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawMetadata {
    metadata: Option<Claim>,
    pod_claim_name: Option<String>,
    #[serde(default)]
    requests: Vec<RawRequest>,
}

#[derive(Deserialize)]
struct RawRequest {
    name: String,
    #[serde(default)]
    devices: Vec<RawDevice>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawDevice {
    driver: Option<String>,
    pool: Option<String>,
    name: Option<String>,
    attributes: Option<Entries<Box<RawValue>>>,
    network_data: Option<RawNetworkData>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawNetworkData {
    interface_name: Option<String>,
    #[serde(default)]
    ips: Vec<String>,
    hardware_address: Option<String>,
}

#[derive(Deserialize)]
struct RawAttribute {
    int: Option<i64>,
    bool: Option<bool>,
    string: Option<String>,
    version: Option<String>,
    ints: Option<Vec<i64>>,
    bools: Option<Vec<bool>>,
    strings: Option<Vec<String>>,
    versions: Option<Vec<String>>,
}

/// A JSON object's entries in file order, repeated keys included (the attribute map here, an SR-IOV
/// `_INFO` value in `sriov`).
pub(crate) struct Entries<V>(pub Vec<(String, V)>);

impl<'de, V: Deserialize<'de>> Deserialize<'de> for Entries<V> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit<V>(std::marker::PhantomData<V>);
        impl<'de, V: Deserialize<'de>> serde::de::Visitor<'de> for Visit<V> {
            type Value = Entries<V>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a map of attributes")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut m: A) -> Result<Entries<V>, A::Error> {
                let mut out = Vec::new();
                while let Some(entry) = m.next_entry::<String, V>()? {
                    out.push(entry);
                }
                Ok(Entries(out))
            }
        }
        d.deserialize_map(Visit(std::marker::PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GROUP: &str = "metadata.resource.k8s.io";

    const DRIVER: &str = "sriovnetwork.k8snetworkplumbingwg.io";

    fn object(version: &str, devices: &str) -> String {
        format!(
            r#"{{"kind":"DeviceMetadata","apiVersion":"{GROUP}/{version}","metadata":{{"name":"rdma","namespace":"llm-train","uid":"5f0c2a9e-7b1d-4e3a-9c6f-2d8e1a4b7c30","generation":2}},"podClaimName":"rails","requests":[{{"name":"nics","devices":[{devices}]}}]}}"#
        )
    }

    fn vf(addr: &str, iface: &str) -> String {
        let name = addr.replace([':', '.'], "-");
        format!(
            r#"{{"driver":"{DRIVER}","pool":"node-1","name":"{name}","attributes":{{"resource.kubernetes.io/pciBusID":{{"string":"{addr}"}},"{DRIVER}/pciAddress":{{"string":"{addr}"}},"{DRIVER}/vfID":{{"int":0}}}},"networkData":{{"interfaceName":"{iface}","ips":["10.0.1.5/24","fd00::5/64"],"hardwareAddress":"5A:10:22:00:00:01"}}}}"#
        )
    }

    fn ok(text: &str) -> Metadata {
        parse(text.as_bytes(), DEFAULT_MAX_BYTES).unwrap_or_else(|e| panic!("{e}\n{text}"))
    }

    fn err(text: &[u8]) -> MetadataError {
        match parse(text, DEFAULT_MAX_BYTES) {
            Ok(m) => panic!("parsed: {m:?}"),
            Err(e) => e,
        }
    }

    #[test]
    fn the_first_known_version_of_a_stream_wins() {
        let stream = format!(
            "{}\n{}\n",
            object("v1beta1", &vf("0000:08:00.2", "net1")),
            object("v1alpha1", &vf("0000:08:00.3", "net9"))
        );
        let m = ok(&stream);
        assert_eq!(m.api_version, "metadata.resource.k8s.io/v1beta1");
        assert!(m.skipped.is_empty() && m.problems.is_empty(), "{m:?}");
        assert_eq!(m.devices.len(), 1);
        let d = &m.devices[0];
        assert_eq!(d.pci_address.as_deref(), Some("0000:08:00.2"));
        assert_eq!(d.pci_address_from, Some(AddressFrom::Attribute("resource.kubernetes.io/pciBusID")));
        assert!(d.nic_driver);
        let n = d.network.as_ref().expect("networkData");
        assert_eq!(n.interface_name.as_deref(), Some("net1"));
        assert_eq!(n.addresses.iter().map(ToString::to_string).collect::<Vec<_>>(), ["10.0.1.5/24", "fd00::5/64"]);
        assert_eq!(n.hardware_address.as_deref(), Some("5a:10:22:00:00:01"));
        assert_eq!(m.claim.generation, Some(2));
        assert_eq!(m.pod_claim_name.as_deref(), Some("rails"));
    }

    #[test]
    fn an_unknown_newer_version_first_is_skipped_unread() {
        // A newer version may rename every field: nothing of it is read.
        let newer = r#"{"kind":"DeviceMetadata","apiVersion":"metadata.resource.k8s.io/v1","requests":[{"request":"nics","allocated":7}]}"#;
        let m = ok(&format!("{newer}\n{}", object("v1alpha1", &vf("0000:08:00.4", "net3"))));
        assert_eq!(m.api_version, "metadata.resource.k8s.io/v1alpha1");
        assert_eq!(m.skipped, ["metadata.resource.k8s.io/v1"]);
        assert_eq!(m.devices[0].network.as_ref().and_then(|n| n.interface_name.as_deref()), Some("net3"));
        // Only unknown versions: a named error listing them.
        let e = err(newer.as_bytes());
        assert!(
            matches!(&e, MetadataError::NoKnownVersion { unknown } if unknown == &["metadata.resource.k8s.io/v1"]),
            "{e}"
        );
        assert!(e.to_string().contains("v1beta1"), "{e}");
    }

    #[test]
    fn nothing_after_the_winner_is_read() {
        // As upstream's decoder: the stream is read up to the object it takes.
        let m = ok(&format!("{} {{not json", object("v1beta1", &vf("0000:08:00.2", "net1"))));
        assert_eq!(m.devices.len(), 1);
    }

    #[test]
    fn the_committed_fixture_streams_read() {
        let root = "fixtures/nodes/dra-metadata/var/run/kubernetes.io/dra-device-attributes";
        let read = |rel: &str| {
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .ancestors()
                .find_map(|d| std::fs::read(d.join(root).join(rel)).ok())
        };
        let rails = read(&format!("resourceclaims/rdma-rails/nics/{DRIVER}-metadata.json"));
        let extra = read(&format!("resourceclaimtemplates/extra-nic/nic/{DRIVER}-metadata.json"));
        let (Some(rails), Some(extra)) = (rails, extra) else {
            eprintln!("fixtures not beside this build; skipped");
            return;
        };
        let m = parse(&rails, DEFAULT_MAX_BYTES).expect("rails");
        assert_eq!(m.api_version, KNOWN_VERSIONS[0]);
        let found: Vec<_> = m
            .devices
            .iter()
            .map(|d| (d.pci_address.clone().unwrap_or_default(), d.network.clone().and_then(|n| n.interface_name)))
            .collect();
        assert_eq!(found, [("0000:08:00.2".into(), Some("net1".into())), ("0000:08:00.3".into(), Some("net2".into()))]);
        let m = parse(&extra, DEFAULT_MAX_BYTES).expect("extra");
        assert_eq!((m.skipped.len(), m.devices[0].pci_address.as_deref()), (1, Some("0000:08:00.4")));
        assert!(m.problems.is_empty(), "{:?}", m.problems);
        assert_eq!(
            file_path(&format!("resourceclaimtemplates/extra-nic/nic/{DRIVER}-metadata.json")).map(|p| p.kind),
            Some(ClaimKind::Template)
        );
    }

    #[test]
    fn a_device_without_address_attributes_is_matched_by_its_name() {
        let d = r#"{"driver":"dra.net","pool":"gke-a4x-1","name":"pci-0101-00-00-0","attributes":{"dra.net/rdmaDevice":{"string":"mlx5_0"}}}"#;
        let m = ok(&object("v1beta1", d));
        let d = &m.devices[0];
        assert_eq!(
            (d.pci_address.as_deref(), d.pci_address_from),
            (Some("0101:00:00.0"), Some(AddressFrom::DeviceName))
        );
        assert_eq!(d.rdma_device_hint.as_deref(), Some("mlx5_0"));
        // Another driver's device (a GPU) is read, not taken for a NIC, and its name spells nothing.
        let gpu = r#"{"driver":"gpu.nvidia.com","pool":"p","name":"gpu-0","attributes":{"resource.kubernetes.io/pciBusID":{"string":"0000:1b:00.0"}}}"#;
        let m = ok(&object("v1beta1", gpu));
        assert!(!m.devices[0].nic_driver);
        assert_eq!(m.devices[0].pci_address.as_deref(), Some("0000:1b:00.0"));
    }

    #[test]
    fn disagreeing_and_bad_addresses_are_reported_and_the_standard_key_wins() {
        let d = format!(
            r#"{{"driver":"{DRIVER}","pool":"p","name":"0000-08-00-2","attributes":{{"resource.kubernetes.io/pciBusID":{{"string":"0000:08:00.2"}},"{DRIVER}/pciAddress":{{"string":"0000:08:00.3"}},"dra.net/pciAddress":{{"string":"../../etc"}}}}}}"#
        );
        let m = ok(&object("v1beta1", &d));
        assert_eq!(m.devices[0].pci_address.as_deref(), Some("0000:08:00.2"));
        let msgs: Vec<String> = m.problems.iter().map(ToString::to_string).collect();
        assert!(
            msgs.iter().any(|p| p.contains("says 0000:08:00.3 but resource.kubernetes.io/pciBusID said 0000:08:00.2")),
            "{msgs:?}"
        );
        assert!(msgs.iter().any(|p| p.contains("dra.net/pciAddress is not a PCI address")), "{msgs:?}");
    }

    #[test]
    fn hostile_names_and_addresses_never_leave_unchecked() {
        let d = format!(
            r#"{{"driver":"{DRIVER}","pool":"p","name":"0000-08-00-2","attributes":{{"dra.net/rdmaDevice":{{"string":"mlx5_1,mlx5_2"}},"bad key!":{{"int":1}},"{DRIVER}/x":{{"int":1,"string":"a"}},"{DRIVER}/y":{{"future":1}}}},"networkData":{{"interfaceName":"net1;rm -rf /","ips":["10.0.0.1","10.0.0.2/33","+1.2.3.4/8","10.0.0.3/+8"],"hardwareAddress":"zz:00"}}}}"#
        );
        let m = ok(&object("v1beta1", &d));
        let dev = &m.devices[0];
        assert_eq!(dev.rdma_device_hint, None);
        let n = dev.network.as_ref().expect("networkData");
        assert_eq!((n.interface_name.as_ref(), n.addresses.len(), n.hardware_address.as_ref()), (None, 0, None));
        assert!(dev.attributes.is_empty(), "{:?}", dev.attributes);
        assert_eq!(m.problems.len(), 10, "{:#?}", m.problems);
        // The device is still there, found by its name.
        assert_eq!(dev.pci_address.as_deref(), Some("0000:08:00.2"));
    }

    #[test]
    fn duplicate_keys_an_attribute_last_wins_a_field_is_an_error() {
        let d = format!(
            r#"{{"driver":"{DRIVER}","pool":"p","name":"n","attributes":{{"resource.kubernetes.io/pciBusID":{{"string":"0000:08:00.2"}},"resource.kubernetes.io/pciBusID":{{"string":"0000:08:00.3"}}}}}}"#
        );
        let m = ok(&object("v1beta1", &d));
        assert_eq!(m.devices[0].pci_address.as_deref(), Some("0000:08:00.3"));
        assert!(matches!(&m.problems[..], [Problem::DuplicateAttribute { .. }]), "{:?}", m.problems);
        let twice = r#"{"kind":"DeviceMetadata","apiVersion":"metadata.resource.k8s.io/v1beta1","apiVersion":"metadata.resource.k8s.io/v1"}"#;
        assert!(matches!(err(twice.as_bytes()), MetadataError::Header { object: 0, .. }));
        let requests_twice = object("v1beta1", "").replace(r#""requests":"#, r#""requests":[],"requests":"#);
        assert!(matches!(err(requests_twice.as_bytes()), MetadataError::Shape { object: 0, .. }));
    }

    #[test]
    fn the_size_bound_is_the_callers() {
        let big = vec![b' '; 10 << 20];
        assert!(
            matches!(err(&big), MetadataError::TooLarge { len, max } if len == 10 << 20 && max == DEFAULT_MAX_BYTES)
        );
        let small = object("v1beta1", &vf("0000:08:00.2", "net1"));
        assert!(matches!(parse(small.as_bytes(), 64), Err(MetadataError::TooLarge { .. })));
        assert!(parse(small.as_bytes(), small.len()).is_ok());
    }

    #[test]
    fn deep_nesting_is_refused_before_parsing() {
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(matches!(err(deep.as_bytes()), MetadataError::TooDeep { max: MAX_DEPTH, .. }));
        // Brackets inside strings do not count.
        let d = format!(r#"{{"driver":"{DRIVER}","pool":"{}","name":"n"}}"#, "[{".repeat(40));
        assert!(parse(object("v1beta1", &d).as_bytes(), DEFAULT_MAX_BYTES).is_ok());
        // Just within the bound: a list attribute nested as deep as the limit allows is fine.
        let nested = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert!(matches!(err(nested.as_bytes()), MetadataError::NotAnObject { object: 0 }));
    }

    #[test]
    fn malformed_input_is_a_named_error() {
        assert!(matches!(err(b"\xff\xfe{}"), MetadataError::NotUtf8 { valid_up_to: 0 }));
        assert!(matches!(err(b"  \n"), MetadataError::Empty));
        assert!(matches!(err(b"[1,2]"), MetadataError::NotAnObject { object: 0 }));
        assert!(matches!(err(b"{\"kind\":\"DeviceMetadata\""), MetadataError::Json { object: 0, .. }));
        assert!(matches!(err(b"{\"kind\":\"DeviceMetadata\"}"), MetadataError::NoApiVersion { object: 0 }));
        assert!(matches!(err(b"{\"apiVersion\":7}"), MetadataError::Header { object: 0, .. }));
        assert!(matches!(
            err(b"{\"kind\":\"Pod\",\"apiVersion\":\"metadata.resource.k8s.io/v1beta1\"}"),
            MetadataError::WrongKind { object: 0, .. }
        ));
        let bad_shape =
            object("v1beta1", "").replace(r#""requests":[{"name":"nics","devices":[]}]"#, r#""requests":{"a":1}"#);
        assert!(matches!(err(bad_shape.as_bytes()), MetadataError::Shape { .. }), "{bad_shape}");
        // A stream whose second object is broken, after an unknown first one.
        let e = err(b"{\"apiVersion\":\"x/v9\"} {\"apiVersion\":");
        assert!(matches!(e, MetadataError::Json { object: 1, .. }), "{e}");
        // Messages quote what the file said only as printable ASCII.
        let e = err("{\"apiVersion\":\"x/\u{1b}[2Jv9\"}".as_bytes());
        assert!(!e.to_string().contains('\u{1b}'), "{e}");
    }

    #[test]
    fn claim_fields_are_checked() {
        let text = object("v1beta1", "").replace("\"llm-train\"", "\"../../etc\"").replace("\"rails\"", "\"Rails\"");
        let m = ok(&text);
        assert_eq!((m.claim.namespace.as_ref(), m.pod_claim_name.as_ref()), (None, None));
        assert_eq!(m.claim.name.as_deref(), Some("rdma"));
        assert_eq!(m.problems.len(), 2, "{:?}", m.problems);
        let incomplete = object("v1beta1", r#"{"pool":"p"}"#);
        assert!(matches!(&ok(&incomplete).problems[..], [Problem::IncompleteDevice { .. }]));
    }

    #[test]
    fn list_attributes_and_versions_are_kept() {
        let d = format!(
            r#"{{"driver":"{DRIVER}","pool":"p","name":"n","attributes":{{"resource.kubernetes.io/numaNode":{{"ints":[0,1]}},"{DRIVER}/fw":{{"version":"28.43.2026"}}}}}}"#
        );
        let m = ok(&object("v1beta1", &d));
        let a = &m.devices[0].attributes;
        assert_eq!(a.get("resource.kubernetes.io/numaNode"), Some(&Value::Ints(vec![0, 1])));
        assert_eq!(a.get(&format!("{DRIVER}/fw")), Some(&Value::Version("28.43.2026".into())));
    }

    #[test]
    fn too_many_addresses_are_cut() {
        let ips: Vec<String> = (0..20).map(|i| format!("\"10.0.0.{i}/24\"")).collect();
        let d = format!(r#"{{"driver":"{DRIVER}","pool":"p","name":"n","networkData":{{"ips":[{}]}}}}"#, ips.join(","));
        let m = ok(&object("v1beta1", &d));
        assert_eq!(m.devices[0].network.as_ref().map(|n| n.addresses.len()), Some(MAX_ADDRESSES));
        assert!(matches!(&m.problems[..], [Problem::TooManyAddresses { count: 20, .. }]));
    }

    #[test]
    fn paths_are_recognised_and_nothing_else() {
        let p = file_path("resourceclaims/rdma-rails/nics/sriovnetwork.k8snetworkplumbingwg.io-metadata.json")
            .expect("path");
        assert_eq!(
            (p.kind, p.claim.as_str(), p.request.as_str(), p.driver.as_str()),
            (ClaimKind::Claim, "rdma-rails", "nics", DRIVER)
        );
        for bad in [
            "resourceclaims/a/b/c-metadata.json/x",
            "resourceclaims/a/b/c.json",
            "resourceclaims/../b/c-metadata.json",
            "resourceclaims/A/b/c-metadata.json",
            "other/a/b/c-metadata.json",
            "resourceclaims/a/b",
            "resourceclaims/a/b/-metadata.json",
        ] {
            assert_eq!(file_path(bad), None, "{bad}");
        }
    }
}
