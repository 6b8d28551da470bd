//! The compiler: model in, complete desired flow set out, kept up to date incrementally.
//!
//! State: indexes of the model (pods by namespace, local pods by namespace, policies by
//! namespace, policies whose peers reach beyond their namespace), each policy's compiled
//! contribution ([`super::policy`]: clause flows it adds a `conjunction()` to, the `conj_id`
//! flows it owns, the ports it isolates per direction, the pods and namespaces it read), and
//! reverse indexes from pods and namespaces to the policies that read them. A change names the objects that changed; the compiler
//! recompiles only the policies that read them (or could now read them), applies the
//! difference of their contributions, and reports the flow keys that changed.
//!
//! The enforced compiler owns a second one, of [`Stage::Staged`], which compiles the staged
//! view (every StagedNetworkPolicy over the NetworkPolicies) for the local pods a staged
//! policy touches only, into the staged tables ([`super::staged`]); its flows join this
//! one's.

use super::cluster::{self, ClusterCompiled};
use super::cookie::{self, Kind};
use super::flow::{self, DesiredFlows, FlowKey, FlowValue};
use super::ids::{IdAllocator, RuleKey};
use super::meters::{self, MeterKind};
use super::pipeline::{node_flows, pipeline_flows, port_flows};
use super::policy::{self, compile_policy, namespace_logging, policy_logging, Compiled, Conj, Lookup};
use super::rules::{Direction, RuleInfo, RuleTable, Stage};
use super::staged::{self, Touched};
use super::tables::priority;
use super::userdata::{Disposition, LogUserdata};
use crate::model::staged as staged_view;
use crate::model::{LocalPort, Model, NodePort, ObjectRef, Peer, Policy, SharedStr};
use ofp::Instruction;
use std::collections::{BTreeMap, BTreeSet};

/// Settings of the compiled pipeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Controller id npagent sets on its connection (NXAC2PT_CONTROLLER_ID).
    pub controller_id: u16,
}

impl Default for Config {
    fn default() -> Self {
        Config { controller_id: 0x4e50 }
    }
}

/// An object that changed in the model (added, modified or deleted).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Change {
    Namespace(String),
    Pod(ObjectRef),
    Policy(ObjectRef),
    /// A bridge port (by ofport).
    Port(u32),
    /// The node: its gateway, uplinks, addresses or Service ranges.
    Node,
    /// A StagedNetworkPolicy (which never changes an enforced flow).
    StagedPolicy(ObjectRef),
    /// A ClusterNetworkPolicy, by name.
    ClusterPolicy(String),
}

/// The model as one compiler reads it: the enforced policies, or the staged view (the staged
/// policies over them); and the local ports it compiles for (all of them, or those a staged
/// policy touches).
#[derive(Clone, Copy)]
pub(super) struct View<'a> {
    pub(super) model: &'a Model,
    stage: Stage,
    ports: &'a BTreeMap<u32, LocalPort>,
}

impl<'a> View<'a> {
    fn enforced(model: &'a Model) -> Self {
        View { model, stage: Stage::Enforced, ports: &model.ports }
    }

    /// Policy `r` of this view.
    fn policy(&self, r: &ObjectRef) -> Option<&'a Policy> {
        match self.stage {
            Stage::Enforced => self.model.policies.get(r),
            Stage::Staged => staged_view::staged_policy(self.model, r),
        }
    }

    /// Every policy of this view.
    fn policies(self) -> Box<dyn Iterator<Item = (&'a ObjectRef, &'a Policy)> + 'a> {
        match self.stage {
            Stage::Enforced => Box::new(self.model.policies.iter()),
            Stage::Staged => Box::new(staged_view::staged_policies(self.model)),
        }
    }
}

/// The staged view's compiler and the ports it compiles for.
#[derive(Debug)]
struct Staging {
    compiler: Compiler,
    touched: Touched,
}

/// One ClusterNetworkPolicy's contribution and where it was compiled to start in its tier.
#[derive(Debug)]
struct ClusterPart {
    start: cluster::Start,
    compiled: ClusterCompiled,
}

/// Indexes of the model the compiler keeps in step with the changes it is told about.
#[derive(Debug, Default)]
struct Index {
    ports: BTreeMap<u32, LocalPort>,
    local_by_ns: BTreeMap<SharedStr, BTreeSet<u32>>,
    /// The bridge ports of each local pod (a pod may have more than one).
    local_by_pod: BTreeMap<ObjectRef, BTreeSet<u32>>,
    policies_by_ns: BTreeMap<SharedStr, BTreeSet<ObjectRef>>,
    /// Policies whose peers may be in other namespaces (a namespaceSelector, or an egress
    /// rule to every pod with a named port).
    ns_selecting: BTreeSet<ObjectRef>,
    /// `ns_selecting` policies that currently have flows (the only ones a peer change can
    /// affect).
    active_ns_selecting: BTreeSet<ObjectRef>,
}

