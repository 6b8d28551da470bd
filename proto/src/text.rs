//! Text in the syntax Open vSwitch 3.1 prints: `ovs-ofctl -O OpenFlow15 dump-flows --no-stats
//! --names` lines and the flow_mod body of `ovs-ofctl ofp-print`.
//!
//! Matches print in OVS's fixed field order (not wire order), with its shorthands (`ip`, `tcp`,
//! `udp6`...) and value normalisation (value bits outside the mask cleared, registers from
//! OF1.5 xregs split into `regN`). Actions print as OVS formats them; instructions in OVS's
//! canonical order (apply_actions, clear_actions, write_actions, write_metadata, goto_table).
//! Fields and actions this crate does not model fall back to a raw form OVS would not print.

use crate::action::{Action, Controller2, Ct, CtZoneSrc};
use crate::flow_mod::{FlowMod, FlowModCommand};
use crate::instruction::Instruction;
use crate::multipart::FlowStats;
use crate::oxm::{class, split_header, Match, Oxm};
use std::fmt::Write;
use std::net::{Ipv4Addr, Ipv6Addr};

/// A table-name lookup: `Some(name)` prints the name instead of the number.
pub type TableNames<'a> = &'a dyn Fn(u8) -> Option<String>;

/// The lookups `--names` uses: table names, and port names by OF1.1+ (32-bit) port number.
#[derive(Clone, Copy)]
pub struct Names<'a> {
    pub tables: &'a dyn Fn(u8) -> Option<String>,
    pub ports: &'a dyn Fn(u32) -> Option<String>,
}

impl<'a> Names<'a> {
    /// Table names only; ports print as numbers.
    pub fn tables(tables: TableNames<'a>) -> Self {
        Names {
            tables,
            ports: &no_ports,
        }
    }
}

fn no_names(_: u8) -> Option<String> {
    None
}

fn no_ports(_: u32) -> Option<String> {
    None
}

/// No names: numbers everywhere (`--no-names`).
pub const NO_NAMES: Names<'static> = Names {
    tables: &no_names,
    ports: &no_ports,
};

/// OVS's default flow priority, omitted when printing.
pub const DEFAULT_PRIORITY: u16 = 0x8000;

/// Flow flags OVS 3.1 keeps and reports in flow dumps (all five OFPFF_* flags, check_overlap
/// included: verified on a live switch).
pub const DUMPED_FLAGS: u16 = 0x1f;

/// Formats a match as OVS does (without `priority=`), e.g. `ip,reg1=0x3,nw_src=10.0.0.0/24`.
pub fn format_match(m: &Match) -> String {
    format_match_with(m, None, &NO_NAMES)
}

/// Formats a match preceded by `priority=N` when it is not the default 32768.
pub fn format_match_priority(m: &Match, priority: u16) -> String {
    format_match_with(m, Some(priority), &NO_NAMES)
}

/// Formats a match, with `priority=` first when given and not the default, ports named.
pub fn format_match_with(m: &Match, priority: Option<u16>, names: &Names<'_>) -> String {
    let mut s = String::new();
    write_match(&mut s, m, priority, names);
    s
}

/// Formats an action list (`drop` when empty) with table numbers.
pub fn format_actions(a: &[Action]) -> String {
    format_actions_names(a, &NO_NAMES)
}

/// Formats an action list, naming tables through `tables`.
pub fn format_actions_with(a: &[Action], tables: TableNames<'_>) -> String {
    format_actions_names(a, &Names::tables(tables))
}

/// Formats an action list with table and port names.
pub fn format_actions_names(a: &[Action], names: &Names<'_>) -> String {
    let mut s = String::new();
    write_action_list(&mut s, a, names);
    s
}

/// Formats instructions as OVS's `actions=` value (without the `actions=` prefix).
pub fn format_instructions(i: &[Instruction], tables: TableNames<'_>) -> String {
    let mut s = String::new();
    write_instructions(&mut s, i, &Names::tables(tables));
    s
}

/// One `ovs-ofctl -O OpenFlow15 dump-flows --no-stats --names` line, with its leading space,
/// without a newline: ` cookie=0x5, table=IngressRule, priority=200,ip,nw_src=10.0.0.1
/// actions=conjunction(1,1/3)`. Ports print as numbers (see [`format_flow_with`]).
pub fn format_flow(table_names: TableNames<'_>, f: &FlowStats) -> String {
    format_flow_with(&Names::tables(table_names), f, false)
}

/// One flow as `ovs-ofctl dump-flows` (with `show_stats`) or `dump-flows --no-stats` prints
/// it, leading space included, e.g. ` cookie=0x0, duration=196.185s, table=0, n_packets=2,
/// n_bytes=128, send_flow_rem idle_age=196, in_port=2 actions=NORMAL`.
pub fn format_flow_stats(table_names: TableNames<'_>, f: &FlowStats, show_stats: bool) -> String {
    format_flow_with(&Names::tables(table_names), f, show_stats)
}

/// The dump-flows line of a flow the switch holds, with table and port names.
pub fn format_flow_with(names: &Names<'_>, f: &FlowStats, show_stats: bool) -> String {
    let mut s = String::from(" ");
    let table_names = names.tables;
    if show_stats || f.cookie != 0 {
        let _ = write!(s, "cookie={:#x}, ", f.cookie);
    }
    if show_stats {
        let (sec, nsec) = f.stats.duration.unwrap_or((0, 0));
        s.push_str("duration=");
        push_duration(&mut s, sec, nsec);
        s.push_str(", ");
    }
    if show_stats || f.table_id != 0 || table_names(f.table_id).is_some() {
        s.push_str("table=");
        push_table(&mut s, f.table_id, table_names);
        s.push_str(", ");
    }
    if show_stats {
        let _ = write!(
            s,
            "n_packets={}, n_bytes={}, ",
            f.stats.packet_count.unwrap_or(u64::MAX),
            f.stats.byte_count.unwrap_or(u64::MAX)
        );
    }
    if f.idle_timeout != 0 {
        let _ = write!(s, "idle_timeout={}, ", f.idle_timeout);
    }
    if f.hard_timeout != 0 {
        let _ = write!(s, "hard_timeout={}, ", f.hard_timeout);
    }
    write_flow_mod_flags(&mut s, f.flags);
    if f.importance != 0 {
        let _ = write!(s, "importance={}, ", f.importance);
    }
    if let Some(idle) = f.stats.idle_time.filter(|_| show_stats) {
        let _ = write!(s, "idle_age={}, ", idle >> 32);
    }
    let before = s.len();
    write_match(&mut s, &f.match_, Some(f.priority), names);
    if s.len() != before {
        s.push(' ');
    }
    s.push_str("actions=");
    write_instructions(&mut s, &f.instructions, names);
    s
}

