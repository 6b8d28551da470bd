//! One NetworkPolicy against the current model: the flows it contributes, the ports it
//! isolates, the rules the audit log can name, and what it read (peer pods, namespaces).
//!
//! Every rule becomes one conjunction per port group: clause 1 the peers (ingress: source
//! prefixes; egress: destination prefixes, both of the connection's original direction),
//! clause 2 the applied-to local pods (ingress: `reg4=<ofport>`, the connection's destination
//! pod; egress: `reg2=<ofport>`, its source pod), clause 3 the ports (the connection's
//! original destination port). Every packet of a connection is judged, not only its first. A named port resolves on the
//! destination: for ingress on the applied-to pod, for egress on the peer pod, so port groups
//! split the applied-to pods (ingress) or the destination pods (egress).

use super::cookie;
use super::flow::{self, ct, FlowKey, FlowValue};
use super::ids::{IdAllocator, PortRange, RuleKey};
use super::ranges::{port_range_masks, subtract};
use super::rules::{Direction, RuleInfo, Stage};
use super::staged;
use super::tables::{self, priority};
use crate::model::{Cidr, Labels, LocalPort, Model, ObjectRef, Peer, Pod, Policy, PortRef, PortSpec, Protocol};
use ofp::numbers::{eth_type, ip_proto};
use ofp::{Action, Instruction, Masked, Oxm};
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

/// One `conjunction(id, clause+1/n)` action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) struct Conj {
    pub id: u32,
    pub(crate) clause: u8,
    pub(crate) n: u8,
}

/// A clause flow's value: the `conjunction()` actions of every rule that uses it.
pub(super) fn clause_value(conjs: &BTreeSet<Conj>) -> FlowValue {
    FlowValue {
        cookie: cookie::cookie(cookie::Kind::Clause, 0),
        instructions: vec![Instruction::ApplyActions(
            conjs.iter().map(|c| Action::Conjunction { id: c.id, clause: c.clause, n_clauses: c.n }).collect(),
        )],
    }
}

/// What one policy contributes.
#[derive(Debug, Default)]
pub(super) struct Compiled {
    pub(crate) clauses: BTreeSet<(FlowKey, Conj)>,
    pub(crate) owned: BTreeMap<FlowKey, FlowValue>,
    /// Local ports it isolates, per direction.
    pub(crate) isolates: BTreeSet<(Direction, u32)>,
    /// Pods its peers selected.
    pub(crate) peer_pods: BTreeSet<ObjectRef>,
    pub namespaces: BTreeSet<String>,
    pub(crate) rules: BTreeMap<RuleKey, RuleInfo>,
    /// Rules with peers that produced flows and whose flows a peer pod change can patch.
    pub(crate) rule_states: Vec<RuleState>,
}

impl Compiled {
    /// Whether the policy contributes or read nothing.
    pub(crate) fn is_empty(&self) -> bool {
        self.clauses.is_empty()
            && self.owned.is_empty()
            && self.isolates.is_empty()
            && self.rules.is_empty()
            && self.peer_pods.is_empty()
            && self.namespaces.is_empty()
    }
}

/// The peer prefixes of one rule, and the conjunctions they feed.
#[derive(Debug)]
pub(super) struct RuleState {
    pub direction: Direction,
    pub index: u32,
    /// (conjunction id, number of clauses) of each port group.
    pub(crate) groups: Vec<(u32, u8)>,
    pub(crate) peers: RulePeers,
}

/// Peer prefixes of a rule with how many reasons each has (a peer pod's address, an ipBlock
/// prefix), and the peer pods counted with the addresses they were counted with.
#[derive(Debug, Default)]
pub(super) struct RulePeers {
    pub(crate) prefixes: BTreeMap<Cidr, u32>,
    pub(crate) members: BTreeMap<ObjectRef, Vec<IpAddr>>,
}

impl RulePeers {
    fn add(&mut self, c: Cidr) -> bool {
        let n = self.prefixes.entry(c).or_insert(0);
        *n += 1;
        *n == 1
    }

    fn sub(&mut self, c: Cidr) -> bool {
        match self.prefixes.get_mut(&c) {
            Some(n) if *n > 1 => {
                *n -= 1;
                false
            }
            Some(_) => {
                self.prefixes.remove(&c);
                true
            }
            None => false,
        }
    }