/// The incremental compiler. Pure: no I/O, clock or logging; `now` (monotonic seconds) is an
/// input, used only for the id grace period.
#[derive(Debug)]
pub struct Compiler {
    cfg: Config,
    stage: Stage,
    /// The staged view's compiler (none in the staged compiler itself).
    staging: Option<Box<Staging>>,
    ids: IdAllocator,
    idx: Index,
    compiled: BTreeMap<ObjectRef, Compiled>,
    /// Pod -> the policies whose peers selected it.
    peer_index: BTreeMap<ObjectRef, BTreeSet<ObjectRef>>,
    ns_index: BTreeMap<String, BTreeSet<ObjectRef>>,
    /// (direction, ofport) -> the policies isolating that port in that direction.
    isolated: BTreeMap<(Direction, u32), BTreeSet<ObjectRef>>,
    clause_acts: BTreeMap<FlowKey, BTreeSet<Conj>>,
    /// Per-port flow keys and the ports that claim them, with each port's value.
    port_claims: BTreeMap<FlowKey, BTreeMap<u32, FlowValue>>,
    /// The keys of the node's flows (gateway, uplinks, Services).
    node_keys: BTreeSet<FlowKey>,
    /// Each ClusterNetworkPolicy's contribution, by name (enforced compiler only).
    cluster: BTreeMap<String, ClusterPart>,
    /// The node's ports (gateway, uplinks), for their names.
    node_ports: Vec<NodePort>,
    flows: DesiredFlows,
    rules: RuleTable,
    touched: BTreeSet<FlowKey>,
}

impl Compiler {
    /// A compiler with no flows yet; call [`Compiler::full`] first. The staged view's rules
    /// get ids of their own, from a fresh allocator (see [`Compiler::recovering`]).
    pub fn new(cfg: Config, ids: IdAllocator) -> Self {
        let staged_ids = ids.with_same_grace();
        let staged = Compiler::of_stage(cfg.clone(), Stage::Staged, staged_ids);
        let mut c = Compiler::of_stage(cfg, Stage::Enforced, ids);
        c.staging = Some(Box::new(Staging { compiler: staged, touched: Touched::default() }));
        c
    }

    /// A compiler whose rules, enforced and staged, keep the conjunction ids of the installed
    /// flows `dump` ([`IdAllocator::recover`]); released ids stay reserved for `grace` seconds.
    pub fn recovering(cfg: Config, dump: &[ofp::FlowStats], grace: u64) -> Self {
        let mut c = Compiler::new(cfg, IdAllocator::recover(dump, grace));
        if let Some(s) = c.staging.as_mut() {
            s.compiler.ids = IdAllocator::recover_staged(dump, grace);
        }
        c
    }

    fn of_stage(cfg: Config, stage: Stage, ids: IdAllocator) -> Self {
        Compiler {
            cfg,
            stage,
            staging: None,
            ids,
            idx: Index::default(),
            compiled: BTreeMap::new(),
            peer_index: BTreeMap::new(),
            ns_index: BTreeMap::new(),
            isolated: BTreeMap::new(),
            clause_acts: BTreeMap::new(),
            port_claims: BTreeMap::new(),
            node_keys: BTreeSet::new(),
            cluster: BTreeMap::new(),
            node_ports: Vec::new(),
            flows: DesiredFlows::new(),
            rules: RuleTable::default(),
            touched: BTreeSet::new(),
        }
    }

    /// Recompiles everything from `model`; returns the flow keys whose flows changed.
    /// Ends id recovery: recovered ids no rule claimed are released.
    pub fn full(&mut self, model: &Model, now: u64) -> BTreeSet<FlowKey> {
        if let Some(s) = self.staging.as_mut() {
            let ofports: BTreeSet<u32> = s.touched.ports.keys().chain(model.ports.keys()).copied().collect();
            s.touched.recheck(model, ofports);
        }
        self.full_view(View::enforced(model), now);
        self.with_staging(|s| {
            let v = View { model, stage: Stage::Staged, ports: &s.touched.ports };
            s.compiler.full_view(v, now)
        });
        std::mem::take(&mut self.touched)
    }

