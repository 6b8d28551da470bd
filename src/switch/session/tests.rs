//! Byte-level tests of the session: no sockets. Expected request bytes are written out by hand
//! from the OpenFlow 1.5 specification's layouts (not produced by the codec), so they
//! cross-check it.

use super::*;
use ofp::multipart::{MultipartReply, OxsStats, MULTIPART_MORE};
use ofp::{
    bundle_ctrl, Action, BundleControl, FlowMod, FlowModCommand, Hello, Instruction, Match, MultipartRequest,
    MultipartRequestBody, Oxm,
};

fn unhex(s: &str) -> Vec<u8> {
    let clean: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    hex::decode(clean).expect("test hex")
}

fn t0() -> Instant {
    Instant::now()
}

/// Splits a byte stream into whole messages by their length field.
fn split(mut bytes: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let len = usize::from(u16::from_be_bytes([bytes[2], bytes[3]]));
        assert!(len >= 8 && len <= bytes.len(), "bad framing in session output");
        out.push(&bytes[..len]);
        bytes = &bytes[len..];
    }
    out
}

fn drain(s: &mut Session) -> Vec<u8> {
    let mut out = BytesMut::new();
    s.poll_transmit(&mut out, usize::MAX);
    out.to_vec()
}

fn drain_msgs(s: &mut Session) -> Vec<Message> {
    let bytes = drain(s);
    split(&bytes).into_iter().map(|m| Message::parse(m).expect("session emitted a parsable message")).collect()
}

fn events(s: &mut Session) -> Vec<Event> {
    std::iter::from_fn(|| s.poll_event()).collect()
}

fn feed(s: &mut Session, msg: Message) {
    let mut buf = BytesMut::new();
    msg.emit(&mut buf).expect("emit");
    s.handle_frame(&buf, t0());
}

fn error_frame(xid: u32, error_type: u16, code: u16) -> Vec<u8> {
    let mut v = vec![6, 1, 0, 12];
    v.extend_from_slice(&xid.to_be_bytes());
    v.extend_from_slice(&error_type.to_be_bytes());
    v.extend_from_slice(&code.to_be_bytes());
    v
}

fn nx_error_frame(xid: u32, exp_code: u16) -> Vec<u8> {
    let mut v = vec![6, 1, 0, 16];
    v.extend_from_slice(&xid.to_be_bytes());
    v.extend_from_slice(&[0xff, 0xff]);
    v.extend_from_slice(&exp_code.to_be_bytes());
    v.extend_from_slice(&ofp::NX_VENDOR_ID.to_be_bytes());
    v
}

/// The (empty) OFPMP_FLOW_MONITOR reply that confirms the monitor of the handshake.
const MONITOR_CREATED_XID6: &str = "06130010 00000006 00100000 00000000";

const FEATURES_REPLY_XID2: &str = "0606002000000002000050540000000100000100ff0000000000076f00000000";

/// A session past the handshake, output drained.
fn ready_session() -> Session {
    ready_session_at(t0())
}

/// A session that finished its handshake at `now`.
fn ready_session_at(now: Instant) -> Session {
    let mut s = Session::new(SessionConfig { controller_id: 7, ..SessionConfig::default() }, now);
    drain(&mut s);
    s.handle_frame(&unhex("06000010 000000aa 00010008 00000040"), now);
    drain(&mut s);
    s.handle_frame(&unhex(FEATURES_REPLY_XID2), now);
    s.handle_frame(&unhex(MONITOR_CREATED_XID6), now);
    s.handle_frame(&unhex("06150008 00000007"), now);
    assert!(s.is_ready());
    events(&mut s);
    s
}

fn conj_flow(i: u32) -> FlowMod {
    FlowMod {
        table_id: 1,
        priority: 200,
        cookie: 0x42,
        match_: Match {
            fields: vec![
                Oxm::EthType(ofp::numbers::eth_type::IPV4),
                Oxm::Ipv4Src(ofp::Masked::exact(std::net::Ipv4Addr::from(0x0a00_0000 + i))),
            ],
        },
        instructions: vec![Instruction::ApplyActions(vec![Action::Conjunction { id: i, clause: 0, n_clauses: 3 }])],
        ..FlowMod::default()
    }
}

fn features_of(events: &[Event]) -> Option<u64> {
    events.iter().find_map(|e| match e {
        Event::Ready(f) => Some(f.datapath_id),
        _ => None,
    })
}

fn completed(events: &[Event]) -> Vec<(RequestId, Result<Reply, SwitchError>)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Completed { id, result } => Some((*id, result.clone())),
            _ => None,
        })
        .collect()
}