    /// Sets pod `r`'s addresses (`None`: not a member); returns the prefixes that disappeared
    /// and those that appeared.
    pub(crate) fn set_member(&mut self, r: &ObjectRef, ips: Option<&Vec<IpAddr>>) -> (Vec<Cidr>, Vec<Cidr>) {
        let mut removed = Vec::new();
        let mut added = Vec::new();
        if let Some(old) = self.members.remove(r) {
            for ip in old {
                if self.sub(Cidr::host(ip)) {
                    removed.push(Cidr::host(ip));
                }
            }
        }
        if let Some(ips) = ips {
            self.members.insert(r.clone(), ips.clone());
            for ip in ips {
                if self.add(Cidr::host(*ip)) {
                    added.push(Cidr::host(*ip));
                }
            }
        }
        let both: BTreeSet<Cidr> = removed.iter().filter(|c| added.contains(c)).copied().collect();
        removed.retain(|c| !both.contains(c));
        added.retain(|c| !both.contains(c));
        (removed, added)
    }
}

/// The model indexes a policy's translation reads.
pub(super) struct Lookup<'a> {
    pub(crate) model: &'a Model,
    /// Enforced flows, or the staged view's (in the staged tables, recording a verdict).
    pub(crate) stage: Stage,
    pub ports: &'a BTreeMap<u32, LocalPort>,
    pub(crate) local_by_ns: &'a BTreeMap<crate::model::SharedStr, BTreeSet<u32>>,
}

/// A rule's peers as a clause flow match, on the connection's original direction
/// (`ct_nw_src=...` for ingress, `ct_nw_dst=...` for egress).
pub(super) fn peer_match(direction: Direction, cidr: &Cidr) -> Vec<Oxm> {
    match direction {
        Direction::Ingress => flow::ct_src_prefix(cidr),
        Direction::Egress => flow::ct_dst_prefix(cidr),
    }
}

/// The actions of a logged `conj_id` flow: the rule in `reg6`, then the Allow copy (LogCopy,
/// through the meter of the connection's source pod, or of the pod the rule judged for).
fn allow_copy(rule_id: u32, direction: Direction) -> Vec<Action> {
    rule_copy(rule_id, super::copies::CopyKind::Allow(direction))
}

/// The rule `rule_id` in `reg6`, then copy `copy` of the packet (LogCopy).
pub(super) fn rule_copy(rule_id: u32, copy: super::copies::CopyKind) -> Vec<Action> {
    let mut actions = vec![flow::set_reg(6, rule_id)];
    actions.extend(super::copies::request(copy));
    actions
}

/// The table a packet an egress or ingress rule allowed goes on to.
pub(super) fn after_allow(direction: Direction) -> u8 {
    match direction {
        Direction::Ingress => tables::CONNTRACK_COMMIT,
        Direction::Egress => tables::L2_FORWARDING_CALC,
    }
}

/// Whether one of the policy's egress rules sends to every pod with a named port (empty `to`
/// and a named port): then every pod of the cluster is a potential peer.
pub(super) fn reads_every_pod(policy: &Policy) -> bool {
    policy.egress.iter().any(|r| r.to.is_empty() && r.ports.iter().any(is_named))
}

/// Whether the policy has an egress rule with a named port (its flows depend on the
/// destination pods' container ports, so peer changes recompile it).
pub(super) fn has_named_egress(policy: &Policy) -> bool {
    policy.egress.iter().any(|r| r.ports.iter().any(is_named))
}

pub(super) fn is_named(s: &PortSpec) -> bool {
    matches!(s.port, Some(PortRef::Name(_)))
}

/// The policy's peers of rule `index` in `direction`.
pub(super) fn rule_peers(policy: &Policy, direction: Direction, index: u32) -> Option<&[Peer]> {
    let i = usize::try_from(index).ok()?;
    match direction {
        Direction::Ingress => policy.ingress.get(i).map(|r| r.from.as_slice()),
        Direction::Egress => policy.egress.get(i).map(|r| r.to.as_slice()),
    }
}

/// Every rule of the policy with peers: (direction, index, peers).
pub(super) fn rules_with_peers(policy: &Policy) -> impl Iterator<Item = (Direction, u32, &[Peer])> {
    fn indexed<'p>(
        d: Direction,
        peers: impl Iterator<Item = &'p [Peer]>,
    ) -> impl Iterator<Item = (Direction, u32, &'p [Peer])> {
        peers.enumerate().filter_map(move |(i, p)| u32::try_from(i).ok().map(|i| (d, i, p)))
    }
    let ingress = indexed(Direction::Ingress, policy.ingress.iter().map(|r| r.from.as_slice()));
    let egress = indexed(Direction::Egress, policy.egress.iter().map(|r| r.to.as_slice()));
    ingress.chain(egress).filter(|(_, _, p)| !p.is_empty())
}

