//! Each cause from the facts that make it: which fault on which end, and what the ports and the
//! plan say; and the order in which causes are tried.

use super::super::route::reach;
use super::super::route::tests::parse;
use super::*;
use std::net::Ipv4Addr;

fn roce(dev: &str, gid: &str, netdev: &str) -> PortInfo {
    PortInfo {
        device: dev.into(),
        port: 1,
        link_layer: LinkLayer::Ethernet,
        gid_index: Some(3),
        gid: Some(gid.into()),
        gid_type: Some("RoCE v2".into()),
        lid: None,
        mtu: 4096,
        pkey: None,
        netdev: Some(netdev.into()),
        rate_kbps: None,
    }
}

fn ib(lid: u16, pkey: u16) -> PortInfo {
    PortInfo {
        device: "mlx5_0".into(),
        port: 1,
        link_layer: LinkLayer::InfiniBand,
        gid_index: None,
        gid: None,
        gid_type: None,
        lid: Some(lid),
        mtu: 4096,
        pkey: Some(pkey),
        netdev: None,
        rate_kbps: None,
    }
}

const RAIL0_A: &str = "0000:0000:0000:0000:0000:ffff:0a00:6a07";
const RAIL0_B: &str = "0000:0000:0000:0000:0000:ffff:0a00:6a08";
const RAIL1_B: &str = "0000:0000:0000:0000:0000:ffff:0a00:6b08";
const IPV6: &str = "fd00:0000:0000:0106:0000:0000:0000:0008";

fn fault(step: &str, error: &str, wc: Option<u32>, errno: Option<i32>) -> Fault {
    Fault { step: step.into(), error: error.into(), wc_status: wc, errno }
}

fn facts<'a>(l: &'a PortInfo, r: &'a PortInfo, lf: Option<&'a Fault>, rf: Option<&'a Fault>) -> PairFacts<'a> {
    PairFacts {
        local: l,
        remote: r,
        local_fault: lf,
        remote_fault: rf,
        reach: None,
        path_mtu: l.mtu.min(r.mtu),
        plan_gid: None,
    }
}

fn plan_gid(gid: &str, owner: Owner) -> PlanGid {
    PlanGid {
        device: "rxe0".into(),
        port: 1,
        index: 3,
        gid: gid.into(),
        address: "10.0.106.7".into(),
        owner: Some(owner),
    }
}

#[test]
fn a_completion_error_from_a_neighbours_gid_is_named_so_not_firmware() {
    let (l, r) = (roce("rxe0", RAIL0_A, "net1"), roce("rxe0", RAIL0_B, "net1"));
    let qp_err = fault("latency", "IBV_WC_LOC_QP_OP_ERR (vendor_err 0x0) on SEND", Some(2), None);
    let theirs = plan_gid(RAIL0_A, Owner::Other);
    let c = classify(&PairFacts { plan_gid: Some(&theirs), ..facts(&l, &r, Some(&qp_err), None) }).expect("cause");
    assert_eq!(c.id, "foreign-gid", "{c:?}");
    assert!(c.summary.contains("another namespace's address, not this pod's"), "{}", c.summary);
    let host = plan_gid(RAIL0_A, Owner::Host);
    let c = classify(&PairFacts { plan_gid: Some(&host), ..facts(&l, &r, Some(&qp_err), None) }).expect("cause");
    assert!(c.summary.contains("the host's address"), "{}", c.summary);
    // The pod's own entry: the usual classification (here, outside the usual ones).
    let mine = plan_gid(RAIL0_A, Owner::Pod);
    let c = classify(&PairFacts { plan_gid: Some(&mine), ..facts(&l, &r, Some(&qp_err), None) }).expect("cause");
    assert_eq!(c.id, "qp-transition");
    // The remote end's completion error is the remote's to name; its RTR, which resolves this
    // end's GID, is this end's source.
    let c = classify(&PairFacts { plan_gid: Some(&theirs), ..facts(&l, &r, None, Some(&qp_err)) }).expect("cause");
    assert_ne!(c.id, "foreign-gid");
    let rtr = fault("RTR", "ETIMEDOUT: Connection timed out (os error 110)", None, Some(110));
    let c = classify(&PairFacts { plan_gid: Some(&theirs), ..facts(&l, &r, None, Some(&rtr)) }).expect("cause");
    assert_eq!(c.id, "foreign-gid", "{c:?}");
}

