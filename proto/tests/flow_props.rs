//! Property tests: arbitrary OXM, match, action, instruction, flow_mod and multipart values
//! round-trip (`parse(emit(v)) == v`, and `emit` writes exactly `buffer_len()` bytes); parsing
//! arbitrary bytes never panics.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

use bytes::{Bytes, BytesMut};
use ofp::action::{Action, Controller2, Ct, CtZoneSrc};
use ofp::flow_mod::{FlowMod, FlowModCommand};
use ofp::flow_monitor::{FlowMonitorRequest, FlowUpdate, FlowUpdateFull, OFPMP_FLOW_MONITOR};
use ofp::instruction::Instruction;
use ofp::multipart::{
    FlowStats, FlowStatsRequest, MeterStats, MultipartReply, MultipartReplyBody, MultipartRequest,
    MultipartRequestBody, OxsStats,
};
use ofp::oxm::{oxm_header, Masked, Match, Oxm};
use proptest::collection::vec;
use proptest::prelude::*;
use std::net::{Ipv4Addr, Ipv6Addr};

fn bytes_len(r: impl Strategy<Value = usize>) -> impl Strategy<Value = Bytes> {
    r.prop_flat_map(|n| vec(any::<u8>(), n)).prop_map(Bytes::from)
}

fn m<T: std::fmt::Debug + Clone + 'static>(s: impl Strategy<Value = T> + Clone) -> impl Strategy<Value = Masked<T>> {
    (s.clone(), proptest::option::of(s)).prop_map(|(value, mask)| Masked { value, mask })
}

fn oxm() -> impl Strategy<Value = Oxm> {
    let v4 = any::<u32>().prop_map(Ipv4Addr::from);
    let v6 = any::<u128>().prop_map(Ipv6Addr::from);
    prop_oneof![
        any::<u32>().prop_map(Oxm::InPort),
        m(any::<u64>()).prop_map(Oxm::Metadata),
        m(any::<[u8; 6]>()).prop_map(Oxm::EthDst),
        m(any::<[u8; 6]>()).prop_map(Oxm::EthSrc),
        any::<u16>().prop_map(Oxm::EthType),
        m(any::<u16>()).prop_map(Oxm::VlanVid),
        any::<u8>().prop_map(Oxm::IpProto),
        m(v4.clone()).prop_map(Oxm::Ipv4Src),
        m(v4.clone()).prop_map(Oxm::Ipv4Dst),
        m(v6.clone()).prop_map(Oxm::Ipv6Src),
        m(v6.clone()).prop_map(Oxm::Ipv6Dst),
        m(any::<u16>()).prop_map(Oxm::TcpSrc),
        m(any::<u16>()).prop_map(Oxm::TcpDst),
        m(any::<u16>()).prop_map(Oxm::UdpSrc),
        m(any::<u16>()).prop_map(Oxm::UdpDst),
        m(any::<u16>()).prop_map(Oxm::SctpSrc),
        m(any::<u16>()).prop_map(Oxm::SctpDst),
        any::<u8>().prop_map(Oxm::Icmpv4Type),
        any::<u8>().prop_map(Oxm::Icmpv4Code),
        any::<u8>().prop_map(Oxm::Icmpv6Type),
        any::<u8>().prop_map(Oxm::Icmpv6Code),
        any::<u16>().prop_map(Oxm::ArpOp),
        m(v4.clone()).prop_map(Oxm::ArpSpa),
        m(v4.clone()).prop_map(Oxm::ArpTpa),
        m(any::<[u8; 6]>()).prop_map(Oxm::ArpSha),
        m(any::<[u8; 6]>()).prop_map(Oxm::ArpTha),
        m(v6.clone()).prop_map(Oxm::Ipv6NdTarget),
        m(any::<[u8; 6]>()).prop_map(Oxm::Ipv6NdSll),
        m(any::<[u8; 6]>()).prop_map(Oxm::Ipv6NdTll),
        m(any::<u16>()).prop_map(Oxm::TcpFlags),
        m(any::<u8>()).prop_map(Oxm::IpFrag),
        m(any::<u32>()).prop_map(Oxm::CtState),
        any::<u16>().prop_map(Oxm::CtZone),
        m(any::<u32>()).prop_map(Oxm::CtMark),
        m(any::<u128>()).prop_map(Oxm::CtLabel),
        any::<u8>().prop_map(Oxm::CtNwProto),
        m(v4.clone()).prop_map(Oxm::CtNwSrc),
        m(v4.clone()).prop_map(Oxm::CtNwDst),
        m(v6.clone()).prop_map(Oxm::CtIpv6Src),
        m(v6.clone()).prop_map(Oxm::CtIpv6Dst),
        m(any::<u16>()).prop_map(Oxm::CtTpSrc),
        m(any::<u16>()).prop_map(Oxm::CtTpDst),
        any::<u32>().prop_map(Oxm::ConjId),
        m(any::<u32>()).prop_map(Oxm::PktMark),
        (0u8..16, m(any::<u32>())).prop_map(|(index, value)| Oxm::Reg { index, value }),
        (0u8..16, m(any::<u64>())).prop_map(|(index, value)| Oxm::XReg { index, value }),
        (0u8..128, any::<bool>(), any::<u32>(), bytes_len(0usize..40)).prop_map(
            |(field, has_mask, experimenter, payload)| Oxm::Experimenter { field, has_mask, experimenter, payload }
        ),
        // NXM_0 fields are never typed, so any of them stays raw.
        (0u8..128, any::<bool>(), bytes_len(0usize..40)).prop_map(|(field, hm, payload)| {
            Oxm::Unknown { header: oxm_header(0, field, hm, payload.len() as u8), payload }
        }),
    ]
}

