//! memlock: can NCCL pin its buffers.

use super::*;

pub(super) fn check(inp: &Inputs) -> Check {
    let m = inp.memlock;
    let lim = |v: Option<u64>| v.map_or(json!("unlimited"), |b| json!(b));
    let soft = m.after.soft;
    let (status, summary, hint) = match (soft, m.cap_ipc_lock) {
        (None, _) => (Status::Pass, format!("{}: registrations are not bounded", m.describe()), None),
        (Some(_), Some(true)) => (Status::Pass, m.describe(), None),
        (Some(s), Some(false)) if s < REGISTER_BYTES => (
            Status::Fail,
            format!(
                "{}: registering a {} MiB buffer (NCCL's own buffers, at least) would be refused with ENOMEM",
                m.describe(),
                REGISTER_BYTES >> 20
            ),
            Some("add CAP_IPC_LOCK to the container's securityContext capabilities, or raise the runtime's memlock ulimit (containerd/CRI-O default_ulimits, `LimitMEMLOCK=infinity` for the runtime's systemd unit)"),
        ),
        (Some(_), Some(false)) => (
            Status::Warn,
            format!("{}: enough for {} MiB, but larger registrations (user buffers) may be refused", m.describe(), REGISTER_BYTES >> 20),
            Some("add CAP_IPC_LOCK, or make the memlock limit unlimited"),
        ),
        (Some(_), None) => (
            Status::Warn,
            format!("{}: cannot tell whether registrations over it are allowed", m.describe()),
            Some("capget failed (see NCCL_WRAP_LOG=debug); check CapEff in /proc/self/status for CAP_IPC_LOCK (bit 14) by hand"),
        ),
    };
    Check::new("memlock", status, summary)
        .hint_opt(hint)
        .ev("soft_before_bytes", lim(m.before.soft))
        .ev("hard_before_bytes", lim(m.before.hard))
        .ev("soft_bytes", lim(m.after.soft))
        .ev("hard_bytes", lim(m.after.hard))
        .ev("raised", !matches!(m.outcome, Outcome::CappedAtHard | Outcome::Failed))
        .ev("cap_ipc_lock", json!(m.cap_ipc_lock))
        .ev("cap_sys_resource", json!(m.cap_sys_resource))
        .ev("capabilities_from", "capget(2)")
        .ev("register_bytes", REGISTER_BYTES)
}
