//! From a packet-in to an [`AuditEntry`]: decode the userdata and the frame, then name the
//! policy, the rule and the pods through a [`RuleResolver`].

use super::packet::{self, PacketError};
use super::AuditError;
use crate::compiler::cluster::pass_reg;
use crate::compiler::userdata::{Disposition, LogUserdata, SecurityEvent};
pub use crate::compiler::Direction;
use crate::compiler::{flow, tables, ClusterRuleInfo};
use crate::model::cluster_policy::Tier;
use crate::model::tiers;
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
    /// The table of its `conj_id` flow.
    pub table: u8,
    /// A ClusterNetworkPolicy's rule: its tier, action and policy priority.
    pub cluster: Option<ClusterRuleInfo>,
}

impl RuleMeta {
    /// Its step in a connection's decision chain: `Admin/Pass <policy>:<rule>` (`:<rule>`
    /// when the rule has a name) for a ClusterNetworkPolicy's, `NetworkPolicy <ns>/<name>`
    /// for a NetworkPolicy's.
    pub fn step(&self) -> String {
        match self.cluster {
            Some(c) => tiers::cluster_step(c.tier, c.action, &self.policy.name, self.rule_name.as_deref()),
            None => tiers::network_policy_step(Some(&self.policy)),
        }
    }
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
    /// The staged rule behind a staged conjunction id (a `WouldAllow`). None known by
    /// default.
    fn staged_rule(&self, conj_id: u32) -> Option<RuleMeta> {
        let _ = conj_id;
        None
    }
    /// The staged policies that would isolate the local pod on `ofport` in `direction` (a
    /// `WouldDrop`; when none would, the staged edits of the policies isolating it today, one
    /// of which edits away the rule allowing it), or, for a `WouldAllow` by no rule, those that
    /// would end its isolation (the staged edits of the enforced policies isolating it),
    /// sorted. Staged policies only: an enforced one is never named. None known by default.
    fn staged_isolating(&self, direction: Direction, ofport: u32, disposition: Disposition) -> Vec<ObjectRef> {
        let _ = (direction, ofport, disposition);
        Vec::new()
    }
}

/// The word the log prints for `d`: `Allow`, `Drop`, `WouldDrop` or `WouldAllow`.
pub(crate) fn disposition_str(d: Disposition) -> &'static str {
    LineDisposition::from(d).as_str()
}

/// What a line says of its connection: what the datapath did with it (`Allow`, `Drop`), that
/// a ClusterNetworkPolicy rule handed it to the next tier (`Pass`), or, for staged policies,
/// how the staged view's verdict differs from the enforced one: `WouldDrop` (enforced allows,
/// the staged view drops) and `WouldAllow` (enforced drops, the staged view allows).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LineDisposition {
    Allow,
    Drop,
    WouldDrop,
    WouldAllow,
    Pass,
}

impl LineDisposition {
    /// The word the log prints.
    pub fn as_str(self) -> &'static str {
        match self {
            LineDisposition::Allow => "Allow",
            LineDisposition::Drop => "Drop",
            LineDisposition::WouldDrop => "WouldDrop",
            LineDisposition::WouldAllow => "WouldAllow",
            LineDisposition::Pass => "Pass",
        }
    }

    /// Whether its line is written at once (a connection's first packet: Allow, and Pass,
    /// which comes before the line of the tier that then decides), not held to aggregate
    /// repeats.
    pub fn written_at_once(self) -> bool {
        matches!(self, LineDisposition::Allow | LineDisposition::Pass)
    }

    /// The disposition named `s` ([`LineDisposition::as_str`]).
    pub fn parse(s: &str) -> Option<LineDisposition> {
        use LineDisposition::*;
        [Allow, Drop, WouldDrop, WouldAllow, Pass].into_iter().find(|d| d.as_str() == s)
    }

    /// Whether it is a staged policy's verdict.
    pub fn is_staged(self) -> bool {
        matches!(self, LineDisposition::WouldDrop | LineDisposition::WouldAllow)
    }
}

impl From<Disposition> for LineDisposition {
    fn from(d: Disposition) -> LineDisposition {
        match d {
            Disposition::Allow => LineDisposition::Allow,
            Disposition::Drop => LineDisposition::Drop,
            Disposition::WouldDrop => LineDisposition::WouldDrop,
            Disposition::WouldAllow => LineDisposition::WouldAllow,
            Disposition::Pass => LineDisposition::Pass,
        }
    }
}

