//! `/etc/ld.so.cache` as glibc writes it (`sysdeps/generic/dl-cache.h`: `glibc-ld.so.cache1.1`, alone or after the
//! old `ld.so-1.7.0` table): which file the image's loader would open for a library name. Pure and bounded: never
//! trusts a count or offset, keeps at most [`MAX_ENTRIES`], opens nothing it names.

/// The largest cache read: real ones hold a few thousand entries in well under 1 MiB.
pub(crate) const MAX_BYTES: usize = 4 << 20;
pub const MAX_ENTRIES: usize = 65_536;

const MAGIC_NEW: &[u8] = b"glibc-ld.so.cache1.1";
const MAGIC_OLD: &[u8] = b"ld.so-1.7.0";
const HEADER_NEW: usize = 48;
const ENTRY_NEW: usize = 24;
const ENTRY_OLD: usize = 12;

/// glibc's `FLAG_ELF_LIBC6`: a shared library of the current ABI.
const FLAG_ELF_LIBC6: i32 = 0x0003;
const FLAG_TYPE_MASK: i32 = 0x00ff;
const FLAG_REQUIRED_MASK: i32 = 0xff00;

/// The architecture bits glibc sets for this target; 0 elsewhere, where any entry is taken.
#[cfg(target_arch = "x86_64")]
const FLAG_ARCH: i32 = 0x0300;
#[cfg(target_arch = "aarch64")]
const FLAG_ARCH: i32 = 0x0a00;
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const FLAG_ARCH: i32 = 0;

/// One cache entry: a library name (the soname) and the file the loader opens for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub name: String,
    pub path: String,
    pub flags: i32,
}

impl Entry {
    /// A libc6 library of this machine's architecture: what this build's loader would take.
    pub fn is_native(&self) -> bool {
        native(self.flags)
    }
}

fn native(flags: i32) -> bool {
    flags & FLAG_TYPE_MASK == FLAG_ELF_LIBC6 && (FLAG_ARCH == 0 || flags & FLAG_REQUIRED_MASK == FLAG_ARCH)
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at.checked_add(4)?)?.try_into().ok()?))
}

/// The NUL-terminated bytes at `at` in `b`, or `None` past the end.
fn c_bytes(b: &[u8], at: usize) -> Option<&[u8]> {
    let rest = b.get(at..)?;
    let end = rest.iter().position(|&c| c == 0)?;
    Some(&rest[..end])
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Where the new-format header starts: at 0, or after the old table in a combined cache.
fn new_header_at(b: &[u8]) -> Option<usize> {
    if b.starts_with(MAGIC_NEW) {
        return Some(0);
    }
    if !b.starts_with(MAGIC_OLD) {
        return None;
    }
    let nlibs = usize::try_from(u32_at(b, 12)?).ok()?;
    let end = nlibs.checked_mul(ENTRY_OLD)?.checked_add(16)?;
    let aligned = end.checked_add(7)? & !7;
    b.get(aligned..)?.starts_with(MAGIC_NEW).then_some(aligned)
}

/// One entry of the table: its flags and the offsets of its name and path.
type Slot = (i32, usize, usize);

/// The new-format table's bytes and its entry count, checked (at most [`MAX_ENTRIES`]).
fn header(b: &[u8]) -> Option<(&[u8], usize)> {
    let base = new_header_at(b)?;
    let data = b.get(base..)?;
    let nlibs = usize::try_from(u32_at(data, 20)?).ok()?;
    let table_end = nlibs.checked_mul(ENTRY_NEW)?.checked_add(HEADER_NEW)?;
    if table_end > data.len() {
        return None;
    }
    Some((data, nlibs.min(MAX_ENTRIES)))
}

/// Entry `i` of the table (below the count `header` checked); offsets still unchecked.
fn slot(data: &[u8], i: usize) -> Option<Slot> {
    let at = HEADER_NEW + i * ENTRY_NEW;
    let flags = i32::from_le_bytes(data.get(at..at + 4)?.try_into().ok()?);
    let key = usize::try_from(u32_at(data, at + 4)?).ok()?;
    let value = usize::try_from(u32_at(data, at + 8)?).ok()?;
    Some((flags, key, value))
}

/// glibc's `_dl_cache_libcmp`, the order ldconfig sorts the table in (descending): runs of digits
/// compare as numbers, and a digit after any other byte.
fn libcmp(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    let (mut i, mut j) = (0, 0);
    let digit = |s: &[u8], k: usize| s.get(k).is_some_and(u8::is_ascii_digit);
    while i < a.len() {
        if digit(a, i) {
            if !digit(b, j) {
                return Ordering::Greater;
            }
            let (mut x, mut y) = (0u64, 0u64);
            while digit(a, i) {
                x = x.saturating_mul(10).saturating_add(u64::from(a[i] - b'0'));
                i += 1;
            }
            while digit(b, j) {
                y = y.saturating_mul(10).saturating_add(u64::from(b[j] - b'0'));
                j += 1;
            }
            if x != y {
                return x.cmp(&y);
            }
        } else if digit(b, j) {
            return Ordering::Less;
        } else {
            match b.get(j) {
                Some(&c) if c == a[i] => {
                    i += 1;
                    j += 1;
                }
                Some(&c) => return a[i].cmp(&c),
                None => return Ordering::Greater,
            }
        }
    }
    // `a` ended: equal, or a prefix of `b` (`j` never passes `b`'s end).
    j.cmp(&b.len())
}

/// Every entry of the cache, in the cache's order (one whose strings fall outside the bytes skipped), or
/// `None` when the bytes are no cache.
pub fn parse(b: &[u8]) -> Option<Vec<Entry>> {
    let (data, n) = header(b)?;
    let entry = |(flags, key, value): Slot| {
        Some(Entry { name: lossy(c_bytes(data, key)?), path: lossy(c_bytes(data, value)?), flags })
    };
    Some((0..n).filter_map(|i| slot(data, i).and_then(entry)).collect())
}

/// How many entries the table holds (at most [`MAX_ENTRIES`]), or `None` when the bytes are no cache.
pub fn count(b: &[u8]) -> Option<usize> {
    // `header` checked that the whole table lies in the bytes: every slot below its count reads.
    Some(header(b)?.1)
}

/// The file the cache gives for `name` on this architecture, searched as glibc's loader does
/// (`search_cache`): a binary search in [`libcmp`] order, then the first native entry of that name.
pub fn find(b: &[u8], name: &str) -> Option<Entry> {
    use std::cmp::Ordering;
    let (data, n) = header(b)?;
    let want = name.as_bytes();
    let name_at = |i: usize| -> Option<(i32, &[u8], usize)> {
        let (flags, key, value) = slot(data, i)?;
        Some((flags, c_bytes(data, key)?, value))
    };
    let same = |i: usize| name_at(i).filter(|(_, k, _)| libcmp(want, k) == Ordering::Equal);
    let (mut lo, mut hi) = (0usize, n);
    let mut first = loop {
        if lo >= hi {
            return None;
        }
        let mid = lo + (hi - lo) / 2;
        match libcmp(want, name_at(mid)?.1) {
            Ordering::Equal => break mid,
            // Descending order: a smaller name lies further on.
            Ordering::Less => lo = mid + 1,
            Ordering::Greater => hi = mid,
        }
    };
    while first > 0 && same(first - 1).is_some() {
        first -= 1;
    }
    (first..n).map_while(same).find_map(|(flags, key, value)| {
        let path = lossy(c_bytes(data, value).filter(|_| native(flags) && key == want)?);
        Some(Entry { name: name.to_owned(), path, flags })
    })
}

/// The file the cache gives for `name` on this architecture.
pub fn lookup<'a>(entries: &'a [Entry], name: &str) -> Option<&'a Entry> {
    entries.iter().find(|e| e.name == name && e.is_native())
}