fn field_header() -> impl Strategy<Value = Bytes> {
    prop_oneof![
        (0u16..0xffff, any::<u16>()).prop_map(|(c, r)| Bytes::from([c.to_be_bytes(), r.to_be_bytes()].concat())),
        (any::<u16>(), any::<u32>()).prop_map(|(r, e)| {
            let mut v = vec![0xff, 0xff];
            v.extend_from_slice(&r.to_be_bytes());
            v.extend_from_slice(&e.to_be_bytes());
            Bytes::from(v)
        }),
    ]
}

fn controller2() -> impl Strategy<Value = Controller2> {
    (
        proptest::option::of(any::<u16>()),
        proptest::option::of(any::<u16>()),
        proptest::option::of(any::<u8>()),
        proptest::option::of(bytes_len(0usize..30)),
        any::<bool>(),
        proptest::option::of(any::<u32>()),
    )
        .prop_map(|(max_len, controller_id, reason, userdata, pause, meter_id)| Controller2 {
            max_len,
            controller_id,
            reason,
            userdata,
            pause,
            meter_id,
        })
}

fn leaf_action() -> impl Strategy<Value = Action> {
    prop_oneof![
        (any::<u32>(), any::<u16>()).prop_map(|(port, max_len)| Action::Output { port, max_len }),
        any::<u32>().prop_map(Action::Group),
        oxm().prop_map(Action::SetField),
        (any::<u16>(), any::<u16>(), any::<u16>(), field_header(), field_header()).prop_map(
            |(n_bits, src_offset, dst_offset, src, dst)| {
                Action::CopyField { n_bits, src_offset, dst_offset, src, dst }
            }
        ),
        any::<u32>().prop_map(Action::Meter),
        any::<u16>().prop_map(|in_port| Action::Resubmit { in_port }),
        (any::<u16>(), any::<u8>(), any::<bool>()).prop_map(|(in_port, table, ct)| Action::ResubmitTable {
            in_port,
            table,
            ct
        }),
        // A note keeps its padding, so only lengths 6 + 8k round-trip.
        (0usize..4).prop_flat_map(|k| bytes_len(Just(6 + 8 * k))).prop_map(Action::Note),
        (any::<u16>(), any::<u16>(), any::<u8>())
            .prop_map(|(max_len, controller_id, reason)| { Action::Controller { max_len, controller_id, reason } }),
        controller2().prop_map(Action::Controller2),
        (any::<u32>(), any::<u8>(), any::<u8>())
            .prop_map(|(id, clause, n_clauses)| { Action::Conjunction { id, clause, n_clauses } }),
        Just(Action::CtClear),
        (any::<u32>(), 1u16..0xffff, any::<u16>())
            .prop_map(|(src, ofs_nbits, max_len)| { Action::OutputReg { src, ofs_nbits, max_len } }),
        // Any 4-byte header: class 0xffff (an 8-byte experimenter header) is kept raw.
        (any::<(u16, u16, u16)>(), 0u32..0xffff_0000, 0u32..0xffff_0000).prop_map(
            |((n_bits, src_offset, dst_offset), src, dst)| Action::RegMove { n_bits, src_offset, dst_offset, src, dst }
        ),
        // Not Nicira: any payload of 8k bytes.
        ((1u32..0x2320), (1usize..4))
            .prop_flat_map(|(e, k)| (Just(e), bytes_len(Just(8 * k))))
            .prop_map(|(experimenter, payload)| Action::Experimenter { experimenter, payload }),
        // NXAST_REG_LOAD (subtype 7), which OVS refuses in OF1.5: kept raw.
        bytes_len(Just(14)).prop_map(|rest| {
            let mut p = vec![0, 7];
            p.extend_from_slice(&rest);
            Action::Experimenter { experimenter: ofp::NX_VENDOR_ID, payload: p.into() }
        }),
        ((30u16..0xfff0), (0usize..3))
            .prop_flat_map(|(t, k)| (Just(t), bytes_len(Just(4 + 8 * k))))
            .prop_map(|(action_type, payload)| Action::Unknown { action_type, payload }),
    ]
}