/// Whether some peer of the policy selects a pod of namespace `ns` (labels `ns_labels`) with
/// labels `labels`, or every pod is its peer ([`reads_every_pod`]).
pub(super) fn selects_peer(policy: &Policy, ns: &str, ns_labels: Option<&Labels>, labels: &Labels) -> bool {
    reads_every_pod(policy) || policy.peers().any(|peer| peer_selects(peer, policy, ns, ns_labels, labels))
}

/// Whether `peer` of `policy` selects a pod of namespace `ns` with labels `labels`.
pub(super) fn peer_selects(
    peer: &Peer,
    policy: &Policy,
    ns: &str,
    ns_labels: Option<&Labels>,
    labels: &Labels,
) -> bool {
    match peer {
        Peer::Pods { pod_selector, namespace_selector } => {
            let ns_ok = match namespace_selector {
                Some(s) => ns_labels.is_some_and(|l| s.matches(l)),
                None => policy.namespace == ns,
            };
            ns_ok && pod_selector.as_ref().is_none_or(|s| s.matches(labels))
        }
        Peer::IpBlock { .. } => false,
    }
}

/// Translates one policy. `ids` hands out (or recalls) the conjunction ids of its rules.
pub(super) fn compile_policy(lk: &Lookup<'_>, ids: &mut IdAllocator, r: &ObjectRef, policy: &Policy) -> Compiled {
    let mut c = Compiled::default();
    if !policy.affects_ingress && !policy.affects_egress {
        return c;
    }
    let mut applied = Vec::new();
    // Local ports whose pod the model does not have (a Pod manifest that never was valid, or
    // not seen yet): their labels are unknown, so every policy of their namespace isolates
    // them, with nothing allowed.
    let mut unreadable = Vec::new();
    for o in lk.local_by_ns.get(policy.namespace.as_str()).into_iter().flatten() {
        let Some(port) = lk.ports.get(o) else { continue };
        match lk.model.pods.get(&port.pod) {
            Some(pod) if policy.pod_selector.matches(&pod.labels) => applied.push(Applied { ofport: *o, pod }),
            Some(_) => {}
            None => unreadable.push(*o),
        }
    }
    if applied.is_empty() && unreadable.is_empty() {
        return c;
    }
    // Rules only for pods the policy can be seen to select.
    let has_applied = !applied.is_empty();
    let mut pc = PolicyCompiler {
        lk,
        ids,
        r,
        policy,
        applied,
        unreadable,
        logging: lk.stage == Stage::Enforced
            && (namespace_logging(lk.model, &policy.namespace) || policy_logging(policy)),
        c: &mut c,
    };
    if policy.affects_ingress {
        pc.isolate(Direction::Ingress);
        for (ri, rule) in policy.ingress.iter().enumerate().take_while(|_| has_applied) {
            let Ok(ri) = u32::try_from(ri) else { break };
            pc.ingress_rule(ri, &rule.from, &rule.ports);
        }
    }
    if policy.affects_egress {
        pc.isolate(Direction::Egress);
        for (ri, rule) in policy.egress.iter().enumerate().take_while(|_| has_applied) {
            let Ok(ri) = u32::try_from(ri) else { break };
            pc.egress_rule(ri, &rule.to, &rule.ports);
        }
    }
    c
}

/// Whether the Namespace `ns` asks for audit logging.
pub(super) fn namespace_logging(model: &Model, ns: &str) -> bool {
    model.namespaces.get(ns).is_some_and(|n| n.logging_enabled().unwrap_or(false))
}

/// Whether the NetworkPolicy itself asks for audit logging (its own annotation).
pub(super) fn policy_logging(policy: &Policy) -> bool {
    policy.logging_enabled().unwrap_or(false)
}

/// A local pod a policy applies to.
struct Applied<'a> {
    ofport: u32,
    pod: &'a Pod,
}

struct PolicyCompiler<'a, 'm> {
    lk: &'a Lookup<'m>,
    ids: &'a mut IdAllocator,
    r: &'a ObjectRef,
    policy: &'a Policy,
    applied: Vec<Applied<'m>>,
    unreadable: Vec<u32>,
    logging: bool,
    c: &'a mut Compiled,
}

