//! The Prometheus text format (0.0.4) for node_exporter's textfile collector. Names pass
//! `promtool check metrics`: base units, `_total` counters, one family per port counter, named as
//! node_exporter's InfiniBand collector names it. Pure.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::{view_name, Health, View};
use crate::doctor::{status_word, Status};

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

type Samples<'a> = Vec<(Vec<(&'a str, String)>, f64)>;

impl Out {
    /// One family: HELP, TYPE, then every sample (labels, value).
    fn family(&mut self, name: &str, kind: &str, help: &str, samples: &[(Vec<(&str, String)>, f64)]) {
        if samples.is_empty() {
            return;
        }
        let _ = writeln!(self.text, "# HELP nccl_wrap_{name} {}", escape_help(help));
        let _ = writeln!(self.text, "# TYPE nccl_wrap_{name} {kind}");
        for (labels, value) in samples {
            let _ = write!(self.text, "nccl_wrap_{name}");
            let shown = labels.iter().filter(|(_, v)| !v.is_empty());
            let labels: Vec<String> = shown.map(|(k, v)| format!("{k}=\"{}\"", escape_value(v))).collect();
            if !labels.is_empty() {
                let _ = write!(self.text, "{{{}}}", labels.join(","));
            }
            let _ = writeln!(self.text, " {}", number(*value));
        }
    }

