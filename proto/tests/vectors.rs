//! Whole-message vectors (`tests/data/ofp-vectors.jsonl`, from Open vSwitch's test suite and
//! ovs-ofctl 3.1.0): every message vector parses, re-emits byte-identically, and its decoded
//! fields match the text OVS printed for it. Vectors OVS reports as a decode error must be
//! rejected. Each assertion names the vector it comes from.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

mod common;

use bytes::Bytes;
use common::{dotted, field, hexdump_bytes, message_vectors, num, Vector};
use ofp::action::Action;
use ofp::body::{bundle_ctrl, HelloElement, MeterBand};
use ofp::oxm::Oxm;
use ofp::{ErrorMsg, Message, Payload};

/// The message's version from OVS's text: `(OF1.x)` or nothing for OpenFlow 1.0.
fn printed_version(expected: &str) -> u8 {
    match field(expected, "(OF1.") {
        Some(minor) => 1 + minor.parse::<u8>().expect("minor version"),
        None => 1,
    }
}

/// `OFPT_X`, `NXT_Y`, or `OFPT_MULTIPART_REQUEST`/`_REPLY` for `OFPST_* request|reply`.
fn printed_type(expected: &str) -> String {
    let first = expected.split(" (").next().unwrap_or_default();
    if first.starts_with("OFPST_") {
        if first.ends_with("request") {
            return "OFPT_MULTIPART_REQUEST".into();
        }
        return "OFPT_MULTIPART_REPLY".into();
    }
    first.to_string()
}

fn parse_ok(v: &Vector) -> Message {
    let msg = Message::parse(&v.bytes).unwrap_or_else(|e| panic!("{}: parse failed: {e}", v.name));
    let out = msg.to_bytes().unwrap_or_else(|e| panic!("{}: emit failed: {e}", v.name));
    assert_eq!(hex::encode(&out), v.hex, "{}: re-emit differs", v.name);
    assert_eq!(msg.buffer_len(), v.bytes.len(), "{}: buffer_len", v.name);
    assert_eq!(Message::parse(&out).as_ref(), Ok(&msg), "{}: parse(emit(m)) != m", v.name);
    msg
}

/// Checks that hold for every vector OVS decoded: xid, version, type name, error name.
fn generic_checks(v: &Vector, msg: &Message) {
    let xid = field(&v.expected, "(xid=").unwrap_or_else(|| panic!("{}: no xid in text", v.name));
    assert_eq!(u64::from(msg.xid), num(xid), "{}: xid", v.name);
    assert_eq!(msg.version, printed_version(&v.expected), "{}: version", v.name);
    match msg.type_name() {
        Some(name) => assert_eq!(name, printed_type(&v.expected), "{}: message type", v.name),
        None => assert!(
            matches!(msg.payload, Payload::Unknown { .. } | Payload::Experimenter { .. }),
            "{}: unnamed payload must be raw",
            v.name
        ),
    }
    if let Payload::Error(e) = &msg.payload {
        if let Some(name) = e.name() {
            let printed = v.expected.split("): ").nth(1).and_then(|s| s.lines().next());
            assert_eq!(Some(name), printed, "{}: error name", v.name);
        }
    }
}

fn versions_offered(msg: &Message) -> Vec<u8> {
    let Payload::Hello(h) = &msg.payload else { panic!("not a HELLO: {msg:?}") };
    (1u8..32).filter(|&v| h.offers(msg.version, v)).collect()
}

fn printed_versions(expected: &str) -> Vec<u8> {
    let line = expected.lines().find(|l| l.contains("version bitmap:")).expect("bitmap line");
    line.split(':').nth(1).unwrap().split(',').map(|s| num(s.trim()) as u8).collect()
}

