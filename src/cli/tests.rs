//! Tests of the command line: options, variables, subcommands and their errors.

use super::*;

fn args(a: &[&str]) -> Vec<OsString> {
    std::iter::once("nccl-wrap").chain(a.iter().copied()).map(OsString::from).collect()
}

fn parse(a: &[&str]) -> Result<Cli, CliError> {
    Cli::parse(&args(a), |_| None)
}

fn parse_env(a: &[&str], env: &[(&str, &str)]) -> Result<Cli, CliError> {
    let env: Vec<(String, OsString)> = env.iter().map(|(k, v)| (k.to_string(), OsString::from(v))).collect();
    Cli::parse(&args(a), |name| env.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()))
}

fn ok(r: Result<Cli, CliError>) -> Cli {
    match r {
        Ok(c) => c,
        Err(e) => panic!("parse failed: {e}"),
    }
}

#[test]
fn command_after_double_dash() {
    let raw: Vec<OsString> = ["nccl-wrap", "--bogus", "--", "torchrun", "--", "x"].iter().map(OsString::from).collect();
    assert_eq!(command_after_dashes(&raw).map(<[OsString]>::len), Some(3));
    let raw: Vec<OsString> = ["nccl-wrap", "--"].iter().map(OsString::from).collect();
    assert!(command_after_dashes(&raw).is_none());
}

#[test]
fn defaults_and_the_command_after_dashes() {
    let c = ok(parse(&["--", "torchrun", "--nnodes=2", "--", "-q"]));
    assert_eq!(c.opts, Opts::default());
    assert_eq!(c.sub, None);
    assert_eq!(c.command, args(&["torchrun", "--nnodes=2", "--", "-q"])[1..]);
}

#[test]
fn the_first_plain_word_starts_the_command_and_keeps_its_options() {
    let c = ok(parse(&["-q", "/bin/echo", "--require-rdma", "hi"]));
    assert!(c.opts.quiet);
    assert!(!c.opts.require_rdma, "options after the command are the command's");
    assert_eq!(c.command, args(&["/bin/echo", "--require-rdma", "hi"])[1..]);
}

#[test]
fn flags_take_no_value_or_an_inline_boolean() {
    let c = ok(parse(&["--require-rdma", "--quiet=no", "--override=ON", "--init=false", "--", "x"]));
    assert!(c.opts.require_rdma);
    assert!(!c.opts.quiet);
    assert!(c.opts.override_user);
    assert_eq!(c.opts.init, Some(false));
    // A flag never takes the next word as its value.
    let c = ok(parse(&["--selftest", "true"]));
    assert!(c.opts.selftest);
    assert_eq!(c.command, args(&["true"])[1..]);
}

#[test]
fn values_inline_or_next_and_typed() {
    let c = ok(parse(&["--sysfs-root", "/x/sys", "--grace=5", "--selftest-bytes", "1048576", "--", "y"]));
    assert_eq!(c.opts.sysfs_root, PathBuf::from("/x/sys"));
    assert_eq!(c.opts.grace, 5);
    assert_eq!(c.opts.selftest_bytes, 1 << 20);
    assert!(matches!(parse(&["--grace=-1"]), Err(CliError::BadValue { .. })));
    assert_eq!(parse(&["--sysfs-root"]), Err(CliError::MissingValue("--sysfs-root".into())));
    // With a command, a bad value is a problem the verdict sorts, not a parse failure.
    let c = ok(parse(&["--require-rdma=maybe", "--grace=-1", "--", "x"]));
    assert_eq!(c.problems.len(), 2);
    assert!(!c.opts.require_rdma);
    assert_eq!(c.opts.grace, 0);
    assert!(verdict(&c).refusal.is_some_and(|r| r.contains("'--require-rdma'=\"maybe\"")));
    assert_eq!(verdict(&c).ignored.len(), 1);
}

