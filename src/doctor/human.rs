//! The human form of the report: one line per check, evidence and fix under each that does not pass, then the GPU/NIC matrix.

use super::*;

/// One line per check; evidence and fix under every check that does not pass; then the
/// GPU/NIC matrix when GPUs are visible. `quiet` (`doctor -q`): only the checks that do not
/// pass, failures first, and the tally; a healthy node is one line.
pub fn human(inp: &Inputs, report: &Report, quiet: bool) -> String {
    let mut out = String::new();
    let mut checks: Vec<&Check> = report.checks.iter().collect();
    if quiet {
        checks.retain(|c| c.status != Status::Pass);
        // Stable: within failures and within warnings, the report's own order.
        checks.sort_by_key(|c| c.status != Status::Fail);
    }
    for c in checks {
        let _ = writeln!(out, "{} {:<9} {}", c.status.label(), c.id, c.summary);
        if c.status == Status::Pass {
            continue;
        }
        for line in evidence_lines(&c.evidence) {
            let _ = writeln!(out, "     evidence: {line}");
        }
        if let Some(h) = &c.hint {
            let _ = writeln!(out, "     fix: {h}");
        }
    }
    if let Some(t) = report.checks.iter().find(|c| c.id == "topology").filter(|_| !quiet) {
        out += &matrix(t);
    }
    let count = |k| report.counts.get(k).copied().unwrap_or(0);
    let (fail, warn, pass) = (count("fail"), count("warn"), count("pass"));
    let (usable, from) = (inp.plan.hca.len(), inp.plan.detection.source.describe());
    let _ = writeln!(out, "{fail} fail, {warn} warn, {pass} pass ({usable} RDMA port(s) usable, from {from})");
    out
}

/// Evidence as people read it: `file = value` for each file read (at any depth), `key: value`
/// for the rest.
pub(super) fn evidence_lines(ev: &Map<String, Value>) -> Vec<String> {
    let mut out = Vec::new();
    ev.iter().for_each(|(k, v)| evidence_walk(k, v, &mut out));
    out
}

pub(super) fn evidence_walk(key: &str, v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(o) if o.contains_key("file") => out.push(file_line(o)),
        Value::Object(o) => o.iter().for_each(|(k, x)| evidence_walk(&format!("{key}.{k}"), x, out)),
        Value::Array(a) if a.iter().any(Value::is_object) => {
            out.push(format!("{key}: {} entries (--json shows them)", a.len()))
        }
        Value::String(s) => out.push(format!("{key}: {s}")),
        other => out.push(format!("{key}: {other}")),
    }
}

pub(super) fn file_line(o: &Map<String, Value>) -> String {
    let f = o.get("file").and_then(Value::as_str).unwrap_or("?");
    match o.get("value") {
        Some(Value::String(s)) => format!("{f} = {s:?}"),
        Some(Value::Null) | None => format!("{f}: unreadable"),
        Some(other) => format!("{f} = {other}"),
    }
}

/// `nvidia-smi topo -m` style: a row per GPU, a column per chosen NIC, NUMA and bridge last.
pub(super) fn matrix(topo: &Check) -> String {
    let list = |k| topo.evidence.get(k).and_then(Value::as_array).filter(|a| !a.is_empty());
    let (Some(gpus), Some(nics)) = (list("gpus"), list("nics")) else { return String::new() };
    let s = |v: &Value, k: &str| {
        v.get(k).map_or("-".to_string(), |x| x.as_str().map_or_else(|| x.to_string(), String::from))
    };
    let numa = |v: &Value| v.get("numa").and_then(Value::as_u64).map_or("-".into(), |n| n.to_string());
    let names: Vec<String> = nics.iter().map(|n| s(n, "name")).collect();
    let w = names.iter().map(String::len).max().unwrap_or(4).max(4) + 2;
    let mut out = String::from("\nGPU/NIC topology (chosen NICs; PIX same switch, PXB several bridges, PHB host bridge, NODE same NUMA node, SYS across NUMA nodes)\n");
    let _ = write!(out, "{:<14}", "");
    for n in &names {
        let _ = write!(out, "{n:<w$}");
    }
    let _ = writeln!(out, "{:<6}bridge", "NUMA");
    for (i, g) in gpus.iter().enumerate() {
        let _ = write!(out, "{:<14}", format!("GPU{i}"));
        for n in &names {
            let r = g.get("to").and_then(|t| t.get(n)).and_then(Value::as_str).unwrap_or("-");
            let _ = write!(out, "{r:<w$}");
        }
        let _ = writeln!(out, "{:<6}{} ({})", numa(g), s(g, "bridge"), s(g, "pci"));
    }
    for n in nics {
        let pad = w * names.len();
        let _ = writeln!(out, "{:<14}{:<pad$}{:<6}{} ({})", s(n, "name"), "", numa(n), s(n, "bridge"), s(n, "pci"));
    }
    out.push('\n');
    out
}
