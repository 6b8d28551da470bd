//! Decoding the frame of a packet-in: Ethernet (up to two VLAN tags), IPv4 or IPv6 (with
//! bounded extension-header skipping), and the L4 ports of TCP, UDP and SCTP.
//!
//! Decoding never panics on any input: every read is a checked slice. A frame that is not IP,
//! or whose headers are cut short, is a [`PacketError`].

use ofp::numbers::{eth_type, ip_proto};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

const ETH_HEADER: usize = 14;
const MAX_VLAN_TAGS: usize = 2;
/// Extension headers skipped before giving up; real traffic carries one or two.
const MAX_IPV6_EXT_HEADERS: usize = 8;

/// Why a frame could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PacketError {
    #[error("{what} truncated: need {need} bytes at offset {offset}, frame has {len}")]
    Truncated { what: &'static str, offset: usize, need: usize, len: usize },
    #[error("ethertype {0:#06x} is not IPv4 or IPv6")]
    NotIp(u16),
    #[error("more than {MAX_VLAN_TAGS} VLAN tags")]
    TooManyVlanTags,
    #[error("IP version {0} in a frame of ethertype IPv{1}")]
    BadIpVersion(u8, u8),
    #[error("IPv4 header length {0} bytes is below 20")]
    BadIhl(usize),
    #[error("more than {MAX_IPV6_EXT_HEADERS} IPv6 extension headers")]
    TooManyExtensionHeaders,
}

/// What the audit log needs from a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PacketInfo {
    pub src_ip: IpAddr,
    pub dst_ip: IpAddr,
    /// IP protocol number (IPv6: the header after the skipped extension headers).
    pub protocol: u8,
    /// IPv4 total length; IPv6 payload length + 40 (as Antrea reports it).
    pub ip_len: u32,
    /// Source port (TCP, UDP, SCTP; `None` for other protocols and non-first fragments).
    pub src_port: Option<u16>,
    /// Destination port, as `src_port`.
    pub dst_port: Option<u16>,
}

/// The name Antrea prints for an IP protocol number, if it has one.
pub(crate) fn protocol_name(protocol: u8) -> Option<&'static str> {
    Some(match protocol {
        ip_proto::ICMP => "ICMP",
        ip_proto::IGMP => "IGMP",
        ip_proto::TCP => "TCP",
        ip_proto::UDP => "UDP",
        ip_proto::ICMPV6 => "IPv6-ICMP",
        ip_proto::SCTP => "SCTP",
        _ => return None,
    })
}

fn slice<'a>(buf: &'a [u8], offset: usize, need: usize, what: &'static str) -> Result<&'a [u8], PacketError> {
    offset.checked_add(need).and_then(|end| buf.get(offset..end)).ok_or(PacketError::Truncated {
        what,
        offset,
        need,
        len: buf.len(),
    })
}

/// A fixed-size header at `offset`: indexing into the returned array is checked at compile time.
fn fixed<'a, const N: usize>(buf: &'a [u8], offset: usize, what: &'static str) -> Result<&'a [u8; N], PacketError> {
    slice(buf, offset, N, what)?.try_into().map_err(|_| PacketError::Truncated {
        what,
        offset,
        need: N,
        len: buf.len(),
    })
}

fn be16(h: u8, l: u8) -> u16 {
    u16::from_be_bytes([h, l])
}

/// Decodes an Ethernet frame down to the L4 ports.
pub fn decode(frame: &[u8]) -> Result<PacketInfo, PacketError> {
    let eth = fixed::<ETH_HEADER>(frame, 0, "Ethernet header")?;
    let mut ethertype = be16(eth[12], eth[13]);
    let mut offset = ETH_HEADER;
    let mut tags = 0;
    while ethertype == eth_type::VLAN || ethertype == eth_type::QINQ {
        if tags == MAX_VLAN_TAGS {
            return Err(PacketError::TooManyVlanTags);
        }
        let tag = fixed::<4>(frame, offset, "VLAN tag")?;
        ethertype = be16(tag[2], tag[3]);
        offset += 4;
        tags += 1;
    }
    match ethertype {
        eth_type::IPV4 => decode_ipv4(frame, offset),
        eth_type::IPV6 => decode_ipv6(frame, offset),
        other => Err(PacketError::NotIp(other)),
    }
}

