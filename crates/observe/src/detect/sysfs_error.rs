//! What can go wrong reading the sysfs tree: the walker's errors, apart from the walker so that
//! the GID table reader (`gids`) names them without naming the walker.

use std::io;
use std::path::PathBuf;

use crate::detect::file::FileError;
use crate::detect::names;

#[derive(Debug, thiserror::Error)]
pub enum SysfsError {
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: io::Error },
    #[error("{path}: unexpected content {content:?}")]
    Content { path: PathBuf, content: String },
    #[error("{path}: entry {name:?} refused: {source}")]
    Name { path: PathBuf, name: String, source: names::NameError },
    #[error(transparent)]
    File(#[from] FileError),
}
