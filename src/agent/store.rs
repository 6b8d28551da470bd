//! The model as the sources describe it: applies source events and bridge ports to a
//! [`Model`], converting Kubernetes objects on the way, and reports what changed.
//!
//! Bad input never stops the agent and never opens what was closed (fail closed):
//! - an object whose new version does not convert keeps its last good version, with a warning
//!   naming it (manifests and API server alike: conversion happens here);
//! - a NetworkPolicy that never was valid isolates the pods its podSelector selects, for
//!   ingress with nothing allowed, when that selector can be read; otherwise it is ignored;
//! - an object whose name or namespace breaks Kubernetes' naming rules is refused outright
//!   (nothing is kept under a name that could forge a log line);
//! - deleting an object removes whatever the store held for it;
//! - a StagedNetworkPolicy is converted as a NetworkPolicy is and kept apart
//!   ([`Model::staged_policies`]): it changes no enforced policy and no flow, so the store
//!   reports no [`Change`] for it. Its invalid version leaves the last good one staged; one
//!   that never was valid is reported and not staged (isolating nothing is its fail-closed).
//! - a ClusterNetworkPolicy is converted with the CRD's rules ([`cluster_policy::convert`])
//!   and kept by name ([`Model::cluster_policies`]), reported as [`Change::ClusterPolicy`] when
//!   its converted value changes. Its invalid version leaves the last good one in force; one
//!   that never was valid is reported and not enforced.
//!
//! Nodes are kept apart from the model ([`Store::nodes`]): they change routes, never a flow,
//! so the store reports no [`Change`] for them.
//!
//! Only live pods own IPs: the model's pods carry just the addresses they win (see
//! [`crate::model::liveness`]), so a finished pod is no peer and no name in the audit log, and
//! an address two pods claim belongs to one of them only.

use super::claims::AddressClaims;
use crate::cni::attach::PodStatus;
use crate::compiler::Change;
use crate::model::node::ClusterNodes;
use crate::model::{cluster_policy, convert, ClaimRank, Interner, LocalPort, Model, Node, ObjectRef, Pod};
use crate::source::ovsdb::db::BridgePorts;
use crate::source::{Kind, KubeObject, SourceEvent, Sourced};
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::time::SystemTime;

// The store's hash maps are keyed by names from the sources, hashed once per object per
// listing: foldhash (seeded per process, as std's SipHash is) takes a fraction of
// SipHash's time on such short keys.
type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
type HashSet<K> = std::collections::HashSet<K, foldhash::fast::RandomState>;

/// The model plus what the store needs to keep it honest.
#[derive(Debug, Default)]
pub struct Store {
    model: Model,
    /// Which pod holds each address.
    claims: AddressClaims,
    /// Objects whose latest version is invalid, with the problem last reported (each is
    /// reported once, not at every relist).
    invalid: HashMap<(Kind, ObjectRef), String>,
    /// Policies held as a fail-closed isolation: they never were valid.
    fail_closed: BTreeSet<ObjectRef>,
    /// Which kinds have had their initial list.
    synced: BTreeSet<Kind>,
    /// Per kind with a listing under way (chunks received, closing reset not yet): the
    /// objects it contained so far.
    listing: BTreeMap<Kind, HashSet<ObjectRef>>,
    /// Namespace -> the logging annotation value already warned about.
    logging_warned: BTreeMap<String, String>,
    /// Policies already warned about for living in a namespace that does not exist.
    orphans_warned: BTreeSet<ObjectRef>,
    /// The strings the model's pods and namespaces share.
    strings: Interner,
    /// Live pods whose status gives no address yet, with their claim: each holds the
    /// addresses of its bridge port (`ip-address`, what the CNI allocated) until its status
    /// says otherwise.
    port_addressed: HashMap<ObjectRef, (ClaimRank, Option<SystemTime>)>,
    /// This node's name (`--node`), when given: a Pod scheduled to another node is remote.
    local_node: Option<String>,
    /// The cluster's Nodes.
    nodes: ClusterNodes,
    /// Whether `nodes` changed since [`Store::take_nodes_changed`] last said so.
    nodes_changed: bool,
}

impl Store {
    /// The current model.
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// The live pod that holds this IP, if the model knows one.
    pub fn pod_by_ip(&self, ip: &IpAddr) -> Option<&ObjectRef> {
        self.claims.holder(ip)
    }

