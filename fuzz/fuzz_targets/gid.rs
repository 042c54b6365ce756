//! GID entries, GID types, `NCCL_IB_ADDR_RANGE` and the GID choice, through `nccl::gid`.
//!
//! Input lines: a GID as sysfs prints it; a `gid_attrs/types` text; an address range; the
//! preferences (`6` anywhere: AF_INET6; `1` anywhere: RoCE v1); then a GID table, one entry per
//! line as `GID TYPE...` (an empty line is an empty entry: all zeros, type unreadable).

#![no_main]

use std::net::{Ipv4Addr, Ipv6Addr};

use libfuzzer_sys::fuzz_target;
use nccl_wrap::detect::sysfs::format_gid;
use nccl_wrap::nccl::gid::{self, AddrRange, Family, GidEntry, GidPrefs, GidTable, RoceType, GID_TABLE_MAX};
use nccl_wrap::verbs::status;

struct Table<'a> {
    entries: &'a [(Ipv6Addr, Option<RoceType>)],
}

impl GidTable for Table<'_> {
    fn gid(&mut self, i: u32) -> Option<Ipv6Addr> {
        self.entries.get(i as usize).map(|e| e.0)
    }
    fn roce(&mut self, i: u32) -> Option<RoceType> {
        self.entries.get(i as usize).and_then(|e| e.1)
    }
}

/// NCCL's `matchGidAddrPrefix`: 32-bit words from the top, the last one masked; an IPv4 range
/// is compared with the GID's last word only.
fn nccl_in_prefix(family: Family, base: &Ipv6Addr, mut len: i32, g: &Ipv6Addr) -> bool {
    let words = |a: &Ipv6Addr| {
        let o = a.octets();
        [0, 4, 8, 12].map(|i| u32::from_be_bytes([o[i], o[i + 1], o[i + 2], o[i + 3]]))
    };
    let (b, a) = (words(base), words(g));
    let mask = |bits: i32| 0xffff_ffffu32 ^ ((1u64 << (32 - bits)) - 1) as u32;
    let mut i = 0;
    while len > 0 && i < 4 {
        if family == Family::Inet {
            if (b[3] & mask(len)) != (a[3] & mask(len)) {
                break;
            }
            len = 0;
        } else if len >= 32 {
            if b[i] != a[i] {
                break;
            }
            len -= 32;
            i += 1;
        } else {
            if (b[i] & mask(len)) != (a[i] & mask(len)) {
                break;
            }
            len = 0;
        }
    }
    len == 0
}

/// NCCL's own walk (`ncclIbGetGidIndex`): every entry from 1 to the table's end goes through
/// `ncclUpdateGidIndex`, with no early stop. An unreadable type reads as version -1. NCCL parses
/// `NCCL_IB_ADDR_RANGE` with `inet_pton` in the wanted family, so a range of the other family is
/// no range at all.
fn nccl_choose(t: &[(Ipv6Addr, Option<RoceType>)], p: &GidPrefs) -> Option<u32> {
    let in_range = |g: &Ipv6Addr| match p.range {
        Some(r) if r.family == p.family => nccl_in_prefix(r.family, &r.base, i32::from(r.prefix_len), g),
        _ => true,
    };
    let ver = |i: usize| t[i].1.map_or(-1, |r| i32::from(r.number()));
    let want = i32::from(p.roce_version);
    let mut pick = 0usize;
    t.first()?;
    for cand in 1..t.len().min(GID_TABLE_MAX as usize) {
        let (g, c) = (t[pick].0, t[cand].0);
        let (gf, cf) = (gid::family_of(&g), gid::family_of(&c));
        // The family switch, else a valid in-range candidate of the wanted version.
        let switch = cf != gf && cf == p.family && in_range(&c);
        let better = cf == p.family
            && gid::valid(&c)
            && in_range(&c)
            && (ver(pick) != ver(cand) || !gid::valid(&g))
            && ver(cand) == want;
        if switch || better {
            pick = cand;
        }
    }
    Some(pick as u32)
}

fn entry(g: Ipv6Addr, roce: Option<RoceType>) -> GidEntry {
    GidEntry { index: 0, gid: g, roce }
}

fn parse_entry(line: &str) -> (Ipv6Addr, Option<RoceType>) {
    let (g, t) = line.split_once(' ').unwrap_or((line, ""));
    (gid::parse_gid(g).unwrap_or(Ipv6Addr::UNSPECIFIED), RoceType::parse(t))
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let mut lines = text.split('\n');
    let (gid_text, type_text, range_text, prefs_text) = (
        lines.next().unwrap_or(""),
        lines.next().unwrap_or(""),
        lines.next().unwrap_or(""),
        lines.next().unwrap_or(""),
    );

    // The kernel's fixed form is decoded directly; any text reads as the IPv6 parser reads it.
    assert_eq!(gid::parse_gid(gid_text), gid_text.trim().parse::<Ipv6Addr>().ok(), "{gid_text:?}");
    if let Some(g) = gid::parse_gid(gid_text) {
        // sysfs's form re-parses to the same address, and verbs formats it the same way.
        let f = format_gid(&g);
        assert_eq!(f.len(), 39, "{f}");
        assert_eq!(gid::parse_gid(&f), Some(g), "{f}");
        assert_eq!(status::format_gid(&g.octets()), f);
        // The human form names the same address.
        let d = gid::display(&g);
        let back = d.parse::<Ipv4Addr>().map(|v4| v4.to_ipv6_mapped()).or_else(|_| d.parse::<Ipv6Addr>());
        assert_eq!(back, Ok(g), "{d}");
        let _ = (gid::family_of(&g), gid::valid(&g));
    }

    if let Some(t) = RoceType::parse(type_text) {
        // What the type is called (in the JSON plan) parses back to it.
        let name = match t {
            RoceType::V1 => "IB/RoCE v1",
            RoceType::V2 => "RoCE v2",
        };
        assert_eq!(RoceType::parse(name), Some(t));
        assert!(type_text.trim().starts_with(name) || type_text.trim().starts_with("RoCE v1"));
    }

    let range = AddrRange::parse(range_text);
    if let Some(r) = range {
        let max = if r.family == Family::Inet { 32 } else { 128 };
        assert!(r.prefix_len <= max, "{r:?}");
        // A range contains its own base address.
        let full = gid::is_full_match(
            &entry(r.base, Some(RoceType::V2)),
            &GidPrefs { family: gid::family_of(&r.base), roce_version: 2, range: Some(r) },
        );
        assert_eq!(full, gid::valid(&r.base), "{r:?}");
    }

    let prefs = GidPrefs {
        family: if prefs_text.contains('6') { Family::Inet6 } else { Family::Inet },
        roce_version: if prefs_text.contains('1') { 1 } else { 2 },
        range,
    };
    let table: Vec<_> = lines.take(GID_TABLE_MAX as usize).map(parse_entry).collect();
    let ours = gid::choose(&mut Table { entries: &table }, &prefs);
    // The walk that stops at the first full match picks what NCCL's whole walk picks.
    assert_eq!(ours.map(|e| e.index), nccl_choose(&table, &prefs), "prefs {prefs:?}");
    if let Some(e) = ours {
        let (g, r) = table[e.index as usize];
        assert_eq!((e.gid, e.roce), (g, r));
        let _ = gid::is_full_match(&e, &prefs);
    }
});