    /// Recompiles everything of view `v`; the flows it changed are in `self.touched`.
    fn full_view(&mut self, v: View<'_>, now: u64) {
        let model = v.model;
        self.idx.policies_by_ns.clear();
        self.idx.ns_selecting.clear();
        self.idx.active_ns_selecting.clear();
        for (r, p) in v.policies() {
            self.index_policy(r, Some(p));
        }
        if self.stage == Stage::Enforced {
            for (k, value) in pipeline_flows(self.cfg.controller_id) {
                self.set_flow(k, Some(value));
            }
            self.node_changed(model);
        }
        let ports: BTreeSet<u32> = self.idx.ports.keys().chain(v.ports.keys()).copied().collect();
        for o in ports {
            self.port_changed(v, o);
        }
        let policies: BTreeSet<ObjectRef> =
            self.compiled.keys().cloned().chain(v.policies().map(|(r, _)| r.clone())).collect();
        for p in &policies {
            self.recompile(v, p, now);
        }
        let drops: Vec<u32> = self.idx.ports.keys().copied().collect();
        for o in drops {
            self.refresh_drops(v, o);
        }
        if self.stage == Stage::Enforced {
            self.recompile_cluster(model, &[], true, now);
        }
        self.ids.finish_recovery(now);
    }

    /// Runs `f` on the staged view's compiler and takes the flows it changed into this one's.
    fn with_staging(&mut self, f: impl FnOnce(&mut Staging)) {
        let Some(mut s) = self.staging.take() else { return };
        f(&mut s);
        for k in std::mem::take(&mut s.compiler.touched) {
            self.set_flow(k.clone(), s.compiler.flows.get(&k).cloned());
        }
        self.staging = Some(s);
    }

    /// Applies `changes` (objects that changed in `model`, which is already their new state);
    /// returns the flow keys whose flows changed.
    pub fn update(&mut self, model: &Model, changes: &[Change], now: u64) -> BTreeSet<FlowKey> {
        let mut retouched = Vec::new();
        if let Some(s) = self.staging.as_mut() {
            let ofports = ports_to_recheck(model, &s.touched, changes);
            retouched = s.touched.recheck(model, ofports);
        }
        self.update_view(View::enforced(model), changes, now);
        // The WouldAllow checks beside their default drops.
        for o in &retouched {
            self.refresh_drops(View::enforced(model), *o);
        }
        self.with_staging(|s| {
            let mut changes = changes.to_vec();
            changes.extend(retouched.iter().map(|o| Change::Port(*o)));
            let v = View { model, stage: Stage::Staged, ports: &s.touched.ports };
            s.compiler.update_view(v, &changes, now)
        });
        std::mem::take(&mut self.touched)
    }

    /// Applies `changes` to view `v`; the flows it changed are in `self.touched`.
    fn update_view(&mut self, v: View<'_>, changes: &[Change], now: u64) {
        let model = v.model;
        let mut policies = BTreeSet::new();
        let mut patch = BTreeSet::new();
        let mut drops = BTreeSet::new();
        for ch in changes {
            match ch {
                Change::Policy(r) => {
                    self.index_policy(r, v.policy(r));
                    policies.insert(r.clone());
                }
                Change::StagedPolicy(r) if self.stage == Stage::Staged => {
                    self.index_policy(r, v.policy(r));
                    policies.insert(r.clone());
                }
                Change::StagedPolicy(_) => {}
                Change::Pod(r) => self.pod_changed(v, r, &mut policies, &mut patch),
                Change::Namespace(n) => {
                    // Only policies with applied-to local pods have flows; namespace labels and
                    // annotations never change which local pods a policy selects.
                    let active = self
                        .idx
                        .policies_by_ns
                        .get(n.as_str())
                        .into_iter()
                        .flatten()
                        .filter(|p| self.compiled.contains_key(*p));
                    policies.extend(active.cloned());
                    policies.extend(self.ns_index.get(n).into_iter().flatten().cloned());
                    if let Some(ns) = model.namespaces.get(n) {
                        for p in &self.idx.active_ns_selecting {
                            let hit = v.policy(p).is_some_and(|pol| {
                                pol.peers().any(|peer| match peer {
                                    Peer::Pods { namespace_selector: Some(s), .. } => s.matches(&ns.labels),
                                    _ => false,
                                })
                            });
                            if hit {
                                policies.insert(p.clone());
                            }
                        }
                    }
                    drops.extend(self.idx.local_by_ns.get(n.as_str()).into_iter().flatten().copied());
                }
                Change::Port(o) => {
                    for ns in self.port_namespaces(v, *o) {
                        policies.extend(self.idx.policies_by_ns.get(&ns).into_iter().flatten().cloned());
                    }
                    self.port_changed(v, *o);
                    drops.insert(*o);
                }
                Change::Node if self.stage == Stage::Enforced => self.node_changed(model),
                Change::Node => {}
                // Compiled apart, below.
                Change::ClusterPolicy(_) => {}
            }
        }
        for p in &policies {
            self.recompile(v, p, now);
        }
        for (p, r) in &patch {
            if !policies.contains(p) && !self.patch_pod(v, p, r) {
                self.recompile(v, p, now);
            }
        }
        for o in drops {
            self.refresh_drops(v, o);
        }
        if self.stage == Stage::Enforced {
            self.recompile_cluster(model, changes, false, now);
        }
    }

