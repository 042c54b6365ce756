//! The run: the interlocks asked for (`--require-*`, `--gate`), then the command exec'd or
//! supervised; each refusal on stderr and in the termination message, exit 125. Also a start whose
//! options could not be read or made ready.

use std::ffi::OsString;
use std::io::Write;

use crate::cli::{self, EXIT_REFUSED};
use crate::{gate, report};
use nw_decide as plan;
use nw_nccl as nccl;
use nw_observe::detect::Vars;
use nw_output::msg::PREFIX;
use nw_pairtest as pairtest;
use nw_pid1::{exec, memlock, supervise};
use nw_postmortem::portwatch;

/// Says why the command does not start, and writes it as the termination message: 125.
fn refuse(config: &cli::Config, why: String) -> u8 {
    eprintln!("{PREFIX} refusing to start {:?}: {why}", config.cli.command[0]);
    if let Some(path) = &config.supervise.hang.termination_log {
        let text = nw_output::termination::fit("nccl-wrap refused to start the command", &[why], 1);
        if let Err(e) = nw_output::termination::write(path, &text) {
            eprintln!("{PREFIX} cannot write the termination message to {}: {e}", path.display());
        }
    }
    EXIT_REFUSED
}

/// The options made ready, each unusable one named; 125 before anything touches the process when
/// one belongs to an interlock asked for, or the gate asked for cannot run, and a command was to run.
pub fn judge(cli: cli::Cli, vars: &Vars) -> Result<cli::Config, u8> {
    let (config, mut verdict) = cli::validate(cli, vars);
    if let Some(cli::GateConfig { warn: false, .. }) = config.gate {
        if let Err(e) = gate::who::resolve(&given(&config.cli.opts, None), vars) {
            verdict.refusal.get_or_insert_with(|| format!("gate-usage: {e}"));
        }
    }
    for line in &verdict.ignored {
        eprintln!("{PREFIX} warning: {line}");
    }
    match verdict.refusal {
        None => Ok(config),
        Some(refusal) if config.cli.sub.is_none() && !config.cli.command.is_empty() => Err(refuse(&config, refusal)),
        Some(refusal) => {
            eprintln!("{PREFIX} warning: a run with these settings would refuse to start: {refusal}");
            Ok(config)
        }
    }
}

/// Bad options never cost the job: when a command follows `--`, it runs untouched.
pub fn bad_usage(e: &cli::CliError, raw: &[OsString], env: &[(OsString, OsString)]) -> u8 {
    // Help and version are answers, not errors.
    if matches!(e.kind, cli::ErrorKind::Help(_) | cli::ErrorKind::Version(_)) {
        return print(&format!("{e}\n"));
    }
    eprintln!("{PREFIX} {e}");
    if let Some(near) = cli::suggest(e) {
        eprintln!("{PREFIX} did you mean {near}?");
    }
    let Some(cmd) = cli::command_after_dashes(raw) else {
        let help = e.sub.map_or(String::new(), |s| format!("nccl-wrap {} ", s.name()));
        eprintln!("{PREFIX} usage: {} (see {help}--help)", cli::usage(e.sub));
        return cli::EXIT_USAGE;
    };
    let vars = env.iter().map(|(k, v)| (k.as_os_str(), v.as_os_str()));
    if let Some(asked) = cli::interlock_asked(raw, vars) {
        eprintln!("{PREFIX} refusing to start {:?}: the options were not understood, and {asked} asks for an interlock that a run without nccl-wrap's settings would drop", cmd[0]);
        return EXIT_REFUSED;
    }
    eprintln!("{PREFIX} warning: options not understood; running the command without nccl-wrap's settings");
    let env = nccl::env::child_env(env, &[]);
    if supervise::wanted(None) {
        // As PID 1 the command still needs an init: supervise it with the defaults.
        let defaults = supervise::Options {
            kill_group: false,
            grace: std::time::Duration::ZERO,
            watch: portwatch::Config::none(),
            hang: nw_postmortem::hang::Config::default(),
            state_file: None,
        };
        return supervise::run(cmd, &env, &defaults, None);
    }
    exec_or_report(cmd, &env)
}

/// Writes `text` on standard output: 0, or 1 when it cannot be written.
pub fn print(text: &str) -> u8 {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("{PREFIX} cannot write to stdout: {e}");
            1
        }
    }
}

