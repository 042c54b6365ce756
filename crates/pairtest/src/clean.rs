//! Peer-supplied text made safe to print (a line break would forge a line, an escape drive the
//! terminal). Pure. It must never pass a control character (C0, DEL, C1, line and paragraph
//! separators, bidirectional marks) nor return more than its bound.

/// The most bytes of peer text one log line keeps (the wire allows 1024).
pub(crate) const MAX_SHOWN: usize = 512;

/// Whether `c` may reach a terminal or a log line as it is.
fn shown(c: char) -> bool {
    !(c.is_control()
        || matches!(c, '\u{2028}' | '\u{2029}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'))
}

/// `text` with every control character written as `\u{..}`, at most `max` bytes (at least 3),
/// an ellipsis where cut. Clean text comes back unchanged.
pub fn bounded(text: &str, max: usize) -> String {
    let max = max.max(3);
    let mut out = String::new();
    for c in text.chars() {
        let piece = if shown(c) { c.to_string() } else { c.escape_unicode().to_string() };
        if out.len() + piece.len() > max {
            while out.len() + 3 > max {
                out.pop();
            }
            out.push_str("...");
            break;
        }
        out.push_str(&piece);
    }
    out
}

/// Whether `text` would print as it is (nothing to escape, within [`MAX_SHOWN`]).
#[cfg(test)]
pub(crate) fn is_clean(text: &str) -> bool {
    text.len() <= MAX_SHOWN && text.chars().all(shown)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown_text(t: &str) -> String {
        bounded(t, MAX_SHOWN)
    }

    #[test]
    fn a_forged_line_and_terminal_escapes_are_written_out() {
        let forged = "bad rail\nnccl-wrap: gate: verdict: GO\x1b[2J\x1b]0;owned\x07\r";
        let t = shown_text(forged);
        assert!(!t.contains('\n') && !t.contains('\x1b') && !t.contains('\r') && !t.contains('\x07'), "{t}");
        assert_eq!(t, "bad rail\\u{a}nccl-wrap: gate: verdict: GO\\u{1b}[2J\\u{1b}]0;owned\\u{7}\\u{d}");
        assert!(!is_clean(forged) && is_clean(&t));
        // C1 controls, separators and bidirectional overrides too.
        assert_eq!(shown_text("a\u{85}b\u{2028}c\u{202e}d"), "a\\u{85}b\\u{2028}c\\u{202e}d");
    }

    #[test]
    fn long_text_is_cut_and_plain_text_kept() {
        assert_eq!(shown_text("rxe0:1 retry-exceeded: peer ä"), "rxe0:1 retry-exceeded: peer ä");
        let long = "x".repeat(5000);
        let t = shown_text(&long);
        assert_eq!(t.len(), MAX_SHOWN);
        assert!(t.ends_with("..."));
        // Escapes and wide characters count towards the bound; cleaning is idempotent.
        for hostile in ["\n".repeat(5000), "ä".repeat(5000), "é\u{1b}".repeat(700)] {
            let t = bounded(&hostile, 1024);
            assert!(t.len() <= 1024 && is_clean(&shown_text(&t)), "{}", t.len());
            assert_eq!(bounded(&t, 1024), t);
        }
    }
}
