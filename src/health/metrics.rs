//! The Prometheus text exposition format (version 0.0.4), as node_exporter's textfile collector
//! reads a `*.prom` file: per family one `# HELP` and one `# TYPE` line, then its samples, every
//! name under `nccl_wrap_`, label values escaped (`\\`, `\"`, `\n`). A family with no sample is
//! left out. Every label set is unique within its family (checks are keyed by id and subject,
//! ports by device and port). Pure: the health value and the round's figures in, text out.

use std::fmt::Write as _;

use super::{Health, View};
use crate::doctor::Status;

/// What the writer knows besides the health value.
#[derive(Debug, Clone, Default)]
pub struct Round {
    /// When the round started, Unix seconds.
    pub timestamp: f64,
    /// watch only: how long the round took, seconds.
    pub duration: Option<f64>,
    /// watch only: rounds so far, this one included.
    pub rounds: Option<u64>,
    /// watch only: the interval between rounds, seconds.
    pub interval: Option<f64>,
    /// watch only: the agent's CPU time (user + system) so far, and its peak RSS.
    pub cpu_seconds: Option<f64>,
    pub max_rss_bytes: Option<u64>,
}

struct Out {
    text: String,
}

impl Out {
    /// One family: HELP, TYPE, then every sample (name suffix, labels, value).
    fn family(&mut self, name: &str, kind: &str, help: &str, samples: &[(Vec<(&str, String)>, f64)]) {
        if samples.is_empty() {
            return;
        }
        let _ = writeln!(self.text, "# HELP nccl_wrap_{name} {}", escape_help(help));
        let _ = writeln!(self.text, "# TYPE nccl_wrap_{name} {kind}");
        for (labels, value) in samples {
            let _ = write!(self.text, "nccl_wrap_{name}");
            let labels: Vec<&(&str, String)> = labels.iter().filter(|(_, v)| !v.is_empty()).collect();
            if !labels.is_empty() {
                let parts: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{}\"", escape_value(v))).collect();
                let _ = write!(self.text, "{{{}}}", parts.join(","));
            }
            let _ = writeln!(self.text, " {}", number(*value));
        }
    }
    fn one(&mut self, name: &str, kind: &str, help: &str, value: f64) {
        self.family(name, kind, help, &[(Vec::new(), value)]);
    }
}

/// A sample value as the format spells it: integers without a fraction, `+Inf` for unlimited.
pub fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