    /// What the store knows of Pod `namespace/name`: held, refused (its latest version did
    /// not convert and none is held, with why), or unknown.
    pub fn pod_status(&self, namespace: &str, name: &str) -> PodStatus {
        let r = ObjectRef { namespace: namespace.into(), name: name.into() };
        if let Some(pod) = self.model.pods.get(&r) {
            return match (&pod.node, &self.local_node) {
                (Some(there), Some(here)) if **there != **here => PodStatus::Refused(format!(
                    "Pod {r} is scheduled to node {there:?} (spec.nodeName), not to this node {here:?} (--node): \
                     it has no port here"
                )),
                _ => PodStatus::Known,
            };
        }
        match self.invalid.get(&(Kind::Pod, r)) {
            Some(why) => PodStatus::Refused(why.clone()),
            None => PodStatus::Unknown,
        }
    }

    /// Names this node (`--node`; empty: not named): Pods scheduled to other nodes are then
    /// remote, never attached here.
    pub fn set_local_node(&mut self, name: &str) {
        self.local_node = Some(name.to_owned()).filter(|n| !n.is_empty());
    }

    /// The cluster's Nodes as their objects say; `None` until they have been listed.
    pub fn nodes(&self) -> Option<&ClusterNodes> {
        self.synced.contains(&Kind::Node).then_some(&self.nodes)
    }

    /// Whether [`Store::nodes`] changed (or was first listed) since this was last asked.
    pub fn take_nodes_changed(&mut self) -> bool {
        std::mem::take(&mut self.nodes_changed)
    }

    /// True once every kind has had its initial list.
    pub fn is_synced(&self) -> bool {
        Kind::ALL.iter().all(|k| self.synced.contains(k))
    }

    /// The policies whose latest version was refused, with why.
    pub fn refused_policies(&self) -> BTreeMap<ObjectRef, String> {
        self.invalid
            .iter()
            .filter(|((kind, _), _)| *kind == Kind::NetworkPolicy)
            .map(|((_, r), why)| (r.clone(), why.clone()))
            .collect()
    }

    /// Applies one source event; returns the model changes it caused. Pods are judged live
    /// or finished against the system clock.
    pub fn apply(&mut self, event: SourceEvent) -> Vec<Change> {
        self.apply_at(event, SystemTime::now())
    }

    /// [`Store::apply`] with the clock reading `now`.
    pub fn apply_at(&mut self, event: SourceEvent, now: SystemTime) -> Vec<Change> {
        // A deadline passes without an event of its own: each event also ends the claims
        // whose time is up.
        let mut changes = self.expire_pods(now);
        match event {
            SourceEvent::ResetChunk { kinds, objects } => self.list(&kinds, objects, now, &mut changes),
            SourceEvent::Reset { kinds, objects } => self.reset(&kinds, objects, now, &mut changes),
            SourceEvent::Applied(obj) => {
                let key = self.key_of(&obj.object);
                if let Some(seen) = self.listing.get_mut(&key.0) {
                    seen.insert(key.1.clone());
                }
                self.upsert(obj, key, now, &mut changes);
            }
            SourceEvent::Deleted { kind, object } => {
                if let Some(seen) = self.listing.get_mut(&kind) {
                    seen.remove(&object);
                }
                self.remove(kind, &object, &mut changes);
            }
            SourceEvent::Invalid { origin, error } => tracing::warn!(%origin, "{error}"),
        }
        changes
    }

    /// Ends the claims of pods whose deletion deadline has passed by `now` (no event may
    /// come for them: a pod on a lost node stays Terminating); returns the changes. Meant to
    /// be called periodically.
    pub fn expire_pods(&mut self, now: SystemTime) -> Vec<Change> {
        let mut changes = Vec::new();
        while let Some(r) = self.claims.first_expired(now) {
            let touched = self.claims.release(&self.model.pods, &r);
            if let Some(pod) = self.model.pods.get_mut(&r) {
                if !pod.ips.is_empty() {
                    pod.ips.clear();
                    changes.push(Change::Pod(r.clone()));
                }
            }
            self.claims.refresh(&mut self.model.pods, &touched, &r, &mut changes);
        }
        changes
    }

