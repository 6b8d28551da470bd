//! ClusterNetworkPolicies in the tiers' tables: the Admin tier's rules before the
//! NetworkPolicy tables of each direction, the Baseline tier's after them (see
//! [`crate::model::tiers`] for the order they carry out).
//!
//! Every rule is a conjunction, as a NetworkPolicy's is (clause 1 the peers, 2 the subject
//! pods, 3 the ports, on the connection's original direction), in its direction's table of
//! its tier. The tier's order is the flows' priority: its policies by priority (ties by
//! name), each policy's rules in order, the first one [`priority::TIER_TOP`] and each next one
//! lower, so that the first rule that matches decides, for every packet of a connection:
//! - Accept: on past the NetworkPolicy tables (egress to L2ForwardingCalc, ingress to
//!   ConntrackCommit);
//! - Deny: dropped;
//! - Pass: on to the next tier (Admin: the NetworkPolicy tables; Baseline: the default,
//!   allowed), the rule in the direction's pass register ([`pass_reg`]) for the decision chain
//!   the log writes.
//!
//! A rule's subjects are split by their namespace's logging switch: the conjunction of the
//! pods whose namespace logs copies the connection's first packet (Accept, Pass) or every
//! packet (Deny) to npagent through LogCopy, the other one does not.

use super::cookie;
use super::copies::CopyKind;
use super::flow::{self, ct, FlowKey, FlowValue};
use super::ids::{IdAllocator, PortRange, RuleKey};
use super::policy::{after_allow, clause_value, is_named, peer_clause, port_clause, resolve_ports, rule_copy, Conj};
use super::rules::{ClusterRuleInfo, Direction, RuleInfo};
use super::staged;
use super::tables::priority;
use crate::model::cluster_policy::{Action, ClusterPeer, ClusterPolicy, ClusterProtocol, ClusterRule, PodSet, Tier};
use crate::model::{tiers, Cidr, LocalPort, Model, ObjectRef, Pod, PortRef, PortSpec, Protocol};
use ofp::{Instruction, Oxm};
use std::collections::{BTreeMap, BTreeSet};

/// What the ClusterNetworkPolicies compile to.
#[derive(Debug, Default)]
pub(super) struct ClusterCompiled {
    pub(super) flows: BTreeMap<FlowKey, FlowValue>,
    pub(super) rules: BTreeMap<RuleKey, RuleInfo>,
    /// The pods the compile read (subjects and peers).
    pub(super) read_pods: BTreeSet<ObjectRef>,
    /// The local ports of its subjects.
    pub(super) subject_ports: BTreeSet<u32>,
}

/// The register that holds the Pass rule a packet passed in `direction`: `reg12` egress,
/// `reg13` ingress.
pub(crate) fn pass_reg(direction: Direction) -> u8 {
    match direction {
        Direction::Egress => 12,
        Direction::Ingress => 13,
    }
}

/// The identity of the ClusterNetworkPolicy `name` in rule keys and rules: no namespace (a
/// NetworkPolicy always has one).
pub(crate) fn policy_ref(name: &str) -> ObjectRef {
    ObjectRef { namespace: "".into(), name: name.into() }
}

/// Where a policy's rules start in its tier's order: the rank of its first ingress and of its
/// first egress rule (its rules' priorities count down from [`priority::TIER_TOP`] minus that).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Start {
    ingress: u16,
    egress: u16,
}

impl Start {
    fn of(self, direction: Direction) -> u16 {
        match direction {
            Direction::Ingress => self.ingress,
            Direction::Egress => self.egress,
        }
    }
}

/// Where every ClusterNetworkPolicy of `model` starts in its tier's order, by name.
pub(super) fn starts(model: &Model) -> BTreeMap<String, Start> {
    let mut out = BTreeMap::new();
    for tier in Tier::ALL {
        let (mut ingress, mut egress) = (0u16, 0u16);
        for policy in tiers::in_order(model.cluster_policies.values(), tier) {
            out.insert(policy.name.clone(), Start { ingress, egress });
            ingress = ingress.saturating_add(u16::try_from(policy.ingress.len()).unwrap_or(u16::MAX));
            egress = egress.saturating_add(u16::try_from(policy.egress.len()).unwrap_or(u16::MAX));
        }
    }
    out
}

