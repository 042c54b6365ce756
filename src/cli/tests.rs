//! Tests of the command line: options, variables, subcommands and their errors.

use super::table::{Ty, OPTS};
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

/// What the parse ended in instead of a `Cli`.
fn err(a: &[&str]) -> ErrorKind {
    match parse(a) {
        Ok(c) => panic!("{a:?} parsed: {c:?}"),
        Err(e) => e.kind,
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
    // The table's defaults, each written once there.
    let o = &c.opts;
    assert_eq!(
        (o.sysfs_root.to_str(), o.proc_root.to_str(), o.dev_root.to_str()),
        (Some("/sys"), Some("/proc"), Some("/dev"))
    );
    assert_eq!(
        (o.selftest_bytes, o.selftest_timeout_ms, o.watch_ms, o.grace, o.stall_ms),
        (64 << 20, 2000, 1000, 0, 0)
    );
    assert_eq!((o.gate, o.gate_port, o.gate_wait_ms, o.gate_slow_pct), (Gate::Off, GATE_PORT, GATE_WAIT_MS, 70));
    assert_eq!((o.init, o.gate_rank, o.gate_secret.is_some()), (None, None, false));
    assert_eq!(o.state_file.to_str(), Some(nw_postmortem::state::DEFAULT_PATH));
    assert_eq!(
        (o.gate_ping.iters, o.gate_ping.bytes, o.gate_ping.timeout_ms, o.gate_ping.port),
        (1000, 1 << 20, 3000, 18515)
    );
    assert!(c.problems.is_empty(), "{:?}", c.problems);
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
    assert!(matches!(err(&["--grace=-1"]), ErrorKind::BadValue { .. }));
    assert_eq!(err(&["--sysfs-root"]), ErrorKind::MissingValue("--sysfs-root".into()));
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
    assert_eq!(err(&["--verbose", "torchrun"]), ErrorKind::Unexpected("--verbose".into()));
    // `--` is never an option's value.
    let c = ok(parse(&["--grace", "--", "x"]));
    assert_eq!((c.command.len(), c.problems.len()), (1, 1));
}

/// Every ranged option states its range once, in its type: both ends pass, one past either end
/// does not, and `--help` says the same range.
#[test]
fn every_ranged_option_keeps_to_its_range_and_its_help_says_it() {
    let mut ranged = 0;
    for opt in OPTS {
        let (lo, hi, zero) = match opt.ty {
            Ty::Num(_, lo, hi, _) => (lo, hi, false),
            Ty::OffOr(_, lo, hi) => (lo, hi, true),
            _ => continue,
        };
        ranged += 1;
        let mut cli = Cli::new();
        if let Some(s) = SubName::ALL.into_iter().find(|s| opt.scope & RUN == 0 && opt.scope & s.bit() != 0) {
            cli.enter(s);
        }
        for good in [lo, hi].into_iter().chain(zero.then_some(0)) {
            assert!(cli.set(opt, &good.to_string(), true).is_ok(), "--{} {good}", opt.long);
        }
        for bad in [hi.saturating_add(1).to_string(), "-1".into(), "x".into(), "18446744073709551616".into()] {
            assert!(cli.set(opt, &bad, true).is_err(), "--{} {bad} accepted", opt.long);
        }
        if lo > 0 {
            assert!(cli.set(opt, &(lo - 1).to_string(), true).is_err(), "--{} {} accepted", opt.long, lo - 1);
        }
        let range = if zero { format!("(0, or {lo} to {hi})") } else { format!("({lo} to {hi})") };
        let sub = SubName::ALL.into_iter().find(|s| opt.scope & s.bit() != 0 && opt.scope & RUN == 0);
        let help = help::help(sub, true).split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(help.contains(&range), "--{}: {range} not in its help", opt.long);
    }
    assert!(ranged > 20, "{ranged}");
    // Seconds with a fraction: watch's interval, in milliseconds.
    let mut cli = Cli::new();
    cli.enter(SubName::Watch);
    let interval = OPTS.iter().find(|o| o.long == "interval").expect("--interval");
    for (good, ms) in [("0.1", 100), ("86400", 86_400_000), ("1.5", 1500)] {
        assert!(cli.set(interval, good, true).is_ok(), "{good}");
        assert!(matches!(&cli.sub, Some(Sub::Watch(w)) if w.interval_ms == ms), "{good}");
    }
    for bad in ["0.09", "86400.1", "soon", "-1"] {
        assert!(cli.set(interval, bad, true).is_err(), "{bad}");
    }
}

/// Every default is of its field's type and range: the table's own mistakes are found here.
#[test]
fn every_default_fits_its_field() {
    for opt in OPTS {
        let mut cli = Cli::new();
        if let Some(s) = SubName::ALL.into_iter().find(|s| opt.scope & s.bit() != 0 && opt.scope & RUN == 0) {
            cli.enter(s);
        }
        if let Some(v) = opt.ty.default() {
            assert!((opt.set)(&mut cli, v).is_ok(), "--{}'s default", opt.long);
        }
        let text = opt.ty.default_text();
        if let (Some(text), true) = (&text, opt.ty.takes_value()) {
            assert!(cli.set(opt, text, true).is_ok(), "--{}'s default as help says it: {text}", opt.long);
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
    // The plan's options come before or after the subcommand.
    let c = ok(parse(&["--override", "env", "--json", "--sysfs-root=/s"]));
    assert_eq!(c.sub, Some(Sub::Env { json: true }));
    assert!(c.opts.override_user);
    assert_eq!(c.opts.sysfs_root, PathBuf::from("/s"));
    let c = ok(parse(&["doctor", "--no-selftest", "--json"]));
    assert_eq!(c.sub, Some(Sub::Doctor { json: true, no_selftest: true, files: HealthFiles::default() }));
    // A subcommand's option is not the top level's, and a subcommand takes no command.
    assert_eq!(err(&["--json", "env"]), ErrorKind::Unexpected("--json".into()));
    let not_here = |option: &str, sub| ErrorKind::NotHere { option: option.into(), sub };
    assert_eq!(err(&["env", "--no-selftest"]), not_here("--no-selftest", "env"));
    assert_eq!(err(&["env", "extra"]), ErrorKind::Unexpected("extra".into()));
    // A subcommand takes only its own options, before it too; `-q` is env's as well as the run's.
    assert!(ok(parse(&["--quiet", "env"])).opts.quiet, "-q belongs to env too: its summary is warnings only");
    assert_eq!(err(&["install", "/d", "--gate-secret", "s"]), not_here("--gate-secret", "install"));
    assert_eq!(err(&["status", "--grace=3"]), not_here("--grace", "status"));
    assert_eq!(parse(&["status", "--json"]).map(|c| c.sub), Ok(Some(Sub::Status { json: true })));
    // ...and a run's variables that are not its own are not read at all.
    assert!(ok(parse_env(&["status"], &[("NCCL_WRAP_GRACE", "four")])).problems.is_empty());
    // Regression (found by fuzz/cli): `env -- cmd` dropped the command silently.
    assert!(matches!(err(&["env", "--", "torchrun"]), ErrorKind::Usage(_)));
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
    assert!(matches!(err(&["ping"]), ErrorKind::Usage(_)));
    assert!(matches!(err(&["ping", "h:1", "--listen", "2"]), ErrorKind::Usage(_)));
    assert_eq!(err(&["ping", "a:1", "b:2"]), ErrorKind::Unexpected("b:2".into()));
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
    assert!(matches!(err(&["watch", "--interval=0.01"]), ErrorKind::BadValue { .. }));
    assert!(matches!(err(&["watch", "--interval=soon"]), ErrorKind::BadValue { .. }));
    assert!(matches!(err(&["watch", "--jitter=80"]), ErrorKind::BadValue { .. }));
    assert_eq!(err(&["env", "--features=/x"]), ErrorKind::NotHere { option: "--features".into(), sub: "env" });
    // The variables belong to doctor and watch alone.
    assert_eq!(ok(parse_env(&["env"], &[("NCCL_WRAP_FEATURES", "")])).sub, Some(Sub::Env { json: false }));
    assert!(matches!(err(&["watch", "--", "x"]), ErrorKind::Usage(_)));
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
        assert!(matches!(e, Err(CliError { kind: ErrorKind::BadValue { .. }, .. })), "{bad:?} accepted: {e:?}");
    }
    for bad in ["0", "10001", "x"] {
        assert!(matches!(err(&["watch", "--ring-every", bad]), ErrorKind::BadValue { .. }), "{bad}");
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
    assert_eq!(Cli::new().opts.watch_ms, 1000);
}

#[test]
fn install_takes_one_directory() {
    let c = ok(parse(&["install", "/opt/nccl-wrap"]));
    assert_eq!(c.sub, Some(Sub::Install { dir: PathBuf::from("/opt/nccl-wrap") }));
    assert!(matches!(err(&["install"]), ErrorKind::Usage(_)));
    assert_eq!(err(&["install", "/a", "/b"]), ErrorKind::Unexpected("/b".into()));
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
    assert!(matches!(err(&["-z"]), ErrorKind::Unexpected(_)));
}

#[test]
fn help_lists_every_option_with_its_variable() {
    let ErrorKind::Help(text) = err(&["--help"]) else { panic!("no help") };
    for opt in OPTS.iter().filter(|o| o.scope & RUN != 0) {
        assert!(text.contains(&format!("--{}", opt.long)), "{}", opt.long);
        assert!(text.contains(opt.var), "{}", opt.var);
    }
    let ErrorKind::Help(text) = err(&["doctor", "--help"]) else { panic!("no help") };
    assert!(text.contains("--no-selftest") && text.contains("Usage: nccl-wrap doctor"), "{text}");
    let ErrorKind::Help(text) = err(&["help", "env"]) else { panic!("no help") };
    assert!(text.contains("Usage: nccl-wrap env"), "{text}");
    assert!(matches!(err(&["-V"]), ErrorKind::Version(_)));
}

#[test]
fn every_option_has_a_unique_name_where_it_applies() {
    for (i, a) in OPTS.iter().enumerate() {
        for b in &OPTS[i + 1..] {
            assert!(!(a.scope & b.scope != 0 && a.long == b.long), "--{} twice", a.long);
            assert!(a.var.is_empty() || a.var != b.var || a.scope & b.scope == 0, "{} twice", a.var);
        }
        assert!(a.var.is_empty() || a.var.starts_with("NCCL_WRAP_"), "{}", a.var);
        assert!(a.scope != 0, "--{} belongs to no command", a.long);
    }
}

/// The names a help text lists as options (not those its prose mentions).
fn listed(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            let short = l.get(2..).filter(|r| r.starts_with('-') && r.get(2..6) == Some(", --"));
            l.strip_prefix("      --").or_else(|| short.and_then(|r| r.get(6..)))
        })
        .map(|l| l.split(['[', ' ']).next().unwrap_or_default().to_owned())
        .collect()
}

/// Issue 39: `-h` is a line per option, `--help` the whole; each command's help lists its own
/// options and words (install's none but help and version), names DIR and HOST:PORT in its usage,
/// and keeps within 100 columns.
#[test]
fn each_command_helps_with_its_own_options_within_100_columns() {
    for sub in std::iter::once(None).chain(SubName::ALL.map(Some)) {
        let cmd = table::bit(sub);
        let mut want: Vec<String> = OPTS.iter().filter(|o| o.scope & cmd != 0).map(|o| o.long.to_owned()).collect();
        want.extend(["help".to_owned(), "version".to_owned()]);
        want.sort();
        let (short, long) = (help::help(sub, false), help::help(sub, true));
        for text in [&short, &long] {
            let too_wide: Vec<&str> = text.lines().filter(|l| l.chars().count() > 100).collect();
            assert!(too_wide.is_empty(), "{sub:?}: {too_wide:#?}");
            let mut got = listed(text);
            got.sort();
            assert_eq!(got, want, "{sub:?}");
            assert!(text.contains(&format!("Usage: {}", usage(sub))), "{sub:?}");
        }
        assert!(short.lines().count() < long.lines().count(), "{sub:?}: -h is not shorter");
        assert!(!short.contains("[env: ") && long.contains("[env: ") == (sub != Some(SubName::Install)), "{sub:?}");
    }
    let ErrorKind::Help(install) = err(&["install", "-h"]) else { panic!("no help") };
    assert!(install.contains("Usage: nccl-wrap install DIR") && install.contains("\n  DIR "), "{install}");
    assert!(!install.contains("--gate-secret") && !install.contains("--sysfs-root"), "{install}");
    let ErrorKind::Help(ping) = err(&["ping", "--help"]) else { panic!("no help") };
    assert!(ping.contains("nccl-wrap ping [OPTIONS] <HOST:PORT |") && ping.contains("  [HOST:PORT]\n"), "{ping}");
    assert!(!ping.contains("--grace") && !ping.contains("--gate-secret"), "{ping}");
    assert_ne!(err(&["-h"]), err(&["--help"]));
}

/// Issue 39: a first word a letter off a subcommand, not after `--`, is a typo with its
/// suggestion (exit 2), never a command to exec; after `--`, or as a path, it is the command.
#[test]
fn a_first_word_a_letter_off_a_subcommand_is_a_typo_not_a_command() {
    for (word, near) in
        [("doctr", "doctor"), ("stauts", "status"), ("evn", "env"), ("pnig", "ping"), ("wacth", "watch")]
    {
        let e = parse(&["-q", word, "--json"]).expect_err(word);
        assert_eq!(e.kind, ErrorKind::NotASubcommand { word: word.into(), near }, "{word}");
        assert_eq!(suggest(&e).as_deref(), Some(near));
        assert_eq!(ok(parse(&["--", word])).command, args(&[word])[1..]);
        assert_eq!(ok(parse(&[&format!("./{word}")])).command.len(), 1);
    }
    for command in ["torchrun", "python3", "sh", "bash", "true", "deepspeed", "stat", "envs2"] {
        assert_eq!(ok(parse(&[command, "-x"])).command.len(), 2, "{command}");
    }
}

/// The value-taking options of a run.
fn value_options() -> Vec<String> {
    OPTS.iter().filter(|o| o.scope & RUN != 0 && o.ty.takes_value()).map(|o| format!("--{}", o.long)).collect()
}

/// Issue 40.3: an option given no value never takes the option after it as its value: its value
/// is missing (named; without a command, the usage error), and an interlock after it holds, so the
/// run refuses or runs with it, never without it.
#[test]
fn a_missing_value_never_swallows_the_interlock_after_it() {
    type On = fn(&Opts) -> bool;
    let after: [(&str, On); 5] = [
        ("--require-rdma", |o| o.require_rdma),
        ("--require-memlock", |o| o.require_memlock),
        ("--gate", |o| o.gate == Gate::Refuse),
        ("--gate=warn", |o| o.gate == Gate::Warn),
        ("-q", |o| o.quiet),
    ];
    let options = value_options();
    assert!(options.len() > 20, "{options:?}");
    for missing in &options {
        for (flag, on) in after {
            let c = ok(parse(&[missing, flag, "--", "x"]));
            assert!(on(&c.opts), "{missing} {flag}: the flag was taken as a value");
            assert!(
                c.problems.iter().any(|p| p.fault == Fault::MissingValue && &p.source == missing),
                "{missing} {flag}: {:?}",
                c.problems
            );
            // A gate setting with the gate on refuses; anything else is named and ignored, and the
            // interlock stays on for the run to honour.
            let refuses = flag == "--gate" && missing.starts_with("--gate-");
            assert_eq!(verdict(&c).refusal.is_some(), refuses, "{missing} {flag}");
            // Without a command it is the usage error it names (exit 2).
            assert_eq!(err(&[missing, flag]), ErrorKind::MissingValue(missing.clone()), "{missing} {flag}");
        }
    }
    // The reproductions: each keeps its interlock.
    assert!(ok(parse(&["--grace", "--require-rdma", "--", "cmd"])).opts.require_rdma);
    assert!(ok(parse(&["--gate-id", "--require-rdma", "--", "cmd"])).opts.require_rdma);
    assert_eq!(ok(parse(&["--report", "--gate", "--", "cmd"])).opts.gate, Gate::Refuse);
    // A subcommand's option too; a value that only looks like an option goes inline.
    assert_eq!(
        parse(&["ping", "--listen", "--json"]).map_err(|e| (e.sub, e.kind)),
        Err((Some(SubName::Ping), ErrorKind::MissingValue("--listen".into())))
    );
    assert_eq!(ok(parse(&["--gate-id=--odd", "--", "x"])).opts.gate_id.as_deref(), Some("--odd"));
    assert_eq!(err(&["--gate-id", "-q"]), ErrorKind::MissingValue("--gate-id".into()));
    // A negative number is a value (out of range), not an option.
    assert!(matches!(err(&["--grace", "-1"]), ErrorKind::BadValue { .. }));
}

/// Issue 40.4: an empty or whitespace secret, from a flag, a variable or a file, with the gate on,
/// refuses (the file read by `validate`, before anything else happens); the gate off, a flag or
/// variable is named and ignored, and the file not even read; with `--gate=warn` the gate is told
/// why, never run as though no secret was set.
#[test]
fn an_empty_secret_from_any_source_refuses_with_the_gate() {
    let dir = std::env::temp_dir().join(format!("nccl-wrap-cli-secret-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch");
    let file = |name: &str, body: &str| {
        std::fs::write(dir.join(name), body).expect("write");
        dir.join(name).to_string_lossy().into_owned()
    };
    let (empty, blank, good) = (file("empty", ""), file("blank", " \n\t\n"), file("good", "s3cret\n"));
    type Case<'a> = (&'a [&'a str], Vec<(&'a str, &'a str)>);
    let cases: Vec<Case> = vec![
        (&["--", "x"], vec![("NCCL_WRAP_GATE_SECRET", "")]),
        (&["--", "x"], vec![("NCCL_WRAP_GATE_SECRET", " \t\n")]),
        (&["--", "x"], vec![("NCCL_WRAP_GATE_SECRET_FILE", "")]),
        (&["--gate-secret=", "--", "x"], vec![]),
        (&["--gate-secret", " ", "--", "x"], vec![]),
        (&["--gate-secret-file=", "--", "x"], vec![]),
        (&["--", "x"], vec![("NCCL_WRAP_GATE_SECRET_FILE", &empty)]),
        (&["--", "x"], vec![("NCCL_WRAP_GATE_SECRET_FILE", &blank)]),
        (&["--", "x"], vec![("NCCL_WRAP_GATE_SECRET_FILE", "/nonexistent/secret")]),
    ];
    let run = |a: &[&str], env: &[(&str, &str)], gate: &str| {
        let env: Vec<(&str, &str)> = env.iter().copied().chain([("NCCL_WRAP_GATE", gate)]).collect();
        validate(ok(parse_env(a, &env)), &Default::default())
    };
    for (a, env) in &cases {
        let refusal = run(a, env, "1").1.refusal.unwrap_or_default();
        assert!(refusal.contains("SECRET") || refusal.contains("secret"), "{a:?} {env:?}: {refusal:?}");
        let (config, v) = run(a, env, "warn");
        assert!(v.refusal.is_none() && config.gate.is_some_and(|g| g.secret.is_err()), "{a:?} {env:?}");
        let (config, v) = run(a, env, "0");
        assert!(config.gate.is_none() && v.refusal.is_none(), "{a:?} {env:?}");
        assert_eq!(v.ignored.len(), usize::from(!env.iter().any(|(k, v)| k.ends_with("FILE") && !v.is_empty())));
    }
    let (config, v) = run(&["--", "x"], &[("NCCL_WRAP_GATE_SECRET_FILE", &good)], "1");
    assert_eq!(config.gate.map(|g| g.secret), Some(Ok(Some(Secret::new(b"s3cret").expect("secret")))));
    assert_eq!(v.refusal, None);
    let _ = std::fs::remove_dir_all(dir);
}
