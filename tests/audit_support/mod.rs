//! Frame builders and a fake resolver shared by the audit tests.
#![allow(dead_code)]

use bytes::Bytes;
use npagent::audit::Moment;
use npagent::audit::{Direction, RuleMeta, RuleResolver};
use npagent::compiler::tables;
use npagent::compiler::userdata::{Disposition, LogUserdata};
use npagent::model::ObjectRef;
use ofp::packet_in2::PacketIn2;
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub fn obj(ns: &str, name: &str) -> ObjectRef {
    ObjectRef { namespace: ns.into(), name: name.into() }
}

pub fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// `secs.micros` after the epoch.
pub fn at(secs: u64, micros: u32) -> SystemTime {
    UNIX_EPOCH + Duration::new(secs, micros * 1_000)
}

/// 2023/07/04 12:31:02.801442 UTC, the time of the Allow example in tests/audit_format.rs.
pub fn t_allow() -> SystemTime {
    at(1_688_473_862, 801_442)
}

/// 2023/07/04 12:33:26.221413 UTC, the time of the Drop example in tests/audit_format.rs.
pub fn t_drop() -> SystemTime {
    at(1_688_474_006, 221_413)
}

/// The moment `wall` with a monotonic reading that advances with it (the clocks agree, as
/// they do unless someone steps the wall clock). `wall` must be after 2020.
pub fn clocks(wall: SystemTime) -> Moment {
    static BASE: OnceLock<Instant> = OnceLock::new();
    let since = wall.duration_since(at(1_577_836_800, 0)).expect("a time after 2020");
    Moment { wall, mono: *BASE.get_or_init(Instant::now) + since }
}

#[derive(Default)]
pub struct FakeResolver {
    pub rules: HashMap<u32, RuleMeta>,
    pub ports: HashMap<u32, ObjectRef>,
    pub ips: HashMap<IpAddr, ObjectRef>,
    /// (direction, ofport) -> the policies isolating that port, sorted.
    pub isolating: HashMap<(Direction, u32), Vec<ObjectRef>>,
    /// Staged conjunction id -> the staged rule.
    pub staged_rules: HashMap<u32, RuleMeta>,
    /// (direction, ofport, WouldDrop or WouldAllow) -> the staged policies named, sorted.
    pub staged_isolating: HashMap<(Direction, u32, Disposition), Vec<ObjectRef>>,
}

impl RuleResolver for FakeResolver {
    fn allow_rule(&self, conj_id: u32) -> Option<RuleMeta> {
        self.rules.get(&conj_id).cloned()
    }
    fn pod_by_ofport(&self, ofport: u32) -> Option<ObjectRef> {
        self.ports.get(&ofport).cloned()
    }
    fn pod_by_ip(&self, ip: IpAddr) -> Option<ObjectRef> {
        self.ips.get(&ip).cloned()
    }
    fn isolating_policies(&self, direction: Direction, ofport: u32) -> Vec<ObjectRef> {
        self.isolating.get(&(direction, ofport)).cloned().unwrap_or_default()
    }
    fn staged_rule(&self, conj_id: u32) -> Option<RuleMeta> {
        self.staged_rules.get(&conj_id).cloned()
    }
    fn staged_isolating(&self, direction: Direction, ofport: u32, disposition: Disposition) -> Vec<ObjectRef> {
        self.staged_isolating.get(&(direction, ofport, disposition)).cloned().unwrap_or_default()
    }
}

/// The cluster of the audit format examples: default/nettool at 10.10.1.7 on ofport 5, a client
/// pod default/client at 10.10.1.13, and policy default/allow-tcp-80 behind conjunction 17.
/// Staged: default/deny-all and default/web-only would isolate nettool's ingress, staged rule
/// 7 (`from-client` of default/allow-staged) would allow, and the staged edit of
/// default/allow-tcp-80 would end nettool's ingress isolation.
pub fn resolver() -> FakeResolver {
    let mut r = FakeResolver::default();
    r.rules.insert(
        17,
        RuleMeta {
            policy: obj("default", "allow-tcp-80"),
            rule_name: None,
            priority: 190,
            log_label: None,
            table: tables::INGRESS_RULE,
            cluster: None,
        },
    );
    r.rules.insert(
        18,
        RuleMeta {
            policy: obj("x", "named"),
            rule_name: Some("ingress-0".into()),
            priority: 190,
            log_label: Some("audit-me".into()),
            table: tables::INGRESS_RULE,
            cluster: None,
        },
    );
    r.ports.insert(5, obj("default", "nettool"));
    r.staged_rules.insert(
        7,
        RuleMeta {
            policy: obj("default", "allow-staged"),
            rule_name: Some("from-client".into()),
            priority: 190,
            log_label: None,
            table: tables::STAGED_INGRESS_RULE,
            cluster: None,
        },
    );
    r.staged_isolating.insert(
        (Direction::Ingress, 5, Disposition::WouldDrop),
        vec![obj("default", "deny-all"), obj("default", "web-only")],
    );
    r.staged_isolating.insert((Direction::Ingress, 5, Disposition::WouldAllow), vec![obj("default", "allow-tcp-80")]);
    r.isolating.insert((Direction::Ingress, 5), vec![obj("default", "allow-tcp-80"), obj("default", "deny-all")]);
    r.ips.insert(ip("10.10.1.7"), obj("default", "nettool"));
    r.ips.insert(ip("10.10.1.13"), obj("default", "client"));
    r.ips.insert(ip("fd00::7"), obj("default", "nettool"));
    r.ips.insert(ip("fd00::13"), obj("default", "client"));
    r
}