#[test]
fn a_source_gid_that_changed_since_the_plan_is_named_vanished() {
    let (l, r) = (roce("rxe0", RAIL0_A, "net1"), roce("rxe0", RAIL0_B, "net1"));
    let before = plan_gid(RAIL1_B, Owner::Pod);
    let c = classify(&PairFacts { plan_gid: Some(&before), ..facts(&l, &r, Some(&retry()), None) }).expect("cause");
    assert_eq!(c.id, "gid-vanished", "{c:?}");
    assert!(c.summary.contains(&format!("index 3 held {RAIL1_B}")), "{}", c.summary);
}

fn retry() -> Fault {
    fault("bandwidth", "IBV_WC_RETRY_EXC_ERR (vendor_err 0x81) on RDMA WRITE", Some(wc::RETRY_EXC_ERR), None)
}

#[test]
fn a_clean_pair_has_no_cause_and_differing_mtus_warn() {
    let (a, mut b) = (roce("mlx5_6", RAIL0_A, "net1"), roce("mlx5_6", RAIL0_B, "net1"));
    assert_eq!(classify(&facts(&a, &b, None, None)), None);
    b.mtu = 1024;
    let c = classify(&facts(&a, &b, None, None)).expect("warn");
    assert_eq!((c.id, c.status), ("mtu-mismatch", Status::Warn));
    assert!(c.summary.contains("path MTU 1024"), "{}", c.summary);
    assert_eq!(c.evidence["path_mtu_bytes"], 1024);
}

#[test]
fn gid_family_or_roce_version_differs() {
    let a = roce("mlx5_6", RAIL0_A, "net1");
    let b = roce("mlx5_6", IPV6, "net1");
    let t = fault("latency", "IBV_WC_RETRY_EXC_ERR", Some(wc::RETRY_EXC_ERR), None);
    let c = classify(&facts(&a, &b, Some(&t), None)).expect("cause");
    assert_eq!(c.id, "gid-mismatch");
    assert!(c.summary.contains("IPv4") && c.summary.contains("IPv6"), "{}", c.summary);
    let mut v1 = roce("mlx5_6", RAIL0_B, "net1");
    v1.gid_type = Some("IB/RoCE v1".into());
    let c = classify(&facts(&a, &v1, Some(&t), None)).expect("cause");
    assert_eq!(c.id, "gid-mismatch");
    assert!(c.summary.contains("RoCE v2") && c.summary.contains("IB/RoCE v1"), "{}", c.summary);
    let c = classify(&facts(&a, &ib(7, 0xffff), Some(&t), None)).expect("cause");
    assert_eq!(c.id, "gid-mismatch");
    assert!(c.summary.contains("link layers differ"));
}

#[test]
fn wrong_rail_pairing_is_no_route_with_the_routes_as_evidence() {
    let routes = parse(super::super::route::tests::POD_ROUTES);
    let verdict = reach(&routes, "net1", Ipv4Addr::new(10, 0, 107, 8));
    let a = roce("mlx5_6", RAIL0_A, "net1");
    let b = roce("mlx5_7", RAIL1_B, "net2");
    let t = retry();
    let mut f = facts(&a, &b, Some(&t), None);
    f.reach = Some(&verdict);
    let c = classify(&f).expect("cause");
    assert_eq!(c.id, "no-route");
    assert_eq!(c.evidence["peer_address"], "10.0.107.8");
    assert!(c.evidence["best_route"].as_str().is_some_and(|s| s.contains("dev net2")), "{:?}", c.evidence);
    assert_eq!(c.evidence["error"], t.error);
}

#[test]
fn retry_exceeded_on_a_routed_path_blames_the_path() {
    let routes = parse(super::super::route::tests::POD_ROUTES);
    let verdict = reach(&routes, "net1", Ipv4Addr::new(10, 0, 106, 8));
    let (a, b) = (roce("mlx5_6", RAIL0_A, "net1"), roce("mlx5_6", RAIL0_B, "net1"));
    let t = retry();
    let mut f = facts(&a, &b, Some(&t), None);
    f.reach = Some(&verdict);
    let c = classify(&f).expect("cause");
    assert_eq!((c.id, c.status), ("retry-exceeded", Status::Fail));
    assert!(c.hint.contains("PFC") && c.hint.contains("VLAN"));
    assert_eq!(c.evidence["side"], "local");
}

#[test]
fn no_completion_is_a_timeout() {
    let (a, b) = (roce("mlx5_6", RAIL0_A, "net1"), roce("mlx5_6", RAIL0_B, "net1"));
    let t = fault("timeout", "no completion for SEND/RECV before the deadline", None, None);
    assert_eq!(classify(&facts(&a, &b, Some(&t), None)).map(|c| c.id), Some("timeout"));
}

