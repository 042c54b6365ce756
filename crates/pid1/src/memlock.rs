//! Apply: raise RLIMIT_MEMLOCK, which the command inherits (RDMA registration pins pages). It never
//! asks for a capability it does not have: it reads the effective set to explain the outcome.

use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
use rustix::thread::CapabilityFlags;
use serde::Serialize;

/// Soft and hard RLIMIT_MEMLOCK, in bytes; `None` is unlimited (`RLIM_INFINITY`). In JSON each
/// is a number of bytes or the string `"unlimited"`, never `null` (which would read as unknown).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Limits {
    #[serde(rename = "soft_bytes", serialize_with = "bytes_or_unlimited")]
    pub soft: Option<u64>,
    #[serde(rename = "hard_bytes", serialize_with = "bytes_or_unlimited")]
    pub hard: Option<u64>,
}

fn bytes_or_unlimited<S: serde::Serializer>(v: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(b) => s.serialize_u64(*b),
        None => s.serialize_str("unlimited"),
    }
}

impl From<Rlimit> for Limits {
    fn from(r: Rlimit) -> Limits {
        Limits { soft: r.current, hard: r.maximum }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    AlreadyUnlimited,
    RaisedToUnlimited,
    /// Hard limit could not be raised; soft now equals hard.
    SoftRaisedToHard,
    /// Soft already equals a hard limit that cannot be raised.
    CappedAtHard,
    Failed,
}

#[derive(Debug, Clone, Serialize)]
pub struct Memlock {
    pub before: Limits,
    pub after: Limits,
    pub outcome: Outcome,
    /// Whether CAP_IPC_LOCK is effective (`None`: could not read the capability set).
    pub cap_ipc_lock: Option<bool>,
    pub cap_sys_resource: Option<bool>,
    pub error: Option<String>,
}

impl Memlock {
    /// Whether memory registration of large buffers can be expected to work.
    pub fn sufficient(&self) -> bool {
        self.after.soft.is_none() || self.cap_ipc_lock == Some(true)
    }

    /// One sentence for people.
    pub fn describe(&self) -> String {
        let l = |v: Option<u64>| v.map_or("unlimited".to_string(), human);
        let limits = match self.outcome {
            Outcome::AlreadyUnlimited => "already unlimited".to_string(),
            Outcome::RaisedToUnlimited => format!("raised from {} to unlimited", l(self.before.soft)),
            Outcome::SoftRaisedToHard | Outcome::CappedAtHard => format!(
                "soft {} -> {}, hard limit {} cannot be raised without CAP_SYS_RESOURCE",
                l(self.before.soft),
                l(self.after.soft),
                l(self.after.hard)
            ),
            Outcome::Failed => format!("left at {} ({})", l(self.after.soft), self.error.as_deref().unwrap_or("?")),
        };
        let caps = match (self.after.soft.is_none(), self.cap_ipc_lock) {
            (true, _) => String::new(),
            (false, Some(true)) => "; CAP_IPC_LOCK is effective, so RDMA memory registration is not bound by it".into(),
            (false, Some(false)) => "; CAP_IPC_LOCK is not effective either, so RDMA registrations over this limit fail: add CAP_IPC_LOCK to the container's securityContext capabilities, or raise the runtime's memlock ulimit (containerd/CRI-O default_ulimits)".into(),
            (false, None) => "; could not read the capability set".into(),
        };
        format!("RLIMIT_MEMLOCK {limits}{caps}")
    }
}

fn human(bytes: u64) -> String {
    for (shift, unit) in [(30, "GiB"), (20, "MiB"), (10, "KiB")] {
        if bytes >= 1 << shift && bytes % (1 << shift) == 0 {
            return format!("{} {unit}", bytes >> shift);
        }
    }
    format!("{bytes} bytes")
}

/// Raises the limit of this process (and so of what it execs or forks).
pub fn raise() -> Memlock {
    let before: Limits = getrlimit(Resource::Memlock).into();
    let (cap_ipc_lock, cap_sys_resource) = effective_caps();
    let mut error = None;
    let outcome = if before.soft.is_none() && before.hard.is_none() {
        Outcome::AlreadyUnlimited
    } else if setrlimit(Resource::Memlock, Rlimit { current: None, maximum: None }).is_ok() {
        Outcome::RaisedToUnlimited
    } else if before.soft == before.hard {
        Outcome::CappedAtHard
    } else {
        match setrlimit(Resource::Memlock, Rlimit { current: before.hard, maximum: before.hard }) {
            Ok(()) => Outcome::SoftRaisedToHard,
            Err(e) => {
                error = Some(format!("setrlimit(RLIMIT_MEMLOCK): {e}"));
                Outcome::Failed
            }
        }
    };
    // What setrlimit set, or the unchanged limit; read again only where a call failed half-way.
    let after = match outcome {
        Outcome::AlreadyUnlimited | Outcome::CappedAtHard => before,
        Outcome::RaisedToUnlimited => Limits { soft: None, hard: None },
        Outcome::SoftRaisedToHard => Limits { soft: before.hard, hard: before.hard },
        Outcome::Failed => getrlimit(Resource::Memlock).into(),
    };
    Memlock { before, after, outcome, cap_ipc_lock, cap_sys_resource, error }
}

/// CAP_IPC_LOCK and CAP_SYS_RESOURCE in this thread's effective set (one capget).
fn effective_caps() -> (Option<bool>, Option<bool>) {
    let sets = rustix::thread::capabilities(None).inspect_err(|e| log::debug!("capget: {e}")).ok();
    let has = |flag| sets.as_ref().map(|s| s.effective.contains(flag));
    (has(CapabilityFlags::IPC_LOCK), has(CapabilityFlags::SYS_RESOURCE))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_sizes() {
        assert_eq!(human(8 << 20), "8 MiB");
        assert_eq!(human(64 << 10), "64 KiB");
        assert_eq!(human(1000), "1000 bytes");
    }

    #[test]
    fn describe_names_the_fix_without_ipc_lock() {
        let m = Memlock {
            before: Limits { soft: Some(8 << 20), hard: Some(8 << 20) },
            after: Limits { soft: Some(8 << 20), hard: Some(8 << 20) },
            outcome: Outcome::CappedAtHard,
            cap_ipc_lock: Some(false),
            cap_sys_resource: Some(false),
            error: None,
        };
        assert!(!m.sufficient());
        assert!(m.describe().contains("add CAP_IPC_LOCK"), "{}", m.describe());
    }
}
