//! The raw system calls of supervision: fork and the child's steps to execve, sigtimedwait,
//! waitpid and kill on raw signal numbers, signal dispositions, and `scrub_env`. It must never
//! allocate, lock or print between fork and execve, nor install an asynchronous signal handler.

use std::ffi::{c_char, c_int, CStr, CString};
use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::ptr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::libc;
use nix::sys::signal::{SigSet, SigmaskHow, Signal};
use nix::unistd::{ForkResult, Pid};

/// Signals raised by faults of the process itself. They stay unblocked (blocking them would
/// turn a crash into a hang, as the kernel delivers them regardless) and are never forwarded.
const SYNCHRONOUS: [Signal; 7] =
    [Signal::SIGSEGV, Signal::SIGBUS, Signal::SIGILL, Signal::SIGFPE, Signal::SIGTRAP, Signal::SIGSYS, Signal::SIGABRT];

static SIGPIPE_IGNORED_AT_START: AtomicBool = AtomicBool::new(false);

/// Runs from `.init_array`, before Rust's runtime start sets SIGPIPE to SIG_IGN for nccl-wrap's
/// own writes: the only moment the disposition it inherited can be seen.
extern "C" fn capture_sigpipe() {
    SIGPIPE_IGNORED_AT_START.store(is_ignored(libc::SIGPIPE), Ordering::Relaxed);
}

#[used]
#[link_section = ".init_array"]
static CAPTURE_SIGPIPE: extern "C" fn() = capture_sigpipe;

