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

use nccl_wrap::cli::{self, Cli, HealthFiles, PingArgs, Sub, EXIT_REFUSED, EXIT_USAGE};
use nccl_wrap::{doctor, gate, health, install, ping, report};
use nw_decide as plan;
use nw_nccl as nccl;
use nw_observe::{detect, verbs};
use nw_output::msg::PREFIX;
use nw_pairtest as pairtest;
use nw_pid1::{exec, memlock, supervise};
use nw_postmortem::{portwatch, status};

/// The whole start, and after it the run or the subcommand: its exit status.
fn start() -> u8 {
    // Hidden entry for the Soft-RoCE lab and debugging: `nccl-wrap __verbs list|port|selftest ...`.
    if std::env::args_os().nth(1).is_some_and(|a| a == "__verbs") {
        return u8::try_from(verbs::debug::debug_main(std::env::args().skip(2).collect())).unwrap_or(1);
    }
    let raw: Vec<OsString> = std::env::args_os().collect();
    let env_list: Vec<(OsString, OsString)> = std::env::vars_os().collect();
    let vars: detect::Vars = env_list.iter().cloned().collect();
    let mut cli = match Cli::parse(&raw, |name| vars.get(std::ffi::OsStr::new(name)).cloned()) {
        Ok(cli) => cli,
        Err(e) => return bad_usage(&e, &raw, &env_list),
    };
    if let Some(Sub::Install { dir }) = &cli.sub {
        // The init container's job: no detection, nothing but the copy.
        return install::main(dir);
    }
    // Validate, then act: every problem is named here, before anything touches the process.
    cli.problems.extend(cli::validate::unknown_variables(env_list.iter().map(|(k, _)| k.as_os_str())));
    if let Some(code) = judge(&cli) {
        return code;
    }
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
        let opts = health::watch::Options {
            interval: std::time::Duration::from_millis(w.interval_ms),
            jitter_pct: w.jitter_pct,
            rounds: w.rounds,
            outputs: outputs(&w.files),
            ring: w.ring.clone().map(|(service, port)| health::ring::Config {
                service,
                port,
                every: w.ring_every,
                timeout: std::time::Duration::from_millis(w.ring_timeout_ms),
            }),
        };
        // The ring's pair test goes through ibverbs; the node's checks never do.
        let verbs = verbs_for(&cli.opts);
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

    // Detect
    let (mut prefs, pref_warnings) = plan::gid_prefs(&vars);
    let sysfs = detect::sysfs::Sysfs::new(&cli.opts.sysfs_root);
    let mut seen = Seen::default();
    // Where ibverbs are consulted, the devices are opened once for detection's far GID table
    // reads and the probe, and closed before the plan: never held while the job runs.
    let opened = verbs_skipped(&cli.opts).is_none().then(verbs::Opened::new);
    let tables: &dyn detect::gid_source::TableSource = match &opened {
        Some(o) => o,
        None => &detect::gid_source::SysfsOnly,
    };
    let (mut detection, family) = detect_for_family(&cli.opts, &vars, &sysfs, (&mut prefs, tables), &mut seen);
    let verbs = verbs_for(&cli.opts);
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

    // Plan
    let choices = plan::Choices { override_user: cli.opts.override_user, require_rdma: cli.opts.require_rdma };
    let mut plan = plan::plan(detection, &vars, &prefs, choices);
    plan.warnings.extend(pref_warnings);
    let depth = if matches!(cli.sub, Some(Sub::Doctor { .. })) {
        detect::userspace::Depth::Full
    } else {
        detect::userspace::Depth::Quick
    };
    let ready = ready_for(&cli.opts, &vars, &sysfs, &plan, depth, (prefs, family), &mut seen);
    plan::ready(&mut plan, ready, &vars, choices);

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
            let out = outputs(files);
            if out.is_empty() {
                doctor::main(&inputs, json)
            } else {
                doctor::main_then(&inputs, json, |report| health::write_for_doctor(&inputs, report, &out))
            }
        }
        Some(Sub::Ping(ref p)) => {
            let inputs = pairtest::here::Inputs {
                plan: &plan,
                vars: &vars,
                proc_root: &cli.opts.proc_root,
                verbs: verbs.as_ref(),
            };
            ping::main(&inputs, &ping_options(p))
        }
        None => {
            let ping_inputs = pairtest::here::Inputs {
                plan: &plan,
                vars: &vars,
                proc_root: &cli.opts.proc_root,
                verbs: verbs.as_ref(),
            };
            run(&cli, &plan, &memlock, &env_list, early_block, &ping_inputs)
        }
        Some(Sub::Install { .. } | Sub::Watch(_) | Sub::Status { .. }) => {
            unreachable!("install, watch and status return before detection")
        }
    }
}

