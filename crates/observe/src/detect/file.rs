//! The one way nccl-wrap reads a file from outside (sysfs, the annotations file, procfs): a hung entrypoint is the
//! worst failure there is, so every open is non-blocking, anything but a regular file is refused by name, and
//! every read is bounded. It must never block, never read past a bound, never follow a name it was not given.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::fs::{FileType, Mode, OFlags};

/// A sysfs attribute is at most one page.
pub(crate) const ATTR_MAX: usize = 4096;

const OPEN_FLAGS: OFlags = OFlags::RDONLY.union(OFlags::NONBLOCK).union(OFlags::NOCTTY).union(OFlags::CLOEXEC);
/// A directory opened for reads relative to it.
pub(crate) const DIR_FLAGS: OFlags = OFlags::RDONLY.union(OFlags::DIRECTORY).union(OFlags::CLOEXEC);

/// What a path is, in words, when it is not a regular file.
fn kind(t: FileType) -> Option<&'static str> {
    Some(match t {
        FileType::RegularFile => return None,
        FileType::Fifo => "a FIFO (named pipe)",
        FileType::Socket => "a socket",
        FileType::CharacterDevice => "a character device",
        FileType::BlockDevice => "a block device",
        FileType::Directory => "a directory",
        _ => "not a regular file",
    })
}

#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("cannot read {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("{path} is {kind}, not a regular file: refused, so that reading it cannot block or run unbounded")]
    NotRegular { path: PathBuf, kind: &'static str },
    #[error("{path} is larger than {limit} bytes: refused, not read")]
    TooLarge { path: PathBuf, limit: usize },
}

impl FileError {
    /// The file is not there (a missing attribute or an absent optional file).
    pub(crate) fn is_not_found(&self) -> bool {
        matches!(self, FileError::Io { source, .. } if source.kind() == io::ErrorKind::NotFound)
    }
}

pub fn read(path: &Path, limit: usize) -> Result<Vec<u8>, FileError> {
    let fd = rustix::fs::open(path, OPEN_FLAGS, Mode::empty()).map_err(|e| open_error(path, None, e))?;
    read_open(&fd, path, limit)
}

/// A small text attribute: at most one page, UTF-8, without trailing newlines or NULs.
pub fn read_attr(path: &Path) -> Result<String, FileError> {
    read(path, ATTR_MAX).and_then(|b| text(|| path.to_path_buf(), &b))
}

/// [`read_attr`] relative to an open directory: detection's hot path. The file's type is asked
/// (`fstat`) only when the read is not a clean value (an error, nothing, a NUL, more than a page),
/// which is what a FIFO, a character device or a directory gives, so each is still refused by kind.
pub fn read_attr_at(dir: &OwnedFd, dir_path: &Path, name: &str) -> Result<String, FileError> {
    let path = || dir_path.join(name);
    let fd = rustix::fs::openat(dir, name, OPEN_FLAGS, Mode::empty())
        .map_err(|e| open_error(&path(), Some((dir, name)), e))?;
    // Not zeroed first: the read says how much it filled.
    let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); ATTR_MAX + 1];
    let read = loop {
        match rustix::io::read_uninit(&fd, &mut buf) {
            Err(rustix::io::Errno::INTR) => {}
            other => break other.map(|(filled, _)| &*filled),
        }
    };
    let clean = matches!(read, Ok(b) if !b.is_empty() && b.len() <= ATTR_MAX && !b.contains(&0));
    if !clean {
        let st = rustix::fs::fstat(&fd).map_err(|e| FileError::Io { path: path(), source: e.into() })?;
        if let Some(kind) = kind(FileType::from_raw_mode(st.st_mode)) {
            return Err(FileError::NotRegular { path: path(), kind });
        }
    }
    let b = read.map_err(|e| FileError::Io { path: path(), source: e.into() })?;
    if b.len() > ATTR_MAX {
        return Err(FileError::TooLarge { path: path(), limit: ATTR_MAX });
    }
    text(path, b)
}

/// The attribute's text, trimmed; the path is built only for an error.
fn text(path: impl FnOnce() -> PathBuf, bytes: &[u8]) -> Result<String, FileError> {
    match std::str::from_utf8(bytes) {
        Ok(t) => Ok(t.trim_end_matches(['\n', '\0']).trim().to_owned()),
        Err(e) => Err(FileError::Io { path: path(), source: io::Error::new(io::ErrorKind::InvalidData, e) }),
    }
}

