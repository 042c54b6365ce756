//! Ring mode's arithmetic: this pod's index, the job's size, the successor's address from the peer
//! template. Pure; the expansion is only a host name to resolve (`[A-Za-z0-9.-]`, at most 253
//! bytes, checked), never given to a shell.

use std::ffi::OsStr;

use nw_observe::detect::Vars;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RingError {
    #[error("ring mode needs this pod's index: pass --index (NCCL_WRAP_PING_INDEX), or run in an Indexed Job (JOB_COMPLETION_INDEX) or a StatefulSet (hostname ending in -N); the hostname here is {hostname:?}")]
    NoIndex { hostname: String },
    #[error("JOB_COMPLETION_INDEX={0:?} is not a number")]
    BadJobIndex(String),
    #[error("ring mode needs the number of pods: pass --size (NCCL_WRAP_PING_SIZE)")]
    NoSize,
    #[error("--size is 0: a ring needs at least one pod")]
    ZeroSize,
    #[error("this pod's index {index} is not below the ring size {size}: check --index/--size")]
    IndexOutOfRange { index: u32, size: u32 },
    #[error("ring mode needs --peer-template (NCCL_WRAP_PING_PEER_TEMPLATE), e.g. 'train-{{index}}.train'")]
    NoTemplate,
    #[error("--peer-template {0:?} has no {{index}}: every pod would ping the same host")]
    TemplateWithoutIndex(String),
    #[error("--peer-template {template:?} expands to {host:?}, which is not a host name (only A-Z a-z 0-9 . - and at most 253 bytes)")]
    BadHost { template: String, host: String },
}

/// This pod's place in the ring and its successor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ring {
    pub index: u32,
    pub peer_index: u32,
    pub peer_host: String,
}

/// Resolves the ring from `--index`, `--size`, `--peer-template`, the variables and the hostname.
pub fn resolve(
    index: Option<u32>,
    size: Option<u32>,
    template: Option<&str>,
    vars: &Vars,
    hostname: &str,
) -> Result<Ring, RingError> {
    let index = match (index, vars.get(OsStr::new("JOB_COMPLETION_INDEX"))) {
        (Some(i), _) => i,
        (None, Some(v)) => {
            let text = v.to_string_lossy().trim().to_owned();
            text.parse::<u32>().map_err(|_| RingError::BadJobIndex(text))?
        }
        (None, None) => ordinal(hostname).ok_or_else(|| RingError::NoIndex { hostname: hostname.to_owned() })?,
    };
    let size = size.ok_or(RingError::NoSize)?;
    if size == 0 {
        return Err(RingError::ZeroSize);
    }
    if index >= size {
        return Err(RingError::IndexOutOfRange { index, size });
    }
    let peer_index = (index + 1) % size;
    let peer_host = expand(template.ok_or(RingError::NoTemplate)?, peer_index)?;
    Ok(Ring { index, peer_index, peer_host })
}

/// A StatefulSet pod's ordinal: the digits after the hostname's last `-` (`train-12` -> 12).
/// Only the first label counts (a hostname may be given fully qualified).
pub fn ordinal(hostname: &str) -> Option<u32> {
    let first = hostname.trim().split('.').next()?;
    let (_, digits) = first.rsplit_once('-')?;
    let digits_only = !digits.is_empty() && digits.len() <= 9 && digits.bytes().all(|b| b.is_ascii_digit());
    digits.parse().ok().filter(|_| digits_only)
}

/// `{index}` replaced by `index`, checked to be a host name.
pub fn expand(template: &str, index: u32) -> Result<String, RingError> {
    if !template.contains("{index}") {
        return Err(RingError::TemplateWithoutIndex(template.to_owned()));
    }
    let host = template.replace("{index}", &index.to_string());
    if !is_host_name(&host) {
        return Err(RingError::BadHost { template: template.to_owned(), host });
    }
    Ok(host)
}

/// At most 253 bytes of `[A-Za-z0-9.-]`, not starting with `-` or `.`.
pub fn is_host_name(host: &str) -> bool {
    let allowed = |b: u8| b.is_ascii_alphanumeric() || b == b'.' || b == b'-';
    (1..=253).contains(&host.len()) && host.bytes().all(allowed) && !host.starts_with(['-', '.'])
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;

    fn vars(list: &[(&str, &str)]) -> Vars {
        list.iter().map(|(k, v)| (OsString::from(k), OsString::from(v))).collect()
    }

    #[test]
    fn index_comes_from_the_option_then_the_job_then_the_hostname() {
        let t = Some("train-{index}.train");
        let v = vars(&[("JOB_COMPLETION_INDEX", "2")]);
        let r = resolve(Some(1), Some(4), t, &v, "train-3").expect("ring");
        assert_eq!((r.index, r.peer_index, r.peer_host.as_str()), (1, 2, "train-2.train"));
        let r = resolve(None, Some(4), t, &v, "train-3").expect("ring");
        assert_eq!((r.index, r.peer_index), (2, 3));
        let r = resolve(None, Some(4), t, &vars(&[]), "train-3").expect("ring");
        assert_eq!((r.index, r.peer_index, r.peer_host.as_str()), (3, 0, "train-0.train"));
    }

    #[test]
    fn a_one_pod_ring_pings_itself() {
        let r = resolve(Some(0), Some(1), Some("w-{index}"), &vars(&[]), "x").expect("ring");
        assert_eq!((r.peer_index, r.peer_host.as_str()), (0, "w-0"));
    }

    #[test]
    fn missing_and_wrong_inputs_are_named() {
        let t = Some("train-{index}.train");
        let none = vars(&[]);
        assert_eq!(resolve(None, Some(2), t, &none, "worker"), Err(RingError::NoIndex { hostname: "worker".into() }));
        assert_eq!(
            resolve(None, Some(2), t, &vars(&[("JOB_COMPLETION_INDEX", "one")]), "w-1"),
            Err(RingError::BadJobIndex("one".into()))
        );
        assert_eq!(resolve(Some(0), None, t, &none, "w"), Err(RingError::NoSize));
        assert_eq!(resolve(Some(0), Some(0), t, &none, "w"), Err(RingError::ZeroSize));
        assert_eq!(resolve(Some(4), Some(4), t, &none, "w"), Err(RingError::IndexOutOfRange { index: 4, size: 4 }));
        assert_eq!(resolve(Some(0), Some(4), None, &none, "w"), Err(RingError::NoTemplate));
    }

    #[test]
    fn statefulset_ordinals() {
        assert_eq!(ordinal("train-0"), Some(0));
        assert_eq!(ordinal("train-worker-17.train.ns.svc.cluster.local"), Some(17));
        assert_eq!(ordinal("train"), None);
        assert_eq!(ordinal("train-"), None);
        assert_eq!(ordinal("train-1a"), None);
        assert_eq!(ordinal("train-99999999999"), None);
    }

    #[test]
    fn templates_must_expand_to_host_names() {
        assert_eq!(expand("train-{index}.train", 7), Ok("train-7.train".into()));
        assert_eq!(expand("train.train", 7), Err(RingError::TemplateWithoutIndex("train.train".into())));
        for bad in ["$(reboot)-{index}", "a b-{index}", "x-{index};rm", "-{index}", "h-{index}:80", "h_{index}"] {
            assert!(matches!(expand(bad, 1), Err(RingError::BadHost { .. })), "{bad}");
        }
        let long = format!("{}-{{index}}", "a".repeat(260));
        assert!(matches!(expand(&long, 1), Err(RingError::BadHost { .. })));
    }
}
