//! What a moved port counter usually means, one line per name (kernel, mlx5 and rxe counters).
//! Pure data; a line must never claim more than the counter shows.

use serde::Serialize;

/// How a counter reads when it moves, in the order a report lists them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Kind {
    /// Something went wrong on the link, the path or a queue pair.
    Error,
    /// The fabric slowed senders down (ECN, CNPs, waits): load, not a fault.
    Congestion,
    /// A name not in this table.
    Unknown,
    /// Packets and bytes: moves whenever the job communicates.
    Traffic,
}

/// The kind of counter `name` (bare, without its group) and what its moving usually means.
pub(crate) fn of(name: &str) -> (Kind, Option<&'static str>) {
    let known = TABLE.iter().find(|(n, _, _)| *n == name);
    known.map_or((Kind::Unknown, None), |(_, kind, text)| (*kind, (!text.is_empty()).then_some(*text)))
}

use Kind::{Congestion, Error, Traffic};

const TABLE: &[(&str, Kind, &str)] = &[
    // InfiniBand port counters (ports/N/counters; rxe keeps link_downed in hw_counters).
    ("link_downed", Error, "the link went down: cable, transceiver or switch port, a peer that reset, or (Soft-RoCE) its net device set down"),
    ("link_error_recovery", Error, "the link retrained after errors: a marginal cable or transceiver"),
    ("symbol_error", Error, "bit errors on the wire: a dirty or failing cable or transceiver"),
    ("port_rcv_errors", Error, "malformed packets received (bad CRC or length): a bad cable or a faulty sender"),
    ("port_rcv_remote_physical_errors", Error, "packets that arrived marked bad by an earlier hop: a fault elsewhere on the path"),
    ("port_rcv_switch_relay_errors", Error, "packets the switch could not forward: a routing problem in the fabric"),
    ("port_xmit_discards", Error, "outgoing packets dropped: the link was down, or blocked too long by congestion"),
    ("port_xmit_constraint_errors", Error, "outgoing packets dropped by partition or filter checks"),
    ("port_rcv_constraint_errors", Error, "incoming packets dropped by partition or filter checks"),
    ("local_link_integrity_errors", Error, "the link passed its physical error threshold: cable or transceiver"),
    ("excessive_buffer_overrun_errors", Error, "receive buffer overruns: link-level flow control is not working"),
    ("VL15_dropped", Error, "subnet management packets dropped: usually harmless, unless the subnet manager is struggling"),
    ("port_xmit_wait", Congestion, "time the port had data to send but no credit: congestion or a slow receiver"),
    ("port_xmit_data", Traffic, ""),
    ("port_rcv_data", Traffic, ""),
    ("port_xmit_packets", Traffic, ""),
    ("port_rcv_packets", Traffic, ""),
    ("unicast_xmit_packets", Traffic, ""),
    ("unicast_rcv_packets", Traffic, ""),
    ("multicast_xmit_packets", Traffic, ""),
    ("multicast_rcv_packets", Traffic, ""),
    // mlx5 hw_counters.
    ("local_ack_timeout_err", Error, "sent packets were never acknowledged in time: the path drops RoCE, the peer is gone, or congestion is severe"),
    ("out_of_sequence", Error, "packets arrived out of order: drops on the path (each one forces a retransmission)"),
    ("packet_seq_err", Error, "the peer saw a gap in the packet sequence and NAKed it: loss on the path"),
    ("implied_nak_seq_err", Error, "a response implied that packets were lost: loss on the path"),
    ("rnr_nak_retry_err", Error, "the peer had no receive buffer posted for too long (RNR retries exhausted): the peer process stalled or died"),
    ("duplicate_request", Error, "requests received twice: the peer retransmitted because its ACKs were lost or late"),
    ("out_of_buffer", Error, "packets dropped because no receive buffer was posted: a receiver that fell behind"),
    ("req_cqe_error", Error, "work requests this side sent completed in error"),
    ("resp_cqe_error", Error, "work requests this side received completed in error"),
    ("req_cqe_flush_error", Error, "send work requests flushed: a queue pair had already failed (follows another error)"),
    ("resp_cqe_flush_error", Error, "receive work requests flushed: a queue pair had already failed (follows another error)"),
    ("req_remote_access_errors", Error, "the peer refused an RDMA access (key or bounds): a registration or program bug"),
    ("resp_remote_access_errors", Error, "this side refused a peer's RDMA access (key or bounds): a registration or program bug"),
    ("req_remote_invalid_request", Error, "the peer rejected a request as invalid"),
    ("resp_local_length_error", Error, "a message was larger than the receive buffer posted for it"),
    ("rx_icrc_encapsulated", Error, "RoCE packets with a bad checksum (ICRC): corruption on the path"),
    ("roce_adp_retrans", Error, "adaptive retransmissions: packets were lost"),
    ("roce_adp_retrans_to", Error, "adaptive retransmissions after a timeout: packets were lost"),
    ("roce_slow_restart", Congestion, "senders restarted slowly after a timeout: loss or heavy congestion"),
    ("roce_slow_restart_cnps", Congestion, "congestion notifications during a slow restart"),
    ("roce_slow_restart_trans", Congestion, "transitions into slow restart"),
    ("np_cnp_sent", Congestion, "congestion notifications sent: ECN-marked packets arrived, the path towards this port is congested"),
    ("np_ecn_marked_roce_packets", Congestion, "ECN-marked RoCE packets received: the path towards this port is congested"),
    ("rp_cnp_handled", Congestion, "congestion notifications received: this port's senders were slowed down (DCQCN)"),
    ("rp_cnp_ignored", Congestion, "congestion notifications received and ignored"),
    ("rx_write_requests", Traffic, ""),
    ("rx_read_requests", Traffic, ""),
    ("rx_atomic_requests", Traffic, ""),
    ("rx_dct_connect", Traffic, ""),
    // rxe (Soft-RoCE) hw_counters.
    ("retry_exceeded_err", Error, "a queue pair gave up after its retries (IBV_WC_RETRY_EXC_ERR): the path drops RoCE or the peer is gone"),
    ("completer_retry_err", Error, "sent packets were retransmitted after an ACK timeout: the path drops RoCE or the peer is gone"),
    ("retry_rnr_exceeded_err", Error, "the peer had no receive buffer posted for too long (RNR retries exhausted): the peer process stalled or died"),
    ("rcvd_rnr_err", Error, "receiver-not-ready NAKs received: the peer had no receive buffer posted"),
    ("send_rnr_err", Error, "receiver-not-ready NAKs sent: this side had no receive buffer posted"),
    ("rcvd_seq_err", Error, "sequence-error NAKs received: the peer missed packets, loss on the path"),
    ("out_of_seq_request", Error, "requests arrived out of sequence: drops on the path"),
    ("send_err", Error, "RoCE packets the kernel refused or dropped on send: larger than the net device's MTU, no route, the device down, or a filter (tc, a firewall) dropping UDP 4791"),
    ("sent_pkts", Traffic, ""),
    ("rcvd_pkts", Traffic, ""),
    ("rdma_sends", Traffic, ""),
    ("rdma_recvs", Traffic, ""),
    ("ack_deferred", Traffic, ""),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_names_the_issue_lists_all_have_a_meaning() {
        for name in [
            "link_downed",
            "symbol_error",
            "port_rcv_errors",
            "port_xmit_discards",
            "local_ack_timeout_err",
            "retry_exceeded_err",
            "out_of_sequence",
            "out_of_seq_request",
            "packet_seq_err",
            "rnr_nak_retry_err",
            "np_cnp_sent",
            "rp_cnp_handled",
        ] {
            let (kind, text) = of(name);
            assert!(matches!(kind, Kind::Error | Kind::Congestion), "{name}: {kind:?}");
            assert!(text.is_some_and(|t| t.len() > 20), "{name}");
        }
    }

    #[test]
    fn traffic_has_no_meaning_line_and_unknown_names_are_unknown() {
        assert_eq!(of("sent_pkts"), (Kind::Traffic, None));
        assert_eq!(of("port_xmit_data"), (Kind::Traffic, None));
        assert_eq!(of("some_new_counter"), (Kind::Unknown, None));
    }

    #[test]
    fn every_name_is_listed_once_and_errors_say_something() {
        for (i, (name, kind, text)) in TABLE.iter().enumerate() {
            assert!(!TABLE[i + 1..].iter().any(|(n, _, _)| n == name), "{name} twice");
            assert_eq!(text.is_empty(), *kind == Kind::Traffic, "{name}");
        }
    }
}
