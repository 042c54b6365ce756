//! nccl-wrap: the container entrypoint that makes NCCL use this pod's RDMA ports.
//!
//! One visible pipeline: detect (reads of the environment, sysfs and ibverbs) -> apply limits
//! (memlock, which the optional self-test needs) -> plan (pure decisions) -> apply the
//! environment -> run (execve, or supervise as PID 1). Each step lives in its own module; this
//! file only wires them and turns outcomes into exit codes.

#![deny(unsafe_code)]
use std::ffi::OsString;
use std::io::Write;
use std::path::Path;

use nccl_wrap::cli::{self, Cli, Sub, EXIT_REFUSED, EXIT_USAGE};
use nccl_wrap::{doctor, gate, health, install, ping, report, run};
use nw_decide as plan;
use nw_nccl as nccl;
use nw_observe::{detect, observation, verbs};
use nw_output::msg::PREFIX;
use nw_pairtest as pairtest;
use nw_pid1::{memlock, supervise};
use nw_postmortem::{portwatch, status};

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
        Err(e) => return bad_usage(&e, &raw, &env_list),
    };
    if let Some(Sub::Install { dir }) = &cli.sub {
        // The init container's job: no detection, nothing but the copy.
        return install::main(dir);
    }
    // Validate, then act: every problem is named here, before anything touches the process.
    let config = match judge(cli, &vars) {
        Ok(config) => config,
        Err(code) => return code,
    };
    let cli = &config.cli;
    init_logging();
    if let Some(Sub::Watch(w)) = &cli.sub {
        // The node agent runs its own detection every round, in the node's view.
        let sysfs = detect::sysfs::Sysfs::new(&cli.opts.sysfs_root);
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

    // Observe: every read any decision needs. Where ibverbs are consulted, the devices are
    // opened once for detection's far GID table reads and the probe, and closed before the
    // plan: never held while the job runs.
    let (mut prefs, pref_warnings) = plan::gid_prefs(&vars);
    let sysfs = detect::sysfs::Sysfs::new(&cli.opts.sysfs_root);
    let dra_metadata = dra_metadata_root(&cli.opts);
    let roots = roots(&cli.opts, &sysfs, &dra_metadata);
    let opened = cli::configs::verbs_skipped(&cli.opts).is_none().then(verbs::Opened::new);
    let tables: &dyn detect::gid_source::TableSource = match &opened {
        Some(o) => o,
        None => &detect::gid_source::SysfsOnly,
    };
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
    let gate = gate_coordinator(&cli.opts);
    // Where every visible device is the pod's (hostNetwork), the rails rule weighs each usable
    // port's evidence: read here, decided in the plan.
    let coordinator = plan::bootstrap::coordinator(&vars, gate);
    let evidence = detection.every_visible.then(|| {
        let usable: Vec<(String, u32)> = detection
            .devices
            .iter()
            .flat_map(|d| d.ports.iter().map(move |p| (d, p)))
            .filter(|(_, p)| plan::port_problem(p, &prefs).is_none())
            .map(|(d, p)| (d.name.clone(), p.port))
            .collect();
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
    let depth = if matches!(cli.sub, Some(Sub::Doctor { .. })) {
        detect::userspace::Depth::Full
    } else {
        detect::userspace::Depth::Quick
    };
    let asks = plan::asks(&plan, &vars, gate, depth);
    let answers = observation::answer(&roots, &vars, &plan.detection, &mut seen, &asks);
    plan::settle(&mut plan, answers, &vars, gate, prefs, family, choices);

    match cli.sub {
        Some(Sub::Env { json }) => {
            let text = if json {
                report::json(&plan, &memlock) + "\n"
            } else {
                // Warnings still reach the person running `eval "$(nccl-wrap env)"`.
                eprint!("{}", report::summary(&plan, &memlock, true));
                nccl::env::export_lines(plan.exports())
            };
            print_or_fail(&text)
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
            let out = cli::configs::outputs(files);
            if out.is_empty() {
                doctor::main(&inputs, form)
            } else {
                doctor::main_then(&inputs, form, |report| health::write_for_doctor(&inputs, report, &out))
            }
        }
        Some(Sub::Ping(ref p)) => {
            let inputs = pairtest::here::Inputs {
                plan: &plan,
                vars: &vars,
                proc_root: &cli.opts.proc_root,
                verbs: verbs.as_ref(),
            };
            ping::main(&inputs, &cli::configs::ping_options(p))
        }
        None => {
            let ping_inputs = pairtest::here::Inputs {
                plan: &plan,
                vars: &vars,
                proc_root: &cli.opts.proc_root,
                verbs: verbs.as_ref(),
            };
            run::run(&config, &plan, &memlock, &env_list, early_block, &ping_inputs)
        }
        Some(Sub::Install { .. } | Sub::Watch(_) | Sub::Status { .. }) => {
            unreachable!("install, watch and status return before detection")
        }
    }
}

/// Where every read starts, from the options.
fn roots<'a>(o: &'a cli::Opts, sysfs: &'a detect::sysfs::Sysfs, dra_metadata: &'a Path) -> observation::Roots<'a> {
    observation::Roots {
        sysfs,
        proc_root: &o.proc_root,
        dev_root: &o.dev_root,
        image_root: &o.image_root,
        annotations: &o.annotations,
        dra_metadata,
        device_nodes: device_nodes(o),
    }
}