/// Gives SIGPIPE back the disposition nccl-wrap inherited, as `std::process::Command` does for
/// its children (Rust's runtime ignores it). Async-signal-safe.
pub(crate) fn restore_inherited_sigpipe() {
    if !SIGPIPE_IGNORED_AT_START.load(Ordering::Relaxed) {
        set_handler(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn is_ignored(sig: c_int) -> bool {
    let mut old = MaybeUninit::<libc::sigaction>::zeroed();
    // SAFETY: with a null new action, sigaction only writes the current one into `old`, a valid,
    // writable sigaction; all-zero bytes are already a valid sigaction, so reading it is sound
    // whether or not the call succeeded.
    let (rc, old) = unsafe { (libc::sigaction(sig, ptr::null(), old.as_mut_ptr()), old.assume_init()) };
    rc == 0 && old.sa_sigaction == libc::SIG_IGN
}

/// Sets SIG_DFL or SIG_IGN (never a function). Async-signal-safe.
fn set_handler(sig: c_int, handler: libc::sighandler_t) {
    // SAFETY: all-zero bytes are a valid sigaction (empty mask, no flags); `handler` is SIG_DFL
    // or SIG_IGN, never a function pointer, so no code of ours can run as a handler. The old
    // action is not asked for (null).
    unsafe {
        let mut act = MaybeUninit::<libc::sigaction>::zeroed().assume_init();
        act.sa_sigaction = handler;
        libc::sigaction(sig, &act, ptr::null_mut());
    }
}

/// The signals nccl-wrap holds blocked while it supervises, and what to give back to the child.
pub struct Blocked {
    set: SigSet,
    original: SigSet,
    /// SIGCHLD was SIG_IGN when nccl-wrap started: the kernel would then reap children itself
    /// and their status would be lost, so it is set to default here and back in the child.
    sigchld_ignored: bool,
}

impl Blocked {
    /// Blocks every signal but the synchronous ones, before fork, so no early SIGCHLD is lost.
    pub fn block() -> Result<Blocked, Errno> {
        let set = blocked_set();
        let mut original = SigSet::empty();
        nix::sys::signal::sigprocmask(SigmaskHow::SIG_BLOCK, Some(&set), Some(&mut original))?;
        let sigchld_ignored = is_ignored(libc::SIGCHLD);
        if sigchld_ignored {
            set_handler(libc::SIGCHLD, libc::SIG_DFL);
        }
        Ok(Blocked { set, original, sigchld_ignored })
    }

    /// Undoes [`Blocked::block`] in this process, for running the command without supervision.
    pub(crate) fn restore(self) {
        if self.sigchld_ignored {
            set_handler(libc::SIGCHLD, libc::SIG_IGN);
        }
        let _ = nix::sys::signal::sigprocmask(SigmaskHow::SIG_SETMASK, Some(&self.original), None);
    }

    /// Takes the next pending blocked signal; `Ok(None)` when `timeout` passed first.
    pub fn wait(&self, timeout: Option<Duration>) -> Result<Option<c_int>, Errno> {
        self.wait_sender(timeout).map(|caught| caught.map(|c| c.sig))
    }

    /// As [`Blocked::wait`], with the sender (`si_pid`; 0 when the kernel or another namespace),
    /// so that a SIGPIPE of nccl-wrap's own write is not forwarded as if someone had sent it.
    pub(crate) fn wait_sender(&self, timeout: Option<Duration>) -> Result<Option<Caught>, Errno> {
        let ts = timeout.map(|d| libc::timespec {
            tv_sec: libc::time_t::try_from(d.as_secs()).unwrap_or(libc::time_t::MAX),
            tv_nsec: libc::c_long::from(d.subsec_nanos()),
        });
        let ts_ptr = ts.as_ref().map_or(ptr::null(), |t| t as *const libc::timespec);
        let mut info = MaybeUninit::<libc::siginfo_t>::zeroed();
        // SAFETY: `self.set` is a valid sigset_t owned by self; `info` is a writable siginfo_t
        // living until after the call; `ts_ptr` is null or points to `ts`, which also does.
        let rc = unsafe { libc::sigtimedwait(self.set.as_ref(), info.as_mut_ptr(), ts_ptr) };
        if rc >= 0 {
            // SAFETY: all-zero bytes are a valid siginfo_t and the kernel wrote the rest; si_pid
            // reads an integer of the union that is initialised either way (it is meaningful
            // for SI_USER, SI_QUEUE and the kernel's own SIGPIPE, and compared only).
            let sender = unsafe { info.assume_init().si_pid() };
            return Ok(Some(Caught { sig: rc, sender }));
        }
        match Errno::last() {
            Errno::EAGAIN => Ok(None),
            errno => Err(errno),
        }
    }
}

/// A signal taken by [`Blocked::wait_sender`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Caught {
    pub(crate) sig: c_int,
    /// The sender's pid as this process's namespace sees it; 0 when unknown.
    pub(crate) sender: libc::pid_t,
}

impl Caught {
    /// SIGPIPE raised by this process's own write: to be dropped, never forwarded.
    pub(crate) fn own_sigpipe(&self) -> bool {
        self.sig == libc::SIGPIPE && self.sender == nix::unistd::getpid().as_raw()
    }
}

/// The first of `wanted` that is pending (blocked and not yet taken), without taking it: how
/// work done before the child starts (the gate) learns that the pod is being stopped.
pub fn pending(wanted: &[c_int]) -> Option<c_int> {
    let mut set = MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: `set` is a sigset_t-sized buffer owned here; sigpending writes all of it on
    // success (rc 0) and it is read only then; sigismember reads the initialized set.
    unsafe {
        if libc::sigpending(set.as_mut_ptr()) != 0 {
            return None;
        }
        let set = set.assume_init();
        wanted.iter().copied().find(|&sig| libc::sigismember(&set, sig) == 1)
    }
}

extern "C" {
    /// The C library's environment: a null-terminated array of `NAME=value` strings (POSIX).
    static environ: *const *mut c_char;
}

/// Overwrites with NUL bytes, in place, every `NAME=value` entry's value in this process's
/// environment block, then removes the variable; returns how many were wiped. In place because
/// `/proc/PID/environ` shows the block execve filled, which `unsetenv` alone leaves readable.
/// Call it only while this process has a single thread.
pub fn scrub_env(name: &str) -> usize {
    let name = name.as_bytes();
    let mut wiped = 0;
    // SAFETY: `environ` is the C library's own pointer, valid for the life of the process; it
    // points to an array ended by a null pointer whose entries each point to a NUL-terminated,
    // writable string (the kernel's stack area for the entries of execve, the heap for those a
    // setenv added). The process has one thread (the caller's promise), so no setenv or getenv
    // runs meanwhile. Each entry's bytes are read up to its NUL (strlen) and only those bytes
    // after `NAME=` are written, never the NUL itself, so every string stays terminated.
    unsafe {
        let mut entry = environ;
        while !entry.is_null() && !(*entry).is_null() {
            let s = *entry;
            let bytes = std::slice::from_raw_parts_mut(s.cast::<u8>(), libc::strlen(s));
            if bytes.len() > name.len() && bytes.starts_with(name) && bytes[name.len()] == b'=' {
                for b in &mut bytes[name.len() + 1..] {
                    // Volatile: a store the program never reads back must still be made.
                    ptr::write_volatile(b, 0);
                }
                wiped += 1;
            }
            entry = entry.add(1);
        }
    }
    if wiped > 0 {
        // Out of the C library's list too, so that nothing later reads it as set and empty.
        std::env::remove_var(std::ffi::OsStr::from_bytes(name));
    }
    wiped
}

/// Every signal but the synchronous ones (glibc keeps its internal ones out of any set).
fn blocked_set() -> SigSet {
    let mut set = SigSet::all();
    for sig in SYNCHRONOUS {
        set.remove(sig);
    }
    set
}

/// How a forked child's execve attempts ended, computed without allocating, sent through a pipe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Failure {
    /// The candidate at this index failed with this errno, and that ends the search.
    Candidate(usize, Errno),
    /// No candidate exists.
    NotFound,
}

/// Runs the PATH search given the raw execve to call; returns only when every attempt failed.
/// Must be async-signal-safe: it runs in the forked child.
pub(crate) type Attempt<'a> = &'a dyn Fn(&dyn Fn(&CStr) -> Errno) -> Failure;

/// What the child does between fork and execve.
pub(crate) struct ChildSetup<'a> {
    /// NUL-terminated strings, turned into pointer arrays before the fork.
    pub(crate) argv: &'a [CString],
    pub(crate) envp: &'a [CString],
    pub(crate) attempt: Attempt<'a>,
    /// Put the child in a process group of its own (`--kill-group`, or to give it the terminal).
    pub(crate) own_group: bool,
    /// Make that group the terminal's foreground group, so Ctrl-C reaches the command only once.
    pub(crate) foreground: bool,
}

