//! Options and `NCCL_WRAP_*` variables through `cli::Cli::parse`, as `main` parses them.
//!
//! Input lines: a line `NCCL_WRAP_<NAME>=<value>` sets that variable; every other line is one
//! argument (bytes, not necessarily UTF-8), after `nccl-wrap` as argv[0]. The environment is
//! handed to the parser as a lookup, as main does, so nothing global is touched.

#![no_main]

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};

use libfuzzer_sys::fuzz_target;
use nccl_wrap::cli::{command_after_dashes, Cli, CliError, Sub};

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
        Ok(cli) => {
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
            let _ = nccl_wrap::process::supervise::Options::from(&cli.opts);
        }
        Err(e) => {
            // What main prints: one line naming the input, never empty.
            let text = e.to_string();
            assert!(!text.is_empty());
            if !matches!(e, CliError::Help(_)) {
                assert!(!text.contains('\n'), "one line: {text:?}");
            }
            if let Some(cmd) = command_after_dashes(&argv) {
                assert!(!cmd.is_empty() && argv.ends_with(cmd));
            }
        }
    }
});
