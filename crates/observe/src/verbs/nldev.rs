//! RDMA devices as the kernel's RDMA netlink (`nldev`) tells them, answering libibverbs' discovery
//! (rdma-core `ibdev_nl.c`) for only the devices a start opens. Replies are outside input: bounded,
//! under a deadline, every length and name checked; a failure lets libibverbs scan sysfs. Fuzz: `nldev`.

use crate::detect::names;
use crate::detect::rtnetlink::{self, Socket};

/// `RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, op)`: `(5 << 10) + op`.
const fn nldev(op: u16) -> u16 {
    (5 << 10) + op
}
const CMD_GET: u16 = nldev(1);
const CMD_GET_CHARDEV: u16 = nldev(15);

// `enum rdma_nldev_attr` (uapi rdma/rdma_netlink.h).
const ATTR_DEV_INDEX: u16 = 1;
const ATTR_DEV_NAME: u16 = 2;
const ATTR_PORT_INDEX: u16 = 3;
const ATTR_NODE_GUID: u16 = 6;
const ATTR_DEV_NODE_TYPE: u16 = 14;
const ATTR_CHARDEV_TYPE: u16 = 69;
const ATTR_CHARDEV_NAME: u16 = 70;
const ATTR_CHARDEV_ABI: u16 = 71;
const ATTR_CHARDEV: u16 = 72;
const ATTR_UVERBS_DRIVER_ID: u16 = 73;

/// libibverbs' `IBV_SYSFS_NAME_MAX`: a name and its NUL.
pub const NAME_MAX: usize = 64;
/// The index of a device read from sysfs, which does not say it (libibverbs then holds -1).
pub(crate) const UNKNOWN_INDEX: u32 = u32::MAX;
/// Where the uverbs nodes are (rdma-core's `RDMA_CDEV_DIR`).
pub(crate) const CDEV_DIR: &str = "/dev/infiniband";

/// One RDMA device from the dump.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NlDevice {
    pub(crate) index: u32,
    pub name: String,
    /// The kernel's `RDMA_NODE_*` (1: InfiniBand CA ... 7: unspecified).
    pub(crate) node_type: u8,
    pub(crate) node_guid: u64,
    /// The last port's number: how many ports the device has.
    pub(crate) ports: u32,
}

/// A device's uverbs character device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Uverbs {
    /// `uverbs3`: its node under [`CDEV_DIR`] and its sysfs name.
    pub name: String,
    pub(crate) abi: u64,
    pub major: u32,
    pub minor: u32,
    /// `enum rdma_driver_id`, when the kernel says.
    pub(crate) driver_id: Option<u32>,
}

/// A device libibverbs may list: the dump's facts and its reachable uverbs node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub(crate) device: NlDevice,
    pub(crate) uverbs: Uverbs,
}