/// Compiles ClusterNetworkPolicy `policy`, which starts at `start` in its tier's order, for
/// the local pods on `ports`. Its flows are its own: no other policy's share a key (each rule
/// has a priority of its own in its table).
pub(super) fn compile(
    model: &Model,
    ports: &BTreeMap<u32, LocalPort>,
    ids: &mut IdAllocator,
    policy: &ClusterPolicy,
    start: Start,
) -> ClusterCompiled {
    let mut c = TierCompiler { model, ids, out: ClusterCompiled::default(), clauses: BTreeMap::new() };
    if policy.ingress.is_empty() && policy.egress.is_empty() {
        return c.out;
    }
    let subjects = c.subjects(ports, &policy.subject);
    for direction in Direction::BOTH {
        let rules = match direction {
            Direction::Ingress => &policy.ingress,
            Direction::Egress => &policy.egress,
        };
        let mut rank = start.of(direction);
        for (index, rule) in rules.iter().enumerate() {
            let prio = priority::TIER_TOP.saturating_sub(rank);
            rank = rank.saturating_add(1);
            let Ok(index) = u32::try_from(index) else { break };
            let place = Place { policy, tier: policy.tier, direction, index, priority: prio };
            c.rule(&place, rule, &subjects);
        }
    }
    let mut out = c.out;
    for (key, conjs) in c.clauses {
        out.flows.insert(key, clause_value(&conjs));
    }
    out
}

/// Whether the local port `o` (as `model` has it now) is a subject of `policy`.
pub(super) fn subject_port(model: &Model, policy: &ClusterPolicy, o: u32) -> bool {
    let Some(port) = model.ports.get(&o) else { return false };
    let labels = model.pods.get(&port.pod).map(|p| &p.labels);
    let ns_labels = model.namespaces.get(&*port.pod.namespace).map(|n| &n.labels);
    labels.zip(ns_labels).is_some_and(|(l, n)| policy.subject.matches(n, l))
}

/// Whether pod `r` (as `model` has it now) may be a subject (when it is `local`) or a peer of
/// `policy`.
pub(super) fn might_read(model: &Model, policy: &ClusterPolicy, r: &ObjectRef, local: bool) -> bool {
    let Some(pod) = model.pods.get(r) else { return false };
    let Some(ns) = model.namespaces.get(&*r.namespace) else { return false };
    let selects = |set: &PodSet| set.matches(&ns.labels, &pod.labels);
    (local && selects(&policy.subject))
        || policy.ingress.iter().chain(&policy.egress).any(|rule| {
            (rule.peers_match_everything() && rule.protocols.iter().any(is_named_protocol))
                || rule.peers.iter().any(|peer| matches!(peer, ClusterPeer::Pods(set) if selects(set)))
        })
}

fn is_named_protocol(p: &ClusterProtocol) -> bool {
    matches!(p, ClusterProtocol::NamedPort(_))
}

/// Where a rule stands: its policy, tier, direction, index and flow priority.
struct Place<'p> {
    policy: &'p ClusterPolicy,
    tier: Tier,
    direction: Direction,
    index: u32,
    priority: u16,
}

/// A local pod a policy applies to.
struct Subject<'m> {
    ofport: u32,
    pod: &'m Pod,
    /// Its namespace asks for logging.
    logged: bool,
}

/// A rule's peers: every address (`any`), or the prefixes, and the peer pods (for named
/// ports).
#[derive(Default)]
struct Peers<'m> {
    any: bool,
    prefixes: BTreeSet<Cidr>,
    pods: Vec<&'m Pod>,
}

struct TierCompiler<'m, 'i> {
    model: &'m Model,
    ids: &'i mut IdAllocator,
    out: ClusterCompiled,
    clauses: BTreeMap<FlowKey, BTreeSet<Conj>>,
}

