//! GID parsing and the GID index NCCL picks on its own (`ncclUpdateGidIndex`, `net_ib.cc`, 2.21.5
//! and later), reproduced exactly so the exported index is NCCL's own. Pure: the table is read
//! elsewhere.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv6Addr};

use serde::Serialize;

/// Address family NCCL wants (`NCCL_IB_ADDR_FAMILY`, default AF_INET).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Family {
    #[serde(rename = "AF_INET")]
    Inet,
    #[serde(rename = "AF_INET6")]
    Inet6,
}

/// RoCE version as `gid_attrs/types/<i>` states it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum RoceType {
    #[serde(rename = "IB/RoCE v1")]
    V1 = 1,
    #[serde(rename = "RoCE v2")]
    V2 = 2,
}

impl RoceType {
    pub fn parse(text: &str) -> Option<RoceType> {
        let t = text.trim();
        let v1 = t.starts_with("IB/RoCE v1") || t.starts_with("RoCE v1");
        if v1 {
            Some(RoceType::V1)
        } else {
            t.starts_with("RoCE v2").then_some(RoceType::V2)
        }
    }
    pub fn number(self) -> u8 {
        self as u8
    }
}

/// `NCCL_IB_ADDR_RANGE`: a prefix in CIDR form, e.g. `10.0.0.0/8` or `fd00::/8`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddrRange {
    pub base: Ipv6Addr,
    pub family: Family,
    pub prefix_len: u8,
}

impl AddrRange {
    /// Parses `a.b.c.d/n` or `x:y::z/n`; `None` when it is not one.
    pub fn parse(text: &str) -> Option<AddrRange> {
        let (addr, len) = text.trim().split_once('/')?;
        let prefix_len: u8 = len.parse().ok()?;
        if let Ok(v4) = addr.parse::<std::net::Ipv4Addr>() {
            (prefix_len <= 32).then_some(AddrRange { base: v4.to_ipv6_mapped(), family: Family::Inet, prefix_len })
        } else {
            let v6: Ipv6Addr = addr.parse().ok()?;
            (prefix_len <= 128).then_some(AddrRange { base: v6, family: Family::Inet6, prefix_len })
        }
    }

    pub fn contains(&self, gid: &Ipv6Addr) -> bool {
        let prefix = |addr: IpAddr| crate::prefix::Prefix { addr, len: self.prefix_len };
        match self.family {
            // For IPv4 NCCL compares the last 32 bits only.
            Family::Inet => {
                let last = |a: &Ipv6Addr| IpAddr::V4(std::net::Ipv4Addr::from(u128::from(*a) as u32));
                prefix(last(&self.base)).contains(last(gid))
            }
            Family::Inet6 => prefix(IpAddr::V6(self.base)).contains(IpAddr::V6(*gid)),
        }
    }
}

impl std::fmt::Display for AddrRange {
    /// The form NCCL parses: `10.9.0.0/24`, `fd00::/8`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.family, self.base.to_ipv4_mapped()) {
            (Family::Inet, Some(v4)) => write!(f, "{v4}/{}", self.prefix_len),
            _ => write!(f, "{}/{}", self.base, self.prefix_len),
        }
    }
}

/// The narrowest `NCCL_IB_ADDR_RANGE` of `family` that admits every one of `addrs` (GID form);
/// `None` when `addrs` is empty or holds an address of the other family.
pub fn covering_range(addrs: &[Ipv6Addr], family: Family) -> Option<AddrRange> {
    let first = addrs.first()?;
    if addrs.iter().any(|a| family_of(a) != family) {
        return None;
    }
    let (skip, bits) = if family == Family::Inet { (96u32, 32u32) } else { (0, 128) };
    let val = |a: &Ipv6Addr| u128::from_be_bytes(a.octets()) << skip;
    let base = val(first);
    let differ = addrs.iter().fold(0u128, |acc, a| acc | (val(a) ^ base));
    let prefix_len = differ.leading_zeros().min(bits);
    let mask = if prefix_len == 0 { 0 } else { u128::MAX << (128 - prefix_len) };
    let kept = (base & mask) >> skip;
    let base = if family == Family::Inet {
        let v4 = std::net::Ipv4Addr::from(u32::try_from(kept & 0xffff_ffff).unwrap_or(0));
        v4.to_ipv6_mapped()
    } else {
        Ipv6Addr::from(kept)
    };
    Some(AddrRange { base, family, prefix_len: u8::try_from(prefix_len).unwrap_or(128) })
}