/// What the start reads once for both the rails' family and the bootstrap: this namespace's
/// addresses (where detection did not already read them) and each device's net devices.
#[derive(Default)]
struct Seen {
    addrs: Option<Vec<detect::netif::OwnAddr>>,
    netdevs: std::collections::BTreeMap<String, Vec<String>>,
}

impl Seen {
    fn addrs(&mut self, detection: &detect::Detection) -> &[detect::netif::OwnAddr] {
        self.addrs.get_or_insert_with(|| {
            if detection.addresses.is_empty() {
                detect::netif::read().unwrap_or_default()
            } else {
                detection.addresses.clone()
            }
        })
    }

    fn netdevs(&mut self, sysfs: &detect::sysfs::Sysfs, device: &detect::Device) -> &[String] {
        self.netdevs.entry(device.name.clone()).or_insert_with(|| detect::bootstrap::rails(sysfs, device))
    }
}

/// Detection under NCCL's GID preferences. Where the user set no NCCL_IB_ADDR_FAMILY, the pod's
/// rails decide it: rails with only IPv6 addresses are read again with AF_INET6 (a second pass
/// only then), so that their RoCE v2 IPv6 entries are found instead of none.
fn detect_for_family(
    opts: &cli::Opts,
    vars: &detect::Vars,
    sysfs: &detect::sysfs::Sysfs,
    (prefs, tables): (&mut nccl::gid::GidPrefs, &dyn detect::gid_source::TableSource),
    seen: &mut Seen,
) -> (detect::Detection, nccl::gid::RailFamily) {
    use nccl::gid::{Family, RailFamily};
    let detect_with = |p: &nccl::gid::GidPrefs| {
        detect::detect(&detect::Inputs {
            vars,
            sysfs,
            annotations: &opts.annotations,
            prefs: p,
            addrs: &detect::netif::read,
            kinds: &detect::links::read_or_log,
            tables,
        })
    };
    let detection = detect_with(prefs);
    if vars.contains_key(std::ffi::OsStr::new(nccl::env::IB_ADDR_FAMILY)) || detection.devices.is_empty() {
        return (detection, RailFamily::Unknown);
    }
    let addrs = seen.addrs(&detection).to_vec();
    let mut rails: Vec<(String, Vec<std::net::IpAddr>)> = Vec::new();
    for d in &detection.devices {
        if !d.ports.iter().any(|p| p.link_layer.as_deref() == Some("Ethernet")) {
            continue;
        }
        let mut names = seen.netdevs(sysfs, d).to_vec();
        names.extend(d.ports.iter().filter_map(|p| p.gid.as_ref().and_then(|g| g.ndev.clone())));
        names.sort();
        names.dedup();
        for n in names {
            let a = addrs.iter().filter(|a| a.ifname == n).map(|a| a.addr).collect();
            rails.push((n, a));
        }
    }
    let family = nccl::gid::rail_family(&rails);
    if family == RailFamily::Inet6 {
        prefs.family = Family::Inet6;
        return (detect_with(prefs), family);
    }
    (detection, family)
}

