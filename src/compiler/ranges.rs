//! Ranges and prefixes: port ranges as value/mask matches, CIDR subtraction (`ipBlock.except`).

use crate::model::Cidr;
use std::net::IpAddr;

/// The fewest value/mask pairs that together match exactly the ports `first..=last`.
/// A mask of 0xffff is an exact port; the full range is one pair with mask 0.
pub(crate) fn port_range_masks(first: u16, last: u16) -> Vec<(u16, u16)> {
    let mut out = Vec::new();
    if first > last {
        return out;
    }
    let mut lo = u32::from(first);
    let hi = u32::from(last);
    while lo <= hi {
        // Largest aligned block starting at lo that stays within hi.
        let mut size: u32 = if lo == 0 { 1 << 16 } else { 1 << lo.trailing_zeros().min(16) };
        while lo + size - 1 > hi {
            size >>= 1;
        }
        let mask = (!(size - 1)) & 0xffff;
        out.push((lo as u16, mask as u16));
        lo += size;
    }
    out
}

/// `cidr` minus every prefix in `except`, as a minimal sorted list of prefixes.
pub(crate) fn subtract(cidr: Cidr, except: &[Cidr]) -> Vec<Cidr> {
    let mut out = Vec::new();
    subtract_into(cidr, except, &mut out);
    out.sort();
    out
}

fn subtract_into(c: Cidr, except: &[Cidr], out: &mut Vec<Cidr>) {
    let width = if c.addr.is_ipv4() { 32 } else { 128 };
    let relevant: Vec<Cidr> = except.iter().copied().filter(|e| overlaps(&c, e)).collect();
    if relevant.is_empty() {
        out.push(c);
        return;
    }
    if relevant.iter().any(|e| e.prefix <= c.prefix) || c.prefix >= width {
        // Some except covers all of c.
        return;
    }
    let (a, b) = halves(c);
    subtract_into(a, &relevant, out);
    subtract_into(b, &relevant, out);
}

fn overlaps(a: &Cidr, b: &Cidr) -> bool {
    if a.addr.is_ipv4() != b.addr.is_ipv4() {
        return false;
    }
    if a.prefix <= b.prefix {
        a.contains(&b.addr)
    } else {
        b.contains(&a.addr)
    }
}

