//! Why a connection is allowed or dropped: `npagent explain`, answered from the model and the
//! compiler's own state. Pure: no I/O.
//!
//! Each direction is answered where the pipeline decides it: the egress of the source when it
//! is a local pod (EgressRule/EgressDefaultRule by `reg2`), the ingress of the destination
//! when it is one (IngressRule/IngressDefaultRule by `reg4`). A direction is dropped when some
//! policy isolates the pod ([`Compiler::isolating`]) and the connection's first packet
//! completes none of the table's conjunctions ([`packet::completed_conjunctions`], which reads
//! the compiled flows). The connection is allowed iff both directions allow it.
//!
//! With StagedNetworkPolicies, the same question is also answered against the staged view and
//! compared ([`staged`]).

pub(crate) mod packet;
pub(crate) mod query;
pub(crate) mod render;
pub mod staged;
pub mod trace;

use crate::compiler::{flows_text, Compiler, Direction, FlowKey, FlowTable, FlowValue};
use crate::model::cluster_policy::{Action, Tier};
use crate::model::tiers;
use crate::model::{LocalPort, Model, ObjectRef, Pod, PortRef};
use ofp::Oxm;
use packet::Packet;
pub use query::{DestinationPort, EndpointSpec};
use serde::Serialize;
use std::net::IpAddr;

/// What can make a question unanswerable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExplainError {
    #[error("{0:?} is neither NAMESPACE/POD nor an IP address")]
    BadEndpoint(String),
    #[error("bad port {0:?}: expected PORT/PROTOCOL or PROTOCOL/PORT with PROTOCOL tcp, udp or sctp and PORT 1-65535 or a port name (80/TCP, udp/53, http/TCP)")]
    BadPort(String),
    #[error("unknown pod {0}")]
    UnknownPod(ObjectRef),
    #[error("pod {0} has no IP address")]
    NoAddress(ObjectRef),
    #[error("{from} and {to} have no addresses of the same IP family")]
    FamilyMismatch { from: String, to: String },
    #[error("named port {name:?}: the destination {to} is not a pod, so the name cannot be resolved")]
    NamedPortNeedsPod { name: String, to: String },
    #[error("pod {pod} has no {protocol} container port named {name:?}")]
    NoSuchNamedPort { pod: ObjectRef, protocol: &'static str, name: String },
}

/// The question: from, to, and the destination port (`None`: any port; only rules that allow
/// every port and protocol count).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    pub from: EndpointSpec,
    pub to: EndpointSpec,
    pub port: Option<DestinationPort>,
}

/// The pod an endpoint stands for, if any: a named pod (which must exist), or the pod holding
/// an address.
pub(crate) fn endpoint_pod<'m>(
    model: &'m Model,
    spec: &EndpointSpec,
) -> Result<Option<(&'m ObjectRef, &'m Pod)>, ExplainError> {
    match spec {
        EndpointSpec::Pod(r) => {
            let (r, pod) = model.pods.get_key_value(r).ok_or_else(|| ExplainError::UnknownPod(r.clone()))?;
            Ok(Some((r, pod)))
        }
        EndpointSpec::Ip(ip) => Ok(model.pods.iter().find(|(_, p)| p.ips.contains(ip)).map(|(r, pod)| (r, &**pod))),
    }
}

/// The model's bridge ports plus, for each of `pods` that has none, a stand-in port (above
/// the highest real ofport), so that the compile covers it as if it were local. Returns the
/// ports and the pods that got a stand-in.
pub fn ports_with_stand_ins(model: &Model, pods: &[&ObjectRef]) -> (Vec<LocalPort>, Vec<ObjectRef>) {
    let mut ports: Vec<LocalPort> = model.ports.values().cloned().collect();
    let mut next = model.ports.keys().next_back().copied().unwrap_or(0);
    let mut stand_ins = Vec::new();
    for r in pods {
        if ports.iter().any(|p| &p.pod == *r) || stand_ins.contains(*r) {
            continue;
        }
        let Some(pod) = model.pods.get(*r) else { continue };
        next = next.saturating_add(1);
        let [a, b, c, d] = next.to_be_bytes();
        ports.push(LocalPort {
            ofport: next,
            interface: format!("explain{next}"),
            pod: (*r).clone(),
            ips: pod.ips.clone(),
            // A locally administered unicast address.
            mac: Some([0x02, 0x00, a, b, c, d]),
        });
        stand_ins.push((*r).clone());
    }
    (ports, stand_ins)
}