pub fn escape_value(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

fn escape_help(v: &str) -> String {
    v.replace('\\', "\\\\").replace('\n', "\\n")
}

fn flag(b: bool) -> f64 {
    if b {
        1.0
    } else {
        0.0
    }
}

pub fn status_value(s: Status) -> f64 {
    match s {
        Status::Pass => 0.0,
        Status::Warn => 1.0,
        Status::Fail => 2.0,
    }
}

/// The whole file.
pub fn render(h: &Health, round: &Round) -> String {
    let mut o = Out { text: String::new() };
    let view = h.view.name().to_string();
    o.family(
        "info",
        "gauge",
        "nccl-wrap's version and whose view the figures are (node: nccl-wrap watch; pod: doctor in a pod); always 1",
        &[(vec![("version", env!("CARGO_PKG_VERSION").to_string()), ("view", view)], 1.0)],
    );
    o.one(
        "healthy",
        "gauge",
        "1 when at least one RDMA port is usable and no check failed (memlock aside)",
        flag(h.healthy),
    );
    o.one("rdma_ports", "gauge", "RDMA ports in this view", h.ports.len() as f64);
    o.one(
        "rdma_ports_usable",
        "gauge",
        match h.view {
            View::Node => "RDMA ports whose link can carry traffic (ACTIVE, LinkUp, InfiniBand or Ethernet)",
            View::Pod => {
                "RDMA ports the plan hands to NCCL (link up and, for RoCE, a RoCE v2 GID of the wanted family)"
            }
        },
        h.usable() as f64,
    );
    let devices: Vec<_> = h.devices.iter().map(|(k, n)| (vec![("kind", k.to_string())], *n as f64)).collect();
    o.family(
        "rdma_devices",
        "gauge",
        "RDMA devices by kind (pf, vf, sf, software, unknown); the node's view counts VFs and SFs but checks only the rest",
        &devices,
    );
    o.one(
        "gid_index_consistent",
        "gauge",
        "1 when every usable RoCE port with a RoCE v2 GID of the wanted family has it at the same index",
        flag(h.gid_consistent),
    );
    if let Some(i) = h.gid_index {
        o.one("gid_index", "gauge", "The GID index every usable RoCE port agrees on", f64::from(i));
    }
    o.one(
        "memlock_limit_bytes",
        "gauge",
        "Soft RLIMIT_MEMLOCK a process gets here after raising it (+Inf: unlimited)",
        h.memlock_bytes.map_or(f64::INFINITY, |b| b as f64),
    );
    if let Some(c) = h.cap_ipc_lock {
        o.one(
            "cap_ipc_lock",
            "gauge",
            "1 when CAP_IPC_LOCK is effective for the process that measured memlock",
            flag(c),
        );
    }
    if let Some(pt) = h.iommu_passthrough {
        o.one(
            "iommu_passthrough",
            "gauge",
            "1 when no RDMA device's IOMMU group is translated (DMA, DMA-FQ); 0 when one is",
            flag(pt),
        );
    }
    o.one(
        "gpudirect_possible",
        "gauge",
        "1 when NVIDIA GPUs are visible and nvidia_peermem is loaded or DMA-BUF is possible",
        flag(h.gpudirect),
    );
    let checks: Vec<_> = h
        .checks
        .iter()
        .map(|(k, s)| {
            (
                vec![
                    ("check", k.id.to_string()),
                    ("device", k.device.clone().unwrap_or_default()),
                    ("port", k.port.map(|p| p.to_string()).unwrap_or_default()),
                    ("variable", k.variable.clone().unwrap_or_default()),
                ],
                status_value(*s),
            )
        })
        .collect();
    o.family("check_status", "gauge", "Each doctor check: 0 pass, 1 warn, 2 fail (ids: docs/doctor.md)", &checks);
    let mut counts = [0usize; 3];
    for s in h.checks.values() {
        counts[status_value(*s) as usize] += 1;
    }
    let counts: Vec<_> = ["pass", "warn", "fail"]
        .iter()
        .zip(counts)
        .map(|(s, n)| (vec![("status", (*s).to_string())], n as f64))
        .collect();
    o.family("checks", "gauge", "Checks by status", &counts);

    let port = |p: &super::PortHealth| vec![("device", p.device.clone()), ("port", p.port.to_string())];
    let info: Vec<_> = h
        .ports
        .iter()
        .map(|p| {
            let mut l = port(p);
            l.push(("kind", p.kind.to_string()));
            l.push(("link_layer", p.link_layer.clone().unwrap_or_default()));
            l.push(("rate", p.rate.clone().unwrap_or_default()));
            (l, 1.0)
        })
        .collect();
    o.family(
        "port_info",
        "gauge",
        "One per RDMA port: its device kind, link layer and rate as sysfs prints them; always 1",
        &info,
    );
    let each = |f: &dyn Fn(&super::PortHealth) -> Option<f64>| -> Vec<(Vec<(&str, String)>, f64)> {
        h.ports.iter().filter_map(|p| f(p).map(|v| (port(p), v))).collect()
    };
    o.family(
        "port_state",
        "gauge",
        "ports/N/state as a number: 1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE, 5 ACTIVE_DEFER",
        &each(&|p| p.state.map(f64::from)),
    );
    o.family(
        "port_phys_state",
        "gauge",
        "ports/N/phys_state as a number: 2 Polling, 3 Disabled, 5 LinkUp, 6 LinkErrorRecovery, ...",
        &each(&|p| p.phys_state.map(f64::from)),
    );
    o.family("port_usable", "gauge", "1 when the port counts in rdma_ports_usable", &each(&|p| Some(flag(p.usable))));
    o.family(
        "port_rate_bytes_per_second",
        "gauge",
        "The port's signalling rate from ports/N/rate, in bytes per second",
        &each(&|p| p.rate_bytes_per_second()),
    );
    o.family(
        "port_gid_index",
        "gauge",
        "The RoCE v2 GID index NCCL would pick on the port (RoCE ports with a GID of the wanted family)",
        &each(&|p| p.gid_index.map(f64::from)),
    );
    let counters: Vec<_> = h
        .ports
        .iter()
        .flat_map(|p| {
            p.counters.iter().map(move |c| {
                let mut l = port(p);
                l.push(("source", c.dir.to_string()));
                l.push(("counter", c.name.clone()));
                (l, c.value as f64)
            })
        })
        .collect();
    o.family(
        "port_counter_total",
        "counter",
        "Every counter the device has under ports/N/counters (IBTA port counters) and ports/N/hw_counters (the driver's)",
        &counters,
    );
    if let Some(r) = &h.ring {
        ring(&mut o, r);
    }
    o.one("last_run_timestamp_seconds", "gauge", "When these figures were taken, Unix seconds", round.timestamp);
    if let Some(d) = round.duration {
        o.one("round_duration_seconds", "gauge", "Wall time of the agent's last round", d);
    }
    if let Some(i) = round.interval {
        o.one("interval_seconds", "gauge", "The agent's interval between rounds (before jitter)", i);
    }
    if let Some(n) = round.rounds {
        o.one("rounds_total", "counter", "Rounds the agent has run since it started", n as f64);
    }
    if let Some(c) = round.cpu_seconds {
        o.one(
            "agent_cpu_seconds_total",
            "counter",
            "CPU time (user and system) the agent has used since it started",
            c,
        );
    }
    if let Some(r) = round.max_rss_bytes {
        o.one("agent_max_rss_bytes", "gauge", "The agent's peak resident set size", r as f64);
    }
    o.text
}

/// The last ring round (watch --ring), kept until the next one.
fn ring(o: &mut Out, r: &super::ring::Report) {
    use super::ring::Outcome;
    o.one("ring_last_run_timestamp_seconds", "gauge", "When the last ring round ran, Unix seconds", r.timestamp);
    o.one(
        "ring_peers",
        "gauge",
        "Distinct addresses the ring's Service name resolved to in the last ring round",
        r.peers as f64,
    );
    match &r.outcome {
        Outcome::Untested { reason, .. } => o.family(
            "ring_tested",
            "gauge",
            "1 when the last ring round tested the successor; 0 with the reason (resolve, no-own-address, alone, not-listed)",
            &[(vec![("reason", (*reason).to_string())], 0.0)],
        ),
        Outcome::Tested { next, pairs } => {
            o.family("ring_tested", "gauge", "1 when the last ring round tested the successor; 0 with the reason (resolve, no-own-address, alone, not-listed)", &[(Vec::new(), 1.0)]);
            // Which pair a sample is: the successor, this node's device and port.
            let pair = |p: &super::ring::Pair| {
                vec![
                    ("peer", next.to_string()),
                    ("device", p.device.clone()),
                    ("port", p.port.map(|n| n.to_string()).unwrap_or_default()),
                ]
            };
            let samples: Vec<_> = pairs
                .iter()
                .map(|p| {
                    let mut labels = pair(p);
                    labels.push(("cause", p.cause.unwrap_or_default().to_string()));
                    (labels, status_value(p.status))
                })
                .collect();
            o.family(
                "ring_pair_status",
                "gauge",
                "Each pair of the last ring round towards the successor (peer): 0 pass, 1 warn (slow-pair: below 70 % of this node's rails' median or of its rated speed), 2 fail, with ping's cause id; no device: the test could not run",
                &samples,
            );
            let figure = |f: &dyn Fn(&super::ring::Pair) -> Option<u64>| -> Vec<(Vec<(&str, String)>, f64)> {
                pairs.iter().filter_map(|p| Some((pair(p), f(p)? as f64 / 1e6))).collect()
            };
            o.family(
                "ring_pair_gbps",
                "gauge",
                "Each passing pair's bandwidth in the last ring round towards the successor (peer), Gb/s: a 200 ms run of 64 KiB RDMA writes, host memory to host memory",
                &figure(&|p| p.kbps),
            );
            o.family(
                "ring_pair_rated_gbps",
                "gauge",
                "The rated speed of each pair's slower end (the ports' rate), Gb/s; hardware ports only",
                &figure(&|p| p.rated_kbps),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_escapes() {
        assert_eq!(number(3.0), "3");
        assert_eq!(number(0.25), "0.25");
        assert_eq!(number(f64::INFINITY), "+Inf");
        assert_eq!(number(5e10), "50000000000");
        assert_eq!(escape_value("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }

    #[test]
    fn the_file_for_a_known_value() {
        let text = render(&super::super::sample(), &Round { timestamp: 1_690_629_753.5, ..Round::default() });
        for line in [
            "nccl_wrap_healthy 0",
            "nccl_wrap_rdma_ports_usable 1",
            "nccl_wrap_rdma_devices{kind=\"vf\"} 4",
            "nccl_wrap_memlock_limit_bytes 8388608",
            "nccl_wrap_check_status{check=\"ports\",device=\"mlx5_1\",port=\"1\"} 2",
            "nccl_wrap_check_status{check=\"memlock\"} 2",
            "nccl_wrap_checks{status=\"warn\"} 1",
            "nccl_wrap_port_info{device=\"mlx5_0\",port=\"1\",kind=\"pf\",link_layer=\"Ethernet\",rate=\"400 Gb/sec (4X NDR)\"} 1",
            "nccl_wrap_port_state{device=\"mlx5_1\",port=\"1\"} 1",
            "nccl_wrap_port_rate_bytes_per_second{device=\"mlx5_1\",port=\"1\"} 50000000000",
            "nccl_wrap_port_counter_total{device=\"mlx5_0\",port=\"1\",source=\"hw_counters\",counter=\"out_of_sequence\"} 17",
            "# TYPE nccl_wrap_port_counter_total counter",
            "nccl_wrap_last_run_timestamp_seconds 1690629753.5",
        ] {
            assert!(text.lines().any(|l| l == line), "no line {line:?} in\n{text}");
        }
        // The agent's own figures only when there are any.
        assert!(!text.contains("nccl_wrap_rounds_total"), "{text}");
        assert!(text.contains("\nnccl_wrap_gpudirect_possible 0\n"), "{text}");
        let mut h = super::super::sample();
        h.memlock_bytes = None;
        assert!(render(&h, &Round::default()).contains("\nnccl_wrap_memlock_limit_bytes +Inf\n"));
    }

    #[test]
    fn empty_families_are_left_out_and_labels_escaped() {
        let mut o = Out { text: String::new() };
        o.family("x", "gauge", "h", &[]);
        assert_eq!(o.text, "");
        o.family("y", "gauge", "line\none", &[(vec![("a", "q\"".into()), ("b", String::new())], 1.0)]);
        assert_eq!(o.text, "# HELP nccl_wrap_y line\\none\n# TYPE nccl_wrap_y gauge\nnccl_wrap_y{a=\"q\\\"\"} 1\n");
    }
}
