//! The supervisor's state for `nccl-wrap status` (pid, start, RAS address, each port's first
//! reading), written atomically and removed at the end. It must never fail the supervisor, and read
//! back it is untrusted: bounded, a regular file only, and port names checked before use.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use nw_observe::detect::counters::Counters;
use nw_observe::detect::file::{self, FileError};

pub const DEFAULT_PATH: &str = "/run/nccl-wrap/state.json";
/// The largest state file read back (hundreds of counters on a few ports are tens of KiB).
pub(crate) const MAX_STATE: u64 = 1 << 20;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortStart {
    /// `dev:port`.
    pub(crate) port: String,
    pub(crate) state: String,
    pub(crate) phys_state: String,
    pub(crate) counters: Counters,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct State {
    /// The command's pid, as the supervisor sees it.
    pub pid: u32,
    /// UTC, the first reading.
    pub started: String,
    /// Where NCCL's RAS is asked (`127.0.0.1:28028`), or `off: why`.
    pub ras: String,
    pub ports: Vec<PortStart>,
}

#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("no supervisor state at {path} ({source}): is nccl-wrap this container's PID 1 (or run with --supervise), and is --state-file the same?")]
    Missing { path: PathBuf, source: std::io::Error },
    #[error("{path} is larger than {max} bytes: not read")]
    TooLarge { path: PathBuf, max: u64 },
    #[error("no supervisor state: {source}")]
    NotRegular { source: FileError },
    #[error("{path} is not nccl-wrap's state: {why}")]
    Invalid { path: PathBuf, why: String },
}

/// Writes the state; any failure is only logged (`status` then says the file is missing).
pub fn publish(path: &Path, state: &State) {
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let text = match serde_json::to_string(state) {
        Ok(t) => t + "\n",
        Err(e) => return log::debug!("state not serialised: {e}"),
    };
    if let Err(e) = nw_output::write::atomic(path, text.as_bytes()) {
        log::debug!("no state for `nccl-wrap status`: {e}");
    }
}

/// Removes the state once the supervisor is done (the command has ended).
pub fn withdraw(path: &Path) {
    let _ = std::fs::remove_file(path);
}

/// A port name `status` may turn into a sysfs path: `dev:port`, dev of `[A-Za-z0-9_.-]`.
pub(crate) fn plain_port(name: &str) -> Option<(&str, u32)> {
    let (dev, port) = name.split_once(':')?;
    let ok = !dev.is_empty()
        && dev.len() <= 64
        && !matches!(dev, "." | "..")
        && dev.chars().all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c));
    ok.then_some(())?;
    Some((dev, port.parse().ok()?))
}

/// Reads the state back, bounded and without blocking; drops ports whose names are not plain.
pub fn read(path: &Path) -> Result<State, StateError> {
    let limit = usize::try_from(MAX_STATE).unwrap_or(usize::MAX);
    let bytes = file::read(path, limit).map_err(|e| match e {
        FileError::Io { source, .. } => StateError::Missing { path: path.into(), source },
        FileError::TooLarge { .. } => StateError::TooLarge { path: path.into(), max: MAX_STATE },
        source @ FileError::NotRegular { .. } => StateError::NotRegular { source },
    })?;
    let mut state: State =
        serde_json::from_slice(&bytes).map_err(|e| StateError::Invalid { path: path.into(), why: e.to_string() })?;
    state.ports.retain(|p| plain_port(&p.port).is_some());
    Ok(state)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_port_names_become_paths() {
        assert_eq!(plain_port("mlx5_6:1"), Some(("mlx5_6", 1)));
        for bad in ["../x:1", "..:1", "a/b:1", "mlx5_0", "mlx5_0:x", ":1", "a b:1"] {
            assert_eq!(plain_port(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_state_round_trips_and_hostile_files_are_named() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("state");
        let path = dir.join("state.json");
        let s = State {
            pid: 7,
            started: "2026-11-24T18:00:00.000Z".into(),
            ras: "127.0.0.1:28028".into(),
            ports: vec![
                PortStart {
                    port: "mlx5_6:1".into(),
                    state: "ACTIVE".into(),
                    phys_state: "LinkUp".into(),
                    counters: Counters::new(),
                },
                PortStart {
                    port: "../../etc:1".into(),
                    state: "x".into(),
                    phys_state: "y".into(),
                    counters: Counters::new(),
                },
            ],
        };
        publish(&path, &s);
        let back = read(&path).expect("read");
        assert_eq!(back.ports.len(), 1, "the hostile name is dropped");
        std::fs::write(&path, "x".repeat(MAX_STATE as usize + 10)).expect("write");
        assert!(matches!(read(&path), Err(StateError::TooLarge { .. })));
        std::fs::write(&path, "{\"pid\": \"no\"}").expect("write");
        assert!(matches!(read(&path), Err(StateError::Invalid { .. })));
        withdraw(&path);
        assert!(matches!(read(&path), Err(StateError::Missing { .. })));
    }

    /// Regression (issue 40): `status --state-file FIFO` opened the FIFO blocking and waited for a
    /// writer for ever; a character device was read up to the bound.
    #[test]
    fn regression_a_fifo_or_a_device_as_the_state_is_refused_at_once() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("fifo");
        std::fs::create_dir_all(&dir).expect("dir");
        let fifo = dir.join("state.json");
        let mode = rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR;
        rustix::fs::mknodat(rustix::fs::CWD, &fifo, rustix::fs::FileType::Fifo, mode, 0).expect("mkfifo");
        let t = std::time::Instant::now();
        let e = read(&fifo).expect_err("a FIFO");
        assert!(t.elapsed() < std::time::Duration::from_secs(5), "waited on the FIFO");
        assert!(e.to_string().contains("is a FIFO (named pipe), not a regular file"), "{e}");
        let e = read(Path::new("/dev/zero")).expect_err("a device");
        assert!(e.to_string().contains("is a character device"), "{e}");
    }
}
