//! The typed settings of each front end, made from the validated options: ping's and the pair
//! test's, the health files', and whether ibverbs are consulted. No reads, no checks: the
//! options are valid by the time they come here (`validate`).

use std::path::{Path, PathBuf};

use super::{Opts, PingArgs, WatchArgs};
use crate::{health, ping};
use nw_observe::detect::{dra_metadata, sysfs::Sysfs};
use nw_observe::{observation, verbs};
use nw_pairtest as pairtest;

/// Where every read starts; the dev root's uverbs nodes count but where a node tree is read with
/// the machine's own `/dev`, whose nodes are another machine's.
pub fn roots<'a>(o: &'a Opts, sysfs: &'a Sysfs, dra_metadata: &'a Path) -> observation::Roots<'a> {
    let own_dev = o.sysfs_root == Path::new("/sys") || o.dev_root != Path::new("/dev");
    observation::Roots {
        sysfs,
        proc_root: &o.proc_root,
        dev_root: &o.dev_root,
        image_root: &o.image_root,
        annotations: &o.annotations,
        dra_metadata,
        device_nodes: own_dev.then_some(o.dev_root.as_path()),
    }
}

/// Where the KEP-5304 device metadata trees are (the kubelet mounts them at one place): the
/// container's, or the same path inside a node tree whose sysfs root is `<node>/sys`.
pub fn dra_metadata_root(o: &Opts) -> PathBuf {
    let container = Path::new(dra_metadata::CONTAINER_DIR);
    match o.sysfs_root.parent() {
        Some(node) if o.sysfs_root != Path::new("/sys") && o.sysfs_root.ends_with("sys") => {
            node.join(container.strip_prefix("/").unwrap_or(container))
        }
        _ => container.to_path_buf(),
    }
}

/// The gate's coordinator, as the bootstrap's last source of where the job's coordinator is.
pub fn gate_coordinator(o: &Opts) -> Option<nw_decide::bootstrap::Gate<'_>> {
    o.gate_coordinator.as_deref().map(|value| nw_decide::bootstrap::Gate { name: "--gate-coordinator", value })
}

pub fn ping_options(p: &PingArgs) -> ping::Options {
    let mode = match (&p.target, &p.listen) {
        (Some(t), _) => ping::Mode::Connect(t.clone()),
        (None, Some(l)) => ping::Mode::Listen { addr: l.clone(), keep: p.keep },
        (None, None) => {
            ping::Mode::Ring { template: p.peer_template.clone(), index: p.index, size: p.size, port: p.port }
        }
    };
    ping::Options { mode, json: p.json, test: test_settings(p), wait_ms: p.wait_ms, allow: p.allow.clone() }
}

/// The pair test's settings from ping's knobs (ping's flags, or the gate's `NCCL_WRAP_PING_*`).
pub fn test_settings(p: &PingArgs) -> pairtest::Settings {
    pairtest::Settings {
        all_pairs: p.all_pairs,
        bytes: p.bytes,
        iters: p.iters,
        duration_ms: p.duration_ms,
        timeout: std::time::Duration::from_millis(p.timeout_ms),
        gate: None,
    }
}

/// The real ibverbs, or a stand-in that says why they are not consulted.
pub fn verbs_for(opts: &Opts) -> Box<dyn verbs::Verbs> {
    match verbs_skipped(opts) {
        Some(reason) => Box::new(verbs::NoVerbs { reason: reason.to_string() }),
        None => Box::new(verbs::IbVerbs),
    }
}

/// Why ibverbs are not consulted, if they are not.
pub fn verbs_skipped(opts: &Opts) -> Option<&'static str> {
    if opts.skip_verbs {
        Some("--skip-verbs (NCCL_WRAP_SKIP_VERBS) is set")
    } else if opts.sysfs_root != Path::new("/sys") {
        // libibverbs reads the kernel's /sys: its answers would not be about this tree's devices.
        Some("the sysfs root is not /sys, and libibverbs reads the kernel's")
    } else {
        None
    }
}

/// The node agent's settings: its rounds, its files and its ring.
pub fn watch_options(w: &WatchArgs) -> health::watch::Options {
    health::watch::Options {
        interval: std::time::Duration::from_millis(w.interval_ms),
        jitter_pct: w.jitter_pct,
        rounds: w.rounds,
        outputs: w.files.clone(),
        ring: w.ring.clone().map(|(service, port)| health::ring::Config {
            service,
            port,
            every: w.ring_every,
            timeout: std::time::Duration::from_millis(w.ring_timeout_ms),
        }),
    }
}
