//! Messages for people. Every line nccl-wrap writes to stderr for a person starts with
//! [`PREFIX`], so a pod's log shows at a glance which lines are the wrapper's; detail for
//! debugging goes through `log` (`NCCL_WRAP_LOG`) instead. The lowest module: it names nothing.

pub const PREFIX: &str = "nccl-wrap:";

/// `1204` as `1,204`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_grouped_by_thousands() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1204), "1,204");
        assert_eq!(thousands(546_000), "546,000");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }
}
