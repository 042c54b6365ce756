//! How each option's value is checked and stored: the setters the option table (`options.rs`)
//! names, and the macros that make the common ones. A setter of a subcommand's option is a no-op
//! outside that subcommand, where the option is not found anyway.

use std::path::PathBuf;

use super::{Cli, Gate, HealthFiles, PingArgs, Sub};

pub(super) fn boolish(v: &str) -> Result<bool, String> {
    match v.to_ascii_lowercase().as_str() {
        "y" | "yes" | "t" | "true" | "on" | "1" => Ok(true),
        "n" | "no" | "f" | "false" | "off" | "0" => Ok(false),
        _ => Err("not a boolean (true/false, yes/no, on/off, 1/0)".into()),
    }
}

/// A whole number without a range: prefer [`number_in`], since every numeric option states one.
#[allow(dead_code)]
pub(super) fn number<T: std::str::FromStr>(v: &str) -> Result<T, String> {
    v.trim().parse().map_err(|_| "not a non-negative whole number".to_string())
}

/// A whole number from `lo` to `hi`, both included: every numeric option states its range, in
/// its help line as "(LO to HI)" (a test holds the two together).
pub(super) fn number_in<T>(v: &str, lo: T, hi: T) -> Result<T, String>
where
    T: std::str::FromStr + PartialOrd + std::fmt::Display + Copy,
{
    match v.trim().parse::<T>() {
        Ok(n) if n >= lo && n <= hi => Ok(n),
        _ => Err(format!("not a whole number from {lo} to {hi}")),
    }
}

/// `--stall-ms`: 0 (off) or at least 1000: a collective that takes under a second is ordinary.
pub(super) fn stall_ms(c: &mut Cli, v: &str) -> Result<(), String> {
    let ms: u64 = number_in(v, 0, 86_400_000)?;
    if ms != 0 && ms < 1000 {
        return Err("0 (off) or 1000 to 86400000 ms".into());
    }
    c.opts.stall_ms = ms;
    Ok(())
}

pub(super) fn path(v: &str) -> Result<PathBuf, String> {
    if v.is_empty() {
        return Err("an empty path".into());
    }
    Ok(PathBuf::from(v))
}

macro_rules! flag {
    ($field:ident) => {
        |c: &mut Cli, v: &str| {
            c.opts.$field = boolish(v)?;
            Ok(())
        }
    };
}

/// An optional value of the run's options, parsed by `$parse`.
macro_rules! some {
    ($field:ident, $parse:expr) => {
        |c: &mut Cli, v: &str| {
            c.opts.$field = Some($parse(v)?);
            Ok(())
        }
    };
}

/// Setters of `ping`'s own options (outside `ping`, of the gate's pair test: see `ping`).
macro_rules! ping_flag {
    ($field:ident) => {
        |c: &mut Cli, v: &str| {
            let b = boolish(v)?;
            ping(c, |p| p.$field = b)
        }
    };
}
macro_rules! ping_number {
    ($field:ident, $lo:expr, $hi:expr) => {
        |c: &mut Cli, v: &str| {
            let n = number_in(v, $lo, $hi)?;
            ping(c, |p| p.$field = n)
        }
    };
}
macro_rules! ping_some_number {
    ($field:ident, $lo:expr, $hi:expr) => {
        |c: &mut Cli, v: &str| {
            let n = number_in(v, $lo, $hi)?;
            ping(c, |p| p.$field = Some(n))
        }
    };
}
macro_rules! ping_text {
    ($field:ident) => {
        |c: &mut Cli, v: &str| ping(c, |p| p.$field = Some(v.to_owned()))
    };
}

/// The health files of `doctor` or `watch` (a no-op elsewhere, where these options are not found).
fn files(c: &mut Cli) -> Option<&mut HealthFiles> {
    match &mut c.sub {
        Some(Sub::Doctor { files, .. }) => Some(files),
        Some(Sub::Watch(w)) => Some(&mut w.files),
        _ => None,
    }
}

pub(super) fn set_features(c: &mut Cli, v: &str) -> Result<(), String> {
    let p = path(v)?;
    if let Some(f) = files(c) {
        f.features = Some(p);
    }
    Ok(())
}

pub(super) fn set_metrics(c: &mut Cli, v: &str) -> Result<(), String> {
    let p = path(v)?;
    if let Some(f) = files(c) {
        f.metrics = Some(p);
    }
    Ok(())
}

/// Seconds, a fraction allowed, from 0.1 to one day; in milliseconds.
pub(super) fn interval_ms(v: &str) -> Result<u64, String> {
    let s: f64 = v.trim().parse().map_err(|_| "not a number of seconds".to_string())?;
    if !(0.1..=86_400.0).contains(&s) {
        return Err("must be between 0.1 and 86400 seconds".into());
    }
    Ok((s * 1000.0).round() as u64)
}

/// `--ring SERVICE[:PORT]`: a DNS name (a headless Service's), with the ring's port unless given.
pub(super) fn ring_target(spec: &str) -> Result<(String, u16), String> {
    let (host, port) = match spec.rsplit_once(':') {
        Some((h, p)) => match p.parse::<u16>() {
            Ok(port) if port != 0 => (h, port),
            _ => return Err(format!("{p:?} is not a port number in 1..=65535")),
        },
        None => (spec, super::RING_PORT),
    };
    let ok = !host.is_empty()
        && host.len() <= 253
        && host.bytes().all(|b| b.is_ascii_alphanumeric() || b"-.".contains(&b))
        && !host.starts_with(['-', '.']);
    if !ok {
        return Err(format!("{host:?} is not a DNS name (a headless Service's, such as nccl-wrap-ring.nccl-wrap.svc)"));
    }
    Ok((host.to_owned(), port))
}

pub(super) fn watch(c: &mut Cli, f: impl FnOnce(&mut super::WatchArgs)) -> Result<(), String> {
    if let Some(Sub::Watch(w)) = &mut c.sub {
        f(w);
    }
    Ok(())
}

/// Applies `f` to ping's options; outside `ping` (where these options are not found on the
/// command line) to the gate's pair test, which reads ping's variables.
pub(super) fn ping(c: &mut Cli, f: impl FnOnce(&mut PingArgs)) -> Result<(), String> {
    match &mut c.sub {
        Some(Sub::Ping(p)) => f(p),
        None => f(&mut c.opts.gate_ping),
        Some(_) => {}
    }
    Ok(())
}

pub(super) fn gate_mode(v: &str) -> Result<Gate, String> {
    if v.eq_ignore_ascii_case("warn") {
        return Ok(Gate::Warn);
    }
    match boolish(v) {
        Ok(true) => Ok(Gate::Refuse),
        Ok(false) => Ok(Gate::Off),
        Err(_) => Err("not a boolean or `warn` (true/false, yes/no, on/off, 1/0, warn)".into()),
    }
}