/// A cache in the current format holding `entries`, in ldconfig's order (for tests and fuzz seeds).
pub fn encode(entries: &[(&str, &str, i32)]) -> Vec<u8> {
    let mut entries = entries.to_vec();
    entries.sort_by(|a, b| libcmp(b.0.as_bytes(), a.0.as_bytes()));
    let le = |n: usize| u32::try_from(n).unwrap_or(u32::MAX).to_le_bytes();
    let table_end = HEADER_NEW + entries.len() * ENTRY_NEW;
    let (mut table, mut strings) = (Vec::new(), Vec::new());
    for (name, path, flags) in &entries {
        let key = le(table_end + strings.len());
        strings.extend([name.as_bytes(), &[0]].concat());
        let value = le(table_end + strings.len());
        strings.extend([path.as_bytes(), &[0]].concat());
        table.extend([&flags.to_le_bytes()[..], &key, &value, &[0; 12]].concat());
    }
    // The header: magic, entry count, the strings' length, format version 2, then 16 unused bytes.
    [MAGIC_NEW, &le(entries.len()), &le(strings.len()), &[2, 0, 0, 0], &[0; 16], &table, &strings].concat()
}

/// The flags of a native libc6 entry on this architecture, for [`encode`].
pub const NATIVE: i32 = FLAG_ELF_LIBC6 | FLAG_ARCH;

#[cfg(test)]
mod tests {
    use super::*;

    /// A real cache: Debian 12's (glibc 2.36), 558 entries, the current format only.
    const DEBIAN: &[u8] = include_bytes!("../../../../fixtures/ldcache/debian12-ld.so.cache");