/// Apply the environment and run the command.
pub fn run(
    config: &cli::Config,
    plan: &plan::Plan,
    memlock: &memlock::Memlock,
    env_list: &[(OsString, OsString)],
    blocked: Option<nw_pid1::sys::Blocked>,
    ping_inputs: &pairtest::here::Inputs,
) -> u8 {
    let cli = &config.cli;
    eprint!("{}", report::summary(plan, memlock, cli.opts.quiet));
    if cli.opts.require_rdma {
        // EFA pods carry NCCL's traffic through a net plugin: what it needs is weighed below.
        let why = if !plan.rdma && plan.efa.is_none() {
            Some("no usable RDMA port was found; see the warnings above, or run `nccl-wrap env --json`".into())
        } else if let Some(why) = plan.rails_refusal() {
            Some(format!("{why}: the rails asked for are not here"))
        } else {
            plan.userspace_refusal().map(|why| format!("NCCL would run over TCP sockets: {why}"))
        };
        if let Some(why) = why {
            return refuse(config, format!("--require-rdma (NCCL_WRAP_REQUIRE_RDMA) is set and {why}"));
        }
    }
    if cli.opts.require_memlock && !memlock.sufficient() {
        let why = format!("--require-memlock (NCCL_WRAP_REQUIRE_MEMLOCK) is set and {}", memlock.describe());
        return refuse(config, why);
    }
    let mut pruned = None;
    // A pod that could not drop a rail refuses before it joins: the job then refuses on every
    // pod (a rank missing), never starts split.
    if let Some(why) = config.gate.as_ref().filter(|_| cli.opts.gate_prune).and_then(|_| plan.rails_droppable().err()) {
        return refuse(config, format!("--gate-prune (NCCL_WRAP_GATE_PRUNE) is set and {why}"));
    }
    if let Some(g) = &config.gate {
        // Before exec or the child: the gate's listener, connections and RDMA resources are all
        // closed when it returns.
        let fabric = pairtest::rdma::Rdma::new(
            pairtest::here::read(ping_inputs),
            pairtest::here::hostname(ping_inputs.proc_root, ping_inputs.vars),
        );
        let ran = gate::run(ping_inputs.vars, &fabric, &gate_options(&cli.opts, g, plan));
        // --gate-prune: the rails dropped on every pod leave what NCCL and the port watch get.
        let drop: Vec<(String, String)> = ran.pruned.into_iter().map(|p| (p.rail, p.line)).collect();
        if !drop.is_empty() && ran.outcome == gate::Outcome::Start {
            match plan.without(&drop) {
                Ok(p) => pruned = Some(p),
                Err(why) => return refuse(config, format!("--gate-prune (NCCL_WRAP_GATE_PRUNE) is set and {why}")),
            }
        }
        match ran.outcome {
            gate::Outcome::Start => {}
            gate::Outcome::Refuse => {
                eprintln!("{PREFIX} refusing to start {:?}: --gate (NCCL_WRAP_GATE) is set and the job's fabric check failed (see above; docs/gate.md)", cli.command[0]);
                return EXIT_REFUSED;
            }
            // As the command would have ended had it run: 128 + the signal.
            gate::Outcome::Interrupted(sig) => return u8::try_from(128 + sig).unwrap_or(EXIT_REFUSED),
        }
    }
    let plan = pruned.as_ref().unwrap_or(plan);
    let env = nccl::env::child_env(env_list, &plan.exports());
    if supervise::wanted(cli.opts.init) {
        let mut opts = config.supervise.clone();
        // The post-mortem watches the ports the plan hands to NCCL.
        let used = plan.decisions.iter().filter(|d| d.used);
        opts.watch.ports = used.map(|d| portwatch::PortId { device: d.device.clone(), port: d.port }).collect();
        return supervise::run(&cli.command, &env, &opts, blocked);
    }
    if cli.opts.stall_ms > 0 {
        eprintln!("{PREFIX} warning: no stall will be seen (--stall-ms): nccl-wrap execs the command and is gone, so nothing asks NCCL's RAS; use --supervise (the default as PID 1)");
    }
    if let Some(path) = &cli.opts.report {
        eprintln!(
            "{PREFIX} warning: no post-mortem will be written to {} (--report): nccl-wrap execs the command and is gone when it ends; use --supervise (the default as PID 1)",
            path.display()
        );
    }
    exec_or_report(&cli.command, &env)
}

pub fn exec_or_report(argv: &[OsString], env: &[(OsString, OsString)]) -> u8 {
    let err = exec::prepare(argv, env).map_or_else(|e| e, |prepared| exec::exec(&prepared));
    eprintln!("{PREFIX} {err}");
    err.exit_code()
}

/// The gate's options: its own, and ping's test knobs from `NCCL_WRAP_PING_*`.
fn gate_options(o: &cli::Opts, g: &cli::GateConfig, plan: &plan::Plan) -> gate::Options {
    let p = &o.gate_ping;
    gate::Options {
        warn: g.warn,
        given: given(o, Some(plan)),
        wait_ms: o.gate_wait_ms,
        test: cli::configs::test_settings(p),
        json: p.json,
        termination_log: g.termination_log.clone(),
        secret: g.secret.clone(),
        slow: gate::verdict::SlowRule { pct: o.gate_slow_pct, refuse: o.gate_refuse_slow },
        prune: o.gate_prune,
    }
}

/// Who the gate's options say this pod is (the bootstrap from the plan, once there is one).
pub fn given(o: &cli::Opts, plan: Option<&plan::Plan>) -> gate::who::Given {
    gate::who::Given {
        coordinator: o.gate_coordinator.clone(),
        rank: o.gate_rank,
        size: o.gate_size,
        port: o.gate_port,
        id: o.gate_id.clone(),
        bootstrap: plan.and_then(bootstrap_of),
    }
}

/// The interface NCCL's bootstrap will use and its family towards the coordinator, for rank 0 to
/// compare: only where it is the plan's own pick (a user's NCCL_SOCKET_IFNAME that names another,
/// or a list, is the user's to answer for, and its family is not known here), and only a name the
/// wire carries (a join it would refuse must never cost the pod its place in the gate).
pub fn bootstrap_of(plan: &plan::Plan) -> Option<gate::wire::Bootstrap> {
    let ours = plan.bootstrap.as_ref()?;
    let ifname = ours.ifname.clone()?;
    let kept = plan.vars.iter().find(|v| v.name == nccl::env::SOCKET_IFNAME && v.action == plan::Action::Kept);
    if kept.is_some_and(|v| v.previous.as_deref().map(|p| p.trim_start_matches('=')) != Some(ifname.as_str())) {
        return None;
    }
    let plain = ifname.len() <= 64 && ifname.bytes().all(|b| b.is_ascii_alphanumeric() || b"_.-@".contains(&b));
    plain.then(|| gate::wire::Bootstrap { ifname, family: ours.family.map(str::to_owned) })
}
