//! How a check (doctor) or a pair (ping, the gate) came out, and the word people read for it.

use serde::Serialize;

/// How a check (doctor) or a pair (ping) came out; `Fail` sorts last, as the worst.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Pass,
    Warn,
    Fail,
}

impl Status {
    /// The word people read in the human form.
    pub fn label(self) -> &'static str {
        match self {
            Status::Pass => "PASS",
            Status::Warn => "WARN",
            Status::Fail => "FAIL",
        }
    }
}