fn action() -> impl Strategy<Value = Action> {
    leaf_action().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..4).prop_map(Action::Clone),
            (
                any::<u16>(),
                prop_oneof![
                    any::<u16>().prop_map(CtZoneSrc::Imm),
                    (1u32.., any::<u16>()).prop_map(|(header, ofs_nbits)| CtZoneSrc::Field { header, ofs_nbits })
                ],
                proptest::option::of(0u8..0xff),
                any::<u16>(),
                vec(inner, 0..4)
            )
                .prop_map(|(flags, zone, table, alg, actions)| Action::Ct(Ct {
                    flags,
                    zone,
                    table,
                    alg,
                    actions
                })),
        ]
    })
}

fn instruction() -> impl Strategy<Value = Instruction> {
    prop_oneof![
        any::<u8>().prop_map(Instruction::GotoTable),
        (any::<u64>(), any::<u64>()).prop_map(|(metadata, mask)| Instruction::WriteMetadata { metadata, mask }),
        vec(action(), 0..4).prop_map(Instruction::WriteActions),
        vec(action(), 0..4).prop_map(Instruction::ApplyActions),
        Just(Instruction::ClearActions),
        ((6u16..), (0usize..3))
            .prop_flat_map(|(t, k)| (Just(t), bytes_len(Just(4 + 8 * k))))
            .prop_map(|(instruction_type, payload)| Instruction::Unknown { instruction_type, payload }),
    ]
}

fn match_() -> impl Strategy<Value = Match> {
    vec(oxm(), 0..8).prop_map(Match::new)
}

fn flow_mod() -> impl Strategy<Value = FlowMod> {
    (
        (any::<u64>(), any::<u64>(), any::<u8>(), any::<u8>(), any::<u16>(), any::<u16>(), any::<u16>()),
        (any::<u32>(), any::<u32>(), any::<u32>(), any::<u16>(), any::<u16>()),
        match_(),
        vec(instruction(), 0..4),
    )
        .prop_map(
            |(
                (cookie, cookie_mask, table_id, cmd, idle, hard, priority),
                (buffer_id, out_port, out_group, flags, importance),
                match_,
                instructions,
            )| {
                FlowMod {
                    cookie,
                    cookie_mask,
                    table_id,
                    command: FlowModCommand::from_u8(cmd),
                    idle_timeout: idle,
                    hard_timeout: hard,
                    priority,
                    buffer_id,
                    out_port,
                    out_group,
                    flags,
                    importance,
                    match_,
                    instructions,
                }
            },
        )
}