/// Fields asserted per vector, taken from OVS's text.
fn specific_checks(v: &Vector, msg: &Message) -> bool {
    let e = v.expected.as_str();
    let name = v.name.as_str();
    match &msg.payload {
        Payload::Hello(h) => {
            assert_eq!(versions_offered(msg), printed_versions(e), "{name}: version bitmap");
            if name == "hello_bitmap_plus_unknown_element" {
                assert_eq!(
                    h.elements,
                    vec![
                        HelloElement::Unknown { element_type: 0xffff, payload: Bytes::from_static(&[1, 2]) },
                        HelloElement::VersionBitmap(vec![0xf0]),
                        HelloElement::Trailing(Bytes::from_static(b"abc")),
                    ],
                    "{name}"
                );
            }
        }
        Payload::EchoRequest(d) | Payload::EchoReply(d) => {
            let n: usize = e.split("): ").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap();
            assert_eq!(d.len(), n, "{name}: payload length");
            let dump: String = e.lines().skip(1).collect::<Vec<_>>().join("\n");
            assert_eq!(d.as_ref(), hexdump_bytes(&dump).as_slice(), "{name}: payload bytes");
        }
        Payload::FeaturesReply(f) => {
            assert_eq!(f.datapath_id, u64::from_str_radix(field(e, "dpid:").unwrap(), 16).unwrap(), "{name}");
            assert_eq!(u64::from(f.n_tables), num(field(e, "n_tables:").unwrap()), "{name}");
            assert_eq!(u64::from(f.n_buffers), num(field(e, "n_buffers:").unwrap()), "{name}");
            let caps = [
                ("FLOW_STATS", 0),
                ("TABLE_STATS", 1),
                ("PORT_STATS", 2),
                ("GROUP_STATS", 3),
                ("IP_REASM", 5),
                ("QUEUE_STATS", 6),
                ("PORT_BLOCKED", 8),
                ("BUNDLES", 9),
                ("FLOW_MONITORING", 10),
            ];
            let line = e.lines().find(|l| l.starts_with("capabilities:")).unwrap();
            let expect: u32 = line
                .split_whitespace()
                .skip(1)
                .map(|n| 1 << caps.iter().find(|c| c.0 == n).unwrap_or_else(|| panic!("cap {n}")).1)
                .sum();
            assert_eq!(f.capabilities, expect, "{name}: capabilities");
        }
        Payload::GetConfigReply(c) | Payload::SetConfig(c) => {
            let frags = match field(e, "frags=").unwrap() {
                "normal" => 0,
                "drop" => 1,
                "reassemble" => 2,
                other => panic!("frags {other}"),
            };
            assert_eq!(c.flags, frags, "{name}: frags");
            assert_eq!(u64::from(c.miss_send_len), num(field(e, "miss_send_len=").unwrap()), "{name}");
        }
        Payload::PacketIn(p) => {
            assert_eq!(p.cookie, num(field(e, "cookie=").unwrap()), "{name}: cookie");
            assert_eq!(u64::from(p.total_len), num(field(e, "total_len=").unwrap()), "{name}");
            assert_eq!(p.data.len() as u64, num(field(e, "data_len=").unwrap()), "{name}");
            assert_eq!(u64::from(p.buffer_id), num(field(e, "buffer=").unwrap()), "{name}");
            assert_eq!(p.reason, 0, "{name}: via no_match");
            assert!(e.contains("in_port=LOCAL"));
            assert!(p.match_.fields.contains(&Oxm::InPort(ofp::port::LOCAL)), "{name}: in_port");
        }
        Payload::PacketOut(p) => {
            assert!(p.match_.fields.contains(&Oxm::InPort(num(field(e, "in_port=").unwrap()) as u32)), "{name}");
            assert!(e.contains("actions=FLOOD"));
            assert_eq!(p.actions, vec![Action::Output { port: 0xffff_fffb, max_len: 0x05dc }], "{name}: FLOOD");
            match field(e, "buffer=") {
                Some(b) => assert_eq!(u64::from(p.buffer_id), num(b), "{name}"),
                None => assert_eq!(p.buffer_id, ofp::NO_BUFFER, "{name}"),
            }
            let data_len = field(e, "data_len=").map_or(0, num);
            assert_eq!(p.data.len() as u64, data_len, "{name}: data_len");
            if name == "packet_out_of15_with_packet" {
                assert!(p.match_.fields.contains(&Oxm::Metadata(ofp::Masked::exact(3))), "{name}: metadata=0x3");
            }
        }
        Payload::MeterMod(m) => {
            assert!(e.contains("ADD meter="));
            assert_eq!(m.command, ofp::body::meter::ADD);
            assert_eq!(u64::from(m.meter_id), num(field(e, "meter=").unwrap()), "{name}");
            // "kbps burst stats"
            assert_eq!(m.flags, 1 | 4 | 8, "{name}: flags");
            let rate = num(field(e, "rate=").unwrap()) as u32;
            let burst = num(field(e, "burst_size=").unwrap()) as u32;
            assert_eq!(m.bands, vec![MeterBand::Drop { rate, burst_size: burst }], "{name}: bands");
        }
        Payload::BarrierRequest | Payload::BarrierReply => {}
        Payload::RoleRequest(r) | Payload::RoleReply(r) => {
            let role = match field(e, "role=").unwrap() {
                "nochange" => 0,
                "equal" => 1,
                "primary" => 2,
                "secondary" => 3,
                other => panic!("role {other}"),
            };
            assert_eq!(r.role, role, "{name}: role");
            assert_eq!(r.generation_id, field(e, "generation_id=").map_or(0, num), "{name}: generation_id");
        }
        Payload::BundleControl(b) => {
            assert_eq!(u64::from(b.bundle_id), num(field(e, "bundle_id=").unwrap()), "{name}: bundle_id");
            let types = [
                "OPEN_REQUEST",
                "OPEN_REPLY",
                "CLOSE_REQUEST",
                "CLOSE_REPLY",
                "COMMIT_REQUEST",
                "COMMIT_REPLY",
                "DISCARD_REQUEST",
                "DISCARD_REPLY",
            ];
            assert_eq!(types[usize::from(b.ctrl_type)], field(e, "type=").unwrap(), "{name}: type");
            assert_eq!(b.flags, printed_bundle_flags(e), "{name}: flags");
            assert!(b.properties.is_empty());
        }
        Payload::BundleAdd(b) => {
            assert_eq!(u64::from(b.bundle_id), num(field(e, "bundle_id=").unwrap()), "{name}: bundle_id");
            assert_eq!(b.flags, printed_bundle_flags(e), "{name}: flags");
            assert_eq!(b.message.xid, msg.xid);
            let inner_text = e.lines().nth(2).expect("inner message line");
            assert!(inner_text.starts_with("OFPT_FLOW_MOD"), "{name}");
            match &b.message.payload {
                Payload::FlowMod(f) => {
                    assert_eq!(msg.version, 6, "{name}: FLOW_MOD is modelled in OF1.5 only");
                    assert_eq!(u64::from(f.table_id), num(field(inner_text, "table:").unwrap()), "{name}");
                    assert_eq!(u64::from(f.priority), num(field(inner_text, "priority=").unwrap()), "{name}");
                    assert_eq!(f.command, ofp::FlowModCommand::Add, "{name}");
                    assert!(f.match_.fields.contains(&Oxm::InPort(1)), "{name}: in_port=1");
                    assert!(f.match_.fields.contains(&Oxm::EthType(0x0806)), "{name}: arp");
                    assert_eq!(
                        f.instructions,
                        vec![ofp::Instruction::ApplyActions(vec![Action::Output { port: 3, max_len: 0 }])],
                        "{name}: actions=output:3"
                    );
                }
                Payload::Unknown { msg_type: 14, .. } => assert_eq!(msg.version, 5, "{name}"),
                other => panic!("{name}: inner {other:?}"),
            }
        }
        Payload::SetPacketInFormat(f) => {
            let expect = match field(e, "format=").unwrap() {
                "standard" => 0,
                "nxt_packet_in" => 1,
                "nxt_packet_in2" => 2,
                other => panic!("format {other}"),
            };
            assert_eq!(*f, expect, "{name}");
        }
        Payload::SetControllerId(id) => assert_eq!(u64::from(*id), num(field(e, "): id=").unwrap()), "{name}"),
        Payload::PacketIn2(p) | Payload::Resume(p) => {
            assert_eq!(p.packet.len() as u64, num(field(e, "data_len=").unwrap()), "{name}: data_len");
            let total = num(field(e, "total_len=").unwrap());
            assert_eq!(u64::from(p.full_len.unwrap_or(p.packet.len() as u32)), total, "{name}: total_len");
            // OVS prints table_id only when it is not 0 and the reason always (default no_match).
            assert_eq!(u64::from(p.table_id.unwrap_or(0)), field(e, "table_id=").map_or(0, num), "{name}: table_id");
            assert_eq!(p.cookie, field(e, "cookie=").map(num), "{name}: cookie");
            let reason = match field(e, "(via ").unwrap() {
                "no_match" => 0,
                "action" => 1,
                other => panic!("reason {other}"),
            };
            assert_eq!(p.reason.unwrap_or(0), reason, "{name}: reason");
            match field(e, "buffer=") {
                Some(b) => assert_eq!(p.buffer_id.map(u64::from), Some(num(b)), "{name}: buffer"),
                None => assert!(e.contains("(unbuffered)") && p.buffer_id.is_none(), "{name}: unbuffered"),
            }
            assert_eq!(p.userdata.as_ref().map(|u| u.to_vec()), field(e, "userdata=").map(dotted), "{name}: userdata");
            if let Some(md) = field(e, "metadata=") {
                assert!(p.metadata.contains(&Oxm::Metadata(ofp::Masked::exact(num(md)))), "{name}: metadata");
            }
            if let Some(r0) = field(e, "reg0=") {
                assert_eq!(p.register(0).map(u64::from), Some(num(r0)), "{name}: reg0");
                assert_eq!(p.register(1), None, "{name}: reg1 not sent");
            }
            if let Some(port) = field(e, "in_port=").filter(|p| p.bytes().all(|b| b.is_ascii_digit())) {
                assert_eq!(p.in_port().map(u64::from), Some(num(port)), "{name}: in_port");
            }
            assert!(p.unknown.is_empty(), "{name}");
        }
        Payload::Error(err) => match name {
            "error_experimenter_nx_must_be_zero_of12" => {
                assert_eq!(err.name(), Some("NXBRC_MUST_BE_ZERO"));
                let inner = Message::parse(err.data()).expect("data is the echo request");
                assert_eq!((inner.xid, inner.payload), (0x1111_1111, Payload::EchoRequest(Bytes::new())));
            }
            "error_bad_instruction_dup_inst_of14" => {
                assert_eq!(err.name(), Some("OFPBIC_DUP_INST"));
                let inner = Message::parse(err.data()).expect("data is the hello");
                assert_eq!(inner.xid, msg.xid);
                assert_eq!(versions_offered(&inner), printed_versions(e));
            }
            "error_onf_experimenter_dup_inst_of12" => {
                assert!(matches!(err, ErrorMsg::Experimenter { exp_code: 2600, experimenter: 0x4f4e_4600, .. }));
            }
            "error_nx_vendor_error_of10_bad_prereq" => {
                assert!(matches!(err, ErrorMsg::Standard { error_type: 0xb0c2, code: 0, .. }));
            }
            _ => return false,
        },
        Payload::FlowMod(_) | Payload::MultipartRequest(_) | Payload::MultipartReply(_) => {
            return multipart_checks(v, msg)
        }
        Payload::Experimenter { experimenter, exp_type, .. } => {
            assert_eq!(*experimenter, ofp::NX_VENDOR_ID, "{name}");
            assert_eq!(printed_type(e), "NXT_SET_ASYNC_CONFIG", "{name}");
            assert_eq!(*exp_type, 19, "{name}");
        }
        Payload::Unknown { msg_type, .. } => {
            // Not modelled at this version: raw, but then the version rules say so.
            assert!(!ofp::message::is_modelled(msg.version, *msg_type), "{name}");
        }
        other => panic!("{name}: no checks for {other:?}"),
    }
    true
}