pub const TCP: u8 = 6;
pub const UDP: u8 = 17;
pub const ICMP: u8 = 1;
pub const IGMP: u8 = 2;
pub const ICMPV6: u8 = 58;
pub const SCTP: u8 = 132;

fn eth(ethertype: u16) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 0x07, 0x02, 0, 0, 0, 0, 0x13];
    f.extend_from_slice(&ethertype.to_be_bytes());
    f
}

/// A TCP SYN header (20 bytes, or 40 with options like Linux sends).
pub fn tcp(sport: u16, dport: u16, with_options: bool) -> Vec<u8> {
    let mut h = Vec::new();
    h.extend_from_slice(&sport.to_be_bytes());
    h.extend_from_slice(&dport.to_be_bytes());
    h.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0]);
    h.push(if with_options { 0xa0 } else { 0x50 });
    h.extend_from_slice(&[0x02, 0xfa, 0xf0, 0, 0, 0, 0]);
    if with_options {
        h.extend_from_slice(&[2, 4, 5, 0xb4, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0, 1, 3, 3, 7]);
    }
    h
}

pub fn udp(sport: u16, dport: u16, payload: usize) -> Vec<u8> {
    let mut h = Vec::new();
    h.extend_from_slice(&sport.to_be_bytes());
    h.extend_from_slice(&dport.to_be_bytes());
    h.extend_from_slice(&((8 + payload) as u16).to_be_bytes());
    h.extend_from_slice(&[0, 0]);
    h.extend(std::iter::repeat_n(0xab, payload));
    h
}

pub fn sctp(sport: u16, dport: u16) -> Vec<u8> {
    let mut h = Vec::new();
    h.extend_from_slice(&sport.to_be_bytes());
    h.extend_from_slice(&dport.to_be_bytes());
    h.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0]);
    // INIT chunk header.
    h.extend_from_slice(&[1, 0, 0, 20, 0, 0, 0, 1, 0, 0, 0x10, 0, 0, 10, 0, 10, 0, 0, 0, 1]);
    h
}

/// ICMP echo request with `payload` bytes (ping's default is 56: IP length 84).
pub fn icmp_echo(payload: usize) -> Vec<u8> {
    let mut h = vec![8, 0, 0, 0, 0, 1, 0, 1];
    h.extend(std::iter::repeat_n(0x5a, payload));
    h
}

/// IGMPv2 membership report.
pub fn igmp() -> Vec<u8> {
    vec![0x16, 0, 0, 0, 239, 1, 1, 1]
}

pub fn ipv4(src: &str, dst: &str, proto: u8, l4: &[u8]) -> Vec<u8> {
    let src: Ipv4Addr = src.parse().unwrap();
    let dst: Ipv4Addr = dst.parse().unwrap();
    let mut f = eth(0x0800);
    let total = (20 + l4.len()) as u16;
    f.extend_from_slice(&[0x45, 0]);
    f.extend_from_slice(&total.to_be_bytes());
    f.extend_from_slice(&[0x12, 0x34, 0x40, 0, 64, proto, 0, 0]);
    f.extend_from_slice(&src.octets());
    f.extend_from_slice(&dst.octets());
    f.extend_from_slice(l4);
    f
}