    /// Recompiles the ClusterNetworkPolicies `changes` may change (all of them with `all`):
    /// the changed ones, those whose place in their tier's order moved, those that read (or may
    /// now read) a changed pod (as a peer, or as a subject when it is local), those a changed
    /// port is (or now is) a subject of; every one on a namespace change. Applies the
    /// difference: first every old flow the new ones do not keep, then the new ones, as two
    /// policies may trade priorities.
    fn recompile_cluster(&mut self, model: &Model, changes: &[Change], all: bool, now: u64) {
        if model.cluster_policies.is_empty() && self.cluster.is_empty() {
            return;
        }
        let starts = cluster::starts(model);
        let names: BTreeSet<&String> = starts.keys().chain(self.cluster.keys()).collect();
        let todo: BTreeSet<String> = names
            .into_iter()
            .filter(|name| {
                let part = self.cluster.get(*name);
                all || part.map(|p| p.start) != starts.get(*name).copied()
                    || changes.iter().any(|ch| match ch {
                        Change::ClusterPolicy(n) => n == *name,
                        Change::Namespace(_) => true,
                        Change::Port(o) => {
                            part.is_some_and(|p| p.compiled.subject_ports.contains(o))
                                || model
                                    .cluster_policies
                                    .get(*name)
                                    .is_some_and(|p| cluster::subject_port(model, p, *o))
                        }
                        Change::Pod(r) => {
                            let local = self.idx.local_by_pod.contains_key(r);
                            part.is_some_and(|p| p.compiled.read_pods.contains(r))
                                || model
                                    .cluster_policies
                                    .get(*name)
                                    .is_some_and(|p| cluster::might_read(model, p, r, local))
                        }
                        Change::Policy(_) | Change::StagedPolicy(_) | Change::Node => false,
                    })
            })
            .cloned()
            .collect();
        let (mut old_flows, mut new_flows) = (BTreeSet::new(), BTreeMap::new());
        let (mut old_rules, mut new_rules) = (BTreeMap::new(), BTreeMap::new());
        for name in todo {
            let new = match (model.cluster_policies.get(&name), starts.get(&name)) {
                (Some(p), Some(start)) => Some(ClusterPart {
                    start: *start,
                    compiled: cluster::compile(model, &self.idx.ports, &mut self.ids, p, *start),
                }),
                _ => None,
            };
            if let Some(old) = self.cluster.remove(&name) {
                old_flows.extend(old.compiled.flows.into_keys());
                old_rules.extend(old.compiled.rules);
            }
            if let Some(new) = new {
                new_flows.extend(new.compiled.flows.iter().map(|(k, v)| (k.clone(), v.clone())));
                new_rules.extend(new.compiled.rules.iter().map(|(k, v)| (k.clone(), v.clone())));
                self.cluster.insert(name, new);
            }
        }
        for k in old_flows {
            if !new_flows.contains_key(&k) {
                self.set_flow(k, None);
            }
        }
        for (k, v) in new_flows {
            self.set_flow(k, Some(v));
        }
        self.replace_rules(&old_rules, &new_rules, now);
    }

    /// Forgets deleted rules and released ids whose grace period ended at `now`.
    pub fn expire(&mut self, now: u64) {
        if let Some(s) = self.staging.as_mut() {
            s.compiler.expire(now);
        }
        for id in self.ids.expire(now) {
            if self.rules.rules.get(&id).is_some_and(|r| r.deleted) {
                self.rules.rules.remove(&id);
            }
        }
    }

    /// The desired flows.
    pub fn flows(&self) -> &DesiredFlows {
        &self.flows
    }