#[test]
fn a_bad_value_is_ignored_alone_and_everything_else_applies() {
    let c = ok(parse_env(
        &["--quiet", "--", "torchrun"],
        &[("NCCL_WRAP_GRACE", "four"), ("NCCL_WRAP_OVERRIDE", "1"), ("NCCL_WRAP_WATCH_MS", "99999999999")],
    ));
    assert!(c.opts.quiet && c.opts.override_user);
    assert_eq!((c.opts.grace, c.opts.watch_ms), (0, 1000));
    let v = verdict(&c);
    assert_eq!(v.refusal, None);
    assert_eq!(v.ignored.len(), 2, "{:?}", v.ignored);
    assert!(v.ignored[0].starts_with("NCCL_WRAP_GRACE=\"four\" ignored, the default (0) applies"), "{:?}", v.ignored);
}

#[test]
fn a_bad_gate_setting_refuses_only_when_the_gate_is_asked_to_refuse() {
    let run = |env: &[(&str, &str)]| verdict(&ok(parse_env(&["--", "x"], env)));
    assert!(run(&[("NCCL_WRAP_GATE_SIZE", "four")]).refusal.is_none(), "no gate: ignored");
    let v = run(&[("NCCL_WRAP_GATE", "1"), ("NCCL_WRAP_GATE_SIZE", "four")]);
    assert!(v.refusal.is_some_and(|r| r.contains("NCCL_WRAP_GATE_SIZE")));
    assert!(
        run(&[("NCCL_WRAP_GATE", "warn"), ("NCCL_WRAP_GATE_SIZE", "four")]).refusal.is_none(),
        "warn starts anyway"
    );
    assert!(
        run(&[("NCCL_WRAP_GATE", "1"), ("NCCL_WRAP_PING_ITERS", "many")]).refusal.is_some(),
        "the gate's pair test"
    );
    assert!(run(&[("NCCL_WRAP_PING_ITERS", "many")]).refusal.is_none(), "ping's knob, no gate: not even read");
    assert!(run(&[("NCCL_WRAP_GATE", "maybe")]).refusal.is_some(), "a switch set unreadably counts as asked for");
    assert!(run(&[("NCCL_WRAP_REQUIRE_MEMLOCK", "yes-please")]).refusal.is_some());
    assert!(run(&[("NCCL_WRAP_REQUIRE_MEMLOCK", "no")]).refusal.is_none());
}

#[test]
fn unknown_options_before_dashes_are_named_and_their_words_skipped() {
    let c = ok(parse(&["--verbose", "3", "-q", "--", "torchrun"]));
    assert!(c.opts.quiet);
    assert_eq!(c.command, args(&["torchrun"])[1..]);
    assert_eq!(verdict(&c).ignored, vec!["--verbose is not an option of nccl-wrap, ignored".to_string()]);
    assert!(verdict(&ok(parse(&["--requre-rdma", "--", "x"]))).refusal.is_some());
    // Without `--`, where the command starts cannot be told.
    assert_eq!(parse(&["--verbose", "torchrun"]), Err(CliError::Unexpected("--verbose".into())));
    // `--` is never an option's value.
    let c = ok(parse(&["--grace", "--", "x"]));
    assert_eq!((c.command.len(), c.problems.len()), (1, 1));
}

/// Every numeric option states its range in its help as "(LO to HI)", and its setter takes
/// exactly that range: LO and HI pass, one past either end does not.
#[test]
fn every_numeric_option_states_its_range_and_keeps_to_it() {
    for spec in SPECS {
        let Kind::Value(meta) = spec.kind else { continue };
        if !["N", "MS", "BYTES", "SECONDS", "PORT", "PERCENT"].contains(&meta) || spec.long == "interval" {
            continue;
        }
        let at = spec.help.rfind(" to ").unwrap_or_else(|| panic!("--{} states no range: {}", spec.long, spec.help));
        let lo: u64 = spec.help[..at].rsplit('(').next().and_then(|t| t.trim().parse().ok()).expect("LO");
        let hi: u64 = spec.help[at + 4..].split(')').next().and_then(|t| t.trim().parse().ok()).expect("HI");
        let mut cli = match spec.only {
            Some(name) => {
                Cli { sub: Some(Sub::new(name)), opts: Opts::default(), command: Vec::new(), problems: Vec::new() }
            }
            None => Cli { sub: None, opts: Opts::default(), command: Vec::new(), problems: Vec::new() },
        };
        for good in [lo, hi] {
            assert!((spec.set)(&mut cli, &good.to_string()).is_ok(), "--{} {good}", spec.long);
        }
        for bad in [hi.saturating_add(1).to_string(), "-1".into(), "x".into(), "18446744073709551616".into()] {
            assert!((spec.set)(&mut cli, &bad).is_err(), "--{} {bad} accepted", spec.long);
        }
        if lo > 0 {
            assert!((spec.set)(&mut cli, &(lo - 1).to_string()).is_err(), "--{} {} accepted", spec.long, lo - 1);
        }
    }
}