/// IPv6 with the given extension headers (each: next header byte is filled in) before `l4`.
pub fn ipv6(src: &str, dst: &str, proto: u8, ext: &[(u8, Vec<u8>)], l4: &[u8]) -> Vec<u8> {
    let src: Ipv6Addr = src.parse().unwrap();
    let dst: Ipv6Addr = dst.parse().unwrap();
    let mut f = eth(0x86dd);
    let payload: usize = ext.iter().map(|(_, e)| e.len()).sum::<usize>() + l4.len();
    f.extend_from_slice(&[0x60, 0, 0, 0]);
    f.extend_from_slice(&(payload as u16).to_be_bytes());
    f.push(ext.first().map_or(proto, |(t, _)| *t));
    f.push(64);
    f.extend_from_slice(&src.octets());
    f.extend_from_slice(&dst.octets());
    for (i, (_, e)) in ext.iter().enumerate() {
        let mut e = e.clone();
        e[0] = ext.get(i + 1).map_or(proto, |(t, _)| *t);
        f.extend_from_slice(&e);
    }
    f.extend_from_slice(l4);
    f
}

/// Adds one 802.1Q tag after the MAC addresses.
pub fn vlan(frame: &[u8], tpid: u16, vid: u16) -> Vec<u8> {
    let mut f = frame[..12].to_vec();
    f.extend_from_slice(&tpid.to_be_bytes());
    f.extend_from_slice(&vid.to_be_bytes());
    f.extend_from_slice(&frame[12..]);
    f
}

pub fn packet_in(frame: Vec<u8>, disposition: Disposition, table_id: u8, id: u32) -> PacketIn2 {
    // An Allow copy names its rule in reg6 (and here no pod by port: the model's owner of the
    // address is the applied-to); a drop's subject is the isolated pod's ofport.
    let (subject, metadata) = match disposition {
        Disposition::Allow => (0, vec![ofp::Oxm::XReg { index: 3, value: ofp::Masked::exact(u64::from(id) << 32) }]),
        Disposition::Drop => (id, Vec::new()),
        Disposition::WouldDrop | Disposition::WouldAllow => {
            panic!("a staged copy names its pod in a register: use staged_packet_in")
        }
        Disposition::Pass => panic!("a ClusterNetworkPolicy copy names its rule in a register: use cluster_packet_in"),
    };
    logging_copy(frame, LogUserdata { disposition, table_id, subject }, metadata)
}

/// A SYN from default/client (10.10.1.13:57050) to default/nettool port 80, allowed by conj 17.
pub fn allow_tcp_80() -> PacketIn2 {
    packet_in(ipv4("10.10.1.13", "10.10.1.7", TCP, &tcp(57050, 80, true)), Disposition::Allow, tables::INGRESS_RULE, 17)
}

/// A ping from default/client to the isolated default/nettool (ofport 5), default drop.
pub fn drop_icmp() -> PacketIn2 {
    packet_in(ipv4("10.10.1.13", "10.10.1.7", ICMP, &icmp_echo(56)), Disposition::Drop, tables::INGRESS_DEFAULT_RULE, 5)
}

/// Registers as OVS reports them in an NXT_PACKET_IN2's metadata over OpenFlow 1.5
/// (`nx_put_raw`): the nonzero ones only, as packet registers, two to an `xreg` (`reg<2k>` in
/// the high 32 bits of `xreg<k>`, `reg<2k+1>` in the low ones), exact when both halves are
/// set, else masked to the half that is.
pub fn ovs_registers(regs: &[(u8, u32)]) -> Vec<ofp::Oxm> {
    let mut xregs: std::collections::BTreeMap<u8, (u64, u64)> = Default::default();
    for &(n, value) in regs.iter().filter(|(_, v)| *v != 0) {
        let shift = if n % 2 == 0 { 32 } else { 0 };
        let (v, mask) = xregs.entry(n / 2).or_default();
        *v |= u64::from(value) << shift;
        *mask |= u64::from(u32::MAX) << shift;
    }
    xregs
        .into_iter()
        .map(|(index, (value, mask))| ofp::Oxm::XReg {
            index,
            value: if mask == u64::MAX { ofp::Masked::exact(value) } else { ofp::Masked::masked(value, mask) },
        })
        .collect()
}