/// What a line is about: a policy's rule, the implicit default drop of an isolated pod
/// (which Antrea prints as the bare kind `K8sNetworkPolicy`), a security event, or a staged
/// policy's verdict.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PolicyRef {
    /// A NetworkPolicy (its Allow rules).
    Policy(ObjectRef),
    /// The default drop of a pod some policy isolates.
    DefaultDrop,
    /// A drop in SpoofGuard or ConntrackState, whatever the policies.
    Security(SecurityEvent),
    /// `WouldAllow`: the StagedNetworkPolicy whose rule would allow the connection.
    Staged(ObjectRef),
    /// `WouldDrop`: the staged view would isolate the pod and allow nothing of this; the
    /// entry's `isolated_by` names the staged policies that would isolate it.
    StagedDrop,
    /// A ClusterNetworkPolicy (its rule's Accept, Deny or Pass), by name.
    Cluster(String),
}

impl PolicyRef {
    /// The kind printed in the policy field of policy lines and default drops.
    pub(crate) const KIND: &'static str = "K8sNetworkPolicy";
    /// The kind printed in the policy field of security events.
    pub(crate) const SECURITY_KIND: &'static str = "SecurityEvent";
    /// The kind printed in the policy field of staged lines.
    pub(crate) const STAGED_KIND: &'static str = "StagedNetworkPolicy";
    /// The kind printed in the policy field of a ClusterNetworkPolicy's lines.
    pub(crate) const CLUSTER_KIND: &'static str = "ClusterNetworkPolicy";

    /// The kind the policy field names.
    pub fn kind(&self) -> &'static str {
        match self {
            PolicyRef::Policy(_) | PolicyRef::DefaultDrop => Self::KIND,
            PolicyRef::Security(_) => Self::SECURITY_KIND,
            PolicyRef::Staged(_) | PolicyRef::StagedDrop => Self::STAGED_KIND,
            PolicyRef::Cluster(_) => Self::CLUSTER_KIND,
        }
    }

    /// The policy, for a policy's line (enforced or staged).
    pub fn policy(&self) -> Option<&ObjectRef> {
        match self {
            PolicyRef::Policy(p) | PolicyRef::Staged(p) => Some(p),
            _ => None,
        }
    }
}

impl std::fmt::Display for PolicyRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PolicyRef::Policy(p) => write!(f, "{}:{}/{}", Self::KIND, p.namespace, p.name),
            PolicyRef::DefaultDrop => f.write_str(Self::KIND),
            PolicyRef::Security(e) => write!(f, "{}:{}", Self::SECURITY_KIND, e.as_str()),
            PolicyRef::Staged(p) => write!(f, "{}:{}/{}", Self::STAGED_KIND, p.namespace, p.name),
            PolicyRef::StagedDrop => f.write_str(Self::STAGED_KIND),
            PolicyRef::Cluster(name) => write!(f, "{}:{name}", Self::CLUSTER_KIND),
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
    pub disposition: LineDisposition,
    /// OpenFlow priority of the rule; `None` for a default drop.
    pub priority: Option<u16>,
    /// The local pod the policy applies to: the destination for ingress, the source for
    /// egress.
    pub(crate) applied_to: Option<ObjectRef>,
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
    /// packet-in was resolved, sorted; for a `WouldDrop`, the staged policies that would
    /// isolate it ([`RuleResolver::staged_isolating`]), sorted; for a `WouldAllow` by no rule,
    /// the staged policies that would end its isolation (the first is the entry's policy);
    /// empty otherwise.
    pub isolated_by: Vec<ObjectRef>,
    /// Source pod, when the model knows the source IP.
    pub(crate) src_pod: Option<ObjectRef>,
    /// Destination pod, when the model knows the destination IP.
    pub(crate) dst_pod: Option<ObjectRef>,
    /// The packet came back from the node through the gateway with a local pod's connection
    /// (after the node's DNAT): a connection to a Service, logged with its real backend.
    pub(crate) via_service: bool,
    /// A ClusterNetworkPolicy's line: its tier and the policy's priority.
    pub tier: Option<(Tier, u16)>,
    /// The connection's decision chain in this direction, tier by tier up to this line
    /// (`["Admin/Pass guard:to-b", "NetworkPolicy x/allow-b"]`): on a ClusterNetworkPolicy's
    /// line, and on a NetworkPolicy's after a Pass; empty on the others (the NetworkPolicies
    /// alone decided).
    pub chain: Vec<String>,
}