    /// Conjunction id -> rule, ofport -> pod.
    pub fn rules(&self) -> &RuleTable {
        &self.rules
    }

    /// The staged view's compiler: its rule table names the staged rules behind `WouldAllow`
    /// lines, and [`Compiler::isolating`] the policies that would isolate a pod.
    pub fn staged(&self) -> Option<&Compiler> {
        self.staging.as_ref().map(|s| &s.compiler)
    }

    /// The policies isolating local port `ofport` in `direction`, sorted: the reason its
    /// default drop exists (`npagent explain`, and the JSON audit log's default drops).
    pub(crate) fn isolating(&self, direction: Direction, ofport: u32) -> impl Iterator<Item = &ObjectRef> {
        self.isolated.get(&(direction, ofport)).into_iter().flatten()
    }

    /// The id allocator (its state survives only through the installed flows).
    pub fn ids(&self) -> &IdAllocator {
        &self.ids
    }

    /// Port names by ofport (pods' and the node's), for [`super::text::flows_text`].
    pub fn port_names(&self) -> BTreeMap<u32, String> {
        let mut names: BTreeMap<u32, String> = self.idx.ports.iter().map(|(o, p)| (*o, p.interface.clone())).collect();
        names.extend(self.node_ports.iter().map(|p| (p.ofport, p.interface.clone())));
        names
    }

    fn index_policy(&mut self, r: &ObjectRef, p: Option<&Policy>) {
        if let Some(set) = self.idx.policies_by_ns.get_mut(&*r.namespace) {
            set.remove(r);
        }
        self.idx.ns_selecting.remove(r);
        self.idx.active_ns_selecting.remove(r);
        if let Some(p) = p {
            self.idx.policies_by_ns.entry(r.namespace.clone()).or_default().insert(r.clone());
            let selects_ns = policy::reads_every_pod(p)
                || p.peers().any(|peer| matches!(peer, Peer::Pods { namespace_selector: Some(_), .. }));
            if selects_ns {
                self.idx.ns_selecting.insert(r.clone());
                if self.compiled.contains_key(r) {
                    self.idx.active_ns_selecting.insert(r.clone());
                }
            }
        }
    }

    /// Sorts the policies a pod change affects: `full` (recompile: the pod is local, so it may
    /// change what a policy applies to) or `patch` (only its membership in peers changes).
    fn pod_changed(
        &mut self,
        v: View<'_>,
        r: &ObjectRef,
        full: &mut BTreeSet<ObjectRef>,
        patch: &mut BTreeSet<(ObjectRef, ObjectRef)>,
    ) {
        let model = v.model;
        let pod = model.pods.get(r);
        let local = self.idx.local_by_pod.contains_key(r);
        let mut affected: BTreeSet<ObjectRef> = self.peer_index.get(r).into_iter().flatten().cloned().collect();
        if local {
            full.extend(self.idx.policies_by_ns.get(&*r.namespace).into_iter().flatten().cloned());
        }
        if let Some(pod) = pod.filter(|p| !p.ips.is_empty()) {
            let ns_labels = model.namespaces.get(&*r.namespace).map(|n| &n.labels);
            let candidates =
                self.idx.policies_by_ns.get(&*r.namespace).into_iter().flatten().chain(&self.idx.active_ns_selecting);
            for p in candidates {
                // A policy without applied-to local pods has no flows, whatever its peers select.
                if affected.contains(p) || !self.compiled.contains_key(p) {
                    continue;
                }
                let Some(pol) = v.policy(p) else { continue };
                if policy::selects_peer(pol, &r.namespace, ns_labels, &pod.labels) {
                    affected.insert(p.clone());
                }
            }
        }
        for p in affected {
            if local {
                full.insert(p);
            } else {
                patch.insert((p, r.clone()));
            }
        }
    }