/// The `dump-flows --no-stats` line the switch will show once `fm` (an ADD) is installed:
/// what `npagent flows` prints for its desired flows.
pub fn format_desired_flow(names: &Names<'_>, fm: &FlowMod) -> String {
    let f = FlowStats {
        table_id: fm.table_id,
        priority: fm.priority,
        idle_timeout: fm.idle_timeout,
        hard_timeout: fm.hard_timeout,
        flags: fm.flags & DUMPED_FLAGS,
        importance: fm.importance,
        cookie: fm.cookie,
        match_: fm.match_.clone(),
        stats: Default::default(),
        instructions: fm.instructions.clone(),
    };
    format_flow_with(names, &f, false)
}

/// OVS's `ofp_print_duration`: seconds, then milliseconds or as many decimals as needed.
fn push_duration(s: &mut String, sec: u32, nsec: u32) {
    let _ = write!(s, "{sec}");
    if nsec > 0 {
        let msec = nsec / 1_000_000;
        if msec * 1_000_000 == nsec {
            let _ = write!(s, ".{msec:03}");
        } else {
            let frac = format!("{nsec:09}");
            s.push('.');
            s.push_str(frac.trim_end_matches('0'));
        }
    }
    s.push('s');
}

/// The text `ovs-ofctl ofp-print` prints for a flow_mod after `OFPT_FLOW_MOD (OF1.5) (xid=..): `,
/// e.g. `ADD table:1 priority=200,ip,nw_src=10.0.0.1 actions=conjunction(1,1/3)`.
pub fn format_flow_mod(fm: &FlowMod, table_names: TableNames<'_>) -> String {
    let names = Names::tables(table_names);
    let mut s = String::new();
    match fm.command {
        FlowModCommand::Add => s.push_str("ADD"),
        FlowModCommand::Modify => s.push_str("MOD"),
        FlowModCommand::ModifyStrict => s.push_str("MOD_STRICT"),
        FlowModCommand::Delete => s.push_str("DEL"),
        FlowModCommand::DeleteStrict => s.push_str("DEL_STRICT"),
        FlowModCommand::Other(c) => {
            let _ = write!(s, "cmd:{c}");
        }
    }
    if fm.table_id != 0 || table_names(fm.table_id).is_some() {
        s.push_str(" table:");
        push_table(&mut s, fm.table_id, table_names);
    }
    s.push(' ');
    write_match(&mut s, &fm.match_, Some(fm.priority), &names);
    if !s.ends_with(' ') {
        s.push(' ');
    }
    let adding = fm.command == FlowModCommand::Add;
    if adding && fm.cookie != 0 && fm.cookie != u64::MAX {
        let _ = write!(s, "cookie:{:#x} ", fm.cookie);
    }
    if fm.cookie_mask != 0 {
        let _ = write!(s, "cookie:{:#x}/{:#x} ", fm.cookie, fm.cookie_mask);
    }
    if fm.idle_timeout != 0 {
        let _ = write!(s, "idle:{} ", fm.idle_timeout);
    }
    if fm.hard_timeout != 0 {
        let _ = write!(s, "hard:{} ", fm.hard_timeout);
    }
    if fm.importance != 0 {
        let _ = write!(s, "importance:{} ", fm.importance);
    }
    if fm.buffer_id != crate::NO_BUFFER {
        let _ = write!(s, "buf:{:#x} ", fm.buffer_id);
    }
    if fm.out_port != crate::port::ANY {
        s.push_str("out_port:");
        push_port32(&mut s, fm.out_port, &names);
        s.push(' ');
    }
    write_flow_mod_flags(&mut s, fm.flags);
    s.push_str("actions=");
    write_instructions(&mut s, &fm.instructions, &names);
    s
}

fn write_flow_mod_flags(s: &mut String, flags: u16) {
    const NAMES: [(u16, &str); 5] = [
        (1, "send_flow_rem"),
        (2, "check_overlap"),
        (4, "reset_counts"),
        (8, "no_packet_counts"),
        (16, "no_byte_counts"),
    ];
    for (bit, name) in NAMES {
        if flags & bit != 0 {
            s.push_str(name);
            s.push(' ');
        }
    }
    let unknown = flags & !0x1f;
    if unknown != 0 {
        let _ = write!(s, "flags:{unknown:#x} ");
    }
}

fn push_table(s: &mut String, table: u8, names: TableNames<'_>) {
    match names(table) {
        Some(n) => s.push_str(&n),
        None => {
            let _ = write!(s, "{table}");
        }
    }
}

/// An OF1.0-style 16-bit port: number below 0xff00, else its reserved name.
fn push_port16(s: &mut String, port: u16, n: &Names<'_>) {
    if let Some(name) = (n.ports)(port32(port)) {
        s.push_str(&name);
        return;
    }
    let name = match port {
        0xfff8 => "IN_PORT",
        0xfff9 => "TABLE",
        0xfffa => "NORMAL",
        0xfffb => "FLOOD",
        0xfffc => "ALL",
        0xfffd => "CONTROLLER",
        0xfffe => "LOCAL",
        0xffff => "ANY",
        p => {
            let _ = write!(s, "{p}");
            return;
        }
    };
    s.push_str(name);
}

