//! A RoCE port's GID table in sysfs (`gids/<i>`, `gid_attrs/{types,ndevs}/<i>`), each entry read lazily and once:
//! the pick stops where the [`GidRule`] from above settles, the pod's entry at its first address the rule accepts
//! (`doctor` alone reads a table whole; `gid_source` may answer the far reads). Never decides anything.

use std::collections::BTreeMap;
use std::net::Ipv6Addr;
use std::os::fd::OwnedFd;
use std::path::Path;

use crate::detect::file;
use crate::detect::gid_source::{self, TableSource, Whole};
use crate::detect::netif::{self, OwnAddr, Owner};
use crate::detect::port::{GidPick, PortFacts};
use crate::detect::sysfs_error::SysfsError;
use nw_nccl::gid::format_gid;
use nw_nccl::gid::{self, Family, GidEntry, GidTable, RoceType};

/// The rule that picks a port's GID entry, handed in by the caller: the walk stops where it accepts.
pub trait GidRule {
    /// The entry the rule picks in `table`, reading only what it needs; `None` for an empty table.
    fn choose(&self, table: &mut dyn GidTable) -> Option<GidEntry>;
    /// Whether the rule takes `entry` outright.
    fn accepts(&self, entry: &GidEntry) -> bool;
    fn family(&self) -> Family;
    /// The same rule for `family` (rails with only IPv6 addresses call for AF_INET6).
    fn for_family(&self, family: Family) -> Box<dyn GidRule>;
}

/// One port's table, each entry's files read at most once.
pub(crate) struct SysfsGids<'a> {
    port: &'a OwnedFd,
    dir: &'a Path,
    problems: &'a mut Vec<SysfsError>,
    /// Entries read so far, from index 0; `None` past the table's end.
    gids: Vec<Option<Ipv6Addr>>,
    types: BTreeMap<u32, Option<RoceType>>,
    /// The whole table from another source once `load`ed, with the pod's entries' net devices by index.
    given: Option<(Whole, BTreeMap<u32, String>)>,
}

/// What reading a port's table against this pod needs: its addresses and a whole-table source.
pub(crate) struct Pod<'a> {
    pub(crate) gids: &'a [Ipv6Addr],
    pub(crate) addrs: &'a [OwnAddr],
    pub(crate) tables: &'a dyn TableSource,
}

impl<'a> SysfsGids<'a> {
    pub fn new(port: &'a OwnedFd, dir: &'a Path, problems: &'a mut Vec<SysfsError>) -> Self {
        SysfsGids { port, dir, problems, gids: Vec::new(), types: BTreeMap::new(), given: None }
    }

    /// Takes the port's whole table from `tables` where it answers with entries; the pod's are named.
    pub(crate) fn load(&mut self, tables: &dyn TableSource, device: &str, port: u32, pod: &[OwnAddr]) {
        if let Some(whole) = tables.table(device, port).filter(|w| w.len > 0) {
            let names =
                whole.entries.iter().filter_map(|(&i, e)| gid_source::pod_ndev(e, pod).map(|n| (i, n))).collect();
            self.given = Some((whole, names));
        }
    }

    fn read_gid(&mut self, i: u32) -> Option<Ipv6Addr> {
        let name = format!("gids/{i}");
        match file::read_attr_at(self.port, self.dir, &name) {
            Ok(text) => Some(gid::parse_gid(&text).unwrap_or_else(|| {
                self.problems.push(SysfsError::Content { path: self.dir.join(&name), content: text });
                Ipv6Addr::UNSPECIFIED
            })),
            Err(e) if e.is_not_found() => None,
            Err(e) => {
                self.problems.push(e.into());
                Some(Ipv6Addr::UNSPECIFIED)
            }
        }
    }

    /// The net device an entry was added for (the kernel answers EINVAL for empty entries).
    fn ndev(&self, i: u32) -> Option<String> {
        if let Some((whole, names)) = &self.given {
            if let Some(n) = names.get(&i) {
                return Some(n.clone());
            }
            if !whole.entries.contains_key(&i) {
                return None;
            }
        }
        file::read_attr_at(self.port, self.dir, &format!("gid_attrs/ndevs/{i}")).ok()
    }

    /// The net device of the port's default entry (index 0): the device's own, the host's.
    fn host_ndev(&mut self) -> Option<String> {
        self.gid(0).filter(|g| !g.is_unspecified()).and_then(|_| self.ndev(0))
    }

    /// The entry at `i` as a row: its type, net device and whose address it holds.
    fn row(&mut self, i: u32, g: Ipv6Addr, rule: &dyn GidRule, own: &[Ipv6Addr], host_ndev: Option<&str>) -> GidPick {
        let roce = self.roce(i);
        let ndev = self.ndev(i);
        let full_match = rule.accepts(&GidEntry { index: i, gid: g, roce });
        let owner = Some(netif::owner(&g, ndev.as_deref(), host_ndev, own));
        GidPick { roce, full_match, owner, ndev, ..bare(i, g) }
    }
}

