//! Options and `NCCL_WRAP_*` variables through `cli::Cli::parse`, as `main` parses them.
//!
//! Input lines: a line `NCCL_WRAP_<NAME>=<value>` sets that variable; every other line is one
//! argument (bytes, not necessarily UTF-8), after `nccl-wrap` as argv[0]. The environment is
//! handed to the parser as a lookup, as main does, so nothing global is touched. Then the
//! verdict (`cli::verdict`, and `unknown_variables` over the names set), as `cli::validate` makes
//! it (without its reads of the secret's file): every problem is one bounded, printable line, and
//! an interlock's problem always refuses.

#![no_main]

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};

use libfuzzer_sys::fuzz_target;
use nccl_wrap::cli::{command_after_dashes, unknown_variables, verdict, Belongs, Cli, ErrorKind, Gate, Origin, Sub};

fuzz_target!(|data: &[u8]| {
    let mut argv = vec![OsString::from("nccl-wrap")];
    let mut env: BTreeMap<OsString, OsString> = BTreeMap::new();
    for line in data.split(|&b| b == b'\n').take(64) {
        if line.contains(&0) {
            // Neither an argument nor an environment entry can hold a NUL.
            continue;
        }
        match line.iter().position(|&b| b == b'=') {
            Some(eq) if line.starts_with(b"NCCL_WRAP_") => {
                env.insert(OsStr::from_bytes(&line[..eq]).to_owned(), OsStr::from_bytes(&line[eq + 1..]).to_owned());
            }
            _ => argv.push(OsString::from_vec(line.to_vec())),
        }
    }

    match Cli::parse(&argv, |name| env.get(OsStr::new(name)).cloned()) {
        Ok(mut cli) => {
            // The command is handed over byte for byte: it is the tail of argv.
            assert!(argv[1..].ends_with(&cli.command), "{:?} from {argv:?}", cli.command);
            // main runs no command under a subcommand: one given would be silently dropped.
            if cli.sub.is_some() {
                assert!(cli.command.is_empty(), "{cli:?} from {argv:?}");
            }
            // ping is always exactly one of connect, listen and ring.
            if let Some(Sub::Ping(p)) = &cli.sub {
                assert_eq!([p.target.is_some(), p.listen.is_some(), p.ring].iter().filter(|m| **m).count(), 1);
            }
            // Problems of the command line only survive a parse when a command is to run.
            if cli.sub.is_some() || cli.command.is_empty() {
                assert!(cli.problems.iter().all(|p| p.origin == Origin::Var), "{cli:?}");
            }
            cli.problems.extend(unknown_variables(env.keys().map(OsString::as_os_str)));
            let v = verdict(&cli);
            for line in v.ignored.iter().chain(&v.refusal) {
                assert!(line.len() <= 1024 && !line.chars().any(char::is_control), "{line:?}");
            }
            // An interlock's switch set unreadably, or a gate setting while the gate is asked
            // for, never leaves the run to start; every other problem is one ignored line.
            let gate = cli.opts.gate == Gate::Refuse
                || cli.problems.iter().any(|p| p.long == Some("gate") && p.belongs == Belongs::Switch);
            let refusing =
                cli.problems.iter().filter(|p| p.belongs == Belongs::Switch || (gate && p.belongs == Belongs::Gate)).count();
            assert_eq!(refusing > 0, v.refusal.is_some(), "{:?}", cli.problems);
            assert_eq!(v.ignored.len(), cli.problems.len() - refusing, "{:?}", cli.problems);
        }
        Err(e) => {
            // What main prints: one line naming the input, never empty.
            let text = e.to_string();
            assert!(!text.is_empty());
            // An answer (--help, --version) is the text asked for; a usage error is one line.
            if !matches!(e.kind, ErrorKind::Help(_) | ErrorKind::Version(_)) {
                assert!(!text.contains('\n'), "one line: {text:?}");
            }
            if let Some(cmd) = command_after_dashes(&argv) {
                assert!(!cmd.is_empty() && argv.ends_with(cmd));
            }
        }
    }
});
