//! Shell completions (bash, zsh, fish), written from the option table for `tools/docs.rs`: the
//! binary never calls this. Never does I/O.

use std::fmt::Write as _;

use super::help::first;
use super::table::{bit, Opt, Ty, OPTS};
use super::SubName;

pub const SHELLS: [&str; 3] = ["bash", "zsh", "fish"];

/// The completion script for `shell` (one of [`SHELLS`]), or `None` for another.
pub fn completions(shell: &str) -> Option<String> {
    let write: [fn() -> String; 3] = [bash, zsh, fish];
    SHELLS.iter().position(|s| *s == shell).map(|i| write[i]())
}

/// The run (`run`, no subcommand) and each subcommand: (label, command).
fn commands() -> impl Iterator<Item = (&'static str, Option<SubName>)> {
    std::iter::once(("run", None)).chain(SubName::ALL.into_iter().map(|s| (s.name(), Some(s))))
}

fn options(cmd: Option<SubName>) -> impl Iterator<Item = &'static Opt> {
    OPTS.iter().filter(move |o| o.scope & bit(cmd) != 0)
}

/// What an option's value is, for a shell: a directory, a file, or anything.
#[derive(PartialEq)]
enum Value {
    None,
    Dir,
    File,
    Any,
}

fn value(opt: &Opt) -> Value {
    match opt.ty {
        _ if !opt.ty.takes_value() => Value::None,
        Ty::Path("DIR", _) => Value::Dir,
        Ty::Path(..) | Ty::SecretFile => Value::File,
        _ => Value::Any,
    }
}

fn sub_names() -> String {
    SubName::ALL.map(SubName::name).join(" ")
}

/// Words of every option of every command that take a value, each once, space-separated.
fn value_words(pick: impl Fn(&Value) -> bool) -> String {
    let mut seen = std::collections::BTreeSet::new();
    let words = OPTS.iter().filter(|o| pick(&value(o)));
    let words = words.flat_map(|o| std::iter::once(format!("--{}", o.long)).chain(o.short.map(|c| format!("-{c}"))));
    words.filter(|w| seen.insert(w.clone())).collect::<Vec<_>>().join(" ")
}

fn bash() -> String {
    let mut s = String::from(
        "# bash completion for nccl-wrap, written from its option table (tools/docs.rs).\n\
         # Install as /usr/share/bash-completion/completions/nccl-wrap.\n\
         _nccl_wrap() {\n\
         \x20   local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}\n\
         \x20   local cmd=run i w\n",
    );
    let _ = writeln!(s, "    local takes_value=\" {} \"", value_words(|v| *v != Value::None));
    let _ = write!(
        s,
        "    # The first word that is not an option or an option's value: a subcommand, or the command run.\n\
         \x20   for ((i = 1; i < COMP_CWORD; i++)); do\n\
         \x20       w=${{COMP_WORDS[i]}}\n\
         \x20       case $w in\n\
         \x20           --) COMPREPLY=($(compgen -c -- \"$cur\")); return ;;\n\
         \x20           -*) [[ $w != *=* && $takes_value == *\" $w \"* ]] && ((i++)) ;;\n\
         \x20           {subs}) cmd=$w; break ;;\n\
         \x20           *) COMPREPLY=($(compgen -f -- \"$cur\")); return ;;\n\
         \x20       esac\n\
         \x20   done\n\
         \x20   case $prev in\n\
         \x20       {dirs}) COMPREPLY=($(compgen -d -- \"$cur\")); return ;;\n\
         \x20       {files}) COMPREPLY=($(compgen -f -- \"$cur\")); return ;;\n\
         \x20       {any}) return ;;\n\
         \x20   esac\n\
         \x20   local opts\n\
         \x20   case $cmd in\n",
        subs = sub_names().replace(' ', "|"),
        dirs = value_words(|v| *v == Value::Dir).replace(' ', "|"),
        files = value_words(|v| *v == Value::File).replace(' ', "|"),
        any = value_words(|v| *v == Value::Any).replace(' ', "|"),
    );
    for (label, cmd) in commands() {
        let words =
            options(cmd).flat_map(|o| o.short.map(|c| format!("-{c}")).into_iter().chain([format!("--{}", o.long)]));
        let words: Vec<String> = words.chain(["-h", "--help", "-V", "--version"].map(String::from)).collect();
        let _ = writeln!(s, "        {label}) opts=\"{}\" ;;", words.join(" "));
    }
    let _ = write!(
        s,
        "    esac\n\
         \x20   if [[ $cur == -* ]]; then\n\
         \x20       COMPREPLY=($(compgen -W \"$opts\" -- \"$cur\"))\n\
         \x20   elif [[ $cmd == run ]]; then\n\
         \x20       COMPREPLY=($(compgen -W \"{subs} --\" -- \"$cur\"))\n\
         \x20   elif [[ $cmd == install ]]; then\n\
         \x20       COMPREPLY=($(compgen -d -- \"$cur\"))\n\
         \x20   fi\n\
         }}\n\
         complete -F _nccl_wrap nccl-wrap\n",
        subs = sub_names(),
    );
    s
}

