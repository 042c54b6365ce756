//! The wire format's round trips and every decode error, from realistic and hostile frames.

use super::*;

pub(crate) fn roce_port(dev: &str, last: u8) -> PortInfo {
    PortInfo {
        device: dev.into(),
        port: 1,
        link_layer: LinkLayer::Ethernet,
        gid_index: Some(3),
        gid: Some(format!("0000:0000:0000:0000:0000:ffff:0a00:6a{last:02x}")),
        gid_type: Some("RoCE v2".into()),
        lid: None,
        mtu: 4096,
        pkey: None,
        netdev: Some("net1".into()),
        rate_kbps: None,
    }
}

fn hello() -> Hello {
    Hello {
        host: "train-0.train".into(),
        ports: vec![roce_port("mlx5_6", 7), roce_port("mlx5_7", 7)],
        all_pairs: false,
        bytes: 1 << 20,
        iters: 1000,
        duration_ms: 1000,
        gate: None,
    }
}

fn frame(kind: u8, payload: &[u8]) -> Vec<u8> {
    let mut f = MAGIC.to_vec();
    f.push(VERSION);
    f.push(kind);
    f.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    f.extend_from_slice(payload);
    f
}

#[test]
fn every_kind_round_trips() {
    let fault =
        Fault { step: "RTR".into(), error: "EINVAL: Invalid argument".into(), wc_status: None, errno: Some(22) };
    let msgs = vec![
        Message::Hello(hello()),
        Message::Setup(vec![
            QpInfo { pair: 0, qpn: 0x11, psn: 0xabcdef, addr: 0x7f00_0000_1000, rkey: 7, fault: None },
            QpInfo { pair: 1, qpn: 0, psn: 0, addr: 0, rkey: 0, fault: Some(fault.clone()) },
        ]),
        Message::Ready(vec![
            PairState { pair: 0, fault: None, figures: None },
            PairState { pair: 1, fault: Some(fault), figures: None },
        ]),
        Message::Done(vec![PairState {
            pair: 0,
            fault: None,
            figures: Some(Figures { median_us: Some(5.1), p99_us: Some(7.0), gbps: Some(46.2) }),
        }]),
        Message::Refuse("busy".into()),
    ];
    for m in msgs {
        let bytes = encode(&m).expect("encode");
        assert_eq!(decode(&bytes), Ok(m));
    }
}

#[test]
fn truncated_and_foreign_frames_are_named() {
    assert_eq!(decode(b"NCWPI"), Err(WireError::Short { got: 5 }));
    assert!(matches!(decode(b"GET / HTTP/1.1\r\n\r\n"), Err(WireError::Magic(_))));
    let mut f = frame(1, b"{}");
    f[7] = 9;
    assert_eq!(decode(&f), Err(WireError::Version { got: 9 }));
    assert_eq!(decode(&frame(0, b"")), Err(WireError::Kind(0)));
    assert_eq!(decode(&frame(10, b"")), Err(WireError::Kind(10)));
    let mut f = frame(1, b"");
    f[9..13].copy_from_slice(&u32::MAX.to_be_bytes());
    assert_eq!(decode(&f), Err(WireError::TooLong(u64::from(u32::MAX))));
    let mut f = frame(5, b"\"abc\"");
    f.truncate(f.len() - 1);
    assert_eq!(decode(&f), Err(WireError::Length { declared: 5, got: 4 }));
    let mut f = frame(5, b"\"abc\"");
    f.push(b' ');
    assert!(matches!(decode(&f), Err(WireError::Length { .. })));
}

#[test]
fn bad_json_and_unknown_fields_are_refused() {
    assert!(matches!(decode(&frame(1, b"\xff\xfe")), Err(WireError::Json { kind: "hello", .. })));
    assert!(matches!(decode(&frame(2, b"{\"pair\":0}")), Err(WireError::Json { kind: "setup", .. })));
    let mut v = serde_json::to_value(hello()).expect("value");
    v["extra"] = serde_json::json!(1);
    let f = frame(1, v.to_string().as_bytes());
    assert!(matches!(decode(&f), Err(WireError::Json { .. })));
}

#[test]
fn every_field_is_range_checked() {
    let bad = |f: &dyn Fn(&mut Hello), want: &str| {
        let mut h = hello();
        f(&mut h);
        let payload = serde_json::to_vec(&h).expect("json");
        match decode(&frame(1, &payload)) {
            Err(WireError::Field { field, .. }) => assert_eq!(field, want),
            other => panic!("{want}: {other:?}"),
        }
    };
    bad(&|h| h.host = "a b".into(), "hello.host");
    bad(&|h| h.ports.clear(), "hello.ports");
    bad(&|h| h.ports = vec![roce_port("m", 1); 33], "hello.ports");
    bad(&|h| h.bytes = 0, "bytes");
    bad(&|h| h.bytes = u32::MAX, "bytes");
    bad(&|h| h.iters = 0, "iters");
    bad(&|h| h.duration_ms = 3_600_000, "duration_ms");
    bad(&|h| h.ports[0].device = "mlx5_0;rm -rf /".into(), "port.device");
    bad(&|h| h.ports[0].device = "\u{1b}[2J".into(), "port.device");
    bad(&|h| h.ports[0].netdev = Some(String::new()), "port.netdev");
    bad(&|h| h.ports[0].port = 0, "port.port");
    bad(&|h| h.ports[0].mtu = 1500, "port.mtu");
    bad(&|h| h.ports[0].gid = Some("10.0.0.1".into()), "port.gid");
    bad(&|h| h.ports[0].gid = None, "port.gid");
    bad(&|h| h.ports[0].gid_index = None, "port.gid_index");
    bad(&|h| h.ports[0].gid_type = Some("RoCE v9".into()), "port.gid_type");
    bad(
        &|h| {
            h.ports[0].link_layer = LinkLayer::InfiniBand;
            h.ports[0].lid = None;
        },
        "port.lid",
    );
    bad(
        &|h| {
            h.ports[0].link_layer = LinkLayer::InfiniBand;
            h.ports[0].lid = Some(0xc001);
        },
        "port.lid",
    );
}