    /// Updates policy `p`'s flows for remote pod `r`'s membership in its peers without
    /// recompiling it. Returns false when only a recompile can do it (a rule gains its first
    /// or loses its last peer, or its flows depend on the peers' named ports).
    fn patch_pod(&mut self, v: View<'_>, p: &ObjectRef, r: &ObjectRef) -> bool {
        let model = v.model;
        let Some(pol) = v.policy(p) else { return false };
        if policy::has_named_egress(pol) {
            return false;
        }
        let Some(mut c) = self.compiled.remove(p) else { return false };
        let pod = model.pods.get(r).filter(|x| !x.ips.is_empty());
        let ns_labels = model.namespaces.get(&*r.namespace).map(|n| &n.labels);
        let selects = |peers: &[Peer]| {
            pod.is_some_and(|pod| {
                peers.iter().any(|peer| policy::peer_selects(peer, pol, &r.namespace, ns_labels, &pod.labels))
            })
        };
        let mut plan = Vec::new();
        let mut ok = true;
        for (si, rs) in c.rule_states.iter_mut().enumerate() {
            let Some(peers) = policy::rule_peers(pol, rs.direction, rs.index) else {
                ok = false;
                break;
            };
            let new_ips = pod.filter(|_| selects(peers)).map(|pod| &pod.ips);
            if rs.peers.members.get(r) == new_ips {
                continue;
            }
            let (removed, added) = rs.peers.set_member(r, new_ips);
            if rs.peers.prefixes.is_empty() {
                ok = false;
                break;
            }
            plan.push((si, removed, added));
        }
        // A rule without peers was skipped at compile time: the pod may be its first.
        let skipped_rule_gains = policy::rules_with_peers(pol).any(|(dir, i, peers)| {
            !c.rule_states.iter().any(|rs| rs.direction == dir && rs.index == i) && selects(peers)
        });
        if !ok || skipped_rule_gains {
            // Recompile from the untouched old contributions (rule_states are rebuilt).
            self.compiled.insert(p.clone(), c);
            return false;
        }
        for (si, removed, added) in plan {
            let Some((dir, groups)) = c.rule_states.get(si).map(|rs| (rs.direction, rs.groups.clone())) else {
                continue;
            };
            for (cidr, add) in removed.iter().map(|c| (c, false)).chain(added.iter().map(|c| (c, true))) {
                let key = FlowKey::new(self.stage.rule_table(dir), priority::NORMAL, policy::peer_match(dir, cidr));
                for (id, n) in &groups {
                    let conj = Conj { id: *id, clause: 0, n: *n };
                    if add {
                        c.clauses.insert((key.clone(), conj));
                        self.clause_acts.entry(key.clone()).or_default().insert(conj);
                    } else {
                        c.clauses.remove(&(key.clone(), conj));
                        if let Some(set) = self.clause_acts.get_mut(&key) {
                            set.remove(&conj);
                        }
                    }
                }
                self.refresh_clause(&key);
            }
        }
        let member = c.rule_states.iter().any(|rs| rs.peers.members.contains_key(r));
        if member {
            if c.peer_pods.insert(r.clone()) {
                self.peer_index.entry(r.clone()).or_default().insert(p.clone());
            }
        } else if c.peer_pods.remove(r) {
            index_remove(&mut self.peer_index, r, p);
        }
        self.compiled.insert(p.clone(), c);
        true
    }

    fn port_namespaces(&self, v: View<'_>, o: u32) -> BTreeSet<SharedStr> {
        self.idx.ports.get(&o).into_iter().chain(v.ports.get(&o)).map(|p| p.pod.namespace.clone()).collect()
    }

    /// The per-port flows of `p`: its forwarding, or in the staged compiler its entry into the
    /// staged tables.
    fn port_flows(&self, p: &LocalPort) -> Vec<(FlowKey, FlowValue)> {
        match self.stage {
            Stage::Enforced => port_flows(p, self.cfg.controller_id),
            Stage::Staged => staged::entry_flows(p),
        }
    }

    /// Re-indexes port `o` and refreshes its per-port flows.
    fn port_changed(&mut self, v: View<'_>, o: u32) {
        if self.idx.ports.get(&o) == v.ports.get(&o) {
            return;
        }
        let mut keys = BTreeSet::new();
        if let Some(old) = self.idx.ports.remove(&o) {
            if let Some(set) = self.idx.local_by_ns.get_mut(&*old.pod.namespace) {
                set.remove(&o);
            }
            index_remove(&mut self.idx.local_by_pod, &old.pod, &o);
            self.rules.ports.remove(&o);
            for (k, _) in self.port_flows(&old) {
                if let Some(claims) = self.port_claims.get_mut(&k) {
                    claims.remove(&o);
                }
                keys.insert(k);
            }
        }
        if let Some(new) = v.ports.get(&o) {
            self.idx.local_by_ns.entry(new.pod.namespace.clone()).or_default().insert(o);
            self.idx.local_by_pod.entry(new.pod.clone()).or_default().insert(o);
            self.idx.ports.insert(o, new.clone());
            self.rules.ports.insert(o, new.pod.clone());
            for (k, value) in self.port_flows(new) {
                self.port_claims.entry(k.clone()).or_default().insert(o, value);
                keys.insert(k);
            }
        }
        for k in keys {
            self.refresh_port_key(k);
        }
    }