/// Builds the entry for one packet-in received at `now`.
pub fn entry_from_packet_in(
    pi: &ofp::packet_in2::PacketIn2,
    resolver: &(impl RuleResolver + ?Sized),
    now: SystemTime,
) -> Result<AuditEntry, AuditError> {
    let userdata = pi.userdata.as_deref().ok_or(AuditError::NoUserdata)?;
    let userdata = LogUserdata::decode(userdata)?;
    let pkt = packet::decode(&pi.packet).map_err(|e: PacketError| AuditError::Packet(e))?;
    let src_pod = resolver.pod_by_ip(pkt.src_ip);
    let dst_pod = resolver.pod_by_ip(pkt.dst_ip);
    let judged = judgement(pi, &userdata, resolver)?;
    let local_end = match judged.direction {
        Direction::Ingress => &dst_pod,
        Direction::Egress => &src_pod,
    };
    let from_gateway = pi.register(3).is_some_and(|flags| flags & flow::from::GATEWAY != 0);
    let via_service = from_gateway && pi.register(2).is_some_and(|o| o != 0);
    // A ClusterNetworkPolicy rule's table is its tier's (the userdata names only its kind).
    let table_id = judged.rule.as_ref().filter(|r| r.cluster.is_some()).map_or(userdata.table_id, |r| r.table);
    let table = match tables::table_name(table_id) {
        Some(name) => Cow::Borrowed(name),
        None => Cow::Owned(table_id.to_string()),
    };
    let chain = chain(pi, &judged, resolver);
    let tier = judged.rule.as_ref().and_then(|r| r.cluster).map(|c| (c.tier, c.policy_priority));
    let (rule_name, priority, log_label) = match judged.rule {
        Some(rule) => (rule.rule_name, Some(rule.priority), rule.log_label),
        None => (None, None, None),
    };
    Ok(AuditEntry {
        time: now,
        table,
        policy: judged.policy,
        rule_name,
        direction: judged.direction,
        disposition: userdata.disposition.into(),
        priority,
        // The pod the tables judged for (by port), not an address's owner in the model.
        applied_to: judged.port.and_then(|o| resolver.pod_by_ofport(o)).or_else(|| local_end.clone()),
        src_ip: pkt.src_ip,
        dst_ip: pkt.dst_ip,
        src_port: pkt.src_port,
        dst_port: pkt.dst_port,
        protocol: pkt.protocol,
        ip_len: pkt.ip_len,
        log_label,
        isolated_by: judged.isolated_by,
        src_pod,
        dst_pod,
        via_service,
        tier,
        chain,
    })
}

/// The decision chain of a verdict line: the Pass rule the packet passed in the direction
/// (its register, set after a Pass line's own copy) and the line's own step; empty when the
/// NetworkPolicies alone decided, and on security and staged lines.
fn chain(pi: &ofp::packet_in2::PacketIn2, judged: &Judgement, resolver: &(impl RuleResolver + ?Sized)) -> Vec<String> {
    let own = match (&judged.policy, &judged.rule) {
        (PolicyRef::Cluster(_) | PolicyRef::Policy(_), Some(rule)) => rule.step(),
        (PolicyRef::DefaultDrop, _) => tiers::network_policy_step(None),
        _ => return Vec::new(),
    };
    let passed = pi
        .register(pass_reg(judged.direction))
        .filter(|id| *id != 0)
        .and_then(|id| resolver.allow_rule(id))
        .filter(|r| r.cluster.is_some());
    match passed {
        Some(pass) => vec![pass.step(), own],
        None if matches!(judged.policy, PolicyRef::Cluster(_)) => vec![own],
        None => Vec::new(),
    }
}

/// What the flow that sent a packet-in judged, and for which port.
struct Judgement {
    policy: PolicyRef,
    rule: Option<RuleMeta>,
    direction: Direction,
    /// The ofport of the pod judged for.
    port: Option<u32>,
    isolated_by: Vec<ObjectRef>,
}

