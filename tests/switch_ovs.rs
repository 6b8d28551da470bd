//! The switch connection against a real ovs-vswitchd (userspace datapath) in a private
//! sandbox per test: handshake, echo, big bundles, dumps, counters, strict commands, failed
//! bundles, restarts and packet-ins.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

mod support;

use bytes::Bytes;
use npagent::switch::{spawn, ConnState, ConnectionConfig, SessionConfig, SwitchError, SwitchHandle};
use ofp::{
    Action, Controller2, FlowMod, FlowModCommand, FlowStats, Instruction, Masked, Match, Oxm, PacketIn2, PacketOut,
};
use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};
use support::Sandbox;
use tokio::sync::{mpsc, watch};
use tokio::time::error::Elapsed;

const OFPP_TABLE: u32 = 0xffff_fff9;

fn config(sb: &Sandbox) -> ConnectionConfig {
    ConnectionConfig { endpoint: sb.ofp.parse().expect("sandbox endpoint"), ..ConnectionConfig::default() }
}

async fn connect(sb: &Sandbox) -> (SwitchHandle, mpsc::Receiver<PacketIn2>) {
    connect_with(config(sb)).await
}

async fn connect_with(cfg: ConnectionConfig) -> (SwitchHandle, mpsc::Receiver<PacketIn2>) {
    let (handle, packet_ins) = spawn(cfg);
    handle.wait_connected(Duration::from_secs(10)).await.expect("switch connects");
    (handle, packet_ins)
}

/// The generation of the next connected state `states` shows, waiting at most 15 s.
async fn reconnected_generation(states: &mut watch::Receiver<ConnState>) -> Result<u64, Elapsed> {
    tokio::time::timeout(Duration::from_secs(15), async {
        loop {
            if let ConnState::Connected { generation, .. } = *states.borrow_and_update() {
                return generation;
            }
            states.changed().await.unwrap();
        }
    })
    .await
}

fn ip4(a: u32) -> Ipv4Addr {
    Ipv4Addr::from(a)
}

fn apply(actions: Vec<Action>) -> Instruction {
    Instruction::ApplyActions(actions)
}

fn flow(table: u8, priority: u16, fields: Vec<Oxm>, instructions: Vec<Instruction>) -> FlowMod {
    FlowMod { table_id: table, priority, match_: Match { fields }, instructions, ..FlowMod::default() }
}

/// A TCP/IPv4 frame 10.0.0.1:1234 -> 10.0.0.2:80.
fn tcp_frame() -> Bytes {
    Bytes::from(
        hex::decode(
            "505400000002505400000001080045000028000000004006f97c0a0000010a00000204d2005000000000000000005002200000000000",
        )
        .expect("hex"),
    )
}

/// PACKET_OUT of `tcp_frame()` from LOCAL into table 0: goes through the pipeline and is
/// credited to the flows it hits.
fn packet_out_to_table() -> PacketOut {
    PacketOut {
        buffer_id: ofp::NO_BUFFER,
        match_: Match { fields: vec![Oxm::InPort(ofp::port::LOCAL)] },
        actions: vec![Action::Output { port: OFPP_TABLE, max_len: 0 }],
        data: tcp_frame(),
    }
}

// ---- the 100k conjunctive flow set -----------------------------------------------------------

const TABLES: u8 = 5;
const RULES_PER_TABLE: u32 = 5_000;
const NEXT_TABLE: u8 = 10;