fn multipart_checks(v: &Vector, msg: &Message) -> bool {
    use ofp::multipart::{MultipartReplyBody as Rep, MultipartRequestBody as Req};
    let e = v.expected.as_str();
    let name = v.name.as_str();
    match &msg.payload {
        Payload::MultipartRequest(r) => match (&r.body, name) {
            (Req::Flow(f), "flow_stats_request_of15") => {
                assert_eq!(f.table_id, ofp::TABLE_ALL, "{name}");
                assert_eq!((f.out_port, f.out_group), (ofp::port::ANY, ofp::GROUP_ANY), "{name}");
                assert!(f.match_.fields.is_empty(), "{name}");
            }
            (Req::Other { mp_type: 2, .. }, "aggregate_request_of15") => {}
            other => panic!("{name}: {other:?}"),
        },
        Payload::MultipartReply(r) => match (&r.body, name) {
            (Rep::Flow(flows), "flow_stats_reply_of15_oxs") => {
                let lines: Vec<&str> = e.lines().skip(1).collect();
                assert_eq!(flows.len(), lines.len(), "{name}: entries");
                for (f, line) in flows.iter().zip(lines) {
                    assert_eq!(f.stats.packet_count, Some(num(field(line, "n_packets=").unwrap())), "{name}");
                    assert_eq!(f.stats.byte_count, Some(num(field(line, "n_bytes=").unwrap())), "{name}");
                    assert_eq!(u64::from(f.table_id), num(field(line, "table=").unwrap()), "{name}");
                    let prio = field(line, "priority=").map_or(0x8000, num);
                    assert_eq!(u64::from(f.priority), prio, "{name}: priority");
                    let (s, ns) = field(line, "duration=").unwrap().trim_end_matches('s').split_once('.').unwrap();
                    let (sec, nsec) = f.stats.duration.expect("duration");
                    assert_eq!((u64::from(sec), u64::from(nsec) / 1_000_000), (num(s), num(ns)), "{name}: duration");
                    assert_eq!(f.flags, 1 | 4, "{name}: send_flow_rem reset_counts");
                    let port = num(field(line, "in_port=").unwrap()) as u32;
                    assert_eq!(f.match_.fields, vec![Oxm::InPort(port)], "{name}");
                    assert!(line.ends_with("actions=NORMAL"));
                    assert_eq!(
                        f.instructions,
                        vec![ofp::Instruction::ApplyActions(vec![Action::Output {
                            port: ofp::port::NORMAL,
                            max_len: 0
                        }])],
                        "{name}"
                    );
                }
            }
            (Rep::Other { mp_type: 2, .. }, "aggregate_reply_of15") => {}
            other => panic!("{name}: {other:?}"),
        },
        _ => return false,
    }
    true
}

