//! `NCCL_IB_HCA` / `NCCL_SOCKET_IFNAME` values through `nccl::list::List`, checked against a
//! line-for-line model of NCCL's own C (`parseStringList`, `matchIfList`, `matchPort` in
//! `src/misc/utils.cc`, and the `^`/`=` handling of their callers in `net_ib.cc` / `socket.cc`).
//!
//! Input: the first line is the value; every further line is a device or interface name,
//! optionally followed by a space and a port number (no port: an interface, NCCL's -1).

#![no_main]

use libfuzzer_sys::fuzz_target;
use nccl_wrap::nccl::list::{List, MAX_ENTRIES};

/// NCCL's `struct netIf`.
struct NetIf {
    prefix: Vec<u8>,
    port: i32,
}

/// glibc's `atoi`: `(int) strtol(s, NULL, 10)`; strtol skips C `isspace`, takes one sign, and
/// saturates at LONG_MIN/LONG_MAX; the cast to int keeps the low 32 bits.
fn c_atoi(s: &[u8]) -> i32 {
    let mut i = s.iter().take_while(|c| matches!(c, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r')).count();
    let neg = match s.get(i) {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let mut v: i128 = 0;
    for &c in s[i..].iter().take_while(|c| c.is_ascii_digit()) {
        v = (v * 10 + i128::from(c - b'0')).min(i128::from(i64::MAX) + 1);
    }
    let long = if neg { (-v).max(i128::from(i64::MIN)) } else { v.min(i128::from(i64::MAX)) };
    long as i64 as i32
}

/// `parseStringList`, as C: the string ends at its first NUL.
fn parse_string_list(s: &[u8], max: usize) -> Vec<NetIf> {
    let at = |p: usize| s.get(p).copied().unwrap_or(0);
    let mut list = Vec::new();
    let mut cur = Vec::new();
    let mut p = 0;
    loop {
        let mut c = at(p);
        if c == b':' {
            if !cur.is_empty() {
                list.push(NetIf { prefix: std::mem::take(&mut cur), port: c_atoi(&s[p + 1..]) });
            }
            while c != b',' && c != 0 {
                p += 1;
                c = at(p);
            }
        } else if c == b',' || c == 0 {
            if !cur.is_empty() {
                list.push(NetIf { prefix: std::mem::take(&mut cur), port: -1 });
            }
        } else {
            cur.push(c);
        }
        p += 1;
        if !(list.len() < max && c != 0) {
            return list;
        }
    }
}

fn match_if(name: &[u8], prefix: &[u8], exact: bool) -> bool {
    if exact {
        name == prefix
    } else {
        name.starts_with(prefix)
    }
}

fn match_port(a: i32, b: i32) -> bool {
    a == -1 || b == -1 || a == b
}

fn match_if_list(name: &[u8], port: i32, list: &[NetIf], exact: bool) -> bool {
    list.is_empty() || list.iter().any(|e| match_if(name, &e.prefix, exact) && match_port(port, e.port))
}

/// Whether NCCL uses device `name` port `port` under `value`.
fn nccl_selects(value: &[u8], name: &[u8], port: i32) -> bool {
    let mut v = value;
    let not = v.first() == Some(&b'^');
    if not {
        v = &v[1..];
    }
    let exact = v.first() == Some(&b'=');
    if exact {
        v = &v[1..];
    }
    let list = parse_string_list(v, MAX_ENTRIES);
    match_if_list(name, port, &list, exact) ^ not
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let mut lines = text.split('\n');
    let value = lines.next().unwrap_or("");
    // An environment value is a C string: it cannot hold a NUL.
    if value.contains('\0') {
        return;
    }
    let devices: Vec<(&str, Option<u8>)> = lines
        .take(64)
        .map(|l| match l.rsplit_once(' ').map(|(n, p)| (n, p.parse::<u8>())) {
            Some((n, Ok(p))) => (n, Some(p)),
            _ => (l, None),
        })
        .filter(|(n, _)| !n.contains('\0'))
        .collect();

    let list = List::parse(value);
    assert!(list.entries.len() <= MAX_ENTRIES, "{} entries", list.entries.len());
    for e in &list.entries {
        assert!(!e.name.is_empty() && !e.name.contains([',', ':']), "entry {:?}", e.name);
    }
    assert_eq!(list.exclude, value.starts_with('^'));
    assert_eq!(list.exact, value.strip_prefix('^').unwrap_or(value).starts_with('='));
    assert_eq!(list.prefix_names().len(), if list.exact { 0 } else { list.entries.len() });

    // What the list selects is what NCCL selects.
    for &(name, port) in &devices {
        let ours = list.selects(name, port.map(i64::from));
        let nccl = nccl_selects(value.as_bytes(), name.as_bytes(), port.map_or(-1, i32::from));
        assert_eq!(ours, nccl, "NCCL_IB_HCA={value:?}: {name:?} port {port:?}: ours {ours}, NCCL {nccl}");
    }

    // The entries are NCCL's entries.
    let mut v = value.strip_prefix('^').unwrap_or(value);
    v = v.strip_prefix('=').unwrap_or(v);
    let nccl = parse_string_list(v.as_bytes(), MAX_ENTRIES);
    let names: Vec<&[u8]> = nccl.iter().map(|e| e.prefix.as_slice()).collect();
    let ours: Vec<&[u8]> = list.entries.iter().map(|e| e.name.as_bytes()).collect();
    assert_eq!(ours, names, "entries of {value:?}");

    // Over-matches and unmatched entries say what they claim.
    let names: Vec<&str> = devices.iter().map(|(n, _)| *n).collect();
    for (entry, extra) in list.over_matches(&names) {
        assert!(!list.exact && names.contains(&entry.as_str()));
        assert!(!extra.is_empty() && extra.iter().all(|n| *n != entry && n.starts_with(&entry)));
    }
    for entry in list.unmatched(&names) {
        assert!(list.entries.iter().any(|e| e.name == entry));
        assert!(names.iter().all(|n| if list.exact { *n != entry } else { !n.starts_with(&entry) }));
    }
});
