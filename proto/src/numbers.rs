//! The numbers by which a packet's headers name the header that follows: EtherTypes (the
//! Ethernet type field, OpenFlow's `eth_type`) and IP protocol numbers (IPv4's protocol and
//! IPv6's next header, OpenFlow's `ip_proto`). Named once, for the codec's text, the flows
//! npagent writes, the packet-ins it decodes and what it explains.

/// EtherTypes (IEEE 802).
pub mod eth_type {
    /// IPv4.
    pub const IPV4: u16 = 0x0800;
    /// ARP.
    pub const ARP: u16 = 0x0806;
    /// Reverse ARP.
    pub const RARP: u16 = 0x8035;
    /// An 802.1Q VLAN tag (C-tag).
    pub const VLAN: u16 = 0x8100;
    /// IPv6.
    pub const IPV6: u16 = 0x86dd;
    /// MPLS unicast.
    pub const MPLS: u16 = 0x8847;
    /// MPLS multicast.
    pub const MPLS_MULTICAST: u16 = 0x8848;
    /// An 802.1ad service VLAN tag (S-tag, QinQ).
    pub const QINQ: u16 = 0x88a8;
}

/// IP protocol numbers (IANA), IPv6's extension headers among them.
pub mod ip_proto {
    /// IPv6 hop-by-hop options (an extension header).
    pub const HOP_BY_HOP: u8 = 0;
    /// ICMP (for IPv4).
    pub const ICMP: u8 = 1;
    /// IGMP.
    pub const IGMP: u8 = 2;
    /// TCP.
    pub const TCP: u8 = 6;
    /// UDP.
    pub const UDP: u8 = 17;
    /// IPv6 routing header (an extension header).
    pub const IPV6_ROUTING: u8 = 43;
    /// IPv6 fragment header (an extension header).
    pub const IPV6_FRAGMENT: u8 = 44;
    /// ICMPv6.
    pub const ICMPV6: u8 = 58;
    /// IPv6 destination options (an extension header).
    pub const IPV6_DEST_OPTS: u8 = 60;
    /// SCTP.
    pub const SCTP: u8 = 132;
}
