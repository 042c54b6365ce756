//! `nccl-wrap install DIR`: this binary copied atomically into DIR, for an init container (the
//! image holds nothing else). Runs no detection, touches nothing but DIR.

use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};

use nw_output::msg::PREFIX;
use nw_output::write;

pub const NAME: &str = "nccl-wrap";
/// Exit status when the copy failed (usage errors are 2, as everywhere).
pub const EXIT_FAILED: u8 = 1;

#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error("cannot read the running binary {path}: {source}")]
    Source { path: PathBuf, source: io::Error },
    #[error("{dir} does not exist: create it, or mount the shared volume (an emptyDir) there")]
    Missing { dir: PathBuf },
    #[error("{dir} is not a directory")]
    NotADirectory { dir: PathBuf },
    #[error("{dir} is read-only ({source}): mount the shared volume writable in the init container")]
    ReadOnly { dir: PathBuf, source: io::Error },
    #[error("{dir} is full ({source}): nccl-wrap needs {bytes} bytes there")]
    Full { dir: PathBuf, bytes: u64, source: io::Error },
    #[error("cannot write {path}: {source}")]
    Write { path: PathBuf, source: io::Error },
}

/// Copies `source` (the running binary, `/proc/self/exe`) to `dir/nccl-wrap` atomically and
/// returns the installed path.
pub fn install(source: &Path, dir: &Path) -> Result<PathBuf, InstallError> {
    match fs::metadata(dir) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return Err(InstallError::NotADirectory { dir: dir.to_path_buf() }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(InstallError::Missing { dir: dir.to_path_buf() }),
        Err(e) => return Err(InstallError::Write { path: dir.to_path_buf(), source: e }),
    }
    let mut src = File::open(source).map_err(|e| InstallError::Source { path: source.to_path_buf(), source: e })?;
    let bytes = src.metadata().map(|m| m.len()).unwrap_or(0);
    let target = dir.join(NAME);
    let classify = |e: io::Error| {
        use rustix::io::Errno;
        match e.raw_os_error().map(Errno::from_raw_os_error) {
            Some(Errno::ROFS | Errno::ACCESS | Errno::PERM) => {
                InstallError::ReadOnly { dir: dir.to_path_buf(), source: e }
            }
            Some(Errno::NOSPC | Errno::DQUOT) => InstallError::Full { dir: dir.to_path_buf(), bytes, source: e },
            _ => InstallError::Write { path: target.clone(), source: e },
        }
    };
    // The one atomic writer (nw_output::write): a temporary file beside the target, written,
    // fsync'ed, made 0755, renamed over it, the directory fsync'ed; removed on any failure.
    write::atomic_with(&target, 0o755, |out| io::copy(&mut src, out).map(|_| ())).map_err(|e| {
        e.into_io().map_or_else(
            || InstallError::Write { path: target.clone(), source: io::ErrorKind::InvalidInput.into() },
            classify,
        )
    })?;
    Ok(target)
}

/// `nccl-wrap install DIR`: prints the installed path, or why it could not.
pub fn main(dir: &Path) -> u8 {
    match install(Path::new("/proc/self/exe"), dir) {
        Ok(path) => {
            println!("{}", path.display());
            0
        }
        Err(e) => {
            eprintln!("{PREFIX} install failed: {e}");
            EXIT_FAILED
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// A scratch directory (its path, and tempfile's guard that removes it on every way out).
    struct Tmp(PathBuf, #[allow(dead_code)] tempfile::TempDir);

    impl Tmp {
        fn new(tag: &str) -> Tmp {
            let d = tempfile::Builder::new().prefix(&format!("nccl-wrap-install-{tag}-")).tempdir().expect("mkdir");
            Tmp(d.path().to_path_buf(), d)
        }
    }

    #[test]
    fn copies_atomically_with_mode_0755_and_again_harmlessly() {
        let t = Tmp::new("copy");
        let src = t.0.join("src");
        fs::write(&src, b"\x7fELF pretend binary").expect("write");
        let dir = t.0.join("vol");
        fs::create_dir(&dir).expect("mkdir");
        for _ in 0..2 {
            let path = install(&src, &dir).expect("install");
            assert_eq!(path, dir.join(NAME));
            assert_eq!(fs::read(&path).expect("read"), b"\x7fELF pretend binary");
            assert_eq!(fs::metadata(&path).expect("stat").permissions().mode() & 0o777, 0o755);
            let names: Vec<_> = fs::read_dir(&dir).expect("ls").map(|e| e.expect("entry").file_name()).collect();
            assert_eq!(names, [NAME], "no temporary file stays behind");
        }
    }

    #[test]
    fn a_missing_dir_or_a_file_is_named_with_the_fix() {
        let t = Tmp::new("missing");
        let src = t.0.join("src");
        fs::write(&src, b"x").expect("write");
        let e = install(&src, &t.0.join("nope")).expect_err("missing");
        assert!(matches!(e, InstallError::Missing { .. }), "{e}");
        assert!(e.to_string().contains("mount the shared volume"), "{e}");
        let e = install(&src, &src).expect_err("a file");
        assert!(matches!(e, InstallError::NotADirectory { .. }), "{e}");
        let e = install(&t.0.join("no-source"), &t.0).expect_err("no source");
        assert!(matches!(e, InstallError::Source { .. }), "{e}");
    }
}