/// The dev root, where its uverbs nodes say something of the sysfs tree read: always, but where
/// a sysfs root other than `/sys` (a node tree) is read with the machine's own `/dev`, whose nodes
/// are another machine's (as libibverbs, which reads the kernel's sysfs, is then not consulted).
fn device_nodes(o: &cli::Opts) -> Option<&Path> {
    (o.sysfs_root == Path::new("/sys") || o.dev_root != Path::new("/dev")).then_some(o.dev_root.as_path())
}

/// Where the KEP-5304 device metadata trees are: the container's
/// `/var/run/kubernetes.io/dra-device-attributes`; where the sysfs root is a node tree's own
/// (`<node>/sys`, as the fixtures lay a node out), the same path inside that tree, so that a node
/// read from a tree is read whole. No option names it (yet): the kubelet mounts it at one place.
fn dra_metadata_root(o: &cli::Opts) -> std::path::PathBuf {
    let container = Path::new(detect::dra_metadata::CONTAINER_DIR);
    match o.sysfs_root.parent() {
        Some(node) if o.sysfs_root != Path::new("/sys") && o.sysfs_root.ends_with("sys") => {
            node.join(container.strip_prefix("/").unwrap_or(container))
        }
        _ => container.to_path_buf(),
    }
}

/// The gate's coordinator, as the bootstrap's last source of where the job's coordinator is.
fn gate_coordinator(o: &cli::Opts) -> Option<plan::bootstrap::Gate<'_>> {
    o.gate_coordinator.as_deref().map(|value| plan::bootstrap::Gate { name: "--gate-coordinator", value })
}

/// The options made ready, each option or variable that could not be used named; 125 when one
/// belongs to an interlock the user asked for, or the gate asked for cannot run (its secret, who
/// this pod is), and a command was to run: before anything touches the process (docs: README,
/// "Misconfiguration"). The refusal's cause is also the termination message.
fn judge(cli: Cli, vars: &detect::Vars) -> Result<cli::Config, u8> {
    let (config, mut verdict) = cli::validate(cli, vars);
    if let Some(cli::GateConfig { warn: false, .. }) = config.gate {
        if let Err(e) = gate::who::resolve(&run::given(&config.cli.opts, None), vars) {
            verdict.refusal.get_or_insert_with(|| format!("gate-usage: {e}"));
        }
    }
    for line in &verdict.ignored {
        eprintln!("{PREFIX} warning: {line}");
    }
    let Some(refusal) = verdict.refusal else { return Ok(config) };
    match config.cli.command.first() {
        Some(cmd) if config.cli.sub.is_none() => {
            eprintln!("{PREFIX} refusing to start {cmd:?}: {refusal}");
            if let Some(path) = &config.supervise.hang.termination_log {
                let text = nw_output::termination::fit("nccl-wrap refused to start the command", &[refusal], 1);
                if let Err(e) = nw_output::termination::write(path, &text) {
                    eprintln!("{PREFIX} cannot write the termination message to {}: {e}", path.display());
                }
            }
            Err(EXIT_REFUSED)
        }
        _ => {
            eprintln!("{PREFIX} warning: a run with these settings would refuse to start: {refusal}");
            Ok(config)
        }
    }
}

/// Bad options never cost the job: when a command follows `--`, it runs untouched.
fn bad_usage(e: &cli::CliError, raw: &[OsString], env: &[(OsString, OsString)]) -> u8 {
    if e.is_answer() {
        return print_or_fail(&format!("{e}\n"));
    }
    eprintln!("{PREFIX} {e}");
    if let Some(near) = cli::suggest(e) {
        eprintln!("{PREFIX} did you mean {near}?");
    }
    match cli::command_after_dashes(raw) {
        Some(cmd) => {
            let vars = env.iter().map(|(k, v)| (k.as_os_str(), v.as_os_str()));
            if let Some(asked) = cli::interlock_asked(raw, vars) {
                eprintln!("{PREFIX} refusing to start {:?}: the options were not understood, and {asked} asks for an interlock that a run without nccl-wrap's settings would drop", cmd[0]);
                return EXIT_REFUSED;
            }
            eprintln!("{PREFIX} warning: options not understood; running the command without nccl-wrap's settings");
            if supervise::wanted(None) {
                // As PID 1 the command still needs an init: supervise it with the defaults.
                let defaults = supervise::Options {
                    kill_group: false,
                    grace: std::time::Duration::ZERO,
                    watch: portwatch::Config::none(),
                    hang: nw_postmortem::hang::Config::default(),
                    state_file: None,
                };
                return supervise::run(cmd, &nccl::env::child_env(env, &[]), &defaults, None);
            }
            run::exec_or_report(cmd, &nccl::env::child_env(env, &[]))
        }
        None => {
            let help = e.sub.map_or(String::new(), |s| format!("nccl-wrap {} ", s.name()));
            eprintln!("{PREFIX} usage: {} (see {help}--help)", cli::usage(e.sub));
            EXIT_USAGE
        }
    }
}

fn init_logging() {
    if let Some(filter) = std::env::var_os("NCCL_WRAP_LOG") {
        env_logger::Builder::new().parse_filters(&filter.to_string_lossy()).target(env_logger::Target::Stderr).init();
    }
}

fn print_or_fail(text: &str) -> u8 {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("{PREFIX} cannot write to stdout: {e}");
            1
        }
    }
}

/// Rust's own start is kept: it ignores SIGPIPE for nccl-wrap's writes (the inherited
/// disposition goes back to the command, `process::sys`) and opens a closed descriptor 0, 1 or 2
/// on `/dev/null`, which is all nccl-wrap needs of a start. `exit` flushes standard output.
fn main() {
    std::process::exit(i32::from(start()));
}
