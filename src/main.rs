//! nccl-wrap: the container entrypoint that makes NCCL use this pod's RDMA ports. The switch over
//! the stages: options, observe, memlock, decide, then the subcommand or the run.

#![deny(unsafe_code)]
use std::ffi::OsString;

use nccl_wrap::cli::{self, Cli, Sub, EXIT_USAGE};
use nccl_wrap::{doctor, health, install, ping, report, run};
use nw_decide as plan;
use nw_nccl as nccl;
use nw_observe::detect::userspace::Depth;
use nw_observe::{detect, observation, verbs};
use nw_output::msg::PREFIX;
use nw_pairtest as pairtest;
use nw_pid1::{memlock, supervise};
use nw_postmortem::status;

/// The whole start, and after it the run or the subcommand: its exit status.
fn start() -> u8 {
    // Hidden entry for the Soft-RoCE lab and debugging: `nccl-wrap __verbs list|port|selftest ...`.
    if std::env::args_os().nth(1).is_some_and(|a| a == "__verbs") {
        return u8::try_from(verbs::debug::debug_main(std::env::args().skip(2).collect())).unwrap_or(1);
    }
    let raw: Vec<OsString> = std::env::args_os().collect();
    let env_list: Vec<(OsString, OsString)> = std::env::vars_os().collect();
    // The job secret lives on in `env_list` only: its bytes leave nccl-wrap's own environment
    // block (/proc/PID/environ, readable by the command), while there is still one thread.
    nw_pid1::sys::scrub_env("NCCL_WRAP_GATE_SECRET");
    let vars: detect::Vars = env_list.iter().cloned().collect();
    let cli = match Cli::parse(&raw, |name| vars.get(std::ffi::OsStr::new(name)).cloned()) {
        Ok(cli) => cli,
        Err(e) => return run::bad_usage(&e, &raw, &env_list),
    };
    if let Some(Sub::Install { dir }) = &cli.sub {
        // The init container's job: no detection, nothing but the copy.
        return install::main(dir);
    }
    // Validate, then act: every problem is named here, before anything touches the process.
    let config = match run::judge(cli, &vars) {
        Ok(config) => config,
        Err(code) => return code,
    };
    let cli = &config.cli;
    if let Some(filter) = std::env::var_os("NCCL_WRAP_LOG") {
        env_logger::Builder::new().parse_filters(&filter.to_string_lossy()).target(env_logger::Target::Stderr).init();
    }
    let sysfs = detect::sysfs::Sysfs::new(&cli.opts.sysfs_root);
    if let Some(Sub::Watch(w)) = &cli.sub {
        // The node agent runs its own detection every round, in the node's view.
        let roots = health::watch::Roots {
            sysfs: &sysfs,
            proc_root: &cli.opts.proc_root,
            dev_root: &cli.opts.dev_root,
            vars: &vars,
        };
        let opts = cli::configs::watch_options(w);
        // The ring's pair test goes through ibverbs; the node's checks never do.
        let verbs = cli::configs::verbs_for(&cli.opts);
        return health::watch::main(&roots, &opts, verbs.as_ref());
    }
    if let Some(Sub::Status { json }) = cli.sub {
        return status::main(&cli.opts.state_file, &cli.opts.sysfs_root, json);
    }
    let early_block = supervise::block_early(cli.opts.init);
    if cli.sub.is_none() && cli.command.is_empty() {
        eprintln!("{PREFIX} no command given: usage is nccl-wrap [OPTIONS] -- COMMAND [ARGS]... (see --help)");
        return EXIT_USAGE;
    }

    // Observe: every read any decision needs; devices opened through ibverbs are closed before
    // the plan, never held while the job runs.
    let (mut prefs, pref_warnings) = plan::gid_prefs(&vars);
    let dra_metadata = cli::configs::dra_metadata_root(&cli.opts);
    let roots = cli::configs::roots(&cli.opts, &sysfs, &dra_metadata);
    let opened = cli::configs::verbs_skipped(&cli.opts).is_none().then(verbs::Opened::default);
    let tables: &dyn detect::gid_source::TableSource = opened.as_ref().map_or(&detect::gid_source::SysfsOnly, |o| o);
    let observation::Observation { mut detection, family, mut seen, .. } =
        observation::observe(&roots, &vars, observation::View::Pod, &plan::gid_rule(prefs), tables);
    if family == nccl::gid::RailFamily::Inet6 {
        prefs.family = nccl::gid::Family::Inet6;
    }
    let verbs = cli::configs::verbs_for(&cli.opts);
    verbs::verify::probe(&mut detection, opened.as_ref().map_or(verbs.as_ref(), |o| o), &sysfs);
    drop(opened);
    log::debug!("detection: {detection:?}");

    // Apply limits: memlock, before the self-test registers memory. Raised for `env` and
    // `doctor` too, so that they report the limit a run would get.
    let memlock = memlock::raise();
    let selftest_opts =
        verbs::SelftestOptions { buffer_bytes: cli.opts.selftest_bytes, timeout_ms: cli.opts.selftest_timeout_ms };
    if cli.opts.selftest {
        verbs::verify::selftest(&mut detection, verbs.as_ref(), &selftest_opts, |p| {
            plan::port_problem(p, &prefs).is_none()
        });
    }

    // Decide, in two rounds: the ports, then what the far reads it asks for settle.
    let choices = plan::Choices {
        override_user: cli.opts.override_user,
        require_rdma: cli.opts.require_rdma,
        // `--gate=warn` starts the command whatever the pairs say: it promises no refusal.
        gate: cli.opts.gate == cli::Gate::Refuse,
    };
    let gate = cli::configs::gate_coordinator(&cli.opts);
    // Where every visible device is the pod's (hostNetwork), the rails rule weighs each usable
    // port's evidence: read here, decided in the plan.
    let coordinator = plan::bootstrap::coordinator(&vars, gate);
    let evidence = detection.every_visible.then(|| {
        let ports = detection.devices.iter().flat_map(|d| d.ports.iter().map(move |p| (d, p)));
        let usable = ports.filter(|(_, p)| plan::port_problem(p, &prefs).is_none());
        let usable: Vec<(String, u32)> = usable.map(|(d, p)| (d.name.clone(), p.port)).collect();
        observation::rails_evidence(&roots, &detection, &mut seen, &usable, coordinator.as_ref().map(|c| c.1.as_str()))
    });
    let shown = coordinator.as_ref().map(|(v, h)| format!("{v}={h}"));
    let rails = evidence.as_ref().map(|evidence| plan::host::Rails {
        evidence,
        coordinator: shown.as_deref(),
        selector: config.rails.as_ref(),
    });
    let mut plan = plan::plan_with(detection, &vars, &prefs, choices, rails);
    plan.warnings.extend(pref_warnings);
    let depth = if matches!(cli.sub, Some(Sub::Doctor { .. })) { Depth::Full } else { Depth::Quick };
    let asks = plan::asks(&plan, &vars, gate, depth);
    let answers = observation::answer(&roots, &vars, &plan.detection, &mut seen, &asks);
    plan::settle(&mut plan, answers, &vars, gate, prefs, family, choices);

    let inputs =
        pairtest::here::Inputs { plan: &plan, vars: &vars, proc_root: &cli.opts.proc_root, verbs: verbs.as_ref() };
    match cli.sub {
        Some(Sub::Env { json }) => {
            let text = if json {
                report::json(&plan, &memlock) + "\n"
            } else {
                // Warnings still reach the person running `eval "$(nccl-wrap env)"`.
                eprint!("{}", report::summary(&plan, &memlock, true));
                nccl::env::export_lines(plan.exports())
            };
            run::print(&text)
        }
        Some(Sub::Doctor { json, no_selftest, ref files }) => {
            let inputs = doctor::Inputs {
                plan: &plan,
                memlock: &memlock,
                vars: &vars,
                sysfs: &sysfs,
                proc_root: &cli.opts.proc_root,
                dev_root: &cli.opts.dev_root,
                verbs: verbs.as_ref(),
                selftest: (!no_selftest).then_some(&selftest_opts),
                addrs: &detect::netif::read,
            };
            let form = if json { doctor::Form::Json } else { doctor::Form::Human { quiet: cli.opts.quiet } };
            doctor::main(&inputs, form, |report| health::write_for_doctor(&inputs, report, files))
        }
        Some(Sub::Ping(ref p)) => ping::main(&inputs, &cli::configs::ping_options(p)),
        None => run::run(&config, &plan, &memlock, &env_list, early_block, &inputs),
        Some(Sub::Install { .. } | Sub::Watch(_) | Sub::Status { .. }) => {
            unreachable!("install, watch and status return before detection")
        }
    }
}

/// Rust's own start is kept: it ignores SIGPIPE for nccl-wrap's writes (the inherited
/// disposition goes back to the command, `process::sys`) and opens a closed descriptor 0, 1 or 2
/// on `/dev/null`, which is all nccl-wrap needs of a start. `exit` flushes standard output.
fn main() {
    std::process::exit(i32::from(start()));
}
