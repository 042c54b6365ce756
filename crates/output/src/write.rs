//! The one atomic replacement of a file nccl-wrap produces: a temporary `.NAME.tmp.PID` beside the
//! target (skipped by nfd-worker and node_exporter), fsync'ed, made 0644, renamed, the directory
//! fsync'ed; removed on failure.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("{path} has no file name")]
    NoName { path: PathBuf },
    #[error("cannot create {tmp} next to {path}: {source} (is the directory mounted and writable?)")]
    Create { path: PathBuf, tmp: PathBuf, source: io::Error },
    #[error("cannot write {tmp}: {source}")]
    Write { tmp: PathBuf, source: io::Error },
    #[error("cannot rename {tmp} to {path}: {source}")]
    Rename { tmp: PathBuf, path: PathBuf, source: io::Error },
}

fn parts(path: &Path) -> Result<(PathBuf, String), WriteError> {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| WriteError::NoName { path: path.to_path_buf() })?
        .to_string();
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new(".")).to_path_buf();
    Ok((dir, name))
}

/// Replaces `path` with `bytes`, atomically, readable by all (0644).
pub fn atomic(path: &Path, bytes: &[u8]) -> Result<(), WriteError> {
    atomic_with(path, 0o644, |f| f.write_all(bytes))
}

/// Replaces `path` atomically with what `fill` writes, with `mode`.
pub fn atomic_with(path: &Path, mode: u32, fill: impl FnOnce(&mut File) -> io::Result<()>) -> Result<(), WriteError> {
    let (dir, name) = parts(path)?;
    let tmp = dir.join(format!(".{name}.tmp.{}", std::process::id()));
    // A leftover of this PID (a previous process of the same id killed mid-write) is replaced.
    let _ = fs::remove_file(&tmp);
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(|source| WriteError::Create { path: path.to_path_buf(), tmp: tmp.clone(), source })?;
    let result = (|| {
        let write = |source| WriteError::Write { tmp: tmp.clone(), source };
        fill(&mut f).and_then(|()| f.flush()).map_err(write)?;
        f.sync_all().map_err(write)?;
        fs::set_permissions(&tmp, fs::Permissions::from_mode(mode)).map_err(write)?;
        let rename = |source| WriteError::Rename { tmp: tmp.clone(), path: path.to_path_buf(), source };
        fs::rename(&tmp, path).map_err(rename)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result?;
    let _ = File::open(&dir).and_then(|d| d.sync_all());
    Ok(())
}

impl WriteError {
    /// The OS error behind it, if one is: for a caller that names the cause its own way.
    pub fn into_io(self) -> Option<io::Error> {
        match self {
            WriteError::NoName { .. } => None,
            WriteError::Create { source, .. }
            | WriteError::Write { source, .. }
            | WriteError::Rename { source, .. } => Some(source),
        }
    }
}

/// Removes temporary files an earlier process left for `path` (killed between create and rename).
pub fn sweep(path: &Path) {
    let Ok((dir, name)) = parts(path) else { return };
    let prefix = format!(".{name}.tmp.");
    let Ok(entries) = fs::read_dir(&dir) else { return };
    for e in entries.flatten().take(4096) {
        let n = e.file_name();
        let Some(n) = n.to_str() else { continue };
        if n.strip_prefix(&prefix).is_some_and(|pid| !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit())) {
            let _ = fs::remove_file(e.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_whole_files_and_sweeps_leftovers() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let d = tmp.path();
        let target = d.join("nccl-wrap.prom");
        fs::write(d.join(".nccl-wrap.prom.tmp.1"), b"half").expect("leftover");
        fs::write(d.join(".other.tmp.1"), b"not ours").expect("other");
        sweep(&target);
        atomic(&target, b"one\n").expect("write");
        atomic(&target, b"two\n").expect("write");
        let mut names: Vec<String> = fs::read_dir(d)
            .expect("ls")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        let text = fs::read_to_string(&target).expect("read");
        let mode = fs::metadata(&target).expect("stat").permissions().mode() & 0o777;
        let missing = atomic(&d.join("no-such-dir/x.prom"), b"x");
        assert_eq!(text, "two\n");
        assert_eq!(mode, 0o644);
        assert_eq!(names, [".other.tmp.1", "nccl-wrap.prom"]);
        assert!(matches!(missing, Err(WriteError::Create { .. })), "{missing:?}");
    }
}
