//! Run: replace this process with the command (execve, PATH search), argv and environment byte for
//! byte; 127 when not found, 126 when not executable, as tini. Never runs a shell.

use std::ffi::{CStr, CString, OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use nix::errno::Errno;

use super::sys::Failure;

pub(crate) const EXIT_NOT_EXECUTABLE: u8 = 126;
pub(crate) const EXIT_NOT_FOUND: u8 = 127;

const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error("{0:?}: command not found in PATH ({1})")]
    NotFound(OsString, String),
    #[error("{path}: cannot execute: {errno}")]
    Exec { path: PathBuf, errno: Errno },
    #[error("argument or environment entry holds a NUL byte")]
    Nul,
}

impl ExecError {
    pub fn exit_code(&self) -> u8 {
        match self {
            ExecError::NotFound(..) => EXIT_NOT_FOUND,
            ExecError::Exec { errno: Errno::ENOENT | Errno::ENOTDIR, .. } => EXIT_NOT_FOUND,
            _ => EXIT_NOT_EXECUTABLE,
        }
    }
}

/// Everything execve needs, converted before any fork so the child only makes the syscall.
pub struct Prepared {
    candidates: Vec<CString>,
    pub(crate) argv: Vec<CString>,
    pub(crate) envp: Vec<CString>,
    name: OsString,
    path_var: String,
    /// Whether the candidates come from a PATH search (a name without `/`).
    searched: bool,
}

pub fn prepare(argv: &[OsString], env: &[(OsString, OsString)]) -> Result<Prepared, ExecError> {
    let cstr = |b: Vec<u8>| CString::new(b).map_err(|_| ExecError::Nul);
    let name = argv.first().cloned().unwrap_or_default();
    let path_var =
        env.iter().find(|(n, _)| n == "PATH").map_or(DEFAULT_PATH.into(), |(_, v)| v.to_string_lossy().into_owned());
    let searched = !name.as_bytes().contains(&b'/');
    let candidates = if !searched {
        vec![cstr(name.clone().into_vec())?]
    } else {
        path_var
            .split(':')
            .map(|dir| cstr(Path::new(if dir.is_empty() { "." } else { dir }).join(&name).into_os_string().into_vec()))
            .collect::<Result<_, _>>()?
    };
    let argv = argv.iter().map(|a| cstr(a.clone().into_vec())).collect::<Result<_, _>>()?;
    let envp = env.iter().map(|(n, v)| cstr([n.as_bytes(), b"=", v.as_bytes()].concat())).collect::<Result<_, _>>()?;
    Ok(Prepared { candidates, argv, envp, name, path_var, searched })
}

/// Tries each PATH candidate like execvp, never through a shell. Returns only on failure.
pub fn exec(p: &Prepared) -> ExecError {
    super::sys::restore_inherited_sigpipe();
    let failure = attempt(p, |path| {
        let Err(errno) = nix::unistd::execve(path, &p.argv, &p.envp);
        errno
    });
    error(p, failure)
}

/// The PATH search, given the execve to call; allocation-free (it runs in a forked child).
pub(crate) fn attempt(p: &Prepared, mut execve: impl FnMut(&CStr) -> Errno) -> Failure {
    let mut denied: Option<Failure> = None;
    for (index, path) in p.candidates.iter().enumerate() {
        let errno = execve(path);
        match errno {
            Errno::ENOENT | Errno::ENOTDIR | Errno::ESTALE | Errno::ENODEV | Errno::ETIMEDOUT if p.searched => {}
            Errno::EACCES if p.searched => denied = Some(Failure::Candidate(index, errno)),
            _ => return Failure::Candidate(index, errno),
        }
    }
    denied.unwrap_or(Failure::NotFound)
}

/// The error a [`Failure`] of these candidates means, worded the same whichever process saw it.
pub(crate) fn error(p: &Prepared, failure: Failure) -> ExecError {
    if let Failure::Candidate(index, errno) = failure {
        if let Some(path) = p.candidates.get(index) {
            return ExecError::Exec { path: PathBuf::from(OsStr::from_bytes(path.as_bytes())), errno };
        }
    }
    ExecError::NotFound(p.name.clone(), format!("PATH={}", p.path_var))
}