/// An OF1.1+ 32-bit port, mapped to OVS's 16-bit port space as OVS does.
fn push_port32(s: &mut String, port: u32, n: &Names<'_>) {
    match port16(port) {
        Some(p) => push_port16(s, p, n),
        None => {
            let _ = write!(s, "{port}");
        }
    }
}

/// OVS's 16-bit port number as an OF1.1+ 32-bit one.
fn port32(p: u16) -> u32 {
    if p < 0xff00 {
        u32::from(p)
    } else {
        0xffff_0000 | u32::from(p)
    }
}

fn port16(port: u32) -> Option<u16> {
    if port < 0xff00 {
        Some(port as u16)
    } else if port >= 0xffff_ff00 {
        Some((port - 0xffff_0000) as u16)
    } else {
        None
    }
}

// ---------------------------------------------------------------------------------------------
// Matches

/// The match folded into OVS's flow/wildcard view: (value, mask) per field, value & mask.
#[derive(Default)]
struct View {
    pkt_mark: (u32, u32),
    conj_id: Option<u32>,
    ct_state: (u32, u32),
    ct_zone: Option<u16>,
    ct_mark: (u32, u32),
    ct_label: (u128, u128),
    dl_type: Option<u16>,
    nw_proto: Option<u8>,
    regs: [(u32, u32); 32],
    metadata: (u64, u64),
    in_port: Option<u32>,
    dl_src: ([u8; 6], [u8; 6]),
    dl_dst: ([u8; 6], [u8; 6]),
    nw_src: (u32, u32),
    nw_dst: (u32, u32),
    ipv6_src: (u128, u128),
    ipv6_dst: (u128, u128),
    /// `arp_sha`, or `nd_sll` for neighbour discovery (OVS keeps both in one field).
    arp_sha: ([u8; 6], [u8; 6]),
    /// `arp_tha`, or `nd_tll`.
    arp_tha: ([u8; 6], [u8; 6]),
    nd_target: (u128, u128),
    tp_src: (u16, u16),
    tp_dst: (u16, u16),
    tcp_flags: (u16, u16),
    raw: Vec<String>,
}

fn mv<T: Copy + std::ops::BitAnd<Output = T>>(v: &crate::oxm::Masked<T>, ones: T) -> (T, T) {
    let mask = v.mask.unwrap_or(ones);
    (v.value & mask, mask)
}

fn mac_and(a: [u8; 6], m: [u8; 6]) -> [u8; 6] {
    let mut r = [0u8; 6];
    for i in 0..6 {
        r[i] = a[i] & m[i];
    }
    r
}

impl View {
    fn build(m: &Match) -> View {
        let mut v = View::default();
        for f in &m.fields {
            match f {
                Oxm::InPort(p) => v.in_port = Some(*p),
                Oxm::Metadata(x) => v.metadata = mv(x, u64::MAX),
                Oxm::EthDst(x) => {
                    let mask = x.mask.unwrap_or([0xff; 6]);
                    v.dl_dst = (mac_and(x.value, mask), mask);
                }
                Oxm::EthSrc(x) => {
                    let mask = x.mask.unwrap_or([0xff; 6]);
                    v.dl_src = (mac_and(x.value, mask), mask);
                }
                Oxm::EthType(t) => v.dl_type = Some(*t),
                Oxm::IpProto(p) => v.nw_proto = Some(*p),
                Oxm::Ipv4Src(x) | Oxm::ArpSpa(x) => {
                    let mask = x.mask.map_or(u32::MAX, u32::from);
                    v.nw_src = (u32::from(x.value) & mask, mask);
                }
                Oxm::Ipv4Dst(x) | Oxm::ArpTpa(x) => {
                    let mask = x.mask.map_or(u32::MAX, u32::from);
                    v.nw_dst = (u32::from(x.value) & mask, mask);
                }
                // OVS keeps the ARP opcode in the 8-bit nw_proto.
                Oxm::ArpOp(op) => v.nw_proto = Some(*op as u8),
                Oxm::ArpSha(x) | Oxm::Ipv6NdSll(x) => {
                    let mask = x.mask.unwrap_or([0xff; 6]);
                    v.arp_sha = (mac_and(x.value, mask), mask);
                }
                Oxm::ArpTha(x) | Oxm::Ipv6NdTll(x) => {
                    let mask = x.mask.unwrap_or([0xff; 6]);
                    v.arp_tha = (mac_and(x.value, mask), mask);
                }
                Oxm::Ipv6NdTarget(x) => {
                    let mask = x.mask.map_or(u128::MAX, u128::from);
                    v.nd_target = (u128::from(x.value) & mask, mask);
                }
                Oxm::Ipv6Src(x) => {
                    let mask = x.mask.map_or(u128::MAX, u128::from);
                    v.ipv6_src = (u128::from(x.value) & mask, mask);
                }
                Oxm::Ipv6Dst(x) => {
                    let mask = x.mask.map_or(u128::MAX, u128::from);
                    v.ipv6_dst = (u128::from(x.value) & mask, mask);
                }
                Oxm::TcpSrc(x) | Oxm::UdpSrc(x) | Oxm::SctpSrc(x) => v.tp_src = mv(x, u16::MAX),
                Oxm::TcpDst(x) | Oxm::UdpDst(x) | Oxm::SctpDst(x) => v.tp_dst = mv(x, u16::MAX),
                Oxm::Icmpv4Type(t) | Oxm::Icmpv6Type(t) => v.tp_src = (u16::from(*t), u16::MAX),
                Oxm::Icmpv4Code(c) | Oxm::Icmpv6Code(c) => v.tp_dst = (u16::from(*c), u16::MAX),
                Oxm::TcpFlags(x) => v.tcp_flags = mv(x, u16::MAX),
                Oxm::CtState(x) => {
                    // OVS keeps ct_state in 8 bits.
                    let (val, mask) = mv(x, u32::MAX);
                    v.ct_state = (val & 0xff, mask & 0xff);
                }
                Oxm::CtZone(z) => v.ct_zone = Some(*z),
                Oxm::CtMark(x) => v.ct_mark = mv(x, u32::MAX),
                Oxm::CtLabel(x) => v.ct_label = mv(x, u128::MAX),
                Oxm::ConjId(c) => v.conj_id = Some(*c),
                Oxm::PktMark(x) => v.pkt_mark = mv(x, u32::MAX),
                Oxm::Reg { index, value } => {
                    if let Some(r) = v.regs.get_mut(usize::from(*index)) {
                        *r = mv(value, u32::MAX);
                    }
                }
                Oxm::XReg { index, value } => {
                    let (val, mask) = mv(value, u64::MAX);
                    let i = usize::from(*index) * 2;
                    if let Some(r) = v.regs.get_mut(i) {
                        *r = ((val >> 32) as u32, (mask >> 32) as u32);
                    }
                    if let Some(r) = v.regs.get_mut(i + 1) {
                        *r = (val as u32, mask as u32);
                    }
                }
                other => {
                    let mut b = bytes::BytesMut::with_capacity(other.buffer_len());
                    other.emit(&mut b);
                    v.raw.push(format!("oxm:{}", hex_plain(&b)));
                }
            }
        }
        v
    }
}