impl GidTable for SysfsGids<'_> {
    fn gid(&mut self, i: u32) -> Option<Ipv6Addr> {
        if let Some((whole, _)) = &self.given {
            return (i < whole.len).then(|| whole.entries.get(&i).map_or(Ipv6Addr::UNSPECIFIED, |e| e.gid));
        }
        let at = usize::try_from(i).ok()?;
        while self.gids.len() <= at {
            if self.gids.last().is_some_and(Option::is_none) {
                return None;
            }
            let next = u32::try_from(self.gids.len()).ok()?;
            let g = self.read_gid(next);
            self.gids.push(g);
        }
        self.gids[at]
    }

    fn roce(&mut self, i: u32) -> Option<RoceType> {
        if let Some((whole, _)) = &self.given {
            return whole.entries.get(&i).and_then(|e| e.roce);
        }
        // The kernel answers EINVAL for empty entries, as NCCL expects: not a problem to report.
        let read = || file::read_attr_at(self.port, self.dir, &format!("gid_attrs/types/{i}")).ok();
        *self.types.entry(i).or_insert_with(|| read().as_deref().and_then(RoceType::parse))
    }
}

/// `rule`'s choice over the port's table, with the chosen entry's net device.
pub(crate) fn choose(table: &mut SysfsGids, rule: &dyn GidRule) -> Option<GidPick> {
    let e = rule.choose(table)?;
    Some(GidPick { roce: e.roce, ndev: table.ndev(e.index), full_match: rule.accepts(&e), ..bare(e.index, e.gid) })
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Extent {
    /// Up to the pod's first own entry the rule accepts: what a run needs.
    UntilOwn,
    /// Every entry: what `doctor` shows.
    Whole,
}

/// On a shared device the pick may be the host's or another pod's: then the table is read up to the
/// pod's entry the rule accepts, which is used, the pick kept beside it with its owner (a table without
/// the pod's addresses tells nothing of owners). A whole-table source answers this far read.
pub(crate) fn shared(facts: &mut PortFacts, table: &mut SysfsGids, rule: &dyn GidRule, pod: &Pod, device: &str) {
    let own = pod.gids;
    let Some(pick) = facts.gid.as_mut() else { return };
    if gid::parse_gid(&pick.gid).is_some_and(|g| own.contains(&g)) {
        pick.owner = Some(Owner::Pod);
        return;
    }
    table.load(pod.tables, device, facts.port, pod.addrs);
    let (rows, len) = rows(table, rule, own, Extent::UntilOwn);
    if !rows.iter().any(|r| r.owner == Some(Owner::Pod)) {
        return;
    }
    let host_ndev = table.host_ndev();
    pick.owner = gid::parse_gid(&pick.gid).map(|g| netif::owner(&g, pick.ndev.as_deref(), host_ndev.as_deref(), own));
    if let Some(mine) = rows.iter().find(|r| r.owner == Some(Owner::Pod) && r.full_match) {
        facts.nccl_pick = facts.gid.replace(mine.clone());
    }
    facts.table = rows;
    facts.table_len = len;
}

/// The non-empty entries as far as `extent` reads, and the length read. Read whole, each row has its
/// type, net device and owner; read up to the pod's entry, only the pod's own rows do, the others
/// known by address alone (`with_types` reads their types when the plan needs them).
pub(crate) fn rows(table: &mut SysfsGids, rule: &dyn GidRule, own: &[Ipv6Addr], extent: Extent) -> (Vec<GidPick>, u32) {
    let host_ndev = if extent == Extent::Whole { table.host_ndev() } else { None };
    let mut rows = Vec::new();
    let mut len = 0;
    for i in 0..gid::GID_TABLE_MAX {
        let Some(g) = table.gid(i) else { break };
        len = i + 1;
        if g.is_unspecified() {
            continue;
        }
        if extent == Extent::UntilOwn && !own.contains(&g) {
            rows.push(bare(i, g));
            continue;
        }
        let row = table.row(i, g, rule, own, host_ndev.as_deref());
        let settles = row.owner == Some(Owner::Pod) && row.full_match;
        rows.push(row);
        if settles && extent == Extent::UntilOwn {
            break;
        }
    }
    (rows, len)
}

/// An entry known by its address only.
fn bare(index: u32, g: Ipv6Addr) -> GidPick {
    GidPick { index, gid: format_gid(&g), address: gid::display(&g), ..GidPick::default() }
}

/// Reads the types of rows read by address only and marks those `rule` accepts.
pub(crate) fn with_types(table: &mut SysfsGids, rows: &mut [GidPick], rule: &dyn GidRule) {
    for r in rows.iter_mut().filter(|r| r.roce.is_none() && r.owner.is_none()) {
        r.roce = table.roce(r.index);
        r.full_match =
            gid::parse_gid(&r.gid).is_some_and(|g| rule.accepts(&GidEntry { index: r.index, gid: g, roce: r.roce }));
    }
}

#[cfg(test)]
pub(crate) mod rule {
    use super::GidRule;
    use nw_nccl::gid::{self, Family, GidEntry, GidPrefs, GidTable};

    /// NCCL's rule, as `nw_decide::gid_rule` hands it in (this crate cannot name that one).
    pub(crate) struct Nccl(pub(crate) GidPrefs);

    pub(crate) const DEFAULT: Nccl = Nccl(GidPrefs { family: Family::Inet, roce_version: 2, range: None });

    impl GidRule for Nccl {
        fn choose(&self, table: &mut dyn GidTable) -> Option<GidEntry> {
            gid::choose(table, &self.0)
        }
        fn accepts(&self, entry: &GidEntry) -> bool {
            gid::is_full_match(entry, &self.0)
        }
        fn family(&self) -> Family {
            self.0.family
        }
        fn for_family(&self, family: Family) -> Box<dyn GidRule> {
            Box::new(Nccl(GidPrefs { family, ..self.0 }))
        }
    }
}