    /// A family of one sample without labels, left out where there is no value.
    fn one(&mut self, name: &str, kind: &str, help: &str, value: Option<f64>) {
        self.family(name, kind, help, &value.map(|v| (Vec::new(), v)).into_iter().collect::<Vec<_>>());
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
    f64::from(u8::from(b))
}

/// 0 pass, 1 warn, 2 fail: the order statuses sort in.
pub fn status_value(s: Status) -> f64 {
    f64::from(s as u8)
}

pub fn render(h: &Health, round: &Round) -> String {
    let mut o = Out { text: String::new() };
    let version = vec![("version", env!("CARGO_PKG_VERSION").to_string()), ("view", view_name(h.view).to_string())];
    o.family(
        "info",
        "gauge",
        "nccl-wrap's version and whose view the figures are (node: nccl-wrap watch; pod: doctor in a pod); always 1",
        &[(version, 1.0)],
    );
    let usable = match h.view {
        View::Node => "RDMA ports whose link can carry traffic (ACTIVE, LinkUp, InfiniBand or Ethernet)",
        View::Pod => "RDMA ports the plan hands to NCCL (link up and, for RoCE, a RoCE v2 GID of the wanted family)",
    };
    #[rustfmt::skip]
    let gauges = [
        ("healthy", "1 when at least one RDMA port is usable and no check failed (memlock aside)", Some(flag(h.healthy))),
        ("rdma_ports", "RDMA ports in this view", Some(h.ports.len() as f64)),
        ("rdma_ports_usable", usable, Some(h.usable() as f64)),
    ];
    gauges.into_iter().for_each(|(name, help, value)| o.one(name, "gauge", help, value));
    let devices: Samples = h.devices.iter().map(|(k, n)| (vec![("kind", k.to_string())], *n as f64)).collect();
    let help = "RDMA devices by kind (pf, vf, sf, software, unknown); the node's view counts VFs and SFs but checks only the rest";
    o.family("rdma_devices", "gauge", help, &devices);
    #[rustfmt::skip]
    let gauges = [
        ("gid_index_consistent",
            "1 when every usable RoCE port with a RoCE v2 GID of the wanted family has it at the same index",
            Some(flag(h.gid_consistent))),
        ("gid_index", "The GID index every usable RoCE port agrees on", h.gid_index.map(f64::from)),
        ("memlock_limit_bytes", "Soft RLIMIT_MEMLOCK a process gets here after raising it (+Inf: unlimited)",
            Some(h.memlock_bytes.map_or(f64::INFINITY, |b| b as f64))),
        ("cap_ipc_lock", "1 when CAP_IPC_LOCK is effective for the process that measured memlock",
            h.cap_ipc_lock.map(flag)),
        ("iommu_passthrough", "1 when no RDMA device's IOMMU group is translated (DMA, DMA-FQ); 0 when one is",
            h.iommu_passthrough.map(flag)),
        ("gpudirect_possible", "1 when NVIDIA GPUs are visible and nvidia_peermem is loaded or DMA-BUF is possible",
            Some(flag(h.gpudirect))),
    ];
    gauges.into_iter().for_each(|(name, help, value)| o.one(name, "gauge", help, value));
    let mut checks: Samples = Vec::new();
    for (k, s) in &h.checks {
        let (device, variable) = (k.device.clone().unwrap_or_default(), k.variable.clone().unwrap_or_default());
        let port = k.port.map(|p| p.to_string()).unwrap_or_default();
        let labels = vec![("check", k.id.to_string()), ("device", device), ("port", port), ("variable", variable)];
        checks.push((labels, status_value(*s)));
    }
    o.family("check_status", "gauge", "Each doctor check: 0 pass, 1 warn, 2 fail (ids: docs/doctor.md)", &checks);
    let count = |s| h.checks.values().filter(|c| **c == s).count() as f64;
    let counts: Samples = [Status::Pass, Status::Warn, Status::Fail]
        .map(|s| (vec![("status", status_word(s).to_string())], count(s)))
        .into();
    o.family("checks", "gauge", "Checks by status", &counts);

    let port = |p: &super::PortHealth| vec![("device", p.device.clone()), ("port", p.port.to_string())];
    let mut info: Samples = Vec::new();
    for p in &h.ports {
        let (layer, rate) = (p.link_layer.clone().unwrap_or_default(), p.rate.clone().unwrap_or_default());
        let mut l = port(p);
        l.extend([("kind", p.kind.to_string()), ("link_layer", layer), ("rate", rate)]);
        info.push((l, 1.0));
    }
    let help = "One per RDMA port: its device kind, link layer and rate as sysfs prints them; always 1";
    o.family("port_info", "gauge", help, &info);
    type Figure = fn(&super::PortHealth) -> Option<f64>;
    #[rustfmt::skip]
    let figures: [(&str, &str, Figure); 5] = [
        ("port_state", "ports/N/state as a number: 1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE, 5 ACTIVE_DEFER",
            |p| p.state.map(f64::from)),
        ("port_phys_state",
            "ports/N/phys_state as a number: 2 Polling, 3 Disabled, 5 LinkUp, 6 LinkErrorRecovery, ...",
            |p| p.phys_state.map(f64::from)),
        ("port_usable", "1 when the port counts in rdma_ports_usable", |p| Some(flag(p.usable))),
        ("port_rate_bytes_per_second", "The port's signalling rate from ports/N/rate, in bytes per second",
            |p| super::parse_rate_gbps(p.rate.as_deref()?).map(|g| g * 1e9 / 8.0)),
        ("port_gid_index",
            "The RoCE v2 GID index NCCL would pick on the port (RoCE ports with a GID of the wanted family)",
            |p| p.gid_index.map(f64::from)),
    ];
    for (name, help, f) in figures {
        let samples: Samples = h.ports.iter().filter_map(|p| f(p).map(|v| (port(p), v))).collect();
        o.family(name, "gauge", help, &samples);
    }
    port_counters(&mut o, h);
    if let Some(r) = &h.ring {
        ring(&mut o, r);
    }
    #[rustfmt::skip]
    let agent = [
        ("last_run_timestamp_seconds", "gauge", "When these figures were taken, Unix seconds", Some(round.timestamp)),
        ("round_duration_seconds", "gauge", "Wall time of the agent's last round", round.duration),
        ("interval_seconds", "gauge", "The agent's interval between rounds (before jitter)", round.interval),
        ("rounds_total", "counter", "Rounds the agent has run since it started", round.rounds.map(|n| n as f64)),
        ("agent_cpu_seconds_total", "counter", "CPU time (user and system) the agent has used since it started",
            round.cpu_seconds),
        ("agent_max_rss_bytes", "gauge", "The agent's peak resident set size", round.max_rss_bytes.map(|r| r as f64)),
    ];
    agent.into_iter().for_each(|(name, kind, help, value)| o.one(name, kind, help, value));
    o.text
}

/// A port counter's metric: its family (after `nccl_wrap_`), what it counts, and the factor from
/// the file's unit to the metric's. Its help is `DIR/FILE[ x SCALE]: WHAT`.
struct Named {
    dir: &'static str,
    file: &'static str,
    family: &'static str,
    what: &'static str,
    scale: f64,
}

const fn c(file: &'static str, family: &'static str, what: &'static str) -> Named {
    Named { dir: "counters", file, family, what, scale: 1.0 }
}

const fn hw(file: &'static str, family: &'static str, what: &'static str) -> Named {
    Named { dir: "hw_counters", ..c(file, family, what) }
}

impl Named {
    fn help(&self) -> String {
        let scale = if self.scale == 1.0 { String::new() } else { format!(" x {}", number(self.scale)) };
        format!("{}/{}{scale}: {}", self.dir, self.file, self.what)
    }
}

/// The counters node_exporter's InfiniBand collector has a name for (`node_infiniband_<name>`,
/// collector/infiniband_linux.go, and procfs's sysfs/class_infiniband.go for which file each
/// reads), under our prefix: one metric per counter, so data, packets and errors never share a
/// family. The IBTA data counters count 4-octet words; their metrics are bytes, as node_exporter's.
#[rustfmt::skip]
const NAMED: &[Named] = &[
    Named { scale: 4.0, ..c("port_rcv_data", "port_data_received_bytes_total",
        "data received on the port, bytes (IBTA counts 4-octet words)") },
    Named { scale: 4.0, ..c("port_xmit_data", "port_data_transmitted_bytes_total",
        "data transmitted on the port, bytes (IBTA counts 4-octet words)") },
    c("port_rcv_packets", "port_packets_received_total", "packets received, errors included"),
    c("port_xmit_packets", "port_packets_transmitted_total", "packets transmitted, errors included"),
    c("unicast_rcv_packets", "unicast_packets_received_total", "unicast packets received"),
    c("unicast_xmit_packets", "unicast_packets_transmitted_total", "unicast packets transmitted"),
    c("multicast_rcv_packets", "multicast_packets_received_total", "multicast packets received"),
    c("multicast_xmit_packets", "multicast_packets_transmitted_total", "multicast packets transmitted"),
    c("port_xmit_wait", "port_transmit_wait_total",
        "ticks the port had data to send and sent none (congestion, credit starvation)"),
    c("symbol_error", "symbol_error_total", "minor link errors on the lanes (cable, optics)"),
    c("link_error_recovery", "link_error_recovery_total", "times the link retrained and recovered"),
    c("link_downed", "link_downed_total", "times the link failed to recover and went down"),
    c("port_rcv_errors", "port_errors_received_total", "packets received with an error"),
    c("port_rcv_remote_physical_errors", "port_receive_remote_physical_errors_total",
        "packets received marked bad by the sender (EBP)"),
    c("port_rcv_switch_relay_errors", "port_receive_switch_relay_errors_total", "packets a switch could not forward"),
    c("port_rcv_discards", "port_discards_received_total", "inbound packets discarded (port down or congested)"),
    c("port_xmit_discards", "port_discards_transmitted_total", "outbound packets discarded (port down or congested)"),
    c("port_rcv_constraint_errors", "port_constraint_errors_received_total",
        "inbound packets discarded by partition or filter rules"),
    c("port_xmit_constraint_errors", "port_constraint_errors_transmitted_total",
        "outbound packets not sent by partition or filter rules"),
    c("local_link_integrity_errors", "local_link_integrity_errors_total",
        "times local physical errors crossed their threshold"),
    c("excessive_buffer_overrun_errors", "excessive_buffer_overrun_errors_total",
        "runs of flow-control periods with a buffer overrun"),
    c("VL15_dropped", "vl15_dropped_total", "subnet management packets dropped for lack of resources"),
    hw("duplicate_request", "duplicate_requests_packets_total",
        "requests received again after they were executed (the sender retransmitted)"),
    hw("implied_nak_seq_err", "implied_nak_seq_errors_total",
        "responses with a PSN beyond the expected one (an implied NAK)"),
    hw("local_ack_timeout_err", "local_ack_timeout_errors_total",
        "times a queue pair's ACK timer expired (a retransmission followed)"),
    hw("np_cnp_sent", "np_cnp_packets_sent_total",
        "congestion notification packets sent (ECN-marked RoCE traffic received)"),
    hw("np_ecn_marked_roce_packets", "np_ecn_marked_roce_packets_received_total",
        "RoCE packets received with ECN congestion marks"),
    hw("out_of_buffer", "out_of_buffer_drops_total", "packets dropped for lack of a receive work request"),
    hw("out_of_sequence", "out_of_sequence_packets_received_total",
        "packets received out of sequence (a drop on the path)"),
    hw("packet_seq_err", "packet_sequence_errors_total", "NAK sequence error packets received"),
    hw("req_cqe_error", "req_cqes_errors_total", "requester completions with an error"),
    hw("req_cqe_flush_error", "req_cqes_flush_errors_total", "requester completions flushed with an error"),
    hw("req_remote_access_errors", "req_remote_access_errors_total", "remote access errors the requester saw"),
    hw("req_remote_invalid_request", "req_remote_invalid_request_errors_total",
        "remote invalid request errors the requester saw"),
    hw("resp_cqe_error", "resp_cqes_errors_total", "responder completions with an error"),
    hw("resp_cqe_flush_error", "resp_cqes_flush_errors_total", "responder completions flushed with an error"),
    hw("resp_local_length_error", "resp_local_length_errors_total", "local length errors the responder saw"),
    hw("resp_remote_access_errors", "resp_remote_access_errors_total", "remote access errors the responder saw"),
    hw("rnr_nak_retry_err", "rnr_nak_retry_packets_received_total", "receiver-not-ready NAKs received"),
    hw("roce_adp_retrans", "roce_adp_retransmits_total", "adaptive retransmissions of RoCE traffic"),
    hw("roce_adp_retrans_to", "roce_adp_retransmits_timeout_total", "adaptive retransmission timeouts of RoCE traffic"),
    hw("roce_slow_restart", "roce_slow_restart_used_total", "times RoCE slow restart was used"),
    hw("roce_slow_restart_cnps", "roce_slow_restart_cnps_total", "CNPs RoCE slow restart generated"),
    hw("roce_slow_restart_trans", "roce_slow_restart_total", "times RoCE entered slow restart"),
    hw("rp_cnp_handled", "rp_cnp_packets_handled_total",
        "congestion notification packets the sender acted on (rate lowered)"),
    hw("rp_cnp_ignored", "rp_cnp_ignored_packets_received_total",
        "congestion notification packets received and ignored"),
    hw("rx_atomic_requests", "rx_atomic_requests_total", "atomic requests received"),
    hw("rx_dct_connect", "rx_dct_connect_requests_total", "DCT connection requests received"),
    hw("rx_icrc_encapsulated", "rx_icrc_encapsulated_errors_total", "RoCE packets received with an ICRC error"),
    hw("rx_read_requests", "rx_read_requests_total", "RDMA read requests received"),
    hw("rx_write_requests", "rx_write_requests_total", "RDMA write requests received"),
];

/// The help of a counter [`other_family`] names, after its `DIR/FILE: `.
const OTHER: &str = "a counter of the driver's, as it counts (node_exporter has no name for it)";

/// The family of a counter node_exporter has no name for (rxe's `rcvd_seq_err`):
/// `port_hw_<name>_total` or `port_ibta_<name>_total`, lower-cased; its unit is the driver's, so
/// it is a family of its own, never a label of a shared one.
fn other_family(dir: &str, name: &str) -> String {
    let tag = if dir == "counters" { "ibta" } else { "hw" };
    let name = name.to_ascii_lowercase();
    format!("port_{tag}_{}_total", name.strip_suffix("_total").unwrap_or(&name))
}

/// Every port counter, one family each: known families in the table's order, the others after
/// them by name. A second file giving a family the same port twice (names differing in case) is
/// left out.
fn port_counters(o: &mut Out, h: &Health) {
    let mut families: BTreeMap<(usize, String), (String, Samples)> = BTreeMap::new();
    for p in &h.ports {
        for c in &p.counters {
            let known = NAMED.iter().enumerate().find(|(_, n)| n.dir == c.dir && n.file == c.name);
            let (i, family, help, scale) = match known {
                Some((i, n)) => (i, n.family.to_string(), n.help(), n.scale),
                None => (NAMED.len(), other_family(c.dir, &c.name), format!("{}/{}: {OTHER}", c.dir, c.name), 1.0),
            };
            let labels = vec![("device", p.device.clone()), ("port", p.port.to_string())];
            let (_, samples) = families.entry((i, family)).or_insert_with(|| (help, Vec::new()));
            if !samples.iter().any(|(l, _)| *l == labels) {
                samples.push((labels, c.value as f64 * scale));
            }
        }
    }
    for ((_, name), (help, samples)) in &families {
        o.family(name, "counter", help, samples);
    }
}

/// The last ring round (watch --ring), kept until the next one.
fn ring(o: &mut Out, r: &super::ring::Report) {
    use super::ring::{Outcome, Pair};
    o.one("ring_last_run_timestamp_seconds", "gauge", "When the last ring round ran, Unix seconds", Some(r.timestamp));
    let peers = "Distinct addresses the ring's Service name resolved to in the last ring round";
    o.one("ring_peers", "gauge", peers, Some(r.peers as f64));
    let tested = "1 when the last ring round tested the successor; 0 with the reason (resolve, no-own-address, alone, not-listed)";
    let (next, pairs) = match &r.outcome {
        Outcome::Untested { reason, .. } => {
            return o.family("ring_tested", "gauge", tested, &[(vec![("reason", (*reason).to_string())], 0.0)]);
        }
        Outcome::Tested { next, pairs } => (next, pairs),
    };
    o.family("ring_tested", "gauge", tested, &[(Vec::new(), 1.0)]);
    // Which pair a sample is: the successor, this node's device and port.
    let pair = |p: &Pair| {
        let port = p.port.map(|n| n.to_string()).unwrap_or_default();
        vec![("peer", next.to_string()), ("device", p.device.clone()), ("port", port)]
    };
    let mut samples: Samples = Vec::new();
    for p in pairs {
        let mut labels = pair(p);
        labels.push(("cause", p.cause.unwrap_or_default().to_string()));
        samples.push((labels, status_value(p.status)));
    }
    let help = "Each pair of the last ring round towards the successor (peer): 0 pass, 1 warn (slow-pair: below 70 % of this node's rails' median or of its rated speed), 2 fail, with ping's cause id; no device: the test could not run";
    o.family("ring_pair_status", "gauge", help, &samples);
    // kb/s (the pair test's figures) to bytes per second: x 1000 / 8.
    let figure = |f: fn(&Pair) -> Option<u64>| -> Samples {
        pairs.iter().filter_map(|p| Some((pair(p), f(p)? as f64 * 125.0))).collect()
    };
    let help = "Each passing pair's bandwidth in the last ring round towards the successor (peer), bytes per second: a 200 ms run of 64 KiB RDMA writes, host memory to host memory";
    o.family("ring_pair_bandwidth_bytes_per_second", "gauge", help, &figure(|p| p.kbps));
    let help = "The rated speed of each pair's slower end (the ports' rate), bytes per second; hardware ports only";
    o.family("ring_pair_rate_bytes_per_second", "gauge", help, &figure(|p| p.rated_kbps));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::health::Counter;

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
            "nccl_wrap_out_of_sequence_packets_received_total{device=\"mlx5_0\",port=\"1\"} 17",
            "# TYPE nccl_wrap_out_of_sequence_packets_received_total counter",
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

    #[test]
    fn each_counter_is_a_family_of_its_own_in_base_units() {
        let mut h = super::super::sample();
        h.ports[0].counters = vec![
            Counter { dir: "counters", name: "port_rcv_data".into(), value: 10 },
            Counter { dir: "counters", name: "port_rcv_packets".into(), value: 3 },
            Counter { dir: "counters", name: "symbol_error".into(), value: 2 },
            Counter { dir: "counters", name: "VL15_dropped".into(), value: 1 },
            Counter { dir: "hw_counters", name: "rcvd_seq_err".into(), value: 5 },
            Counter { dir: "hw_counters", name: "RCVD_SEQ_ERR".into(), value: 6 },
            Counter { dir: "counters", name: "new_one_total".into(), value: 7 },
        ];
        h.ports[1].counters = vec![Counter { dir: "counters", name: "port_rcv_data".into(), value: 1 }];
        let text = render(&h, &Round::default());
        for line in [
            "# TYPE nccl_wrap_port_data_received_bytes_total counter",
            "nccl_wrap_port_data_received_bytes_total{device=\"mlx5_0\",port=\"1\"} 40",
            "nccl_wrap_port_data_received_bytes_total{device=\"mlx5_1\",port=\"1\"} 4",
            "nccl_wrap_port_packets_received_total{device=\"mlx5_0\",port=\"1\"} 3",
            "nccl_wrap_symbol_error_total{device=\"mlx5_0\",port=\"1\"} 2",
            "nccl_wrap_vl15_dropped_total{device=\"mlx5_0\",port=\"1\"} 1",
            "# TYPE nccl_wrap_port_hw_rcvd_seq_err_total counter",
            "nccl_wrap_port_hw_rcvd_seq_err_total{device=\"mlx5_0\",port=\"1\"} 5",
            "nccl_wrap_port_ibta_new_one_total{device=\"mlx5_0\",port=\"1\"} 7",
        ] {
            assert!(text.lines().any(|l| l == line), "no line {line:?} in\n{text}");
        }
        assert!(!text.contains("RCVD_SEQ_ERR") && !text.contains("counter=\""), "{text}");
        assert_eq!(
            text.matches("# TYPE nccl_wrap_port_data_received_bytes_total ").count(),
            1,
            "one family, both ports"
        );
        let bytes = text.find("port_data_received_bytes_total{").unwrap_or(usize::MAX);
        assert!(bytes < text.find("port_hw_rcvd_seq_err_total{").unwrap_or(0), "named families first");
    }

    /// promtool's lint (promlint) on every family name the renderer can write, ring included:
    /// a counter ends in `_total`, no name carries its type, no abbreviated or non-base unit.
    #[test]
    fn every_name_passes_promtools_lint_rules() {
        use super::super::ring::{Outcome, Pair, Report};
        let mut h = super::super::sample();
        h.ports[0].counters = NAMED
            .iter()
            .map(|n| Counter { dir: n.dir, name: n.file.into(), value: 1 })
            .chain([Counter { dir: "hw_counters", name: "rcvd_seq_err".into(), value: 1 }])
            .collect();
        let pair = Pair {
            device: "mlx5_0".into(),
            port: Some(1),
            status: Status::Pass,
            cause: None,
            summary: None,
            kbps: Some(380_000_000),
            rated_kbps: Some(400_000_000),
        };
        h.ring = Some(Report {
            timestamp: 1.0,
            peers: 2,
            outcome: Outcome::Tested { next: "10.0.0.2".parse().expect("ip"), pairs: vec![pair] },
        });
        let round = Round {
            timestamp: 1.0,
            duration: Some(0.1),
            rounds: Some(1),
            interval: Some(60.0),
            cpu_seconds: Some(0.5),
            max_rss_bytes: Some(1),
        };
        let text = render(&h, &round);
        assert!(text.contains("nccl_wrap_ring_pair_bandwidth_bytes_per_second{peer=\"10.0.0.2\",device=\"mlx5_0\",port=\"1\"} 47500000000\n"), "{text}");
        assert!(text.contains("nccl_wrap_ring_pair_rate_bytes_per_second{peer=\"10.0.0.2\",device=\"mlx5_0\",port=\"1\"} 50000000000\n"), "{text}");
        let types: Vec<(&str, &str)> =
            text.lines().filter_map(|l| l.strip_prefix("# TYPE ")).filter_map(|l| l.split_once(' ')).collect();
        assert!(types.len() > NAMED.len() + 20, "{types:?}");
        for (name, kind) in types {
            assert!(name.starts_with("nccl_wrap_"), "{name}");
            assert_eq!(kind == "counter", name.ends_with("_total"), "{name} is a {kind}");
            for t in ["counter", "gauge", "histogram", "summary"] {
                assert!(!name.contains(&format!("_{t}_")) && !name.ends_with(&format!("_{t}")), "{name} names a type");
            }
            for unit in [
                "gbps",
                "mbps",
                "kbps",
                "bits",
                "milliseconds",
                "microseconds",
                "kilobytes",
                "megabytes",
                "gigabytes",
                "minutes",
                "hours",
                "percent",
            ] {
                assert!(!name.split('_').any(|w| w == unit), "{name}: {unit} is not a base unit");
            }
            for abbr in ["s", "ms", "us", "ns", "sec", "b", "kb", "mb", "gb", "tb", "pb", "m", "h", "d"] {
                assert!(
                    !name.contains(&format!("_{abbr}_")) && !name.ends_with(&format!("_{abbr}")),
                    "{name}: abbreviated unit {abbr}"
                );
            }
            assert_eq!(name, name.to_ascii_lowercase(), "{name} is not snake_case");
        }
    }
}
