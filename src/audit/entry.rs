//! From a packet-in to an [`AuditEntry`]: decode the userdata and the frame, then name the
//! policy, the rule and the pods through a [`RuleResolver`].

use super::packet::{self, PacketError};
use super::AuditError;
use crate::compiler::userdata::{Disposition, LogUserdata};
pub use crate::compiler::Direction;
use crate::compiler::{flow, tables};
use crate::model::ObjectRef;
use std::borrow::Cow;
use std::net::IpAddr;
use std::time::SystemTime;

/// What the compiler's rule table knows about an Allow rule (one conjunction).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RuleMeta {
    /// The NetworkPolicy the rule belongs to.
    pub policy: ObjectRef,
    /// A rule name, when the policy gives one.
    pub rule_name: Option<String>,
    /// OpenFlow priority of the conjunction flow (190 for Kubernetes NetworkPolicy rules).
    pub priority: u16,
    /// User-defined log label, if any.
    pub log_label: Option<String>,
}

/// Answers the questions a packet-in raises. The agent implements it over the compiler's rule
/// table and the model; it keeps rules deleted a moment ago resolvable for a grace period, so
/// a packet-in that raced a policy deletion still names its policy.
pub trait RuleResolver {
    /// The Allow rule behind a conjunction id.
    fn allow_rule(&self, conj_id: u32) -> Option<RuleMeta>;
    /// The local pod attached to a bridge port.
    fn pod_by_ofport(&self, ofport: u32) -> Option<ObjectRef>;
    /// Any pod the model knows with this IP (local or remote).
    fn pod_by_ip(&self, ip: IpAddr) -> Option<ObjectRef>;
    /// The policies isolating the local pod on `ofport` in `direction`, sorted: why its
    /// default drop exists. None known by default.
    fn isolating_policies(&self, direction: Direction, ofport: u32) -> Vec<ObjectRef> {
        let _ = (direction, ofport);
        Vec::new()
    }
}

/// `Allow` or `Drop`.
pub fn disposition_str(d: Disposition) -> &'static str {
    match d {
        Disposition::Allow => "Allow",
        Disposition::Drop => "Drop",
    }
}

/// The policy a line is about. `policy: None` is the implicit default drop of an isolated pod,
/// which Antrea prints as the bare kind `K8sNetworkPolicy`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PolicyRef {
    pub policy: Option<ObjectRef>,
}

impl PolicyRef {
    /// The kind printed in the policy field.
    pub const KIND: &'static str = "K8sNetworkPolicy";
}

impl std::fmt::Display for PolicyRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.policy {
            Some(p) => write!(f, "{}:{}/{}", Self::KIND, p.namespace, p.name),
            None => f.write_str(Self::KIND),
        }
    }
}

/// One audited packet.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AuditEntry {
    /// When npagent received the packet-in.
    pub time: SystemTime,
    /// Name of the table of the logging flow (its id in decimal if the table is unknown).
    pub table: Cow<'static, str>,
    pub policy: PolicyRef,
    pub rule_name: Option<String>,
    pub direction: Direction,
    pub disposition: Disposition,
    /// OpenFlow priority of the rule; `None` for a default drop.
    pub priority: Option<u16>,
    /// The local pod the policy applies to: the destination for ingress, the source for
    /// egress.
    pub applied_to: Option<ObjectRef>,
    pub src_ip: IpAddr,
    pub dst_ip: IpAddr,
    /// TCP, UDP and SCTP only.
    pub src_port: Option<u16>,
    pub dst_port: Option<u16>,
    /// IP protocol number; see [`packet::protocol_name`].
    pub protocol: u8,
    /// IPv4 total length; IPv6 payload length + 40.
    pub ip_len: u32,
    pub log_label: Option<String>,
    /// For a default drop, the policies isolating `applied_to` in this direction when the
    /// packet-in was resolved, sorted; empty otherwise.
    pub isolated_by: Vec<ObjectRef>,
    /// Source pod, when the model knows the source IP.
    pub src_pod: Option<ObjectRef>,
    /// Destination pod, when the model knows the destination IP.
    pub dst_pod: Option<ObjectRef>,
    /// The packet came back from the node through the gateway with a local pod's connection
    /// (after the node's DNAT): a connection to a Service, logged with its real backend.
    pub via_service: bool,
}

/// Builds the entry for one packet-in received at `now`.
pub fn entry_from_packet_in(
    pi: &ofp::packet_in2::PacketIn2,
    resolver: &(impl RuleResolver + ?Sized),
    now: SystemTime,
) -> Result<AuditEntry, AuditError> {
    let userdata = pi.userdata.as_deref().ok_or(AuditError::NoUserdata)?;
    let userdata = LogUserdata::decode(userdata)?;
    let direction = Direction::of_table(userdata.table_id).ok_or(AuditError::UnknownTable(userdata.table_id))?;
    let pkt = packet::decode(&pi.packet).map_err(|e: PacketError| AuditError::Packet(e))?;
    let src_pod = resolver.pod_by_ip(pkt.src_ip);
    let dst_pod = resolver.pod_by_ip(pkt.dst_ip);
    let local_end = match direction {
        Direction::Ingress => &dst_pod,
        Direction::Egress => &src_pod,
    };
    // The pod the policy tables judged for: the connection's end the pipeline named by port
    // (reg2 its source, reg4 its destination), not an address's owner in the model.
    let judged_port = pi.register(match direction {
        Direction::Ingress => 4,
        Direction::Egress => 2,
    });
    let (policy, rule_name, priority, log_label, applied_to, isolated_by) = match userdata.disposition {
        Disposition::Allow => {
            let rule = resolver.allow_rule(userdata.rule_id).ok_or(AuditError::UnknownRule(userdata.rule_id))?;
            let applied_to = judged_port.and_then(|o| resolver.pod_by_ofport(o)).or_else(|| local_end.clone());
            (Some(rule.policy), rule.rule_name, Some(rule.priority), rule.log_label, applied_to, Vec::new())
        }
        Disposition::Drop => {
            // A default drop's rule id is the ofport it matches.
            let applied_to = resolver.pod_by_ofport(userdata.rule_id).or_else(|| local_end.clone());
            (None, None, None, None, applied_to, resolver.isolating_policies(direction, userdata.rule_id))
        }
    };
    let from_gateway = pi.register(3).is_some_and(|flags| flags & flow::from::GATEWAY != 0);
    let via_service = from_gateway && pi.register(2).is_some_and(|o| o != 0);
    let table = match tables::table_name(userdata.table_id) {
        Some(name) => Cow::Borrowed(name),
        None => Cow::Owned(userdata.table_id.to_string()),
    };
    Ok(AuditEntry {
        time: now,
        table,
        policy: PolicyRef { policy },
        rule_name,
        direction,
        disposition: userdata.disposition,
        priority,
        applied_to,
        src_ip: pkt.src_ip,
        dst_ip: pkt.dst_ip,
        src_port: pkt.src_port,
        dst_port: pkt.dst_port,
        protocol: pkt.protocol,
        ip_len: pkt.ip_len,
        log_label,
        isolated_by,
        src_pod,
        dst_pod,
        via_service,
    })
}