#[test]
fn variables_fill_what_the_command_line_leaves_out() {
    let c = ok(parse_env(
        &["--quiet=false"],
        &[
            ("NCCL_WRAP_QUIET", "1"),
            ("NCCL_WRAP_REQUIRE_RDMA", "yes"),
            ("NCCL_WRAP_GRACE", "3"),
            ("NCCL_WRAP_INIT", ""),
        ],
    ));
    assert!(!c.opts.quiet, "the command line wins over the variable");
    assert!(c.opts.require_rdma);
    assert_eq!(c.opts.grace, 3);
    assert_eq!(c.opts.init, None, "an empty variable is unset");
    let c = ok(parse_env(&[], &[("NCCL_WRAP_SELFTEST_BYTES", "lots")]));
    assert!(c.problems[0].line().starts_with("NCCL_WRAP_SELFTEST_BYTES=\"lots\" ignored"), "{:?}", c.problems);
}

#[test]
fn subcommands_and_their_own_options() {
    let c = ok(parse(&["--quiet", "env", "--json", "--sysfs-root=/s"]));
    assert_eq!(c.sub, Some(Sub::Env { json: true }));
    assert!(c.opts.quiet);
    assert_eq!(c.opts.sysfs_root, PathBuf::from("/s"));
    let c = ok(parse(&["doctor", "--no-selftest", "--json"]));
    assert_eq!(c.sub, Some(Sub::Doctor { json: true, no_selftest: true, files: HealthFiles::default() }));
    // A subcommand's option is not the top level's, and a subcommand takes no command.
    assert_eq!(parse(&["--json", "env"]), Err(CliError::Unexpected("--json".into())));
    assert_eq!(parse(&["env", "--no-selftest"]), Err(CliError::Unexpected("--no-selftest".into())));
    assert_eq!(parse(&["env", "extra"]), Err(CliError::Unexpected("extra".into())));
    // Regression (found by fuzz/cli): `env -- cmd` dropped the command silently.
    assert!(matches!(parse(&["env", "--", "torchrun"]), Err(CliError::Usage(_))));
    assert!(ok(parse(&["env", "--"])).command.is_empty());
    // After `--`, a word named like a subcommand is the command.
    let c = ok(parse(&["--", "env"]));
    assert_eq!(c.sub, None);
    assert_eq!(c.command, args(&["env"])[1..]);
}

#[test]
fn ping_takes_a_target_or_listen_or_ring_and_its_variables() {
    let c = ok(parse(&["ping", "train-0.train:18515", "--json", "--iters=10"]));
    let Some(Sub::Ping(p)) = c.sub else { panic!("not ping") };
    assert_eq!(p.target.as_deref(), Some("train-0.train:18515"));
    assert!(p.json);
    assert_eq!(p.iters, 10);
    assert_eq!(p.port, 18515);
    let c = ok(parse_env(
        &["ping", "--ring"],
        &[("NCCL_WRAP_PING_SIZE", "4"), ("NCCL_WRAP_PING_PEER_TEMPLATE", "t-{index}.t")],
    ));
    let Some(Sub::Ping(p)) = c.sub else { panic!("not ping") };
    assert_eq!((p.ring, p.size, p.peer_template.as_deref()), (true, Some(4), Some("t-{index}.t")));
    let c = ok(parse_env(&["ping"], &[("NCCL_WRAP_PING_LISTEN", "0.0.0.0:18515")]));
    assert!(matches!(c.sub, Some(Sub::Ping(PingArgs { listen: Some(_), .. }))));
    assert!(matches!(parse(&["ping"]), Err(CliError::Usage(_))));
    assert!(matches!(parse(&["ping", "h:1", "--listen", "2"]), Err(CliError::Usage(_))));
    assert_eq!(parse(&["ping", "a:1", "b:2"]), Err(CliError::Unexpected("b:2".into())));
    // ping's variables are ping's alone.
    let c = ok(parse_env(&["env"], &[("NCCL_WRAP_PING_SIZE", "not a number")]));
    assert_eq!(c.sub, Some(Sub::Env { json: false }));
}