    /// Replaces the bridge's classified ports (pods', the gateway, uplinks); returns the
    /// changes.
    pub fn set_bridge_ports(&mut self, ports: &BridgePorts) -> Vec<Change> {
        let mut changes = self.set_ports(&ports.pods);
        let node = &mut self.model.node;
        if node.gateway != ports.gateway || node.uplinks != ports.uplinks {
            node.gateway = ports.gateway.clone();
            node.uplinks = ports.uplinks.clone();
            changes.push(Change::Node);
        }
        changes
    }

    /// Sets what the flags say of the node (its addresses, the Service ranges), keeping the
    /// ports OVSDB named; returns the changes.
    pub fn set_node_config(&mut self, config: &Node) -> Vec<Change> {
        let node = &mut self.model.node;
        let old = (&node.gateway_ips, &node.node_ips, &node.service_cidrs);
        if old == (&config.gateway_ips, &config.node_ips, &config.service_cidrs) {
            return Vec::new();
        }
        node.gateway_ips = config.gateway_ips.clone();
        node.node_ips = config.node_ips.clone();
        node.service_cidrs = config.service_cidrs.clone();
        vec![Change::Node]
    }

    /// Replaces the bridge's pod ports; returns the changes.
    pub fn set_ports(&mut self, ports: &[LocalPort]) -> Vec<Change> {
        let new: BTreeMap<u32, LocalPort> = ports.iter().map(|p| (p.ofport, p.clone())).collect();
        let mut changes = Vec::new();
        for (ofport, port) in &new {
            if self.model.ports.get(ofport) != Some(port) {
                changes.push(Change::Port(*ofport));
            }
        }
        for ofport in self.model.ports.keys() {
            if !new.contains_key(ofport) {
                changes.push(Change::Port(*ofport));
            }
        }
        self.model.ports = new;
        // A pod's port address changed or went: its pod's addresses follow.
        let mut by_pod: HashMap<&ObjectRef, Vec<IpAddr>> = HashMap::default();
        for p in self.model.ports.values() {
            by_pod.entry(&p.pod).or_default().extend(p.ips.iter().copied());
        }
        let moved: Vec<_> = self
            .port_addressed
            .iter()
            .filter(|(r, _)| {
                let mut ips = by_pod.get(r).cloned().unwrap_or_default();
                ips.sort();
                ips.dedup();
                self.model.pods.get(*r).is_some_and(|pod| pod.ips != ips)
            })
            .map(|(r, claim)| (r.clone(), *claim))
            .collect();
        for (r, (rank, until)) in moved {
            if let Some(held) = self.model.pods.get(&r) {
                let pod = Pod { ips: Vec::new(), ..(**held).clone() };
                self.put_pod(pod, Some(rank), until, &mut changes);
            }
        }
        changes
    }

    /// The addresses of `r`'s bridge ports.
    fn port_ips(&self, r: &ObjectRef) -> Vec<IpAddr> {
        let mut ips: Vec<IpAddr> =
            self.model.ports.values().filter(|p| p.pod == *r).flat_map(|p| p.ips.iter().copied()).collect();
        ips.sort();
        ips.dedup();
        ips
    }

    /// Warns once about each changed policy whose namespace does not exist (it is compiled
    /// all the same: its pods may exist, and the namespace may come later).
    pub fn check_policy_namespaces(&mut self, changes: &[Change]) {
        if !self.is_synced() {
            return;
        }
        for change in changes {
            let policies: Vec<ObjectRef> = match change {
                Change::Policy(r) => vec![r.clone()],
                Change::Namespace(ns) => self.model.policies_in(ns).map(|(r, _)| r.clone()).collect(),
                _ => continue,
            };
            if let Change::Policy(r) = change {
                // Bad logging annotations: the policy is enforced, its logging is off or unlabelled.
                if let Some(p) = self.model.policies.get(r) {
                    for warning in [p.logging_enabled().err(), p.log_label().err()].into_iter().flatten() {
                        tracing::warn!(policy = %r, "{warning}");
                    }
                }
            }
            for r in policies {
                let missing =
                    self.model.policies.contains_key(&r) && !self.model.namespaces.contains_key(&*r.namespace);
                if !missing {
                    self.orphans_warned.remove(&r);
                } else if self.orphans_warned.insert(r.clone()) {
                    tracing::warn!(policy = %r, "NetworkPolicy {r} names namespace {:?}, which does not exist", r.namespace);
                }
            }
        }
    }

