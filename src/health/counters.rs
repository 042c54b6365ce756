//! A port's error and traffic counters: `ports/N/counters/*` (the IBTA port counters, read from
//! the HCA's performance management agent; mlx5 has them, rxe does not) and
//! `ports/N/hw_counters/*` (the driver's own: mlx5's `out_of_sequence`, `packet_seq_err`,
//! `local_ack_timeout_err`..., rxe's `retry_exceeded_err`, `rcvd_seq_err`...). Whatever the device
//! has is reported; nothing is assumed present.
//!
//! Bounded: at most [`MAX_PER_DIR`] entries per directory, each read once through
//! `detect::file` relative to the open directory (non-blocking, regular files only, one page). It must never write: `lifespan`
//! in `hw_counters` is a setting (how long the kernel caches the values), not a counter, and is
//! left out.

use std::path::Path;

use crate::detect::file;
use crate::detect::sysfs::Sysfs;

/// More than any driver has (mlx5 about 40 hw_counters, the IBTA set about 20).
pub const MAX_PER_DIR: usize = 128;

/// The two directories, as the metrics name them.
pub const DIRS: [&str; 2] = ["counters", "hw_counters"];

/// Entries of `hw_counters` that are settings, not counters.
const NOT_COUNTERS: [&str; 1] = ["lifespan"];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counter {
    /// `counters` or `hw_counters`.
    pub dir: &'static str,
    pub name: String,
    pub value: u64,
}

/// A counter file name: `[A-Za-z0-9_]`, at most 64 bytes (`VL15_dropped`, `np_cnp_sent`).
pub fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= 64 && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Every counter of one port, in name order per directory; unreadable or non-numeric entries are
/// left out (logged at debug level).
pub fn read(sysfs: &Sysfs, device: &str, port: u32) -> Vec<Counter> {
    let mut out = Vec::new();
    for dir in DIRS {
        let path = sysfs.path(&format!("class/infiniband/{device}/ports/{port}/{dir}"));
        out.extend(read_dir(&path, dir));
    }
    out
}

fn read_dir(path: &Path, dir: &'static str) -> Vec<Counter> {
    let Ok(entries) = std::fs::read_dir(path) else { return Vec::new() };
    let mut names: Vec<String> = entries
        .flatten()
        .take(MAX_PER_DIR * 2)
        .filter_map(|e| e.file_name().to_str().map(String::from))
        .filter(|n| valid_name(n) && !NOT_COUNTERS.contains(&n.as_str()))
        .collect();
    names.sort();
    names.truncate(MAX_PER_DIR);
    // Each counter is read relative to the open directory: one open, one read, one close each,
    // the file's type asked only when the read is not a clean value (see `file::read_attr_at`).
    let flags = rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC;
    let Ok(fd) = rustix::fs::open(path, flags, rustix::fs::Mode::empty()) else { return Vec::new() };
    names
        .into_iter()
        .filter_map(|name| match file::read_attr_at(&fd, path, &name).map(|t| t.parse::<u64>()) {
            Ok(Ok(value)) => Some(Counter { dir, name, value }),
            Ok(Err(e)) => {
                log::debug!("{}: not a counter value: {e}", path.join(&name).display());
                None
            }
            Err(e) => {
                log::debug!("{e}");
                None
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_plain_identifiers() {
        assert!(valid_name("port_rcv_errors"));
        assert!(valid_name("VL15_dropped"));
        assert!(!valid_name("a\"b"));
        assert!(!valid_name(""));
        assert!(!valid_name(&"x".repeat(65)));
    }

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