fn hex_plain(b: &[u8]) -> String {
    b.iter()
        .fold(String::with_capacity(b.len() * 2), |mut s, x| {
            let _ = write!(s, "{x:02x}");
            s
        })
}

/// C's `%#x`: `0` for zero, `0x..` otherwise.
fn alt_hex(s: &mut String, v: u128) {
    if v == 0 {
        s.push('0');
    } else {
        let _ = write!(s, "{v:#x}");
    }
}

fn u32_masked(s: &mut String, name: &str, (v, m): (u32, u32)) {
    if m != 0 {
        s.push_str(name);
        s.push('=');
        alt_hex(s, v.into());
        if m != u32::MAX {
            s.push('/');
            alt_hex(s, m.into());
        }
        s.push(',');
    }
}

fn be16_masked(s: &mut String, name: &str, (v, m): (u16, u16)) {
    if m != 0 {
        if m == u16::MAX {
            let _ = write!(s, "{name}={v},");
        } else {
            let _ = write!(s, "{name}={v:#x}/{m:#x},");
        }
    }
}

fn eth_masked(s: &mut String, name: &str, (v, m): ([u8; 6], [u8; 6])) {
    if m != [0; 6] {
        s.push_str(name);
        s.push('=');
        push_mac(s, v);
        if m != [0xff; 6] {
            s.push('/');
            push_mac(s, m);
        }
        s.push(',');
    }
}

fn push_mac(s: &mut String, m: [u8; 6]) {
    let _ = write!(
        s,
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        m[0], m[1], m[2], m[3], m[4], m[5]
    );
}

fn push_ipv4_masked(s: &mut String, v: u32, m: u32) {
    let _ = write!(s, "{}", Ipv4Addr::from(v));
    if m != u32::MAX {
        if m.leading_ones() + m.trailing_zeros() == 32 {
            let _ = write!(s, "/{}", m.leading_ones());
        } else {
            let _ = write!(s, "/{}", Ipv4Addr::from(m));
        }
    }
}

fn ip_netmask(s: &mut String, name: &str, (v, m): (u32, u32)) {
    if m != 0 {
        s.push_str(name);
        s.push('=');
        push_ipv4_masked(s, v, m);
        s.push(',');
    }
}

/// An IPv6 address as glibc's inet_ntop writes it (IPv4-compatible and -mapped forms included).
fn push_ipv6(s: &mut String, a: u128) {
    let addr = Ipv6Addr::from(a);
    let seg = addr.segments();
    let v4 = Ipv4Addr::from(a as u32);
    if seg[..6] == [0; 6] && a > 0xffff {
        let _ = write!(s, "::{v4}");
    } else if seg[..5] == [0; 5] && seg[5] == 0xffff {
        let _ = write!(s, "::ffff:{v4}");
    } else {
        let _ = write!(s, "{addr}");
    }
}

fn push_ipv6_masked(s: &mut String, v: u128, m: u128) {
    push_ipv6(s, v);
    if m != u128::MAX {
        if m.leading_ones() + m.trailing_zeros() == 128 {
            let _ = write!(s, "/{}", m.leading_ones());
        } else {
            s.push('/');
            push_ipv6(s, m);
        }
    }
}

fn ipv6_netmask(s: &mut String, name: &str, (v, m): (u128, u128)) {
    if m != 0 {
        s.push_str(name);
        s.push('=');
        push_ipv6_masked(s, v, m);
        s.push(',');
    }
}

fn ct_state_name(bit: u32) -> Option<&'static str> {
    Some(match bit {
        0x01 => "new",
        0x02 => "est",
        0x04 => "rel",
        0x08 => "rpl",
        0x10 => "inv",
        0x20 => "trk",
        0x40 => "snat",
        0x80 => "dnat",
        _ => return None,
    })
}

fn tcp_flag_name(bit: u32) -> Option<&'static str> {
    Some(match bit {
        0x001 => "fin",
        0x002 => "syn",
        0x004 => "rst",
        0x008 => "psh",
        0x010 => "ack",
        0x020 => "urg",
        0x040 => "ece",
        0x080 => "cwr",
        0x100 => "ns",
        0x200 => "[200]",
        0x400 => "[400]",
        0x800 => "[800]",
        _ => return None,
    })
}

/// OVS's `format_flags`: names joined by `del`, unknown bits as one hex number, `0` if none.
fn flags(s: &mut String, name: fn(u32) -> Option<&'static str>, mut v: u32, del: char) {
    if v == 0 {
        s.push('0');
        return;
    }
    let mut bad = 0;
    let mut first = true;
    while v != 0 {
        let bit = v & v.wrapping_neg();
        match name(bit) {
            Some(n) => {
                if !first {
                    s.push(del);
                }
                s.push_str(n);
                first = false;
            }
            None => bad |= bit,
        }
        v &= !bit;
    }
    if bad != 0 {
        if !first {
            s.push(del);
        }
        let _ = write!(s, "{bad:#x}");
    }
}

