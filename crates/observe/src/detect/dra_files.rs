//! The KEP-5304 metadata files a container was given: a bounded walk of both trees, exactly
//! `<tree>/<claim>/<request>/<driver>-metadata.json`, each read once through `detect::file` into `dra_metadata`.
//! A malformed file is named and skipped; the others stand. Reads only; decides nothing.

use std::io;
use std::path::{Path, PathBuf};

use crate::detect::dra_drivers::printable;
use crate::detect::dra_metadata::{self, FilePath, Metadata};
use crate::detect::file;

/// At most this many names are taken from one directory listing: a pod has a few claims, each a
/// few requests, each a file per driver.
pub const MAX_ENTRIES: usize = 64;
/// At most this many directories are listed in one walk, both trees together.
pub const MAX_DIRS: usize = 256;
/// At most this many metadata files are read in one walk.
pub const MAX_FILES: usize = 64;

#[derive(Debug)]
pub struct File {
    /// Its path below the root (`resourceclaims/<claim>/<request>/<driver>-metadata.json`).
    pub rel: String,
    pub path: FilePath,
    pub metadata: Metadata,
}

#[derive(Debug, Default)]
pub struct Walk {
    /// The files read and parsed, in the order walked (trees, then names, in natural order).
    pub files: Vec<File>,
    /// Files named and skipped, and listings that failed, one line each.
    pub problems: Vec<String>,
    /// Whether the root exists at all (a pod without DRA claims has none).
    pub present: bool,
}

pub fn walk(root: &Path) -> Walk {
    let mut out = Walk { present: root.is_dir(), ..Walk::default() };
    if !out.present {
        return out;
    }
    let mut dirs = 0usize;
    for tree in [dra_metadata::RESOURCE_CLAIMS_DIR, dra_metadata::RESOURCE_CLAIM_TEMPLATES_DIR] {
        for claim in list(root, tree, &mut dirs, &mut out.problems) {
            let claim_rel = format!("{tree}/{claim}");
            for request in list(root, &claim_rel, &mut dirs, &mut out.problems) {
                let request_rel = format!("{claim_rel}/{request}");
                for name in list(root, &request_rel, &mut dirs, &mut out.problems) {
                    let rel = format!("{request_rel}/{name}");
                    let Some(path) = dra_metadata::file_path(&rel) else {
                        log::debug!("{}: not a metadata file's name; skipped", root.join(&rel).display());
                        continue;
                    };
                    if out.files.len() >= MAX_FILES {
                        out.problems.push(format!(
                            "more than {MAX_FILES} DRA metadata files under {}: {} and later ones are not read",
                            root.display(),
                            printable(&rel, 300)
                        ));
                        return out;
                    }
                    out.files.extend(read(root, &rel, &mut out.problems).map(|metadata| File { rel, path, metadata }));
                }
            }
        }
    }
    out
}

/// The names in `root/rel`, in natural order, at most [`MAX_ENTRIES`]: a directory that is not
/// there or is not a directory gives none (a file where a claim's directory would be is no
/// metadata); any other failure (a symlink loop, permission) is named.
fn list(root: &Path, rel: &str, dirs: &mut usize, problems: &mut Vec<String>) -> Vec<String> {
    let path = root.join(rel);
    if *dirs >= MAX_DIRS {
        if *dirs == MAX_DIRS {
            problems.push(format!(
                "more than {MAX_DIRS} directories under {}: {} and later ones are not read",
                root.display(),
                printable(rel, 300)
            ));
            *dirs += 1;
        }
        return Vec::new();
    }
    *dirs += 1;
    match file::names(&path, MAX_ENTRIES + 1) {
        Ok(mut names) => {
            if names.len() > MAX_ENTRIES {
                problems.push(format!(
                    "{} holds more than {MAX_ENTRIES} entries; only {MAX_ENTRIES} are read",
                    shown(&path)
                ));
                names.truncate(MAX_ENTRIES);
            }
            crate::detect::names::sort_natural(&mut names);
            names
        }
        Err(e) if matches!(e.kind(), io::ErrorKind::NotFound | io::ErrorKind::NotADirectory) => Vec::new(),
        Err(e) => {
            problems.push(format!("cannot list {}: {e}; the DRA metadata below it is not read", shown(&path)));
            Vec::new()
        }
    }
}

/// One file, read within the parser's bound and parsed; a file that cannot be read or parsed is
/// named with why, and skipped.
fn read(root: &Path, rel: &str, problems: &mut Vec<String>) -> Option<Metadata> {
    let path: PathBuf = root.join(rel);
    let bytes = file::read(&path, dra_metadata::DEFAULT_MAX_BYTES)
        .map_err(|e| problems.push(format!("DRA metadata file skipped: {e}")))
        .ok()?;
    let m = dra_metadata::parse(&bytes, dra_metadata::DEFAULT_MAX_BYTES)
        .map_err(|e| problems.push(format!("DRA metadata file {} skipped: {e}", shown(&path))))
        .ok()?;
    problems.extend(m.problems.iter().map(|p| format!("{}: {p}", shown(&path))));
    Some(m)
}

/// A path for a message: its bytes from outside shown only as printable ASCII.
fn shown(path: &Path) -> String {
    printable(&path.display().to_string(), 300)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures/nodes/dra-metadata/var/run/kubernetes.io/dra-device-attributes")
    }

    #[test]
    fn both_trees_of_the_fixture_are_walked_in_order() {
        let w = walk(&fixture());
        assert!(w.present && w.problems.is_empty(), "{:?}", w.problems);
        let rels: Vec<&str> = w.files.iter().map(|f| f.rel.as_str()).collect();
        assert_eq!(
            rels,
            [
                "resourceclaims/rdma-rails/nics/sriovnetwork.k8snetworkplumbingwg.io-metadata.json",
                "resourceclaimtemplates/extra-nic/nic/sriovnetwork.k8snetworkplumbingwg.io-metadata.json"
            ]
        );
        assert_eq!(w.files[1].metadata.skipped, ["metadata.resource.k8s.io/v1"]);
    }

    #[test]
    fn no_root_is_no_walk() {
        let w = walk(Path::new("/nonexistent/nccl-wrap-dra"));
        assert!(!w.present && w.files.is_empty() && w.problems.is_empty());
    }
}
