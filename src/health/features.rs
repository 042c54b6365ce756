//! Node Feature Discovery's local feature file: `nccl-wrap.feature.node.kubernetes.io/<name>=value`
//! lines, each checked against Kubernetes' label syntax (one that fails is returned, not written),
//! and `# +expiry-time=` for watch. Pure.

use std::fmt::Write as _;

use super::Health;
use crate::doctor::status_word;

/// The namespace of every label.
pub const PREFIX: &str = "nccl-wrap.feature.node.kubernetes.io";

/// NFD ignores a feature file larger than this.
pub const NFD_MAX_BYTES: usize = 64 * 1024;

/// The label lines (`PREFIX/name`, value) the health value gives, sorted by name.
pub fn labels(h: &Health) -> Vec<(String, String)> {
    let b = |v: bool| if v { "true" } else { "false" }.to_string();
    let mut out: Vec<(String, String)> = vec![
        ("healthy".into(), b(h.healthy)),
        ("rdma-ports".into(), h.ports.len().to_string()),
        ("rdma-ports-usable".into(), h.usable().to_string()),
        ("gid-index-consistent".into(), b(h.gid_consistent)),
        ("memlock".into(), if h.memlock_bytes.is_none() { "unlimited" } else { "limited" }.into()),
        ("gpudirect".into(), b(h.gpudirect)),
    ];
    let optional = [
        h.gid_index.map(|i| ("gid-index", i.to_string())),
        h.iommu_passthrough.map(|pt| ("iommu-passthrough", b(pt))),
        h.link_layer().map(|l| ("link-layer", l.to_string())),
        h.min_rate_gbps().map(|r| ("rdma-rate-gbps", format!("{r}"))),
    ];
    out.extend(optional.into_iter().flatten().map(|(n, v)| (n.to_string(), v)));
    if let Some(r) = &h.ring {
        out.push(("ring".into(), r.word().into()));
        if let super::ring::Outcome::Tested { pairs, .. } = &r.outcome {
            // The worst pair's cause id (ping's ids are lowercase words and dashes: label-safe).
            if let Some(c) = pairs.iter().filter(|p| p.cause.is_some()).max_by_key(|p| p.status).and_then(|p| p.cause) {
                out.push(("ring-cause".into(), c.into()));
            }
        }
    }
    for (id, s) in h.worst_by_id() {
        out.push((format!("check.{id}"), status_word(s).into()));
    }
    let mut out: Vec<(String, String)> = out.into_iter().map(|(n, v)| (format!("{PREFIX}/{n}"), v)).collect();
    out.sort();
    out
}

/// The whole file, and the labels left out for failing Kubernetes' syntax (none, unless a bug).
/// `written_by` names the command; `now` and `expiry` are Unix seconds.
pub fn render(h: &Health, written_by: &str, now: u64, expiry: Option<u64>) -> (String, Vec<String>) {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# nccl-wrap {}: RDMA health of this node ({} view), written by `{written_by}` at {}; names: docs/health.md",
        env!("CARGO_PKG_VERSION"),
        super::view_name(h.view),
        rfc3339(now)
    );
    if let Some(t) = expiry {
        // Applies to every line below: NFD drops them once the agent stops renewing the file.
        let _ = writeln!(out, "# +expiry-time={}", rfc3339(t));
    }
    let mut refused = Vec::new();
    for (name, value) in labels(h) {
        match (label_name_error(&name), label_value_error(&value)) {
            (None, None) => {
                let _ = writeln!(out, "{name}={value}");
            }
            (n, v) => refused.push(format!("{name}={value}: {}", n.or(v).unwrap_or_default())),
        }
    }
    (out, refused)
}

/// Why `name` is not a valid Kubernetes label key (`prefix/name`), or `None`.
pub fn label_name_error(key: &str) -> Option<String> {
    let (prefix, name) = key.split_once('/').map_or((None, key), |(p, n)| (Some(p), n));
    if let Some(p) = prefix {
        let dns = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-';
        let label_ok =
            |l: &str| (1..=63).contains(&l.len()) && l.bytes().all(dns) && !l.starts_with('-') && !l.ends_with('-');
        if p.is_empty() || p.len() > 253 || !p.split('.').all(label_ok) {
            return Some(format!("prefix {p:?} is not a DNS subdomain"));
        }
    }
    segment_error(name).map(|e| format!("name {name:?} {e}"))
}