/// What NCCL in this image and namespace meets beyond the ports: the userspace it loads and the
/// interface its bootstrap should use (rails excluded).
fn ready_for(
    opts: &cli::Opts,
    vars: &detect::Vars,
    sysfs: &detect::sysfs::Sysfs,
    plan: &plan::Plan,
    depth: detect::userspace::Depth,
    (prefs, family): (nccl::gid::GidPrefs, nccl::gid::RailFamily),
    seen: &mut Seen,
) -> plan::Ready {
    let used: Vec<&str> = plan.decisions.iter().filter(|d| d.used).map(|d| d.device.as_str()).collect();
    let userspace = detect::userspace::check(
        &opts.image_root,
        vars,
        &detect::userspace::drivers(sysfs, used.iter().copied()),
        depth,
    );
    let used_devices: Vec<&detect::Device> =
        plan.detection.devices.iter().filter(|d| used.contains(&d.name.as_str())).collect();
    let mut rails: Vec<String> = used_devices.iter().flat_map(|d| seen.netdevs(sysfs, d).to_vec()).collect();
    for p in plan.detection.devices.iter().flat_map(|d| &d.ports) {
        rails.extend(p.gid.as_ref().and_then(|g| g.ndev.clone()));
        rails.extend(p.pkey.as_ref().map(|k| k.netdev.clone()));
    }
    let addrs = seen.addrs(&plan.detection).to_vec();
    // The pod's other interfaces that sit on a used device's function are rails too (only those
    // with an address beyond link-local could carry the bootstrap at all).
    let functions: Vec<&str> = used_devices.iter().filter_map(|d| detect::devices::function(&d.attachment)).collect();
    let mut others: Vec<&str> = addrs
        .iter()
        .filter(|a| !detect::bootstrap::is_link_local(&a.addr))
        .map(|a| a.ifname.as_str())
        .filter(|n| !rails.iter().any(|r| r == n))
        .collect();
    others.sort_unstable();
    others.dedup();
    rails.extend(detect::bootstrap::on_functions(sysfs, others, &functions));
    let routes = detect::route::Table::read(&opts.proc_root);
    let lookup = |n: &str| detect::bootstrap::resolve(n, detect::bootstrap::RESOLVE_WAIT);
    let bootstrap = detect::bootstrap::choose(vars, opts.gate_coordinator.as_deref(), &routes, &addrs, &rails, &lookup);
    plan::Ready { userspace, bootstrap, extra: reason_facts(vars, sysfs, plan), prefs, family }
}

/// What sysfs says beyond the ports' facts, read only where a reason needs it: the node type of
/// a device with unused ports (iWARP), and the entry a kept NCCL_IB_GID_INDEX points at.
fn reason_facts(vars: &detect::Vars, sysfs: &detect::sysfs::Sysfs, plan: &plan::Plan) -> plan::Extra {
    let mut extra = plan::Extra::default();
    for d in &plan.detection.devices {
        if plan.decisions.iter().any(|x| x.device == d.name && !x.used)
            && sysfs.attr(&format!("class/infiniband/{}/node_type", d.name)).is_ok_and(|t| t.starts_with("4:"))
        {
            extra.iwarp.push(d.name.clone());
        }
    }
    let user = vars.get(std::ffi::OsStr::new(nccl::env::IB_GID_INDEX)).map(|v| v.to_string_lossy().into_owned());
    if plan::index_is_kept(plan, user.as_deref()) {
        let value = user.unwrap_or_default();
        let index = value.trim().to_string();
        let mut entries = Vec::new();
        for d in &plan.detection.devices {
            for p in d.ports.iter().filter(|p| p.link_layer.as_deref() == Some("Ethernet")) {
                if !plan.is_used(&d.name, p.port) {
                    continue;
                }
                let base = format!("class/infiniband/{}/ports/{}", d.name, p.port);
                let ok = index.parse::<u32>().is_ok();
                let g = ok.then(|| sysfs.attr(&format!("{base}/gids/{index}")).ok()).flatten();
                let t = ok.then(|| sysfs.attr(&format!("{base}/gid_attrs/types/{index}")).ok()).flatten();
                entries.push((format!("{}:{}", d.name, p.port), g, t));
            }
        }
        extra.kept_index = Some((value, entries));
    }
    extra
}

fn outputs(f: &HealthFiles) -> health::Outputs {
    health::Outputs { features: f.features.clone(), metrics: f.metrics.clone() }
}

fn ping_options(p: &PingArgs) -> ping::Options {
    let mode = match (&p.target, &p.listen) {
        (Some(t), _) => ping::Mode::Connect(t.clone()),
        (None, Some(l)) => ping::Mode::Listen { addr: l.clone(), keep: p.keep },
        (None, None) => {
            ping::Mode::Ring { template: p.peer_template.clone(), index: p.index, size: p.size, port: p.port }
        }
    };
    ping::Options { mode, json: p.json, test: test_settings(p), wait_ms: p.wait_ms, allow: p.allow.clone() }
}

/// The pair test's settings from ping's knobs (`nccl-wrap ping`'s flags, or the gate's
/// `NCCL_WRAP_PING_*`): the one place they become the test's.
fn test_settings(p: &PingArgs) -> pairtest::Settings {
    pairtest::Settings {
        all_pairs: p.all_pairs,
        bytes: p.bytes,
        iters: p.iters,
        duration_ms: p.duration_ms,
        timeout: std::time::Duration::from_millis(p.timeout_ms),
        gate: None,
    }
}