/// One end of the connection as resolved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConnectionEnd {
    /// `ns/name` for a pod, else the address.
    pub name: String,
    /// Whether it is a pod of the model.
    pub(crate) pod: bool,
    pub(crate) ip: IpAddr,
    /// Its bridge port, when it is a local pod.
    pub(crate) ofport: Option<u32>,
}

/// The destination port as resolved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Port {
    pub protocol: &'static str,
    pub port: u16,
    /// The container port name it was given as.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// A rule that allows the connection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AllowingRule {
    /// `namespace/name` of the NetworkPolicy.
    pub policy: String,
    pub direction: &'static str,
    /// Index in the policy's `spec.ingress` or `spec.egress`.
    pub rule_index: u32,
    pub(crate) conjunction_id: u32,
    /// Cookie of its `conj_id` flow, in hex.
    pub cookie: String,
    /// The ports of its port group (`TCP/80`, `UDP/1000-2000`); empty: every port.
    pub ports: Vec<String>,
    /// The desired flows that make it up, in `ovs-ofctl dump-flows` text: the clause flows
    /// the packet matched and the `conj_id` flow.
    pub flows: Vec<String>,
}

/// A ClusterNetworkPolicy rule a direction met: the one that decided it, or a Pass on the way.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TierRule {
    /// `Admin` or `Baseline`.
    pub tier: &'static str,
    /// The ClusterNetworkPolicy's name.
    pub policy: String,
    /// Its `spec.priority` in its tier.
    pub policy_priority: u16,
    /// The rule's name, when it has one.
    pub rule: Option<String>,
    /// Index in the policy's `spec.ingress` or `spec.egress`.
    pub rule_index: u32,
    /// `Accept`, `Deny` or `Pass`.
    pub action: &'static str,
    pub(crate) conjunction_id: u32,
    /// The OpenFlow priority of its flows (the tier's order).
    pub priority: u16,
    /// Cookie of its `conj_id` flow, in hex.
    pub cookie: String,
    /// The desired flows that make it up, as for [`AllowingRule::flows`].
    pub flows: Vec<String>,
    /// Its step in the decision chain.
    #[serde(skip)]
    step: String,
}

/// The answer for one direction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "verdict", rename_all = "kebab-case")]
pub enum Verdict {
    /// A ClusterNetworkPolicy rule decided (Accept or Deny), in the Admin tier before any
    /// NetworkPolicy or in the Baseline tier for a pod no NetworkPolicy isolates.
    DecidedByTier { rule: TierRule },
    /// This end is not a local pod: nothing in this direction is enforced here.
    NotEnforced { reason: String },
    /// No policy selects the pod for this direction: allowed by default.
    NotIsolated,
    /// Isolated, and these rules of the isolating policies allow the connection.
    Allowed { isolated_by: Vec<String>, rules: Vec<AllowingRule> },
    /// Isolated by these policies, and no rule of theirs allows the connection.
    Dropped { isolated_by: Vec<String> },
    /// The node's own connection into its pod: always allowed (Kubernetes: "the only allowed
    /// connections into the pod are those from the pod's node and those allowed by the
    /// ingress list").
    FromTheNode { reason: String },
}

impl Verdict {
    /// Whether this direction lets the connection through.
    pub(crate) fn allows(&self) -> bool {
        match self {
            Verdict::Dropped { .. } => false,
            Verdict::DecidedByTier { rule } => rule.action != "Deny",
            _ => true,
        }
    }
}

/// The answer for one direction, with the pod it is about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DirectionAnswer {
    pub direction: &'static str,
    /// The endpoint whose policies decide it (the source for egress, the destination for
    /// ingress).
    pub endpoint: String,
    #[serde(flatten)]
    pub verdict: Verdict,
    /// The Pass rules the connection met on the way (the Admin tier's, then the Baseline
    /// tier's).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub passed: Vec<TierRule>,
    /// The decision chain, tier by tier, as the audit log's JSON lines write it; empty when
    /// no ClusterNetworkPolicy rule spoke.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub chain: Vec<String>,
}

/// The whole answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Explanation {
    pub from: ConnectionEnd,
    pub to: ConnectionEnd,
    pub port: Option<Port>,
    /// Both directions allow the connection.
    pub allowed: bool,
    pub egress: DirectionAnswer,
    pub ingress: DirectionAnswer,
}

