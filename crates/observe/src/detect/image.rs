//! Paths inside the training image's root (`/` in a pod, a fixture tree in tests), as the image
//! check and the Python search join them: never one that climbs out of the root, never one with a
//! control character. Only joins and `stat`s; never opens, loads or runs anything.

use std::path::{Path, PathBuf};

/// At most this many entries of one directory are looked at (`python3.*`, the provider directory).
pub(crate) const DIR_ENTRIES: usize = 256;

/// A path inside the image, joined under the root; `None` for anything that could climb out or
/// holds a control character.
pub(crate) fn inside(root: &Path, p: &str) -> Option<PathBuf> {
    let rel = p.trim_start_matches('/');
    (p.len() <= 4096 && stays_inside(rel)).then(|| root.join(rel))
}

/// No `..` component and no control character (`char::is_control`'s: C0, DEL, and C1 as `C2 80` to
/// `C2 9F`), in one pass over the bytes.
fn stays_inside(rel: &str) -> bool {
    let b = rel.as_bytes();
    let mut component = 0;
    for i in 0..=b.len() {
        match b.get(i).copied() {
            None | Some(b'/') => {
                if &b[component..i] == b".." {
                    return false;
                }
                component = i + 1;
            }
            Some(c) if c < 0x20 || c == 0x7f => return false,
            Some(0xc2) if b.get(i + 1).is_some_and(|n| (0x80..=0x9f).contains(n)) => return false,
            Some(_) => {}
        }
    }
    true
}

pub(crate) fn exists(root: &Path, p: &str) -> bool {
    inside(root, p).is_some_and(|x| x.is_file())
}

/// A scratch image root for tests, holding `files` (empty) and `links` (path, target).
#[cfg(test)]
pub(crate) fn scratch(tag: &str, files: &[&str], links: &[(&str, &str)]) -> PathBuf {
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

    /// The checks as they read before the one pass.
    fn stays_inside_by_chars(rel: &str) -> bool {
        !(rel.split('/').any(|c| c == "..") || rel.chars().any(char::is_control))
    }

    #[test]
    fn the_one_pass_refuses_what_splitting_and_decoding_refused() {
        let mut cases: Vec<String> =
            ["", "..", "../a", "a/..", "a/../b", "a/...", "...", "a/.", "./a", "a//b", ".a/..b", "a/b/", "/..", "../"]
                .map(String::from)
                .to_vec();
        let chars = (0u32..0x300).filter_map(char::from_u32).chain(['\u{2028}', '\u{feff}', '\u{10ffff}']);
        cases.extend(chars.map(|c| format!("usr/lib/a{c}b")));
        for rel in &cases {
            assert_eq!(stays_inside(rel), stays_inside_by_chars(rel), "{rel:?}");
        }
    }

    #[test]
    fn names_that_climb_out_of_the_root_are_not_joined() {
        assert!(inside(Path::new("/img"), "/../etc/passwd").is_none());
        assert!(inside(Path::new("/img"), "/usr/lib/\u{1b}[31mlibibverbs.so.1").is_none());
        assert_eq!(inside(Path::new("/img"), "/usr/lib").as_deref(), Some(Path::new("/img/usr/lib")));
    }
}