    /// Replaces the node's flows with those of `model.node`.
    fn node_changed(&mut self, model: &Model) {
        let new: BTreeMap<FlowKey, FlowValue> = node_flows(&model.node).into_iter().collect();
        self.node_ports = model.node.gateway.iter().chain(&model.node.uplinks).cloned().collect();
        for k in std::mem::take(&mut self.node_keys) {
            if !new.contains_key(&k) {
                self.set_flow(k, None);
            }
        }
        for (k, v) in new {
            self.node_keys.insert(k.clone());
            self.set_flow(k, Some(v));
        }
    }

    /// Installs the flow of the lowest ofport that claims `k`. Any choice is safe: the flows
    /// that can share a key set `reg1`, which picks both the ingress policy that applies and
    /// the port the packet leaves by.
    fn refresh_port_key(&mut self, k: FlowKey) {
        let value = self.port_claims.get(&k).and_then(|claims| claims.values().next().cloned());
        if value.is_none() {
            self.port_claims.remove(&k);
        }
        self.set_flow(k, value);
    }

    fn recompile(&mut self, v: View<'_>, r: &ObjectRef, now: u64) {
        let new = match v.policy(r) {
            Some(p) => {
                let lk = Lookup {
                    model: v.model,
                    stage: self.stage,
                    ports: &self.idx.ports,
                    local_by_ns: &self.idx.local_by_ns,
                };
                compile_policy(&lk, &mut self.ids, r, p)
            }
            None => Compiled::default(),
        };
        let old = self.compiled.remove(r).unwrap_or_default();

        // Clause contributions.
        for (k, c) in old.clauses.difference(&new.clauses) {
            if let Some(set) = self.clause_acts.get_mut(k) {
                set.remove(c);
            }
            self.refresh_clause(k);
        }
        for (k, c) in new.clauses.difference(&old.clauses) {
            self.clause_acts.entry(k.clone()).or_default().insert(*c);
            self.refresh_clause(k);
        }
        // Owned flows.
        for k in old.owned.keys() {
            if !new.owned.contains_key(k) {
                self.set_flow(k.clone(), None);
            }
        }
        for (k, v) in &new.owned {
            self.set_flow(k.clone(), Some(v.clone()));
        }
        // Isolation. Every port it isolates, or did, is refreshed: the policy's own logging
        // annotation decides whether their default drops log.
        let drops: BTreeSet<(Direction, u32)> = old.isolates.union(&new.isolates).copied().collect();
        for o in old.isolates.difference(&new.isolates) {
            index_remove(&mut self.isolated, o, r);
        }
        for o in new.isolates.difference(&old.isolates) {
            self.isolated.entry(*o).or_default().insert(r.clone());
        }
        for (dir, o) in drops {
            self.refresh_drop(v, dir, o);
        }
        // Reverse indexes.
        reindex(&mut self.peer_index, &old.peer_pods, &new.peer_pods, r);
        reindex(&mut self.ns_index, &old.namespaces, &new.namespaces, r);
        self.replace_rules(&old.rules, &new.rules, now);
        if !new.is_empty() {
            self.compiled.insert(r.clone(), new);
            if self.idx.ns_selecting.contains(r) {
                self.idx.active_ns_selecting.insert(r.clone());
            }
        } else {
            self.idx.active_ns_selecting.remove(r);
        }
    }

    /// Rule ids and the rule table: the rules only in `old` release their ids (and stay
    /// resolvable, marked deleted, for the grace period from `now`); `new`'s are entered.
    fn replace_rules(&mut self, old: &BTreeMap<RuleKey, RuleInfo>, new: &BTreeMap<RuleKey, RuleInfo>, now: u64) {
        for (key, info) in old {
            if !new.contains_key(key) {
                self.ids.release(key, now);
                if let Some(entry) = self.rules.rules.get_mut(&info.id) {
                    entry.deleted = true;
                }
            }
        }
        for info in new.values() {
            self.rules.rules.insert(info.id, info.clone());
        }
    }

    fn refresh_clause(&mut self, k: &FlowKey) {
        let value = match self.clause_acts.get(k) {
            Some(set) if !set.is_empty() => Some(policy::clause_value(set)),
            _ => {
                self.clause_acts.remove(k);
                None
            }
        };
        self.set_flow(k.clone(), value);
    }

    fn refresh_drops(&mut self, v: View<'_>, o: u32) {
        for dir in Direction::BOTH {
            self.refresh_drop(v, dir, o);
        }
    }