fn halves(c: Cidr) -> (Cidr, Cidr) {
    let p = c.prefix + 1;
    match c.addr {
        IpAddr::V4(a) => {
            let bit = 1u32 << (32 - u32::from(p));
            (Cidr::new(c.addr, p), Cidr::new(IpAddr::V4((u32::from(a) | bit).into()), p))
        }
        IpAddr::V6(a) => {
            let bit = 1u128 << (128 - u32::from(p));
            (Cidr::new(c.addr, p), Cidr::new(IpAddr::V6((u128::from(a) | bit).into()), p))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::cidr::parse_cidr;
    use proptest::prelude::*;

    fn covered(masks: &[(u16, u16)], port: u16) -> usize {
        masks.iter().filter(|(v, m)| port & m == *v).count()
    }

    #[test]
    fn port_range_table() {
        type Case<'a> = (u16, u16, &'a [(u16, u16)]);
        let cases: &[Case] = &[
            (80, 80, &[(80, 0xffff)]),
            (80, 95, &[(80, 0xfff0)]),
            (0, 65535, &[(0, 0)]),
            (
                1,
                65535,
                &[
                    (1, 0xffff),
                    (2, 0xfffe),
                    (4, 0xfffc),
                    (8, 0xfff8),
                    (16, 0xfff0),
                    (32, 0xffe0),
                    (64, 0xffc0),
                    (128, 0xff80),
                    (256, 0xff00),
                    (512, 0xfe00),
                    (1024, 0xfc00),
                    (2048, 0xf800),
                    (4096, 0xf000),
                    (8192, 0xe000),
                    (16384, 0xc000),
                    (32768, 0x8000),
                ],
            ),
            (1000, 1003, &[(1000, 0xfffc)]),
            (
                1000,
                2000,
                &[
                    (1000, 0xfff8),
                    (1008, 0xfff0),
                    (1024, 0xfe00),
                    (1536, 0xff00),
                    (1792, 0xff80),
                    (1920, 0xffc0),
                    (1984, 0xfff0),
                    (2000, 0xffff),
                ],
            ),
            (65535, 65535, &[(65535, 0xffff)]),
        ];
        for (first, last, want) in cases {
            assert_eq!(port_range_masks(*first, *last), want.to_vec(), "{first}-{last}");
        }
        assert!(port_range_masks(5, 4).is_empty());
    }

    proptest! {
        #[test]
        fn port_ranges_cover_exactly(a in any::<u16>(), b in any::<u16>(), probe in any::<u16>()) {
            let (first, last) = (a.min(b), a.max(b));
            let masks = port_range_masks(first, last);
            let inside = (first..=last).contains(&probe);
            prop_assert_eq!(covered(&masks, probe), usize::from(inside));
            for p in [first, last, first.wrapping_sub(1), last.wrapping_add(1)] {
                prop_assert_eq!(covered(&masks, p), usize::from((first..=last).contains(&p)));
            }
            prop_assert!(masks.len() <= 30);
        }

        #[test]
        fn subtraction_is_exact(base in any::<u32>(), plen in 8u8..=28, ex in proptest::collection::vec((any::<u32>(), 0u8..=32), 0..4), probe in any::<u32>()) {
            let cidr = Cidr::new(IpAddr::V4(base.into()), plen);
            // Keep excepts inside the cidr, as validation guarantees.
            let except: Vec<Cidr> = ex.iter().map(|(a, p)| {
                let p = (*p).max(plen + 1);
                let addr = (u32::from(match cidr.addr { IpAddr::V4(v) => v, _ => unreachable!() })) | (a & !(u32::MAX << (32 - u32::from(plen))));
                Cidr::new(IpAddr::V4(addr.into()), p)
            }).collect();
            let parts = subtract(cidr, &except);
            let ip = IpAddr::V4(probe.into());
            let want = cidr.contains(&ip) && !except.iter().any(|e| e.contains(&ip));
            prop_assert_eq!(parts.iter().filter(|c| c.contains(&ip)).count(), usize::from(want));
            // Also probe at the edges of every except.
            for e in &except {
                let ip = e.addr;
                prop_assert_eq!(parts.iter().filter(|c| c.contains(&ip)).count(), 0);
            }
        }
    }

    #[test]
    fn subtraction_table() {
        let c = |s: &str| parse_cidr(s).unwrap();
        let show = |v: Vec<Cidr>| v.iter().map(|c| c.to_string()).collect::<Vec<_>>();
        assert_eq!(show(subtract(c("10.0.0.0/24"), &[])), ["10.0.0.0/24"]);
        assert_eq!(show(subtract(c("10.0.0.0/24"), &[c("10.0.0.0/25")])), ["10.0.0.128/25"]);
        assert_eq!(
            show(subtract(c("10.0.0.0/24"), &[c("10.0.0.64/26"), c("10.0.0.255/32")])),
            [
                "10.0.0.0/26",
                "10.0.0.128/26",
                "10.0.0.192/27",
                "10.0.0.224/28",
                "10.0.0.240/29",
                "10.0.0.248/30",
                "10.0.0.252/31",
                "10.0.0.254/32"
            ]
        );
        assert_eq!(show(subtract(c("fd00::/64"), &[c("fd00::/65")])), ["fd00::8000:0:0:0/65"]);
        assert!(subtract(c("10.0.0.0/24"), &[c("10.0.0.0/24")]).is_empty());
        assert_eq!(show(subtract(c("10.0.0.0/24"), &[c("fd00::/8")])), ["10.0.0.0/24"]);
    }
}