impl PolicyCompiler<'_, '_> {
    fn isolate(&mut self, direction: Direction) {
        self.c.isolates.extend(
            self.applied.iter().map(|a| a.ofport).chain(self.unreadable.iter().copied()).map(|o| (direction, o)),
        );
    }

    /// Ingress: named ports resolve on the applied-to pods, so they split into port groups.
    fn ingress_rule(&mut self, ri: u32, from: &[Peer], ports: &[PortSpec]) {
        let dir = Direction::Ingress;
        let peers = (!from.is_empty()).then(|| self.peers(from));
        if peers.as_ref().is_some_and(|p| p.prefixes.is_empty()) {
            return;
        }
        let peer_clause = peer_clause(dir, peers.as_ref().map(|p| p.prefixes.keys()));
        let mut groups: BTreeMap<Vec<PortRange>, Vec<u32>> = BTreeMap::new();
        for a in &self.applied {
            if let Some(resolved) = resolve_ports(ports, Some(a.pod)) {
                groups.entry(resolved).or_default().push(a.ofport);
            }
        }
        let mut state_groups = Vec::new();
        for (resolved, ofports) in groups {
            let key = RuleKey { policy: self.r.clone(), direction: dir, rule: ri, ports: resolved, logged: false };
            state_groups.push(self.conjunction(key, &peer_clause, &ofports));
        }
        if let Some(peers) = peers {
            self.c.peer_pods.extend(peers.members.keys().cloned());
            if !state_groups.is_empty() {
                self.c.rule_states.push(RuleState { direction: dir, index: ri, groups: state_groups, peers });
            }
        }
    }

    /// Egress: numeric ports apply to every destination; named ports resolve on each
    /// destination pod (of the peers, or of the whole cluster when `to` is empty), so they
    /// split the destination pods into port groups.
    fn egress_rule(&mut self, ri: u32, to: &[Peer], ports: &[PortSpec]) {
        let dir = Direction::Egress;
        let peers = (!to.is_empty()).then(|| self.peers(to));
        let (named, numeric): (Vec<PortSpec>, Vec<PortSpec>) = ports.iter().cloned().partition(is_named);
        let sources: Vec<u32> = self.applied.iter().map(|a| a.ofport).collect();
        let mut state_groups = Vec::new();
        if ports.is_empty() || !numeric.is_empty() {
            let peer_clause = peer_clause(dir, peers.as_ref().map(|p| p.prefixes.keys()));
            if !peer_clause.is_empty() {
                let resolved = resolve_ports(&numeric, None).unwrap_or_default();
                let key = RuleKey { policy: self.r.clone(), direction: dir, rule: ri, ports: resolved, logged: false };
                state_groups.push(self.conjunction(key, &peer_clause, &sources));
            }
        }
        if !named.is_empty() {
            let model = self.lk.model;
            let destinations: Vec<(&ObjectRef, &Pod)> = match &peers {
                Some(p) => {
                    p.members.keys().filter_map(|r| model.pods.get_key_value(r)).map(|(r, pod)| (r, &**pod)).collect()
                }
                None => model.pods.iter().filter(|(_, pod)| !pod.ips.is_empty()).map(|(r, pod)| (r, &**pod)).collect(),
            };
            let mut groups: BTreeMap<Vec<PortRange>, BTreeSet<Cidr>> = BTreeMap::new();
            for (pref, pod) in destinations {
                if let Some(resolved) = resolve_ports(&named, Some(pod)) {
                    groups.entry(resolved).or_default().extend(pod.ips.iter().map(|ip| Cidr::host(*ip)));
                    self.c.peer_pods.insert(pref.clone());
                }
            }
            for (resolved, cidrs) in groups {
                let key = RuleKey { policy: self.r.clone(), direction: dir, rule: ri, ports: resolved, logged: false };
                let clause = peer_clause(dir, Some(cidrs.iter()));
                self.conjunction(key, &clause, &sources);
            }
        }
        if let Some(peers) = peers {
            self.c.peer_pods.extend(peers.members.keys().cloned());
            // Rules with named ports are recompiled on every peer change: no patch state.
            if named.is_empty() && !state_groups.is_empty() {
                self.c.rule_states.push(RuleState { direction: dir, index: ri, groups: state_groups, peers });
            }
        }
    }