// ---- handshake ---------------------------------------------------------------------------

#[test]
fn handshake_sends_hello_then_configures_and_becomes_ready_after_barrier() {
    let mut s = Session::new(SessionConfig { controller_id: 7, ..SessionConfig::default() }, t0());
    assert_eq!(drain(&mut s), unhex("06000010 00000001 00010008 00000040"));
    assert!(!s.is_ready());

    // OVS with protocols=OpenFlow15 answers with version 6 and bitmap 0x40.
    s.handle_frame(&unhex("06000010 000000aa 00010008 00000040"), t0());
    let expected = unhex(
        "06050008 00000002
         0609000c 00000003 0000ffff
         06040014 00000004 00002320 00000010 00000002
         06040018 00000005 00002320 00000014 000000000000 0007
         06120028 00000006 00100000 00000000 00000001 ffffffff ffffffff 000eff00 00010004 00000000
         06140008 00000007",
    );
    assert_eq!(drain(&mut s), expected);
    assert!(!s.is_ready());

    s.handle_frame(&unhex(FEATURES_REPLY_XID2), t0());
    s.handle_frame(&unhex(MONITOR_CREATED_XID6), t0());
    assert!(!s.is_ready(), "ready only after the barrier confirms the configuration");
    s.handle_frame(&unhex("06150008 00000007"), t0());
    assert!(s.is_ready());
    let ev = events(&mut s);
    assert_eq!(features_of(&ev), Some(0x0000_5054_0000_0001));
    assert_eq!(s.features().map(|f| f.n_tables), Some(255));
    assert!(s.pending.is_empty(), "no handshake xid lingers: {:?}", s.pending);
}

#[test]
fn hello_with_wider_bitmap_that_includes_1_5_is_accepted() {
    let mut s = Session::new(SessionConfig::default(), t0());
    drain(&mut s);
    // OVS default protocols (1.0-1.5): bitmap 0x7e, header version 6.
    s.handle_frame(&unhex("06000010 00000011 00010008 0000007e"), t0());
    assert_eq!(split(&drain(&mut s)).len(), 6);
}

#[test]
fn switch_without_1_5_is_a_clear_handshake_error() {
    let mut s = Session::new(SessionConfig::default(), t0());
    drain(&mut s);
    s.handle_frame(&unhex("04000010 00000011 00010008 00000012"), t0());
    let ev = events(&mut s);
    assert_eq!(
        ev,
        vec![Event::Closed(SwitchError::Handshake("switch does not offer OpenFlow 1.5 (offers 1.0, 1.3)".into()))]
    );
    assert!(s.is_closed());
    assert!(drain(&mut s).is_empty(), "nothing further is sent after a failed negotiation");
}

#[test]
fn hello_without_bitmap_offers_versions_up_to_its_header() {
    let hello = Hello::default();
    assert_eq!(offered_versions(4, &hello), vec![1, 2, 3, 4]);
    let mut s = Session::new(SessionConfig::default(), t0());
    drain(&mut s);
    s.handle_frame(&unhex("01000008 00000001"), t0());
    assert!(matches!(&events(&mut s)[..], [Event::Closed(SwitchError::Handshake(m))] if m.contains("offers 1.0)")));
}