/// A started child whose execve may still fail.
pub(crate) struct Child {
    pub(crate) pid: Pid,
    /// A CLOEXEC pipe: end-of-file once execve succeeded, else the encoded [`Failure`].
    report: OwnedFd,
}

/// Pointer arrays for a raw execve, built before fork (nix's execve allocates on each call).
struct ExecArgs<'a> {
    argv: Vec<*const c_char>,
    envp: Vec<*const c_char>,
    _strings: PhantomData<&'a [CString]>,
}

impl<'a> ExecArgs<'a> {
    fn new(argv: &'a [CString], envp: &'a [CString]) -> ExecArgs<'a> {
        let array = |v: &[CString]| v.iter().map(|s| s.as_ptr()).chain([ptr::null()]).collect();
        ExecArgs { argv: array(argv), envp: array(envp), _strings: PhantomData }
    }

    /// Async-signal-safe; returns only on failure.
    fn execve(&self, path: &CStr) -> Errno {
        // SAFETY: `path` is NUL-terminated; `argv` and `envp` are NULL-terminated arrays of
        // pointers into the CStrings borrowed for 'a, which outlives self and
        // cannot be changed while borrowed.
        unsafe { libc::execve(path.as_ptr(), self.argv.as_ptr(), self.envp.as_ptr()) };
        Errno::last()
    }
}