    #[test]
    fn a_real_debian_cache_resolves_its_libraries() {
        let e = parse(DEBIAN).expect("a cache");
        assert_eq!(e.len(), 558);
        assert_eq!(count(DEBIAN), Some(558));
        for name in ["libibverbs.so.1", "libc.so.6", "libnccl.so.2", "libnope.so.9"] {
            assert_eq!(find(DEBIAN, name).as_ref(), lookup(&e, name), "{name}");
        }
        assert_eq!(find(DEBIAN, "libz.so.1").is_some(), cfg!(target_arch = "x86_64"));
        // The cache is an x86-64 machine's: its entries are taken there, never by another
        // architecture's loader (the aarch64 build runs this test too).
        let z = lookup(&e, "libz.so.1").map(|z| z.path.as_str());
        if cfg!(target_arch = "x86_64") {
            assert_eq!(z, Some("/lib/x86_64-linux-gnu/libz.so.1"));
        } else {
            assert_eq!(z, None, "an x86-64 entry taken by another architecture");
        }
    }

    #[test]
    fn every_name_of_a_real_cache_is_found_by_the_loaders_search() {
        let e = parse(DEBIAN).expect("a cache");
        // ldconfig wrote it in libcmp's descending order: the comparator is glibc's.
        assert!(e.windows(2).all(|w| libcmp(w[0].name.as_bytes(), w[1].name.as_bytes()).is_ge()));
        for x in &e {
            assert_eq!(find(DEBIAN, &x.name).as_ref(), lookup(&e, &x.name), "{}", x.name);
        }
        for absent in ["libnccl.so.2", "libnccl-net.so", "a", "zzz", "libc.so.60", "libc.so.", ""] {
            assert_eq!(find(DEBIAN, absent), None, "{absent}");
        }
    }

    #[test]
    fn numbers_compare_as_numbers() {
        use std::cmp::Ordering::*;
        assert_eq!(libcmp(b"libfoo.so.10", b"libfoo.so.9"), Greater);
        assert_eq!(libcmp(b"libfoo.so.2", b"libfoo.so.02"), Equal);
        assert_eq!(libcmp(b"lib2", b"liba"), Greater);
        assert_eq!(libcmp(b"liba", b"lib2"), Less);
        assert_eq!(libcmp(b"libc.so", b"libc.so.6"), Less);
        assert_eq!(libcmp(b"libc.so.6", b"libc.so"), Greater);
    }

    #[test]
    fn a_table_out_of_ldconfigs_order_misses_as_in_the_loader() {
        // encode sorts; swap two entries' slots afterwards.
        let mut b = encode(&[("libb.so.1", "/b", NATIVE), ("liba.so.1", "/a", NATIVE), ("libc.so.1", "/c", NATIVE)]);
        assert_eq!(find(&b, "liba.so.1").map(|e| e.path), Some("/a".into()));
        let (x, y) = (HEADER_NEW, HEADER_NEW + 2 * ENTRY_NEW);
        let first: Vec<u8> = b[x..x + ENTRY_NEW].to_vec();
        b.copy_within(y..y + ENTRY_NEW, x);
        b[y..y + ENTRY_NEW].copy_from_slice(&first);
        assert_eq!(find(&b, "libc.so.1"), None);
    }

    #[test]
    fn encode_and_parse_agree() {
        let b = encode(&[("libibverbs.so.1", "/usr/lib/x86_64-linux-gnu/libibverbs.so.1", NATIVE)]);
        let e = parse(&b).expect("a cache");
        assert_eq!(
            lookup(&e, "libibverbs.so.1").map(|x| x.path.as_str()),
            Some("/usr/lib/x86_64-linux-gnu/libibverbs.so.1")
        );
    }

    #[test]
    fn another_architectures_entry_is_not_taken() {
        let b = encode(&[("libibverbs.so.1", "/usr/lib32/libibverbs.so.1", FLAG_ELF_LIBC6 | 0x0800)]);
        let e = parse(&b).expect("a cache");
        assert!(lookup(&e, "libibverbs.so.1").is_none() || FLAG_ARCH == 0);
    }

    #[test]
    fn a_combined_old_and_new_cache_is_read_from_its_new_part() {
        let new = encode(&[("libnccl.so.2", "/usr/lib/x86_64-linux-gnu/libnccl.so.2", NATIVE)]);
        let mut b = MAGIC_OLD.to_vec();
        b.push(0);
        b.extend_from_slice(&1u32.to_le_bytes());
        b.extend_from_slice(&[0; ENTRY_OLD]);
        while b.len() % 8 != 0 {
            b.push(0);
        }
        b.extend(new);
        let e = parse(&b).expect("a cache");
        assert_eq!(e[0].name, "libnccl.so.2");
    }

    #[test]
    fn hostile_counts_and_offsets_are_refused_not_trusted() {
        assert!(parse(b"").is_none());
        assert!(parse(b"not a cache at all").is_none());
        let mut b = encode(&[("a", "b", NATIVE)]);
        // A count far past the bytes.
        b[20..24].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(parse(&b).is_none());
        // Offsets past the end: the entry is skipped.
        let mut b = encode(&[("a", "b", NATIVE)]);
        b[HEADER_NEW + 4..HEADER_NEW + 8].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(parse(&b), Some(Vec::new()));
        // An old table whose count overflows.
        let mut b = MAGIC_OLD.to_vec();
        b.push(0);
        b.extend_from_slice(&u32::MAX.to_le_bytes());
        assert!(parse(&b).is_none());
    }
}