/// The registers of a staged verdict's copy of `direction` for the pod on ofport `pod`, as the
/// staged flows leave them when the copy is made: the pod in `reg2` (egress) or `reg4`
/// (ingress), the staged verdict in `reg8`/`reg10` (1 drop, 2 allow), a `WouldAllow`'s staged
/// rule in `reg9`/`reg11` (0: the staged view does not isolate the pod), and `reg3` = from a
/// pod's port.
pub fn staged_registers(disposition: Disposition, direction: Direction, pod: u32, rule: u32) -> Vec<(u8, u32)> {
    let (pod_reg, verdict_reg) = match direction {
        Direction::Egress => (2, 8),
        Direction::Ingress => (4, 10),
    };
    let verdict = match disposition {
        Disposition::WouldDrop => 1,
        Disposition::WouldAllow => 2,
        Disposition::Allow | Disposition::Drop | Disposition::Pass => panic!("not a staged verdict: use packet_in"),
    };
    let rule = if disposition == Disposition::WouldAllow { rule } else { 0 };
    vec![(3, 1), (pod_reg, pod), (verdict_reg, verdict), (verdict_reg + 1, rule)]
}

/// A staged verdict's copy of `frame` as the staged flows send it: a `WouldDrop` from the
/// direction's staged default table with subject 0, a `WouldAllow` from its staged rule table
/// with the pod as subject, and the registers of [`staged_registers`].
pub fn staged_packet_in(
    frame: Vec<u8>,
    disposition: Disposition,
    direction: Direction,
    pod: u32,
    rule: u32,
) -> PacketIn2 {
    staged_packet_in_with(frame, disposition, direction, staged_registers(disposition, direction, pod, rule))
}

/// [`staged_packet_in`] with the registers `regs` (see [`staged_registers`]).
pub fn staged_packet_in_with(
    frame: Vec<u8>,
    disposition: Disposition,
    direction: Direction,
    regs: Vec<(u8, u32)>,
) -> PacketIn2 {
    let (table_id, subject) = match (disposition, direction) {
        (Disposition::WouldDrop, Direction::Egress) => (tables::STAGED_EGRESS_DEFAULT_RULE, 0),
        (Disposition::WouldDrop, Direction::Ingress) => (tables::STAGED_INGRESS_DEFAULT_RULE, 0),
        (Disposition::WouldAllow, d) => {
            let pod_reg = if d == Direction::Egress { 2 } else { 4 };
            let pod = regs.iter().find(|(n, _)| *n == pod_reg).map_or(0, |(_, v)| *v);
            let table = if d == Direction::Egress { tables::STAGED_EGRESS_RULE } else { tables::STAGED_INGRESS_RULE };
            (table, pod)
        }
        (Disposition::Allow | Disposition::Drop | Disposition::Pass, _) => {
            panic!("not a staged verdict: use packet_in")
        }
    };
    logging_copy(frame, LogUserdata { disposition, table_id, subject }, ovs_registers(&regs))
}

/// The packet-in of a logging flow's copy of `frame` (an action=controller copy, reason 1),
/// its userdata `ud` and the registers `metadata`.
/// A ClusterNetworkPolicy rule's copy of `frame` as LogCopy makes it: disposition `d` (Allow,
/// Drop or Pass), the direction's Admin table in the userdata (the rule says its tier), the
/// registers `regs` (the rule in `reg6`, the judged pod in `reg2`/`reg4`, a Pass rule in
/// `reg12`/`reg13`).
pub fn cluster_packet_in(frame: Vec<u8>, d: Disposition, direction: Direction, regs: &[(u8, u32)]) -> PacketIn2 {
    let table_id = direction.tier_table(npagent::model::cluster_policy::Tier::Admin);
    logging_copy(frame, LogUserdata { disposition: d, table_id, subject: 0 }, ovs_registers(regs))
}

fn logging_copy(frame: Vec<u8>, ud: LogUserdata, metadata: Vec<ofp::Oxm>) -> PacketIn2 {
    PacketIn2 {
        packet: Bytes::from(frame),
        table_id: Some(ud.table_id),
        reason: Some(1),
        userdata: Some(Bytes::copy_from_slice(&ud.encode())),
        metadata,
        ..Default::default()
    }
}

/// A SYN from default/client (10.10.1.13:57050) to default/nettool (ofport 5) port 80 that the
/// staged view would drop (`WouldDrop`, ingress).
pub fn would_drop_tcp_80() -> PacketIn2 {
    staged_packet_in(
        ipv4("10.10.1.13", "10.10.1.7", TCP, &tcp(57050, 80, true)),
        Disposition::WouldDrop,
        Direction::Ingress,
        5,
        0,
    )
}

/// The same SYN, dropped today, that staged rule 7 would allow (`WouldAllow`, ingress).
pub fn would_allow_tcp_80() -> PacketIn2 {
    staged_packet_in(
        ipv4("10.10.1.13", "10.10.1.7", TCP, &tcp(57050, 80, true)),
        Disposition::WouldAllow,
        Direction::Ingress,
        5,
        7,
    )
}