/// Forks the child, which prepares itself and execs the command; call with [`Blocked`] in force.
pub(crate) fn spawn(setup: &ChildSetup, blocked: &Blocked) -> Result<Child, Errno> {
    let args = ExecArgs::new(setup.argv, setup.envp);
    let (report, report_w) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
    // SAFETY: other threads may be running at the fork (a name lookup of MASTER_ADDR that did
    // not answer in time is left to finish on its own thread, `detect::bootstrap::resolve`), and
    // any lock one of them held (the allocator's, the resolver's) stays locked in the child's
    // copy. What makes the fork sound is that the child never takes such a lock: it runs only
    // `child_until_exec`, which makes only async-signal-safe calls (setpgid, tcsetpgrp,
    // sigaction, sigprocmask, execve, write, _exit) on memory prepared before the fork (`args`,
    // what `setup.attempt` reads, `blocked.original`), and never allocates, prints or returns.
    match unsafe { nix::unistd::fork() }? {
        ForkResult::Child => child_until_exec(setup, &args, blocked, report_w.as_raw_fd()),
        ForkResult::Parent { child } => {
            drop(report_w);
            if setup.own_group {
                // Also done here, so that the group exists before the parent may signal it;
                // EACCES once the child has exec'd is harmless, it did the same.
                let _ = nix::unistd::setpgid(child, child);
            }
            Ok(Child { pid: child, report })
        }
    }
}

fn child_until_exec(setup: &ChildSetup, args: &ExecArgs, blocked: &Blocked, report: RawFd) -> ! {
    // SAFETY: each call below is async-signal-safe and takes plain integers or pointers to
    // memory owned by the caller for the whole call (`blocked.original`); failures are ignored
    // on purpose: a child outside its own group, or without the terminal, still runs the command.
    unsafe {
        if setup.own_group {
            libc::setpgid(0, 0);
            if setup.foreground {
                // The new group is in the background until this call; SIGTTOU is still blocked
                // here, so the kernel lets it take the terminal instead of stopping it.
                libc::tcsetpgrp(libc::STDIN_FILENO, libc::getpid());
            }
        }
        if blocked.sigchld_ignored {
            set_handler(libc::SIGCHLD, libc::SIG_IGN);
        }
        restore_inherited_sigpipe();
        libc::sigprocmask(libc::SIG_SETMASK, blocked.original.as_ref(), ptr::null_mut());
    }
    let failure = (setup.attempt)(&|path| args.execve(path));
    let bytes = encode(failure);
    // SAFETY: `bytes` is a live local array of the given length; `report` is the pipe's write end,
    // open in this process; _exit ends the child without running any of the parent's cleanup.
    unsafe {
        libc::write(report, bytes.as_ptr().cast(), bytes.len());
        // The status is never read (the parent reads the pipe); 127 is what a shell would say.
        libc::_exit(127)
    }
}

const REPORT_LEN: usize = 12;

fn encode(failure: Failure) -> [u8; REPORT_LEN] {
    let (index, errno) = match failure {
        Failure::Candidate(index, errno) => (index as u64, errno as i32),
        Failure::NotFound => (u64::MAX, 0),
    };
    let mut out = [0u8; REPORT_LEN];
    out[..8].copy_from_slice(&index.to_le_bytes());
    out[8..].copy_from_slice(&errno.to_le_bytes());
    out
}

fn decode(bytes: &[u8; REPORT_LEN]) -> Failure {
    let [a, b, c, d, e, f, g, h, i, j, k, l] = *bytes;
    match u64::from_le_bytes([a, b, c, d, e, f, g, h]) {
        u64::MAX => Failure::NotFound,
        index => Failure::Candidate(
            usize::try_from(index).unwrap_or(usize::MAX),
            Errno::from_raw(i32::from_le_bytes([i, j, k, l])),
        ),
    }
}

impl Child {
    /// Waits until the child has exec'd (`Ok`) or given up (`Err`); signals stay blocked meanwhile.
    pub(crate) fn exec_result(self) -> Result<(), Failure> {
        let mut buf = [0u8; REPORT_LEN];
        let mut got = 0;
        while got < REPORT_LEN {
            match nix::unistd::read(self.report.as_raw_fd(), &mut buf[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(Errno::EINTR) => {}
                Err(_) => break,
            }
        }
        match got {
            REPORT_LEN => Err(decode(&buf)),
            _ => Ok(()),
        }
    }
}

/// One `waitpid(-1, WNOHANG | __WALL)` (`__WALL`: clone children too): a reaped child and its
/// raw status, or `None` while none has ended.
pub(crate) fn reap_one() -> Result<Option<(Pid, c_int)>, Errno> {
    let mut status: c_int = 0;
    // SAFETY: `status` is a valid, writable c_int for the call.
    let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG | libc::__WALL) };
    match pid {
        0 => Ok(None),
        p if p > 0 => Ok(Some((Pid::from_raw(p), status))),
        _ => Err(Errno::last()),
    }
}