fn read_open(fd: &OwnedFd, path: &Path, limit: usize) -> Result<Vec<u8>, FileError> {
    let st = rustix::fs::fstat(fd).map_err(|e| FileError::Io { path: path.to_path_buf(), source: e.into() })?;
    if let Some(kind) = kind(FileType::from_raw_mode(st.st_mode)) {
        return Err(FileError::NotRegular { path: path.to_path_buf(), kind });
    }
    // One byte more than the bound tells a file of exactly `limit` from a larger one; the buffer
    // starts at the file's size (procfs says 0: one page) and grows only as the file does.
    let size_hint = usize::try_from(st.st_size).ok().filter(|s| *s > 0).map_or(4 << 10, |s| s.saturating_add(1));
    let mut buf = vec![0u8; size_hint.min(limit + 1)];
    let mut len = 0;
    loop {
        if len == buf.len() {
            let grown = buf.len().saturating_mul(2).min(limit + 1);
            buf.resize(grown, 0);
        }
        match rustix::io::read(fd.as_fd(), &mut buf[len..]) {
            Ok(0) => break,
            Ok(n) => {
                len += n;
                if len > limit {
                    return Err(FileError::TooLarge { path: path.to_path_buf(), limit });
                }
                // A regular file ends where fstat says (sysfs hands a page over whole); procfs says 0: read to EOF.
                let size = u64::try_from(st.st_size).unwrap_or(0);
                if size > 0 && (len as u64 >= size || size == ATTR_MAX as u64) {
                    break;
                }
            }
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(FileError::Io { path: path.to_path_buf(), source: e.into() }),
        }
    }
    buf.truncate(len);
    Ok(buf)
}

/// The names in the directory at `path`, at most `max` of them, in the kernel's order, lossily.
pub fn names(path: &Path, max: usize) -> io::Result<Vec<String>> {
    let fd =
        rustix::fs::open(path, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NONBLOCK | OFlags::CLOEXEC, Mode::empty())?;
    let mut buf = Vec::with_capacity(32 << 10);
    let mut dir = rustix::fs::RawDir::new(&fd, buf.spare_capacity_mut());
    let mut out = Vec::new();
    while out.len() < max {
        let Some(entry) = dir.next() else { break };
        let entry = entry?;
        let name = entry.file_name().to_bytes();
        if name != b"." && name != b".." {
            out.push(String::from_utf8_lossy(name).into_owned());
        }
    }
    Ok(out)
}