/// 100,000 flows shaped like npagent's policy flows (docs/pipeline.md): per rule three clause flows (priority 200, one per
/// dimension: source IP, destination port register, TCP port) with `conjunction(id,k/3)` and
/// one `conj_id` flow (priority 190), in tables 0..5.
fn conjunctive_flows() -> Vec<FlowMod> {
    let mut flows = Vec::with_capacity(usize::from(TABLES) * RULES_PER_TABLE as usize * 4);
    for t in 0..TABLES {
        for r in 0..RULES_PER_TABLE {
            let id = u32::from(t) * 100_000 + r + 1;
            let cookie = 0x00ab_0000_0000_0000 | u64::from(id);
            let conj = |clause| apply(vec![Action::Conjunction { id, clause, n_clauses: 3 }]);
            let src = ip4(0x0a00_0000 | u32::from(t) << 16 | r);
            let mut clause_src =
                flow(t, 200, vec![Oxm::EthType(0x0800), Oxm::Ipv4Src(Masked::exact(src))], vec![conj(0)]);
            let mut clause_to = flow(t, 200, vec![Oxm::Reg { index: 1, value: Masked::exact(r + 1) }], vec![conj(1)]);
            let port = u16::try_from(1000 + r).expect("port");
            let mut clause_port = flow(
                t,
                200,
                vec![Oxm::EthType(0x0800), Oxm::IpProto(6), Oxm::TcpDst(Masked::exact(port))],
                vec![conj(2)],
            );
            let mut action = flow(
                t,
                190,
                vec![Oxm::ConjId(id)],
                vec![
                    apply(vec![Action::SetField(Oxm::Reg { index: 3, value: Masked::exact(id) })]),
                    Instruction::GotoTable(NEXT_TABLE),
                ],
            );
            for f in [&mut clause_src, &mut clause_to, &mut clause_port, &mut action] {
                f.cookie = cookie;
            }
            flows.extend([clause_src, clause_to, clause_port, action]);
        }
    }
    flows
}

/// A match in a comparable form: OF1.5 xregs split back into 32-bit registers, all-ones masks
/// dropped, fields sorted (OVS reorders them).
fn normalise_match(m: &Match) -> Vec<Oxm> {
    let mut out = Vec::new();
    for f in &m.fields {
        match f {
            Oxm::XReg { index, value } => {
                let mask = value.mask.unwrap_or(u64::MAX);
                for (half, shift) in [(0u8, 32u32), (1, 0)] {
                    let m32 = (mask >> shift) as u32;
                    if m32 != 0 {
                        let v32 = (value.value >> shift) as u32 & m32;
                        let mask = (m32 != u32::MAX).then_some(m32);
                        out.push(Oxm::Reg { index: index * 2 + half, value: Masked { value: v32, mask } });
                    }
                }
            }
            Oxm::Reg { index, value } if value.mask == Some(u32::MAX) => {
                out.push(Oxm::Reg { index: *index, value: Masked::exact(value.value) })
            }
            Oxm::Ipv4Src(v) if v.mask == Some(Ipv4Addr::BROADCAST) => out.push(Oxm::Ipv4Src(Masked::exact(v.value))),
            other => out.push(other.clone()),
        }
    }
    out.sort();
    out
}

type FlowKey = (u8, u16, Vec<Oxm>);

fn key_of_mod(f: &FlowMod) -> FlowKey {
    (f.table_id, f.priority, normalise_match(&f.match_))
}

