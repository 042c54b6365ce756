//! Paths inside the training image's root (`/` in a pod, a fixture tree in tests), as the image
//! check and the Python search join them: never one that climbs out of the root, never one with a
//! control character. Only joins and `stat`s; never opens, loads or runs anything.

use std::path::{Path, PathBuf};

/// At most this many entries of one directory are looked at (`python3.*`, the provider directory).
pub const DIR_ENTRIES: usize = 256;

/// A path inside the image, joined under the root; `None` for anything that could climb out, and
/// for any name with a control character (paths reach the summary and JSON; the cache, the
/// variables and directory listings are the image's, not ours).
pub fn inside(root: &Path, p: &str) -> Option<PathBuf> {
    let rel = p.trim_start_matches('/');
    if p.len() > 4096 || rel.split('/').any(|c| c == "..") || has_control(rel) {
        return None;
    }
    Some(root.join(rel))
}

/// `str::chars().any(char::is_control)` on the bytes: C0 and DEL are single bytes, and the C1
/// controls (U+0080 to U+009F) are `C2 80` to `C2 9F` in UTF-8. The image check joins about
/// twenty paths a start; decoding each one's characters was a tenth of its instructions.
fn has_control(s: &str) -> bool {
    let b = s.as_bytes();
    b.iter()
        .enumerate()
        .any(|(i, &c)| c < 0x20 || c == 0x7f || (c == 0xc2 && b.get(i + 1).is_some_and(|n| (0x80..=0x9f).contains(n))))
}

pub fn exists(root: &Path, p: &str) -> bool {
    inside(root, p).is_some_and(|x| x.is_file())
}

/// A scratch image root for tests, holding `files` (empty) and `links` (path, target).
#[cfg(test)]
pub fn scratch(tag: &str, files: &[&str], links: &[(&str, &str)]) -> PathBuf {
    let root = std::env::temp_dir().join(format!("nccl-wrap-image-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    for p in files.iter().chain(links.iter().map(|(p, _)| p)) {
        std::fs::create_dir_all(root.join(p).parent().expect("parent")).expect("mkdir");
    }
    for p in files {
        std::fs::write(root.join(p), b"").expect("write");
    }
    for (p, t) in links {
        std::os::unix::fs::symlink(t, root.join(p)).expect("symlink");
    }
    root
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_told_on_the_bytes_as_char_is_control_tells_them() {
        for c in (0u32..0x300).filter_map(char::from_u32).chain(['\u{2028}', '\u{feff}', '\u{10ffff}']) {
            let s = format!("/usr/lib/a{c}b");
            assert_eq!(has_control(&s), s.chars().any(char::is_control), "U+{:04X}", c as u32);
        }
    }

    #[test]
    fn names_that_climb_out_of_the_root_are_not_joined() {
        assert!(inside(Path::new("/img"), "/../etc/passwd").is_none());
        assert!(inside(Path::new("/img"), "/usr/lib/\u{1b}[31mlibibverbs.so.1").is_none());
        assert_eq!(inside(Path::new("/img"), "/usr/lib").as_deref(), Some(Path::new("/img/usr/lib")));
    }
}