/// OVS's `format_flags_masked`.
fn flags_masked(
    s: &mut String,
    name: fn(u32) -> Option<&'static str>,
    v: u32,
    mut m: u32,
    max: u32,
) {
    if m == max {
        flags(s, name, v, '|');
        return;
    }
    if m == 0 {
        s.push_str("0/0");
        return;
    }
    while m != 0 {
        let bit = m & m.wrapping_neg();
        s.push(if v & bit != 0 { '+' } else { '-' });
        s.push_str(name(bit).unwrap_or("[Unknown]"));
        m &= !bit;
    }
}

fn write_match(s: &mut String, m: &Match, priority: Option<u16>, n: &Names<'_>) {
    let start = s.len();
    if let Some(p) = priority.filter(|&p| p != DEFAULT_PRIORITY) {
        let _ = write!(s, "priority={p},");
    }
    let v = View::build(m);
    u32_masked(s, "pkt_mark", v.pkt_mark);
    if let Some(c) = v.conj_id {
        let _ = write!(s, "conj_id={c},");
    }
    let (cs, csm) = v.ct_state;
    if csm != 0 {
        s.push_str("ct_state=");
        if csm == 0xff {
            flags(s, ct_state_name, cs, '|');
        } else {
            flags_masked(s, ct_state_name, cs, csm, 0xff);
        }
        s.push(',');
    }
    if let Some(z) = v.ct_zone {
        let _ = write!(s, "ct_zone={z},");
    }
    u32_masked(s, "ct_mark", v.ct_mark);
    if v.ct_label.1 != 0 {
        s.push_str("ct_label=");
        ds_put_hex(s, v.ct_label.0);
        if v.ct_label.1 != u128::MAX {
            s.push('/');
            ds_put_hex(s, v.ct_label.1);
        }
        s.push(',');
    }
    let dl_type = v.dl_type.unwrap_or(0);
    let mut skip_type = false;
    let mut skip_proto = false;
    if let Some(t) = v.dl_type {
        skip_type = true;
        let proto = |ip4: bool| -> Option<&'static str> {
            Some(match (v.nw_proto?, ip4) {
                (1, true) => "icmp",
                (6, true) => "tcp",
                (17, true) => "udp",
                (132, true) => "sctp",
                (58, false) => "icmp6",
                (6, false) => "tcp6",
                (17, false) => "udp6",
                (132, false) => "sctp6",
                _ => return None,
            })
        };
        let short = match t {
            0x0800 | 0x86dd => {
                let ip4 = t == 0x0800;
                match proto(ip4) {
                    Some(p) => {
                        skip_proto = true;
                        p
                    }
                    None if ip4 => "ip",
                    None => "ipv6",
                }
            }
            0x0806 => "arp",
            0x8035 => "rarp",
            0x8847 => "mpls",
            0x8848 => "mplsm",
            _ => {
                skip_type = false;
                ""
            }
        };
        if skip_type {
            s.push_str(short);
            s.push(',');
        }
    }
    for (i, r) in v.regs.iter().enumerate() {
        if r.1 != 0 {
            u32_masked(s, &format!("reg{i}"), *r);
        }
    }
    let (md, mdm) = v.metadata;
    if mdm != 0 {
        s.push_str("metadata=");
        alt_hex(s, md.into());
        if mdm != u64::MAX {
            s.push('/');
            alt_hex(s, mdm.into());
        }
        s.push(',');
    }
    if let Some(p) = v.in_port {
        s.push_str("in_port=");
        push_port32(s, p, n);
        s.push(',');
    }
    eth_masked(s, "dl_src", v.dl_src);
    eth_masked(s, "dl_dst", v.dl_dst);
    if !skip_type {
        if let Some(t) = v.dl_type {
            let _ = write!(s, "dl_type=0x{t:04x},");
        }
    }
    let arp = dl_type == 0x0806 || dl_type == 0x8035;
    if dl_type == 0x86dd {
        ipv6_netmask(s, "ipv6_src", v.ipv6_src);
        ipv6_netmask(s, "ipv6_dst", v.ipv6_dst);
    } else if arp {
        ip_netmask(s, "arp_spa", v.nw_src);
        ip_netmask(s, "arp_tpa", v.nw_dst);
    } else {
        ip_netmask(s, "nw_src", v.nw_src);
        ip_netmask(s, "nw_dst", v.nw_dst);
    }
    if !skip_proto {
        if let Some(p) = v.nw_proto {
            let _ = write!(s, "{}={p},", if arp { "arp_op" } else { "nw_proto" });
        }
    }
    if arp {
        eth_masked(s, "arp_sha", v.arp_sha);
        eth_masked(s, "arp_tha", v.arp_tha);
    }
    let is_ip = dl_type == 0x0800 || dl_type == 0x86dd;
    let proto = v.nw_proto.unwrap_or(0);
    if is_ip && (proto == 1 || proto == 58) {
        be16_masked(s, "icmp_type", v.tp_src);
        be16_masked(s, "icmp_code", v.tp_dst);
        if proto == 58 && dl_type == 0x86dd {
            ipv6_netmask(s, "nd_target", v.nd_target);
            eth_masked(s, "nd_sll", v.arp_sha);
            eth_masked(s, "nd_tll", v.arp_tha);
        }
    } else if is_ip && proto == 2 {
        be16_masked(s, "igmp_type", v.tp_src);
        be16_masked(s, "igmp_code", v.tp_dst);
    } else {
        be16_masked(s, "tp_src", v.tp_src);
        be16_masked(s, "tp_dst", v.tp_dst);
    }
    if is_ip && proto == 6 && v.tcp_flags.1 & 0x0fff != 0 {
        s.push_str("tcp_flags=");
        flags_masked(
            s,
            tcp_flag_name,
            u32::from(v.tcp_flags.0),
            u32::from(v.tcp_flags.1 & 0x0fff),
            0x0fff,
        );
        s.push(',');
    }
    for r in &v.raw {
        s.push_str(r);
        s.push(',');
    }
    if s.len() > start && s.ends_with(',') {
        s.pop();
    }
}

