//! NCCL's device-list syntax (`NCCL_IB_HCA`, `NCCL_SOCKET_IFNAME`) read as `parseStringList` /
//! `matchIfList` read it: `^` excludes, then `=` makes names exact, else prefixes; `:<port>` by
//! `atoi`; at most `MAX_ENTRIES` entries. Pure.

/// NCCL keeps at most this many entries (MAX_IB_DEVS / MAX_IFS).
pub const MAX_ENTRIES: usize = 32;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub name: String,
    /// `None`: any port (NCCL's -1).
    pub(crate) port: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct List {
    pub exclude: bool,
    pub exact: bool,
    pub entries: Vec<Entry>,
}

impl List {
    pub fn parse(value: &str) -> List {
        let (exclude, rest) = value.strip_prefix('^').map_or((false, value), |r| (true, r));
        let (exact, rest) = rest.strip_prefix('=').map_or((false, rest), |r| (true, r));
        let entries = rest
            .split(',')
            .filter_map(|item| {
                // An empty name is dropped; a port that reads as -1 is NCCL's "any port".
                let (name, port) = match item.split_once(':') {
                    Some((n, p)) => (n, Some(atoi(p)).filter(|&p| p != -1)),
                    None => (item, None),
                };
                (!name.is_empty()).then(|| Entry { name: name.to_string(), port })
            })
            .take(MAX_ENTRIES)
            .collect();
        List { exclude, exact, entries }
    }

    /// Entries NCCL reads as prefixes (no `=`): each may select more devices than it names.
    pub fn prefix_names(&self) -> Vec<&str> {
        self.entries.iter().filter(|_| !self.exact).map(|e| e.name.as_str()).collect()
    }

    /// Whether NCCL uses `name` port `port` (`None` for interfaces, which have no port).
    pub fn selects(&self, name: &str, port: Option<i64>) -> bool {
        let hit = |e: &Entry| self.name_matches(e, name) && e.port.zip(port).is_none_or(|(w, h)| w == h);
        // No entries match everything, so `^` alone selects nothing (NCCL's matchIfList).
        (self.entries.is_empty() || self.entries.iter().any(hit)) != self.exclude
    }

    fn name_matches(&self, e: &Entry, name: &str) -> bool {
        name == e.name || (!self.exact && name.starts_with(&e.name))
    }

    /// Each bare-prefix entry that is one of `names` but also selects longer ones (`mlx5_1` and
    /// `mlx5_10`), with those names; a prefix naming nothing itself (`eth`) is deliberate.
    pub fn over_matches<'a>(&self, names: &[&'a str]) -> Vec<(String, Vec<&'a str>)> {
        self.entries
            .iter()
            .filter(|e| !self.exact && names.contains(&e.name.as_str()))
            .filter_map(|e| {
                let extra: Vec<&str> =
                    names.iter().copied().filter(|n| *n != e.name && n.starts_with(e.name.as_str())).collect();
                (!extra.is_empty()).then(|| (e.name.clone(), extra))
            })
            .collect()
    }

    /// Entries whose name matches none of `names`.
    pub fn unmatched(&self, names: &[&str]) -> Vec<String> {
        self.entries.iter().filter(|e| !names.iter().any(|n| self.name_matches(e, n))).map(|e| e.name.clone()).collect()
    }
}