#[test]
fn queue_pair_fields_and_pair_order_are_checked() {
    let qp = |pair, qpn, psn| QpInfo { pair, qpn, psn, addr: 1, rkey: 1, fault: None };
    let check = |m: Message, want: &str| match decode(&frame(m.kind(), &payload_of(&m))) {
        Err(WireError::Field { field, .. }) => assert_eq!(field, want),
        other => panic!("{want}: {other:?}"),
    };
    check(Message::Setup(vec![qp(0, 1 << 24, 0)]), "setup.qpn");
    check(Message::Setup(vec![qp(0, 1, 1 << 24)]), "setup.psn");
    check(Message::Setup(vec![qp(1, 1, 1)]), "setup.pair");
    check(
        Message::Ready(vec![
            PairState { pair: 0, fault: None, figures: None },
            PairState { pair: 0, fault: None, figures: None },
        ]),
        "pair",
    );
    check(Message::Done(vec![PairState { pair: 0, fault: None, figures: None }; MAX_PAIRS + 1]), "pairs");
    check(Message::Refuse("x".repeat(MAX_TEXT + 1)), "refuse");
    let nan = Figures { median_us: Some(f64::NAN), p99_us: None, gbps: None };
    // NaN is not JSON: serde writes null, which decodes as no figure; a negative one is refused.
    let neg = Figures { median_us: None, p99_us: None, gbps: Some(-1.0) };
    check(Message::Done(vec![PairState { pair: 0, fault: None, figures: Some(neg) }]), "figures");
    let m = Message::Done(vec![PairState { pair: 0, fault: None, figures: Some(nan) }]);
    assert!(matches!(decode(&frame(4, &payload_of(&m))), Ok(Message::Done(_))));
    let long = Fault { step: "x".into(), error: "e".repeat(MAX_TEXT + 1), wc_status: None, errno: None };
    check(Message::Ready(vec![PairState { pair: 0, fault: Some(long), figures: None }]), "fault.error");
}

fn payload_of(m: &Message) -> Vec<u8> {
    match m {
        Message::Hello(h) => serde_json::to_vec(h),
        Message::Setup(q) => serde_json::to_vec(q),
        Message::Ready(s) | Message::Done(s) => serde_json::to_vec(s),
        Message::Refuse(r) => serde_json::to_vec(r),
    }
    .expect("json")
}

#[test]
fn encode_refuses_what_decode_would() {
    let mut h = hello();
    h.ports[0].mtu = 9000;
    assert!(encode(&Message::Hello(h)).is_err());
}

#[test]
fn gids_parse_in_sysfs_form_only() {
    let g = parse_gid("0000:0000:0000:0000:0000:ffff:0a00:6a07").expect("gid");
    assert_eq!(&g[10..], &[0xff, 0xff, 10, 0, 0x6a, 7]);
    assert!(parse_gid("::ffff:10.0.106.7").is_none());
    assert!(parse_gid("0000:0000:0000:0000:0000:ffff:0a00").is_none());
    assert!(parse_gid("000g:0000:0000:0000:0000:ffff:0a00:6a07").is_none());
    assert!(parse_gid("+000:0000:0000:0000:0000:ffff:0a00:6a07").is_none());
}

#[test]
fn a_tagged_hello_round_trips_and_its_tag_is_checked() {
    let mut tagged = hello();
    tagged.gate = Some(Tag { job: "uid-1".into(), rank: 3, mac: None });
    let f = encode(&Message::Hello(tagged.clone())).expect("encode");
    assert_eq!(decode(&f).expect("decode"), Message::Hello(tagged));
    // Plain ping's hello carries no tag, so older peers read it as before.
    let plain = encode(&Message::Hello(hello())).expect("encode");
    assert!(!String::from_utf8_lossy(&plain).contains("gate"));
    let check = |h: Hello, want: &str| match decode(&frame(1, &payload_of(&Message::Hello(h)))) {
        Err(WireError::Field { field, .. }) => assert_eq!(field, want),
        other => panic!("{want}: {other:?}"),
    };
    let mut h = hello();
    h.gate = Some(Tag { job: "x\ny".into(), rank: 0, mac: None });
    check(h, "job");
    let mut h = hello();
    h.gate = Some(Tag { job: "j".into(), rank: MAX_JOB_SIZE, mac: None });
    check(h, "hello.gate.rank");
    let mut h = hello();
    h.gate = Some(Tag { job: "j".into(), rank: 0, mac: Some("ff".repeat(31)) });
    check(h, "hello.gate.mac");
}

#[test]
fn the_front_ends_kinds_are_unknown_here() {
    // The gate's kinds (6 to 9) are the gate's protocol's: the pair test alone refuses them from
    // the header, as any kind it does not speak.
    for kind in 6..=9 {
        assert_eq!(decode(&frame(kind, b"{}")), Err(WireError::Kind(kind)));
    }
}