fn oxs_stats() -> impl Strategy<Value = OxsStats> {
    use proptest::option::of as opt;
    (
        opt(any::<(u32, u32)>()),
        opt(any::<u64>()),
        opt(any::<u32>()),
        opt(any::<u64>()),
        opt(any::<u64>()),
        // Raw TLVs of other classes (or unknown OXS fields) are kept raw.
        vec(
            (prop_oneof![Just(0x8002u16), 0u16..0x8000], 6u8..128, bytes_len(0usize..12)).prop_map(|(c, f, p)| {
                let mut v = oxm_header(c, f, false, p.len() as u8).to_be_bytes().to_vec();
                v.extend_from_slice(&p);
                Bytes::from(v)
            }),
            0..3,
        ),
    )
        .prop_map(|(duration, idle_time, flow_count, packet_count, byte_count, unknown)| OxsStats {
            duration,
            idle_time,
            flow_count,
            packet_count,
            byte_count,
            unknown,
        })
}

fn flow_stats() -> impl Strategy<Value = FlowStats> {
    (any::<(u8, u16, u16, u16, u16, u16, u64)>(), match_(), oxs_stats(), vec(instruction(), 0..3)).prop_map(
        |((table_id, priority, idle_timeout, hard_timeout, flags, importance, cookie), match_, stats, instructions)| {
            FlowStats {
                table_id,
                priority,
                idle_timeout,
                hard_timeout,
                flags,
                importance,
                cookie,
                match_,
                stats,
                instructions,
            }
        },
    )
}

fn meter_stats() -> impl Strategy<Value = MeterStats> {
    (any::<(u32, u32, u64, u64, u32, u32)>(), vec(any::<(u64, u64)>(), 0..4)).prop_map(
        |((meter_id, flow_count, pin, bin, s, ns), bands)| MeterStats {
            meter_id,
            flow_count,
            packet_in_count: pin,
            byte_in_count: bin,
            duration_sec: s,
            duration_nsec: ns,
            bands,
        },
    )
}

fn flow_monitor_request() -> impl Strategy<Value = FlowMonitorRequest> {
    (any::<(u32, u32, u32, u16, u8, u8)>(), match_()).prop_map(
        |((monitor_id, out_port, out_group, flags, table_id, command), match_)| FlowMonitorRequest {
            monitor_id,
            out_port,
            out_group,
            flags,
            table_id,
            command,
            match_,
        },
    )
}

fn flow_update() -> impl Strategy<Value = FlowUpdate> {
    prop_oneof![
        (0u16..4, any::<(u8, u8, u16, u16, u16, u64)>(), match_(), vec(instruction(), 0..3)).prop_map(
            |(event, (table_id, reason, idle_timeout, hard_timeout, priority, cookie), match_, instructions)| {
                FlowUpdate::Full(FlowUpdateFull {
                    event,
                    table_id,
                    reason,
                    idle_timeout,
                    hard_timeout,
                    priority,
                    cookie,
                    match_,
                    instructions,
                })
            }
        ),
        any::<u32>().prop_map(|xid| FlowUpdate::Abbrev { xid }),
        Just(FlowUpdate::Paused),
        Just(FlowUpdate::Resumed),
        (7u16.., (0usize..4).prop_flat_map(|n| bytes_len(Just(4 + 8 * n))))
            .prop_map(|(event, body)| FlowUpdate::Unknown { event, body }),
    ]
}

fn mp_request() -> impl Strategy<Value = MultipartRequest> {
    let body = prop_oneof![
        (any::<(u8, u32, u32, u64, u64)>(), match_()).prop_map(
            |((table_id, out_port, out_group, cookie, cookie_mask), match_)| {
                MultipartRequestBody::Flow(FlowStatsRequest {
                    table_id,
                    out_port,
                    out_group,
                    cookie,
                    cookie_mask,
                    match_,
                })
            }
        ),
        any::<u32>().prop_map(|meter_id| MultipartRequestBody::MeterStats { meter_id }),
        vec(flow_monitor_request(), 0..3).prop_map(MultipartRequestBody::FlowMonitor),
        (10u16.., bytes_len(0usize..40))
            .prop_filter("a typed multipart type", |(t, _)| *t != OFPMP_FLOW_MONITOR)
            .prop_map(|(mp_type, body)| MultipartRequestBody::Other { mp_type, body }),
    ];
    (any::<u16>(), body).prop_map(|(flags, body)| MultipartRequest { flags, body })
}