fn key_of_stats(f: &FlowStats) -> FlowKey {
    (f.table_id, f.priority, normalise_match(&f.match_))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handshake_reports_the_datapath_and_echo_keeps_the_session() {
    let sb = Sandbox::start();
    let mut cfg = config(&sb);
    cfg.session = SessionConfig { echo_interval: Duration::from_millis(100), ..SessionConfig::default() };
    let (switch, _pi) = spawn(cfg);
    let (generation, dpid) = switch.wait_connected(Duration::from_secs(10)).await.unwrap();
    assert_eq!(generation, 1);
    let expected = sb.vsctl(&["get", "Bridge", "br-int", "datapath_id"]);
    assert_eq!(format!("\"{dpid:016x}\""), expected.trim());
    // Long enough for several echo rounds; without replies the session would be declared
    // dead after 3 misses and come back with generation 2.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(switch.state(), ConnState::Connected { generation: 1, datapath_id: dpid });
    switch.barrier().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn switch_without_openflow15_is_refused_clearly() {
    let sb = Sandbox::start();
    sb.vsctl(&["set", "Bridge", "br-int", "protocols=OpenFlow10,OpenFlow13"]);
    let (switch, _pi) = spawn(config(&sb));
    let mut rx = switch.subscribe();
    let reason = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            if let ConnState::Disconnected { reason: Some(r) } = &*rx.borrow_and_update() {
                return r.clone();
            }
            rx.changed().await.unwrap();
        }
    })
    .await
    .expect("a disconnect with a reason");
    assert!(reason.contains("switch does not offer OpenFlow 1.5 (offers 1.0, 1.3)"), "{reason}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hundred_thousand_conjunctive_flows_in_one_bundle_dump_back_identical() {
    let sb = Sandbox::start();
    let (switch, _pi) = connect(&sb).await;
    let flows = conjunctive_flows();
    assert_eq!(flows.len(), 100_000);

    let started = Instant::now();
    switch.install(flows.clone()).await.expect("bundle commits");
    let install_time = started.elapsed();

    let started = Instant::now();
    let dumped = switch.dump_flows(None).await.expect("dump");
    let dump_time = started.elapsed();
    eprintln!("install {install_time:?}, dump {dump_time:?} of {} flows", dumped.len());
    assert_eq!(dumped.len(), flows.len());

    let sent: BTreeMap<FlowKey, &FlowMod> = flows.iter().map(|f| (key_of_mod(f), f)).collect();
    assert_eq!(sent.len(), flows.len(), "test flows are distinct");
    for got in &dumped {
        let key = key_of_stats(got);
        let want = sent.get(&key).unwrap_or_else(|| panic!("unexpected flow in dump: {got:?}"));
        assert_eq!(got.cookie, want.cookie, "{key:?}");
        assert_eq!(got.instructions, want.instructions, "{key:?}");
        assert_eq!((got.idle_timeout, got.hard_timeout), (0, 0));
    }
    let per_table = dumped.iter().fold(BTreeMap::new(), |mut m, f| {
        *m.entry(f.table_id).or_insert(0usize) += 1;
        m
    });
    assert_eq!(per_table, (0..TABLES).map(|t| (t, RULES_PER_TABLE as usize * 4)).collect());

    // ovs-ofctl agrees on the count and on a sample.
    let text = sb.ofctl(&["--no-stats", "--no-names", "dump-flows"]);
    let lines: Vec<&str> = text.lines().filter(|l| l.contains("priority=")).collect();
    assert_eq!(lines.len(), 100_000);
    // Table 1, rule 3999.
    let id: u32 = 104_000;
    let (t, r) = (id / 100_000, id % 100_000 - 1);
    let filter = format!("cookie={:#x}/-1", 0x00ab_0000_0000_0000u64 | u64::from(id));
    let sample = sb.ofctl(&["--no-stats", "--no-names", "dump-flows", &filter]);
    let src = ip4(0x0a00_0000 | t << 16 | r);
    let port = 1000 + r;
    let expected = [
        format!("table={t}, priority=200,ip,nw_src={src} actions=conjunction({id},1/3)"),
        format!("table={t}, priority=200,reg1={:#x} actions=conjunction({id},2/3)", r + 1),
        format!("table={t}, priority=200,tcp,tp_dst={port} actions=conjunction({id},3/3)"),
        format!("table={t}, priority=190,conj_id={id} actions=set_field:{id:#x}->reg3,goto_table:{NEXT_TABLE}"),
    ];
    for e in &expected {
        assert!(sample.contains(e.as_str()), "ovs-ofctl lacks {e:?}:\n{sample}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modify_strict_keeps_packet_counters() {
    let sb = Sandbox::start();
    let (switch, _pi) = connect(&sb).await;
    let m = vec![Oxm::EthType(0x0800), Oxm::Ipv4Src(Masked::exact(ip4(0x0a00_0001)))];
    let original = flow(0, 100, m.clone(), vec![apply(vec![])]);
    switch.install(vec![original]).await.unwrap();
    for _ in 0..3 {
        switch.packet_out(packet_out_to_table()).await.unwrap();
    }
    let before = switch.dump_flows(Some(0)).await.unwrap();
    assert_eq!(before.len(), 1);
    assert_eq!(before[0].stats.packet_count, Some(3), "packet-outs into table 0 are counted");

    let mut modify = flow(0, 100, m, vec![apply(vec![Action::Output { port: ofp::port::LOCAL, max_len: 0 }])]);
    modify.command = FlowModCommand::ModifyStrict;
    switch.install(vec![modify.clone()]).await.unwrap();
    let after = switch.dump_flows(Some(0)).await.unwrap();
    assert_eq!(after.len(), 1);
    assert_eq!(after[0].instructions, modify.instructions, "actions changed");
    assert_eq!(after[0].stats.packet_count, Some(3), "counters survived MODIFY_STRICT");
    let text = sb.ofctl(&["dump-flows"]);
    assert!(text.contains("n_packets=3") && text.contains("actions=LOCAL"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_strict_removes_exactly_one_flow() {
    let sb = Sandbox::start();
    let (switch, _pi) = connect(&sb).await;
    let ip = vec![Oxm::EthType(0x0800), Oxm::Ipv4Src(Masked::exact(ip4(0x0a00_0001)))];
    let mut tcp = ip.clone();
    tcp.extend([Oxm::IpProto(6), Oxm::TcpDst(Masked::exact(80))]);
    let drop_all = vec![apply(vec![])];
    let flows = vec![
        flow(0, 100, ip.clone(), drop_all.clone()),
        flow(0, 100, tcp.clone(), drop_all.clone()),
        flow(0, 101, ip.clone(), drop_all.clone()),
    ];
    switch.install(flows).await.unwrap();
    assert_eq!(switch.dump_flows(None).await.unwrap().len(), 3);
    let mut delete = flow(0, 100, ip.clone(), vec![]);
    delete.command = FlowModCommand::DeleteStrict;
    switch.install(vec![delete]).await.unwrap();
    let left: Vec<(u16, Vec<Oxm>)> =
        switch.dump_flows(None).await.unwrap().iter().map(|f| (f.priority, normalise_match(&f.match_))).collect();
    let mut expected =
        vec![(100, normalise_match(&Match { fields: tcp })), (101, normalise_match(&Match { fields: ip }))];
    expected.sort();
    let mut left = left;
    left.sort();
    assert_eq!(left, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_flow_in_a_bundle_changes_nothing_and_is_named() {
    let sb = Sandbox::start();
    let (switch, _pi) = connect(&sb).await;
    let existing = flow(0, 5, vec![], vec![apply(vec![])]);
    switch.install(vec![existing]).await.unwrap();
    let before = sb.dump_flows();

    // Refused when added: a conjunction with one clause (NXBAC_BAD_CONJUNCTION).
    let mut batch = conjunctive_flows();
    batch.truncate(1000);
    batch[500].instructions = vec![apply(vec![Action::Conjunction { id: 9, clause: 0, n_clauses: 1 }])];
    match switch.install(batch).await {
        Err(SwitchError::BundleFailed { index, flow, error, .. }) => {
            assert_eq!(index, 500);
            assert!(flow.contains("actions=conjunction(9,1/1)"), "{flow}");
            assert_eq!(error.name, Some("NXBAC_BAD_CONJUNCTION"), "{error}");
        }
        other => panic!("expected BundleFailed, got {other:?}"),
    }
    assert_eq!(sb.dump_flows(), before, "tables unchanged");

    // Refused at commit: CHECK_OVERLAP against the existing catch-all at priority 5.
    let mut batch = conjunctive_flows();
    batch.truncate(1000);
    let mut overlapping = flow(0, 5, vec![Oxm::EthType(0x0800)], vec![apply(vec![])]);
    overlapping.flags = 2;
    batch.insert(700, overlapping);
    match switch.install(batch).await {
        Err(e @ SwitchError::BundleFailed { .. }) => {
            let SwitchError::BundleFailed { index, error, commit_error, .. } = &e else { unreachable!() };
            assert_eq!(*index, 700, "{e}");
            assert_eq!(error.name, Some("OFPFMFC_OVERLAP"), "{e}");
            assert_eq!(commit_error.as_ref().and_then(|c| c.name), Some("OFPBFC_MSG_FAILED"), "{e}");
        }
        other => panic!("expected BundleFailed, got {other:?}"),
    }
    assert_eq!(sb.dump_flows(), before, "tables unchanged");
    switch.barrier().await.expect("connection still usable");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconnects_by_itself_after_vswitchd_restart() {
    let sb = Sandbox::start();
    let (switch, _pi) = connect(&sb).await;
    let mut states = switch.subscribe();
    assert!(matches!(*states.borrow_and_update(), ConnState::Connected { generation: 1, .. }));
    switch.install(vec![flow(0, 9, vec![], vec![apply(vec![])])]).await.unwrap();

    let sb = tokio::task::spawn_blocking(move || {
        sb.stop_vswitchd("KILL");
        sb
    })
    .await
    .unwrap();
    let seen_down = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            if matches!(*states.borrow_and_update(), ConnState::Disconnected { .. }) {
                return;
            }
            states.changed().await.unwrap();
        }
    })
    .await;
    assert!(seen_down.is_ok(), "Disconnected reported");
    assert!(matches!(switch.barrier().await, Err(SwitchError::Disconnected(_))), "requests fail fast while down");

    let sb = tokio::task::spawn_blocking(move || {
        sb.start_vswitchd();
        sb
    })
    .await
    .unwrap();
    let generation = reconnected_generation(&mut states).await.expect("reconnected");
    assert_eq!(generation, 2);
    assert!(switch.dump_flows(None).await.unwrap().is_empty(), "a restarted switch starts empty");
    switch.install(vec![flow(0, 9, vec![], vec![apply(vec![])])]).await.unwrap();
    assert_eq!(sb.dump_flows(), vec!["priority=9 actions=drop".to_string()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_in_flight_at_disconnect_fails_clearly() {
    let sb = Sandbox::start();
    let (switch, _pi) = connect(&sb).await;
    // Freeze the switch so the requests below stay in flight, then kill it.
    let pid = sb.vswitchd_pid().to_string();
    support::sandbox::run(std::process::Command::new("kill").args(["-STOP", &pid]));
    let install = {
        let switch = switch.clone();
        tokio::spawn(async move { switch.install(conjunctive_flows()).await })
    };
    let barrier = {
        let switch = switch.clone();
        tokio::spawn(async move { switch.barrier().await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!install.is_finished() && !barrier.is_finished(), "a frozen switch answers nothing");
    let sb = tokio::task::spawn_blocking(move || {
        sb.stop_vswitchd("KILL");
        sb
    })
    .await
    .unwrap();
    // Each fails at once, naming why: "request in flight lost: ..." once sent, or the lost
    // connection's reason if it was still queued behind the install's bytes (under load the
    // connection task may not have taken it yet). Never a hang, never success.
    for (what, task) in [("install", install), ("barrier", barrier)] {
        let result = tokio::time::timeout(Duration::from_secs(10), task).await.expect("fails, does not hang").unwrap();
        assert!(matches!(result, Err(SwitchError::Disconnected(Some(ref m))) if !m.is_empty()), "{what}: {result:?}");
    }
    drop(sb);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn packet_in2_with_userdata_arrives_decoded() {
    let sb = Sandbox::start();
    let (switch, mut packet_ins) = connect(&sb).await;
    let userdata = Bytes::from_static(&[0x01, 0x01, 0x00, 0x00, 0x00, 0x2a]);
    let to_controller = Action::Controller2(Controller2 { userdata: Some(userdata.clone()), ..Controller2::default() });
    let mut f = flow(
        0,
        100,
        vec![Oxm::EthType(0x0800), Oxm::Ipv4Src(Masked::exact(ip4(0x0a00_0001)))],
        vec![apply(vec![Action::SetField(Oxm::Reg { index: 0, value: Masked::exact(0x2a) }), to_controller])],
    );
    f.cookie = 0x77;
    switch.install(vec![f]).await.unwrap();
    switch.packet_out(packet_out_to_table()).await.unwrap();
    let pi = tokio::time::timeout(Duration::from_secs(5), packet_ins.recv())
        .await
        .expect("a packet-in within 5 s")
        .expect("stream open");
    assert_eq!(pi.userdata, Some(userdata));
    assert_eq!(pi.packet, tcp_frame());
    assert_eq!(pi.table_id, Some(0));
    assert_eq!(pi.cookie, Some(0x77));
    assert!(
        pi.metadata.iter().any(|m| matches!(m, Oxm::XReg { index: 0, value } if value.value >> 32 == 0x2a)),
        "reg0 in the metadata: {:?}",
        pi.metadata
    );
    assert_eq!(switch.packet_in_dropped(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn packet_in_overflow_is_counted() {
    let sb = Sandbox::start();
    let mut cfg = config(&sb);
    cfg.packet_in_capacity = 2;
    let (switch, mut packet_ins) = connect_with(cfg).await;
    let to_controller =
        Action::Controller2(Controller2 { userdata: Some(Bytes::from_static(b"x")), ..Controller2::default() });
    switch.install(vec![flow(0, 100, vec![], vec![apply(vec![to_controller])])]).await.unwrap();
    for _ in 0..10 {
        switch.packet_out(packet_out_to_table()).await.unwrap();
    }
    // OVS queues packet-ins and may send some after the packet-out's barrier reply: wait
    // until all ten are accounted for, without reading the stream.
    let deadline = Instant::now() + Duration::from_secs(5);
    while switch.packet_in_dropped() < 8 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut received = 0;
    while packet_ins.try_recv().is_ok() {
        received += 1;
    }
    assert_eq!(received, 2, "the stream holds what fits");
    assert_eq!(switch.packet_in_dropped(), 8, "the rest is counted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn meters_and_groups_are_installed_and_errors_tied_to_them() {
    use ofp::{Bucket, GroupMod, MeterBand, MeterMod};
    let sb = Sandbox::start();
    let (switch, _pi) = connect(&sb).await;
    // OFPMF_PKTPS | OFPMF_BURST | OFPMF_STATS, 5000 pps, burst 10000.
    let meter = MeterMod {
        command: 0,
        flags: 2 | 4 | 8,
        meter_id: 1,
        bands: vec![MeterBand::Drop { rate: 5000, burst_size: 10_000 }],
    };
    switch.meter_mod(meter.clone()).await.expect("meter added");
    let stats = switch.meter_stats(1).await.expect("meter stats");
    assert_eq!(stats.len(), 1);
    assert_eq!(stats[0].meter_id, 1);
    assert_eq!(stats[0].bands.len(), 1);
    match switch.meter_mod(meter).await {
        Err(SwitchError::Rejected { request, error }) => {
            assert_eq!(request, "meter_mod of meter 1");
            assert_eq!(error.name, Some("OFPMMFC_METER_EXISTS"), "{error}");
        }
        other => panic!("expected METER_EXISTS, got {other:?}"),
    }
    let meters = sb.ofctl(&["dump-meters"]);
    assert!(meters.contains("meter=1 pktps burst stats bands=") && meters.contains("rate=5000"), "{meters}");

    let group = GroupMod {
        command: 0,
        group_type: 0,
        group_id: 7,
        command_bucket_id: 0xffff_ffff,
        buckets: vec![Bucket {
            bucket_id: 0,
            actions: vec![Action::Output { port: ofp::port::LOCAL, max_len: 0 }],
            properties: Bytes::new(),
        }],
        properties: Bytes::new(),
    };
    switch.group_mod(group).await.expect("group added");
    let groups = sb.ofctl(&["dump-groups"]);
    assert!(groups.contains("group_id=7,type=all,bucket=bucket_id:0,actions=LOCAL"), "{groups}");
    // A flow using both is accepted.
    let f = flow(0, 10, vec![], vec![apply(vec![Action::Meter(1), Action::Group(7)])]);
    switch.install(vec![f]).await.expect("flow with meter and group");
    assert_eq!(sb.dump_flows(), vec!["priority=10 actions=meter:1,group:7".to_string()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_switch_is_declared_dead_by_echo_and_reconnected() {
    let sb = Sandbox::start();
    let mut cfg = config(&sb);
    cfg.session = SessionConfig {
        echo_interval: Duration::from_millis(100),
        echo_max_missed: 3,
        handshake_timeout: Duration::from_secs(1),
        ..SessionConfig::default()
    };
    let (switch, _pi) = connect_with(cfg).await;
    let mut states = switch.subscribe();
    states.borrow_and_update();
    let pid = sb.vswitchd_pid().to_string();
    let signal = |sig: &str| {
        support::sandbox::run(std::process::Command::new("kill").args([sig, &pid]));
    };
    // Frozen, the switch keeps the socket open but answers nothing.
    signal("-STOP");
    let frozen_at = Instant::now();
    let reason = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            states.changed().await.unwrap();
            if let ConnState::Disconnected { reason } = &*states.borrow_and_update() {
                return reason.clone().unwrap_or_default();
            }
        }
    })
    .await;
    signal("-CONT");
    let reason = reason.expect("declared dead within 5 s");
    assert!(reason.contains("echo"), "{reason}");
    assert!(frozen_at.elapsed() >= Duration::from_millis(300), "not before the misses add up");
    let generation = reconnected_generation(&mut states).await.expect("reconnected after the switch woke up");
    assert!(generation >= 2);
    switch.barrier().await.expect("usable again");
}

/// Waits until the drift counter differs from `seen` (at most `within`); returns the new value.
async fn drift_after(drift: &mut watch::Receiver<u64>, seen: u64, within: Duration) -> Option<u64> {
    tokio::time::timeout(within, async {
        loop {
            let now = *drift.borrow_and_update();
            if now != seen {
                return now;
            }
            drift.changed().await.unwrap();
        }
    })
    .await
    .ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flow_monitor_reports_changes_by_others_and_not_our_own() {
    let sb = Sandbox::start();
    let (switch, _pi) = connect(&sb).await;
    let mut drift = switch.subscribe_drift();
    let start = *drift.borrow_and_update();

    // Our own bundle (adds, a modify, a delete): OVS reports it abbreviated, we stay quiet.
    let batch: Vec<FlowMod> = conjunctive_flows().into_iter().take(100).collect();
    switch.install(batch.clone()).await.unwrap();
    let mut m = batch[0].clone();
    m.command = FlowModCommand::ModifyStrict;
    m.instructions = vec![apply(vec![Action::Conjunction { id: 77, clause: 0, n_clauses: 2 }])];
    let mut d = batch[1].clone();
    d.command = FlowModCommand::DeleteStrict;
    switch.install(vec![m, d]).await.unwrap();
    switch.barrier().await.unwrap();
    assert_eq!(
        drift_after(&mut drift, start, Duration::from_millis(500)).await,
        None,
        "our own changes were reported as drift"
    );

    // Someone else adds, modifies and deletes flows: each is reported.
    let mut seen = start;
    for cmd in [
        vec!["add-flow", "table=7,priority=9,ip,actions=drop"],
        vec!["mod-flows", "table=7,ip,actions=output:1"],
        vec!["del-flows", "table=7"],
    ] {
        sb.ofctl(&cmd);
        seen = drift_after(&mut drift, seen, Duration::from_secs(2))
            .await
            .unwrap_or_else(|| panic!("`ovs-ofctl {}` was not reported", cmd.join(" ")));
    }
    switch.barrier().await.expect("connection still usable");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_table_fails_the_bundle_at_commit_naming_the_first_flow_over_the_limit() {
    let sb = Sandbox::start();
    let (switch, _pi) = connect(&sb).await;
    sb.vsctl(&[
        "--",
        "--id=@t",
        "create",
        "Flow_Table",
        "flow_limit=3",
        "overflow_policy=refuse",
        "--",
        "set",
        "Bridge",
        "br-int",
        "flow_tables:5=@t",
    ]);
    let batch: Vec<FlowMod> = (0..5u32)
        .map(|i| {
            flow(
                if i == 0 { 6 } else { 5 },
                10,
                vec![Oxm::EthType(0x0800), Oxm::Ipv4Src(Masked::exact(ip4(0x0a00_0000 + i)))],
                vec![apply(vec![])],
            )
        })
        .collect();
    let before = sb.dump_flows();
    match switch.install(batch).await {
        Err(e @ SwitchError::BundleFailed { .. }) => {
            let SwitchError::BundleFailed { index, error, .. } = &e else { unreachable!() };
            assert_eq!(*index, 4, "flows #1-#3 fill table 5, #4 is one too many: {e}");
            assert_eq!(error.name, Some("OFPFMFC_TABLE_FULL"), "{e}");
        }
        other => panic!("expected BundleFailed, got {other:?}"),
    }
    assert_eq!(sb.dump_flows(), before, "tables unchanged");
}