/// `kill(2)` with a raw signal number, real-time signals included.
pub(crate) fn kill(pid: libc::pid_t, sig: c_int) -> Result<(), Errno> {
    // SAFETY: kill takes two integers and touches no memory of ours.
    Errno::result(unsafe { libc::kill(pid, sig) }).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_stay_unblocked_and_the_rest_is_blocked() {
        let set = blocked_set();
        for sig in SYNCHRONOUS {
            assert!(!set.contains(sig), "{sig}");
        }
        for sig in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGCHLD, Signal::SIGWINCH, Signal::SIGTTOU] {
            assert!(set.contains(sig), "{sig}");
        }
    }

    #[test]
    fn only_a_sigpipe_from_this_process_is_its_own() {
        let me = nix::unistd::getpid().as_raw();
        assert!(Caught { sig: libc::SIGPIPE, sender: me }.own_sigpipe());
        assert!(!Caught { sig: libc::SIGPIPE, sender: me + 1 }.own_sigpipe(), "kill -PIPE from another process");
        assert!(!Caught { sig: libc::SIGPIPE, sender: 0 }.own_sigpipe(), "from outside the namespace");
        assert!(!Caught { sig: libc::SIGTERM, sender: me }.own_sigpipe());
    }

    /// The bytes `/proc/self/environ` shows are the block the kernel filled at execve: after
    /// the scrub, the value is gone from it and from the C library's list. Run in a child
    /// process (this test binary's own, re-run with one test), where no other thread touches
    /// the environment.
    #[test]
    fn a_scrubbed_variable_leaves_proc_self_environ() {
        const NAME: &str = "NW_PID1_SCRUB_TEST";
        if std::env::var_os("NCCL_WRAP_TEST_RUNNER").is_some() {
            // Under qemu-user /proc/self/environ is the emulator's block, and this test binary
            // cannot start itself without the emulator: said, and counted as skipped
            // (scripts/test.sh's TESTS_SKIPPED_LOG, as tests/common's skip does).
            let why = "nw-pid1 sys::tests::a_scrubbed_variable_leaves_proc_self_environ: the emulator's environ\n";
            eprintln!("SKIPPED {why}");
            if let Some(log) = std::env::var_os("TESTS_SKIPPED_LOG") {
                use std::io::Write;
                if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(log) {
                    let _ = f.write_all(why.as_bytes());
                }
            }
            return;
        }
        if std::env::var_os("NW_PID1_SCRUB_CHILD").is_some() {
            let before = std::fs::read("/proc/self/environ").expect("environ");
            assert!(before.windows(14).any(|w| w == b"hunter2-secret"), "set at execve");
            assert_eq!(scrub_env(NAME), 1);
            let after = std::fs::read("/proc/self/environ").expect("environ");
            assert!(!after.windows(7).any(|w| w == b"hunter2"), "{}", String::from_utf8_lossy(&after));
            assert_eq!(after.len(), before.len(), "overwritten in place, not moved");
            assert!(after.windows(NAME.len() + 1).any(|w| w == format!("{NAME}=").as_bytes()), "the name stays");
            assert_eq!(std::env::var_os(NAME), None, "out of the list");
            assert!(std::env::var_os("NW_PID1_SCRUB_CHILD").is_some(), "the others are untouched");
            return;
        }
        let me = std::env::current_exe().expect("test binary");
        let out = std::process::Command::new(me)
            .args(["--exact", "sys::tests::a_scrubbed_variable_leaves_proc_self_environ", "--test-threads=1"])
            .env("NW_PID1_SCRUB_CHILD", "1")
            .env(NAME, "hunter2-secret")
            .output()
            .expect("run the child");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success() && text.contains("1 passed"), "{text}{}", String::from_utf8_lossy(&out.stderr));
    }

    #[test]
    fn failure_report_round_trips() {
        for f in [Failure::NotFound, Failure::Candidate(0, Errno::EACCES), Failure::Candidate(7, Errno::ENOEXEC)] {
            assert_eq!(decode(&encode(f)), f);
        }
    }
}
