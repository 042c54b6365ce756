//! The termination message Kubernetes shows, one writer for every stage that leaves one: the
//! headline first, then whole lines, most important first. It must never exceed [`MAX`] bytes, cut
//! a line in the middle (but an overlong headline) or fail the caller.

use std::path::Path;

/// Kubernetes keeps at most 4096 bytes of a termination message.
pub const MAX: usize = 4096;

/// `text` cut to at most `max` bytes at a character boundary, marked when cut.
pub fn clip(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let end = (0..=max.saturating_sub(3)).rev().find(|&e| text.is_char_boundary(e)).unwrap_or(0);
    format!("{}...", &text[..end])
}

/// The headline, then `lines` while they fit, the rest of `total` said as `... and N more`.
pub fn fit(headline: &str, lines: &[String], total: usize) -> String {
    let mut out = clip(&format!("{}\n", headline.trim_end()), MAX - 64);
    if !out.ends_with('\n') {
        out.push('\n');
    }
    for (k, l) in lines.iter().enumerate() {
        let tail = format!("... and {} more\n", total.saturating_sub(k));
        let l = clip(l, MAX / 2);
        if out.len() + l.len() + 1 + tail.len() > MAX {
            out.push_str(&tail);
            return out;
        }
        out.push_str(&l);
        out.push('\n');
    }
    if total > lines.len() {
        out.push_str(&format!("... and {} more\n", total - lines.len()));
    }
    out
}

/// Replaces the file's content with `text` (Kubernetes reads it once the container has ended).
pub fn write(path: &Path, text: &str) -> std::io::Result<()> {
    std::fs::write(path, clip(text, MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_messages_fit_with_the_headline_first_and_whole_lines() {
        let lines: Vec<String> = (0..500).map(|i| format!("line {i} {}", "x".repeat(40))).collect();
        let t = fit("headline", &lines, 600);
        assert!(t.len() <= MAX, "{}", t.len());
        assert!(t.starts_with("headline\n"));
        assert!(t.lines().all(|l| l == "headline" || l.starts_with("line ") || l.starts_with("... and ")));
        assert!(t.trim_end().lines().last().is_some_and(|l| l.starts_with("... and ")));
        assert_eq!(fit("h", &["a".into()], 3), "h\na\n... and 2 more\n");
    }
}
