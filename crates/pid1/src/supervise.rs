//! Supervision as PID 1 (or `--supervise`), as tini does: run the command as a child, forward
//! signals, reap every zombie, watch the ports and ask RAS between signals, exit with its status.
//! It must never forward SIGCHLD, the fault signals or its own SIGPIPE, never lose the main child's
//! status to the reaping loop, and never outlive the command by more than the grace period.

use std::ffi::{c_int, OsString};
use std::io::IsTerminal;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::libc;
use nix::unistd::Pid;

use crate::exec;
use crate::sys::{self, Blocked, ChildSetup};
use nw_output::msg::PREFIX;
use nw_postmortem::hang::{self, Hang};
use nw_postmortem::portwatch::{self, Watch};
use nw_postmortem::postmortem::Exit;
use nw_postmortem::{say, state};

/// How long to wait for the last processes after SIGKILL before exiting anyway.
const AFTER_KILL: Duration = Duration::from_secs(1);

#[derive(Debug, Clone)]
pub struct Options {
    /// Forward signals to the command's process group rather than to the command alone.
    pub kill_group: bool,
    /// How long the processes the command left get between SIGTERM and SIGKILL (zero: none).
    pub grace: Duration,
    /// The ports to watch and where to report what changed on them.
    pub watch: portwatch::Config,
    /// When to ask NCCL's RAS about the job, and where its account goes.
    pub hang: hang::Config,
    /// Where the first reading is kept for `nccl-wrap status` (`None`: not kept).
    pub state_file: Option<std::path::PathBuf>,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum SuperviseError {
    #[error("cannot block signals before starting the command: {source}")]
    Block { source: Errno },
    #[error("cannot fork to start the command: {source}")]
    Fork { source: Errno },
}

/// Whether to supervise: as asked, or by default when this process is PID 1.
pub fn wanted(init: Option<bool>) -> bool {
    init.unwrap_or_else(is_pid1)
}

fn is_pid1() -> bool {
    nix::unistd::getpid().as_raw() == 1
}

/// Blocks signals as early as possible when supervision is wanted, so that a SIGTERM arriving
/// while detection runs stays pending instead of being lost.
pub fn block_early(init: Option<bool>) -> Option<sys::Blocked> {
    wanted(init).then(Blocked::block).and_then(Result::ok)
}

/// Runs the command as a supervised child (`blocked`: [`block_early`]'s); returns the exit status.
pub fn run(argv: &[OsString], env: &[(OsString, OsString)], opts: &Options, blocked: Option<sys::Blocked>) -> u8 {
    let prepared = match exec::prepare(argv, env) {
        Ok(p) => p,
        Err(e) => {
            say(&format!("{PREFIX} {e}"));
            return e.exit_code();
        }
    };
    let pid1 = is_pid1();
    if !pid1 {
        if let Err(e) = nix::sys::prctl::set_child_subreaper(true) {
            say(&format!("{PREFIX} warning: cannot become a child subreaper ({e}): orphans of the command are reaped by the real init instead"));
        }
    }
    let mut hang = Hang::new(&opts.hang, env);
    match supervise(&prepared, opts, pid1, blocked, &mut hang) {
        Ok(code) => code,
        Err(e) => {
            // A supervisor that cannot start must not cost the job: run the command as exec would.
            say(&format!("{PREFIX} warning: {e}; running the command without supervision"));
            let err = exec::exec(&prepared);
            say(&format!("{PREFIX} {err}"));
            err.exit_code()
        }
    }
}

fn supervise(
    prepared: &exec::Prepared,
    opts: &Options,
    pid1: bool,
    early: Option<Blocked>,
    hang: &mut Hang,
) -> Result<u8, SuperviseError> {
    let blocked = early.map_or_else(|| Blocked::block().map_err(|source| SuperviseError::Block { source }), Ok)?;
    let foreground = holds_terminal();
    // On a terminal the command's own group is the foreground: Ctrl-C reaches it once, not twice.
    let own_group = opts.kill_group || foreground;
    let attempt = |execve: &dyn Fn(&std::ffi::CStr) -> nix::errno::Errno| exec::attempt(prepared, execve);
    let setup = ChildSetup { argv: &prepared.argv, envp: &prepared.envp, attempt: &attempt, own_group, foreground };
    // The first reading before the command starts, so that everything it does comes after it.
    let mut watch = Watch::start(&opts.watch);
    let child = match sys::spawn(&setup, &blocked) {
        Ok(child) => child,
        Err(source) => {
            blocked.restore();
            return Err(SuperviseError::Fork { source });
        }
    };
    let pid = child.pid;
    // The default path (the container's /run) only as PID 1: runs on a host must not share it.
    let state_file =
        opts.state_file.as_ref().filter(|p| pid1 || p.as_path() != std::path::Path::new(state::DEFAULT_PATH));
    if let Some(path) = state_file {
        let st = state::State {
            pid: u32::try_from(pid.as_raw()).unwrap_or(0),
            started: watch.started(),
            ras: hang.addr(),
            ports: watch.first_reading(),
        };
        state::publish(path, &st);
    }
    log::debug!("supervising {pid} (PID 1: {pid1}, own group: {own_group}, terminal: {foreground})");
    // Take the terminal back once the command has ended (SIGTTOU is blocked: this cannot stop us).
    let take_back_terminal = || {
        if foreground {
            let _ = nix::unistd::tcsetpgrp(std::io::stdin(), nix::unistd::getpgrp());
        }
    };
    if let Err(failure) = child.exec_result() {
        let _ = until_exit(pid, pid.as_raw(), &blocked, None, &mut Hang::off());
        take_back_terminal();
        let err = exec::error(prepared, failure);
        say(&format!("{PREFIX} {err}"));
        return Ok(err.exit_code());
    }
    // kill(2)'s target: the command, or (negative) its process group.
    let target = if opts.kill_group { -pid.as_raw() } else { pid.as_raw() };
    let ended = until_exit(pid, target, &blocked, Some(&mut watch), hang);
    let code = ended.code;
    take_back_terminal();
    // Told before the grace period: the kubelet may SIGKILL us during it.
    hang.on_exit(&ended);
    let report = watch.end(ended, hang.take_section());
    hang.tell(&report);
    if let Some(path) = state_file {
        state::withdraw(path);
    }
    // What the command may have left behind, as kill(2) names it: as PID 1 every other process of
    // the namespace (all our descendants), else its own group; with neither, nothing we may
    // signal without hitting others.
    let rest = match (pid1, own_group) {
        (true, _) => Some(-1),
        (false, true) => Some(-pid.as_raw()),
        (false, false) => None,
    };
    finish(pid, opts.grace, rest, &blocked);
    Ok(code)
}

/// stdin is a terminal whose foreground group is ours (not a job started in the background).
fn holds_terminal() -> bool {
    let stdin = std::io::stdin();
    stdin.is_terminal() && nix::unistd::tcgetpgrp(&stdin) == Ok(nix::unistd::getpgrp())
}

/// Forwards signals and reaps every zombie until the main child has ended, polling the watch
/// when due. The first SIGTERM or SIGINT is held while RAS is asked: it goes on when the answer
/// is in, at `hang::AT_SIGNAL`, or at once when another signal comes or the command ends.
fn until_exit(
    main: Pid,
    target: libc::pid_t,
    blocked: &Blocked,
    mut watch: Option<&mut Watch>,
    hang: &mut Hang,
) -> Exit {
    let mut forwarded = None;
    // The signal held for RAS's answer, and until when at the latest.
    let mut held: Option<(c_int, Instant)> = None;
    let pass_on = |sig: c_int, forwarded: &mut Option<c_int>| {
        forward(target, sig);
        *forwarded = Some(sig);
    };
    loop {
        if let (Some(status), _) = reap(main) {
            // The command ended while a signal was held: its group may still be there to get it.
            if let Some((sig, _)) = held.take() {
                pass_on(sig, &mut forwarded);
            }
            let signal = libc::WIFSIGNALED(status).then(|| signal_name(libc::WTERMSIG(status)));
            // A status that is neither (stopped, continued) is never returned by reap_one.
            let code = exit_code(status).unwrap_or(1);
            return Exit { code, signal, forwarded: forwarded.map(signal_name) };
        }
        let timeout = watch.as_deref_mut().and_then(|w| {
            w.poll_if_due(Instant::now());
            w.timeout(Instant::now())
        });
        hang.poll_if_due(Instant::now());
        // The poll may have taken the answer in: then the held signal goes on now.
        if let Some((sig, until)) = held {
            if !hang.holding(Instant::now()) || Instant::now() >= until {
                held = None;
                pass_on(sig, &mut forwarded);
            }
        }
        let now = Instant::now();
        let timeout = [timeout, hang.timeout(now), held.map(|(_, until)| until.saturating_duration_since(now))]
            .into_iter()
            .flatten()
            .min();
        match blocked.wait_sender(timeout) {
            Ok(None) | Err(Errno::EINTR) => {}
            Ok(Some(c)) if c.sig == libc::SIGCHLD => {}
            Ok(Some(c)) if c.own_sigpipe() => {
                log::debug!("SIGPIPE from nccl-wrap's own write (stderr's reader gone?): not forwarded");
            }
            Ok(Some(c)) => {
                // Another signal while one is held: the held one first, in the order they came.
                if let Some((sig, _)) = held.take() {
                    pass_on(sig, &mut forwarded);
                    pass_on(c.sig, &mut forwarded);
                } else if let Some(until) = hang.on_signal(c.sig) {
                    // The kubelet's SIGTERM: RAS's view first (bounded: hang::AT_SIGNAL), then on.
                    held = Some((c.sig, until));
                } else {
                    pass_on(c.sig, &mut forwarded);
                }
            }
            Err(e) => {
                log::warn!("sigtimedwait failed: {e}");
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
}

fn forward(pid: libc::pid_t, sig: c_int) {
    log::debug!("forwarding signal {sig} to {pid}");
    match sys::kill(pid, sig) {
        // The command (or its whole group) is already gone; its SIGCHLD is on the way.
        Ok(()) | Err(Errno::ESRCH) => {}
        Err(e) => log::warn!("cannot forward signal {sig} to {pid}: {e}"),
    }
}

/// `SIGTERM`, `SIGRTMIN+3`, or the number.
fn signal_name(sig: c_int) -> String {
    match nix::sys::signal::Signal::try_from(sig) {
        Ok(s) => s.as_str().to_string(),
        Err(_) if (libc::SIGRTMIN()..=libc::SIGRTMAX()).contains(&sig) => {
            format!("SIGRTMIN+{}", sig - libc::SIGRTMIN())
        }
        Err(_) => format!("signal {sig}"),
    }
}

/// Reaps every ended child: the main child's raw status if among them, and whether any are left.
fn reap(main: Pid) -> (Option<c_int>, bool) {
    let mut code = None;
    loop {
        match sys::reap_one() {
            Ok(Some((pid, status))) if pid == main && exit_code(status).is_some() => code = Some(status),
            Ok(Some((pid, _))) => log::trace!("reaped {pid}"),
            Ok(None) => return (code, true),
            Err(Errno::EINTR) => {}
            Err(_) => return (code, false),
        }
    }
}

/// The child's code, or 128+N when signal N ended it (what a shell reports).
fn exit_code(status: c_int) -> Option<u8> {
    if libc::WIFEXITED(status) {
        u8::try_from(libc::WEXITSTATUS(status) & 0xff).ok()
    } else if libc::WIFSIGNALED(status) {
        u8::try_from(128 + libc::WTERMSIG(status)).ok()
    } else {
        None
    }
}

/// Whether any process of `who` (-1: the namespace, whose rest are our children) remains.
fn remains(who: libc::pid_t, children_left: bool) -> bool {
    if who == -1 {
        children_left
    } else {
        sys::kill(who, 0) != Err(Errno::ESRCH)
    }
}

/// After the command exits: SIGTERM the rest, wait up to `grace`, then SIGKILL; other signals
/// go to the rest, and a second SIGTERM or SIGINT ends the wait at once. As PID 1 with no grace,
/// exiting makes the kernel SIGKILL the rest of the namespace.
fn finish(main: Pid, grace: Duration, rest: Option<libc::pid_t>, blocked: &Blocked) {
    let (_, left) = reap(main);
    let Some(who) = rest else { return };
    if grace.is_zero() || !remains(who, left) {
        return;
    }
    log::debug!("command exited; sending SIGTERM to {who}, SIGKILL in {grace:?}");
    let _ = sys::kill(who, libc::SIGTERM);
    let why = match reap_until(main, who, deadline_after(grace), blocked) {
        Waited::Ended => return,
        Waited::Out => format!("did not end within {}s of SIGTERM (--grace)", grace.as_secs_f64()),
        // Not the grace period running out: someone asked nccl-wrap itself to stop meanwhile.
        Waited::Asked(sig, after) => format!(
            "were still running when a {} to nccl-wrap ended the grace period early ({:.1}s into --grace {}s)",
            signal_name(sig),
            after.as_secs_f64(),
            grace.as_secs_f64()
        ),
    };
    say(&format!("{PREFIX} processes left by the command {why}; sending SIGKILL"));
    let _ = sys::kill(who, libc::SIGKILL);
    let _ = reap_until(main, who, Instant::now() + AFTER_KILL, blocked);
}

/// `grace` from now, or a year where the clock cannot add it: never a panic in PID 1.
fn deadline_after(grace: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(grace).or_else(|| now.checked_add(Duration::from_secs(365 * 86_400))).unwrap_or(now)
}

/// How a wait for the processes the command left ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Waited {
    /// None remains.
    Ended,
    /// The deadline passed.
    Out,
    /// SIGTERM or SIGINT arrived (someone asking again), this long into the wait.
    Asked(c_int, Duration),
}

/// Reaps until `who` is gone, the deadline, or SIGTERM/SIGINT; other signals go on to `who`.
fn reap_until(main: Pid, who: libc::pid_t, deadline: Instant, blocked: &Blocked) -> Waited {
    let began = Instant::now();
    loop {
        let (_, left) = reap(main);
        if !remains(who, left) {
            return Waited::Ended;
        }
        let now = Instant::now();
        if now >= deadline {
            return Waited::Out;
        }
        // Woken by SIGCHLD, or after a short while for group members that are not our children.
        match blocked.wait_sender(Some((deadline - now).min(Duration::from_millis(100)))) {
            Ok(Some(c)) if c.sig == libc::SIGTERM || c.sig == libc::SIGINT => {
                return Waited::Asked(c.sig, began.elapsed());
            }
            Ok(Some(c)) if c.sig != libc::SIGCHLD && !c.own_sigpipe() => {
                let _ = sys::kill(who, c.sig);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grace_too_large_for_the_clock_gives_a_far_deadline_not_a_panic() {
        assert!(deadline_after(Duration::MAX) > Instant::now() + Duration::from_secs(86_400));
        assert!(deadline_after(Duration::from_secs(1)) <= Instant::now() + Duration::from_secs(1));
    }

    #[test]
    fn exit_codes_follow_the_shell() {
        assert_eq!(exit_code(0), Some(0));
        assert_eq!(exit_code(3 << 8), Some(3));
        assert_eq!(exit_code(255 << 8), Some(255));
        assert_eq!(exit_code(libc::SIGTERM), Some(143));
        assert_eq!(exit_code(libc::SIGKILL | 0x80), Some(137), "core dump flag");
        assert_eq!(exit_code(libc::SIGRTMAX()), u8::try_from(128 + libc::SIGRTMAX()).ok());
    }

    #[test]
    fn signals_are_named_as_people_know_them() {
        assert_eq!(signal_name(libc::SIGKILL), "SIGKILL");
        assert_eq!(signal_name(libc::SIGRTMIN() + 2), "SIGRTMIN+2");
        assert_eq!(signal_name(200), "signal 200");
    }

    #[test]
    fn explicit_init_wins_over_pid() {
        assert!(wanted(Some(true)));
        assert!(!wanted(Some(false)));
    }
}
