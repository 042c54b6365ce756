//! Names from outside (device names, PCI and auxiliary IDs) and their order. Anything that reaches
//! NCCL or a sysfs path goes through here: outside `[A-Za-z0-9_.-]` a name is never valid (NCCL
//! parses `,` `:` `^` `=` in `NCCL_IB_HCA`; `/` or `..` would leave the tree).

use std::cmp::Ordering;

/// Longest RDMA device name the kernel allows (IB_DEVICE_NAME_MAX - 1).
pub(crate) const MAX_DEVICE_NAME: usize = 63;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("empty name")]
    Empty,
    #[error("name is {0} bytes long; at most {MAX_DEVICE_NAME} are allowed")]
    TooLong(usize),
    #[error("name {0:?} has characters outside [A-Za-z0-9_.-]")]
    BadChars(String),
    #[error("name {0:?} is a path component that would leave the directory")]
    DotName(String),
}

/// Checks a device or interface name, or a device ID: `allow_colon` admits a PCI address's `:`.
pub fn check(name: &str, allow_colon: bool) -> Result<&str, NameError> {
    if name.is_empty() {
        return Err(NameError::Empty);
    }
    if name.len() > MAX_DEVICE_NAME {
        return Err(NameError::TooLong(name.len()));
    }
    // The set is ASCII: no byte of a multi-byte character is in it.
    let ok = |c: u8| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-') || (allow_colon && c == b':');
    if !name.bytes().all(ok) {
        return Err(NameError::BadChars(name.chars().take(80).collect()));
    }
    if name == "." || name == ".." {
        return Err(NameError::DotName(name.to_string()));
    }
    Ok(name)
}

pub fn device_name(name: &str) -> Result<&str, NameError> {
    check(name, false)
}

pub fn device_id(id: &str) -> Result<&str, NameError> {
    check(id, true)
}

/// The nic-configuration-operator's `rdma_<nic>_<plane>_<rail>` name as `(nic, plane, rail)`.
pub fn identity(name: &str) -> Option<(u32, u32, u32)> {
    let mut parts = name.strip_prefix("rdma_")?.split('_');
    let mut next = || parts.next().filter(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))?.parse().ok();
    let id = (next()?, next()?, next()?);
    parts.next().is_none().then_some(id)
}

/// Natural order: `mlx5_2` before `mlx5_10`. Runs of digits compare by value.
pub fn natural_cmp(a: &str, b: &str) -> Ordering {
    let (mut x, mut y) = (a.as_bytes(), b.as_bytes());
    loop {
        match (x.first(), y.first()) {
            (None, None) => return a.cmp(b),
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(c), Some(d)) if c.is_ascii_digit() && d.is_ascii_digit() => {
                let n = x.iter().take_while(|c| c.is_ascii_digit()).count();
                let m = y.iter().take_while(|c| c.is_ascii_digit()).count();
                let (p, q) = (trim_zeros(&x[..n]), trim_zeros(&y[..m]));
                let ord = p.len().cmp(&q.len()).then_with(|| p.cmp(q));
                if ord != Ordering::Equal {
                    return ord;
                }
                x = &x[n..];
                y = &y[m..];
            }
            (Some(c), Some(d)) => {
                if c != d {
                    return c.cmp(d);
                }
                x = &x[1..];
                y = &y[1..];
            }
        }
    }
}

/// Sorts names in [`natural_cmp`]'s order, each key built once, all keys in one buffer.
pub(crate) fn sort_natural(names: &mut [String]) {
    let mut keys = Vec::with_capacity(names.iter().map(|n| 2 * n.len() + 8).sum());
    let mut order: Vec<(usize, usize, usize)> = Vec::with_capacity(names.len());
    for (i, n) in names.iter().enumerate() {
        let start = keys.len();
        natural_key(n, &mut keys);
        order.push((start, keys.len(), i));
    }
    // Keys end with the name itself, so no two are equal and the unstable sort is deterministic.
    order.sort_unstable_by(|a, b| keys[a.0..a.1].cmp(&keys[b.0..b.1]));
    let mut old: Vec<String> = names.iter_mut().map(std::mem::take).collect();
    for (slot, &(_, _, i)) in names.iter_mut().zip(&order) {
        *slot = std::mem::take(&mut old[i]);
    }
}

