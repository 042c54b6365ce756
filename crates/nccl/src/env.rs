//! NCCL variable rendering: the exact `NCCL_IB_HCA` form, shell quoting for `nccl-wrap env`, and
//! the child's environment. Values that reach here were validated by `names`; this module still
//! quotes everything it prints, because `env` output is meant to be `eval`ed.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;

/// NCCL reads at most this many `NCCL_IB_HCA` entries (MAX_IB_DEVS).
pub const MAX_HCA_ENTRIES: usize = 32;

pub const IB_HCA: &str = "NCCL_IB_HCA";
pub const IB_GID_INDEX: &str = "NCCL_IB_GID_INDEX";
pub const IB_DISABLE: &str = "NCCL_IB_DISABLE";
pub const IB_ADDR_RANGE: &str = "NCCL_IB_ADDR_RANGE";
pub const IB_PKEY: &str = "NCCL_IB_PKEY";
pub const IB_ADDR_FAMILY: &str = "NCCL_IB_ADDR_FAMILY";
/// The network NCCL uses, by name: `IB` is its own verbs transport, and never falls back.
pub const NET: &str = "NCCL_NET";
pub const SOCKET_IFNAME: &str = "NCCL_SOCKET_IFNAME";
/// PyTorch's Gloo and its TCP store: a plain name or comma list (no `=` or `^`).
pub const GLOO_SOCKET_IFNAME: &str = "GLOO_SOCKET_IFNAME";
/// NCCL 2.30+: with its default 1, ranks that open different numbers of NICs still start (and
/// may run crippled or spin, NVIDIA/nccl#2428); 0 makes NCCL fail at init instead.
pub const IGNORE_NET_MISMATCH: &str = "NCCL_IGNORE_NET_MISMATCH";
/// The first NCCL release that reads `NCCL_IGNORE_NET_MISMATCH`.
pub const IGNORE_NET_MISMATCH_SINCE: (u32, u32) = (2, 30);

/// Whether NCCL `v` (`2.30.7`, `2.28.9+cuda12.9`) is `major.minor` or later; `None`: no version.
pub fn version_at_least(v: &str, (major, minor): (u32, u32)) -> Option<bool> {
    let mut parts = v.split(['.', '+']);
    let a: u32 = parts.next()?.parse().ok()?;
    let b: u32 = parts.next()?.parse().ok()?;
    Some((a, b) >= (major, minor))
}

/// `=dev:port,dev:port`: the `=` makes NCCL match exactly (`mlx5_1` is not also `mlx5_10`).
pub fn hca_value<'a>(ports: impl IntoIterator<Item = (&'a str, u32)>) -> String {
    let list: Vec<String> = ports.into_iter().map(|(dev, port)| format!("{dev}:{port}")).collect();
    format!("={}", list.join(","))
}

/// POSIX single-quoting: safe for `eval` whatever the value holds.
pub fn shell_quote(value: &str) -> String {
    format!("'{}'", value.replace('\'', r"'\''"))
}

/// `export NAME='value'` lines.
pub fn export_lines<'a>(vars: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    vars.into_iter().map(|(n, v)| format!("export {n}={}\n", shell_quote(v))).collect()
}

/// The child's environment: ours in order, byte for byte, with `set` replacing or appending.
pub fn child_env(base: &[(OsString, OsString)], set: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
    // The gate's secret is nccl-wrap's alone: the command never sees it.
    let mut env: Vec<(OsString, OsString)> =
        base.iter().filter(|(n, _)| n.as_bytes() != GATE_SECRET.as_bytes()).cloned().collect();
    for (name, value) in set {
        match env.iter_mut().find(|(n, _)| n.as_bytes() == name.as_bytes()) {
            Some(slot) => slot.1 = OsString::from(value),
            None => env.push((OsString::from(name), OsString::from(value))),
        }
    }
    env
}

/// The variable that holds the gate's job secret (`--gate-secret`).
pub(crate) const GATE_SECRET: &str = "NCCL_WRAP_GATE_SECRET";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_compare_by_major_and_minor() {
        assert_eq!(version_at_least("2.30.7", IGNORE_NET_MISMATCH_SINCE), Some(true));
        assert_eq!(version_at_least("2.31.0+cuda13.0", IGNORE_NET_MISMATCH_SINCE), Some(true));
        assert_eq!(version_at_least("3.0.1", IGNORE_NET_MISMATCH_SINCE), Some(true));
        assert_eq!(version_at_least("2.28.9", IGNORE_NET_MISMATCH_SINCE), Some(false));
        assert_eq!(version_at_least("2.3", IGNORE_NET_MISMATCH_SINCE), Some(false));
        assert_eq!(version_at_least("two", IGNORE_NET_MISMATCH_SINCE), None);
        assert_eq!(version_at_least("2", IGNORE_NET_MISMATCH_SINCE), None);
    }

    #[test]
    fn the_gate_secret_never_reaches_the_command() {
        let base = [
            (OsString::from("NCCL_WRAP_GATE_SECRET"), OsString::from("s3cret")),
            (OsString::from("PATH"), OsString::from("/bin")),
        ];
        let env = child_env(&base, &[("NCCL_IB_HCA", "=mlx5_0:1")]);
        assert!(env.iter().all(|(n, _)| n != "NCCL_WRAP_GATE_SECRET"), "{env:?}");
        assert_eq!(env.len(), 2);
    }

    #[test]
    fn exact_hca_form() {
        assert_eq!(hca_value([("mlx5_6", 1), ("mlx5_10", 1)]), "=mlx5_6:1,mlx5_10:1");
    }

    #[test]
    fn quoting_survives_eval() {
        assert_eq!(shell_quote("=a:1"), "'=a:1'");
        assert_eq!(shell_quote("it's $(x)"), r"'it'\''s $(x)'");
        assert_eq!(export_lines([("A", "b c")]), "export A='b c'\n");
    }

    #[test]
    fn child_env_keeps_order_and_bytes() {
        use std::os::unix::ffi::OsStringExt;
        let raw = OsString::from_vec(vec![0xff, b'x']);
        let base = vec![(OsString::from("Z"), raw.clone()), (OsString::from("NCCL_IB_HCA"), OsString::from("mlx5"))];
        let env = child_env(&base, &[("NCCL_IB_HCA", "=a:1"), ("NCCL_IB_GID_INDEX", "3")]);
        assert_eq!(env[0], (OsString::from("Z"), raw));
        assert_eq!(env[1].1, OsString::from("=a:1"));
        assert_eq!(env[2].0, OsString::from("NCCL_IB_GID_INDEX"));
    }
}