/// Answers `q` against `model` and `compiler`, which compiled `model` (with the endpoints'
/// pods as local ports where they should be explained as local; see [`ports_with_stand_ins`]).
pub fn explain(model: &Model, compiler: &Compiler, q: &Query) -> Result<Explanation, ExplainError> {
    let from_pod = endpoint_pod(model, &q.from)?;
    let to_pod = endpoint_pod(model, &q.to)?;
    let (src, dst) = addresses(&q.from, from_pod, &q.to, to_pod)?;
    let port = resolve_port(q.port.as_ref(), &q.to, to_pod)?;
    let from = connection_end(model, from_pod, src);
    let to = connection_end(model, to_pod, dst);
    let pkt = Packet {
        src_port: from.ofport,
        dst_port: to.ofport,
        src,
        dst,
        transport: q.port.as_ref().zip(port.as_ref()).map(|(spec, p)| (spec.protocol.number(), p.port)),
    };
    let mut egress = answer(compiler, Direction::Egress, &from, &pkt);
    let mut ingress = answer(compiler, Direction::Ingress, &to, &pkt);
    let node = &model.node;
    if node.gateway.is_some() {
        if let Some(range) = node.service_cidrs.iter().find(|c| c.contains(&dst)).filter(|_| from.ofport.is_some()) {
            let reason = format!(
                "{dst} is in the Service range {}/{}: the connection goes to the node without a verdict, and \
                 is judged when the node sends it back after DNAT, against the backend (explain --to the backend)",
                range.addr, range.prefix
            );
            egress.verdict = Verdict::NotEnforced { reason: reason.clone() };
            ingress.verdict = Verdict::NotEnforced { reason };
        } else if from_pod.is_none() && node.own_addresses().contains(&src) && to.ofport.is_some() {
            let reason = format!("{src} is the node's own address (--gateway-ip, --node-ip), by the gateway");
            ingress.verdict = Verdict::FromTheNode { reason };
        }
    }
    let allowed = egress.verdict.allows() && ingress.verdict.allows();
    Ok(Explanation { from, to, port, allowed, egress, ingress })
}

/// The source and destination addresses: the given ones, or a pod's address of the other
/// end's family (IPv4 first when both are pods).
fn addresses(
    from: &EndpointSpec,
    from_pod: Option<(&ObjectRef, &Pod)>,
    to: &EndpointSpec,
    to_pod: Option<(&ObjectRef, &Pod)>,
) -> Result<(IpAddr, IpAddr), ExplainError> {
    let candidates = |spec: &EndpointSpec, pod: Option<(&ObjectRef, &Pod)>| -> Result<Vec<IpAddr>, ExplainError> {
        match (spec, pod) {
            (EndpointSpec::Ip(ip), _) => Ok(vec![*ip]),
            (EndpointSpec::Pod(_), Some((r, p))) if p.ips.is_empty() => Err(ExplainError::NoAddress(r.clone())),
            (EndpointSpec::Pod(_), Some((_, p))) => {
                let mut ips = p.ips.clone();
                ips.sort_by_key(|ip| ip.is_ipv6());
                Ok(ips)
            }
            (EndpointSpec::Pod(r), None) => Err(ExplainError::UnknownPod(r.clone())),
        }
    };
    let (srcs, dsts) = (candidates(from, from_pod)?, candidates(to, to_pod)?);
    srcs.iter()
        .find_map(|s| dsts.iter().find(|d| d.is_ipv4() == s.is_ipv4()).map(|d| (*s, *d)))
        .ok_or_else(|| ExplainError::FamilyMismatch { from: spec_name(from), to: spec_name(to) })
}

fn spec_name(s: &EndpointSpec) -> String {
    match s {
        EndpointSpec::Pod(r) => r.to_string(),
        EndpointSpec::Ip(ip) => ip.to_string(),
    }
}

/// The port number: as given, or the destination pod's container port of that name and
/// protocol.
fn resolve_port(
    spec: Option<&DestinationPort>,
    to: &EndpointSpec,
    to_pod: Option<(&ObjectRef, &Pod)>,
) -> Result<Option<Port>, ExplainError> {
    let Some(spec) = spec else { return Ok(None) };
    let protocol = query::protocol_name(spec.protocol);
    match &spec.port {
        PortRef::Number(n) => Ok(Some(Port { protocol, port: *n, name: None })),
        PortRef::Name(name) => {
            let Some((r, pod)) = to_pod else {
                return Err(ExplainError::NamedPortNeedsPod { name: name.clone(), to: spec_name(to) });
            };
            let cp =
                pod.ports.iter().find(|cp| cp.name.as_deref() == Some(name.as_str()) && cp.protocol == spec.protocol);
            match cp {
                Some(cp) => Ok(Some(Port { protocol, port: cp.port, name: Some(name.clone()) })),
                None => Err(ExplainError::NoSuchNamedPort { pod: r.clone(), protocol, name: name.clone() }),
            }
        }
    }
}