/// A table held in memory: the non-empty entries, by index, and the table's length.
pub struct RowTable<'a> {
    pub entries: &'a [GidEntry],
    pub len: u32,
}

impl GidTable for RowTable<'_> {
    fn gid(&mut self, i: u32) -> Option<Ipv6Addr> {
        (i < self.len).then(|| self.entries.iter().find(|e| e.index == i).map_or(Ipv6Addr::UNSPECIFIED, |e| e.gid))
    }
    fn roce(&mut self, i: u32) -> Option<RoceType> {
        self.entries.iter().find(|e| e.index == i).and_then(|e| e.roce)
    }
}

/// What NCCL would be told by the environment about GID choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GidPrefs {
    pub family: Family,
    pub roce_version: u8,
    pub range: Option<AddrRange>,
}

impl Default for GidPrefs {
    fn default() -> Self {
        GidPrefs { family: Family::Inet, roce_version: 2, range: None }
    }
}

/// One table entry; `roce` is `None` where the type could not be read (EINVAL for empty ones).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GidEntry {
    pub index: u32,
    pub gid: Ipv6Addr,
    pub roce: Option<RoceType>,
}

/// A GID table read lazily: the choice below asks only for what NCCL's rule needs.
pub trait GidTable {
    /// Entry `i`; `None` past the end of the table. An unreadable entry reads as all zeros.
    fn gid(&mut self, i: u32) -> Option<Ipv6Addr>;
    /// The RoCE type of entry `i`, `None` when it cannot be read.
    fn roce(&mut self, i: u32) -> Option<RoceType>;
}

/// sysfs's form of a GID: eight groups of four hex digits, the form [`parse_gid`] reads.
pub fn format_gid(gid: &Ipv6Addr) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(39);
    for (i, b) in gid.octets().into_iter().enumerate() {
        if i > 0 && i % 2 == 0 {
            out.push(':');
        }
        out.push(char::from(HEX[usize::from(b >> 4)]));
        out.push(char::from(HEX[usize::from(b & 0xf)]));
    }
    out
}

/// Parses sysfs's GID form: the kernel's fixed `%pI6` form directly, anything else (an IPv6
/// address) through the standard parser; a test and the `gid` fuzz target hold the two together.
pub fn parse_gid(text: &str) -> Option<Ipv6Addr> {
    let text = text.trim();
    parse_fixed(text).or_else(|| text.parse().ok())
}

/// sysfs's fixed form alone, untrimmed (what a peer must send on the pair test's wire):
/// `xxxx:xxxx:xxxx:xxxx:xxxx:xxxx:xxxx:xxxx`, and nothing else.
pub fn parse_fixed(text: &str) -> Option<Ipv6Addr> {
    let b = text.as_bytes();
    if b.len() != 39 {
        return None;
    }
    let mut groups = [0u16; 8];
    for (g, chunk) in groups.iter_mut().zip(b.chunks(5)) {
        if chunk.len() == 5 && chunk[4] != b':' {
            return None;
        }
        for &c in &chunk[..4] {
            let digit = u16::try_from(char::from(c).to_digit(16)?).ok()?;
            *g = (*g << 4) | digit;
        }
    }
    Some(Ipv6Addr::from(groups))
}

pub fn family_of(gid: &Ipv6Addr) -> Family {
    // `::ffff:a.b.c.d`, or its multicast form `ff0e::ffff:a.b.c.d`.
    let o = gid.octets();
    if o[4..12] == [0, 0, 0, 0, 0, 0, 0xff, 0xff] && (o[..4] == [0; 4] || o[..4] == [0xff, 0x0e, 0, 0]) {
        Family::Inet
    } else {
        Family::Inet6
    }
}

/// Not all zeros, and not a bare `fe80::` without an interface id.
fn configured(gid: &Ipv6Addr) -> bool {
    let s = gid.segments();
    let trailer = s[2..].iter().any(|&x| x != 0);
    let first_zero = s[0] == 0 && s[1] == 0;
    !((first_zero && !trailer) || (s[0] == 0xfe80 && s[1] == 0 && !trailer))
}