fn printed_bundle_flags(expected: &str) -> u16 {
    let line = expected.lines().find(|l| l.contains("flags=")).unwrap();
    let flags = line.split("flags=").nth(1).unwrap();
    flags
        .split_whitespace()
        .map(|f| match f {
            "atomic" => bundle_ctrl::FLAG_ATOMIC,
            "ordered" => bundle_ctrl::FLAG_ORDERED,
            other => panic!("bundle flag {other}"),
        })
        .sum()
}

#[test]
fn every_message_vector_round_trips_and_matches_ovs_text() {
    let mut checked = 0;
    let mut rejected = 0;
    let mut specific = 0;
    let mut failures = Vec::new();
    for v in message_vectors() {
        if v.kind == "encode-error-reply" {
            continue; // see encode_error_reply_vectors
        }
        // Run every vector, then report all failures at once.
        let outcome = std::panic::catch_unwind(|| {
            if v.expected.contains("decode error") {
                assert!(Message::parse(&v.bytes).is_err(), "{}: OVS rejects it, so must we", v.name);
                return None;
            }
            let msg = parse_ok(&v);
            generic_checks(&v, &msg);
            Some(specific_checks(&v, &msg))
        });
        match outcome {
            Ok(None) => rejected += 1,
            Ok(Some(with_fields)) => {
                checked += 1;
                specific += usize::from(with_fields);
            }
            Err(_) => failures.push(v.name.clone()),
        }
    }
    assert!(failures.is_empty(), "failing vectors: {failures:?}");
    assert!(checked >= 58, "only {checked} message vectors");
    assert_eq!(rejected, 2, "bundle_add_bad_inner_xid and bundle_add_rejects_hello");
    eprintln!("{checked} message vectors round-trip, {specific} with field checks, {rejected} rejected");
}

