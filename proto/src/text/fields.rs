//! Fields named by their NXM/OXM header, for set_field, move, ct zones and output:reg.

use super::*;

/// OVS's name of a field as a subfield (NXM name where one exists), and its width in bits.
pub(super) fn nxm_name(header: u32) -> Option<(&'static str, u16)> {
    let (cls, field, ..) = split_header(header);
    const REGS: [&str; 16] = [
        "NXM_NX_REG0",
        "NXM_NX_REG1",
        "NXM_NX_REG2",
        "NXM_NX_REG3",
        "NXM_NX_REG4",
        "NXM_NX_REG5",
        "NXM_NX_REG6",
        "NXM_NX_REG7",
        "NXM_NX_REG8",
        "NXM_NX_REG9",
        "NXM_NX_REG10",
        "NXM_NX_REG11",
        "NXM_NX_REG12",
        "NXM_NX_REG13",
        "NXM_NX_REG14",
        "NXM_NX_REG15",
    ];
    const XREGS: [&str; 8] = [
        "OXM_OF_PKT_REG0",
        "OXM_OF_PKT_REG1",
        "OXM_OF_PKT_REG2",
        "OXM_OF_PKT_REG3",
        "OXM_OF_PKT_REG4",
        "OXM_OF_PKT_REG5",
        "OXM_OF_PKT_REG6",
        "OXM_OF_PKT_REG7",
    ];
    Some(match (cls, field) {
        (class::NXM_0, 0) => ("NXM_OF_IN_PORT", 16),
        (class::NXM_0, 1) | (class::OPENFLOW_BASIC, 3) => ("NXM_OF_ETH_DST", 48),
        (class::NXM_0, 2) | (class::OPENFLOW_BASIC, 4) => ("NXM_OF_ETH_SRC", 48),
        (class::NXM_0, 3) | (class::OPENFLOW_BASIC, 5) => ("NXM_OF_ETH_TYPE", 16),
        (class::NXM_0, 4) => ("NXM_OF_VLAN_TCI", 16),
        (class::NXM_0, 6) | (class::OPENFLOW_BASIC, 10) => ("NXM_OF_IP_PROTO", 8),
        (class::NXM_0, 7) | (class::OPENFLOW_BASIC, 11) => ("NXM_OF_IP_SRC", 32),
        (class::NXM_0, 8) | (class::OPENFLOW_BASIC, 12) => ("NXM_OF_IP_DST", 32),
        (class::NXM_0, 9) | (class::OPENFLOW_BASIC, 13) => ("NXM_OF_TCP_SRC", 16),
        (class::NXM_0, 10) | (class::OPENFLOW_BASIC, 14) => ("NXM_OF_TCP_DST", 16),
        (class::NXM_0, 11) | (class::OPENFLOW_BASIC, 15) => ("NXM_OF_UDP_SRC", 16),
        (class::NXM_0, 12) | (class::OPENFLOW_BASIC, 16) => ("NXM_OF_UDP_DST", 16),
        (class::NXM_0, 13) | (class::OPENFLOW_BASIC, 19) => ("NXM_OF_ICMP_TYPE", 8),
        (class::NXM_0, 14) | (class::OPENFLOW_BASIC, 20) => ("NXM_OF_ICMP_CODE", 8),
        (class::NXM_0, 15) | (class::OPENFLOW_BASIC, 21) => ("NXM_OF_ARP_OP", 16),
        (class::NXM_0, 16) | (class::OPENFLOW_BASIC, 22) => ("NXM_OF_ARP_SPA", 32),
        (class::NXM_0, 17) | (class::OPENFLOW_BASIC, 23) => ("NXM_OF_ARP_TPA", 32),
        (class::NXM_1, 17) | (class::OPENFLOW_BASIC, 24) => ("NXM_NX_ARP_SHA", 48),
        (class::NXM_1, 18) | (class::OPENFLOW_BASIC, 25) => ("NXM_NX_ARP_THA", 48),
        (class::NXM_1, 23) | (class::OPENFLOW_BASIC, 31) => ("NXM_NX_ND_TARGET", 128),
        (class::NXM_1, 24) | (class::OPENFLOW_BASIC, 32) => ("NXM_NX_ND_SLL", 48),
        (class::NXM_1, 25) | (class::OPENFLOW_BASIC, 33) => ("NXM_NX_ND_TLL", 48),
        // OVS counts OXM_OF_VLAN_VID as 12 bits wide (its `be16 (low 12 bits)`).
        (class::OPENFLOW_BASIC, 6) => ("OXM_OF_VLAN_VID", 12),
        (class::OPENFLOW_BASIC, 0) => ("OXM_OF_IN_PORT", 32),
        (class::OPENFLOW_BASIC, 2) => ("OXM_OF_METADATA", 64),
        (class::OPENFLOW_BASIC, 17) => ("OXM_OF_SCTP_SRC", 16),
        (class::OPENFLOW_BASIC, 18) => ("OXM_OF_SCTP_DST", 16),
        (class::NXM_1, 19) | (class::OPENFLOW_BASIC, 26) => ("NXM_NX_IPV6_SRC", 128),
        (class::NXM_1, 20) | (class::OPENFLOW_BASIC, 27) => ("NXM_NX_IPV6_DST", 128),
        (class::NXM_1, 21) | (class::OPENFLOW_BASIC, 29) => ("NXM_NX_ICMPV6_TYPE", 8),
        (class::NXM_1, 22) | (class::OPENFLOW_BASIC, 30) => ("NXM_NX_ICMPV6_CODE", 8),
        (class::NXM_1, 34) | (class::OPENFLOW_BASIC, 42) => ("NXM_NX_TCP_FLAGS", 16),
        (class::NXM_1, 0..=15) => (REGS[usize::from(field)], 32),
        // OVS counts NXM_NX_IP_FRAG as 2 bits wide (its `u8 (low 2 bits)`).
        (class::NXM_1, 26) => ("NXM_NX_IP_FRAG", 2),
        (class::NXM_1, 33) => ("NXM_NX_PKT_MARK", 32),
        (class::NXM_1, 37) => ("NXM_NX_CONJ_ID", 32),
        (class::NXM_1, 105) => ("NXM_NX_CT_STATE", 32),
        (class::NXM_1, 106) => ("NXM_NX_CT_ZONE", 16),
        (class::NXM_1, 107) => ("NXM_NX_CT_MARK", 32),
        (class::NXM_1, 108) => ("NXM_NX_CT_LABEL", 128),
        (class::NXM_1, 119) => ("NXM_NX_CT_NW_PROTO", 8),
        (class::NXM_1, 120) => ("NXM_NX_CT_NW_SRC", 32),
        (class::NXM_1, 121) => ("NXM_NX_CT_NW_DST", 32),
        (class::NXM_1, 122) => ("NXM_NX_CT_IPV6_SRC", 128),
        (class::NXM_1, 123) => ("NXM_NX_CT_IPV6_DST", 128),
        (class::NXM_1, 124) => ("NXM_NX_CT_TP_SRC", 16),
        (class::NXM_1, 125) => ("NXM_NX_CT_TP_DST", 16),
        (class::PACKET_REGS, 0..=7) => (XREGS[usize::from(field)], 64),
        _ => return None,
    })
}