#[test]
fn error_during_handshake_names_the_step() {
    let mut s = Session::new(SessionConfig::default(), t0());
    drain(&mut s);
    s.handle_frame(&unhex("06000010 00000011 00010008 00000040"), t0());
    drain(&mut s);
    // OFPBRC_BAD_TYPE for the SET_CONFIG (xid 3).
    s.handle_frame(&error_frame(3, 1, 1), t0());
    match &events(&mut s)[..] {
        [Event::Closed(SwitchError::Handshake(m))] => assert!(m.contains("SET_CONFIG"), "{m}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn handshake_times_out_without_hello() {
    let start = t0();
    let mut s = Session::new(SessionConfig::default(), start);
    s.tick(start + Duration::from_secs(9));
    assert!(events(&mut s).is_empty());
    s.tick(start + Duration::from_secs(10));
    assert!(matches!(&events(&mut s)[..], [Event::Closed(SwitchError::Handshake(m))] if m.contains("HELLO")));
}

#[test]
fn requests_before_ready_are_refused() {
    let mut s = Session::new(SessionConfig::default(), t0());
    assert!(matches!(s.barrier(), Err(SwitchError::Disconnected(_))));
    assert!(matches!(s.install(vec![conj_flow(1)]), Err(SwitchError::Disconnected(_))));
}

// ---- echo --------------------------------------------------------------------------------

#[test]
fn switch_echo_is_answered_with_same_xid_and_payload_ahead_of_queued_output() {
    let mut s = ready_session();
    s.install((0..2000).map(conj_flow).collect()).unwrap();
    let mut out = BytesMut::new();
    s.poll_transmit(&mut out, 1000);
    out.clear();
    s.handle_frame(&unhex("0602000d 00000099 2553541a9d"), t0());
    s.poll_transmit(&mut out, 1);
    assert_eq!(&out[..], &unhex("0603000d 00000099 2553541a9d")[..]);
    assert!(events(&mut s).contains(&Event::EchoAnswered { xid: 0x99 }));
}

#[test]
fn own_echo_is_sent_when_quiet_and_peer_declared_dead_after_misses() {
    let start = t0();
    let mut s = ready_session_at(start);
    let cfg = SessionConfig::default();
    s.tick(start + cfg.echo_interval / 2);
    assert!(drain(&mut s).is_empty(), "no echo before the interval");
    let mut now = start + cfg.echo_interval;
    for _ in 0..cfg.echo_max_missed {
        s.tick(now);
        let msgs = drain_msgs(&mut s);
        assert_eq!(msgs.len(), 1);
        assert!(matches!(msgs[0].payload, Payload::EchoRequest(_)));
        assert!(events(&mut s).is_empty());
        now += cfg.echo_interval;
    }
    s.tick(now);
    assert!(matches!(&events(&mut s)[..], [Event::Closed(SwitchError::Disconnected(Some(m)))] if m.contains("echo")));
}

#[test]
fn echo_reply_keeps_the_peer_alive() {
    let start = t0();
    let mut s = ready_session_at(start);
    let interval = SessionConfig::default().echo_interval;
    let mut now = start;
    for _ in 0..10 {
        now += interval;
        s.tick(now);
        let msgs = drain_msgs(&mut s);
        assert_eq!(msgs.len(), 1);
        let mut reply = BytesMut::new();
        Message::new(msgs[0].xid, Payload::EchoReply(Bytes::new())).emit(&mut reply).unwrap();
        s.handle_frame(&reply, now);
    }
    assert!(!s.is_closed());
    assert!(events(&mut s).is_empty());
}

// ---- requests ----------------------------------------------------------------------------

#[test]
fn barrier_completes_on_its_reply_only() {
    let mut s = ready_session();
    let id = s.barrier().unwrap();
    let msgs = drain_msgs(&mut s);
    assert_eq!(msgs.len(), 1);
    assert_eq!(msgs[0].payload, Payload::BarrierRequest);
    feed(&mut s, Message::new(msgs[0].xid.wrapping_add(1), Payload::BarrierReply));
    assert!(completed(&events(&mut s)).is_empty());
    feed(&mut s, Message::new(msgs[0].xid, Payload::BarrierReply));
    assert_eq!(completed(&events(&mut s)), vec![(id, Ok(Reply::Done))]);
    assert_eq!(s.requests_in_flight(), 0);
}

#[test]
fn error_for_a_sent_message_fails_that_request_with_the_error_name() {
    let mut s = ready_session();
    let meter = ofp::MeterMod { command: 0, flags: 2, meter_id: 5, bands: vec![] };
    let id = s.send(Payload::MeterMod(meter)).unwrap();
    let other = s.barrier().unwrap();
    let msgs = drain_msgs(&mut s);
    assert_eq!(msgs.len(), 3);
    assert!(matches!(msgs[0].payload, Payload::MeterMod(_)));
    // OFPMMFC_METER_EXISTS (12,1), then the two barrier replies.
    s.handle_frame(&error_frame(msgs[0].xid, 12, 1), t0());
    feed(&mut s, Message::new(msgs[1].xid, Payload::BarrierReply));
    feed(&mut s, Message::new(msgs[2].xid, Payload::BarrierReply));
    let done = completed(&events(&mut s));
    assert_eq!(done.len(), 2);
    match &done[0] {
        (i, Err(SwitchError::Rejected { request, error })) => {
            assert_eq!(*i, id);
            assert_eq!(request, "meter_mod of meter 5");
            assert_eq!((error.error_type, error.code), (12, 1));
            assert_eq!(error.name, Some("OFPMMFC_METER_EXISTS"));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(done[1], (other, Ok(Reply::Done)));
}

#[test]
fn error_with_unknown_xid_is_reported_unsolicited() {
    let mut s = ready_session();
    s.handle_frame(&error_frame(0xdead, 1, 1), t0());
    assert!(matches!(&events(&mut s)[..], [Event::UnsolicitedError { xid: 0xdead, error }] if error.code == 1));
}

fn flow_stats(priority: u16) -> FlowStats {
    FlowStats {
        table_id: 0,
        priority,
        idle_timeout: 0,
        hard_timeout: 0,
        flags: 0,
        importance: 0,
        cookie: 0,
        match_: Match { fields: vec![Oxm::InPort(u32::from(priority))] },
        stats: OxsStats { packet_count: Some(3), byte_count: Some(180), ..OxsStats::default() },
        instructions: vec![],
    }
}

#[test]
fn multipart_flow_replies_are_reassembled_by_xid() {
    let mut s = ready_session();
    let id = s.dump_flows(Some(3), CookieFilter::default()).unwrap();
    let msgs = drain_msgs(&mut s);
    let xid = msgs[0].xid;
    match &msgs[0].payload {
        Payload::MultipartRequest(MultipartRequest { body: MultipartRequestBody::Flow(req), .. }) => {
            assert_eq!(req.table_id, 3);
            assert_eq!(req.out_port, ofp::port::ANY);
        }
        other => panic!("{other:?}"),
    }
    let part = |flags, prios: &[u16]| {
        Message::new(
            xid,
            Payload::MultipartReply(MultipartReply {
                flags,
                body: MultipartReplyBody::Flow(prios.iter().map(|p| flow_stats(*p)).collect()),
            }),
        )
    };
    feed(&mut s, part(MULTIPART_MORE, &[1, 2]));
    feed(&mut s, part(MULTIPART_MORE, &[3]));
    assert!(completed(&events(&mut s)).is_empty(), "not complete while REPLY_MORE is set");
    feed(&mut s, part(0, &[4, 5]));
    let done = completed(&events(&mut s));
    match &done[..] {
        [(i, Ok(Reply::Flows(flows)))] => {
            assert_eq!(*i, id);
            assert_eq!(flows.iter().map(|f| f.priority).collect::<Vec<_>>(), vec![1, 2, 3, 4, 5]);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn undecodable_reply_fails_its_request_and_unknown_garbage_is_reported() {
    let mut s = ready_session();
    let id = s.dump_flows(None, CookieFilter::default()).unwrap();
    let xid = drain_msgs(&mut s)[0].xid;
    // A multipart reply whose flow entry claims 0x78 bytes but the message ends early.
    let mut bad = unhex("06130020 00000000 00010000 00000000 00780000 00000000 00000000 00000000");
    bad[4..8].copy_from_slice(&xid.to_be_bytes());
    s.handle_frame(&bad, t0());
    assert!(matches!(&completed(&events(&mut s))[..], [(i, Err(SwitchError::Protocol(_)))] if *i == id));
    bad[4..8].copy_from_slice(&0x777u32.to_be_bytes());
    s.handle_frame(&bad, t0());
    assert!(matches!(&events(&mut s)[..], [Event::Malformed { xid: 0x777, packet_in: false, .. }]));
    // The switch is told, with its own xid and the start of the message.
    match &drain_msgs(&mut s)[..] {
        [Message {
            xid: 0x777, payload: Payload::Error(ErrorMsg::Standard { error_type: 1, code: 6, data }), ..
        }] => {
            assert_eq!(&data[..], &bad[..]);
        }
        other => panic!("expected an OFPBRC_BAD_LEN error, got {other:?}"),
    }
}

#[test]
fn packet_in2_becomes_an_event_with_userdata() {
    let mut s = ready_session();
    s.handle_frame(&unhex("0604009800000000000023200000001e00000034828282828282808181818181810000500800450000280000000000063205535353535454545400550056000000000000000000000001000800000040000200080000011400030005070000000004001000000000fedcba9876543210000500050100000000060010800004085a5a5a5a5a5a5a5a00070009010203040500000000000000"), t0());
    match &events(&mut s)[..] {
        [Event::PacketIn2(pi)] => {
            assert_eq!(pi.userdata.as_deref(), Some(&[1u8, 2, 3, 4, 5][..]));
            assert_eq!(pi.table_id, Some(7));
        }
        other => panic!("{other:?}"),
    }
}

// ---- bundles -----------------------------------------------------------------------------

struct SentBundle {
    open_xid: u32,
    add_xids: Vec<u32>,
    sync_xid: u32,
    bundle_id: u32,
}

fn sent_bundle(msgs: &[Message], n: usize) -> SentBundle {
    assert_eq!(msgs.len(), n + 2, "open, {n} adds, barrier");
    let Payload::BundleControl(open) = &msgs[0].payload else { panic!("{:?}", msgs[0]) };
    assert_eq!(open.ctrl_type, bundle_ctrl::OPEN_REQUEST);
    assert_eq!(open.flags, bundle_ctrl::FLAG_ATOMIC | bundle_ctrl::FLAG_ORDERED);
    let mut add_xids = Vec::new();
    for m in &msgs[1..=n] {
        let Payload::BundleAdd(add) = &m.payload else { panic!("{m:?}") };
        assert_eq!(add.bundle_id, open.bundle_id);
        assert_eq!(add.flags, open.flags, "flags must equal OPEN's");
        assert_eq!(add.message.xid, m.xid, "inner xid = outer xid");
        assert!(matches!(add.message.payload, Payload::FlowMod(_)));
        add_xids.push(m.xid);
    }
    let mut unique = add_xids.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), n, "every BUNDLE_ADD has its own xid");
    assert_eq!(msgs[n + 1].payload, Payload::BarrierRequest);
    SentBundle { open_xid: msgs[0].xid, add_xids, sync_xid: msgs[n + 1].xid, bundle_id: open.bundle_id }
}

fn bundle_reply(xid: u32, bundle_id: u32, ctrl_type: u16) -> Message {
    Message::new(
        xid,
        Payload::BundleControl(BundleControl { bundle_id, ctrl_type, flags: 0, properties: Bytes::new() }),
    )
}

#[test]
fn install_opens_adds_syncs_and_commits() {
    let mut s = ready_session();
    let flows: Vec<FlowMod> = (0..3).map(conj_flow).collect();
    let id = s.install(flows.clone()).unwrap();
    let msgs = drain_msgs(&mut s);
    let b = sent_bundle(&msgs, 3);
    for (m, f) in msgs[1..4].iter().zip(&flows) {
        let Payload::BundleAdd(add) = &m.payload else { unreachable!() };
        assert_eq!(add.message.payload, Payload::FlowMod(f.clone()), "flows go out unchanged and in order");
    }
    feed(&mut s, bundle_reply(b.open_xid, b.bundle_id, bundle_ctrl::OPEN_REPLY));
    assert!(drain(&mut s).is_empty(), "no commit before the barrier confirms every add");
    feed(&mut s, Message::new(b.sync_xid, Payload::BarrierReply));
    let msgs = drain_msgs(&mut s);
    assert_eq!(msgs.len(), 1);
    let Payload::BundleControl(commit) = &msgs[0].payload else { panic!("{:?}", msgs[0]) };
    assert_eq!(commit.ctrl_type, bundle_ctrl::COMMIT_REQUEST);
    assert_eq!(commit.bundle_id, b.bundle_id);
    assert_eq!(commit.flags, bundle_ctrl::FLAG_ATOMIC | bundle_ctrl::FLAG_ORDERED);
    assert!(completed(&events(&mut s)).is_empty());
    feed(&mut s, bundle_reply(msgs[0].xid, b.bundle_id, bundle_ctrl::COMMIT_REPLY));
    assert_eq!(completed(&events(&mut s)), vec![(id, Ok(Reply::Done))]);
    assert_eq!(s.requests_in_flight(), 0);
}

#[test]
fn refused_add_discards_the_bundle_and_names_the_flow() {
    let mut s = ready_session();
    let flows: Vec<FlowMod> = (0..5).map(conj_flow).collect();
    let id = s.install(flows).unwrap();
    let b = sent_bundle(&drain_msgs(&mut s), 5);
    // NXBAC_BAD_CONJUNCTION for flow #3 at ADD time.
    s.handle_frame(&nx_error_frame(b.add_xids[3], 15), t0());
    feed(&mut s, Message::new(b.sync_xid, Payload::BarrierReply));
    let msgs = drain_msgs(&mut s);
    let Payload::BundleControl(ctrl) = &msgs[0].payload else { panic!() };
    assert_eq!(ctrl.ctrl_type, bundle_ctrl::DISCARD_REQUEST, "never commit a bundle with a refused flow");
    match &completed(&events(&mut s))[..] {
        [(i, Err(SwitchError::BundleFailed { index, flow, error, commit_error, also }))] => {
            assert!(also.is_empty());
            assert_eq!(*i, id);
            assert_eq!(*index, 3);
            assert!(flow.contains("10.0.0.3"), "{flow}");
            assert_eq!(error.name, Some("NXBAC_BAD_CONJUNCTION"));
            assert_eq!(error.experimenter, Some(ofp::NX_VENDOR_ID));
            assert_eq!(*commit_error, None);
        }
        other => panic!("{other:?}"),
    }
    // The discard reply is swallowed quietly.
    feed(&mut s, bundle_reply(msgs[0].xid, b.bundle_id, bundle_ctrl::DISCARD_REPLY));
    assert!(events(&mut s).is_empty());
}

#[test]
fn failed_commit_names_the_offending_flow_and_msg_failed() {
    let mut s = ready_session();
    let id = s.install((0..4).map(conj_flow).collect()).unwrap();
    let b = sent_bundle(&drain_msgs(&mut s), 4);
    feed(&mut s, Message::new(b.sync_xid, Payload::BarrierReply));
    let commit_xid = drain_msgs(&mut s)[0].xid;
    // OVS: the failing ADD's error (OFPFMFC_OVERLAP), then OFPBFC_MSG_FAILED for the commit.
    s.handle_frame(&error_frame(b.add_xids[2], 5, 3), t0());
    s.handle_frame(&error_frame(commit_xid, 17, 13), t0());
    match &completed(&events(&mut s))[..] {
        [(i, Err(e @ SwitchError::BundleFailed { index: 2, error, commit_error: Some(c), .. }))] => {
            assert_eq!(*i, id);
            assert_eq!(error.name, Some("OFPFMFC_OVERLAP"));
            assert_eq!(c.name, Some("OFPBFC_MSG_FAILED"));
            let text = e.to_string();
            assert!(text.contains("flow #2") && text.contains("OFPBFC_MSG_FAILED"), "{text}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(s.requests_in_flight(), 0);
}

#[test]
fn commit_error_without_a_flow_error_is_a_rejection() {
    let mut s = ready_session();
    s.install(vec![conj_flow(1)]).unwrap();
    let b = sent_bundle(&drain_msgs(&mut s), 1);
    feed(&mut s, Message::new(b.sync_xid, Payload::BarrierReply));
    let commit_xid = drain_msgs(&mut s)[0].xid;
    s.handle_frame(&error_frame(commit_xid, 17, 14), t0());
    assert!(matches!(
        &completed(&events(&mut s))[..],
        [(_, Err(SwitchError::Rejected { request, error }))] if request == "bundle commit" && error.code == 14
    ));
}

#[test]
fn big_batch_streams_in_chunks_of_messages_each_within_64k() {
    let mut s = ready_session();
    let n = 20_000usize;
    s.install((0..n as u32).map(conj_flow).collect()).unwrap();
    let mut total = Vec::new();
    let mut chunks = 0;
    loop {
        let mut out = BytesMut::new();
        s.poll_transmit(&mut out, 64 * 1024);
        if out.is_empty() {
            break;
        }
        // Each chunk holds whole messages and stops soon after the limit.
        assert!(out.len() < 64 * 1024 + 65_536);
        split(&out);
        chunks += 1;
        total.extend_from_slice(&out);
    }
    assert!(chunks > 10, "output was produced incrementally ({chunks} chunks)");
    let msgs: Vec<&[u8]> = split(&total);
    assert!(msgs.iter().all(|m| m.len() <= ofp::MAX_MESSAGE_LEN));
    let parsed: Vec<Message> = msgs.iter().map(|m| Message::parse(m).unwrap()).collect();
    sent_bundle(&parsed, n);
}

#[test]
fn oversized_flow_is_refused_before_anything_is_sent() {
    let mut s = ready_session();
    let mut big = conj_flow(1);
    big.instructions = vec![Instruction::ApplyActions(vec![Action::Note(Bytes::from(vec![0u8; 65_500]))])];
    let err = s.install(vec![conj_flow(0), big]).unwrap_err();
    assert!(matches!(&err, SwitchError::InvalidRequest(m) if m.contains("flow #1") && m.contains("too long")), "{err}");
    assert!(drain(&mut s).is_empty());
}

#[test]
fn a_flow_with_a_field_too_long_for_its_length_is_refused_before_anything_is_sent() {
    let mut s = ready_session();
    let mut bad = conj_flow(1);
    // A raw OXM field (NXM_1, field 127) whose payload its 8-bit length cannot hold.
    bad.match_.fields.push(ofp::Oxm::Unknown { header: 0x0001_fe00, payload: Bytes::from(vec![0u8; 300]) });
    let err = s.install(vec![conj_flow(0), bad]).unwrap_err();
    assert!(matches!(&err, SwitchError::InvalidRequest(m) if m.contains("flow #1") && m.contains("OXM TLV")), "{err}");
    assert!(drain(&mut s).is_empty());
}

#[test]
fn empty_install_completes_at_once() {
    let mut s = ready_session();
    let id = s.install(vec![]).unwrap();
    assert!(drain(&mut s).is_empty());
    assert_eq!(completed(&events(&mut s)), vec![(id, Ok(Reply::Done))]);
}

#[test]
fn two_bundles_in_flight_map_errors_to_the_right_one() {
    let mut s = ready_session();
    let a = s.install((0..3).map(conj_flow).collect()).unwrap();
    let b_id = s.install((10..13).map(conj_flow).collect()).unwrap();
    let msgs = drain_msgs(&mut s);
    let first = sent_bundle(&msgs[..5], 3);
    let second = sent_bundle(&msgs[5..], 3);
    assert_ne!(first.bundle_id, second.bundle_id);
    s.handle_frame(&error_frame(second.add_xids[0], 4, 9), t0());
    feed(&mut s, Message::new(first.sync_xid, Payload::BarrierReply));
    feed(&mut s, Message::new(second.sync_xid, Payload::BarrierReply));
    let done = completed(&events(&mut s));
    assert_eq!(done.len(), 1, "first bundle goes on to commit");
    assert!(matches!(&done[0], (i, Err(SwitchError::BundleFailed { index: 0, .. })) if *i == b_id));
    let out = drain_msgs(&mut s);
    let types: Vec<u16> = out
        .iter()
        .map(|m| match &m.payload {
            Payload::BundleControl(c) => c.ctrl_type,
            _ => 99,
        })
        .collect();
    assert_eq!(types, vec![bundle_ctrl::COMMIT_REQUEST, bundle_ctrl::DISCARD_REQUEST]);
    feed(&mut s, bundle_reply(out[0].xid, first.bundle_id, bundle_ctrl::COMMIT_REPLY));
    assert_eq!(completed(&events(&mut s)), vec![(a, Ok(Reply::Done))]);
}

#[test]
fn flow_mod_commands_survive_the_bundle_encoding() {
    let mut s = ready_session();
    let mut f = conj_flow(9);
    f.command = FlowModCommand::DeleteStrict;
    s.install(vec![f.clone()]).unwrap();
    let msgs = drain_msgs(&mut s);
    let Payload::BundleAdd(add) = &msgs[1].payload else { panic!() };
    assert_eq!(add.message.payload, Payload::FlowMod(f));
}

// ---- flow monitor ------------------------------------------------------------------------

/// An unsolicited OFPMP_FLOW_MONITOR reply (xid 0) with `entries` (hex of the updates).
fn monitor_update(entries: &str) -> Vec<u8> {
    let body = unhex(entries);
    let mut v = unhex("0613 0000 00000000 0010 0000 00000000");
    v.extend_from_slice(&body);
    let len = v.len() as u16;
    v[2..4].copy_from_slice(&len.to_be_bytes());
    v
}

/// OVS's "event=DELETED reason=eviction table=0 cookie=0x123456789abcdef0 in_port=1" entry
/// (tests/ofp-print.at, FLOW_MONITOR reply, OpenFlow 1.4+).
const REMOVED_ENTRY: &str =
    "0028 0002 00 05 0000 0000 8000 00000000 123456789abcdef0 0001000c 80000004 00000001 00000000";
/// "event=ABBREV xid=0x186a0".
const ABBREV_ENTRY: &str = "0008 0004 000186a0";

fn flows_changed(events: &[Event]) -> Vec<Vec<FlowUpdate>> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::FlowsChangedElsewhere(u) => Some(u.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn foreign_changes_are_reported_and_own_abbreviated_ones_are_not() {
    let mut s = ready_session();
    s.handle_frame(&monitor_update(ABBREV_ENTRY), t0());
    assert!(events(&mut s).is_empty(), "an ABBREV entry stands for our own request");
    s.handle_frame(&monitor_update(&format!("{REMOVED_ENTRY} {ABBREV_ENTRY}")), t0());
    let changed = flows_changed(&events(&mut s));
    let [updates] = changed.as_slice() else { panic!("{changed:?}") };
    let [FlowUpdate::Full(f)] = updates.as_slice() else { panic!("{updates:?}") };
    assert_eq!((f.event, f.cookie, f.table_id), (ofp::flow_monitor::event::REMOVED, 0x1234_5678_9abc_def0, 0));
    assert!(drain(&mut s).is_empty(), "nothing is answered");
}

#[test]
fn a_packet_in_the_strict_parser_rejects_is_reported_as_one() {
    let mut s = ready_session();
    // NXT_PACKET_IN2 whose packet property claims 16 bytes and has 4.
    s.handle_frame(&unhex("06040018 00000042 00002320 0000001e 0000 0010 00000000"), t0());
    assert!(matches!(&events(&mut s)[..], [Event::Malformed { xid: 0x42, packet_in: true, .. }]));
}

#[test]
fn paused_and_resumed_count_as_changes_and_undecodable_updates_too() {
    let mut s = ready_session();
    s.handle_frame(&monitor_update("0008 0005 00000000"), t0());
    s.handle_frame(&monitor_update("0008 0006 00000000"), t0());
    assert_eq!(flows_changed(&events(&mut s)), vec![vec![FlowUpdate::Paused], vec![FlowUpdate::Resumed]]);
    // A full entry cut short: the message does not parse, but it still says "something changed".
    s.handle_frame(&monitor_update("0018 0001 00 00 0000 0000 8000 00000000 0000000000000001"), t0());
    let ev = events(&mut s);
    assert_eq!(flows_changed(&ev), vec![Vec::<FlowUpdate>::new()]);
    assert!(ev.iter().any(|e| matches!(e, Event::Malformed { xid: 0, .. })), "{ev:?}");
}

#[test]
fn a_refused_flow_monitor_is_reported_and_the_session_still_comes_up() {
    let mut s = Session::new(SessionConfig::default(), t0());
    drain(&mut s);
    s.handle_frame(&unhex("06000010 000000aa 00010008 00000040"), t0());
    drain(&mut s);
    s.handle_frame(&unhex(FEATURES_REPLY_XID2), t0());
    // OFPBRC_BAD_STAT (type 1, code 5) for the monitor request (xid 6).
    s.handle_frame(&error_frame(6, 1, 5), t0());
    s.handle_frame(&unhex("06150008 00000007"), t0());
    assert!(s.is_ready());
    let ev = events(&mut s);
    assert!(matches!(&ev[0], Event::FlowMonitorRefused(e) if e.error_type == 1 && e.code == 5), "{ev:?}");
    assert!(features_of(&ev).is_some());
}

#[test]
fn without_flow_monitor_the_handshake_does_not_ask_for_one() {
    let mut s = Session::new(SessionConfig { flow_monitor: false, ..SessionConfig::default() }, t0());
    drain(&mut s);
    s.handle_frame(&unhex("06000010 000000aa 00010008 00000040"), t0());
    let msgs = drain_msgs(&mut s);
    assert_eq!(msgs.len(), 5);
    assert!(!msgs.iter().any(|m| matches!(m.payload, Payload::MultipartRequest(_))));
}

#[test]
fn every_refused_add_is_named_not_only_the_first() {
    let mut s = ready_session();
    s.install((0..5).map(conj_flow).collect()).unwrap();
    let b = sent_bundle(&drain_msgs(&mut s), 5);
    s.handle_frame(&nx_error_frame(b.add_xids[1], 15), t0());
    s.handle_frame(&error_frame(b.add_xids[4], 5, 1), t0());
    feed(&mut s, Message::new(b.sync_xid, Payload::BarrierReply));
    match &completed(&events(&mut s))[..] {
        [(_, Err(e @ SwitchError::BundleFailed { index: 1, also, .. }))] => {
            assert_eq!(also.len(), 1);
            assert_eq!(also[0].0, 4);
            assert_eq!(also[0].1.name, Some("OFPFMFC_TABLE_FULL"));
            assert!(e.to_string().contains("and 1 more"), "{e}");
        }
        other => panic!("{other:?}"),
    }
}

// ---- robustness --------------------------------------------------------------------------

proptest::proptest! {
    #[test]
    fn arbitrary_frames_never_panic(frames in proptest::collection::vec(proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200), 0..20)) {
        let mut s = ready_session();
        let _ = s.install((0..3).map(conj_flow).collect());
        let _ = s.dump_flows(None, CookieFilter::default());
        for mut f in frames {
            if f.len() >= 4 {
                let len = f.len() as u16;
                f[0] = 6;
                f[2..4].copy_from_slice(&len.to_be_bytes());
            }
            s.handle_frame(&f, t0());
            drain(&mut s);
            events(&mut s);
        }
    }
}
