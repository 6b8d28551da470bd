//! Frame decoding: crafted frames, a truncation sweep and arbitrary bytes (never a panic).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

mod audit_support;

use audit_support::*;
use npagent::audit::entry_from_packet_in;
use npagent::audit::packet::{decode, PacketError, PacketInfo};
use npagent::compiler::userdata::Disposition;
use proptest::prelude::*;

fn v6_ext(len8: u8) -> Vec<u8> {
    // Hop-by-hop / routing / destination options: length in 8-byte units beyond the first 8.
    let mut e = vec![0, len8];
    e.resize(8 * (usize::from(len8) + 1), 0);
    e
}

fn frag(offset_units: u16, more: bool) -> Vec<u8> {
    let v = (offset_units << 3) | u16::from(more);
    let mut e = vec![0, 0];
    e.extend_from_slice(&v.to_be_bytes());
    e.extend_from_slice(&[0, 0, 0, 7]);
    e
}

fn frames() -> Vec<(&'static str, Vec<u8>, PacketInfo)> {
    let v4 = |s: &str, d: &str, p, len, sp, dp| PacketInfo {
        src_ip: ip(s),
        dst_ip: ip(d),
        protocol: p,
        ip_len: len,
        src_port: sp,
        dst_port: dp,
    };
    let tcp4 = ipv4("10.10.1.13", "10.10.1.7", TCP, &tcp(57050, 80, true));
    let tcp4_info = v4("10.10.1.13", "10.10.1.7", TCP, 60, Some(57050), Some(80));
    vec![
        ("ipv4 tcp", tcp4.clone(), tcp4_info),
        ("vlan ipv4 tcp", vlan(&tcp4, 0x8100, 10), tcp4_info),
        ("qinq ipv4 tcp", vlan(&vlan(&tcp4, 0x8100, 10), 0x88a8, 20), tcp4_info),
        (
            "ipv4 udp",
            ipv4("10.0.0.1", "10.0.0.2", UDP, &udp(5353, 53, 10)),
            v4("10.0.0.1", "10.0.0.2", UDP, 38, Some(5353), Some(53)),
        ),
        (
            "ipv4 sctp",
            ipv4("10.0.0.1", "10.0.0.2", SCTP, &sctp(3000, 5000)),
            v4("10.0.0.1", "10.0.0.2", SCTP, 52, Some(3000), Some(5000)),
        ),
        (
            "ipv4 icmp",
            ipv4("10.0.0.1", "10.0.0.2", ICMP, &icmp_echo(56)),
            v4("10.0.0.1", "10.0.0.2", ICMP, 84, None, None),
        ),
        (
            "ipv4 igmp",
            ipv4("10.0.0.1", "224.0.0.22", IGMP, &igmp()),
            v4("10.0.0.1", "224.0.0.22", IGMP, 28, None, None),
        ),
        (
            "ipv6 tcp",
            ipv6("fd00::13", "fd00::7", TCP, &[], &tcp(40000, 443, false)),
            v4("fd00::13", "fd00::7", TCP, 60, Some(40000), Some(443)),
        ),
        (
            "ipv6 hop-by-hop routing dest-opts fragment(first) udp",
            ipv6(
                "fd00::13",
                "fd00::7",
                UDP,
                &[(0, v6_ext(0)), (43, v6_ext(1)), (60, v6_ext(0)), (44, frag(0, true))],
                &udp(1111, 2222, 4),
            ),
            v4("fd00::13", "fd00::7", UDP, 40 + 8 + 16 + 8 + 8 + 12, Some(1111), Some(2222)),
        ),
        (
            "ipv6 later fragment",
            ipv6("fd00::13", "fd00::7", UDP, &[(44, frag(10, false))], &[0xee; 16]),
            v4("fd00::13", "fd00::7", UDP, 40 + 8 + 16, None, None),
        ),
        (
            "ipv6 icmpv6",
            ipv6("fd00::13", "fd00::7", ICMPV6, &[], &icmp_echo(56)),
            v4("fd00::13", "fd00::7", ICMPV6, 104, None, None),
        ),
    ]
}

#[test]
fn crafted_frames_decode() {
    for (name, frame, want) in frames() {
        assert_eq!(decode(&frame), Ok(want), "{name}");
    }
}

#[test]
fn truncation_sweep() {
    for (name, frame, want) in frames() {
        // The shortest prefix that still holds every header read.
        let mut shortest = None;
        for len in 0..=frame.len() {
            match decode(&frame[..len]) {
                Ok(info) => {
                    assert_eq!(info, want, "{name} at {len}");
                    shortest.get_or_insert(len);
                }
                Err(e) => {
                    assert!(shortest.is_none(), "{name}: prefix {len} fails after a shorter one decoded: {e}");
                    assert!(matches!(e, PacketError::Truncated { .. }), "{name} at {len}: {e}");
                }
            }
        }
        assert!(shortest.is_some(), "{name}");
    }
}

#[test]
fn truncated_packet_ins_never_panic_in_the_whole_path() {
    let res = resolver();
    for (_, frame, _) in frames() {
        for len in 0..=frame.len() {
            for d in [Disposition::Allow, Disposition::Drop] {
                let pi = packet_in(frame[..len].to_vec(), d, 3, 17);
                let _ = entry_from_packet_in(&pi, &res, t_allow());
            }
        }
    }
}

#[test]
fn non_ip_and_malformed() {
    let arp = {
        let mut f = ipv4("10.0.0.1", "10.0.0.2", ICMP, &[]);
        f[12] = 0x08;
        f[13] = 0x06;
        f
    };
    assert_eq!(decode(&arp), Err(PacketError::NotIp(0x0806)));
    let three_tags = vlan(&vlan(&vlan(&ipv4("10.0.0.1", "10.0.0.2", ICMP, &[]), 0x8100, 1), 0x8100, 2), 0x88a8, 3);
    assert_eq!(decode(&three_tags), Err(PacketError::TooManyVlanTags));
    let mut v6_in_v4 = ipv4("10.0.0.1", "10.0.0.2", ICMP, &[]);
    v6_in_v4[14] = 0x65;
    assert_eq!(decode(&v6_in_v4), Err(PacketError::BadIpVersion(6, 4)));
    // IHL says 60 bytes of header; the frame has 20.
    let mut long_ihl = ipv4("10.0.0.1", "10.0.0.2", TCP, &[]);
    long_ihl[14] = 0x4f;
    assert!(matches!(decode(&long_ihl), Err(PacketError::Truncated { what: "IPv4 options", .. })));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(20_000))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = decode(&bytes);
    }

    /// Arbitrary bytes behind a valid Ethernet/IP prefix reach the deeper decoders.
    #[test]
    fn arbitrary_tails_never_panic(v6 in any::<bool>(), tail in proptest::collection::vec(any::<u8>(), 0..160)) {
        let mut f = vec![0u8; 12];
        f.extend_from_slice(if v6 { &[0x86, 0xdd] } else { &[0x08, 0x00] });
        f.push(if v6 { 0x60 } else { 0x45 });
        f.extend_from_slice(&tail);
        if let Ok(info) = decode(&f) {
            prop_assert_eq!(info.src_port.is_some(), info.dst_port.is_some());
        }
    }
}