impl<'m> TierCompiler<'m, '_> {
    /// The local pods of `set`.
    fn subjects(&mut self, ports: &BTreeMap<u32, LocalPort>, set: &PodSet) -> Vec<Subject<'m>> {
        let model = self.model;
        let mut out = Vec::new();
        for (o, port) in ports {
            let Some(pod) = model.pods.get(&port.pod) else { continue };
            let Some(ns) = model.namespaces.get(&*port.pod.namespace) else { continue };
            if set.matches(&ns.labels, &pod.labels) {
                self.out.read_pods.insert(port.pod.clone());
                self.out.subject_ports.insert(*o);
                out.push(Subject { ofport: *o, pod, logged: ns.logging_enabled().unwrap_or(false) });
            }
        }
        out
    }

    fn peers(&mut self, rule: &ClusterRule) -> Peers<'m> {
        let model = self.model;
        let mut peers = Peers { any: rule.peers_match_everything(), ..Peers::default() };
        for peer in &rule.peers {
            match peer {
                ClusterPeer::Pods(set) => {
                    for ns in model.namespaces.values().filter(|n| set.namespaces.matches(&n.labels)) {
                        for (r, pod) in model.pods_in(&ns.name) {
                            if pod.ips.is_empty() || !set.pods.as_ref().is_none_or(|s| s.matches(&pod.labels)) {
                                continue;
                            }
                            self.out.read_pods.insert(r.clone());
                            peers.prefixes.extend(pod.ips.iter().map(|ip| Cidr::host(*ip)));
                            peers.pods.push(pod);
                        }
                    }
                }
                ClusterPeer::Networks(cidrs) => peers.prefixes.extend(cidrs.iter().copied()),
                // Fails closed: `any` above for Deny and Pass, nothing for Accept.
                ClusterPeer::Unrecognised => {}
            }
        }
        peers
    }

    fn rule(&mut self, place: &Place<'_>, rule: &ClusterRule, subjects: &[Subject<'m>]) {
        if subjects.is_empty() {
            return;
        }
        let peers = self.peers(rule);
        if !peers.any && peers.prefixes.is_empty() {
            return;
        }
        let dir = place.direction;
        let clause = peer_clause(dir, (!peers.any).then(|| peers.prefixes.iter()));
        let specs = port_specs(&rule.protocols);
        for logged in [false, true] {
            let group: Vec<&Subject<'m>> = subjects.iter().filter(|s| s.logged == logged).collect();
            if group.is_empty() {
                continue;
            }
            match dir {
                // Named ports are the subject's own: they split the subjects.
                Direction::Ingress => {
                    let mut by_ports: BTreeMap<Vec<PortRange>, Vec<u32>> = BTreeMap::new();
                    for s in &group {
                        if let Some(resolved) = resolve_ports(&specs, Some(s.pod)) {
                            by_ports.entry(resolved).or_default().push(s.ofport);
                        }
                    }
                    for (resolved, ofports) in by_ports {
                        self.conjunction(place, rule, resolved, logged, &clause, &ofports);
                    }
                }
                // Named ports are the destination's: they split the peers.
                Direction::Egress => {
                    let sources: Vec<u32> = group.iter().map(|s| s.ofport).collect();
                    let (named, numeric): (Vec<PortSpec>, Vec<PortSpec>) = specs.iter().cloned().partition(is_named);
                    if specs.is_empty() || !numeric.is_empty() {
                        let resolved = resolve_ports(&numeric, None).unwrap_or_default();
                        self.conjunction(place, rule, resolved, logged, &clause, &sources);
                    }
                    if named.is_empty() {
                        continue;
                    }
                    let destinations: Vec<&Pod> = if peers.any {
                        self.model.pods.values().map(|p| &**p).filter(|p| !p.ips.is_empty()).collect()
                    } else {
                        peers.pods.clone()
                    };
                    let mut by_ports: BTreeMap<Vec<PortRange>, BTreeSet<Cidr>> = BTreeMap::new();
                    for pod in destinations {
                        if let Some(resolved) = resolve_ports(&named, Some(pod)) {
                            by_ports.entry(resolved).or_default().extend(pod.ips.iter().map(|ip| Cidr::host(*ip)));
                        }
                    }
                    for (resolved, cidrs) in by_ports {
                        let clause = peer_clause(dir, Some(cidrs.iter()));
                        self.conjunction(place, rule, resolved, logged, &clause, &sources);
                    }
                }
            }
        }
    }

    /// One conjunction of the rule at `place`: its clause flows, its `conj_id` flows and its
    /// rule; `applied` are the subjects' ofports.
    fn conjunction(
        &mut self,
        place: &Place<'_>,
        rule: &ClusterRule,
        ports: Vec<PortRange>,
        logged: bool,
        peer_clause: &[Vec<Oxm>],
        applied: &[u32],
    ) {
        let dir = place.direction;
        let key = RuleKey { policy: policy_ref(&place.policy.name), direction: dir, rule: place.index, ports, logged };
        let table = dir.tier_table(place.tier);
        let id = self.ids.claim(&key);
        let n: u8 = if key.ports.is_empty() { 2 } else { 3 };
        let mut add = |fields: Vec<Oxm>, clause: u8| {
            self.clauses.entry(FlowKey::new(table, place.priority, fields)).or_default().insert(Conj { id, clause, n });
        };
        for fields in peer_clause {
            add(fields.clone(), 0);
        }
        for o in applied {
            add(vec![flow::applied_match(dir, *o)], 1);
        }
        // Only an Accept lets later fragments through with the first's verdict: a Deny or a
        // Pass of one port must not catch the later fragments of a datagram to another.
        for fields in port_clause(&key.ports, rule.action == Action::Accept) {
            add(fields, 2);
        }
        let rule_cookie = cookie::rule_cookie(&key);
        self.out.flows.extend(conj_flows(place, rule.action, id, rule_cookie, logged));
        let info = RuleInfo {
            id,
            policy: key.policy.clone(),
            name: rule.name.clone(),
            index: place.index,
            direction: dir,
            priority: place.priority,
            ports: key.ports.clone(),
            cookie: rule_cookie,
            log_label: None,
            deleted: false,
            cluster: Some(ClusterRuleInfo {
                tier: place.tier,
                action: rule.action,
                policy_priority: place.policy.priority,
            }),
        };
        self.out.rules.insert(key, info);
    }
}

