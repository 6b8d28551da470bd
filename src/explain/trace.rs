//! The same question put to OVS: the `ofproto/trace` flow of a connection's first packet, and
//! what the trace's datapath actions say about it. Pure: running `ovs-appctl` is the
//! caller's.
//!
//! The pipeline sends IP through `ct()` twice (ConntrackState recirculates; ConntrackCommit
//! commits and continues). `ofproto/trace` answers each recirculation with the next
//! `--ct-next` state, so one `--ct-next trk,new` makes the trace the first packet of a new
//! connection, as npagent's rules see it.

use super::query::protocol_name;
use crate::model::Protocol;
use serde::Serialize;
use std::net::IpAddr;

/// The conntrack state `ofproto/trace` gives the packet after `ct()`.
pub(crate) const CT_NEXT: &str = "trk,new";

/// The packet to trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TracePacket {
    pub in_port: u32,
    pub src_mac: [u8; 6],
    pub dst_mac: [u8; 6],
    pub src: IpAddr,
    pub dst: IpAddr,
    /// Protocol and destination port; `None`: a bare IP packet.
    pub transport: Option<(Protocol, u16)>,
}

/// The source port traced packets come from.
const SRC_PORT: u16 = 40000;

/// The packet in `ofproto/trace`'s flow syntax (a TCP SYN, a UDP or SCTP packet), with the
/// conntrack tuple of the new connection it opens: `ofproto/trace` gives a `ct()` a state
/// (`--ct-next`) but no tuple, and the policy tables judge the tuple.
pub fn flow(p: &TracePacket) -> String {
    let v6 = p.src.is_ipv6();
    let (src_key, dst_key) = if v6 { ("ipv6_src", "ipv6_dst") } else { ("nw_src", "nw_dst") };
    let l4 = match p.transport {
        None => (if v6 { "ipv6" } else { "ip" }).to_string(),
        Some((proto, port)) => {
            let name = protocol_name(proto).to_lowercase();
            let six = if v6 { "6" } else { "" };
            let syn = if proto == Protocol::Tcp { ",tcp_flags=syn" } else { "" };
            format!("{name}{six},{name}_src={SRC_PORT},{name}_dst={port}{syn}")
        }
    };
    let ttl = if v6 { "ipv6_hlimit=64" } else { "nw_ttl=64" };
    let ct_prefix = if v6 { "ct_ipv6" } else { "ct_nw" };
    let ct_transport = match p.transport {
        None => String::new(),
        Some((proto, port)) => {
            format!(",ct_nw_proto={},ct_tp_src={SRC_PORT},ct_tp_dst={port}", proto.number())
        }
    };
    format!(
        "in_port={},{l4},dl_src={},dl_dst={},{src_key}={},{dst_key}={},{ttl},ct_state=new|trk,{ct_prefix}_src={},{ct_prefix}_dst={}{ct_transport}",
        p.in_port,
        mac(&p.src_mac),
        mac(&p.dst_mac),
        p.src,
        p.dst,
        p.src,
        p.dst
    )
}

fn mac(m: &[u8; 6]) -> String {
    m.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
}

/// The final `Datapath actions:` of a trace (after the last recirculation).
pub fn datapath_actions(trace: &str) -> Option<&str> {
    trace.lines().filter_map(|l| l.trim().strip_prefix("Datapath actions:")).map(str::trim).next_back()
}

/// Whether datapath actions deliver the packet: a bare port number at the top level (not
/// inside `userspace(...)`, the copy to npagent, or `ct(...)`).
pub fn outputs(actions: &str) -> bool {
    let mut depth = 0usize;
    let mut top = String::new();
    for c in actions.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            _ if depth == 0 => top.push(c),
            _ => {}
        }
    }
    top.split(',').map(str::trim).any(|t| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()))
}

/// OVS's verdict beside npagent's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TraceVerdict {
    pub(crate) flow: String,
    pub(crate) datapath_actions: String,
    /// The datapath delivers the packet.
    pub allowed: bool,
    /// And that is what the explanation says.
    pub(crate) agrees: bool,
}

/// Reads a trace's verdict; `None` when it has no datapath actions.
pub fn verdict(flow: String, trace: &str, explained_allowed: bool) -> Option<TraceVerdict> {
    let actions = datapath_actions(trace)?;
    let allowed = outputs(actions);
    Some(TraceVerdict { flow, datapath_actions: actions.to_string(), allowed, agrees: allowed == explained_allowed })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkt(transport: Option<(Protocol, u16)>, v6: bool) -> TracePacket {
        let (src, dst) = if v6 { ("fd00::1", "fd00::2") } else { ("10.0.0.1", "10.0.0.2") };
        TracePacket {
            in_port: 3,
            src_mac: [0x0a, 0x58, 10, 0, 0, 1],
            dst_mac: [2, 0, 0, 0, 0, 9],
            src: src.parse().unwrap(),
            dst: dst.parse().unwrap(),
            transport,
        }
    }

    #[test]
    fn flows() {
        assert_eq!(
            flow(&pkt(Some((Protocol::Tcp, 80)), false)),
            "in_port=3,tcp,tcp_src=40000,tcp_dst=80,tcp_flags=syn,dl_src=0a:58:0a:00:00:01,dl_dst=02:00:00:00:00:09,nw_src=10.0.0.1,nw_dst=10.0.0.2,nw_ttl=64,ct_state=new|trk,ct_nw_src=10.0.0.1,ct_nw_dst=10.0.0.2,ct_nw_proto=6,ct_tp_src=40000,ct_tp_dst=80"
        );
        assert_eq!(
            flow(&pkt(Some((Protocol::Udp, 53)), true)),
            "in_port=3,udp6,udp_src=40000,udp_dst=53,dl_src=0a:58:0a:00:00:01,dl_dst=02:00:00:00:00:09,ipv6_src=fd00::1,ipv6_dst=fd00::2,ipv6_hlimit=64,ct_state=new|trk,ct_ipv6_src=fd00::1,ct_ipv6_dst=fd00::2,ct_nw_proto=17,ct_tp_src=40000,ct_tp_dst=53"
        );
        assert!(flow(&pkt(None, false)).contains(",ip,"));
    }

    #[test]
    fn verdicts() {
        let trace = "Flow: ...\nDatapath actions: ct(zone=65520),recirc(0x1)\n\n...\nDatapath actions: ct(commit,zone=65520),3\n";
        assert_eq!(datapath_actions(trace), Some("ct(commit,zone=65520),3"));
        assert!(outputs("ct(commit,zone=65520),3"));
        assert!(!outputs("userspace(pid=0,controller(reason=1,meter_id=0)),drop"));
        assert!(!outputs("drop"));
        assert!(!outputs("ct(zone=65520),recirc(0x1)"));
        assert!(outputs("3"));
        assert!(outputs("set(eth(dst=0a:58:0a:0a:01:0b)),2,userspace(pid=0)"));
        assert!(!outputs(
            "userspace(pid=0,controller(reason=1,flags=1,recirc_id=1,rule_cookie=0,controller_id=0,max_len=65535))"
        ));
        assert!(!outputs(""));
        let v = verdict("f".into(), trace, false).unwrap();
        assert!(v.allowed && !v.agrees);
        assert_eq!(verdict("f".into(), "no actions", true), None);
    }
}