/// A copy of `names` in natural order, for output that lists them all.
pub fn sorted_natural(names: &[String]) -> Vec<String> {
    let mut v = names.to_vec();
    sort_natural(&mut v);
    v
}

/// Serialises a list kept in listing order in natural order.
pub(crate) fn serialize_natural<S: serde::Serializer>(names: &[String], s: S) -> Result<S::Ok, S::Error> {
    serde::Serialize::serialize(&sorted_natural(names), s)
}

/// The first `n` of `names` in [`natural_cmp`]'s order, then how many more (`(246 more)`).
pub fn abbreviate(names: &[String], n: usize) -> String {
    // The first n so far, in order: a name goes in only if it comes before the last of them.
    let mut first: Vec<&str> = Vec::with_capacity(n + 1);
    for name in names {
        if first.len() == n && first.last().is_none_or(|last| natural_cmp(name, last).is_ge()) {
            continue;
        }
        let at = first.partition_point(|f| natural_cmp(f, name).is_le());
        first.insert(at, name);
        first.truncate(n);
    }
    let more = names.len().saturating_sub(n);
    first.join(", ") + &if more > 0 { format!(", ... ({more} more)") } else { String::new() }
}

/// A byte string that compares as [`natural_cmp`] compares names: each run of digits becomes `0`,
/// its length without leading zeros and its digits; then a NUL and the name itself (the last
/// tie-break; names are checked before they are sorted, so no NUL comes earlier).
fn natural_key(name: &str, key: &mut Vec<u8>) {
    let b = name.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let text = b[i..].iter().take_while(|c| !c.is_ascii_digit()).count();
        key.extend_from_slice(&b[i..i + text]);
        i += text;
        let run = b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
        if run > 0 {
            let digits = trim_zeros(&b[i..i + run]);
            key.extend_from_slice(&[b'0', u8::try_from(digits.len()).unwrap_or(u8::MAX)]);
            key.extend_from_slice(digits);
            i += run;
        }
    }
    key.push(0);
    key.extend_from_slice(b);
}