fn connection_end(model: &Model, pod: Option<(&ObjectRef, &Pod)>, ip: IpAddr) -> ConnectionEnd {
    match pod {
        Some((r, _)) => {
            let mine = || model.ports.values().filter(|p| &p.pod == r);
            let ofport = mine().find(|p| p.ips.contains(&ip)).or_else(|| mine().next()).map(|p| p.ofport);
            ConnectionEnd { name: r.to_string(), pod: true, ip, ofport }
        }
        None => ConnectionEnd { name: ip.to_string(), pod: false, ip, ofport: None },
    }
}

fn answer(compiler: &Compiler, direction: Direction, end: &ConnectionEnd, pkt: &Packet) -> DirectionAnswer {
    let mut passed = Vec::new();
    let verdict = match (end.pod, end.ofport) {
        (false, _) => Verdict::NotEnforced { reason: format!("{} is not a pod", end.name) },
        (true, None) => Verdict::NotEnforced { reason: format!("{} has no port on this bridge", end.name) },
        (true, Some(ofport)) => tiers_answer(compiler, direction, ofport, pkt, &mut passed),
    };
    let chain = chain(&verdict, &passed);
    DirectionAnswer { direction: direction.as_str(), endpoint: end.name.clone(), verdict, passed, chain }
}

/// The Admin tier, the NetworkPolicies, the Baseline tier, in turn, for the local pod on
/// `ofport`; the Pass rules met go to `passed`.
fn tiers_answer(
    compiler: &Compiler,
    direction: Direction,
    ofport: u32,
    pkt: &Packet,
    passed: &mut Vec<TierRule>,
) -> Verdict {
    if let Some(rule) = tier_rule(compiler, Tier::Admin, direction, pkt) {
        if rule.action != Action::Pass.as_str() {
            return Verdict::DecidedByTier { rule };
        }
        passed.push(rule);
    }
    let isolated_by: Vec<String> = compiler.isolating(direction, ofport).map(ToString::to_string).collect();
    if !isolated_by.is_empty() {
        let rules = allowing_rules(compiler, direction, pkt);
        return if rules.is_empty() {
            Verdict::Dropped { isolated_by }
        } else {
            Verdict::Allowed { isolated_by, rules }
        };
    }
    match tier_rule(compiler, Tier::Baseline, direction, pkt) {
        Some(rule) if rule.action != Action::Pass.as_str() => Verdict::DecidedByTier { rule },
        Some(rule) => {
            passed.push(rule);
            Verdict::NotIsolated
        }
        None => Verdict::NotIsolated,
    }
}

/// The decision chain of a direction's answer: its Pass rules, then what decided; empty when
/// no ClusterNetworkPolicy rule spoke.
fn chain(verdict: &Verdict, passed: &[TierRule]) -> Vec<String> {
    let step = |r: &TierRule| r.step.clone();
    let last = match verdict {
        Verdict::DecidedByTier { rule } => Some(step(rule)),
        _ if passed.is_empty() => return Vec::new(),
        Verdict::Allowed { rules, .. } => rules.first().map(|r| format!("NetworkPolicy {}", r.policy)),
        Verdict::Dropped { .. } => Some(tiers::network_policy_step(None)),
        _ => None,
    };
    passed.iter().map(step).chain(last).collect()
}