fn link_local(gid: &Ipv6Addr) -> bool {
    let s = gid.segments();
    s[0] == 0xfe80 && s[1] == 0 && s[2] == 0 && s[3] == 0
}

/// Configured and not link-local: a GID NCCL is willing to use.
pub fn valid(gid: &Ipv6Addr) -> bool {
    configured(gid) && !link_local(gid)
}

fn in_range(gid: &Ipv6Addr, prefs: &GidPrefs) -> bool {
    // NCCL parses the range in the wanted family: one of the other family restricts nothing.
    prefs.range.filter(|r| r.family == prefs.family).is_none_or(|r| r.contains(gid))
}

/// Whether `entry` is exactly what NCCL looks for: valid, right family, in range, right version.
pub fn is_full_match(entry: &GidEntry, prefs: &GidPrefs) -> bool {
    full_match(&entry.gid, prefs, || entry.roce)
}

/// [`is_full_match`], the type asked for last: only where the rest matches.
fn full_match(gid: &Ipv6Addr, prefs: &GidPrefs, roce: impl FnOnce() -> Option<RoceType>) -> bool {
    valid(gid)
        && family_of(gid) == prefs.family
        && in_range(gid, prefs)
        && roce().map(RoceType::number) == Some(prefs.roce_version)
}

/// Memoises type reads: NCCL's rule may ask for the same entry's type several times.
struct Types<'t, T: GidTable + ?Sized> {
    table: &'t mut T,
    seen: BTreeMap<u32, Option<RoceType>>,
}

impl<T: GidTable + ?Sized> Types<'_, T> {
    fn get(&mut self, i: u32) -> Option<RoceType> {
        let table = &mut self.table;
        *self.seen.entry(i).or_insert_with(|| table.roce(i))
    }
}

/// NCCL's choice over `table` (`None` when empty). Types are read only where the rule looks at
/// them, and the walk stops at a full match, which the rule never replaces.
pub fn choose<T: GidTable + ?Sized>(table: &mut T, prefs: &GidPrefs) -> Option<GidEntry> {
    let mut pick = (0, table.gid(0)?);
    let mut types = Types { table, seen: BTreeMap::new() };
    for i in 1..GID_TABLE_MAX {
        if full_match(&pick.1, prefs, || types.get(pick.0)) {
            break;
        }
        let Some(cand) = types.table.gid(i) else { break };
        if better(pick, (i, cand), prefs, &mut types) {
            pick = (i, cand);
        }
    }
    Some(GidEntry { index: pick.0, gid: pick.1, roce: types.get(pick.0) })
}

/// No GID table is longer than this (RoCE's maximum is 255 entries).
pub const GID_TABLE_MAX: u32 = 256;

/// NCCL's `ncclUpdateGidIndex` decision: does `cand` replace `pick`?
fn better<T: GidTable + ?Sized>(
    pick: (u32, Ipv6Addr),
    cand: (u32, Ipv6Addr),
    prefs: &GidPrefs,
    types: &mut Types<T>,
) -> bool {
    let cand_family = family_of(&cand.1);
    let cand_in_range = in_range(&cand.1, prefs);
    if cand_family != family_of(&pick.1) && cand_family == prefs.family && cand_in_range {
        return true;
    }
    if cand_family != prefs.family || !valid(&cand.1) || !cand_in_range {
        return false;
    }
    let (pv, cv) = (types.get(pick.0), types.get(cand.0));
    (pv != cv || !valid(&pick.1)) && cv.map(RoceType::number) == Some(prefs.roce_version)
}

/// Human form of a GID: the IPv4 address for mapped entries, else the IPv6 text.
pub fn display(gid: &Ipv6Addr) -> String {
    match gid.to_ipv4_mapped() {
        Some(v4) => v4.to_string(),
        None => gid.to_string(),
    }
}

/// The address family a pod's rails call for, from the rails' own addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RailFamily {
    /// Every rail with an address has an IPv4 one: NCCL's default, AF_INET.
    Inet,
    /// No rail has IPv4, and some have IPv6 (ULA or global): AF_INET6.
    Inet6,
    /// Some rails have IPv4, others only IPv6: no one family serves every port.
    Mixed { inet: Vec<String>, inet6_only: Vec<String> },
    /// No rail has an address to tell by.
    Unknown,
}

