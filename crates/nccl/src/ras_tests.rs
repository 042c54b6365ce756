//! The RAS reply parser's tests, on the captured replies of fixtures/ras/.
use super::*;

fn fixture(name: &str) -> String {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/ras").join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn a_healthy_job_says_nothing_in_both_formats() {
    for name in ["healthy.txt", "healthy.json.txt"] {
        let v = parse(&fixture(name)).expect(name);
        assert_eq!(v.protocol, Some(2), "{name}");
        assert_eq!(v.nccl_version.as_deref(), Some("2.28.9"), "{name}");
        assert!(v.findings.is_empty(), "{name}: {:?}", v.findings);
        assert!(v.lines().is_empty());
    }
    let v = parse(&fixture("healthy.json.txt")).expect("json");
    assert_eq!(v.progress, vec![Progress { comm: "bd32b62ccae805e0".into(), ranks: 2, collectives: 170 }]);
}

#[test]
fn a_stopped_rank_is_named_missing_then_dead_with_pid_node_and_gpu() {
    let v = parse(&fixture("stopped-incomplete.txt")).expect("text");
    assert_eq!(v.lines(), ["rank 1 (pid 610 on node 127.0.0.1, GPU 0) not answering: RAS has no data from it (stopped, hung, or just died)"]);
    let v = parse(&fixture("stopped-dead.txt")).expect("text");
    assert_eq!(v.lines(), ["rank 1 (pid 610 on node 127.0.0.1, GPU 0) dead: unreachable via NCCL's RAS network"]);
}

#[test]
fn the_json_of_2_28_is_repaired_and_says_the_same() {
    let raw = fixture("stopped-dead.json.txt");
    let body = &raw[raw.find('{').expect("json")..];
    assert!(serde_json::from_str::<serde_json::Value>(body).is_err(), "the capture is the invalid JSON NCCL prints");
    let v = parse(&raw).expect("repaired");
    assert_eq!(v.lines(), ["rank 1 (pid 610 on node 127.0.0.1, GPU 0) dead: unreachable via NCCL's RAS network"]);
    let v = parse(&fixture("stopped-incomplete.json.txt")).expect("repaired");
    assert_eq!(v.findings[0].kind, Kind::Missing);
}

#[test]
fn a_killed_rank_and_the_survivors_async_error_are_both_said() {
    let v = parse(&fixture("killed.txt")).expect("text");
    let lines = v.lines();
    assert_eq!(lines[0], "rank 1 (pid 865 on node 127.0.0.1, GPU 0) not answering: RAS has no data from it (stopped, hung, or just died)");
    assert_eq!(
        lines[1],
        "rank 0 (pid 864 on node 127.0.0.1, GPU 0) reported Remote process error in communicator 74cb8877f2813ea2"
    );
    assert_eq!(lines.len(), 2, "{lines:?}");
    let j = parse(&fixture("killed.json.txt")).expect("json");
    assert_eq!(j.findings.iter().map(|f| f.kind).collect::<Vec<_>>(), [Kind::Missing, Kind::AsyncError]);
}

#[test]
fn a_mismatch_names_the_rank_behind_and_by_how_much() {
    let v = parse(&fixture("healthy-mismatch.txt")).expect("text");
    assert_eq!(
        v.lines(),
        ["AllReduce counts disagree in communicator bd32b62ccae805e0: rank 0 (pid 447 on node 127.0.0.1, GPU 0) behind by 1 (of 613 launched)"]
    );
}

#[test]
fn refusals_old_servers_and_strangers_are_told_apart() {
    assert_eq!(parse(&fixture("unknown-command.txt")), Err(ParseError::Refused("Unknown command FROBNICATE".into())));
    assert_eq!(parse(&fixture("monitor-2.28.txt")), Err(ParseError::Refused("Unknown command MONITOR".into())));
    let v = parse(&fixture("no-protocol-line.txt")).expect("old server");
    assert_eq!(v.protocol, None);
    let v = parse(&fixture("invalid-format.txt")).expect("text after the error");
    assert_eq!(v.errors, ["Invalid format yaml"]);
    assert_eq!(parse(""), Err(ParseError::Empty));
    assert!(matches!(parse("HTTP/1.1 400 Bad Request\r\n\r\n"), Err(ParseError::NotRas(_))));
    assert!(matches!(parse("SERVER PROTOCOL 2\nOK\n{\"communicators\": [1,"), Err(ParseError::Json(_))));
}

#[test]
fn hostile_text_is_bounded_and_printable() {
    let mut evil = String::from("NCCL version \x1b[31m9\nErrors\n======\n\nDEAD\n  x\n");
    for i in 0..5000 {
        evil.push_str(&format!("  Process {i} on node \x1b]0;pwn\x07{} managing GPU 0\n", "n".repeat(500)));
    }
    let v = parse(&evil).expect("text");
    assert!(v.findings[0].who.len() <= MAX_ITEMS);
    for l in v.lines() {
        assert!(l.chars().all(|c| c.is_ascii_graphic() || c == ' '), "{l:?}");
        assert!(l.len() < 400);
    }
}