/// A description inside a single-quoted zsh `_arguments` spec: `'` closed and reopened, `[`,
/// `]` and `:` escaped.
fn zsh_text(text: &str) -> String {
    let text = first(text).replace('\\', "\\\\").replace('[', "\\[").replace(']', "\\]");
    zsh_meta(&text)
}

/// A value's name or message in a single-quoted `_arguments` spec: `'` and `:` escaped.
fn zsh_meta(text: &str) -> String {
    text.replace('\'', "'\\''").replace(':', "\\:")
}

fn zsh() -> String {
    let mut s = String::from(
        "#compdef nccl-wrap\n\
         # zsh completion for nccl-wrap, written from its option table (tools/docs.rs).\n\
         # Install as _nccl-wrap in a directory of $fpath.\n",
    );
    for (label, cmd) in commands() {
        let _ = writeln!(s, "\n_nccl_wrap_{label}() {{\n    _arguments -s -S \\");
        for opt in options(cmd) {
            let help = zsh_text(opt.help);
            let action = match value(opt) {
                Value::None => String::new(),
                Value::Dir => format!(":{}:_files -/", opt.ty.meta()),
                Value::File => format!(":{}:_files", opt.ty.meta()),
                Value::Any => format!(":{}: ", zsh_meta(opt.ty.meta())),
            };
            // A flag takes its value only inline (--quiet=false); a value option inline or next.
            let eq = if value(opt) == Value::None { "" } else { "=" };
            let names = match opt.short {
                Some(c) => format!("'(-{c} --{l})'{{-{c},--{l}{eq}}}'", l = opt.long),
                None => format!("'--{}{eq}", opt.long),
            };
            let _ = writeln!(s, "        {names}[{help}]{action}' \\");
        }
        s.push_str("        '(- *)'{-h,--help}'[Print help]' \\\n");
        s.push_str("        '(- *)'{-V,--version}'[Print the version]'");
        match cmd {
            None => s.push_str(" \\\n        '1: :_nccl_wrap_first' \\\n        '*:: :_normal'\n}\n"),
            Some(SubName::Install) => s.push_str(" \\\n        '1:DIR:_files -/'\n}\n"),
            Some(SubName::Ping) => s.push_str(" \\\n        '1:HOST\\:PORT: '\n}\n"),
            Some(_) => s.push_str("\n}\n"),
        }
    }
    s.push_str("\n_nccl_wrap_first() {\n    local -a subcommands=(\n");
    for sub in SubName::ALL {
        let _ = writeln!(s, "        '{}:{}'", sub.name(), zsh_text(sub.about()));
    }
    s.push_str(
        "    )\n    _describe -t subcommands subcommand subcommands\n    _command_names -e\n}\n\n\
         _nccl_wrap() {\n\
         \x20   local i\n\
         \x20   for ((i = 2; i < CURRENT; i++)); do\n\
         \x20       case ${words[i]} in\n",
    );
    let _ = write!(
        s,
        "            {}) words=(${{words[i,-1]}}); ((CURRENT -= i - 1)); _nccl_wrap_${{words[1]}}; return ;;\n\
         \x20           --|[^-]*) break ;;\n\
         \x20       esac\n\
         \x20   done\n\
         \x20   _nccl_wrap_run\n\
         }}\n\n\
         _nccl_wrap \"$@\"\n",
        sub_names().replace(' ', "|")
    );
    s
}

/// Text inside a single-quoted fish word.
fn fish_text(text: &str) -> String {
    first(text).replace('\\', "\\\\").replace('\'', "\\'")
}

fn fish() -> String {
    let mut s = String::from(
        "# fish completion for nccl-wrap, written from its option table (tools/docs.rs).\n\
         # Install as ~/.config/fish/completions/nccl-wrap.fish.\n",
    );
    let subs = sub_names();
    let _ = writeln!(s, "complete -c nccl-wrap -f");
    for sub in SubName::ALL {
        let _ = writeln!(
            s,
            "complete -c nccl-wrap -n 'not __fish_seen_subcommand_from {subs}' -a {} -d '{}'",
            sub.name(),
            fish_text(sub.about())
        );
    }
    for (label, cmd) in commands() {
        let cond = match cmd {
            None => format!("not __fish_seen_subcommand_from {subs}"),
            Some(_) => format!("__fish_seen_subcommand_from {label}"),
        };
        for opt in options(cmd) {
            let short = opt.short.map(|c| format!(" -s {c}")).unwrap_or_default();
            let takes = match value(opt) {
                Value::None => "",
                Value::Dir => " -r -a '(__fish_complete_directories)'",
                Value::File => " -r -F",
                Value::Any => " -r",
            };
            let (long, help) = (opt.long, fish_text(opt.help));
            let _ = writeln!(s, "complete -c nccl-wrap -n '{cond}'{short} -l {long}{takes} -d '{help}'");
        }
        let _ = writeln!(s, "complete -c nccl-wrap -n '{cond}' -s h -l help -d 'Print help'");
        let _ = writeln!(s, "complete -c nccl-wrap -n '{cond}' -s V -l version -d 'Print the version'");
    }
    let _ = writeln!(
        s,
        "complete -c nccl-wrap -n '__fish_seen_subcommand_from install' -a '(__fish_complete_directories)'"
    );
    s
}