fn decode_ipv4(frame: &[u8], offset: usize) -> Result<PacketInfo, PacketError> {
    let h = fixed::<20>(frame, offset, "IPv4 header")?;
    let version = h[0] >> 4;
    if version != 4 {
        return Err(PacketError::BadIpVersion(version, 4));
    }
    let ihl = usize::from(h[0] & 0x0f) * 4;
    if ihl < 20 {
        return Err(PacketError::BadIhl(ihl));
    }
    slice(frame, offset, ihl, "IPv4 options")?;
    let total_len = be16(h[2], h[3]);
    let first_fragment = be16(h[6], h[7]) & 0x1fff == 0;
    let protocol = h[9];
    let src_ip = IpAddr::V4(Ipv4Addr::new(h[12], h[13], h[14], h[15]));
    let dst_ip = IpAddr::V4(Ipv4Addr::new(h[16], h[17], h[18], h[19]));
    let (src_port, dst_port) = if first_fragment { ports(frame, offset + ihl, protocol)? } else { (None, None) };
    Ok(PacketInfo { src_ip, dst_ip, protocol, ip_len: u32::from(total_len), src_port, dst_port })
}

fn decode_ipv6(frame: &[u8], offset: usize) -> Result<PacketInfo, PacketError> {
    let h = fixed::<40>(frame, offset, "IPv6 header")?;
    let version = h[0] >> 4;
    if version != 6 {
        return Err(PacketError::BadIpVersion(version, 6));
    }
    let payload_len = be16(h[4], h[5]);
    let mut next = h[6];
    // Constant ranges inside a 40-byte array: cannot fail.
    let mut src = [0u8; 16];
    let mut dst = [0u8; 16];
    src.copy_from_slice(&h[8..24]);
    dst.copy_from_slice(&h[24..40]);
    let src_ip = IpAddr::V6(Ipv6Addr::from(src));
    let dst_ip = IpAddr::V6(Ipv6Addr::from(dst));
    let mut at = offset + 40;
    let mut first_fragment = true;
    let mut skipped = 0;
    loop {
        let len = match next {
            // Hop-by-hop, routing, destination options: length in 8-octet units, not counting the first 8.
            ip_proto::HOP_BY_HOP | ip_proto::IPV6_ROUTING | ip_proto::IPV6_DEST_OPTS => {
                let ext = fixed::<2>(frame, at, "IPv6 extension header")?;
                (usize::from(ext[1]) + 1) * 8
            }
            // Fragment header: fixed 8 bytes; a non-first fragment carries no L4 header.
            ip_proto::IPV6_FRAGMENT => {
                let ext = fixed::<8>(frame, at, "IPv6 fragment header")?;
                if be16(ext[2], ext[3]) & 0xfff8 != 0 {
                    first_fragment = false;
                }
                8
            }
            _ => break,
        };
        if skipped == MAX_IPV6_EXT_HEADERS {
            return Err(PacketError::TooManyExtensionHeaders);
        }
        slice(frame, at, len, "IPv6 extension header")?;
        next = fixed::<1>(frame, at, "IPv6 extension header")?[0];
        at += len;
        skipped += 1;
    }
    let (src_port, dst_port) = if first_fragment { ports(frame, at, next)? } else { (None, None) };
    Ok(PacketInfo { src_ip, dst_ip, protocol: next, ip_len: u32::from(payload_len) + 40, src_port, dst_port })
}