/// OVS's `ds_put_hex` of a big-endian integer: `0x` + hex without leading zeros, `0` for zero.
fn ds_put_hex(s: &mut String, v: u128) {
    alt_hex(s, v);
}

// ---------------------------------------------------------------------------------------------
// Fields by header (for set_field, move, ct zone, output:reg)

/// OVS's name of a field as a subfield (NXM name where one exists), and its width in bits.
fn nxm_name(header: u32) -> Option<(&'static str, u16)> {
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
        (class::NXM_1, 33) => ("NXM_NX_PKT_MARK", 32),
        (class::NXM_1, 37) => ("NXM_NX_CONJ_ID", 32),
        (class::NXM_1, 105) => ("NXM_NX_CT_STATE", 32),
        (class::NXM_1, 106) => ("NXM_NX_CT_ZONE", 16),
        (class::NXM_1, 107) => ("NXM_NX_CT_MARK", 32),
        (class::NXM_1, 108) => ("NXM_NX_CT_LABEL", 128),
        (class::PACKET_REGS, 0..=7) => (XREGS[usize::from(field)], 64),
        _ => return None,
    })
}

fn push_subfield(s: &mut String, header: u32, ofs: u16, n_bits: u16) {
    match nxm_name(header) {
        Some((name, width)) => {
            s.push_str(name);
            if ofs == 0 && n_bits == width {
                s.push_str("[]");
            } else if n_bits == 1 {
                let _ = write!(s, "[{ofs}]");
            } else {
                let _ = write!(s, "[{}..{}]", ofs, u32::from(ofs) + u32::from(n_bits) - 1);
            }
        }
        None => {
            let _ = write!(s, "<unknown {header:#010x}>[{ofs}+{n_bits}]");
        }
    }
}

fn push_ofs_nbits(s: &mut String, header: u32, ofs_nbits: u16) {
    push_subfield(s, header, ofs_nbits >> 6, (ofs_nbits & 0x3f) + 1);
}

/// Hex integer in OVS's `mf_format` style for MFS_HEXADECIMAL fields, with `/mask` if masked.
fn hex_value<T: Into<u128> + Copy>(s: &mut String, v: &crate::oxm::Masked<T>, ones: u128) {
    ds_put_hex(s, v.value.into());
    if let Some(m) = v.mask.map(Into::into).filter(|&m| m != ones) {
        s.push('/');
        ds_put_hex(s, m);
    }
}

fn dec_value(s: &mut String, v: &crate::oxm::Masked<u16>) {
    let _ = write!(s, "{}", v.value);
    if let Some(m) = v.mask.filter(|&m| m != u16::MAX) {
        s.push('/');
        ds_put_hex(s, m.into());
    }
}

/// `set_field:VALUE->FIELD` as OVS's `format_SET_FIELD` writes it.
fn write_set_field(s: &mut String, o: &Oxm, n: &Names<'_>) {
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
            if matches!(o, Oxm::EthDst(_)) {
                "eth_dst"
            } else {
                "eth_src"
            }
            .into()
        }
        Oxm::EthType(t) => {
            ds_put_hex(s, (*t).into());
            "eth_type".into()
        }
        Oxm::IpProto(p) => {
            let _ = write!(s, "{p}");
            "nw_proto".into()
        }
        Oxm::Ipv4Src(v) | Oxm::Ipv4Dst(v) => {
            push_ipv4_masked(s, v.value.into(), v.mask.map_or(u32::MAX, u32::from));
            if matches!(o, Oxm::Ipv4Src(_)) {
                "ip_src"
            } else {
                "ip_dst"
            }
            .into()
        }
        Oxm::Ipv6Src(v) | Oxm::Ipv6Dst(v) => {
            push_ipv6_masked(s, v.value.into(), v.mask.map_or(u128::MAX, u128::from));
            if matches!(o, Oxm::Ipv6Src(_)) {
                "ipv6_src"
            } else {
                "ipv6_dst"
            }
            .into()
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
            flags_masked(
                s,
                tcp_flag_name,
                v.value.into(),
                u32::from(v.mask.unwrap_or(u16::MAX) & 0xfff),
                0xfff,
            );
            "tcp_flags".into()
        }
        Oxm::CtState(v) => {
            flags_masked(
                s,
                ct_state_name,
                v.value,
                v.mask.unwrap_or(u32::MAX),
                u32::MAX,
            );
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

// ---------------------------------------------------------------------------------------------
// Actions

fn write_action_list(s: &mut String, a: &[Action], n: &Names<'_>) {
    if a.is_empty() {
        s.push_str("drop");
        return;
    }
    for (i, x) in a.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        write_action(s, x, n);
    }
}

fn hex_arg(s: &mut String, b: &[u8]) {
    for (i, x) in b.iter().enumerate() {
        if i > 0 {
            s.push('.');
        }
        let _ = write!(s, "{x:02x}");
    }
}

fn reason_name(r: u8) -> std::borrow::Cow<'static, str> {
    match r {
        0 => "no_match".into(),
        1 => "action".into(),
        2 => "invalid_ttl".into(),
        3 => "action_set".into(),
        4 => "group".into(),
        5 => "packet_out".into(),
        other => other.to_string().into(),
    }
}

/// OVS's `format_CONTROLLER` for both NXAST_CONTROLLER and NXAST_CONTROLLER2.
fn write_controller(s: &mut String, c: &Controller2) {
    let max_len = c.max_len.unwrap_or(u16::MAX);
    let id = c.controller_id.unwrap_or(0);
    let reason = c.reason.unwrap_or(1);
    let userdata = c.userdata.as_deref().unwrap_or(&[]);
    let meter = c.meter_id.unwrap_or(u32::MAX);
    if reason == 1 && id == 0 && userdata.is_empty() && !c.pause && meter == u32::MAX {
        let _ = write!(s, "CONTROLLER:{max_len}");
        return;
    }
    s.push_str("controller(");
    let start = s.len();
    if reason != 1 {
        let _ = write!(s, "reason={},", reason_name(reason));
    }
    if max_len != u16::MAX {
        let _ = write!(s, "max_len={max_len},");
    }
    if id != 0 {
        let _ = write!(s, "id={id},");
    }
    if !userdata.is_empty() {
        s.push_str("userdata=");
        hex_arg(s, userdata);
        s.push(',');
    }
    if c.pause {
        s.push_str("pause,");
    }
    if meter != u32::MAX {
        let _ = write!(s, "meter_id={meter},");
    }
    if s.len() > start {
        s.pop();
    }
    s.push(')');
}