/// Why an open failed; a socket (ENXIO) or a FIFO (ENXIO on write-only, never here) is named.
fn open_error(path: &Path, at: Option<(&OwnedFd, &str)>, e: rustix::io::Errno) -> FileError {
    if e == rustix::io::Errno::NXIO {
        let st = match at {
            Some((dir, name)) => rustix::fs::statat(dir, name, rustix::fs::AtFlags::empty()),
            None => rustix::fs::stat(path),
        };
        if let Some(kind) = st.ok().and_then(|st| kind(FileType::from_raw_mode(st.st_mode))) {
            return FileError::NotRegular { path: path.to_path_buf(), kind };
        }
    }
    FileError::Io { path: path.to_path_buf(), source: e.into() }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct TempDir(PathBuf);

    impl TempDir {
        fn new(tag: &str) -> TempDir {
            let p = std::env::temp_dir().join(format!("nccl-wrap-file-{tag}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&p);
            std::fs::create_dir_all(&p).expect("mkdir");
            TempDir(p)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn a_fifo_is_refused_at_once_not_waited_on() {
        let d = TempDir::new("fifo");
        let fifo = d.0.join("state");
        rustix::fs::mknodat(rustix::fs::CWD, &fifo, FileType::Fifo, Mode::RUSR | Mode::WUSR, 0).expect("mkfifo");
        let e = read_attr(&fifo).expect_err("a FIFO is not an attribute");
        assert!(matches!(e, FileError::NotRegular { kind: "a FIFO (named pipe)", .. }), "{e}");
        assert!(e.to_string().contains("is a FIFO") && e.to_string().contains("state"), "{e}");
    }

    #[test]
    fn char_devices_directories_and_sockets_are_named() {
        let e = read_attr(Path::new("/dev/zero")).expect_err("/dev/zero");
        assert!(matches!(e, FileError::NotRegular { kind: "a character device", .. }), "{e}");
        let d = TempDir::new("kinds");
        let e = read_attr(&d.0).expect_err("a directory");
        assert!(matches!(e, FileError::NotRegular { kind: "a directory", .. }), "{e}");
        let sock = d.0.join("sock");
        let _listener = std::os::unix::net::UnixListener::bind(&sock).expect("bind");
        let e = read_attr(&sock).expect_err("a socket");
        assert!(matches!(e, FileError::NotRegular { kind: "a socket", .. }), "{e}");
    }

    #[test]
    fn the_hot_path_names_every_kind_too() {
        let d = TempDir::new("hot");
        rustix::fs::mknodat(rustix::fs::CWD, d.0.join("fifo"), FileType::Fifo, Mode::RUSR | Mode::WUSR, 0)
            .expect("mkfifo");
        std::os::unix::fs::symlink("/dev/zero", d.0.join("zero")).expect("symlink");
        std::fs::create_dir(d.0.join("dir")).expect("mkdir");
        let _l = std::os::unix::net::UnixListener::bind(d.0.join("sock")).expect("bind");
        std::fs::write(d.0.join("big"), vec![b'a'; ATTR_MAX + 1]).expect("write");
        std::fs::write(d.0.join("empty"), b"").expect("write");
        let dir =
            rustix::fs::open(&d.0, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty()).expect("dir");
        let kind = |name| match read_attr_at(&dir, &d.0, name) {
            Err(FileError::NotRegular { kind, .. }) => Some(kind),
            _ => None,
        };
        assert_eq!(kind("fifo"), Some("a FIFO (named pipe)"));
        assert_eq!(kind("zero"), Some("a character device"));
        assert_eq!(kind("dir"), Some("a directory"));
        assert_eq!(kind("sock"), Some("a socket"));
        assert!(matches!(read_attr_at(&dir, &d.0, "big"), Err(FileError::TooLarge { .. })));
        assert_eq!(read_attr_at(&dir, &d.0, "empty").expect("an empty regular file"), "");
    }

    #[test]
    fn files_over_the_bound_are_refused_and_at_the_bound_read() {
        let d = TempDir::new("bound");
        std::fs::write(d.0.join("big"), vec![b'a'; ATTR_MAX + 1]).expect("write");
        std::fs::write(d.0.join("page"), vec![b'b'; ATTR_MAX]).expect("write");
        assert!(matches!(read_attr(&d.0.join("big")), Err(FileError::TooLarge { limit: ATTR_MAX, .. })));
        assert_eq!(read_attr(&d.0.join("page")).expect("one page").len(), ATTR_MAX);
        std::fs::write(d.0.join("empty"), b"").expect("write");
        assert_eq!(read_attr(&d.0.join("empty")).expect("empty"), "");
    }

    #[test]
    fn a_listing_names_every_entry_but_the_dots_up_to_its_bound_and_only_of_a_directory() {
        let d = TempDir::new("names");
        // More entries than one getdents of a small buffer holds, with long names.
        for i in 0..600 {
            std::fs::write(d.0.join(format!("mlx5_{i}_{}", "x".repeat(40))), b"").expect("write");
        }
        let mut all = names(&d.0, usize::MAX).expect("list");
        all.sort();
        assert_eq!(all.len(), 600);
        assert!(all.iter().all(|n| n.starts_with("mlx5_") && n != "." && n != ".."));
        assert_eq!(names(&d.0, 10).expect("bounded").len(), 10);
        let fifo = d.0.join("fifo");
        rustix::fs::mknodat(rustix::fs::CWD, &fifo, FileType::Fifo, Mode::RUSR | Mode::WUSR, 0).expect("mkfifo");
        assert!(names(&fifo, 10).is_err(), "a FIFO is not listed (nor waited on)");
        assert!(names(&d.0.join("missing"), 10).is_err_and(|e| e.kind() == io::ErrorKind::NotFound));
    }

    #[test]
    fn attributes_lose_their_newline_and_relative_reads_name_the_full_path() {
        let d = TempDir::new("rel");
        std::fs::write(d.0.join("state"), b"4: ACTIVE\n").expect("write");
        let dir =
            rustix::fs::open(&d.0, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty()).expect("dir");
        assert_eq!(read_attr_at(&dir, &d.0, "state").expect("state"), "4: ACTIVE");
        let e = read_attr_at(&dir, &d.0, "missing").expect_err("missing");
        assert!(e.is_not_found());
        assert!(e.to_string().contains(&d.0.join("missing").display().to_string()), "{e}");
    }
}
