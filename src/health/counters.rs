//! A port's counters as the metrics show them: `ports/N/counters/*` (IBTA) and
//! `ports/N/hw_counters/*` (the driver's own), whatever the device has, read by `detect::counters`.

use std::collections::BTreeSet;
use std::sync::Mutex;

use nw_observe::detect::counters as port_counters;
use nw_observe::detect::sysfs::Sysfs;
use nw_output::msg::PREFIX;

/// The counter problems already named by this process (the node agent reads every round).
static NAMED: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

/// Whether `problem` is named for the first time; at most 1,024 are remembered.
fn first_time(problem: &str) -> bool {
    NAMED.lock().is_ok_and(|mut named| named.len() < 1024 && named.insert(problem.to_string()))
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counter {
    /// `counters` or `hw_counters`.
    pub dir: &'static str,
    pub name: String,
    pub value: u64,
}

/// Every counter of one port, in name order per directory; an unreadable entry costs only itself
/// (a healthy port's `VL15_dropped` can fail with EINVAL: prometheus/node_exporter#3265), and is
/// named once per process, not every round.
pub fn read(sysfs: &Sysfs, device: &str, port: u32) -> Vec<Counter> {
    let mut problems = Vec::new();
    let read = port_counters::read(&sysfs.path(&format!("class/infiniband/{device}/ports/{port}")), &mut problems);
    for p in problems {
        if first_time(&p) {
            eprintln!("{PREFIX} warning: {p}; that counter is left out, the port's others are read");
        } else {
            log::debug!("{p}");
        }
    }
    read.into_iter()
        .filter_map(|(key, value)| {
            let (group, name) = port_counters::split(&key);
            let dir = port_counters::GROUPS.into_iter().find(|d| *d == group)?;
            Some(Counter { dir, name: name.to_string(), value })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_numbers_and_skips_settings_and_junk() {
        let root = std::env::temp_dir().join(format!("nccl-wrap-counters-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let hw = root.join("class/infiniband/rxe0/ports/1/hw_counters");
        std::fs::create_dir_all(&hw).expect("mkdir");
        std::fs::write(hw.join("rcvd_seq_err"), "7\n").expect("write");
        std::fs::write(hw.join("lifespan"), "10\n").expect("write");
        std::fs::write(hw.join("junk"), "n/a\n").expect("write");
        std::fs::write(hw.join("bad name"), "1\n").expect("write");
        let got = read(&Sysfs::new(&root), "rxe0", 1);
        let _ = std::fs::remove_dir_all(&root);
        assert_eq!(got, vec![Counter { dir: "hw_counters", name: "rcvd_seq_err".into(), value: 7 }]);
    }
}