fn write_ct(s: &mut String, ct: &Ct, n: &Names<'_>) {
    s.push_str("ct(");
    let start = s.len();
    if ct.flags & 1 != 0 {
        s.push_str("commit,");
    }
    if ct.flags & 2 != 0 {
        s.push_str("force,");
    }
    if let Some(t) = ct.table {
        s.push_str("table=");
        push_table(s, t, n.tables);
        s.push(',');
    }
    match ct.zone {
        CtZoneSrc::Field { header, ofs_nbits } => {
            s.push_str("zone=");
            push_ofs_nbits(s, header, ofs_nbits);
            s.push(',');
        }
        CtZoneSrc::Imm(0) => {}
        CtZoneSrc::Imm(z) => {
            let _ = write!(s, "zone={z},");
        }
    }
    let mut rest = &ct.actions[..];
    if let Some((first, tail)) = rest.split_first() {
        if let Some(nat) = nat_text(first) {
            s.push_str(&nat);
            s.push(',');
            rest = tail;
        }
    }
    if !rest.is_empty() {
        s.push_str("exec(");
        write_action_list(s, rest, n);
        s.push_str("),");
    }
    match ct.alg {
        0 => {}
        21 => s.push_str("alg=ftp,"),
        69 => s.push_str("alg=tftp,"),
        a => {
            let _ = write!(s, "alg={a},");
        }
    }
    if s.len() > start && s.ends_with(',') {
        s.pop();
    }
    s.push(')');
}

/// NXAST_NAT (kept raw by the codec) in OVS's `format_NAT` form, or `None` if `a` is not one.
fn nat_text(a: &Action) -> Option<String> {
    let Action::Experimenter {
        experimenter: crate::NX_VENDOR_ID,
        payload,
    } = a
    else {
        return None;
    };
    let mut r = crate::wire::Reader::new(payload, "NXAST_NAT");
    if r.u16().ok()? != 36 {
        return None;
    }
    r.take(2).ok()?;
    let flags = r.u16().ok()?;
    let present = r.u16().ok()?;
    let get32 = |bit: u16, r: &mut crate::wire::Reader<'_>| {
        if present & bit != 0 {
            r.u32().ok()
        } else {
            Some(0)
        }
    };
    let v4min = get32(1, &mut r)?;
    let v4max = get32(2, &mut r)?;
    let get128 = |bit: u16, r: &mut crate::wire::Reader<'_>| {
        if present & bit != 0 {
            r.take(16)
                .ok()
                .and_then(|b| <[u8; 16]>::try_from(b).ok())
                .map(u128::from_be_bytes)
        } else {
            Some(0)
        }
    };
    let v6min = get128(4, &mut r)?;
    let v6max = get128(8, &mut r)?;
    let get16 = |bit: u16, r: &mut crate::wire::Reader<'_>| {
        if present & bit != 0 {
            r.u16().ok()
        } else {
            Some(0)
        }
    };
    let pmin = get16(16, &mut r)?;
    let pmax = get16(32, &mut r)?;
    let mut s = String::from("nat");
    if flags & 3 != 0 {
        s.push_str(if flags & 1 != 0 { "(src=" } else { "(dst=" });
        if present & 3 != 0 {
            let _ = write!(s, "{}", Ipv4Addr::from(v4min));
            if v4max != 0 && v4max != v4min {
                let _ = write!(s, "-{}", Ipv4Addr::from(v4max));
            }
        } else if present & 12 != 0 {
            s.push('[');
            push_ipv6(&mut s, v6min);
            s.push(']');
            if v6max != 0 && v6max != v6min {
                s.push_str("-[");
                push_ipv6(&mut s, v6max);
                s.push(']');
            }
        }
        if pmin != 0 {
            let _ = write!(s, ":{pmin}");
            if pmax != 0 && pmax != pmin {
                let _ = write!(s, "-{pmax}");
            }
        }
        s.push(',');
        if flags & 4 != 0 {
            s.push_str("persistent,");
        }
        if flags & 8 != 0 {
            s.push_str("hash,");
        }
        if flags & 16 != 0 {
            s.push_str("random,");
        }
        s.pop();
        s.push(')');
    }
    Some(s)
}

fn write_resubmit(s: &mut String, in_port: u16, table: u8, ct: bool, n: &Names<'_>) {
    if in_port != 0xfff8 && table == 0xff && !ct {
        s.push_str("resubmit:");
        push_port16(s, in_port, n);
        return;
    }
    s.push_str("resubmit(");
    if in_port != 0xfff8 {
        push_port16(s, in_port, n);
    }
    s.push(',');
    if table != 0xff {
        push_table(s, table, n.tables);
    }
    if ct {
        s.push_str(",ct");
    }
    s.push(')');
}

