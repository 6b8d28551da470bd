//! Against a real ovs-vswitchd (userspace, dummy datapath, its own network namespace and run
//! directory, stopped by pid): FLOW_MODs of npagent's pipeline encoded by this crate are
//! installed over `br-int.mgmt`, dumped back with our OF1.5 flow stats request, parsed, and
//! printed by `ofp::text::format_flow`; the lines must equal
//! `ovs-ofctl -O OpenFlow15 dump-flows --no-stats --names br-int`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

mod common;

use bytes::{BufMut, BytesMut};
use common::flow_mod as flow;
use ofp::action::{Action, Controller2, Ct, CtZoneSrc};
use ofp::flow_mod::FlowMod;
use ofp::instruction::Instruction;
use ofp::multipart::{
    FlowStats, FlowStatsRequest, MultipartReply, MultipartReplyBody, MultipartRequest, MultipartRequestBody,
    MULTIPART_MORE,
};
use ofp::oxm::headers::*;
use ofp::oxm::{Masked, Oxm};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// A private Open vSwitch from the repository's `scripts/ovs-sandbox` (ovsdb-server and
/// ovs-vswitchd in a network namespace and run directory of their own), its br-int with ports p1
/// and gw0 and npagent's table names; stopped on drop.
struct Sandbox {
    dir: PathBuf,
}