/// The first rule of `tier` (its highest-priority complete conjunction) that the packet meets
/// in `direction`.
fn tier_rule(compiler: &Compiler, tier: Tier, direction: Direction, pkt: &Packet) -> Option<TierRule> {
    let flows = compiler.flows();
    let table = direction.tier_table(tier);
    let (rule, completed) = packet::completed_conjunctions(flows, table, pkt)
        .into_iter()
        .filter_map(|c| compiler.rules().rule(c.id).filter(|r| !r.deleted).map(|r| (r, c)))
        .max_by_key(|(r, _)| r.priority)?;
    let info = rule.cluster?;
    let conj = first_packet_conj_flow(flows, table, completed.id)?;
    Some(TierRule {
        tier: info.tier.as_str(),
        policy: rule.policy.name.to_string(),
        policy_priority: info.policy_priority,
        rule: rule.name.clone(),
        rule_index: rule.index,
        action: info.action.as_str(),
        conjunction_id: completed.id,
        priority: rule.priority,
        cookie: format!("{:#x}", rule.cookie),
        flows: made_of(compiler, &completed, conj),
        step: tiers::cluster_step(info.tier, info.action, &rule.policy.name, rule.name.as_deref()),
    })
}

/// The `conj_id` flow of conjunction `id` in `table` that a connection's first packet meets
/// (with logging, the one of `ct_state=+new`; a Deny's matches every packet).
fn first_packet_conj_flow(flows: &FlowTable, table: u8, id: u32) -> Option<(&FlowKey, &FlowValue)> {
    flows.iter().find(|(k, _)| {
        k.table == table
            && k.match_.fields.contains(&Oxm::ConjId(id))
            && k.match_.fields.iter().all(|f| matches!(f, Oxm::ConjId(_)) || packet::first_packet_state(f))
    })
}

/// The flows of a conjunction, in `ovs-ofctl dump-flows` text: the clause flows the packet
/// matched and its `conj_id` flow.
fn made_of(compiler: &Compiler, c: &packet::Completed, conj: (&FlowKey, &FlowValue)) -> Vec<String> {
    let flows = compiler.flows();
    let mut made_of: FlowTable =
        c.clauses.iter().filter_map(|k| flows.get_key_value(k)).map(|(k, v)| (k.clone(), v.clone())).collect();
    made_of.insert(conj.0.clone(), conj.1.clone());
    flows_text(&made_of, &compiler.port_names()).into_iter().map(|l| l.trim_start().to_string()).collect()
}

/// The rules of `direction` whose conjunction the packet completes.
fn allowing_rules(compiler: &Compiler, direction: Direction, pkt: &Packet) -> Vec<AllowingRule> {
    let flows = compiler.flows();
    let table = direction.rule_table();
    packet::completed_conjunctions(flows, table, pkt)
        .into_iter()
        .filter_map(|c| {
            let rule = compiler.rules().rule(c.id).filter(|r| !r.deleted)?;
            let conj_flow = first_packet_conj_flow(flows, table, c.id)?;
            Some(AllowingRule {
                policy: rule.policy.to_string(),
                direction: rule.direction.as_str(),
                rule_index: rule.index,
                conjunction_id: c.id,
                cookie: format!("{:#x}", rule.cookie),
                ports: rule.ports.iter().map(render::port_range).collect(),
                flows: made_of(compiler, &c, conj_flow),
            })
        })
        .collect()
}

#[cfg(test)]
#[cfg(feature = "testing")]
mod tests {
    use super::*;
    use crate::compiler::{compile, synthetic::small_model, Config, IdAllocator};

    fn ask(from: &str, to: &str) -> Explanation {
        let model = small_model();
        let compiler = compile(&model, Config::default(), IdAllocator::new(60), 0);
        let q = Query { from: from.parse().unwrap(), to: to.parse().unwrap(), port: Some("80/TCP".parse().unwrap()) };
        explain(&model, &compiler, &q).unwrap()
    }

    #[test]
    fn the_nodes_own_connections_are_allowed_into_isolated_pods() {
        // x/a is isolated for ingress (allow-b); the gateway's address is the node's own.
        let e = ask("10.0.0.254", "x/a");
        assert!(e.allowed, "{e:?}");
        assert!(
            matches!(&e.ingress.verdict, Verdict::FromTheNode { reason } if reason.contains("node's own")),
            "{e:?}"
        );
        // Any other address is judged by x/a's policy.
        let e = ask("10.9.9.9", "x/a");
        assert!(!e.allowed && matches!(e.ingress.verdict, Verdict::Dropped { .. }), "{e:?}");
    }

    #[test]
    fn a_service_connection_is_judged_after_dnat() {
        let e = ask("y/d", "10.96.0.10");
        assert!(e.allowed, "{e:?}");
        for v in [&e.egress.verdict, &e.ingress.verdict] {
            assert!(
                matches!(v, Verdict::NotEnforced { reason } if reason.contains("Service range 10.96.0.0/12")),
                "{e:?}"
            );
        }
    }
}