pub(super) fn push_subfield(s: &mut String, header: u32, ofs: u16, n_bits: u16) {
    match nxm_name(header) {
        Some((name, width)) => {
            s.push_str(name);
            if ofs == 0 && n_bits == width {
                s.push_str("[]");
            } else if n_bits == 1 {
                let _ = write!(s, "[{ofs}]");
            } else {
                // OVS refuses a zero-bit subfield; printing one must not underflow: `[0..-1]`.
                let _ = write!(s, "[{}..{}]", ofs, i64::from(ofs) + i64::from(n_bits) - 1);
            }
        }
        None => {
            let _ = write!(s, "<unknown {header:#010x}>[{ofs}+{n_bits}]");
        }
    }
}

pub(super) fn push_ofs_nbits(s: &mut String, header: u32, ofs_nbits: u16) {
    push_subfield(s, header, ofs_nbits >> 6, (ofs_nbits & 0x3f) + 1);
}

/// Hex integer in OVS's `mf_format` style for MFS_HEXADECIMAL fields, with `/mask` if masked.
pub(super) fn hex_value<T: Into<u128> + Copy>(s: &mut String, v: &crate::oxm::Masked<T>, ones: u128) {
    ds_put_hex(s, v.value.into());
    if let Some(m) = v.mask.map(Into::into).filter(|&m| m != ones) {
        s.push('/');
        ds_put_hex(s, m);
    }
}