/// The real ibverbs, or a stand-in that says why they are not consulted.
fn verbs_for(opts: &cli::Opts) -> Box<dyn verbs::Verbs> {
    match verbs_skipped(opts) {
        Some(reason) => Box::new(verbs::NoVerbs { reason: reason.to_string() }),
        None => Box::new(verbs::IbVerbs::new()),
    }
}

/// Why ibverbs are not consulted, if they are not.
fn verbs_skipped(opts: &cli::Opts) -> Option<&'static str> {
    if opts.skip_verbs {
        Some("--skip-verbs (NCCL_WRAP_SKIP_VERBS) is set")
    } else if opts.sysfs_root != Path::new("/sys") {
        // libibverbs reads the kernel's /sys: its answers would not be about this tree's devices.
        Some("the sysfs root is not /sys, and libibverbs reads the kernel's")
    } else {
        None
    }
}

/// The gate's options: its own, and ping's test knobs from `NCCL_WRAP_PING_*`.
fn gate_options(o: &cli::Opts, plan: &plan::Plan) -> gate::Options {
    let p = &o.gate_ping;
    gate::Options {
        warn: o.gate == cli::Gate::Warn,
        given: gate::who::Given {
            coordinator: o.gate_coordinator.clone(),
            rank: o.gate_rank,
            size: o.gate_size,
            port: o.gate_port,
            id: o.gate_id.clone(),
            bootstrap: bootstrap_of(plan),
        },
        wait_ms: o.gate_wait_ms,
        test: test_settings(p),
        json: p.json,
        termination_log: termination_log(o),
        secret: gate_secret(o),
        slow: gate::verdict::SlowRule { pct: o.gate_slow_pct, refuse: o.gate_refuse_slow },
    }
}

/// The interface NCCL's bootstrap will use and its family towards the coordinator, for rank 0 to
/// compare: only where it is the plan's own pick (a user's NCCL_SOCKET_IFNAME that names another,
/// or a list, is the user's to answer for, and its family is not known here), and only a name the
/// wire carries (a join it would refuse must never cost the pod its place in the gate).
fn bootstrap_of(plan: &plan::Plan) -> Option<gate::wire::Bootstrap> {
    let ours = plan.bootstrap.as_ref()?;
    let ifname = ours.ifname.clone()?;
    let kept = plan.vars.iter().find(|v| v.name == nccl::env::SOCKET_IFNAME && v.action == plan::Action::Kept);
    if kept.is_some_and(|v| v.previous.as_deref().map(|p| p.trim_start_matches('=')) != Some(ifname.as_str())) {
        return None;
    }
    let plain = ifname.len() <= 64 && ifname.bytes().all(|b| b.is_ascii_alphanumeric() || b"_.-@".contains(&b));
    plain.then(|| gate::wire::Bootstrap { ifname, family: ours.family.map(str::to_owned) })
}

/// The job's secret from NCCL_WRAP_GATE_SECRET or the file NCCL_WRAP_GATE_SECRET_FILE names
/// (read with a bound, never blocking), none, or why it cannot be had.
fn gate_secret(o: &cli::Opts) -> Result<Option<gate::seal::Secret>, String> {
    use gate::seal::{Secret, MAX_SECRET};
    match (&o.gate_secret, &o.gate_secret_file) {
        (None, None) => Ok(None),
        (Some(_), Some(_)) => Err("both NCCL_WRAP_GATE_SECRET and NCCL_WRAP_GATE_SECRET_FILE are set: set one".into()),
        (Some(v), None) => Secret::new(v.as_bytes()).map(Some).map_err(|e| format!("NCCL_WRAP_GATE_SECRET: {e}")),
        (None, Some(path)) => {
            let file = |e: String| format!("NCCL_WRAP_GATE_SECRET_FILE={}: {e}", path.display());
            let bytes = detect::file::read(path, MAX_SECRET + 1).map_err(|e| file(format!("cannot read it: {e}")))?;
            Secret::new(&bytes).map(Some).map_err(|e| file(e.to_string()))
        }
    }
}

/// Where a termination message goes: as asked, or Kubernetes' /dev/termination-log, which exists
/// in every container it starts unless the pod says otherwise.
fn termination_log(o: &cli::Opts) -> Option<std::path::PathBuf> {
    let default_log = o.dev_root.join("termination-log");
    o.termination_log.clone().or_else(|| default_log.exists().then_some(default_log))
}