    /// Applies part of a listing of `kinds`: converts and stores the objects, and notes them
    /// as seen by the listing.
    fn list(&mut self, kinds: &[Kind], objects: Vec<Sourced<KubeObject>>, now: SystemTime, changes: &mut Vec<Change>) {
        for kind in kinds {
            self.listing.entry(*kind).or_default();
        }
        for obj in objects {
            let key = self.key_of(&obj.object);
            self.listing.entry(key.0).or_default().insert(key.1.clone());
            self.upsert(obj, key, now, changes);
        }
    }

    /// Ends a listing of `kinds`: what it did not contain (here or in its chunks) is gone.
    fn reset(&mut self, kinds: &[Kind], objects: Vec<Sourced<KubeObject>>, now: SystemTime, changes: &mut Vec<Change>) {
        self.list(kinds, objects, now, changes);
        for kind in kinds {
            let seen = self.listing.remove(kind).unwrap_or_default();
            let stale: Vec<ObjectRef> = self.refs(*kind).filter(|r| !seen.contains(r)).collect();
            for r in stale {
                self.remove(*kind, &r, changes);
            }
            self.nodes_changed |= *kind == Kind::Node && self.synced.insert(Kind::Node);
            self.synced.insert(*kind);
        }
    }

    fn refs(&self, kind: Kind) -> Box<dyn Iterator<Item = ObjectRef> + '_> {
        match kind {
            Kind::Namespace => Box::new(
                self.model.namespaces.keys().map(|n| ObjectRef { namespace: "".into(), name: n.as_str().into() }),
            ),
            Kind::Pod => Box::new(self.model.pods.keys().cloned()),
            Kind::Node => {
                Box::new(self.nodes.keys().map(|n| ObjectRef { namespace: "".into(), name: n.as_str().into() }))
            }
            Kind::NetworkPolicy => Box::new(self.model.policies.keys().cloned()),
            Kind::StagedNetworkPolicy => Box::new(self.model.staged_policies.keys().cloned()),
            Kind::ClusterNetworkPolicy => Box::new(
                self.model.cluster_policies.keys().map(|n| ObjectRef { namespace: "".into(), name: n.as_str().into() }),
            ),
        }
    }

    /// The object's kind and reference, the namespace the store's shared copy: the pods, the
    /// claims and a listing's record keep these strings.
    fn key_of(&mut self, object: &KubeObject) -> (Kind, ObjectRef) {
        let (kind, mut r) = object.key();
        r.namespace = self.strings.intern(&r.namespace);
        (kind, r)
    }

    /// Converts and stores `obj`, whose key is `key`.
    fn upsert(&mut self, obj: Sourced<KubeObject>, key: (Kind, ObjectRef), now: SystemTime, changes: &mut Vec<Change>) {
        let Sourced { origin, object, unreadable } = obj;
        let unreadable_spec = unreadable.is_some();
        let converted = match (&object, unreadable) {
            (KubeObject::NetworkPolicy(np), Some(problem)) => Err(convert::unreadable_policy(np, &problem)),
            (KubeObject::StagedNetworkPolicy(_), Some(problem)) => Err(convert::ConvertError::Invalid {
                kind: "StagedNetworkPolicy",
                object: key.1.to_string(),
                path: "spec".into(),
                message: problem,
            }),
            (KubeObject::StagedNetworkPolicy(snp), None) => {
                convert::staged_policy(snp, &mut self.strings).map(|policy| {
                    // Staged, never enforced: a change of the staged view only.
                    if self.model.staged_policies.get(&key.1) != Some(&policy) {
                        changes.push(Change::StagedPolicy(key.1.clone()));
                        self.model.staged_policies.insert(key.1.clone(), policy);
                    }
                })
            }
            (KubeObject::ClusterNetworkPolicy(_), Some(problem)) => Err(convert::ConvertError::Invalid {
                kind: "ClusterNetworkPolicy",
                object: key.1.name.to_string(),
                path: "spec".into(),
                message: problem,
            }),
            (KubeObject::ClusterNetworkPolicy(cnp), None) => {
                cluster_policy::convert(cnp, &mut self.strings).map(|policy| {
                    if self.model.cluster_policies.get(&*key.1.name) != Some(&policy) {
                        changes.push(Change::ClusterPolicy(key.1.name.to_string()));
                        self.model.cluster_policies.insert(key.1.name.to_string(), policy);
                    }
                })
            }
            (KubeObject::Namespace(ns), _) => convert::namespace(ns, &mut self.strings).map(|ns| {
                self.check_logging_annotation(&ns);
                if self.model.namespaces.get(&ns.name) != Some(&ns) {
                    changes.push(Change::Namespace(ns.name.clone()));
                    self.model.namespaces.insert(ns.name.clone(), ns);
                }
            }),
            (KubeObject::Pod(p), _) => convert::pod(p, &mut self.strings).map(|mut pod| {
                // One copy of the name for the key and the pod (the key's namespace is shared
                // already, see `key_of`).
                pod.name = key.1.name.clone();
                let life = convert::pod_life(p);
                self.put_pod(pod, life.claim(now), life.deletion, changes);
            }),
            // Routes only: no change of the model.
            (KubeObject::Node(n), _) => convert::node(n).map(|(name, facts)| {
                if self.nodes.get(&name) != Some(&facts) {
                    self.nodes.insert(name, facts);
                    self.nodes_changed = true;
                }
            }),
            (KubeObject::NetworkPolicy(np), None) => convert::policy(np, &mut self.strings).map(|policy| {
                let r = ObjectRef { namespace: policy.namespace.as_str().into(), name: policy.name.as_str().into() };
                self.fail_closed.remove(&r);
                self.put_policy(r, policy, changes);
            }),
        };
        match converted {
            Ok(()) => {
                if self.invalid.remove(&key).is_some() {
                    let now = if key.0 == Kind::StagedNetworkPolicy { "staged" } else { "in force" };
                    tracing::info!(%origin, "{} {} is valid again and {now}", key.0, display_key(&key));
                }
            }
            Err(e) => self.invalid_version(&origin, key, &object, unreadable_spec, &e, changes),
        }
    }

    /// An object's new version does not convert: keep its last good version, fail closed for
    /// a policy that never was valid, or leave it out.
    fn invalid_version(
        &mut self,
        origin: &str,
        key: (Kind, ObjectRef),
        object: &KubeObject,
        unreadable_spec: bool,
        e: &convert::ConvertError,
        changes: &mut Vec<Change>,
    ) {
        let (kind, r) = &key;
        if e.is_identity() {
            // Nothing can be held under a name the API server would refuse; none is either.
            tracing::error!(%origin, "refused: {e}");
            return;
        }
        let held = match kind {
            Kind::Namespace => self.model.namespaces.contains_key(&*r.name),
            Kind::Pod => self.model.pods.contains_key(r),
            Kind::Node => self.nodes.contains_key(&*r.name),
            Kind::NetworkPolicy => self.model.policies.contains_key(r) && !self.fail_closed.contains(r),
            Kind::StagedNetworkPolicy => self.model.staged_policies.contains_key(r),
            Kind::ClusterNetworkPolicy => self.model.cluster_policies.contains_key(&*r.name),
        };
        let (message, error) = if held {
            let stays = if *kind == Kind::StagedNetworkPolicy { "stays staged" } else { "stays in force" };
            (format!("{e}; the last good version of {kind} {} {stays}", display_key(&key)), false)
        } else {
            match object {
                KubeObject::NetworkPolicy(np) => {
                    match convert::policy_isolation(np, !unreadable_spec, &mut self.strings) {
                        Ok(isolation) => {
                            let directions = match (isolation.affects_ingress, isolation.affects_egress) {
                                (true, true) => "in both directions",
                                (true, false) => "for ingress (its policyTypes)",
                                (false, true) => "for egress (its policyTypes)",
                                (false, false) => "in no direction",
                            };
                            self.fail_closed.insert(r.clone());
                            self.put_policy(r.clone(), isolation, changes);
                            (
                                format!(
                                    "{e}; NetworkPolicy {r} never was valid, so it fails closed: the pods its \
                                 podSelector selects are isolated {directions} with nothing allowed"
                                ),
                                false,
                            )
                        }
                        Err(_) => {
                            self.remove(*kind, r, changes);
                            (format!("{e}; NetworkPolicy {r} never was valid and its podSelector cannot be read: ignored"), true)
                        }
                    }
                }
                KubeObject::StagedNetworkPolicy(_) => {
                    (format!("{e}; StagedNetworkPolicy {r} never was valid: not staged (it isolates nothing)"), true)
                }
                KubeObject::ClusterNetworkPolicy(_) => {
                    (format!("{e}; ClusterNetworkPolicy {} never was valid: not enforced", display_key(&key)), true)
                }
                _ => (format!("{e}; {kind} {} ignored", display_key(&key)), true),
            }
        };
        if self.invalid.get(&key) != Some(&message) {
            if error {
                tracing::error!(%origin, "{message}");
            } else {
                tracing::warn!(%origin, "{message}");
            }
            self.invalid.insert(key, message);
        }
    }

    fn put_policy(&mut self, r: ObjectRef, policy: crate::model::Policy, changes: &mut Vec<Change>) {
        if self.model.policies.get(&r) != Some(&policy) {
            self.model.policies.insert(r.clone(), policy);
            changes.push(Change::Policy(r));
        }
    }

    /// Stores a converted pod with its claim (`None`: it has finished and claims no IP),
    /// giving every pod whose addresses changed hands its new IPs. A live pod whose status has
    /// no address yet takes its bridge port's.
    fn put_pod(
        &mut self,
        mut pod: Pod,
        claim: Option<ClaimRank>,
        until: Option<SystemTime>,
        changes: &mut Vec<Change>,
    ) {
        let r = ObjectRef { namespace: pod.namespace.clone(), name: pod.name.clone() };
        match claim.filter(|_| pod.ips.is_empty()) {
            Some(rank) => {
                self.port_addressed.insert(r.clone(), (rank, until));
                pod.ips = self.port_ips(&r);
            }
            None => {
                self.port_addressed.remove(&r);
            }
        }
        let mut touched = self.claims.release(&self.model.pods, &r);
        match claim.filter(|_| !pod.ips.is_empty()) {
            Some(rank) => touched.extend(self.claims.claim(&mut pod, rank, until)),
            None => pod.ips = Vec::new(),
        }
        if self.model.pods.get(&r).map(|held| &**held) != Some(&pod) {
            self.model.pods.insert(r.clone(), Box::new(pod));
            changes.push(Change::Pod(r.clone()));
        }
        self.claims.refresh(&mut self.model.pods, &touched, &r, changes);
    }

    fn remove(&mut self, kind: Kind, r: &ObjectRef, changes: &mut Vec<Change>) {
        self.invalid.remove(&(kind, r.clone()));
        match kind {
            Kind::Namespace => {
                self.logging_warned.remove(&*r.name);
                if self.model.namespaces.remove(&*r.name).is_some() {
                    changes.push(Change::Namespace(r.name.to_string()));
                }
            }
            Kind::Pod => {
                self.port_addressed.remove(r);
                let touched = self.claims.release(&self.model.pods, r);
                if self.model.pods.remove(r).is_some() {
                    changes.push(Change::Pod(r.clone()));
                }
                self.claims.refresh(&mut self.model.pods, &touched, r, changes);
            }
            Kind::Node => {
                self.nodes_changed |= self.nodes.remove(&*r.name).is_some();
            }
            Kind::NetworkPolicy => {
                self.fail_closed.remove(r);
                if self.model.policies.remove(r).is_some() {
                    changes.push(Change::Policy(r.clone()));
                }
            }
            Kind::StagedNetworkPolicy => {
                if self.model.staged_policies.remove(r).is_some() {
                    changes.push(Change::StagedPolicy(r.clone()));
                }
            }
            Kind::ClusterNetworkPolicy => {
                if self.model.cluster_policies.remove(&*r.name).is_some() {
                    changes.push(Change::ClusterPolicy(r.name.to_string()));
                }
            }
        }
    }

    /// Warns once per namespace and value about a logging annotation that is not a Go bool.
    fn check_logging_annotation(&mut self, ns: &crate::model::Namespace) {
        if let Err(warning) = ns.logging_enabled() {
            if self.logging_warned.get(&ns.name) != Some(&warning) {
                tracing::warn!(namespace = %ns.name, "{warning}");
                self.logging_warned.insert(ns.name.clone(), warning);
            }
        } else {
            self.logging_warned.remove(&ns.name);
        }
    }
}

/// `ns/name`, or `name` for cluster-scoped kinds.
fn display_key((kind, r): &(Kind, ObjectRef)) -> String {
    if kind.is_namespaced() {
        r.to_string()
    } else {
        r.name.to_string()
    }
}

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;