fn ports(frame: &[u8], at: usize, protocol: u8) -> Result<(Option<u16>, Option<u16>), PacketError> {
    let what = match protocol {
        ip_proto::TCP => "TCP ports",
        ip_proto::UDP => "UDP ports",
        ip_proto::SCTP => "SCTP ports",
        _ => return Ok((None, None)),
    };
    let p = fixed::<4>(frame, at, what)?;
    Ok((Some(be16(p[0], p[1])), Some(be16(p[2], p[3]))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eth(ethertype: u16) -> Vec<u8> {
        let mut f = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2];
        f.extend_from_slice(&ethertype.to_be_bytes());
        f
    }

    #[test]
    fn ipv4_udp_with_options() {
        let mut f = eth(eth_type::IPV4);
        // IHL 6 (one option word), total length 32, UDP.
        f.extend_from_slice(&[0x46, 0, 0, 32, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2, 1, 1, 0, 0]);
        f.extend_from_slice(&[0x30, 0x39, 0, 53, 0, 8, 0, 0]);
        let p = decode(&f).unwrap();
        assert_eq!(p.protocol, ip_proto::UDP);
        assert_eq!((p.src_port, p.dst_port), (Some(12345), Some(53)));
        assert_eq!(p.ip_len, 32);
        assert_eq!(p.src_ip, "10.0.0.1".parse::<IpAddr>().unwrap());
    }

    #[test]
    fn ipv4_non_first_fragment_has_no_ports() {
        let mut f = eth(eth_type::IPV4);
        f.extend_from_slice(&[0x45, 0, 0, 28, 0, 0, 0, 0x10, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
        let p = decode(&f).unwrap();
        assert_eq!((p.src_port, p.dst_port), (None, None));
        assert_eq!(p.protocol, ip_proto::TCP);
    }

    #[test]
    fn ipv6_extension_headers_are_skipped() {
        let mut f = eth(eth_type::IPV6);
        let mut h = vec![0x60, 0, 0, 0, 0, 24, 0 /* hop-by-hop */, 64];
        h.extend_from_slice(&[0; 15]);
        h.push(1);
        h.extend_from_slice(&[0; 15]);
        h.push(2);
        f.extend_from_slice(&h);
        f.extend_from_slice(&[60 /* dest opts */, 0, 0, 0, 0, 0, 0, 0]);
        f.extend_from_slice(&[132 /* SCTP */, 0, 0, 0, 0, 0, 0, 0]);
        f.extend_from_slice(&[0x0b, 0xb8, 0x13, 0x88, 0, 0, 0, 0]);
        let p = decode(&f).unwrap();
        assert_eq!(p.protocol, ip_proto::SCTP);
        assert_eq!((p.src_port, p.dst_port), (Some(3000), Some(5000)));
        assert_eq!(p.ip_len, 64);
        assert_eq!(p.dst_ip, "::2".parse::<IpAddr>().unwrap());
    }

    #[test]
    fn ipv6_later_fragment_has_no_ports() {
        let mut f = eth(eth_type::IPV6);
        let mut h = vec![0x60, 0, 0, 0, 0, 16, 44, 64];
        h.extend_from_slice(&[0; 32]);
        f.extend_from_slice(&h);
        f.extend_from_slice(&[6, 0, 0x05, 0xa8, 0, 0, 0, 1]);
        let p = decode(&f).unwrap();
        assert_eq!(p.protocol, ip_proto::TCP);
        assert_eq!(p.src_port, None);
    }

    #[test]
    fn endless_extension_chain_is_bounded() {
        let mut f = eth(eth_type::IPV6);
        let mut h = vec![0x60, 0, 0, 0, 0, 0, 0, 64];
        h.extend_from_slice(&[0; 32]);
        f.extend_from_slice(&h);
        for _ in 0..20 {
            f.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0]);
        }
        assert_eq!(decode(&f), Err(PacketError::TooManyExtensionHeaders));
    }

    #[test]
    fn vlan_tags_and_non_ip() {
        let mut f = eth(eth_type::QINQ);
        f.extend_from_slice(&[0, 10, 0x81, 0x00, 0, 20, 0x08, 0x06]);
        assert_eq!(decode(&f), Err(PacketError::NotIp(eth_type::ARP)));
        let mut f = eth(eth_type::VLAN);
        f.extend_from_slice(&[0, 10, 0x81, 0x00, 0, 20, 0x81, 0x00, 0, 30, 0x08, 0x00]);
        assert_eq!(decode(&f), Err(PacketError::TooManyVlanTags));
    }

    #[test]
    fn bad_version_and_ihl() {
        let mut f = eth(eth_type::IPV4);
        f.extend_from_slice(&[0x65; 20]);
        assert_eq!(decode(&f), Err(PacketError::BadIpVersion(6, 4)));
        let mut f = eth(eth_type::IPV4);
        f.extend_from_slice(&[0x44; 20]);
        assert_eq!(decode(&f), Err(PacketError::BadIhl(16)));
    }
}
