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
    if rel.split('/').any(|c| c == "..") || rel.chars().any(char::is_control) || p.len() > 4096 {
        return None;
    }
    Some(root.join(rel))
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
    fn names_that_climb_out_of_the_root_are_not_joined() {
        assert!(inside(Path::new("/img"), "/../etc/passwd").is_none());
        assert!(inside(Path::new("/img"), "/usr/lib/\u{1b}[31mlibibverbs.so.1").is_none());
        assert_eq!(inside(Path::new("/img"), "/usr/lib").as_deref(), Some(Path::new("/img/usr/lib")));
    }
}