pub(super) fn dec_value(s: &mut String, v: &crate::oxm::Masked<u16>) {
    let _ = write!(s, "{}", v.value);
    if let Some(m) = v.mask.filter(|&m| m != u16::MAX) {
        s.push('/');
        ds_put_hex(s, m.into());
    }
}

/// `set_field:VALUE->FIELD` as OVS's `format_SET_FIELD` writes it.
pub(super) fn write_set_field(s: &mut String, o: &Oxm, n: &Names<'_>) {
    s.push_str("set_field:");
    let name: std::borrow::Cow<'static, str> = match o {
        Oxm::InPort(p) => {
            push_port32(s, *p, n);
            "in_port_oxm".into()
        }
        Oxm::Metadata(v) => {
            hex_value(s, v, u64::MAX.into());
            "metadata".into()
        }
        Oxm::EthDst(v) | Oxm::EthSrc(v) => {
            push_mac(s, v.value);
            if let Some(m) = v.mask.filter(|m| *m != [0xff; 6]) {
                s.push('/');
                push_mac(s, m);
            }
            if matches!(o, Oxm::EthDst(_)) { "eth_dst" } else { "eth_src" }.into()
        }
        Oxm::EthType(t) => {
            ds_put_hex(s, (*t).into());
            "eth_type".into()
        }
        Oxm::VlanVid(v) => {
            dec_value(s, v);
            "vlan_vid".into()
        }
        Oxm::ArpOp(op) => {
            let _ = write!(s, "{op}");
            "arp_op".into()
        }
        Oxm::ArpSpa(v) | Oxm::ArpTpa(v) => {
            push_ipv4_masked(s, v.value.into(), v.mask.map_or(u32::MAX, u32::from));
            if matches!(o, Oxm::ArpSpa(_)) { "arp_spa" } else { "arp_tpa" }.into()
        }
        Oxm::ArpSha(v) | Oxm::ArpTha(v) | Oxm::Ipv6NdSll(v) | Oxm::Ipv6NdTll(v) => {
            push_mac(s, v.value);
            if let Some(m) = v.mask.filter(|m| *m != [0xff; 6]) {
                s.push('/');
                push_mac(s, m);
            }
            match o {
                Oxm::ArpSha(_) => "arp_sha",
                Oxm::ArpTha(_) => "arp_tha",
                Oxm::Ipv6NdSll(_) => "nd_sll",
                _ => "nd_tll",
            }
            .into()
        }
        Oxm::Ipv6NdTarget(v) => {
            push_ipv6_masked(s, v.value.into(), v.mask.map_or(u128::MAX, u128::from));
            "nd_target".into()
        }
        Oxm::IpProto(p) => {
            let _ = write!(s, "{p}");
            "nw_proto".into()
        }
        Oxm::Ipv4Src(v) | Oxm::Ipv4Dst(v) => {
            push_ipv4_masked(s, v.value.into(), v.mask.map_or(u32::MAX, u32::from));
            if matches!(o, Oxm::Ipv4Src(_)) { "ip_src" } else { "ip_dst" }.into()
        }
        Oxm::Ipv6Src(v) | Oxm::Ipv6Dst(v) => {
            push_ipv6_masked(s, v.value.into(), v.mask.map_or(u128::MAX, u128::from));
            if matches!(o, Oxm::Ipv6Src(_)) { "ipv6_src" } else { "ipv6_dst" }.into()
        }
        Oxm::TcpSrc(v) => {
            dec_value(s, v);
            "tcp_src".into()
        }
        Oxm::TcpDst(v) => {
            dec_value(s, v);
            "tcp_dst".into()
        }
        Oxm::UdpSrc(v) => {
            dec_value(s, v);
            "udp_src".into()
        }
        Oxm::UdpDst(v) => {
            dec_value(s, v);
            "udp_dst".into()
        }
        Oxm::SctpSrc(v) => {
            dec_value(s, v);
            "sctp_src".into()
        }
        Oxm::SctpDst(v) => {
            dec_value(s, v);
            "sctp_dst".into()
        }
        Oxm::Icmpv4Type(x) | Oxm::Icmpv4Code(x) | Oxm::Icmpv6Type(x) | Oxm::Icmpv6Code(x) => {
            let _ = write!(s, "{x}");
            match o {
                Oxm::Icmpv4Type(_) => "icmp_type",
                Oxm::Icmpv4Code(_) => "icmp_code",
                Oxm::Icmpv6Type(_) => "icmpv6_type",
                _ => "icmpv6_code",
            }
            .into()
        }
        Oxm::TcpFlags(v) => {
            flags_masked(s, tcp_flag_name, v.value.into(), u32::from(v.mask.unwrap_or(u16::MAX) & 0xfff), 0xfff);
            "tcp_flags".into()
        }
        Oxm::CtState(v) => {
            flags_masked(s, ct_state_name, v.value, v.mask.unwrap_or(u32::MAX), u32::MAX);
            "ct_state".into()
        }
        Oxm::CtZone(z) => {
            ds_put_hex(s, (*z).into());
            "ct_zone".into()
        }
        Oxm::CtMark(v) => {
            hex_value(s, v, u32::MAX.into());
            "ct_mark".into()
        }
        Oxm::CtLabel(v) => {
            hex_value(s, v, u128::MAX);
            "ct_label".into()
        }
        // The conntrack tuple is read-only: OVS refuses a set_field of it
        // (OFPBAC_BAD_SET_ARGUMENT), so it never prints one; this is its mf_format form.
        Oxm::CtNwProto(p) => {
            let _ = write!(s, "{p}");
            "ct_nw_proto".into()
        }
        Oxm::CtNwSrc(v) | Oxm::CtNwDst(v) => {
            push_ipv4_masked(s, v.value.into(), v.mask.map_or(u32::MAX, u32::from));
            if matches!(o, Oxm::CtNwSrc(_)) { "ct_nw_src" } else { "ct_nw_dst" }.into()
        }
        Oxm::CtIpv6Src(v) | Oxm::CtIpv6Dst(v) => {
            push_ipv6_masked(s, v.value.into(), v.mask.map_or(u128::MAX, u128::from));
            if matches!(o, Oxm::CtIpv6Src(_)) { "ct_ipv6_src" } else { "ct_ipv6_dst" }.into()
        }
        Oxm::CtTpSrc(v) | Oxm::CtTpDst(v) => {
            dec_value(s, v);
            if matches!(o, Oxm::CtTpSrc(_)) { "ct_tp_src" } else { "ct_tp_dst" }.into()
        }
        // Read-only too (OFPBAC_BAD_SET_ARGUMENT); mf_format's form: the word for the low two
        // bits of value and mask (no mask: 0x03), `<error>` when there is none.
        Oxm::IpFrag(v) => {
            let m = v.mask.unwrap_or(u8::MAX) & FRAG_BITS;
            s.push_str(frag_word(v.value & m, m).unwrap_or("<error>"));
            "nw_frag".into()
        }
        Oxm::ConjId(c) => {
            let _ = write!(s, "{c}");
            "conj_id".into()
        }
        Oxm::PktMark(v) => {
            hex_value(s, v, u32::MAX.into());
            "pkt_mark".into()
        }
        Oxm::Reg { index, value } => {
            hex_value(s, value, u32::MAX.into());
            format!("reg{index}").into()
        }
        Oxm::XReg { index, value } => {
            hex_value(s, value, u64::MAX.into());
            format!("xreg{index}").into()
        }
        other => {
            let mut b = bytes::BytesMut::with_capacity(other.buffer_len());
            other.emit(&mut b);
            s.push_str(&hex_plain(&b));
            "<raw oxm>".into()
        }
    };
    s.push_str("->");
    s.push_str(&name);
}