/// A rule's protocols as port specs: a named port (of any protocol) as one of each protocol.
fn port_specs(protocols: &[ClusterProtocol]) -> Vec<PortSpec> {
    let mut out = Vec::new();
    for p in protocols {
        match p {
            ClusterProtocol::Port(spec) => out.push(spec.clone()),
            ClusterProtocol::NamedPort(name) => {
                out.extend([Protocol::Tcp, Protocol::Udp, Protocol::Sctp].map(|protocol| PortSpec {
                    protocol,
                    port: Some(PortRef::Name(name.clone())),
                    end_port: None,
                }))
            }
        }
    }
    out
}

/// The `conj_id` flows of rule `id` at `place`. Deny: one flow, for every packet, with the
/// copy when `logging`. Accept and Pass: a connection's first packet (with the copy when
/// `logging`) and the rest, as a NetworkPolicy's Allow; a Pass records the rule in
/// [`pass_reg`] for every packet, after the copy.
fn conj_flows(
    place: &Place<'_>,
    action: Action,
    id: u32,
    rule_cookie: u64,
    logging: bool,
) -> Vec<(FlowKey, FlowValue)> {
    let dir = place.direction;
    let table = dir.tier_table(place.tier);
    let value = |actions: Vec<ofp::Action>, next: Option<u8>| {
        let mut instructions = Vec::with_capacity(2);
        if !actions.is_empty() {
            instructions.push(Instruction::ApplyActions(actions));
        }
        instructions.extend(next.map(flow::goto));
        FlowValue { cookie: rule_cookie, instructions }
    };
    let copy = || if logging { rule_copy(id, CopyKind::Cluster(action, dir)) } else { Vec::new() };
    let (next, mut every_packet) = match (action, place.tier) {
        (Action::Deny, _) => {
            return vec![(FlowKey::new(table, place.priority, vec![Oxm::ConjId(id)]), value(copy(), None))];
        }
        (Action::Accept, _) | (Action::Pass, Tier::Baseline) => (after_allow(dir), Vec::new()),
        (Action::Pass, Tier::Admin) => (dir.rule_table(), Vec::new()),
    };
    if action == Action::Pass {
        every_packet.push(flow::set_reg(pass_reg(dir), id));
    }
    let mut first = copy();
    // An Admin Accept decides past the NetworkPolicies: the staged view's verdict on them
    // (staged policies are NetworkPolicies) says nothing of this connection.
    if action == Action::Accept && place.tier == Tier::Admin {
        first.push(staged::forget_verdict(dir));
    }
    first.extend(every_packet.iter().cloned());
    let conj = |state: Oxm| FlowKey::new(table, place.priority, vec![Oxm::ConjId(id), state]);
    vec![
        (conj(flow::ct_state(ct::NEW | ct::TRK, 0)), value(first, Some(next))),
        (conj(flow::ct_state(ct::TRK, ct::NEW)), value(every_packet, Some(next))),
    ]
}