/// `encode-error-reply` vectors: `hex` is the request; OVS's reply (as a hex dump) must equal
/// the error we build from the error's name and the request.
#[test]
fn encode_error_reply_vectors() {
    let mut n = 0;
    for v in message_vectors().into_iter().filter(|v| v.kind == "encode-error-reply") {
        let request = Message::parse(&v.bytes).unwrap_or_else(|e| panic!("{}: {e}", v.name));
        let error_name = v.cmd.split_whitespace().nth(2).expect("error name in cmd");
        let err = ErrorMsg::from_name(error_name, Bytes::from(v.bytes.clone()))
            .unwrap_or_else(|| panic!("{}: unknown error name {error_name}", v.name));
        assert_eq!(err.name(), Some(error_name));
        let reply = Message { version: request.version, xid: request.xid, payload: Payload::Error(err) };
        assert_eq!(hex::encode(reply.to_bytes().unwrap()), hex::encode(hexdump_bytes(&v.expected)), "{}", v.name);
        n += 1;
    }
    assert_eq!(n, 3);
}

#[test]
fn rejected_bundle_adds_name_the_reason() {
    let vs = message_vectors();
    let get = |n: &str| vs.iter().find(|v| v.name == n).unwrap();
    let bad_xid = Message::parse(&get("bundle_add_bad_inner_xid").bytes).unwrap_err();
    assert!(bad_xid.to_string().contains("xid"), "{bad_xid}");
    let hello = Message::parse(&get("bundle_add_rejects_hello").bytes).unwrap_err();
    assert!(hello.to_string().contains("bundled message type"), "{hello}");
}
