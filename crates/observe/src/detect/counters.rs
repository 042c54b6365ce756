//! One RDMA port's counters: every file under `ports/N/counters/` and `ports/N/hw_counters/`, for
//! the post-mortem and the node agent alike; what they mean is `meaning`'s concern. Never fails the
//! caller: what cannot be read is left out and said in `problems`; reads are bounded.

use std::collections::BTreeMap;
use std::os::fd::OwnedFd;
use std::path::Path;

use rustix::fs::Mode;

use crate::detect::file;

/// The two counter directories of a port, in the order they are read.
pub const GROUPS: [&str; 2] = ["counters", "hw_counters"];

/// Counter values keyed by `group/name` (`hw_counters/link_downed`).
pub type Counters = BTreeMap<String, u64>;

/// More files than any driver puts in one counter directory (mlx5 has about 40).
const MAX_PER_GROUP: usize = 256;

/// Files of `hw_counters` that are settings, not counters (`lifespan`, writable).
const NOT_COUNTERS: [&str; 1] = ["lifespan"];

/// The group and bare name of a key: `hw_counters/link_downed` -> (`hw_counters`, `link_downed`).
pub fn split(key: &str) -> (&str, &str) {
    key.split_once('/').unwrap_or(("", key))
}

/// Every counter under `port_dir` (`.../class/infiniband/DEV/ports/N`).
pub fn read(port_dir: &Path, problems: &mut Vec<String>) -> Counters {
    let mut out = Counters::new();
    for group in GROUPS {
        read_group(&port_dir.join(group), group, &mut out, problems);
    }
    out
}

fn read_group(dir: &Path, group: &str, out: &mut Counters, problems: &mut Vec<String>) {
    let fd = match rustix::fs::open(dir, file::DIR_FLAGS, Mode::empty()) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::NOENT) => return,
        Err(e) => {
            problems.push(format!("cannot open {}: {e}", dir.display()));
            return;
        }
    };
    let listed = std::fs::read_dir(dir).map_err(|e| problems.push(format!("cannot list {}: {e}", dir.display())));
    let Ok(entries) = listed else { return };
    // One entry past the bound tells a directory that is too large, without listing all of it.
    let mut names: Vec<String> = entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !NOT_COUNTERS.contains(&n.as_str()))
        .take(MAX_PER_GROUP + 1)
        .collect();
    if names.len() > MAX_PER_GROUP {
        problems
            .push(format!("{} holds more than {MAX_PER_GROUP} entries; only {MAX_PER_GROUP} are read", dir.display()));
        names.truncate(MAX_PER_GROUP);
    }
    names.sort();
    for name in names {
        if !valid_name(&name) {
            problems.push(format!("{}: entry {name:?} is not a counter name; skipped", dir.display()));
            continue;
        }
        out.extend(read_one(&fd, dir, &name, problems).map(|v| (format!("{group}/{name}"), v)));
    }
}

fn read_one(fd: &OwnedFd, dir: &Path, name: &str, problems: &mut Vec<String>) -> Option<u64> {
    let text = file::read_attr_at(fd, dir, name).map_err(|e| problems.push(e.to_string())).ok()?;
    let not_a_value =
        |_| problems.push(format!("{}: {text:?} is not a counter value; skipped", dir.join(name).display()));
    text.parse::<u64>().map_err(not_a_value).ok()
}

/// Counter names are short identifiers (`port_rcv_errors`, `VL15_dropped`).
fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= 64 && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    struct Dir(PathBuf);
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn port(tag: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("nccl-wrap-counters-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("hw_counters")).expect("mkdir");
        Dir(d)
    }

    #[test]
    fn both_groups_are_read_and_keyed_by_group() {
        let d = port("both");
        std::fs::create_dir_all(d.0.join("counters")).expect("mkdir");
        std::fs::write(d.0.join("counters/link_downed"), "2\n").expect("write");
        std::fs::write(d.0.join("counters/symbol_error"), "0\n").expect("write");
        std::fs::write(d.0.join("hw_counters/out_of_sequence"), "17\n").expect("write");
        std::fs::write(d.0.join("hw_counters/lifespan"), "10\n").expect("write");
        let mut problems = Vec::new();
        let c = read(&d.0, &mut problems);
        assert!(problems.is_empty(), "{problems:?}");
        let want: Counters =
            [("counters/link_downed", 2), ("counters/symbol_error", 0), ("hw_counters/out_of_sequence", 17)]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect();
        assert_eq!(c, want, "lifespan is a setting, not a counter");
        assert_eq!(split("hw_counters/out_of_sequence"), ("hw_counters", "out_of_sequence"));
    }

    #[test]
    fn a_directory_past_the_bound_is_read_only_to_the_bound() {
        let d = port("many");
        for i in 0..=MAX_PER_GROUP + 5 {
            std::fs::write(d.0.join(format!("hw_counters/c{i:04}")), "1\n").expect("write");
        }
        let mut problems = Vec::new();
        assert_eq!(read(&d.0, &mut problems).len(), MAX_PER_GROUP);
        assert!(problems.len() == 1 && problems[0].contains("more than 256 entries"), "{problems:?}");
    }

    #[test]
    fn a_missing_group_is_no_problem_and_bad_entries_are_named_not_fatal() {
        let d = port("bad");
        std::fs::write(d.0.join("hw_counters/sent_pkts"), "5\n").expect("write");
        std::fs::write(d.0.join("hw_counters/garbled"), "n/a\n").expect("write");
        std::fs::write(d.0.join("hw_counters/huge"), vec![b'9'; file::ATTR_MAX + 10]).expect("write");
        std::fs::write(d.0.join("hw_counters/bad name"), "1\n").expect("write");
        std::fs::create_dir(d.0.join("hw_counters/subdir")).expect("mkdir");
        let mut problems = Vec::new();
        let c = read(&d.0, &mut problems);
        assert_eq!(c.into_iter().collect::<Vec<_>>(), vec![("hw_counters/sent_pkts".to_string(), 5)]);
        let text = problems.join("\n");
        for needle in ["garbled", "huge", "bad name", "subdir"] {
            assert!(text.contains(needle), "{needle} not named in {text}");
        }
        assert_eq!(problems.len(), 4, "rxe has no counters/ directory: not a problem\n{text}");
    }
}