/// The family NCCL must be told so its GID choice finds an entry on every rail (net device, its
/// addresses); fe80 addresses never count, IPv4 link-local ones do, as in NCCL.
pub fn rail_family(rails: &[(String, Vec<IpAddr>)]) -> RailFamily {
    let v4 = |a: &IpAddr| matches!(a, IpAddr::V4(x) if !x.is_unspecified());
    let v6 = |a: &IpAddr| matches!(a, IpAddr::V6(x) if valid(x) && x.to_ipv4_mapped().is_none());
    let names = |pick: &dyn Fn(&[IpAddr]) -> bool| -> Vec<String> {
        rails.iter().filter(|(_, addrs)| pick(addrs)).map(|(name, _)| name.clone()).collect()
    };
    let inet = names(&|a| a.iter().any(v4));
    let inet6_only = names(&|a| !a.iter().any(v4) && a.iter().any(v6));
    match (inet.is_empty(), inet6_only.is_empty()) {
        (true, true) => RailFamily::Unknown,
        (false, true) => RailFamily::Inet,
        (true, false) => RailFamily::Inet6,
        (false, false) => RailFamily::Mixed { inet, inet6_only },
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_rails_addresses_choose_the_family() {
        let r = |n: &str, a: &[&str]| (n.to_string(), a.iter().map(|x| x.parse().expect("ip")).collect::<Vec<_>>());
        assert_eq!(rail_family(&[r("net1", &["10.0.0.1", "fe80::1"])]), RailFamily::Inet);
        assert_eq!(rail_family(&[r("net1", &["fd00::1", "fe80::1"]), r("net2", &["2001:db8::2"])]), RailFamily::Inet6);
        assert_eq!(rail_family(&[r("net1", &["fe80::1"])]), RailFamily::Unknown);
        assert_eq!(rail_family(&[r("net1", &["169.254.1.1"])]), RailFamily::Inet);
        assert_eq!(
            rail_family(&[r("net1", &["10.0.0.1"]), r("net2", &["fd00::2"])]),
            RailFamily::Mixed { inet: vec!["net1".into()], inet6_only: vec!["net2".into()] }
        );
    }

    use super::*;

    #[test]
    fn the_kernels_fixed_gid_form_parses_as_the_ipv6_parser_reads_it() {
        for t in [
            "fe80:0000:0000:0000:0ac0:ebff:fe3d:ca54",
            "0000:0000:0000:0000:0000:ffff:0a6e:0021",
            "0000:0000:0000:0000:0000:0000:0000:0000",
            "FD00:0000:0000:0000:0000:0000:0000:00AB",
            "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
        ] {
            assert_eq!(parse_fixed(t), t.parse().ok(), "{t}");
            assert_eq!(parse_gid(&format!("{t}\n")), t.parse().ok(), "{t}");
        }
        // Not the fixed form: left to the IPv6 parser, which reads or refuses it as before.
        for t in [
            "fe80::1",
            "::ffff:10.0.0.1",
            "fe80:0000:0000:0000:0ac0:ebff:fe3d:ca5g",
            "fe80-0000:0000:0000:0ac0:ebff:fe3d:ca54",
        ] {
            assert_eq!(parse_fixed(t), None, "{t}");
            assert_eq!(parse_gid(t), t.parse().ok(), "{t}");
        }
        assert_eq!(parse_fixed("fe80:0000:0000:0000:0ac0:ebff:fe3d:ca5+"), None);
    }

    fn e(index: u32, text: &str, roce: Option<RoceType>) -> GidEntry {
        GidEntry { index, gid: parse_gid(text).expect("test gid"), roce }
    }

    fn mlx5_table() -> Vec<GidEntry> {
        vec![
            e(0, "fe80:0000:0000:0000:0ac0:ebff:fe3d:ca54", Some(RoceType::V1)),
            e(1, "fe80:0000:0000:0000:0ac0:ebff:fe3d:ca54", Some(RoceType::V2)),
            e(2, "0000:0000:0000:0000:0000:ffff:0a6e:0021", Some(RoceType::V1)),
            e(3, "0000:0000:0000:0000:0000:ffff:0a6e:0021", Some(RoceType::V2)),
        ]
    }

    /// A table of `len` entries; those not listed are empty. Counts reads.
    struct Table<'a> {
        entries: &'a [GidEntry],
        len: u32,
        reads: u32,
    }

    impl GidTable for Table<'_> {
        fn gid(&mut self, i: u32) -> Option<Ipv6Addr> {
            self.reads += 1;
            (i < self.len).then(|| self.entries.iter().find(|x| x.index == i).map_or(Ipv6Addr::UNSPECIFIED, |e| e.gid))
        }
        fn roce(&mut self, i: u32) -> Option<RoceType> {
            self.entries.iter().find(|x| x.index == i).and_then(|e| e.roce)
        }
    }

    fn pick(table: &[GidEntry], len: u32, prefs: GidPrefs) -> Option<u32> {
        choose(&mut Table { entries: table, len, reads: 0 }, &prefs).map(|g| g.index)
    }

    #[test]
    fn walk_stops_at_the_first_full_match() {
        let mut big = mlx5_table();
        big.push(e(254, "::ffff:10.9.9.9", Some(RoceType::V2)));
        let mut t = Table { entries: &big, len: 255, reads: 0 };
        assert_eq!(choose(&mut t, &GidPrefs::default()).map(|g| g.index), Some(3));
        assert_eq!(t.reads, 4);
    }

    #[test]
    fn empty_table_has_no_pick() {
        assert_eq!(pick(&[], 0, GidPrefs::default()), None);
    }

    #[test]
    fn typical_mlx5_table_picks_roce_v2_ipv4_at_3() {
        assert_eq!(pick(&mlx5_table(), 4, GidPrefs::default()), Some(3));
    }

    #[test]
    fn sparse_255_table_finds_entry_at_201() {
        let t = vec![
            e(0, "fe80::1", Some(RoceType::V1)),
            e(1, "fe80::1", Some(RoceType::V2)),
            e(200, "::ffff:10.0.0.7", Some(RoceType::V1)),
            e(201, "::ffff:10.0.0.7", Some(RoceType::V2)),
        ];
        assert_eq!(pick(&t, 255, GidPrefs::default()), Some(201));
    }

    #[test]
    fn without_v2_ipv4_nccl_settles_on_the_v1_ipv4_entry() {
        let t = &mlx5_table()[..3];
        assert_eq!(pick(t, 3, GidPrefs::default()), Some(2));
    }

    #[test]
    fn rxe_table_picks_index_1() {
        let t =
            vec![e(0, "fe80::5054:ff:fe12:3456", Some(RoceType::V2)), e(1, "::ffff:192.168.7.1", Some(RoceType::V2))];
        assert_eq!(pick(&t, 2, GidPrefs::default()), Some(1));
    }

    #[test]
    fn ipv6_family_and_roce_v1_preferences_are_honoured() {
        let mut t = mlx5_table();
        t.push(e(4, "fd00::7", Some(RoceType::V1)));
        t.push(e(5, "fd00::7", Some(RoceType::V2)));
        let v6 = GidPrefs { family: Family::Inet6, ..GidPrefs::default() };
        assert_eq!(pick(&t, 6, v6), Some(5));
        let v1 = GidPrefs { roce_version: 1, ..GidPrefs::default() };
        assert_eq!(pick(&t, 6, v1), Some(2));
    }

    #[test]
    fn addr_range_excludes_entries_outside_it() {
        let mut t = mlx5_table();
        t.push(e(4, "::ffff:192.168.1.9", Some(RoceType::V1)));
        t.push(e(5, "::ffff:192.168.1.9", Some(RoceType::V2)));
        let r = GidPrefs { range: AddrRange::parse("192.168.0.0/16"), ..GidPrefs::default() };
        assert_eq!(pick(&t, 6, r), Some(5));
    }

    #[test]
    fn unreadable_type_counts_as_unknown_version() {
        let t = vec![e(0, "fe80::1", None), e(1, "::ffff:10.0.0.1", None)];
        // Family switch alone moves NCCL to index 1, but it is not a full match.
        assert_eq!(pick(&t, 2, GidPrefs::default()), Some(1));
        assert!(!is_full_match(&t[1], &GidPrefs::default()));
    }

    #[test]
    fn family_and_validity() {
        assert_eq!(family_of(&parse_gid("0000:0000:0000:0000:0000:ffff:0a00:6a07").expect("gid")), Family::Inet);
        assert!(!valid(&Ipv6Addr::UNSPECIFIED));
        assert!(!valid(&parse_gid("fe80::1").expect("gid")));
        assert_eq!(display(&parse_gid("0000:0000:0000:0000:0000:ffff:0a00:6a07").expect("gid")), "10.0.106.7");
    }

    #[test]
    fn addr_range_of_the_other_family_is_ignored_as_in_nccl() {
        // Found by fuzz/gid: with AF_INET wanted, `fd00::/8` excluded every IPv4 GID, where NCCL
        // cannot parse it as AF_INET and ignores it.
        let t = mlx5_table();
        let v4 = GidPrefs { range: AddrRange::parse("fd00::/8"), ..GidPrefs::default() };
        assert_eq!(pick(&t, 4, v4), Some(3));
        assert!(is_full_match(&t[3], &v4));
        let v6 = GidPrefs { family: Family::Inet6, roce_version: 2, range: AddrRange::parse("10.0.0.0/8") };
        assert!(is_full_match(&e(5, "fd00::7", Some(RoceType::V2)), &v6));
    }

    #[test]
    fn covering_range_is_the_narrowest_prefix_of_all() {
        let g = |s: &str| as_gid(s);
        let r = covering_range(&[g("10.9.0.52"), g("10.9.1.52")], Family::Inet).expect("range");
        assert_eq!(r.to_string(), "10.9.0.0/23");
        assert!(r.contains(&g("10.9.1.200")) && !r.contains(&g("10.9.2.1")));
        assert_eq!(covering_range(&[g("10.9.0.52")], Family::Inet).expect("range").to_string(), "10.9.0.52/32");
        assert_eq!(
            covering_range(&[g("10.9.0.52"), g("192.168.0.1")], Family::Inet).expect("range").to_string(),
            "0.0.0.0/0"
        );
        let v6 = covering_range(&[g("fd00::1:5"), g("fd00::2:5")], Family::Inet6).expect("range");
        assert_eq!(v6.to_string(), "fd00::/110");
        assert!(covering_range(&[g("fd00::1"), g("10.0.0.1")], Family::Inet).is_none());
        assert!(covering_range(&[], Family::Inet).is_none());
        // The printed form parses back to the same range, as NCCL will read it.
        assert_eq!(AddrRange::parse(&r.to_string()), Some(r));
    }

    /// A row table NCCL's rule walks like sysfs's: with a range, the shared-device tables land on
    /// the pod's own entry where it is the first in range, and not otherwise.
    #[test]
    fn nccl_rule_with_a_range_over_a_shared_table() {
        let rows = [
            e(0, "fe80::1", Some(RoceType::V2)),
            e(1, "::ffff:10.9.0.51", Some(RoceType::V2)),
            e(2, "fe80::2", Some(RoceType::V2)),
            e(3, "::ffff:10.9.0.52", Some(RoceType::V2)),
        ];
        let mut t = RowTable { entries: &rows, len: 4 };
        assert_eq!(choose(&mut t, &GidPrefs::default()).map(|g| g.index), Some(1));
        let only_mine = GidPrefs { range: covering_range(&[as_gid("10.9.0.52")], Family::Inet), ..GidPrefs::default() };
        assert_eq!(choose(&mut t, &only_mine).map(|g| g.index), Some(3));
        let both = GidPrefs { range: AddrRange::parse("10.9.0.0/24"), ..GidPrefs::default() };
        assert_eq!(choose(&mut t, &both).map(|g| g.index), Some(1));
    }

    fn as_gid(s: &str) -> Ipv6Addr {
        match s.parse::<std::net::IpAddr>().expect("ip") {
            std::net::IpAddr::V4(v4) => v4.to_ipv6_mapped(),
            std::net::IpAddr::V6(v6) => v6,
        }
    }

    #[test]
    fn addr_range_parse_rejects_junk() {
        assert!(AddrRange::parse("10.0.0.0").is_none());
        assert!(AddrRange::parse("10.0.0.0/33").is_none());
        assert!(AddrRange::parse("fd00::/129").is_none());
        assert!(AddrRange::parse("fd00::/8").is_some());
    }
}
