//! Where the image's Pythons keep PyTorch's NCCL (`site-packages/nvidia/nccl/lib/libnccl.so.2`),
//! under each Python's `python3.X`. Only readlinks, `stat`s and bounded listings inside the image.

use std::ffi::OsStr;
use std::path::Path;

use crate::detect::image::{exists, inside, DIR_ENTRIES};
use crate::detect::{file, Vars};

/// `site-packages/nvidia/nccl/lib/libnccl.so.2` of the image's Pythons: what PyTorch's wheel loads.
pub(crate) fn wheel_nccl(root: &Path, vars: &Vars) -> Option<String> {
    let mut prefixes: Vec<String> = ["/usr/local/lib", "/usr/lib", "/opt/conda/lib"].map(String::from).to_vec();
    // A virtual environment used through PATH alone: the first PATH entry's Python comes first.
    let path = vars.get(OsStr::new("PATH")).map(|x| x.to_string_lossy().into_owned()).unwrap_or_default();
    let from_path =
        path.split(':').take(16).filter_map(|d| d.trim_end_matches('/').strip_suffix("/bin")).map(String::from);
    let from_vars = ["VIRTUAL_ENV", "CONDA_PREFIX"]
        .iter()
        .filter_map(|v| vars.get(OsStr::new(v)).map(|x| x.to_string_lossy().trim_end_matches('/').to_string()));
    let mut first: Vec<String> =
        from_vars.chain(from_path).filter(|p| p.starts_with('/')).map(|p| format!("{p}/lib")).collect();
    first.retain(|p| !prefixes.contains(p));
    first.dedup();
    prefixes.splice(0..0, first);
    // /usr/bin/python3 names the version of both /usr/lib and pip's /usr/local/lib: read once.
    let usr_bin = std::cell::OnceCell::new();
    let version = |bin: &str| match bin {
        "/usr/bin/python3" => usr_bin.get_or_init(|| python_version(root, bin)).clone(),
        _ => python_version(root, bin),
    };
    for prefix in prefixes {
        // Only where a Python lives beside it, so that PATH entries such as /usr/local/cuda/bin cost one
        // stat (/usr/local/lib is Debian pip's, for /usr/bin/python3).
        let bin = format!("{}/bin/python3", prefix.trim_end_matches("/lib"));
        let here = exists(root, &bin);
        if prefix != "/usr/local/lib" && !here {
            continue;
        }
        // The Python's own `python3.X` where its links name it, else the prefix listed.
        let named = version(if here { &bin } else { "/usr/bin/python3" });
        let pythons = match named {
            Some(v) => vec![v],
            None => {
                let Some(dir) = inside(root, &prefix) else { continue };
                let Ok(listed) = file::names(&dir, DIR_ENTRIES) else { continue };
                let mut all: Vec<String> = listed.into_iter().filter(|n| n.starts_with("python3")).collect();
                all.sort();
                all.reverse();
                all
            }
        };
        for py in &pythons {
            for sub in ["site-packages", "dist-packages"] {
                let p = format!("{prefix}/{py}/{sub}/nvidia/nccl/lib/libnccl.so.2");
                if exists(root, &p) {
                    return Some(p);
                }
            }
        }
    }
    None
}

/// The `python3.X` a `python3` executable is, from its symbolic links (Debian, conda, the official
/// images and venvs link it so); `None` where no link names a version.
fn python_version(root: &Path, bin: &str) -> Option<String> {
    let mut at = inside(root, bin)?;
    for _ in 0..4 {
        let target = std::fs::read_link(&at).ok()?;
        let name = target.file_name()?.to_str()?;
        if name.strip_prefix("python3.").is_some_and(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit())) {
            return Some(name.to_string());
        }
        let t = target.to_str()?;
        at = if t.starts_with('/') { inside(root, t)? } else { at.parent()?.join(t) };
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::detect::image::scratch;

    #[test]
    fn the_wheel_nccl_is_the_pythons_own_version_not_the_newest_directory() {
        // Debian: /usr/bin/python3 -> python3.11; pip's /usr/local/lib also holds a stale
        // python3.12 tree that this Python never loads.
        let nccl = |v: &str| format!("usr/local/lib/{v}/dist-packages/nvidia/nccl/lib/libnccl.so.2");
        let root = scratch(
            "debian",
            &["usr/bin/python3.11", &nccl("python3.11"), &nccl("python3.12")],
            &[("usr/bin/python3", "python3.11")],
        );
        let found = wheel_nccl(&root, &Vars::new());
        let _ = std::fs::remove_dir_all(&root);
        assert_eq!(found, Some(format!("/{}", nccl("python3.11"))));
    }

    #[test]
    fn a_venvs_python_is_followed_to_its_version_inside_the_root() {
        // python -m venv: bin/python3 -> python -> /usr/bin/python3.11 (absolute: the image's).
        let root = scratch(
            "venv",
            &["usr/bin/python3.11", "opt/venv/lib/python3.11/site-packages/nvidia/nccl/lib/libnccl.so.2"],
            &[("opt/venv/bin/python3", "python"), ("opt/venv/bin/python", "/usr/bin/python3.11")],
        );
        assert_eq!(python_version(&root, "/opt/venv/bin/python3").as_deref(), Some("python3.11"));
        let vars: Vars = [("PATH".into(), "/opt/venv/bin:/usr/bin".into())].into_iter().collect();
        let found = wheel_nccl(&root, &vars);
        // A Python that is no link: the prefix is listed, as before.
        let plain = scratch(
            "plain",
            &["usr/bin/python3", "usr/lib/python3.10/site-packages/nvidia/nccl/lib/libnccl.so.2"],
            &[],
        );
        let listed = wheel_nccl(&plain, &Vars::new());
        let _ = (std::fs::remove_dir_all(&root), std::fs::remove_dir_all(&plain));
        assert_eq!(found.as_deref(), Some("/opt/venv/lib/python3.11/site-packages/nvidia/nccl/lib/libnccl.so.2"));
        assert_eq!(listed.as_deref(), Some("/usr/lib/python3.10/site-packages/nvidia/nccl/lib/libnccl.so.2"));
    }
}
