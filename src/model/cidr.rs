//! IP prefixes: parsing as Go's `net.ParseCIDR` does, normalising, containment.

use std::net::IpAddr;

/// An IPv4 or IPv6 prefix, normalised (host bits zero).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Cidr {
    pub addr: IpAddr,
    pub prefix: u8,
}

/// Parses `addr/prefix` (IPv4 or IPv6) and clears the host bits, as Go's `net.ParseCIDR` does
/// for the network.
pub fn parse_cidr(s: &str) -> Result<Cidr, String> {
    let (addr, prefix) = s.split_once('/').ok_or("missing /prefix")?;
    let addr: IpAddr = addr.parse().map_err(|_| "invalid address".to_string())?;
    if prefix.is_empty() || prefix.len() > 3 || !prefix.bytes().all(|c| c.is_ascii_digit()) {
        return Err("invalid prefix length".into());
    }
    let prefix: u8 = prefix.parse().map_err(|_| "invalid prefix length".to_string())?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    if prefix > max {
        return Err(format!("prefix length {prefix} exceeds {max}"));
    }
    Ok(Cidr::new(addr, prefix))
}

impl Cidr {
    /// A prefix with host bits cleared. `prefix` is clamped to the family's width.
    pub fn new(addr: IpAddr, prefix: u8) -> Cidr {
        let width = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = prefix.min(width);
        let addr = match addr {
            IpAddr::V4(a) => IpAddr::V4((u32::from(a) & mask_u32(prefix)).into()),
            IpAddr::V6(a) => IpAddr::V6((u128::from(a) & mask_u128(prefix)).into()),
        };
        Cidr { addr, prefix }
    }

    /// A host route (/32 or /128).
    pub fn host(addr: IpAddr) -> Cidr {
        Cidr { addr, prefix: if addr.is_ipv4() { 32 } else { 128 } }
    }

    /// Whether `inner` is a longer prefix inside this one.
    pub fn strictly_contains(&self, inner: &Cidr) -> bool {
        self.prefix < inner.prefix && self.contains(&inner.addr)
    }

    /// Whether `ip` lies inside this prefix.
    pub fn contains(&self, ip: &IpAddr) -> bool {
        match (self.addr, ip) {
            (IpAddr::V4(n), IpAddr::V4(a)) => u32::from(*a) & mask_u32(self.prefix) == u32::from(n),
            (IpAddr::V6(n), IpAddr::V6(a)) => u128::from(*a) & mask_u128(self.prefix) == u128::from(n),
            _ => false,
        }
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

fn mask_u32(prefix: u8) -> u32 {
    if prefix == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(prefix.min(32)))
    }
}

fn mask_u128(prefix: u8) -> u128 {
    if prefix == 0 {
        0
    } else {
        u128::MAX << (128 - u32::from(prefix.min(128)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidrs() {
        assert_eq!(parse_cidr("10.1.2.3/8").unwrap().to_string(), "10.0.0.0/8");
        assert_eq!(parse_cidr("fd00::1:2/64").unwrap().to_string(), "fd00::/64");
        assert_eq!(parse_cidr("0.0.0.0/0").unwrap().to_string(), "0.0.0.0/0");
        for bad in ["10.0.0.0", "10.0.0.0/", "10.0.0.0/-1", "10.0.0.0/+8", "fd00::/129", "x/8", "10.0.0.0/0008"] {
            assert!(parse_cidr(bad).is_err(), "{bad}");
        }
    }
}