#[test]
fn doctor_and_watch_take_the_health_files_and_watch_its_timing() {
    let c = ok(parse_env(&["doctor", "--features", "/f/nccl-wrap"], &[("NCCL_WRAP_METRICS", "/m/nccl-wrap.prom")]));
    let files = HealthFiles {
        features: Some(PathBuf::from("/f/nccl-wrap")),
        metrics: Some(PathBuf::from("/m/nccl-wrap.prom")),
    };
    assert_eq!(c.sub, Some(Sub::Doctor { json: false, no_selftest: false, files: files.clone() }));
    let c = ok(parse_env(
        &["watch", "--interval=0.5", "--metrics", "/m/nccl-wrap.prom"],
        &[("NCCL_WRAP_FEATURES", "/f/nccl-wrap"), ("NCCL_WRAP_WATCH_ROUNDS", "3")],
    ));
    let want = WatchArgs {
        files,
        interval_ms: 500,
        jitter_pct: 10,
        rounds: 3,
        ring: None,
        ring_every: 10,
        ring_timeout_ms: 2000,
    };
    assert_eq!(c.sub, Some(Sub::Watch(want)));
    assert!(matches!(parse(&["watch", "--interval=0.01"]), Err(CliError::BadValue { .. })));
    assert!(matches!(parse(&["watch", "--interval=soon"]), Err(CliError::BadValue { .. })));
    assert!(matches!(parse(&["watch", "--jitter=80"]), Err(CliError::BadValue { .. })));
    assert_eq!(parse(&["env", "--features=/x"]), Err(CliError::Unexpected("--features=/x".into())));
    // The variables belong to doctor and watch alone.
    assert_eq!(ok(parse_env(&["env"], &[("NCCL_WRAP_FEATURES", "")])).sub, Some(Sub::Env { json: false }));
    assert!(matches!(parse(&["watch", "--", "x"]), Err(CliError::Usage(_))));
}

#[test]
fn the_ring_is_off_unless_named_and_takes_a_dns_name_and_an_optional_port() {
    let ring = |c: Cli| match c.sub {
        Some(Sub::Watch(w)) => (w.ring, w.ring_every),
        other => panic!("not watch: {other:?}"),
    };
    assert_eq!(ring(ok(parse(&["watch"]))), (None, 10));
    let c = ok(parse_env(&["watch", "--ring", "ring.nccl-wrap.svc"], &[("NCCL_WRAP_WATCH_RING_EVERY", "3")]));
    assert_eq!(ring(c), (Some(("ring.nccl-wrap.svc".into(), 18517)), 3));
    let c = ok(parse_env(&["watch"], &[("NCCL_WRAP_WATCH_RING", "ring:9000")]));
    assert_eq!(ring(c), (Some(("ring".into(), 9000)), 10));
    for bad in ["", "ring:0", "ring:x", "-ring", "ri ng", "ring;rm", ":9000", "[::1]:9000"] {
        let e = parse(&["watch", "--ring", bad]);
        assert!(matches!(e, Err(CliError::BadValue { .. })), "{bad:?} accepted: {e:?}");
    }
    for bad in ["0", "10001", "x"] {
        assert!(matches!(parse(&["watch", "--ring-every", bad]), Err(CliError::BadValue { .. })), "{bad}");
    }
    assert!(parse(&["ping", "--ring", "r"]).is_err(), "the ring is watch's option alone");
}

