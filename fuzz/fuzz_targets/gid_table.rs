//! ibverbs' whole-table answer (`ibv_query_gid_table`'s `struct ibv_gid_entry` array), through
//! `detect::gid_source::tables`, then through NCCL's choice as a table detection reads.
//!
//! Input: one byte, the number of ports (0 to 3); two bytes (little-endian) per port, its table
//! length; then 32-byte entries in the kernel's layout (16 bytes of GID, then the index, the
//! port, the type and the net device's index, each a little-endian u32).

#![no_main]

use std::collections::BTreeMap;
use std::net::Ipv6Addr;

use libfuzzer_sys::fuzz_target;
use nccl_wrap::detect::gid_source::{self, Raw};
use nccl_wrap::nccl::gid::{self, GidEntry, GidPrefs, RowTable, GID_TABLE_MAX};

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fuzz_target!(|data: &[u8]| {
    let Some((&n, rest)) = data.split_first() else { return };
    let ports = usize::from(n % 4);
    if rest.len() < 2 * ports {
        return;
    }
    let (head, body) = rest.split_at(2 * ports);
    let lens: BTreeMap<u32, u32> = head
        .chunks(2)
        .enumerate()
        .map(|(i, c)| (i as u32 + 1, u32::from(u16::from_le_bytes([c[0], c[1]]))))
        .collect();
    let max = gid_source::max_entries(&lens);
    // The kernel never writes more than it was asked for: the answer is cut to the bound.
    let raw: Vec<Raw> = body
        .chunks_exact(32)
        .take(max)
        .map(|c| {
            let mut g = [0u8; 16];
            g.copy_from_slice(&c[..16]);
            Raw { gid: g, index: u32_at(c, 16), port: u32_at(c, 20), gid_type: u32_at(c, 24), ifindex: u32_at(c, 28) }
        })
        .collect();
    let Ok(tables) = gid_source::tables(&raw, &lens) else { return };
    assert_eq!(tables.keys().copied().collect::<Vec<_>>(), lens.keys().copied().collect::<Vec<_>>());
    let kept: usize = tables.values().map(|t| t.entries.len()).sum();
    assert_eq!(kept, raw.iter().filter(|r| r.gid != [0; 16]).count());
    for (port, t) in &tables {
        assert_eq!(t.len, lens[port]);
        for (&i, e) in &t.entries {
            assert!(i < t.len && !e.gid.is_unspecified() && e.ifindex != Some(0));
        }
        // As detection reads it: every index below the end answers, empty ones as zeros, and
        // NCCL's choice lands on an entry of the table.
        let entries: Vec<GidEntry> =
            t.entries.iter().map(|(&index, e)| GidEntry { index, gid: e.gid, roce: e.roce }).collect();
        let mut rows = RowTable { entries: &entries, len: t.len };
        if let Some(pick) = gid::choose(&mut rows, &GidPrefs::default()) {
            assert!(pick.index < t.len.min(GID_TABLE_MAX));
            let want = t.entries.get(&pick.index).map_or(Ipv6Addr::UNSPECIFIED, |e| e.gid);
            assert_eq!(pick.gid, want);
        }
    }
});
