//! Options and `NCCL_WRAP_*` variables through `cli::Cli::try_parse_from`, as `main` parses them.
//!
//! Input lines: a line `NCCL_WRAP_<NAME>=<value>` sets that variable; every other line is one
//! argument (bytes, not necessarily UTF-8), after `nccl-wrap` as argv[0]. The variables are set
//! in this process before parsing and removed after it: libFuzzer runs one input at a time on
//! one thread, so nothing else reads the environment meanwhile.

#![no_main]

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};

use clap::Parser;
use libfuzzer_sys::fuzz_target;
use nccl_wrap::cli::{command_after_dashes, Cli};

fn clear_env() {
    for (k, _) in std::env::vars_os() {
        if k.as_bytes().starts_with(b"NCCL_WRAP_") {
            std::env::remove_var(k);
        }
    }
}

fuzz_target!(|data: &[u8]| {
    clear_env();
    let mut argv = vec![OsString::from("nccl-wrap")];
    for line in data.split(|&b| b == b'\n').take(64) {
        if line.contains(&0) {
            // Neither an argument nor an environment entry can hold a NUL.
            continue;
        }
        match line.iter().position(|&b| b == b'=') {
            Some(eq) if line.starts_with(b"NCCL_WRAP_") => {
                std::env::set_var(OsStr::from_bytes(&line[..eq]), OsStr::from_bytes(&line[eq + 1..]));
            }
            _ => argv.push(OsString::from_vec(line.to_vec())),
        }
    }

    match Cli::try_parse_from(&argv) {
        Ok(cli) => {
            // The command is handed over byte for byte: it is the tail of argv.
            assert!(argv[1..].ends_with(&cli.command), "{:?} from {argv:?}", cli.command);
            // main runs no command under `env` or `doctor`: one given would be silently dropped.
            if cli.sub.is_some() {
                assert!(cli.command.is_empty(), "{cli:?} from {argv:?}");
            }
            let _ = nccl_wrap::process::supervise::Options::from(&cli.opts);
        }
        Err(e) => {
            // What main prints for a usage error, and the command it would still run.
            let _ = e.render().to_string();
            assert!(matches!(e.exit_code(), 0 | 2), "exit code {} for {e}", e.exit_code());
            if let Some(cmd) = command_after_dashes(&argv) {
                assert!(!cmd.is_empty() && argv.ends_with(cmd));
            }
        }
    }
    clear_env();
});