    /// The default drop of port `o` in `direction`: there while a policy isolates it, with a
    /// logging copy while its namespace logs or one of the policies isolating it there does,
    /// and beside it the `WouldAllow` check while a staged policy touches the port. In the
    /// staged compiler, the port's staged Drop verdict.
    fn refresh_drop(&mut self, v: View<'_>, direction: Direction, o: u32) {
        let table = self.stage.default_table(direction);
        let key = FlowKey::new(table, priority::NORMAL, vec![flow::applied_match(direction, o)]);
        let port = self.idx.ports.get(&o);
        let isolated = port.zip(self.isolated.get(&(direction, o)).filter(|set| !set.is_empty()));
        let value = isolated.map(|(port, set)| match self.stage {
            Stage::Staged => FlowValue {
                cookie: cookie::cookie(Kind::Staged, u64::from(o)),
                instructions: vec![Instruction::ApplyActions(staged::isolated(direction))],
            },
            Stage::Enforced => {
                let logging = namespace_logging(v.model, &port.pod.namespace)
                    || set.iter().any(|p| v.policy(p).is_some_and(policy_logging));
                let instructions = if logging {
                    let ud = LogUserdata { disposition: Disposition::Drop, table_id: table, subject: o };
                    vec![Instruction::ApplyActions(vec![flow::controller(
                        &ud,
                        meters::pod(MeterKind::Drop, o),
                        self.cfg.controller_id,
                    )])]
                } else {
                    vec![]
                };
                FlowValue { cookie: cookie::cookie(Kind::DefaultDrop, u64::from(o)), instructions }
            }
        });
        if self.stage == Stage::Enforced {
            let touched = self.staging.as_ref().is_some_and(|s| s.touched.ports.contains_key(&o));
            let (check, check_value) = staged::would_allow_check(
                direction,
                o,
                value.as_ref().map(|d| d.instructions.as_slice()).unwrap_or_default(),
            );
            self.set_flow(check, value.as_ref().filter(|_| touched).map(|_| check_value));
        }
        self.set_flow(key, value);
    }

    fn set_flow(&mut self, k: FlowKey, v: Option<FlowValue>) {
        match v {
            Some(v) => {
                if self.flows.get(&k) != Some(&v) {
                    self.touched.insert(k.clone());
                    self.flows.insert(k, v);
                }
            }
            None => {
                if self.flows.remove(&k).is_some() {
                    self.touched.insert(k);
                }
            }
        }
    }
}

/// The local ports whose touch by a staged policy `changes` may change: every port of the
/// namespace of a changed policy (enforced or staged), a changed pod's, a changed port.
fn ports_to_recheck(model: &Model, touched: &Touched, changes: &[Change]) -> BTreeSet<u32> {
    let mut out = BTreeSet::new();
    let ports = || model.ports.values().chain(touched.ports.values());
    for ch in changes {
        match ch {
            Change::Policy(r) | Change::StagedPolicy(r) => {
                out.extend(ports().filter(|p| p.pod.namespace == r.namespace).map(|p| p.ofport));
            }
            Change::Pod(r) => out.extend(ports().filter(|p| &p.pod == r).map(|p| p.ofport)),
            Change::Port(o) => {
                out.insert(*o);
            }
            Change::Namespace(_) | Change::Node | Change::ClusterPolicy(_) => {}
        }
    }
    out
}

/// Removes `v` from the set of `k` in a reverse index, and the set once it is empty.
fn index_remove<K: Ord, V: Ord>(index: &mut BTreeMap<K, BTreeSet<V>>, k: &K, v: &V) {
    if let Some(set) = index.get_mut(k) {
        set.remove(v);
        if set.is_empty() {
            index.remove(k);
        }
    }
}

/// Moves `r` in a reverse index from the keys only in `old` to the keys only in `new`.
fn reindex<K: Ord + Clone>(
    index: &mut BTreeMap<K, BTreeSet<ObjectRef>>,
    old: &BTreeSet<K>,
    new: &BTreeSet<K>,
    r: &ObjectRef,
) {
    for k in old.difference(new) {
        index_remove(index, k, r);
    }
    for k in new.difference(old) {
        index.entry(k.clone()).or_default().insert(r.clone());
    }
}

/// Compiles `model` from scratch with a fresh compiler: the flows, the rule table and the
/// allocator state.
pub fn compile(model: &Model, cfg: Config, ids: IdAllocator, now: u64) -> Compiler {
    let mut c = Compiler::new(cfg, ids);
    c.full(model, now);
    c
}