/// Apply the environment and run the command.
fn run(
    cli: &Cli,
    plan: &plan::Plan,
    memlock: &memlock::Memlock,
    env_list: &[(OsString, OsString)],
    blocked: Option<nw_pid1::sys::Blocked>,
    ping_inputs: &pairtest::here::Inputs,
) -> u8 {
    eprint!("{}", report::summary(plan, memlock, cli.opts.quiet));
    if cli.opts.require_rdma && !plan.rdma {
        eprintln!("{PREFIX} refusing to start {:?}: --require-rdma (NCCL_WRAP_REQUIRE_RDMA) is set and no usable RDMA port was found; see the warnings above, or run `nccl-wrap env --json`", cli.command[0]);
        return EXIT_REFUSED;
    }
    if let Some(why) = plan.userspace_refusal().filter(|_| cli.opts.require_rdma) {
        eprintln!("{PREFIX} refusing to start {:?}: --require-rdma (NCCL_WRAP_REQUIRE_RDMA) is set and NCCL would run over TCP sockets: {why}", cli.command[0]);
        return EXIT_REFUSED;
    }
    if cli.opts.require_memlock && !memlock.sufficient() {
        eprintln!(
            "{PREFIX} refusing to start {:?}: --require-memlock (NCCL_WRAP_REQUIRE_MEMLOCK) is set and {}",
            cli.command[0],
            memlock.describe()
        );
        return EXIT_REFUSED;
    }
    if cli.opts.gate != cli::Gate::Off {
        // Before exec or the child: the gate's listener, connections and RDMA resources are all
        // closed when it returns.
        let fabric = pairtest::rdma::Rdma::new(
            pairtest::here::read(ping_inputs),
            pairtest::here::hostname(ping_inputs.proc_root, ping_inputs.vars),
        );
        match gate::run(ping_inputs.vars, &fabric, &gate_options(&cli.opts, plan)).outcome {
            gate::Outcome::Start => {}
            gate::Outcome::Refuse => {
                eprintln!("{PREFIX} refusing to start {:?}: --gate (NCCL_WRAP_GATE) is set and the job's fabric check failed (see above; docs/gate.md)", cli.command[0]);
                return EXIT_REFUSED;
            }
            // As the command would have ended had it run: 128 + the signal.
            gate::Outcome::Interrupted(sig) => return u8::try_from(128 + sig).unwrap_or(EXIT_REFUSED),
        }
    }
    let env = nccl::env::child_env(env_list, &plan.exports());
    if supervise::wanted(cli.opts.init) {
        let mut opts = supervise::Options::from(&cli.opts);
        opts.watch.ports = watched_ports(plan);
        opts.hang.termination_log = termination_log(&cli.opts);
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

fn exec_or_report(argv: &[OsString], env: &[(OsString, OsString)]) -> u8 {
    let err = match exec::prepare(argv, env) {
        Ok(prepared) => exec::exec(&prepared),
        Err(e) => e,
    };
    eprintln!("{PREFIX} {err}");
    err.exit_code()
}

/// Names each option or variable that could not be used; `Some(125)` when one belongs to an
/// interlock the user asked for and a command was to run (docs: README, "Misconfiguration").
fn judge(cli: &Cli) -> Option<u8> {
    let verdict = cli::verdict(cli);
    for line in &verdict.ignored {
        eprintln!("{PREFIX} warning: {line}");
    }
    let refusal = verdict.refusal?;
    match cli.command.first() {
        Some(cmd) if cli.sub.is_none() => {
            eprintln!("{PREFIX} refusing to start {cmd:?}: {refusal}");
            Some(EXIT_REFUSED)
        }
        _ => {
            eprintln!("{PREFIX} warning: a run with these settings would refuse to start: {refusal}");
            None
        }
    }
}

/// Bad options never cost the job: when a command follows `--`, it runs untouched.
fn bad_usage(e: &cli::CliError, raw: &[OsString], env: &[(OsString, OsString)]) -> u8 {
    if e.is_answer() {
        return print_or_fail(&format!("{e}\n"));
    }
    eprintln!("{PREFIX} {e}");
    if let Some(near) = cli::validate::suggest(e) {
        eprintln!("{PREFIX} did you mean {near}?");
    }
    match cli::command_after_dashes(raw) {
        Some(cmd) => {
            let vars = env.iter().map(|(k, v)| (k.as_os_str(), v.as_os_str()));
            if let Some(asked) = cli::validate::interlock_asked(raw, vars) {
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
            exec_or_report(cmd, &nccl::env::child_env(env, &[]))
        }
        None => {
            eprintln!("{PREFIX} usage: nccl-wrap [OPTIONS] -- COMMAND [ARGS]... (see --help)");
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