fn run(cmd: &mut Command) -> String {
    let o = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(o.status.success(), "{cmd:?}: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

/// `scripts/ovs-sandbox VERB DIR`.
fn ovs_sandbox(verb: &str, dir: &Path) -> Command {
    let mut cmd = Command::new("bash");
    cmd.arg(concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/ovs-sandbox")).arg(verb).arg(dir);
    cmd
}

impl Sandbox {
    fn start() -> Sandbox {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        let sb =
            Sandbox { dir: std::env::temp_dir().join(format!("npproto{}x{}", std::process::id(), nanos % 100_000)) };
        run(&mut ovs_sandbox("up", &sb.dir));
        let mut vsctl = Command::new("ovs-vsctl");
        vsctl.arg(format!("--db=unix:{}", sb.dir.join("db.sock").display()));
        for (ofport, name) in [(1, "p1"), (2, "gw0")] {
            vsctl.args(["--", "add-port", "br-int", name, "--", "set", "interface", name, "type=internal"]);
            vsctl.arg(format!("ofport_request={ofport}"));
        }
        for (i, name) in TABLES.iter().enumerate() {
            vsctl.args(["--", &format!("--id=@t{i}"), "create", "Flow_Table", &format!("name={name}")]);
            vsctl.args(["--", "set", "bridge", "br-int", &format!("flow_tables:{i}=@t{i}")]);
        }
        run(&mut vsctl);
        sb
    }

    fn mgmt(&self) -> PathBuf {
        self.dir.join("br-int.mgmt")
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = ovs_sandbox("down", &self.dir).status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

const TABLES: [&str; 7] = [
    "Classifier",
    "ConntrackState",
    "L2ForwardingCalc",
    "IngressRule",
    "IngressDefaultRule",
    "ConntrackCommit",
    "Output",
];

fn table_name(t: u8) -> Option<String> {
    TABLES.get(usize::from(t)).map(|s| s.to_string())
}

fn send(s: &mut UnixStream, msg_type: u8, xid: u32, body: &[u8]) {
    let mut out = BytesMut::new();
    out.put_u8(6);
    out.put_u8(msg_type);
    out.put_u16((8 + body.len()) as u16);
    out.put_u32(xid);
    out.put_slice(body);
    s.write_all(&out).unwrap();
}

/// Reads one message: (type, xid, body).
fn recv(s: &mut UnixStream) -> (u8, u32, Vec<u8>) {
    let mut h = [0u8; 8];
    s.read_exact(&mut h).unwrap();
    let len = usize::from(u16::from_be_bytes([h[2], h[3]]));
    let mut body = vec![0u8; len - 8];
    s.read_exact(&mut body).unwrap();
    (h[1], u32::from_be_bytes([h[4], h[5], h[6], h[7]]), body)
}

fn port_name(p: u32) -> Option<String> {
    match p {
        1 => Some("p1".into()),
        2 => Some("gw0".into()),
        _ => None,
    }
}

fn ip() -> Oxm {
    Oxm::EthType(0x0800)
}

fn apply(a: Vec<Action>) -> Instruction {
    Instruction::ApplyActions(a)
}

/// npagent's pipeline (docs/pipeline.md), plus a few header variants.
fn pipeline() -> Vec<FlowMod> {
    use Oxm::*;
    let conj = |id, clause, n| Action::Conjunction { id, clause, n_clauses: n };
    let reg1 = |v| Reg { index: 1, value: Masked::exact(v) };
    let ct = |flags, table, actions| Action::Ct(Ct { flags, zone: CtZoneSrc::Imm(65520), table, alg: 0, actions });
    vec![
        flow(0, 200, vec![EthType(0x0806)], vec![apply(vec![Action::Output { port: ofp::port::NORMAL, max_len: 0 }])]),
        flow(0, 100, vec![ip()], vec![apply(vec![ct(0, Some(1), vec![])])]),
        flow(0, 0, vec![], vec![apply(vec![Action::Output { port: ofp::port::NORMAL, max_len: 0 }])]),
        flow(1, 200, vec![CtState(Masked::masked(0x30, 0x30)), ip()], vec![]),
        flow(1, 0, vec![], vec![Instruction::GotoTable(2)]),
        flow(
            2,
            200,
            vec![EthDst(Masked::exact([0x50, 0x54, 0, 0, 0, 5]))],
            vec![apply(vec![Action::SetField(reg1(5))]), Instruction::GotoTable(3)],
        ),
        flow(2, 0, vec![], vec![Instruction::GotoTable(3)]),
        flow(3, 210, vec![CtState(Masked::masked(0x02, 0x03)), ip()], vec![Instruction::GotoTable(5)]),
        flow(
            3,
            200,
            vec![ip(), Ipv4Src(Masked::exact("10.0.0.1".parse().unwrap()))],
            vec![apply(vec![conj(7, 0, 3), conj(9, 0, 2)])],
        ),
        flow(
            3,
            200,
            vec![ip(), Ipv4Src(Masked::masked("10.1.0.0".parse().unwrap(), "255.255.0.0".parse().unwrap()))],
            vec![apply(vec![conj(7, 0, 3)])],
        ),
        flow(3, 200, vec![reg1(5)], vec![apply(vec![conj(7, 1, 3), conj(9, 1, 2)])]),
        flow(3, 200, vec![ip(), IpProto(6), TcpDst(Masked::exact(80))], vec![apply(vec![conj(7, 2, 3)])]),
        flow(3, 200, vec![ip(), IpProto(6), TcpDst(Masked::masked(0x1000, 0xf000))], vec![apply(vec![conj(7, 2, 3)])]),
        flow(
            3,
            200,
            vec![
                EthType(0x86dd),
                IpProto(17),
                Ipv6Src(Masked::masked("fd00::".parse().unwrap(), "ffff:ffff::".parse().unwrap())),
                UdpDst(Masked::exact(53)),
            ],
            vec![apply(vec![conj(11, 0, 2)])],
        ),
        FlowMod {
            cookie: 0x1_0000_0007,
            ..flow(
                3,
                190,
                vec![ConjId(7), ip()],
                vec![
                    apply(vec![Action::Controller2(Controller2 {
                        userdata: Some(vec![1, 1, 0, 3, 0, 0, 0, 7].into()),
                        meter_id: Some(1),
                        ..Default::default()
                    })]),
                    Instruction::GotoTable(5),
                ],
            )
        },
        flow(3, 190, vec![ConjId(9), ip()], vec![Instruction::GotoTable(5)]),
        flow(4, 200, vec![reg1(5)], vec![]),
        FlowMod {
            cookie: 0x42,
            flags: 1,
            importance: 4,
            idle_timeout: 3600,
            hard_timeout: 7200,
            ..flow(
                4,
                200,
                vec![reg1(6)],
                vec![apply(vec![Action::Controller2(Controller2 {
                    userdata: Some(vec![2, 0, 0, 0, 0, 0, 0, 0].into()),
                    pause: true,
                    ..Default::default()
                })])],
            )
        },
        flow(
            5,
            200,
            vec![CtState(Masked::masked(0x21, 0x21)), ip()],
            vec![apply(vec![ct(1, None, vec![])]), Instruction::GotoTable(6)],
        ),
        flow(5, 0, vec![], vec![Instruction::GotoTable(6)]),
        flow(
            6,
            200,
            vec![Reg { index: 1, value: Masked::masked(0, 0xffff_0000) }],
            vec![apply(vec![Action::OutputReg { src: 0x0001_0204, ofs_nbits: 0x1f, max_len: 0xffff }])],
        ),
        flow(6, 0, vec![], vec![apply(vec![Action::Output { port: ofp::port::NORMAL, max_len: 0 }])]),
        // An ARP responder for 10.0.0.254 (OF1.5's `move` is OFPAT_COPY_FIELD), answering on the
        // port the request came in on.
        flow(
            0,
            300,
            vec![EthType(0x0806), ArpOp(1), ArpTpa(Masked::exact("10.0.0.254".parse().unwrap()))],
            vec![apply(common::arp_responder([0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff], "10.0.0.254".parse().unwrap()))],
        ),
        // VLAN matches: untagged only, one VID, any tag.
        flow(0, 150, vec![InPort(2), VlanVid(Masked::exact(0))], vec![Instruction::GotoTable(1)]),
        flow(0, 140, vec![VlanVid(Masked::exact(0x1005))], vec![]),
        flow(0, 130, vec![VlanVid(Masked::masked(0x1000, 0x1000))], vec![]),
        // The conntrack original-direction tuple (a valid ct_state first on the wire), with
        // tcp/udp/sctp and registers, and read into a register with `move`.
        flow(
            3,
            220,
            vec![
                CtState(Masked::masked(0x22, 0x22)),
                ip(),
                IpProto(6),
                CtNwSrc(Masked::exact("10.0.0.1".parse().unwrap())),
                CtNwProto(6),
                CtTpDst(Masked::exact(80)),
                reg1(5),
            ],
            vec![Instruction::GotoTable(5)],
        ),
        flow(
            3,
            220,
            vec![
                ip(),
                IpProto(17),
                CtState(Masked::masked(0x20, 0x30)),
                CtNwSrc(Masked::masked("10.0.0.0".parse().unwrap(), "255.255.255.0".parse().unwrap())),
                CtNwDst(Masked::masked("10.0.2.0".parse().unwrap(), "255.0.255.0".parse().unwrap())),
                CtNwProto(17),
                CtTpSrc(Masked::exact(1234)),
                CtTpDst(Masked::masked(0x50, 0xfff0)),
                UdpDst(Masked::exact(53)),
            ],
            vec![],
        ),
        flow(
            3,
            220,
            vec![
                CtState(Masked::masked(0x28, 0x28)),
                ip(),
                IpProto(132),
                CtNwProto(132),
                CtTpDst(Masked::exact(5000)),
                SctpDst(Masked::exact(5000)),
            ],
            vec![],
        ),
        flow(
            3,
            220,
            vec![
                EthType(0x86dd),
                CtState(Masked::masked(0x21, 0x21)),
                CtIpv6Src(Masked::masked("fd00::".parse().unwrap(), "ffff:ffff:ffff:ffff::".parse().unwrap())),
                CtIpv6Dst(Masked::exact("fd00::1".parse().unwrap())),
                CtNwProto(58),
            ],
            vec![],
        ),
        flow(
            5,
            100,
            vec![ip(), CtState(Masked::masked(0x22, 0x22))],
            vec![apply(vec![Action::copy_field(NXM_NX_CT_NW_DST, 0x0001_0004, 32)]), Instruction::GotoTable(6)],
        ),
        // ip_frag: later fragments of a tracked UDP connection, first fragments with ports.
        flow(
            1,
            150,
            vec![
                CtState(Masked::masked(0x20, 0x30)),
                CtNwProto(17),
                ip(),
                Reg { index: 2, value: Masked::exact(1) },
                IpFrag(Masked::exact(3)),
            ],
            vec![],
        ),
        flow(
            1,
            140,
            vec![ip(), IpProto(17), IpFrag(Masked::exact(1)), UdpDst(Masked::exact(53))],
            vec![apply(vec![Action::copy_field(NXM_NX_IP_FRAG, 0x0001_0004, 2)]), Instruction::GotoTable(2)],
        ),
        // Ports by name, every flow flag.
        FlowMod {
            flags: 0x1f,
            ..flow(
                6,
                50,
                vec![InPort(1), ip()],
                vec![apply(vec![
                    Action::Output { port: 2, max_len: 0 },
                    Action::ResubmitTable { in_port: 1, table: 6, ct: false },
                ])],
            )
        },
    ]
}

fn ovs_ofctl_dump(mgmt: &Path) -> Vec<String> {
    let out = run(Command::new("ovs-ofctl")
        .args(["-O", "OpenFlow15", "dump-flows", "--no-stats", "--names"])
        .arg(format!("unix:{}", mgmt.display())));
    out.lines().map(str::to_string).collect()
}

/// The sandbox's table and port names.
fn names() -> ofp::text::Names<'static> {
    ofp::text::Names { tables: &table_name, ports: &port_name }
}

/// The dumped flows as `ofp::text` prints them, and the lines of `ovs-ofctl dump-flows
/// --no-stats --names`; each sorted.
fn ours_and_theirs(sb: &Sandbox, dumped: &[FlowStats]) -> (Vec<String>, Vec<String>) {
    let mut ours: Vec<String> = dumped.iter().map(|f| ofp::text::format_flow_with(&names(), f, false)).collect();
    let mut theirs = ovs_ofctl_dump(&sb.mgmt());
    ours.sort();
    theirs.sort();
    (ours, theirs)
}

/// Connects to the bridge's management socket and says hello (OF1.5).
fn connect(sb: &Sandbox) -> UnixStream {
    let mut s = UnixStream::connect(sb.mgmt()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    send(&mut s, 0, 1, &[0, 1, 0, 8, 0, 0, 0, 0x40]);
    let (t, _, _) = recv(&mut s);
    assert_eq!(t, 0, "hello");
    s
}

/// Sends the FLOW_MODs and a barrier; the switch must refuse none.
fn install(s: &mut UnixStream, flows: &[FlowMod]) {
    for (i, fm) in flows.iter().enumerate() {
        let mut body = BytesMut::new();
        fm.emit(&mut body);
        assert_eq!(body.len(), fm.buffer_len());
        send(s, 14, 100 + i as u32, &body);
    }
    send(s, 20, 999, &[]);
    loop {
        let (t, xid, body) = recv(s);
        assert_ne!(t, 1, "switch error for xid {xid}: {}", hex::encode(&body));
        if t == 21 {
            break;
        }
    }
}

/// Every flow, through our OF1.5 flow stats request and parser (each reply re-emitted
/// byte-identical).
fn dump(s: &mut UnixStream) -> Vec<FlowStats> {
    let req = MultipartRequest { flags: 0, body: MultipartRequestBody::Flow(FlowStatsRequest::default()) };
    let mut body = BytesMut::new();
    req.emit(&mut body);
    send(s, 18, 1000, &body);
    let mut dumped = Vec::new();
    loop {
        let (t, xid, body) = recv(s);
        if t != 19 || xid != 1000 {
            assert_ne!(t, 1, "error: {}", hex::encode(&body));
            continue;
        }
        let reply = MultipartReply::parse(&body).unwrap_or_else(|e| panic!("{e}: {}", hex::encode(&body)));
        let mut again = BytesMut::new();
        reply.emit(&mut again);
        assert_eq!(hex::encode(&again), hex::encode(&body), "OVS's reply re-emits byte-identical");
        let MultipartReplyBody::Flow(f) = reply.body else { panic!("{reply:?}") };
        dumped.extend(f);
        if reply.flags & MULTIPART_MORE == 0 {
            break;
        }
    }
    dumped
}

#[test]
fn dump_flows_text_matches_ovs_ofctl() {
    let sb = Sandbox::start();
    let mut s = connect(&sb);
    // METER_MOD add meter 1, pktps, one drop band of 100 pps (bytes of the wire inventory's
    // vector live_tx_meter_mod_pktps_drop; METER_MOD itself is encoded elsewhere).
    send(&mut s, 29, 2, &hex::decode("0000000a000000010001001000000064000000000000000000000000").unwrap()[..24]);

    let flows = pipeline();
    install(&mut s, &flows);
    let dumped = dump(&mut s);
    assert_eq!(dumped.len(), flows.len());

    // Same flows, same text, per line: from the dump, and from the flow_mods we sent.
    let (ours, theirs) = ours_and_theirs(&sb, &dumped);
    let mut desired: Vec<String> = flows.iter().map(|f| ofp::text::format_desired_flow(&names(), f)).collect();
    desired.sort();
    assert_eq!(desired, theirs, "format_desired_flow of what we sent vs ovs-ofctl");
    // The meter the controller2 action uses: meter stats through our request and parser.
    let req = MultipartRequest { flags: 0, body: MultipartRequestBody::MeterStats { meter_id: 0xffff_ffff } };
    let mut body = BytesMut::new();
    req.emit(&mut body);
    send(&mut s, 18, 2000, &body);
    let (t, xid, body) = recv(&mut s);
    assert_eq!((t, xid), (19, 2000), "{}", hex::encode(&body));
    let reply = MultipartReply::parse(&body).unwrap();
    let mut again = BytesMut::new();
    reply.emit(&mut again);
    assert_eq!(&again[..], &body[..]);
    let MultipartReplyBody::MeterStats(m) = &reply.body else { panic!("{reply:?}") };
    assert_eq!(m.len(), 1);
    // flow_count stays 0: a controller2 meter_id is not a meter action.
    assert_eq!((m[0].meter_id, m[0].bands.len()), (1, 1), "{m:?}");
    // Without a port map, format_flow prints port numbers; table names still apply.
    assert!(dumped
        .iter()
        .any(|f| ofp::text::format_flow(&table_name, f).contains(",in_port=1 actions=output:2,resubmit(1,Output)")));
    let mut count: BTreeMap<&str, i32> = BTreeMap::new();
    for l in &ours {
        *count.entry(l).or_default() += 1;
    }
    for l in &theirs {
        *count.entry(l).or_default() -= 1;
    }
    let diff: Vec<String> = count.iter().filter(|(_, &n)| n != 0).map(|(l, n)| format!("{n:+} {l}")).collect();
    assert!(
        diff.is_empty(),
        "ours (+) vs ovs-ofctl (-):\n{}\n\nours:\n{}\n\ntheirs:\n{}",
        diff.join("\n"),
        ours.join("\n"),
        theirs.join("\n")
    );
    eprintln!("ovs-ofctl dump-flows --no-stats --names:\n{}", theirs.join("\n"));
    // A spot check of the documented form.
    assert!(
        theirs.iter().any(|l| l
            == " table=IngressRule, priority=200,ip,nw_src=10.0.0.1 actions=conjunction(7,1/3),conjunction(9,1/2)"),
        "{theirs:#?}"
    );
    assert!(
        theirs.iter().any(|l| l
            == " table=ConntrackState, priority=150,ct_state=-inv+trk,ct_nw_proto=17,ip,reg2=0x1,nw_frag=later actions=drop"),
        "{theirs:#?}"
    );
}

/// OVS 3.1 accepts ct_tp_src/ct_tp_dst without a ct_nw_proto (or with ct_nw_proto=0) and
/// matches on them, but sends neither back in a flow dump (nor ct_nw_proto=0) and
/// ovs-ofctl prints none of them: such a flow dumps like one without them.
#[test]
fn ct_ports_without_ct_nw_proto_are_kept_but_not_dumped() {
    use Oxm::*;
    let sb = Sandbox::start();
    let mut s = connect(&sb);
    let est = || CtState(Masked::masked(0x22, 0x22));
    let flows = vec![
        flow(0, 100, vec![est(), ip()], vec![]),
        flow(0, 100, vec![est(), ip(), CtTpDst(Masked::exact(80))], vec![]),
        flow(0, 90, vec![est(), CtNwProto(0), CtTpSrc(Masked::exact(1)), CtTpDst(Masked::exact(80))], vec![]),
    ];
    install(&mut s, &flows);
    let dumped = dump(&mut s);
    // Two flows at priority 100: the switch told their matches apart.
    assert_eq!(dumped.len(), 3, "{dumped:#?}");
    // OVS puts OXM_OF_PACKET_TYPE (Ethernet) first in a match none of whose sent fields
    // implies Ethernet (here the hidden ct_nw_proto did).
    let packet_type_eth = Unknown { header: 0x8000_5804, payload: vec![0; 4].into() };
    for f in &dumped {
        let want = if f.priority == 100 { vec![ip(), est()] } else { vec![packet_type_eth.clone(), est()] };
        assert_eq!(f.match_.fields, want, "{f:?}");
    }
    let (ours, theirs) = ours_and_theirs(&sb, &dumped);
    assert_eq!(ours, theirs);
    assert_eq!(
        theirs,
        [
            " table=Classifier, priority=100,ct_state=+est+trk,ip actions=drop",
            " table=Classifier, priority=100,ct_state=+est+trk,ip actions=drop",
            " table=Classifier, priority=90,ct_state=+est+trk actions=drop",
        ]
    );
    // What was sent prints as OVS prints the FLOW_MOD: ct_nw_proto=0 and the ports with it,
    // ports without a ct_nw_proto not at all; so the last flow's text differs from its dump.
    let sent: Vec<String> = flows.iter().map(|f| ofp::text::format_desired_flow(&names(), f)).collect();
    assert_eq!(sent[1], theirs[0]);
    assert_eq!(
        sent[2],
        " table=Classifier, priority=90,ct_state=+est+trk,ct_nw_proto=0,ct_tp_src=1,ct_tp_dst=80 actions=drop"
    );
}

/// Every ip_frag value/mask OVS 3.1 accepts, one flow each: what the switch sends back (the low
/// two bits; a mask of 0x03 as no mask) and the word ovs-ofctl prints, which ours must equal.
#[test]
fn ip_frag_dumps_as_ovs_ofctl_prints_it() {
    use Oxm::*;
    let sb = Sandbox::start();
    let mut s = connect(&sb);
    /// What we send, what the switch sends back (`None`: no ip_frag), what ovs-ofctl prints.
    type Case = (Masked<u8>, Option<Masked<u8>>, &'static str);
    let cases: [Case; 17] = [
        (Masked::exact(0), Some(Masked::exact(0)), ",nw_frag=no"),
        (Masked::exact(1), Some(Masked::exact(1)), ",nw_frag=first"),
        (Masked::exact(2), Some(Masked::exact(2)), ",nw_frag=<error>"),
        (Masked::exact(3), Some(Masked::exact(3)), ",nw_frag=later"),
        (Masked::masked(0, 3), Some(Masked::exact(0)), ",nw_frag=no"),
        (Masked::masked(1, 3), Some(Masked::exact(1)), ",nw_frag=first"),
        (Masked::masked(2, 3), Some(Masked::exact(2)), ",nw_frag=<error>"),
        (Masked::masked(3, 3), Some(Masked::exact(3)), ",nw_frag=later"),
        (Masked::masked(0, 1), Some(Masked::masked(0, 1)), ",nw_frag=no"),
        (Masked::masked(1, 1), Some(Masked::masked(1, 1)), ",nw_frag=yes"),
        (Masked::masked(0, 2), Some(Masked::masked(0, 2)), ",nw_frag=not_later"),
        (Masked::masked(2, 2), Some(Masked::masked(2, 2)), ",nw_frag=later"),
        (Masked::masked(0, 0), None, ""),
        (Masked::masked(1, 5), Some(Masked::masked(1, 1)), ",nw_frag=yes"),
        (Masked::masked(3, 0xff), Some(Masked::exact(3)), ",nw_frag=later"),
        (Masked::masked(2, 0xfe), Some(Masked::masked(2, 2)), ",nw_frag=later"),
        (Masked::masked(0, 0xfc), None, ""),
    ];
    let prio = |i: usize| 100 + i as u16;
    let flows: Vec<FlowMod> =
        cases.iter().enumerate().map(|(i, (v, ..))| flow(1, prio(i), vec![ip(), IpFrag(*v)], vec![])).collect();
    install(&mut s, &flows);
    let dumped = dump(&mut s);
    assert_eq!(dumped.len(), cases.len(), "{dumped:#?}");
    for (i, (sent, back, _)) in cases.iter().enumerate() {
        let f = dumped.iter().find(|f| f.priority == prio(i)).unwrap();
        let want: Vec<Oxm> = [Some(ip()), back.map(IpFrag)].into_iter().flatten().collect();
        assert_eq!(f.match_.fields, want, "{sent:?}");
    }
    let (ours, theirs) = ours_and_theirs(&sb, &dumped);
    assert_eq!(ours, theirs);
    let mut want: Vec<String> = cases
        .iter()
        .enumerate()
        .map(|(i, (.., word))| format!(" table=ConntrackState, priority={},ip{word} actions=drop", prio(i)))
        .collect();
    want.sort();
    assert_eq!(theirs, want);
    // What we sent prints as its dump does.
    let mut sent: Vec<String> = flows.iter().map(|f| ofp::text::format_desired_flow(&names(), f)).collect();
    sent.sort();
    assert_eq!(sent, theirs);
}

/// OVS 3.1 refuses a TCP/UDP/SCTP port after a match on later fragments, but accepts one before
/// it on the wire; it then dumps ip_frag before the port, which ovs-ofctl cannot read back
/// (`OFPST_FLOW reply bad match`, OFPBMC_BAD_PREREQ). We read and print it.
#[test]
fn ports_before_later_fragments_dump_in_an_order_ovs_ofctl_refuses() {
    use Oxm::*;
    let sb = Sandbox::start();
    let mut s = connect(&sb);
    let flows = vec![flow(0, 100, vec![ip(), IpProto(6), TcpDst(Masked::exact(80)), IpFrag(Masked::exact(3))], vec![])];
    install(&mut s, &flows);
    let dumped = dump(&mut s);
    assert_eq!(dumped.len(), 1);
    assert_eq!(
        dumped[0].match_.fields,
        vec![ip(), IpFrag(Masked::exact(3)), IpProto(6), TcpDst(Masked::exact(80))],
        "{dumped:?}"
    );
    assert_eq!(
        ofp::text::format_flow_with(&names(), &dumped[0], false),
        " table=Classifier, priority=100,tcp,nw_frag=later,tp_dst=80 actions=drop"
    );
    let o = Command::new("ovs-ofctl")
        .args(["-O", "OpenFlow15", "dump-flows", "--no-stats", "--names"])
        .arg(format!("unix:{}", sb.mgmt().display()))
        .output()
        .unwrap();
    assert!(!o.status.success(), "{o:?}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("OFPST_FLOW reply bad match"), "{o:?}");
}