/// Discovery over RDMA netlink failed: the caller lets libibverbs scan sysfs instead.
#[derive(Debug, thiserror::Error)]
#[error("RDMA netlink: {0}")]
pub struct Error(#[from] rtnetlink::Error);

/// Every RDMA device this namespace shows (the `RDMA_NLDEV_CMD_GET` dump), those with a valid name
/// and every attribute libibverbs needs.
pub fn devices() -> Result<Vec<NlDevice>, Error> {
    let sock = Socket::open_rdma()?;
    let mut devices = Vec::new();
    sock.dump(CMD_GET, &[], |ty, payload| {
        devices.extend((ty == CMD_GET).then(|| parse_device(payload)).flatten());
        Ok(())
    })?;
    Ok(devices)
}

/// `devices` whose uverbs node this container can reach (`reachable`). A device whose uverbs
/// question goes unanswered (no `ib_uverbs`, a kernel before 5.0) or does not read fails the whole
/// discovery: libibverbs then looks in sysfs.
pub(crate) fn uverbs_of(devices: &[NlDevice], reachable: impl Fn(&str) -> bool) -> Result<Vec<Found>, Error> {
    if devices.is_empty() {
        return Ok(Vec::new());
    }
    let sock = Socket::open_rdma()?;
    let mut out = Vec::new();
    for device in devices {
        let answer = sock.ask(CMD_GET_CHARDEV, &chardev_request(device.index))?;
        let uverbs = parse_uverbs(&answer)
            .ok_or_else(|| rtnetlink::Error::Reply(format!("{}: the uverbs answer does not read", device.name)))?;
        if reachable(&uverbs.name) {
            out.push(Found { device: device.clone(), uverbs });
        } else {
            log::debug!("{}: {CDEV_DIR}/{} is not in this container", device.name, uverbs.name);
        }
    }
    Ok(out)
}

/// What libibverbs' sysfs scan would list for `name` alone, from its own files under `root`, for
/// when RDMA netlink does not answer. Index, node GUID and driver stay unknown, as in rdma-core's
/// scan; `None` where a file does not read or the node is not `reachable` (libibverbs then scans).
pub(crate) fn from_sysfs(root: &std::path::Path, name: &str, reachable: impl Fn(&str) -> bool) -> Option<Found> {
    let read = |p: std::path::PathBuf| crate::detect::file::read_attr(&p).ok();
    let dev = root.join("class/infiniband").join(names::device_name(name).ok()?);
    let node = std::fs::read_dir(dev.join("device/infiniband_verbs"))
        .ok()?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .find(|n| uverbs_name(n))
        .filter(|n| reachable(n))?;
    let at = dev.join("device/infiniband_verbs").join(&node);
    let (major, minor) = read(at.join("dev"))?.split_once(':').map(|(a, b)| (a.parse().ok(), b.parse().ok()))?;
    let node_type = read(dev.join("node_type"))?.split(':').next()?.trim().parse().ok()?;
    let ports = u32::try_from(std::fs::read_dir(dev.join("ports")).ok()?.count()).ok()?;
    let abi = read(at.join("abi_version"))?.parse().ok()?;
    let uverbs = Uverbs { name: node, abi, major: major?, minor: minor?, driver_id: None };
    let device = NlDevice { index: UNKNOWN_INDEX, name: name.to_string(), node_type, node_guid: 0, ports };
    Some(Found { device, uverbs })
}

/// `RDMA_NLDEV_CMD_GET_CHARDEV`'s attributes: the device's index, the client `uverbs`.
fn chardev_request(index: u32) -> Vec<u8> {
    let mut b = Vec::with_capacity(20);
    attr(&mut b, ATTR_DEV_INDEX, &index.to_ne_bytes());
    attr(&mut b, ATTR_CHARDEV_TYPE, b"uverbs\0");
    b
}

/// One attribute, padded to 4 bytes.
fn attr(b: &mut Vec<u8>, ty: u16, value: &[u8]) {
    let len = u16::try_from(4 + value.len()).unwrap_or(u16::MAX);
    b.extend_from_slice(&len.to_ne_bytes());
    b.extend_from_slice(&ty.to_ne_bytes());
    b.extend_from_slice(value);
    b.resize(rtnetlink::align(b.len()), 0);
}

/// A dump message's device, with every attribute `ibdev_nl.c` asks for and a valid name.
pub fn parse_device(payload: &[u8]) -> Option<NlDevice> {
    let (mut index, mut name, mut node_type, mut guid, mut ports) = (None, None, None, None, None);
    for (ty, v) in rtnetlink::attrs(payload).ok()? {
        match ty {
            ATTR_DEV_INDEX => index = u32_of(v),
            ATTR_DEV_NAME => name = text(v),
            ATTR_DEV_NODE_TYPE => node_type = v.first().copied(),
            ATTR_NODE_GUID => guid = u64_of(v),
            ATTR_PORT_INDEX => ports = u32_of(v),
            _ => {}
        }
    }
    let name = name.filter(|n| names::device_name(n).is_ok())?;
    Some(NlDevice { index: index?, name, node_type: node_type?, node_guid: guid?, ports: ports? })
}

/// The uverbs answer, with the node's number, ABI and a `uverbs<N>` name.
pub fn parse_uverbs(payload: &[u8]) -> Option<Uverbs> {
    let (mut name, mut abi, mut dev, mut driver_id) = (None, None, None, None);
    for (ty, v) in rtnetlink::attrs(payload).ok()? {
        match ty {
            ATTR_CHARDEV_NAME => name = text(v),
            ATTR_CHARDEV_ABI => abi = u64_of(v),
            ATTR_CHARDEV => dev = u64_of(v),
            // The kernel puts a u32 here, rdma-core reads a u32.
            ATTR_UVERBS_DRIVER_ID => driver_id = u32_of(v),
            _ => {}
        }
    }
    let name = name.filter(|n| uverbs_name(n))?;
    let dev = dev?;
    // The kernel's `huge_encode_dev`, decoded as rdma-core decodes it.
    let major = u32::try_from((dev & 0xfff00) >> 8).ok()?;
    let minor = u32::try_from((dev & 0xff) | ((dev >> 12) & 0xfff00)).ok()?;
    Some(Uverbs { name, abi: abi?, major, minor, driver_id })
}

/// `uverbs` and a number: a uverbs node's name.
fn uverbs_name(n: &str) -> bool {
    n.strip_prefix("uverbs").is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
}

/// A NUL-terminated string attribute that fits libibverbs' name buffers.
fn text(v: &[u8]) -> Option<String> {
    let s = v.split(|&b| b == 0).next()?;
    (!s.is_empty() && s.len() < NAME_MAX).then(|| String::from_utf8(s.to_vec()).ok()).flatten()
}

fn u32_of(v: &[u8]) -> Option<u32> {
    Some(u32::from_ne_bytes(v.get(..4)?.try_into().ok()?))
}

fn u64_of(v: &[u8]) -> Option<u64> {
    Some(u64::from_ne_bytes(v.get(..8)?.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(list: &[(u16, &[u8])]) -> Vec<u8> {
        let mut b = Vec::new();
        for (ty, v) in list {
            attr(&mut b, *ty, v);
        }
        b
    }

    fn device(name: &[u8]) -> Vec<u8> {
        attrs(&[
            (ATTR_DEV_INDEX, &7u32.to_ne_bytes()),
            (ATTR_DEV_NAME, name),
            (ATTR_PORT_INDEX, &1u32.to_ne_bytes()),
            (ATTR_NODE_GUID, &0x0258_0aff_fe80_0211u64.to_ne_bytes()),
            (ATTR_DEV_NODE_TYPE, &[1]),
        ])
    }

    fn fixture(node: &str) -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/nodes").join(node).join("sys")
    }

    #[test]
    fn one_device_reads_from_its_own_sysfs_files_where_netlink_does_not_answer() {
        let root = fixture("h100-roce-sriov");
        let f = from_sysfs(&root, "mlx5_10", |_| true).expect("mlx5_10");
        assert_eq!(f.uverbs.name, "uverbs10");
        assert_eq!((f.uverbs.major, f.uverbs.minor, f.uverbs.abi, f.uverbs.driver_id), (231, 202, 1, None));
        assert_eq!((f.device.name.as_str(), f.device.node_type, f.device.ports), ("mlx5_10", 1, 1));
        assert_eq!(
            (f.device.index, f.device.node_guid),
            (UNKNOWN_INDEX, 0),
            "unknown, as rdma-core's sysfs scan leaves them"
        );
        // Its node out of this container's reach, a device that is not there, a name that is no
        // device's: libibverbs scans instead.
        assert_eq!(from_sysfs(&root, "mlx5_10", |_| false), None);
        assert_eq!(from_sysfs(&root, "mlx5_99", |_| true), None);
        assert_eq!(from_sysfs(&root, "../../../etc", |_| true), None);
    }

    #[test]
    fn a_device_whose_uverbs_files_do_not_read_is_left_to_libibverbs() {
        let tmp = std::env::temp_dir().join(format!("nw-nldev-{}", std::process::id()));
        let dev = tmp.join("class/infiniband/mlx5_0");
        let at = dev.join("device/infiniband_verbs/uverbs0");
        std::fs::create_dir_all(&at).expect("tree");
        std::fs::create_dir_all(dev.join("ports/1")).expect("ports");
        std::fs::write(dev.join("node_type"), "1: CA\n").expect("node_type");
        std::fs::write(at.join("abi_version"), "1\n").expect("abi");
        for (bad, why) in [("231", "no minor"), ("231:x", "a minor that is no number"), (&"9".repeat(100)[..], "long")]
        {
            std::fs::write(at.join("dev"), bad).expect("dev");
            assert_eq!(from_sysfs(&tmp, "mlx5_0", |_| true), None, "{why}");
        }
        std::fs::write(at.join("dev"), "231:192\n").expect("dev");
        assert_eq!(from_sysfs(&tmp, "mlx5_0", |_| true).map(|f| f.uverbs.minor), Some(192));
        let _ = std::fs::remove_dir_all(&tmp);
    }

    #[test]
    fn a_dump_message_reads_as_its_device() {
        let d = parse_device(&device(b"mlx5_10\0")).expect("device");
        assert_eq!(
            d,
            NlDevice { index: 7, name: "mlx5_10".into(), node_type: 1, node_guid: 0x0258_0aff_fe80_0211, ports: 1 }
        );
    }

    #[test]
    fn a_device_without_what_libibverbs_needs_or_with_a_bad_name_is_left_out() {
        for name in [&b"mlx5_0:1\0"[..], b"\0", b"a b\0", &[b'x'; 64][..], b"\xff\xfe\0"] {
            assert_eq!(parse_device(&device(name)), None, "{name:?}");
        }
        // Each attribute libibverbs needs, missing in turn.
        let full = [
            (ATTR_DEV_INDEX, &7u32.to_ne_bytes()[..]),
            (ATTR_DEV_NAME, b"rxe0\0"),
            (ATTR_PORT_INDEX, &1u32.to_ne_bytes()),
            (ATTR_NODE_GUID, &1u64.to_ne_bytes()),
            (ATTR_DEV_NODE_TYPE, &[4]),
        ];
        assert!(parse_device(&attrs(&full)).is_some());
        for skip in 0..full.len() {
            let some: Vec<_> = full.iter().enumerate().filter(|(i, _)| *i != skip).map(|(_, a)| *a).collect();
            assert_eq!(parse_device(&attrs(&some)), None, "without attribute {}", full[skip].0);
        }
        // Short values and a truncated attribute.
        assert_eq!(parse_device(&attrs(&[(ATTR_DEV_INDEX, &[1, 2])])), None);
        let mut cut = device(b"rxe0\0");
        cut.truncate(cut.len() - 6);
        assert_eq!(parse_device(&cut), None);
    }

    #[test]
    fn the_uverbs_answer_reads_as_its_node() {
        // uverbs3: major 231, minor 195 (huge_encode_dev: minor's low byte, major << 8).
        let dev: u64 = (195 & 0xff) | (231 << 8);
        let a = attrs(&[
            (ATTR_CHARDEV_NAME, b"uverbs3\0"),
            (ATTR_CHARDEV_ABI, &1u64.to_ne_bytes()),
            (ATTR_CHARDEV, &dev.to_ne_bytes()),
            (ATTR_UVERBS_DRIVER_ID, &11u32.to_ne_bytes()),
        ]);
        let u = parse_uverbs(&a).expect("uverbs");
        assert_eq!(u, Uverbs { name: "uverbs3".into(), abi: 1, major: 231, minor: 195, driver_id: Some(11) });
        // A minor past 255 keeps its high bits.
        let dev: u64 = (300 & 0xff) | (231 << 8) | ((300 & !0xff) << 12);
        let a = attrs(&[
            (ATTR_CHARDEV_NAME, b"uverbs300\0"),
            (ATTR_CHARDEV_ABI, &1u64.to_ne_bytes()),
            (ATTR_CHARDEV, &dev.to_ne_bytes()),
        ]);
        assert_eq!(parse_uverbs(&a).map(|u| (u.major, u.minor, u.driver_id)), Some((231, 300, None)));
    }

    #[test]
    fn a_uverbs_answer_that_names_no_uverbs_node_is_refused() {
        let dev = 231u64 << 8;
        for name in [&b"uverbs\0"[..], b"../uverbs1\0", b"uverbs1/x\0", b"issm0\0", b"uverbs-1\0"] {
            let a = attrs(&[
                (ATTR_CHARDEV_NAME, name),
                (ATTR_CHARDEV_ABI, &1u64.to_ne_bytes()),
                (ATTR_CHARDEV, &dev.to_ne_bytes()),
            ]);
            assert_eq!(parse_uverbs(&a), None, "{name:?}");
        }
        assert_eq!(parse_uverbs(&attrs(&[(ATTR_CHARDEV_NAME, b"uverbs1\0")])), None);
    }

    #[test]
    fn the_chardev_question_names_the_device_and_the_uverbs_client() {
        let q = chardev_request(9);
        let got: Vec<(u16, Vec<u8>)> = rtnetlink::attrs(&q).expect("attrs").map(|(t, v)| (t, v.to_vec())).collect();
        assert_eq!(got, vec![(ATTR_DEV_INDEX, 9u32.to_ne_bytes().to_vec()), (ATTR_CHARDEV_TYPE, b"uverbs\0".to_vec())]);
        assert_eq!(q.len() % 4, 0);
    }

    /// What a real kernel (Debian 12's 6.1, two rxe devices, lab `capture-nldev`) answered.
    #[test]
    fn the_kernels_captured_answers_read_as_its_devices_and_nodes() {
        let capture = |name: &str| {
            std::fs::read(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/nldev").join(name))
                .expect("capture")
        };
        for (i, dev) in ["rxe0", "rxe1"].iter().enumerate() {
            let mut got = Vec::new();
            let end = rtnetlink::walk(&capture(&format!("dump-{dev}.bin")), |ty, p| {
                assert_eq!(ty, CMD_GET);
                got.push(parse_device(p));
                Ok(())
            })
            .expect("walk");
            assert!(!end, "one device a datagram, the end in a datagram of its own");
            let d = got.pop().flatten().expect("device");
            assert_eq!((d.index, d.name.as_str(), d.node_type, d.ports), (i as u32, *dev, 1, 1));
            assert_ne!(d.node_guid, 0);
            let answer = rtnetlink::answer(&capture(&format!("chardev-uverbs{i}.bin"))).expect("answer");
            let u = parse_uverbs(&answer).expect("uverbs");
            // rxe: uverbs ABI 2, RDMA_DRIVER_RXE (14); uverbs0 is 231:192.
            assert_eq!(
                u,
                Uverbs { name: format!("uverbs{i}"), abi: 2, major: 231, minor: 192 + i as u32, driver_id: Some(14) }
            );
        }
        assert!(rtnetlink::walk(&capture("dump-done.bin"), |_, _| Ok(())).expect("walk"), "the dump's end");
    }

    /// This kernel answers the dump (no RDMA device here: an empty list), or has no RDMA netlink
    /// at all; either way nothing is found and nothing fails.
    #[test]
    fn this_kernel_answers_or_refuses_cleanly() {
        match devices().and_then(|d| uverbs_of(&d, |_| true)) {
            Ok(found) => assert!(found.iter().all(|f| names::device_name(&f.device.name).is_ok())),
            Err(e) => assert!(e.to_string().starts_with("RDMA netlink: "), "{e}"),
        }
        assert!(uverbs_of(&[], |_| true).expect("nothing to ask").is_empty());
    }
}
