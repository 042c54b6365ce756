//! An IP network prefix and whether an address is inside it: the one matcher behind NCCL's
//! `NCCL_IB_ADDR_RANGE`, the routing table's destinations and the listeners' `--allow` lists.
//! Pure.

use std::net::IpAddr;

/// `addr/len`: the first `len` bits of `addr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prefix {
    pub addr: IpAddr,
    pub len: u8,
}

impl Prefix {
    /// Whether `ip` shares this prefix's first `len` bits; never an address of the other family.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let (net, ip, bits) = match (self.addr, ip) {
            (IpAddr::V4(n), IpAddr::V4(a)) => (u128::from(u32::from(n)), u128::from(u32::from(a)), 32),
            (IpAddr::V6(n), IpAddr::V6(a)) => (u128::from(n), u128::from(a), 128),
            _ => return false,
        };
        let len = u32::from(self.len).min(bits);
        len == 0 || (net >> (bits - len)) == (ip >> (bits - len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(a: &str, len: u8) -> Prefix {
        Prefix { addr: a.parse().expect("ip"), len }
    }

    #[test]
    fn an_address_is_inside_its_prefix_only() {
        assert!(p("10.9.0.0", 24).contains("10.9.0.77".parse().expect("ip")));
        assert!(!p("10.9.0.0", 24).contains("10.9.1.1".parse().expect("ip")));
        assert!(p("0.0.0.0", 0).contains("192.0.2.1".parse().expect("ip")));
        assert!(p("fd00::", 8).contains("fdff::1".parse().expect("ip")));
        assert!(!p("fd00::", 16).contains("fd01::1".parse().expect("ip")));
        assert!(p("10.0.0.1", 32).contains("10.0.0.1".parse().expect("ip")));
        assert!(p("10.0.0.1", 40).contains("10.0.0.1".parse().expect("ip")), "a length past the family's is its width");
        assert!(!p("0.0.0.0", 0).contains("::ffff:10.0.0.1".parse().expect("ip")), "families never mix");
    }
}