fn judgement(
    pi: &ofp::packet_in2::PacketIn2,
    userdata: &LogUserdata,
    resolver: &(impl RuleResolver + ?Sized),
) -> Result<Judgement, AuditError> {
    let table = userdata.table_id;
    if table == tables::SPOOF_GUARD || table == tables::CONNTRACK_STATE || table == tables::CONNTRACK_QUOTA {
        let event =
            SecurityEvent::from_code(userdata.subject).ok_or(AuditError::UnknownSecurityEvent(userdata.subject))?;
        let is_pod = |o: &u32| resolver.pod_by_ofport(*o).is_some();
        // Sent by a pod's port (everything SpoofGuard sees is), or arrived for a pod: a
        // connection into a pod that a full zone refused names its destination (reg4).
        let sender = pi.in_port().filter(is_pod);
        let direction = if sender.is_some() { Direction::Egress } else { Direction::Ingress };
        let port =
            sender.or_else(|| (table == tables::CONNTRACK_QUOTA).then(|| pi.register(4)).flatten().filter(is_pod));
        return Ok(Judgement {
            policy: PolicyRef::Security(event),
            rule: None,
            direction,
            port,
            isolated_by: Vec::new(),
        });
    }
    let direction = Direction::of_table(table).ok_or(AuditError::UnknownTable(table))?;
    // A default drop's copy names its pod (whose meter it passed); an Allow copy passed its
    // connection's source's meter, so its pod is the direction's register, and its rule is
    // in reg6.
    let port = Some(userdata.subject).filter(|o| *o != 0);
    if Tier::ALL.iter().any(|t| direction.tier_table(*t) == table) {
        // A ClusterNetworkPolicy rule's copy (Accept, Deny or Pass): its rule is in reg6.
        let port = pi.register(judged_register(direction)).filter(|o| *o != 0);
        let id = pi.register(6).unwrap_or(0);
        let rule = resolver.allow_rule(id).filter(|r| r.cluster.is_some()).ok_or(AuditError::UnknownRule(id))?;
        return Ok(Judgement {
            policy: PolicyRef::Cluster(rule.policy.name.to_string()),
            rule: Some(rule),
            direction,
            port,
            isolated_by: Vec::new(),
        });
    }
    Ok(match userdata.disposition {
        // A Pass comes only from a tier's table (above).
        Disposition::Pass => return Err(AuditError::UnknownTable(table)),
        Disposition::Allow => {
            let port = pi.register(judged_register(direction)).filter(|o| *o != 0);
            let id = pi.register(6).unwrap_or(0);
            let rule = resolver.allow_rule(id).ok_or(AuditError::UnknownRule(id))?;
            Judgement {
                policy: PolicyRef::Policy(rule.policy.clone()),
                rule: Some(rule),
                direction,
                port,
                isolated_by: Vec::new(),
            }
        }
        Disposition::Drop => Judgement {
            policy: PolicyRef::DefaultDrop,
            rule: None,
            direction,
            port,
            isolated_by: resolver.isolating_policies(direction, userdata.subject),
        },
        Disposition::WouldDrop | Disposition::WouldAllow => staged_judgement(pi, userdata, direction, resolver)?,
    })
}

/// The register that holds the pod `direction`'s tables judge for: `reg2` (the connection's
/// source) for egress, `reg4` (its destination) for ingress.
fn judged_register(direction: Direction) -> u8 {
    match direction {
        Direction::Egress => 2,
        Direction::Ingress => 4,
    }
}

/// A staged verdict's copy: its pod is the one the direction's tables judged for (`reg2` or
/// `reg4`), a `WouldAllow`'s staged rule is in the direction's rule register (0: the staged
/// view does not isolate the pod).
fn staged_judgement(
    pi: &ofp::packet_in2::PacketIn2,
    userdata: &LogUserdata,
    direction: Direction,
    resolver: &(impl RuleResolver + ?Sized),
) -> Result<Judgement, AuditError> {
    let port = pi.register(judged_register(direction)).filter(|o| *o != 0);
    let isolated_by = |d| port.map(|o| resolver.staged_isolating(direction, o, d)).unwrap_or_default();
    if userdata.disposition == Disposition::WouldDrop {
        return Ok(Judgement {
            policy: PolicyRef::StagedDrop,
            rule: None,
            direction,
            port,
            isolated_by: isolated_by(Disposition::WouldDrop),
        });
    }
    let id = pi.register(crate::compiler::staged::rule_reg(direction)).unwrap_or(0);
    if id == 0 {
        let ended_by = isolated_by(Disposition::WouldAllow);
        let policy = ended_by.first().cloned().map_or(PolicyRef::StagedDrop, PolicyRef::Staged);
        return Ok(Judgement { policy, rule: None, direction, port, isolated_by: ended_by });
    }
    let rule = resolver.staged_rule(id).ok_or(AuditError::UnknownStagedRule(id))?;
    Ok(Judgement {
        policy: PolicyRef::Staged(rule.policy.clone()),
        rule: Some(rule),
        direction,
        port,
        isolated_by: Vec::new(),
    })
}