fn write_action(s: &mut String, a: &Action, n: &Names<'_>) {
    match a {
        Action::Output { port, max_len } => {
            let p16 = port16(*port);
            if p16.is_some_and(|p| p < 0xff00) || p16.is_none() {
                s.push_str("output:");
            }
            push_port32(s, *port, n);
            if *port == crate::port::CONTROLLER {
                let _ = write!(s, ":{max_len}");
            }
        }
        Action::Group(g) => {
            let _ = write!(s, "group:{g}");
        }
        Action::SetField(o) => write_set_field(s, o, n),
        Action::CopyField {
            n_bits,
            src_offset,
            dst_offset,
            src,
            dst,
        } => {
            let h = |b: &[u8]| {
                b.get(..4)
                    .and_then(|x| <[u8; 4]>::try_from(x).ok())
                    .map_or(0, u32::from_be_bytes)
            };
            s.push_str("move:");
            push_subfield(s, h(src), *src_offset, *n_bits);
            s.push_str("->");
            push_subfield(s, h(dst), *dst_offset, *n_bits);
        }
        Action::Meter(m) => {
            let _ = write!(s, "meter:{m}");
        }
        Action::Resubmit { in_port } => write_resubmit(s, *in_port, 0xff, false, n),
        Action::ResubmitTable { in_port, table, ct } => write_resubmit(s, *in_port, *table, *ct, n),
        Action::Note(n) => {
            s.push_str("note:");
            hex_arg(s, n);
        }
        Action::Controller {
            max_len,
            controller_id,
            reason,
        } => write_controller(
            s,
            &Controller2 {
                max_len: Some(*max_len),
                controller_id: Some(*controller_id),
                reason: Some(*reason),
                ..Controller2::default()
            },
        ),
        Action::Controller2(c) => write_controller(s, c),
        Action::Conjunction {
            id,
            clause,
            n_clauses,
        } => {
            let _ = write!(
                s,
                "conjunction({},{}/{})",
                id,
                u16::from(*clause) + 1,
                n_clauses
            );
        }
        Action::Ct(ct) => write_ct(s, ct, n),
        Action::CtClear => s.push_str("ct_clear"),
        Action::Clone(a) => {
            s.push_str("clone(");
            write_action_list(s, a, n);
            s.push(')');
        }
        Action::OutputReg { src, ofs_nbits, .. } => {
            s.push_str("output:");
            push_ofs_nbits(s, *src, *ofs_nbits);
        }
        Action::Experimenter {
            experimenter,
            payload,
        } => match nat_text(a) {
            Some(n) => s.push_str(&n),
            None => {
                let _ = write!(s, "experimenter({experimenter:#x},{})", hex_plain(payload));
            }
        },
        Action::Unknown {
            action_type,
            payload,
        } => {
            let _ = write!(s, "action({action_type},{})", hex_plain(payload));
        }
    }
}

fn write_instructions(s: &mut String, ins: &[Instruction], n: &Names<'_>) {
    // Raw instructions of modelled types (non-zero padding) read as OVS reads them.
    let lenient: Vec<std::borrow::Cow<'_, Instruction>> = ins
        .iter()
        .map(|i| match i {
            Instruction::Unknown { .. } => std::borrow::Cow::Owned(i.lenient()),
            _ => std::borrow::Cow::Borrowed(i),
        })
        .collect();
    let ins: Vec<&Instruction> = lenient.iter().map(|c| c.as_ref()).collect();
    let start = s.len();
    let mut parts = 0;
    let mut sep = |s: &mut String| {
        if parts > 0 {
            s.push(',');
        }
        parts += 1;
    };
    for i in &ins {
        if let Instruction::ApplyActions(a) = i {
            for x in a {
                sep(s);
                write_action(s, x, n);
            }
        }
    }
    if ins.iter().any(|i| matches!(i, Instruction::ClearActions)) {
        sep(s);
        s.push_str("clear_actions");
    }
    for i in &ins {
        if let Instruction::WriteActions(a) = i {
            sep(s);
            s.push_str("write_actions(");
            write_action_list(s, a, n);
            s.push(')');
        }
    }
    for i in &ins {
        if let Instruction::WriteMetadata { metadata, mask } = i {
            sep(s);
            s.push_str("write_metadata:");
            alt_hex(s, (*metadata).into());
            if *mask != u64::MAX {
                s.push('/');
                alt_hex(s, (*mask).into());
            }
        }
    }
    for i in &ins {
        if let Instruction::GotoTable(t) = i {
            sep(s);
            s.push_str("goto_table:");
            push_table(s, *t, n.tables);
        }
    }
    for i in &ins {
        if let Instruction::Unknown {
            instruction_type,
            payload,
        } = i
        {
            sep(s);
            let _ = write!(s, "instruction({instruction_type},{})", hex_plain(payload));
        }
    }
    if s.len() == start {
        s.push_str("drop");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oxm::Masked;

    #[test]
    fn xreg_prints_as_the_two_registers_it_holds() {
        let m = Match::new(vec![Oxm::XReg {
            index: 0,
            value: Masked::masked(0x0000_002a_0000_0000, 0xffff_ffff_0000_0000),
        }]);
        assert_eq!(format_match(&m), "reg0=0x2a");
        let m = Match::new(vec![Oxm::XReg {
            index: 0,
            value: Masked::exact(0x0000_002a_0000_1234),
        }]);
        assert_eq!(format_match(&m), "reg0=0x2a,reg1=0x1234");
    }

    #[test]
    fn shorthands_and_field_order() {
        let m = Match::new(vec![
            Oxm::Ipv4Src(Masked::masked(
                Ipv4Addr::new(10, 0, 0, 7),
                Ipv4Addr::new(255, 255, 255, 0),
            )),
            Oxm::Reg {
                index: 1,
                value: Masked::exact(3),
            },
            Oxm::EthType(0x0800),
            Oxm::IpProto(6),
            Oxm::TcpDst(Masked::masked(0x50, 0xfff0)),
            Oxm::CtState(Masked::masked(0x21, 0x21)),
        ]);
        assert_eq!(
            format_match_priority(&m, 200),
            "priority=200,ct_state=+new+trk,tcp,reg1=0x3,nw_src=10.0.0.0/24,tp_dst=0x50/0xfff0"
        );
    }

    #[test]
    fn ipv6_like_inet_ntop() {
        let mut s = String::new();
        push_ipv6(
            &mut s,
            u128::from(Ipv6Addr::new(0, 0, 0, 0, 0, 0, 0x0102, 0x0304)),
        );
        assert_eq!(s, "::1.2.3.4");
        s.clear();
        push_ipv6(&mut s, 1);
        assert_eq!(s, "::1");
    }
}
