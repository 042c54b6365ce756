//! Writes what is generated from nccl-wrap's option table for packagers: a shell's completion
//! script or the man page, on stdout. A tool beside the binary rather than a hidden subcommand of
//! it, so that the shipped binary carries none of it (scripts/release.sh puts both in the release
//! folder).
//!
//!     cargo run -q --example docs -- bash|zsh|fish    # the completion script
//!     cargo run -q --example docs -- man              # nccl-wrap.1

use std::io::Write;
use std::process::ExitCode;

use nccl_wrap::cli::{completions, man_page, SHELLS};

fn main() -> ExitCode {
    let what = std::env::args().nth(1).unwrap_or_default();
    let text = match what.as_str() {
        "man" => man_page(),
        shell => match completions(shell) {
            Some(script) => script,
            None => {
                eprintln!("usage: docs {}|man", SHELLS.join("|"));
                return ExitCode::from(2);
            }
        },
    };
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("docs: cannot write to stdout: {e}");
            ExitCode::FAILURE
        }
    }
}