#[test]
fn a_refused_transition_names_the_attributes() {
    let (a, b) = (roce("mlx5_6", RAIL0_A, "net1"), roce("mlx5_6", RAIL0_B, "net1"));
    let t = fault("RTR", "ENETUNREACH: Network is unreachable (os error 101)", None, Some(101));
    let c = classify(&facts(&a, &b, None, Some(&t))).expect("cause");
    assert_eq!(c.id, "qp-transition");
    assert!(c.summary.contains("remote end") && c.summary.contains("INIT->RTR"), "{}", c.summary);
    assert!(c.summary.contains("path MTU") && c.summary.contains("GID"));
}

#[test]
fn local_protection_error_is_the_iommu() {
    let (a, b) = (roce("mlx5_6", RAIL0_A, "net1"), roce("mlx5_6", RAIL0_B, "net1"));
    let t = fault("bandwidth", "IBV_WC_LOC_PROT_ERR (vendor_err 0x56) on RDMA WRITE", Some(wc::LOC_PROT_ERR), None);
    let c = classify(&facts(&a, &b, Some(&t), None)).expect("cause");
    assert_eq!(c.id, "iommu");
    assert!(c.hint.contains("iommu=pt"));
}

#[test]
fn refused_registration_is_memlock_on_either_end() {
    let (a, b) = (roce("mlx5_6", RAIL0_A, "net1"), roce("mlx5_6", RAIL0_B, "net1"));
    let t = fault("reg_mr", "ENOMEM: Cannot allocate memory (os error 12)", None, Some(12));
    let c = classify(&facts(&a, &b, None, Some(&t))).expect("cause");
    assert_eq!(c.id, "memlock");
    assert!(c.summary.contains("remote end") && c.hint.contains("IPC_LOCK"));
    let t = fault("reg_mr", "EFAULT: Bad address (os error 14)", None, Some(14));
    assert_eq!(classify(&facts(&a, &b, Some(&t), None)).map(|c| c.id), Some("no-port"));
}

#[test]
fn infiniband_partition_keys_must_match() {
    let t = retry();
    let c = classify(&facts(&ib(3, 0xffff), &ib(4, 0x8001), Some(&t), None)).expect("cause");
    assert_eq!(c.id, "pkey-mismatch");
    assert!(c.summary.contains("0xffff") && c.summary.contains("0x8001"));
    let c = classify(&facts(&ib(3, 0x0001), &ib(4, 0x0001), Some(&t), None)).expect("cause");
    assert!(c.summary.contains("limited members"), "{}", c.summary);
    let c = classify(&facts(&ib(3, 0xffff), &ib(4, 0x7fff), Some(&t), None)).expect("cause");
    assert_eq!(c.id, "retry-exceeded");
}

#[test]
fn the_peer_rejecting_work_and_unknown_steps_blame_the_peer() {
    let (a, b) = (roce("mlx5_6", RAIL0_A, "net1"), roce("mlx5_6", RAIL0_B, "net1"));
    let t = fault("latency", "IBV_WC_RNR_RETRY_EXC_ERR", Some(wc::RNR_RETRY_EXC_ERR), None);
    assert_eq!(classify(&facts(&a, &b, Some(&t), None)).map(|c| c.id), Some("peer"));
    let t = fault("exchange", "the peer closed the connection", None, None);
    assert_eq!(classify(&facts(&a, &b, None, Some(&t))).map(|c| c.id), Some("peer"));
    let t = fault("open", "rxe0 is not listed by ibverbs", None, None);
    assert_eq!(classify(&facts(&a, &b, Some(&t), None)).map(|c| c.id), Some("no-port"));
}

#[test]
fn causes_serialise_in_doctors_form() {
    let (a, b) = (roce("mlx5_6", RAIL0_A, "net1"), roce("mlx5_6", RAIL0_B, "net1"));
    let t = retry();
    let c = classify(&facts(&a, &b, Some(&t), None)).expect("cause");
    let v = serde_json::to_value(&c).expect("json");
    let keys: Vec<&str> = v.as_object().expect("object").keys().map(String::as_str).collect();
    assert_eq!(keys, ["evidence", "hint", "id", "summary"]);
    assert_eq!(v["evidence"]["local"]["device"], "mlx5_6:1");
    assert_eq!(v["evidence"]["remote"]["gid"], RAIL0_B);
}