fn mp_reply() -> impl Strategy<Value = MultipartReply> {
    let body = prop_oneof![
        vec(flow_stats(), 0..3).prop_map(MultipartReplyBody::Flow),
        vec(meter_stats(), 0..3).prop_map(MultipartReplyBody::MeterStats),
        vec(flow_update(), 0..3).prop_map(MultipartReplyBody::FlowMonitor),
        (10u16.., bytes_len(0usize..40))
            .prop_filter("a typed multipart type", |(t, _)| *t != OFPMP_FLOW_MONITOR)
            .prop_map(|(mp_type, body)| MultipartReplyBody::Other { mp_type, body }),
    ];
    (any::<u16>(), body).prop_map(|(flags, body)| MultipartReply { flags, body })
}

macro_rules! round_trip {
    ($v:expr, $len:expr, $parse:expr) => {{
        let v = $v;
        let mut out = BytesMut::new();
        v.emit(&mut out);
        prop_assert_eq!(out.len(), $len);
        let back = $parse(&out[..]);
        prop_assert_eq!(back, Ok(v));
    }};
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn oxm_round_trips(o in oxm()) {
        let len = o.buffer_len();
        round_trip!(o, len, |b: &[u8]| Oxm::parse(b).map(|(o, used)| { assert_eq!(used, b.len()); o }));
    }

    #[test]
    fn match_round_trips(mt in match_()) {
        let len = mt.buffer_len();
        prop_assert_eq!(len % 8, 0);
        round_trip!(mt, len, |b: &[u8]| Match::parse(b).map(|(m, used)| { assert_eq!(used, b.len()); m }));
    }

    #[test]
    fn action_round_trips(a in action()) {
        let len = a.buffer_len();
        prop_assert_eq!(len % 8, 0);
        round_trip!(a, len, |b: &[u8]| Action::parse(b).map(|(a, used)| { assert_eq!(used, b.len()); a }));
    }

    #[test]
    fn instruction_round_trips(i in instruction()) {
        let len = i.buffer_len();
        round_trip!(i, len, |b: &[u8]| Instruction::parse(b).map(|(i, used)| { assert_eq!(used, b.len()); i }));
    }

    #[test]
    fn flow_mod_round_trips(fm in flow_mod()) {
        let len = fm.buffer_len();
        round_trip!(fm, len, FlowMod::parse);
    }

    #[test]
    fn multipart_request_round_trips(r in mp_request()) {
        let len = r.buffer_len();
        round_trip!(r, len, MultipartRequest::parse);
    }

    #[test]
    fn multipart_reply_round_trips(r in mp_reply()) {
        let len = r.buffer_len();
        round_trip!(r, len, MultipartReply::parse);
    }

    #[test]
    fn garbage_never_panics_and_accepted_bytes_round_trip(b in vec(any::<u8>(), 0..200)) {
        if let Ok(a) = ofp::action::parse_actions(&b) {
            let mut out = BytesMut::new();
            ofp::action::emit_actions(&a, &mut out);
            prop_assert_eq!(&out[..], &b[..]);
        }
        if let Ok(i) = ofp::instruction::parse_instructions(&b) {
            let mut out = BytesMut::new();
            ofp::instruction::emit_instructions(&i, &mut out);
            prop_assert_eq!(&out[..], &b[..]);
        }
        if let Ok((m, used)) = Match::parse(&b) {
            let mut out = BytesMut::new();
            m.emit(&mut out);
            prop_assert_eq!(&out[..], &b[..used]);
        }
        if let Ok(fm) = FlowMod::parse(&b) {
            let mut out = BytesMut::new();
            fm.emit(&mut out);
            prop_assert_eq!(&out[..], &b[..]);
        }
        let _ = MultipartRequest::parse(&b);
        let _ = MultipartReply::parse(&b);
    }

    #[test]
    fn mutated_flow_mods_never_panic(fm in flow_mod(), flips in vec((any::<usize>(), any::<u8>()), 1..4)) {
        let mut out = BytesMut::new();
        fm.emit(&mut out);
        let mut b = out.to_vec();
        for (at, x) in flips {
            let n = b.len();
            b[at % n] ^= x;
        }
        if let Ok(back) = FlowMod::parse(&b) {
            let mut again = BytesMut::new();
            back.emit(&mut again);
            prop_assert_eq!(&again[..], &b[..]);
        }
        let _ = ofp::text::format_flow_mod(&fm, &|_| None);
    }
}