    /// Adds one conjunction: its clause flows, its `conj_id` flow and its rule. `applied` are
    /// the ofports of the local pods it applies to.
    fn conjunction(&mut self, key: RuleKey, peer_clause: &[Vec<Oxm>], applied: &[u32]) -> (u32, u8) {
        let dir = key.direction;
        let table = self.lk.stage.rule_table(dir);
        let id = self.ids.claim(&key);
        let n: u8 = if key.ports.is_empty() { 2 } else { 3 };
        let mut add = |fields: Vec<Oxm>, clause: u8| {
            self.c.clauses.insert((FlowKey::new(table, priority::NORMAL, fields), Conj { id, clause, n }));
        };
        for fields in peer_clause {
            add(fields.clone(), 0);
        }
        for o in applied {
            add(vec![flow::applied_match(dir, *o)], 1);
        }
        for fields in port_clause(&key.ports, true) {
            add(fields, 2);
        }
        let rule_cookie = cookie::rule_cookie(&key);
        self.c.owned.extend(conj_flows(self.lk.stage, dir, id, rule_cookie, self.logging));
        let info = RuleInfo {
            id,
            policy: self.r.clone(),
            name: None,
            index: key.rule,
            direction: dir,
            priority: priority::CONJ,
            ports: key.ports.clone(),
            cookie: rule_cookie,
            log_label: self.policy.log_label().ok().flatten().map(str::to_string),
            deleted: false,
            cluster: None,
        };
        self.c.rules.insert(key, info);
        (id, n)
    }

    /// The prefixes of a rule's peers; records the namespaces it read.
    fn peers(&mut self, peers: &[Peer]) -> RulePeers {
        let model = self.lk.model;
        let mut rp = RulePeers::default();
        for peer in peers {
            match peer {
                Peer::IpBlock { cidr, except } => {
                    for p in subtract(*cidr, except) {
                        rp.add(p);
                    }
                }
                Peer::Pods { pod_selector, namespace_selector } => {
                    let namespaces: Vec<&String> = match namespace_selector {
                        Some(sel) => {
                            model.namespaces.values().filter(|n| sel.matches(&n.labels)).map(|n| &n.name).collect()
                        }
                        None => vec![&self.policy.namespace],
                    };
                    for ns in namespaces {
                        if namespace_selector.is_some() {
                            self.c.namespaces.insert(ns.clone());
                        }
                        for (pref, pod) in model.pods_in(ns) {
                            if pod.ips.is_empty()
                                || rp.members.contains_key(pref)
                                || !pod_selector.as_ref().is_none_or(|s| s.matches(&pod.labels))
                            {
                                continue;
                            }
                            rp.set_member(pref, Some(&pod.ips));
                        }
                    }
                }
            }
        }
        rp
    }
}

/// The `conj_id` flows of rule `id`. Enforced, two: a connection's first packet, logged when
/// `logging`, and the rest (every packet of a connection is judged), never logged; logging
/// toggles modify the first in place. Staged, one: only first packets enter the staged
/// tables, and it records the verdict.
fn conj_flows(stage: Stage, dir: Direction, id: u32, rule_cookie: u64, logging: bool) -> Vec<(FlowKey, FlowValue)> {
    let table = stage.rule_table(dir);
    let value = |instructions| FlowValue { cookie: rule_cookie, instructions };
    if stage == Stage::Staged {
        let key = FlowKey::new(table, priority::CONJ, vec![Oxm::ConjId(id)]);
        return vec![(key, value(vec![Instruction::ApplyActions(staged::allowed_by(dir, id))]))];
    }
    let allow = vec![flow::goto(after_allow(dir))];
    let mut first = Vec::with_capacity(2);
    if logging {
        first.push(Instruction::ApplyActions(allow_copy(id, dir)));
    }
    first.extend(allow.iter().cloned());
    let conj = |state: Oxm| vec![Oxm::ConjId(id), state];
    vec![
        (FlowKey::new(table, priority::CONJ, conj(flow::ct_state(ct::NEW | ct::TRK, 0))), value(first)),
        (FlowKey::new(table, priority::CONJ, conj(flow::ct_state(ct::TRK, ct::NEW))), value(allow)),
    ]
}

/// The peer clause's matches: the prefixes, or any IPv4 and IPv6 when the rule has no peers.
pub(super) fn peer_clause<'c>(direction: Direction, prefixes: Option<impl Iterator<Item = &'c Cidr>>) -> Vec<Vec<Oxm>> {
    match prefixes {
        None => vec![vec![Oxm::EthType(eth_type::IPV4)], vec![Oxm::EthType(eth_type::IPV6)]],
        Some(p) => p.map(|c| peer_match(direction, c)).collect(),
    }
}

