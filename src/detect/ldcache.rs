//! The dynamic loader's cache, `/etc/ld.so.cache`, parsed as glibc writes it: which file the
//! image's loader would open for a library name such as `libibverbs.so.1`.
//!
//! Formats (glibc `sysdeps/generic/dl-cache.h`): the current one, magic `glibc-ld.so.cache` and
//! version `1.1`, a 48-byte header (entry count, string table length, flags, extension offset),
//! 24-byte entries (flags, key offset, value offset, OS version, hwcap) and string offsets counted
//! from that header; and the combined one that glibc before 2.32 wrote, the old `ld.so-1.7.0`
//! table (12-byte entries) followed, 8-byte aligned, by the new one. Only the new part is read.
//!
//! Pure and bounded: takes bytes (the caller reads at most [`MAX_BYTES`]), never trusts a count
//! or an offset (each is checked against the bytes), keeps at most [`MAX_ENTRIES`] entries, and
//! never loads or opens anything it names. A cache it cannot read is `None`; the loader then
//! still searches its default directories, and so does the caller.

/// The largest cache read: real ones hold a few thousand entries in well under 1 MiB.
pub const MAX_BYTES: usize = 4 << 20;
/// The most entries kept.
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

/// The architecture bits glibc sets for this build's target (`FLAG_X8664_LIB64`,
/// `FLAG_AARCH64_LIB64`); 0 elsewhere, where any entry is taken.
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
    let s = b.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
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

/// The new-format table's bytes (from its header) and its entries' (flags, name offset, path
/// offset), in the cache's order; offsets are into the returned bytes and still unchecked.
/// `None` when the bytes are no cache of a known format.
fn table(b: &[u8]) -> Option<(&[u8], impl Iterator<Item = Slot> + '_)> {
    let base = new_header_at(b)?;
    let data = b.get(base..)?;
    let nlibs = usize::try_from(u32_at(data, 20)?).ok()?;
    let table_end = nlibs.checked_mul(ENTRY_NEW)?.checked_add(HEADER_NEW)?;
    if table_end > data.len() {
        return None;
    }
    let entries = (0..nlibs.min(MAX_ENTRIES)).filter_map(move |i| {
        let at = HEADER_NEW + i * ENTRY_NEW;
        let flags = i32::from_le_bytes(data.get(at..at + 4)?.try_into().ok()?);
        let key = usize::try_from(u32_at(data, at + 4)?).ok()?;
        let value = usize::try_from(u32_at(data, at + 8)?).ok()?;
        Some((flags, key, value))
    });
    Some((data, entries))
}

/// The cache's entries as they lie in `b` (name, path, flags), in the cache's order, borrowed:
/// nothing is copied until a caller keeps one. An entry whose strings fall outside the file is
/// skipped, not trusted.
fn raw(b: &[u8]) -> Option<impl Iterator<Item = (&[u8], &[u8], i32)>> {
    let (data, entries) = table(b)?;
    Some(entries.filter_map(move |(flags, key, value)| Some((c_bytes(data, key)?, c_bytes(data, value)?, flags))))
}

/// Every entry of the cache, in the cache's order (the loader's: the first match wins), or `None`
/// when the bytes are no cache of a known format.
pub fn parse(b: &[u8]) -> Option<Vec<Entry>> {
    Some(raw(b)?.map(|(name, path, flags)| Entry { name: lossy(name), path: lossy(path), flags }).collect())
}

/// How many entries the cache's table holds (at most [`MAX_ENTRIES`]; an entry whose strings fall
/// outside the file is counted here and skipped by `parse` and `find`), or `None` when the bytes
/// are no cache.
pub fn count(b: &[u8]) -> Option<usize> {
    Some(table(b)?.1.count())
}

/// The file the cache gives for `name` on this architecture, read straight from the bytes (the
/// start path asks for a handful of names: no entry is copied but the one found).
pub fn find(b: &[u8], name: &str) -> Option<Entry> {
    let (data, mut entries) = table(b)?;
    let want = name.as_bytes();
    // A name is compared where it lies (its bytes, then its NUL): no other entry's strings are
    // scanned for their end.
    let named = |key: usize| {
        key.checked_add(want.len()).and_then(|end| Some(data.get(key..end)? == want && *data.get(end)? == 0))
    };
    entries.find_map(|(flags, key, value)| {
        if !(native(flags) && named(key) == Some(true)) {
            return None;
        }
        Some(Entry { name: name.to_owned(), path: lossy(c_bytes(data, value)?), flags })
    })
}

/// The file the cache gives for `name` on this architecture.
pub fn lookup<'a>(entries: &'a [Entry], name: &str) -> Option<&'a Entry> {
    entries.iter().find(|e| e.name == name && e.is_native())
}

/// A cache in the current format holding `entries` (name, path, flags): what tests and the fuzz
/// seeds write as an image's `/etc/ld.so.cache`.
pub fn encode(entries: &[(&str, &str, i32)]) -> Vec<u8> {
    let mut strings = Vec::new();
    let table_end = HEADER_NEW + entries.len() * ENTRY_NEW;
    let mut table = Vec::new();
    for (name, path, flags) in entries {
        let key = table_end + strings.len();
        strings.extend_from_slice(name.as_bytes());
        strings.push(0);
        let value = table_end + strings.len();
        strings.extend_from_slice(path.as_bytes());
        strings.push(0);
        table.extend_from_slice(&flags.to_le_bytes());
        table.extend_from_slice(&u32::try_from(key).unwrap_or(u32::MAX).to_le_bytes());
        table.extend_from_slice(&u32::try_from(value).unwrap_or(u32::MAX).to_le_bytes());
        table.extend_from_slice(&[0; 12]);
    }
    let mut out = MAGIC_NEW.to_vec();
    out.extend_from_slice(&u32::try_from(entries.len()).unwrap_or(u32::MAX).to_le_bytes());
    out.extend_from_slice(&u32::try_from(strings.len()).unwrap_or(u32::MAX).to_le_bytes());
    out.extend_from_slice(&[2, 0, 0, 0]);
    out.extend_from_slice(&[0; 16]);
    out.extend(table);
    out.extend(strings);
    out
}

/// The flags of a native libc6 entry on this architecture, for [`encode`].
pub const NATIVE: i32 = FLAG_ELF_LIBC6 | FLAG_ARCH;

#[cfg(test)]
mod tests {
    use super::*;

    /// A real cache: Debian 12's (glibc 2.36), 558 entries, the current format only.
    const DEBIAN: &[u8] = include_bytes!("../../fixtures/ldcache/debian12-ld.so.cache");

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