/// Why `value` is not a valid label value, or `None` (empty is valid).
pub fn label_value_error(value: &str) -> Option<String> {
    if value.is_empty() {
        return None;
    }
    segment_error(value).map(|e| format!("value {value:?} {e}"))
}

/// At most 63 characters of `[A-Za-z0-9_.-]`, alphanumeric at both ends.
fn segment_error(s: &str) -> Option<&'static str> {
    let ends = |c: Option<u8>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    let allowed = |c: u8| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.');
    let faults = [
        (s.is_empty(), "is empty"),
        (s.len() > 63, "is longer than 63 characters"),
        (!s.bytes().all(allowed), "has characters outside [A-Za-z0-9_.-]"),
        (!ends(s.bytes().next()) || !ends(s.bytes().last()), "does not begin and end with [A-Za-z0-9]"),
    ];
    faults.into_iter().find(|(fault, _)| *fault).map(|(_, why)| why)
}

/// `2026-11-23T18:30:00Z` for Unix seconds (UTC).
pub fn rfc3339(unix: u64) -> String {
    let (year, month, day) = nw_postmortem::utc::civil(i64::try_from(unix / 86_400).unwrap_or(i64::MAX / 2));
    let secs = unix % 86_400;
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z", secs / 3600, secs % 3600 / 60, secs % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_matches_known_dates() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_690_629_753), "2023-07-29T11:22:33Z");
        assert_eq!(rfc3339(4_102_444_799), "2099-12-31T23:59:59Z");
    }

    #[test]
    fn the_file_for_a_known_value() {
        let (text, refused) = render(&super::super::sample(), "nccl-wrap watch", 1_690_629_753, Some(1_690_629_873));
        assert!(refused.is_empty(), "{refused:?}");
        let want = "\
# +expiry-time=2023-07-29T11:24:33Z
nccl-wrap.feature.node.kubernetes.io/check.memlock=fail
nccl-wrap.feature.node.kubernetes.io/check.ports=fail
nccl-wrap.feature.node.kubernetes.io/check.topology=warn
nccl-wrap.feature.node.kubernetes.io/gid-index=3
nccl-wrap.feature.node.kubernetes.io/gid-index-consistent=true
nccl-wrap.feature.node.kubernetes.io/gpudirect=false
nccl-wrap.feature.node.kubernetes.io/healthy=false
nccl-wrap.feature.node.kubernetes.io/iommu-passthrough=true
nccl-wrap.feature.node.kubernetes.io/link-layer=ethernet
nccl-wrap.feature.node.kubernetes.io/memlock=limited
nccl-wrap.feature.node.kubernetes.io/rdma-ports=2
nccl-wrap.feature.node.kubernetes.io/rdma-ports-usable=1
nccl-wrap.feature.node.kubernetes.io/rdma-rate-gbps=400
";
        let (first, rest) = text.split_once('\n').expect("lines");
        assert!(
            first.starts_with("# nccl-wrap ")
                && first.contains("(node view)")
                && first.contains("2023-07-29T11:22:33Z")
        );
        assert_eq!(rest, want);
    }

    #[test]
    fn a_value_kubernetes_would_refuse_is_left_out_not_written() {
        let mut h = super::super::sample();
        // A rate sysfs should never print, but a broken driver could: 301 digits as a label value.
        h.ports[0].rate = Some("1e300 Gb/sec (4X NDR)".into());
        let (text, refused) = render(&h, "test", 0, None);
        assert!(!text.contains("rdma-rate-gbps"), "{text}");
        assert_eq!(refused.len(), 1, "{refused:?}");
        assert!(refused[0].contains("longer than 63"), "{refused:?}");
        assert!(text.contains(&format!("{PREFIX}/healthy=false")), "the rest is written");
    }

    #[test]
    fn kubernetes_label_syntax() {
        assert_eq!(label_name_error(&format!("{PREFIX}/healthy")), None);
        assert_eq!(label_name_error(&format!("{PREFIX}/check.nccl-env")), None);
        assert!(label_name_error(&format!("{PREFIX}/-x")).is_some());
        assert!(label_name_error("Upper.Case/x").is_some());
        assert!(label_name_error(&format!("{PREFIX}/{}", "a".repeat(64))).is_some());
        assert!(label_name_error("a/b/c").is_some());
        assert_eq!(label_value_error(""), None);
        assert_eq!(label_value_error("2.5"), None);
        assert!(label_value_error("400 Gb/sec").is_some());
        assert!(label_value_error("x.").is_some());
        assert!(label_value_error(&"1".repeat(64)).is_some());
    }
}