/// The ports of a rule for one destination pod (`None`: numeric ports only); `None` when the
/// rule has ports and none of them exists there (a named port the pod does not have).
pub(super) fn resolve_ports(specs: &[PortSpec], pod: Option<&Pod>) -> Option<Vec<PortRange>> {
    if specs.is_empty() {
        return Some(Vec::new());
    }
    let mut out = BTreeSet::new();
    for s in specs {
        let range = match &s.port {
            None => Some((0, u16::MAX)),
            Some(PortRef::Number(p)) => Some((*p, s.end_port.unwrap_or(*p).max(*p))),
            Some(PortRef::Name(name)) => pod.and_then(|pod| {
                pod.ports
                    .iter()
                    .find(|cp| cp.name.as_deref() == Some(name.as_str()) && cp.protocol == s.protocol)
                    .map(|cp| (cp.port, cp.port))
            }),
        };
        if let Some((first, last)) = range {
            out.insert(PortRange { protocol: s.protocol, first, last });
        }
    }
    if out.is_empty() {
        None
    } else {
        Some(out.into_iter().collect())
    }
}

/// The port clause's matches of resolved ports `ports`; with `later_fragments`, the later
/// fragments of their TCP and UDP datagrams too (see [`later_fragments`]: for a rule that
/// lets a datagram's first fragment through; a rule that drops or hands on must not catch the
/// later fragments of datagrams to other ports).
pub(super) fn port_clause(ports: &[PortRange], later_fragments: bool) -> Vec<Vec<Oxm>> {
    let mut out = Vec::new();
    for pr in ports {
        for eth in [eth_type::IPV4, eth_type::IPV6] {
            for (value, mask) in port_range_masks(pr.first, pr.last) {
                out.extend(port_matches(eth, pr.protocol, value, mask));
            }
            match pr.protocol {
                Protocol::Tcp if later_fragments => out.push(self::later_fragments(eth, ip_proto::TCP)),
                Protocol::Udp if later_fragments => out.push(self::later_fragments(eth, ip_proto::UDP)),
                _ => {}
            }
        }
    }
    out
}

/// The later fragments of a protocol's datagrams: OVS's userspace datapath reassembles them
/// for conntrack but sends them on with no transport header, so their conntrack tuple lacks
/// the ports too (the Linux kernel's datapath reassembles whole). They carry no port to judge;
/// they pass with the peers and pods of a rule that allows some port of the protocol, and are
/// sent only together with their datagram's first fragment, which the port was judged on.
fn later_fragments(eth: u16, ip_proto: u8) -> Vec<Oxm> {
    const LATER: u8 = 0x3;
    flow::tracked(vec![Oxm::EthType(eth), Oxm::CtNwProto(ip_proto), Oxm::IpFrag(Masked::exact(LATER))])
}

/// The clause flows of one port value/mask: on the connection's original destination port
/// (`ct_tp_dst`), so that replies, related packets and fragments (whose ports read zero) are
/// judged by the rule that allowed the connection. SCTP is judged on the packet's own ports
/// in the original direction (`tp_dst` going, `tp_src` coming back): OVS's userspace
/// conntrack keeps no SCTP ports, so its tuple cannot tell one SCTP port from another.
fn port_matches(eth: u16, proto: Protocol, value: u16, mask: u16) -> Vec<Vec<Oxm>> {
    let m = Masked::masked(value, mask);
    let ct_port =
        |ip_proto: u8| vec![flow::tracked(vec![Oxm::EthType(eth), Oxm::CtNwProto(ip_proto), Oxm::CtTpDst(m)])];
    match proto {
        Protocol::Tcp => ct_port(ip_proto::TCP),
        Protocol::Udp => ct_port(ip_proto::UDP),
        Protocol::Sctp => {
            let sctp = |reply: bool, field: Oxm| {
                let state = if reply { flow::ct_state(ct::RPL | ct::TRK, 0) } else { flow::ct_state(ct::TRK, ct::RPL) };
                vec![Oxm::EthType(eth), Oxm::IpProto(ip_proto::SCTP), state, field]
            };
            vec![sctp(false, Oxm::SctpDst(m)), sctp(true, Oxm::SctpSrc(m))]
        }
    }
}