/// glibc's `atoi`, `(int) strtol(text, NULL, 10)`: saturated to a `long`, cut to an `int`.
fn atoi(text: &str) -> i64 {
    let t = text.trim_start_matches([' ', '\t', '\n', '\u{b}', '\u{c}', '\r']);
    let (neg, digits) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let v =
        digits.bytes().take_while(u8::is_ascii_digit).fold(0i128, |v, b| (v * 10 + i128::from(b - b'0')).min(1 << 63));
    let long = if neg { (-v).max(i128::from(i64::MIN)) } else { v.min(i128::from(i64::MAX)) };
    let int = long as i64 as i32;
    i64::from(int)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_names_of_user_values() {
        assert_eq!(List::parse("mlx5_1:1,mlx5_2").prefix_names(), ["mlx5_1", "mlx5_2"]);
        assert!(List::parse("=mlx5_1").prefix_names().is_empty());
        assert!(List::parse("^=mlx5_1").prefix_names().is_empty());
        assert_eq!(List::parse("^mlx5_1").prefix_names(), ["mlx5_1"]);
    }

    const H100: [&str; 12] = [
        "mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_7", "mlx5_8", "mlx5_9", "mlx5_10",
        "mlx5_11",
    ];

    fn selected(value: &str, names: &[&str]) -> Vec<String> {
        let l = List::parse(value);
        names.iter().filter(|n| l.selects(n, Some(1))).map(|n| n.to_string()).collect()
    }

    #[test]
    fn bare_prefix_mlx5_1_also_selects_mlx5_10_and_11() {
        assert_eq!(selected("mlx5_1", &H100), ["mlx5_1", "mlx5_10", "mlx5_11"]);
        assert_eq!(List::parse("mlx5_1").over_matches(&H100), [("mlx5_1".to_string(), vec!["mlx5_10", "mlx5_11"])]);
    }

    #[test]
    fn equals_makes_names_exact() {
        assert_eq!(selected("=mlx5_1", &H100), ["mlx5_1"]);
        assert!(List::parse("=mlx5_1").over_matches(&H100).is_empty());
    }

    #[test]
    fn caret_excludes_and_goes_before_equals() {
        let all_but = selected("^=mlx5_1,mlx5_0", &H100);
        assert_eq!(all_but.len(), 10);
        assert!(!all_but.contains(&"mlx5_1".to_string()));
        // `^mlx5_1` excludes the prefix, so mlx5_10/11 go too.
        assert_eq!(selected("^mlx5_1", &H100).len(), 9);
        // `=^x` is not an exclusion: '^' must come first.
        let l = List::parse("=^mlx5_1");
        assert!(!l.exclude && l.exact);
        assert_eq!(l.entries[0].name, "^mlx5_1");
    }

    #[test]
    fn ports_are_read_with_atoi() {
        let l = List::parse("mlx5_6:1,mlx5_7:2,mlx5_8:x");
        assert_eq!(l.entries[0].port, Some(1));
        assert!(l.selects("mlx5_6", Some(1)));
        assert!(!l.selects("mlx5_7", Some(1)));
        assert_eq!(l.entries[2].port, Some(0));
        assert!(!l.selects("mlx5_8", Some(1)));
        // Interfaces have no port: any entry port matches.
        assert!(l.selects("mlx5_7", None));
    }

    #[test]
    fn empty_and_unmatched_entries() {
        let l = List::parse(",,");
        assert!(l.entries.is_empty());
        assert!(l.selects("anything", Some(1)));
        assert_eq!(List::parse("mlx5_6,mlx9").unmatched(&H100), ["mlx9"]);
        assert!(List::parse("eth").over_matches(&["eth0", "eth1"]).is_empty());
    }

    #[test]
    fn caret_alone_selects_nothing_as_in_nccl() {
        // Found by fuzz/nccl_list: an empty list under `^` was read as "everything".
        for v in ["^", "^,", "^=", "^=,:1"] {
            let l = List::parse(v);
            assert!(l.entries.is_empty());
            assert!(!l.selects("mlx5_0", Some(1)), "{v}");
            assert!(!l.selects("eth0", None), "{v}");
        }
    }

    #[test]
    fn port_minus_one_is_any_port_as_in_nccl() {
        // Found by fuzz/nccl_list: NCCL's matchPort takes -1 as "any port"; so does a port that
        // glibc's atoi cuts to -1, and the cut also wraps 2^32+1 to port 1.
        let l = List::parse("mlx5_0:-1,mlx5_1:4294967297,mlx5_2:99999999999999999999,mlx5_3:\u{a0}1");
        assert_eq!(l.entries[0].port, None);
        assert!(l.selects("mlx5_0", Some(1)) && l.selects("mlx5_0", Some(2)));
        assert_eq!(l.entries[1].port, Some(1));
        assert_eq!(l.entries[2].port, None);
        // A non-breaking space is not C white space: atoi reads 0.
        assert_eq!(l.entries[3].port, Some(0));
    }

    #[test]
    fn at_most_32_entries() {
        let v: Vec<String> = (0..40).map(|i| format!("d{i}")).collect();
        assert_eq!(List::parse(&v.join(",")).entries.len(), MAX_ENTRIES);
    }
}
