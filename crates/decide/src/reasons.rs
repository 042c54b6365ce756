//! Reasons that name the real cause where the port-level rule would mislead (iWARP, a kept
//! `NCCL_IB_GID_INDEX` on an empty or invalid entry, a link-local IPv4 GID). Pure.

use super::{Action, Plan};
use nw_nccl::env::IB_GID_INDEX;
use nw_nccl::gid::{self, GidEntry, GidPrefs, RoceType};

/// One used RoCE port and its entry at a kept index (GID and type text; `None`: unreadable).
pub(crate) type KeptEntry = (String, Option<String>, Option<String>);

/// The user's `NCCL_IB_GID_INDEX` stays in the child's environment: set, and not replaced.
pub fn index_is_kept(plan: &Plan, user: Option<&str>) -> bool {
    user.is_some() && !plan.vars.iter().any(|v| v.name == IB_GID_INDEX && v.action != Action::Kept)
}

/// `iwarp`: devices whose `node_type` is `4: RNIC`; `kept_index`: a user's kept
/// `NCCL_IB_GID_INDEX`, and the entry it points at on each used RoCE port.
pub(crate) fn apply(plan: &mut Plan, iwarp: &[String], kept_index: Option<(String, Vec<KeptEntry>)>, prefs: &GidPrefs) {
    for d in plan.decisions.iter_mut().filter(|d| !d.used && iwarp.contains(&d.device)) {
        d.reason = Some(format!(
            "an iWARP device (node_type 4: RNIC): NCCL's verbs transport uses InfiniBand and RoCE ports only{}",
            d.reason.as_deref().map(|r| format!(" (the port rule said: {r})")).unwrap_or_default()
        ));
    }
    if let Some((value, entries)) = &kept_index {
        let index = value.trim().parse::<u32>().ok();
        let mut bad = Vec::new();
        for (label, g, t) in entries {
            let parsed = g.as_deref().and_then(gid::parse_gid);
            let roce = t.as_deref().and_then(RoceType::parse);
            let entry = index.zip(parsed).map(|(index, gid)| GidEntry { index, gid, roce });
            if !entry.is_some_and(|e| gid::is_full_match(&e, prefs)) {
                bad.push(match parsed {
                    Some(a) if !a.is_unspecified() => format!(
                        "{label} holds {} ({}), no RoCE v{} {} entry",
                        gid::display(&a),
                        t.as_deref().unwrap_or("type unreadable"),
                        prefs.roce_version,
                        if prefs.family == gid::Family::Inet { "IPv4" } else { "IPv6" }
                    ),
                    _ => format!("{label} holds an empty entry"),
                });
            }
        }
        let what = match index {
            None if !entries.is_empty() => Some("is not an index".to_string()),
            Some(_) if !bad.is_empty() => Some(format!("points where {}", bad.join(", "))),
            _ => None,
        };
        if let Some(what) = what {
            plan.warnings.push(format!(
                "NCCL_IB_GID_INDEX={value:?} is kept from the environment and {what}: NCCL will fail on it (its queue pairs take that entry as their source: an empty one sources nothing, a link-local or RoCE v1 one does not cross subnets); unset it and nccl-wrap sets the right one, or pass --override"
            ));
        }
    }
    let ll: Vec<String> = plan
        .used_ports()
        .filter_map(|(d, p)| {
            let g = p.gid.as_ref()?;
            gid::parse_gid(&g.gid)
                .filter(|a| a.to_ipv4_mapped().is_some_and(|v4| v4.is_link_local()))
                .map(|_| format!("{d}:{} ({})", p.port, g.address))
        })
        .collect();
    if !ll.is_empty() {
        plan.notes.push(format!(
            "link-local GID on {}: NCCL uses IPv4 link-local (169.254/16) entries like any other, but such a port reaches only its own link (no router forwards 169.254/16)",
            ll.join(", ")
        ));
    }
}
