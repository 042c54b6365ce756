//! The run, the road's last stage when a command follows `--`: the interlocks the user asked for
//! (`--require-rdma`, `--require-memlock`, `--gate`), then the environment applied and the
//! command exec'd or supervised. Every refusal here is said on stderr and written as the
//! termination message Kubernetes shows (`kubectl describe pod`), exit 125.

use std::ffi::OsString;

use crate::cli::{self, EXIT_REFUSED};
use crate::{gate, report};
use nw_decide as plan;
use nw_nccl as nccl;
use nw_output::msg::PREFIX;
use nw_pairtest as pairtest;
use nw_pid1::{exec, memlock, supervise};
use nw_postmortem::portwatch;

/// Says why the command does not start, and writes it as the termination message: 125.
fn refuse(config: &cli::Config, why: String) -> u8 {
    let cmd = config.cli.command.first().map(|c| c.to_string_lossy().into_owned()).unwrap_or_default();
    eprintln!("{PREFIX} refusing to start {cmd:?}: {why}");
    if let Some(path) = &config.supervise.hang.termination_log {
        let text = nw_output::termination::fit("nccl-wrap refused to start the command", &[why], 1);
        if let Err(e) = nw_output::termination::write(path, &text) {
            eprintln!("{PREFIX} cannot write the termination message to {}: {e}", path.display());
        }
    }
    EXIT_REFUSED
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
    // EFA pods carry NCCL's traffic through a net plugin: what it needs is weighed below.
    if cli.opts.require_rdma && !plan.rdma && plan.efa.is_none() {
        return refuse(config, "--require-rdma (NCCL_WRAP_REQUIRE_RDMA) is set and no usable RDMA port was found; see the warnings above, or run `nccl-wrap env --json`".into());
    }
    if let Some(why) = plan.rails_refusal().filter(|_| cli.opts.require_rdma) {
        return refuse(
            config,
            format!("--require-rdma (NCCL_WRAP_REQUIRE_RDMA) is set and {why}: the rails asked for are not here"),
        );
    }
    if let Some(why) = plan.userspace_refusal().filter(|_| cli.opts.require_rdma) {
        return refuse(
            config,
            format!("--require-rdma (NCCL_WRAP_REQUIRE_RDMA) is set and NCCL would run over TCP sockets: {why}"),
        );
    }
    if cli.opts.require_memlock && !memlock.sufficient() {
        return refuse(
            config,
            format!("--require-memlock (NCCL_WRAP_REQUIRE_MEMLOCK) is set and {}", memlock.describe()),
        );
    }
    let mut pruned = None;
    // A pod that could not drop a rail refuses before it joins: the job then refuses on every
    // pod (a rank missing), never starts split.
    if let Some(why) = config.gate.as_ref().filter(|_| cli.opts.gate_prune).and_then(|_| plan.without(&[]).err()) {
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
        opts.watch.ports = watched_ports(plan);
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

/// The ports the plan hands to NCCL: the ones the post-mortem watches.
fn watched_ports(plan: &plan::Plan) -> Vec<portwatch::PortId> {
    plan.decisions
        .iter()
        .filter(|d| d.used)
        .map(|d| portwatch::PortId { device: d.device.clone(), port: d.port })
        .collect()
}

pub fn exec_or_report(argv: &[OsString], env: &[(OsString, OsString)]) -> u8 {
    let err = match exec::prepare(argv, env) {
        Ok(prepared) => exec::exec(&prepared),
        Err(e) => e,
    };
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