fn trim_zeros(digits: &[u8]) -> &[u8] {
    let z = digits.iter().take_while(|&&c| c == b'0').count();
    &digits[z.min(digits.len().saturating_sub(1))..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn natural_order_of_hca_names() {
        let mut v = vec!["mlx5_11", "mlx5_6", "mlx5_10", "mlx5_7", "mlx5_1", "bnxt_re0"];
        v.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(v, ["bnxt_re0", "mlx5_1", "mlx5_6", "mlx5_7", "mlx5_10", "mlx5_11"]);
        assert_eq!(natural_cmp("mlx5_01", "mlx5_1"), Ordering::Less);
    }

    /// Names that share prefixes, differ in leading zeros, mix runs of digits and letters, and hold
    /// bytes on both sides of the digits.
    const NAMES: &[&str] = &[
        "",
        "0",
        "00",
        "01",
        "1",
        "10",
        "9",
        "mlx5_",
        "mlx5_0",
        "mlx5_00",
        "mlx5_01",
        "mlx5_1",
        "mlx5_10",
        "mlx5_100",
        "mlx5_2",
        "mlx5_9",
        "mlx5_10a",
        "mlx5_10b2",
        "mlx5_10b10",
        "mlx5_1_0",
        "mlx5a",
        "mlx50",
        "mlx4_1",
        "rxe0",
        "rxe00",
        "bnxt_re0",
        "a1b2",
        "a1b02",
        "a01b2",
        "007",
        "7",
        "mlx5/",
        "mlx5:",
        "mlx5_123",
        "mlx5_1023",
        " 1",
        "~1",
    ];

    #[test]
    fn the_sort_key_orders_as_the_comparison_does() {
        let key = |n: &str| {
            let mut k = Vec::new();
            natural_key(n, &mut k);
            k
        };
        let mut names: Vec<String> = NAMES.iter().map(|n| n.to_string()).collect();
        for a in &names {
            for b in &names {
                assert_eq!(key(a).cmp(&key(b)), natural_cmp(a, b), "{a:?} {b:?}");
            }
        }
        let mut by_cmp = names.clone();
        by_cmp.sort_by(|a, b| natural_cmp(a, b));
        // Whatever order the directory lists them in, and with a name listed twice.
        let mut reversed: Vec<String> = names.iter().rev().cloned().collect();
        sort_natural(&mut names);
        assert_eq!(names, by_cmp);
        sort_natural(&mut reversed);
        assert_eq!(reversed, by_cmp);
        let mut twice = vec!["mlx5_10".to_string(), "mlx5_2".into(), "mlx5_10".into()];
        sort_natural(&mut twice);
        assert_eq!(twice, ["mlx5_2", "mlx5_10", "mlx5_10"]);
        sort_natural(&mut []);
    }

    #[test]
    fn abbreviate_shows_the_first_names_in_natural_order_whatever_the_listing_order() {
        let by_cmp = {
            let mut v: Vec<String> = NAMES.iter().map(|n| n.to_string()).collect();
            v.sort_by(|a, b| natural_cmp(a, b));
            v
        };
        let listed: Vec<String> = NAMES.iter().rev().map(|n| n.to_string()).collect();
        for n in [0, 1, 3, 8, NAMES.len() - 1, NAMES.len(), NAMES.len() + 5] {
            let shown = by_cmp.iter().take(n).cloned().collect::<Vec<_>>().join(", ");
            let more = NAMES.len().saturating_sub(n);
            let want = if more > 0 { format!("{shown}, ... ({more} more)") } else { shown };
            assert_eq!(abbreviate(&listed, n), want, "n = {n}");
        }
        // A node's 256 devices listed in hash order: the summary names mlx5_0 to mlx5_7.
        let mut node: Vec<String> = (0..256).map(|i| format!("mlx5_{}", (i * 97) % 256)).collect();
        node.rotate_left(31);
        assert_eq!(
            abbreviate(&node, 8),
            "mlx5_0, mlx5_1, mlx5_2, mlx5_3, mlx5_4, mlx5_5, mlx5_6, mlx5_7, ... (248 more)"
        );
        assert_eq!(abbreviate(&[], 8), "");
    }

    #[test]
    fn lists_kept_in_listing_order_serialise_in_natural_order() {
        #[derive(serde::Serialize)]
        struct Out {
            #[serde(serialize_with = "serialize_natural")]
            names: Vec<String>,
        }
        let out = Out { names: vec!["mlx5_10".into(), "mlx5_2".into(), "bnxt_re0".into()] };
        assert_eq!(serde_json::to_string(&out).expect("json"), r#"{"names":["bnxt_re0","mlx5_2","mlx5_10"]}"#);
        assert_eq!(sorted_natural(&out.names), ["bnxt_re0", "mlx5_2", "mlx5_10"]);
    }

    #[test]
    fn any_name_the_kernel_gives_a_device_is_taken_not_only_mlx5_n() {
        // rdma-cni's, the nic-configuration-operator's, rdma-core's PCI naming (EFA, RoCE), eRDMA,
        // NVLink controllers, a name at the kernel's length bound.
        let long = "r".repeat(MAX_DEVICE_NAME);
        for name in [
            "rdma_net1",
            "rdma_0_1_0",
            "rdmap80s0",
            "rocep1s0f0",
            "roceP2p1s0f0",
            "erdma_0",
            "ibp3s0",
            "mlx5_bond_0",
            &long,
        ] {
            assert_eq!(device_name(name), Ok(name));
        }
    }

    #[test]
    fn hostile_names_are_refused() {
        assert!(device_name("mlx5_1;rm -rf /").is_err());
        assert!(device_name("mlx5_1,mlx5_2").is_err());
        assert!(device_name("=mlx5_1").is_err());
        assert!(device_name("mlx5_1:1").is_err());
        assert!(device_name("..").is_err());
        assert!(device_name("").is_err());
        assert!(device_name(&"a".repeat(64)).is_err());
        assert!(device_id("../../etc").is_err());
        assert_eq!(device_id("0000:3b:02.6"), Ok("0000:3b:02.6"));
        assert_eq!(device_id("mlx5_core.sf.2"), Ok("mlx5_core.sf.2"));
    }

    #[test]
    fn a_name_that_carries_nic_plane_and_rail_gives_them() {
        assert_eq!(identity("rdma_0_1_0"), Some((0, 1, 0)));
        assert_eq!(identity("rdma_3_1_3"), Some((3, 1, 3)));
        for other in ["rdma_net1", "mlx5_7", "rdma_0_1", "rdma_0_1_0_2", "rdma_a_1_0", "rdma__1_0"] {
            assert_eq!(identity(other), None, "{other}");
        }
    }
}