#[test]
fn supervise_is_the_name_and_init_still_works() {
    assert_eq!(ok(parse(&["--supervise", "--", "x"])).opts.init, Some(true));
    assert_eq!(ok(parse(&["--init=false", "--", "x"])).opts.init, Some(false));
    assert_eq!(ok(parse_env(&[], &[("NCCL_WRAP_INIT", "1")])).opts.init, Some(true));
    assert_eq!(ok(parse_env(&[], &[("NCCL_WRAP_SUPERVISE", "no")])).opts.init, Some(false));
    // The new variable wins over the former one; the command line over both.
    let both = [("NCCL_WRAP_SUPERVISE", "1"), ("NCCL_WRAP_INIT", "0")];
    assert_eq!(ok(parse_env(&[], &both)).opts.init, Some(true));
    assert_eq!(ok(parse_env(&["--init=false"], &both)).opts.init, Some(false));
    let c = ok(parse_env(&[], &[("NCCL_WRAP_INIT", "maybe")]));
    assert!(c.problems[0].line().starts_with("NCCL_WRAP_INIT="), "the variable as given is named: {:?}", c.problems);
    let c = ok(parse_env(&["--report", "/r.json"], &[("NCCL_WRAP_WATCH_MS", "250")]));
    assert_eq!((c.opts.report, c.opts.watch_ms), (Some(PathBuf::from("/r.json")), 250));
    assert_eq!(Opts::default().watch_ms, 1000);
}

#[test]
fn install_takes_one_directory() {
    let c = ok(parse(&["install", "/opt/nccl-wrap"]));
    assert_eq!(c.sub, Some(Sub::Install { dir: PathBuf::from("/opt/nccl-wrap") }));
    assert!(matches!(parse(&["install"]), Err(CliError::Usage(_))));
    assert_eq!(parse(&["install", "/a", "/b"]), Err(CliError::Unexpected("/b".into())));
    // After `--`, `install` is a command like any other.
    assert_eq!(ok(parse(&["--", "install", "x"])).command, args(&["install", "x"])[1..]);
}

#[test]
fn unknown_options_are_named() {
    let e = parse(&["--no-such-option", "x"]).expect_err("unknown");
    assert_eq!(
        e.to_string(),
        "unexpected argument '--no-such-option' found (to pass it to the command, put it after `--`)"
    );
    let c = ok(parse(&["--no-such-option", "--", "x"]));
    assert_eq!(verdict(&c).ignored, vec!["--no-such-option is not an option of nccl-wrap, ignored".to_string()]);
    assert!(matches!(parse(&["-z"]), Err(CliError::Unexpected(_))));
}

#[test]
fn help_lists_every_option_with_its_variable() {
    let Err(CliError::Help(text)) = parse(&["--help"]) else { panic!("no help") };
    for spec in SPECS.iter().filter(|s| s.only.is_none()) {
        assert!(text.contains(&format!("--{}", spec.long)), "{}", spec.long);
        assert!(text.contains(spec.env), "{}", spec.env);
    }
    let Err(CliError::Help(text)) = parse(&["doctor", "--help"]) else { panic!("no help") };
    assert!(text.contains("--no-selftest") && text.contains("Usage: nccl-wrap doctor"), "{text}");
    let Err(CliError::Help(text)) = parse(&["help", "env"]) else { panic!("no help") };
    assert!(text.contains("Usage: nccl-wrap env"), "{text}");
    assert!(matches!(parse(&["-V"]), Err(CliError::Version(_))));
}

#[test]
fn every_option_has_a_unique_name_where_it_applies() {
    for (i, a) in SPECS.iter().enumerate() {
        for b in &SPECS[i + 1..] {
            let overlap = a.only.is_none() || b.only.is_none() || a.only == b.only;
            assert!(!(overlap && a.long == b.long), "--{} twice", a.long);
        }
        assert!(a.env.is_empty() || a.env.starts_with("NCCL_WRAP_"), "{}", a.env);
    }
}
