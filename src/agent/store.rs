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
//! - deleting an object removes whatever the store held for it.
//!
//! Only live pods own IPs: the model's pods carry just the addresses they win (see
//! [`crate::model::liveness`]), so a finished pod is no peer and no name in the audit log, and
//! an address two pods claim belongs to one of them only.

use crate::compiler::Change;
use crate::model::{convert, ClaimRank, Interner, LocalPort, Model, Node, ObjectRef, Pod};
use crate::source::ovsdb::db::BridgePorts;
use crate::source::{Kind, KubeObject, SourceEvent, Sourced};
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::time::SystemTime;

// The store's hash maps are keyed by names and addresses from the sources, hashed once per
// object per listing: foldhash (seeded per process, as std's SipHash is) takes a fraction of
// SipHash's time on such short keys.
type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
type HashSet<K> = std::collections::HashSet<K, foldhash::fast::RandomState>;

/// The model plus what the store needs to keep it honest.
#[derive(Debug, Default)]
pub struct Store {
    model: Model,
    /// Per address: the pods claiming it, the winner first. The winner is the one the model's
    /// pods give the address to, and the name of the address in the audit log.
    /// Kept sorted; a Vec, not a set: nearly every address has one claimant, and at 100,000
    /// pods a one-element BTreeSet per address costs about 70 MB more.
    claimants: HashMap<IpAddr, Vec<(ClaimRank, ObjectRef)>>,
    /// What a live pod claims is what its model pod holds (none once it has finished), except
    /// for a pod that loses an address to a stronger claim: then this holds all it claims, in
    /// its order. Nearly every pod wins all it claims, so no copy of its addresses is kept.
    contested: HashMap<ObjectRef, Box<[IpAddr]>>,
    /// Claims that end at a deadline, by deadline.
    deadlines: BTreeSet<(SystemTime, ObjectRef)>,
    /// The deadline of each claim in `deadlines`.
    deadline_of: HashMap<ObjectRef, SystemTime>,
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
}

impl Store {
    /// The current model.
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// The live pod that holds this IP, if the model knows one.
    pub fn pod_by_ip(&self, ip: &IpAddr) -> Option<&ObjectRef> {
        self.claimants.get(ip).and_then(|c| c.first()).map(|(_, r)| r)
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
        while let Some((deadline, r)) = self.deadlines.first().cloned() {
            if deadline > now {
                break;
            }
            let touched = self.release(&r);
            if let Some(pod) = self.model.pods.get_mut(&r) {
                if !pod.ips.is_empty() {
                    pod.ips.clear();
                    changes.push(Change::Pod(r.clone()));
                }
            }
            self.refresh_claimants(&touched, &r, &mut changes);
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
        changes
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
            self.synced.insert(*kind);
        }
    }

    fn refs(&self, kind: Kind) -> Box<dyn Iterator<Item = ObjectRef> + '_> {
        match kind {
            Kind::Namespace => Box::new(
                self.model.namespaces.keys().map(|n| ObjectRef { namespace: "".into(), name: n.as_str().into() }),
            ),
            Kind::Pod => Box::new(self.model.pods.keys().cloned()),
            Kind::NetworkPolicy => Box::new(self.model.policies.keys().cloned()),
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
            (KubeObject::NetworkPolicy(np), None) => convert::policy(np, &mut self.strings).map(|policy| {
                let r = ObjectRef { namespace: policy.namespace.as_str().into(), name: policy.name.as_str().into() };
                self.fail_closed.remove(&r);
                self.put_policy(r, policy, changes);
            }),
        };
        match converted {
            Ok(()) => {
                if self.invalid.remove(&key).is_some() {
                    tracing::info!(%origin, "{} {} is valid again and in force", key.0, display_key(&key));
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
            Kind::NetworkPolicy => self.model.policies.contains_key(r) && !self.fail_closed.contains(r),
        };
        let (message, error) = if held {
            (format!("{e}; the last good version of {kind} {} stays in force", display_key(&key)), false)
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
    /// giving every pod whose addresses changed hands its new IPs.
    fn put_pod(
        &mut self,
        mut pod: Pod,
        claim: Option<ClaimRank>,
        until: Option<SystemTime>,
        changes: &mut Vec<Change>,
    ) {
        let r = ObjectRef { namespace: pod.namespace.clone(), name: pod.name.clone() };
        let mut touched = self.release(&r);
        match claim.filter(|_| !pod.ips.is_empty()) {
            Some(rank) => {
                for ip in &pod.ips {
                    let claim = (rank, r.clone());
                    // Nearly every address has one claimant: a Vec of exactly one, not of four.
                    let claimants = self.claimants.entry(*ip).or_insert_with(|| Vec::with_capacity(1));
                    if let Err(at) = claimants.binary_search(&claim) {
                        claimants.insert(at, claim);
                    }
                    touched.insert(*ip);
                }
                if let Some(deadline) = until {
                    self.deadlines.insert((deadline, r.clone()));
                    self.deadline_of.insert(r.clone(), deadline);
                }
                if !pod.ips.iter().all(|ip| self.pod_by_ip(ip) == Some(&r)) {
                    let won = self.won_of(&r, &pod.ips);
                    let claimed = std::mem::replace(&mut pod.ips, won);
                    self.contested.insert(r.clone(), claimed.into_boxed_slice());
                }
            }
            None => pod.ips = Vec::new(),
        }
        if self.model.pods.get(&r).map(|held| &**held) != Some(&pod) {
            self.model.pods.insert(r.clone(), Box::new(pod));
            changes.push(Change::Pod(r.clone()));
        }
        self.refresh_claimants(&touched, &r, changes);
    }

    /// What a pod claims (see [`Store::contested`]).
    fn claimed(&self, r: &ObjectRef) -> &[IpAddr] {
        match self.contested.get(r) {
            Some(claimed) => claimed,
            None => self.model.pods.get(r).map_or(&[], |pod| &pod.ips),
        }
    }

    /// Withdraws a pod's claim; returns the addresses it claimed. The caller then updates or
    /// removes the model pod, whose addresses were part of the claim.
    fn release(&mut self, r: &ObjectRef) -> BTreeSet<IpAddr> {
        if let Some(deadline) = self.deadline_of.remove(r) {
            self.deadlines.remove(&(deadline, r.clone()));
        }
        let claimed: BTreeSet<IpAddr> = self.claimed(r).iter().copied().collect();
        self.contested.remove(r);
        for ip in &claimed {
            if let Some(claimants) = self.claimants.get_mut(ip) {
                claimants.retain(|(_, p)| p != r);
                if claimants.is_empty() {
                    self.claimants.remove(ip);
                }
            }
        }
        claimed
    }

    /// The addresses of `claimed` (`r`'s claim) that `r` wins, in its order.
    fn won_of(&self, r: &ObjectRef, claimed: &[IpAddr]) -> Vec<IpAddr> {
        claimed.iter().filter(|ip| self.pod_by_ip(ip) == Some(r)).copied().collect()
    }

    /// Gives the other claimants of `ips` (all but `except`) the addresses they now win.
    fn refresh_claimants(&mut self, ips: &BTreeSet<IpAddr>, except: &ObjectRef, changes: &mut Vec<Change>) {
        let others: BTreeSet<ObjectRef> = ips
            .iter()
            .filter_map(|ip| self.claimants.get(ip))
            .flatten()
            .map(|(_, p)| p.clone())
            .filter(|p| p != except)
            .collect();
        for p in others {
            let claimed = self.claimed(&p).to_vec();
            let won = self.won_of(&p, &claimed);
            if won.len() == claimed.len() {
                self.contested.remove(&p);
            } else {
                self.contested.insert(p.clone(), claimed.into_boxed_slice());
            }
            if let Some(pod) = self.model.pods.get_mut(&p) {
                if pod.ips != won {
                    pod.ips = won;
                    changes.push(Change::Pod(p));
                }
            }
        }
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
                let touched = self.release(r);
                if self.model.pods.remove(r).is_some() {
                    changes.push(Change::Pod(r.clone()));
                }
                self.refresh_claimants(&touched, r, changes);
            }
            Kind::NetworkPolicy => {
                self.fail_closed.remove(r);
                if self.model.policies.remove(r).is_some() {
                    changes.push(Change::Policy(r.clone()));
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
mod tests {
    use super::*;
    use serde_json::json;

    fn sourced(value: serde_json::Value) -> Sourced<KubeObject> {
        let object = match value["kind"].as_str() {
            Some("Namespace") => KubeObject::Namespace(serde_json::from_value(value).unwrap()),
            Some("Pod") => KubeObject::Pod(serde_json::from_value(value).unwrap()),
            _ => KubeObject::NetworkPolicy(serde_json::from_value(value).unwrap()),
        };
        Sourced::new("test", object)
    }

    fn namespace(name: &str) -> serde_json::Value {
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    }

    fn pod(ns: &str, name: &str, ip: &str) -> serde_json::Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": ns, "name": name},
               "spec": {"containers": []}, "status": {"podIP": ip}})
    }

    fn policy(ns: &str, name: &str, cidr: &str) -> serde_json::Value {
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
               "metadata": {"namespace": ns, "name": name},
               "spec": {"podSelector": {}, "ingress": [{"from": [{"ipBlock": {"cidr": cidr}}]}]}})
    }

    fn oref(ns: &str, name: &str) -> ObjectRef {
        ObjectRef { namespace: ns.into(), name: name.into() }
    }

    fn reset(objects: Vec<serde_json::Value>) -> SourceEvent {
        SourceEvent::Reset { kinds: Kind::ALL.to_vec(), objects: objects.into_iter().map(sourced).collect() }
    }

    fn assert_same_model(a: &Store, b: &Store) {
        assert_eq!(a.model().namespaces, b.model().namespaces);
        assert_eq!(a.model().pods, b.model().pods);
        assert_eq!(a.model().policies, b.model().policies);
        assert_eq!(a.claimants, b.claimants);
    }

    fn chunk(objects: Vec<serde_json::Value>) -> SourceEvent {
        SourceEvent::ResetChunk { kinds: Kind::ALL.to_vec(), objects: objects.into_iter().map(sourced).collect() }
    }

    #[test]
    fn a_listing_in_chunks_gives_the_same_model_and_changes_as_one_reset() {
        let first = || vec![namespace("x"), pod("x", "a", "10.0.0.1"), pod("x", "b", "10.0.0.2")];
        let second = || vec![policy("x", "p", "10.0.0.0/8"), namespace("y")];
        let third = || vec![pod("y", "c", "10.0.0.3")];
        let all = || [first(), second(), third()].concat();

        let mut whole = Store::default();
        let whole_changes = whole.apply(reset(all()));
        let mut parts = Store::default();
        let mut part_changes = parts.apply(chunk(first()));
        part_changes.extend(parts.apply(chunk(second())));
        part_changes.extend(parts.apply(reset(third())));
        assert_same_model(&parts, &whole);
        assert_eq!(part_changes, whole_changes);
        assert_eq!(parts.pod_by_ip(&"10.0.0.3".parse().unwrap()), Some(&oref("y", "c")));

        // A relist that lacks pod x/b and policy x/p, in chunks: the same outcome again.
        let relist = || vec![namespace("x"), namespace("y"), pod("x", "a", "10.0.0.1"), pod("y", "c", "10.0.0.3")];
        let whole_changes = whole.apply(reset(relist()));
        let mut part_changes = Vec::new();
        for o in relist() {
            part_changes.extend(parts.apply(chunk(vec![o])));
        }
        part_changes.extend(parts.apply(reset(vec![])));
        assert_same_model(&parts, &whole);
        assert_eq!(part_changes, whole_changes);
        assert_eq!(part_changes, vec![Change::Pod(oref("x", "b")), Change::Policy(oref("x", "p"))]);
    }

    #[test]
    fn stale_objects_go_only_when_the_listing_ends_and_sync_waits_for_it() {
        let mut store = Store::default();
        store.apply(reset(vec![namespace("x"), pod("x", "a", "10.0.0.1"), pod("x", "old", "10.0.0.9")]));
        assert!(store.is_synced());

        let mut fresh = Store::default();
        fresh.apply(chunk(vec![namespace("x"), pod("x", "a", "10.0.0.1")]));
        assert!(!fresh.is_synced(), "a chunk is not a full listing");
        assert_eq!(fresh.model().pods.len(), 1, "chunks are converted as they arrive");

        // A relist in chunks: the pod it lacks stays until the closing reset.
        let changes = store.apply(chunk(vec![namespace("x"), pod("x", "a", "10.0.0.2")]));
        assert_eq!(changes, vec![Change::Pod(oref("x", "a"))]);
        assert!(store.model().pods.contains_key(&oref("x", "old")));
        let changes = store.apply(chunk(vec![]));
        assert!(changes.is_empty(), "{changes:?}");
        assert!(store.model().pods.contains_key(&oref("x", "old")));
        let changes = store.apply(reset(vec![]));
        assert_eq!(changes, vec![Change::Pod(oref("x", "old"))]);
        assert_eq!(store.model().pods.keys().cloned().collect::<Vec<_>>(), vec![oref("x", "a")]);
        assert!(store.model().namespaces.contains_key("x"), "listed in a chunk, so kept");

        // The listing is closed: the next reset stands on its own.
        let changes = store.apply(reset(vec![namespace("x")]));
        assert_eq!(changes, vec![Change::Pod(oref("x", "a"))]);
    }

    #[test]
    fn a_listing_of_some_kinds_leaves_the_others_alone() {
        let mut store = Store::default();
        store.apply(reset(vec![namespace("x"), pod("x", "a", "10.0.0.1"), policy("x", "p", "10.0.0.0/8")]));
        store.apply(SourceEvent::ResetChunk {
            kinds: vec![Kind::Pod],
            objects: vec![sourced(pod("x", "b", "10.0.0.2"))],
        });
        let changes = store.apply(SourceEvent::Reset { kinds: vec![Kind::Pod], objects: vec![] });
        assert_eq!(changes, vec![Change::Pod(oref("x", "a"))]);
        assert!(store.model().namespaces.contains_key("x"));
        assert!(store.model().policies.contains_key(&oref("x", "p")));
    }

    #[test]
    fn not_synced_until_every_kind_is_listed() {
        let mut store = Store::default();
        assert!(!store.is_synced());
        store.apply(SourceEvent::Reset { kinds: vec![Kind::Namespace, Kind::Pod], objects: vec![] });
        assert!(!store.is_synced());
        store.apply(SourceEvent::Reset { kinds: vec![Kind::NetworkPolicy], objects: vec![] });
        assert!(store.is_synced());
    }

    #[test]
    fn reset_reports_what_changed_and_removes_what_is_gone() {
        let mut store = Store::default();
        let changes =
            store.apply(reset(vec![namespace("x"), pod("x", "a", "10.0.0.1"), policy("x", "p", "10.0.0.0/8")]));
        assert_eq!(changes.len(), 3);
        // The same objects again: nothing changed.
        let same = store.apply(reset(vec![namespace("x"), pod("x", "a", "10.0.0.1"), policy("x", "p", "10.0.0.0/8")]));
        assert!(same.is_empty(), "{same:?}");
        // The pod is gone from the next list.
        let changes = store.apply(reset(vec![namespace("x"), policy("x", "p", "10.0.0.0/8")]));
        assert_eq!(changes, vec![Change::Pod(oref("x", "a"))]);
        assert!(store.model().pods.is_empty());
        assert_eq!(store.pod_by_ip(&"10.0.0.1".parse().unwrap()), None);
    }

    fn applied(value: serde_json::Value) -> SourceEvent {
        SourceEvent::Applied(sourced(value))
    }

    fn policy_with_selector(ns: &str, name: &str, operator: &str) -> serde_json::Value {
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
               "metadata": {"namespace": ns, "name": name},
               "spec": {"podSelector": {"matchExpressions": [{"key": "pod", "operator": operator, "values": ["a"]}]},
                        "ingress": [{"from": [{"podSelector": {"matchLabels": {"pod": "b"}}}]}]}})
    }

    #[test]
    fn an_invalid_policy_leaves_the_valid_ones_alone() {
        let mut store = Store::default();
        store.apply(reset(vec![namespace("x"), policy("x", "good", "10.0.0.0/8"), pod("x", "p", "10.0.0.1")]));
        // Never valid, and its (absent = empty) podSelector reads: it fails closed.
        store.apply(applied(policy("x", "bad", "10.0.0.0/33")));
        let policies: Vec<_> = store.model().policies.keys().cloned().collect();
        assert_eq!(policies, vec![oref("x", "bad"), oref("x", "good")]);
        assert_eq!(store.model().policies[&oref("x", "good")].ingress.len(), 1, "the valid one is untouched");
    }

    #[test]
    fn a_policy_that_turns_invalid_keeps_its_last_good_version() {
        let mut store = Store::default();
        store.apply(reset(vec![
            namespace("x"),
            policy("x", "p", "10.10.1.12/32"),
            policy_with_selector("x", "s", "In"),
        ]));
        let good_p = store.model().policies[&oref("x", "p")].clone();
        let good_s = store.model().policies[&oref("x", "s")].clone();

        // An ipBlock /33 and a selector operator Bogus: nothing changes in the model.
        assert!(store.apply(applied(policy("x", "p", "10.10.1.12/33"))).is_empty());
        assert!(store.apply(applied(policy_with_selector("x", "s", "Bogus"))).is_empty());
        assert_eq!(store.model().policies[&oref("x", "p")], good_p);
        assert_eq!(store.model().policies[&oref("x", "s")], good_s);
        let warned = &store.invalid[&(Kind::NetworkPolicy, oref("x", "p"))];
        assert!(
            warned.contains("10.10.1.12/33")
                && warned.contains("last good version of NetworkPolicy x/p stays in force"),
            "{warned}"
        );
        let warned = &store.invalid[&(Kind::NetworkPolicy, oref("x", "s"))];
        assert!(warned.contains("\"Bogus\"") && warned.contains("x/s stays in force"), "{warned}");
        // Still invalid at a relist (kube mode): still kept, still the same report.
        let changes = store.apply(reset(vec![
            namespace("x"),
            policy("x", "p", "10.10.1.12/33"),
            policy_with_selector("x", "s", "Bogus"),
        ]));
        assert!(changes.is_empty(), "{changes:?}");
        assert_eq!(store.model().policies[&oref("x", "p")], good_p);

        // Fixed: the new version replaces the kept one.
        let changes = store.apply(applied(policy("x", "p", "10.10.1.13/32")));
        assert_eq!(changes, vec![Change::Policy(oref("x", "p"))]);
        assert_ne!(store.model().policies[&oref("x", "p")], good_p);
        assert!(!store.invalid.contains_key(&(Kind::NetworkPolicy, oref("x", "p"))));

        // Deleting the invalid object removes its kept version.
        let changes = store.apply(SourceEvent::Deleted { kind: Kind::NetworkPolicy, object: oref("x", "s") });
        assert_eq!(changes, vec![Change::Policy(oref("x", "s"))]);
        assert!(!store.model().policies.contains_key(&oref("x", "s")));
        assert!(store.invalid.is_empty());
    }

    #[test]
    fn a_policy_that_never_was_valid_fails_closed_when_its_selector_reads() {
        let mut store = Store::default();
        store.apply(reset(vec![namespace("x")]));
        let bad_rule = json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"namespace": "x", "name": "np"},
            "spec": {"podSelector": {"matchLabels": {"pod": "a"}}, "policyTypes": ["Egress"],
                     "ingress": [{"from": [{"ipBlock": {"cidr": "10.10.1.12/33"}}]}]}});
        let changes = store.apply(applied(bad_rule));
        assert_eq!(changes, vec![Change::Policy(oref("x", "np"))]);
        // Isolated in the direction it declares (Egress), not in both.
        let p = &store.model().policies[&oref("x", "np")];
        assert!(!p.affects_ingress && p.affects_egress && p.ingress.is_empty() && p.egress.is_empty(), "{p:?}");
        assert_eq!(p.pod_selector.match_labels.get("pod"), Some("a"));
        let message = &store.invalid[&(Kind::NetworkPolicy, oref("x", "np"))];
        assert!(message.contains("fails closed") && message.contains("for egress (its policyTypes)"), "{message}");

        // Another invalid version whose selector still reads: the isolation follows it.
        store.apply(applied(policy("x", "np", "10.0.0.0/33")));
        assert!(store.model().policies[&oref("x", "np")].pod_selector.match_labels.is_empty());
        // One whose selector does not read: ignored, nothing isolated by it.
        let changes = store.apply(applied(policy_with_selector("x", "np", "Bogus")));
        assert_eq!(changes, vec![Change::Policy(oref("x", "np"))]);
        assert!(store.model().policies.is_empty());
        assert!(store.invalid[&(Kind::NetworkPolicy, oref("x", "np"))].contains("cannot be read: ignored"));

        // Fail closed again, then fixed: the real policy; then an invalid edit keeps that one.
        store.apply(applied(policy("x", "np", "10.0.0.0/33")));
        assert!(store.model().policies[&oref("x", "np")].ingress.is_empty());
        store.apply(applied(policy("x", "np", "10.0.0.0/8")));
        assert_eq!(store.model().policies[&oref("x", "np")].ingress.len(), 1);
        assert!(store.invalid.is_empty() && store.fail_closed.is_empty());
        store.apply(applied(policy("x", "np", "10.0.0.0/33")));
        assert_eq!(store.model().policies[&oref("x", "np")].ingress.len(), 1, "last good, not fail-closed");

        // Deleted while fail-closed: gone.
        store.apply(applied(policy("x", "other", "10.0.0.0/33")));
        assert!(store.fail_closed.contains(&oref("x", "other")));
        let changes = store.apply(SourceEvent::Deleted { kind: Kind::NetworkPolicy, object: oref("x", "other") });
        assert_eq!(changes, vec![Change::Policy(oref("x", "other"))]);
        assert!(store.fail_closed.is_empty());
    }

    #[test]
    fn a_policy_its_source_could_not_read_in_full_is_an_invalid_version() {
        let unreadable = |name: &str| {
            let mut s = sourced(json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
                "metadata": {"namespace": "x", "name": name}, "spec": {"podSelector": {"matchLabels": {"pod": "a"}}}}));
            s.unreadable = Some("invalid NetworkPolicy: invalid type: integer `5`, expected a sequence".into());
            SourceEvent::Applied(s)
        };
        let mut store = Store::default();
        store.apply(reset(vec![namespace("x"), policy("x", "kept", "10.0.0.0/8")]));
        let kept = store.model().policies[&oref("x", "kept")].clone();
        assert!(store.apply(unreadable("kept")).is_empty());
        assert_eq!(store.model().policies[&oref("x", "kept")], kept);
        assert!(store.invalid[&(Kind::NetworkPolicy, oref("x", "kept"))]
            .contains("spec: invalid NetworkPolicy: invalid type"));

        assert_eq!(store.apply(unreadable("new")), vec![Change::Policy(oref("x", "new"))]);
        let p = &store.model().policies[&oref("x", "new")];
        assert!(p.affects_ingress && p.ingress.is_empty() && p.pod_selector.match_labels.contains_key("pod"), "{p:?}");
        assert!(store.fail_closed.contains(&oref("x", "new")));
        // A bad name is refused, whatever else.
        assert!(store.apply(unreadable("Bad")).is_empty());
        assert!(!store.model().policies.contains_key(&oref("x", "Bad")));
    }

    #[test]
    fn pods_and_namespaces_that_turn_invalid_keep_their_last_good_version() {
        let mut store = Store::default();
        store.apply(reset(vec![namespace("x"), pod("x", "a", "10.0.0.1")]));
        let mut bad = pod("x", "a", "10.0.0.2");
        bad["metadata"]["labels"] = json!({"-bad": "v"});
        assert!(store.apply(applied(bad)).is_empty());
        assert_eq!(store.model().pods[&oref("x", "a")].ips, vec!["10.0.0.1".parse::<IpAddr>().unwrap()]);
        let mut bad = namespace("x");
        bad["metadata"]["labels"] = json!({"k": "bad value"});
        assert!(store.apply(applied(bad)).is_empty());
        assert!(store.model().namespaces.contains_key("x"));
        // A new invalid pod is left out.
        let mut bad = pod("x", "b", "10.0.0.3");
        bad["status"]["podIP"] = json!("10.0.0.300");
        assert!(store.apply(applied(bad)).is_empty());
        assert!(!store.model().pods.contains_key(&oref("x", "b")));
    }

    #[test]
    fn names_the_api_server_would_refuse_are_refused() {
        let mut store = Store::default();
        store.apply(reset(vec![namespace("x")]));
        for (ns, name) in
            [("x", "a b"), ("x", "a\nx/forged 10.0.0.1"), ("x", "A"), ("x", "-a"), ("bad ns", "a"), ("X", "a")]
        {
            assert!(store.apply(applied(pod(ns, name, "10.0.0.1"))).is_empty(), "pod {ns:?}/{name:?}");
            assert!(store.apply(applied(policy(ns, name, "10.0.0.0/33"))).is_empty(), "policy {ns:?}/{name:?}");
            assert!(store.apply(applied(policy(ns, name, "10.0.0.0/8"))).is_empty(), "policy {ns:?}/{name:?}");
        }
        assert!(store.apply(applied(namespace("x.y"))).is_empty());
        assert!(store.apply(applied(namespace("x\n"))).is_empty());
        assert_eq!(store.model().pods.len() + store.model().policies.len(), 0);
        assert_eq!(store.model().namespaces.keys().collect::<Vec<_>>(), vec!["x"]);
        assert_eq!(store.pod_by_ip(&"10.0.0.1".parse().unwrap()), None);
        assert!(store.invalid.is_empty(), "refused, not held: {:?}", store.invalid);
    }

    fn pod_in(ns: &str, name: &str, ip: &str, phase: &str, created: &str) -> serde_json::Value {
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"namespace": ns, "name": name, "creationTimestamp": created},
               "spec": {"containers": []}, "status": {"podIP": ip, "phase": phase}})
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn finished_pods_hold_no_ip() {
        let mut store = Store::default();
        store.apply(reset(vec![namespace("y")]));
        for phase in ["Succeeded", "Failed"] {
            store.apply(applied(pod_in("y", "gone", "10.0.0.1", phase, "2026-01-01T00:00:00Z")));
            assert!(store.model().pods[&oref("y", "gone")].ips.is_empty(), "{phase}");
            assert_eq!(store.pod_by_ip(&ip("10.0.0.1")), None, "{phase}");
        }
        // A running pod that finishes loses its address.
        store.apply(applied(pod_in("y", "job", "10.0.0.2", "Running", "2026-01-01T00:00:00Z")));
        assert_eq!(store.pod_by_ip(&ip("10.0.0.2")), Some(&oref("y", "job")));
        let changes = store.apply(applied(pod_in("y", "job", "10.0.0.2", "Succeeded", "2026-01-01T00:00:00Z")));
        assert_eq!(changes, vec![Change::Pod(oref("y", "job"))]);
        assert!(store.model().pods[&oref("y", "job")].ips.is_empty());
        assert_eq!(store.pod_by_ip(&ip("10.0.0.2")), None);
    }

    #[test]
    fn pods_past_their_deletion_deadline_hold_no_ip() {
        let at = |s: u64| SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(s);
        let terminating = |grace: i64| {
            let mut p = pod_in("y", "t", "10.0.0.1", "Running", "1970-01-01T00:00:00Z");
            p["metadata"]["deletionTimestamp"] = json!("1970-01-01T00:01:40Z"); // 100 s
            p["metadata"]["deletionGracePeriodSeconds"] = json!(grace);
            p
        };
        let mut store = Store::default();
        store.apply_at(applied(terminating(30)), at(99));
        assert_eq!(store.pod_by_ip(&ip("10.0.0.1")), Some(&oref("y", "t")), "within the grace period");
        assert!(store.expire_pods(at(99)).is_empty());
        assert_eq!(store.expire_pods(at(100)), vec![Change::Pod(oref("y", "t"))]);
        assert_eq!(store.pod_by_ip(&ip("10.0.0.1")), None);
        assert!(store.model().pods[&oref("y", "t")].ips.is_empty());
        assert!(store.expire_pods(at(200)).is_empty());

        // Any later event ends it too.
        let mut store = Store::default();
        store.apply_at(applied(terminating(30)), at(99));
        let changes = store.apply_at(applied(namespace("y")), at(101));
        assert_eq!(changes, vec![Change::Pod(oref("y", "t")), Change::Namespace("y".into())]);
        assert_eq!(store.pod_by_ip(&ip("10.0.0.1")), None);

        let mut store = Store::default();
        store.apply_at(applied(terminating(30)), at(150));
        assert_eq!(store.pod_by_ip(&ip("10.0.0.1")), None, "past the deadline when it arrives");
        let mut store = Store::default();
        store.apply_at(applied(terminating(0)), at(1));
        assert_eq!(store.pod_by_ip(&ip("10.0.0.1")), None, "forced deletion");
    }

    #[test]
    fn an_ip_two_pods_claim_belongs_to_the_running_then_the_newer_one() {
        let t1 = "2026-01-01T00:00:00Z";
        let t2 = "2026-01-02T00:00:00Z";
        // Whatever the order of events, the same pod wins.
        let objects = || {
            vec![
                pod_in("x", "old", "10.0.0.1", "Running", t1),
                pod_in("x", "new", "10.0.0.1", "Running", t2),
                pod_in("x", "pending", "10.0.0.1", "Pending", "2026-01-03T00:00:00Z"),
                pod_in("x", "done", "10.0.0.1", "Succeeded", "2026-01-04T00:00:00Z"),
            ]
        };
        for order in [[0, 1, 2, 3], [3, 2, 1, 0], [1, 3, 0, 2]] {
            let mut store = Store::default();
            let all = objects();
            for i in order {
                store.apply(applied(all[i].clone()));
            }
            assert_eq!(store.pod_by_ip(&ip("10.0.0.1")), Some(&oref("x", "new")), "{order:?}");
            let holders: Vec<_> =
                store.model().pods.values().filter(|p| !p.ips.is_empty()).map(|p| p.name.to_string()).collect();
            assert_eq!(holders, vec!["new"], "{order:?}");
        }

        let mut store = Store::default();
        store.apply(reset(objects()));
        // The winner goes: the next one takes the address over, and says so.
        let changes = store.apply(SourceEvent::Deleted { kind: Kind::Pod, object: oref("x", "new") });
        assert_eq!(changes, vec![Change::Pod(oref("x", "new")), Change::Pod(oref("x", "old"))]);
        assert_eq!(store.model().pods[&oref("x", "old")].ips, vec![ip("10.0.0.1")]);
        // The old one finishes: the pending one is all that is left.
        let changes = store.apply(applied(pod_in("x", "old", "10.0.0.1", "Failed", t1)));
        assert_eq!(changes, vec![Change::Pod(oref("x", "old")), Change::Pod(oref("x", "pending"))]);
        assert_eq!(store.pod_by_ip(&ip("10.0.0.1")), Some(&oref("x", "pending")));

        // Equal claims: the name order decides.
        let mut store = Store::default();
        store.apply(applied(pod_in("y", "b", "10.0.0.9", "Running", t1)));
        store.apply(applied(pod_in("x", "z", "10.0.0.9", "Running", t1)));
        assert_eq!(store.pod_by_ip(&ip("10.0.0.9")), Some(&oref("x", "z")));
        assert!(store.model().pods[&oref("y", "b")].ips.is_empty());
    }

    #[test]
    fn a_pod_that_loses_one_of_its_addresses_gets_it_when_the_winner_goes() {
        let dual = |name: &str, created: &str, label: &str| {
            json!({"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"namespace": "x", "name": name, "creationTimestamp": created, "labels": {"l": label}},
                   "spec": {"containers": []},
                   "status": {"phase": "Running", "podIP": "10.0.0.1", "podIPs": [{"ip": "10.0.0.1"}, {"ip": "fd00::1"}]}})
        };
        let (old, new) = ("2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z");
        let mut store = Store::default();
        store.apply(applied(dual("stale", old, "a")));
        store.apply(applied(pod_in("x", "fresh", "10.0.0.1", "Running", new)));
        let ips = |store: &Store, name: &str| store.model().pods[&oref("x", name)].ips.clone();
        assert_eq!(ips(&store, "stale"), vec![ip("fd00::1")], "it keeps the address nobody else claims");
        assert_eq!(store.pod_by_ip(&ip("10.0.0.1")), Some(&oref("x", "fresh")));

        // An update of the loser keeps its whole claim: the lost address is still claimed.
        store.apply(applied(dual("stale", old, "b")));
        assert_eq!(ips(&store, "stale"), vec![ip("fd00::1")]);
        let changes = store.apply(SourceEvent::Deleted { kind: Kind::Pod, object: oref("x", "fresh") });
        assert_eq!(changes, vec![Change::Pod(oref("x", "fresh")), Change::Pod(oref("x", "stale"))]);
        assert_eq!(ips(&store, "stale"), vec![ip("10.0.0.1"), ip("fd00::1")], "in the pod's order");

        // Gone: neither address is claimed any more.
        store.apply(SourceEvent::Deleted { kind: Kind::Pod, object: oref("x", "stale") });
        assert_eq!((store.pod_by_ip(&ip("10.0.0.1")), store.pod_by_ip(&ip("fd00::1"))), (None, None));
        assert!(store.claimants.is_empty() && store.contested.is_empty() && store.deadline_of.is_empty());
    }

    #[test]
    fn pod_ips_follow_updates_and_deletes() {
        let mut store = Store::default();
        store.apply(SourceEvent::Applied(sourced(pod("x", "a", "10.0.0.1"))));
        store.apply(SourceEvent::Applied(sourced(pod("x", "a", "10.0.0.2"))));
        assert_eq!(store.pod_by_ip(&"10.0.0.1".parse().unwrap()), None);
        assert_eq!(store.pod_by_ip(&"10.0.0.2".parse().unwrap()), Some(&oref("x", "a")));
        let changes = store.apply(SourceEvent::Deleted { kind: Kind::Pod, object: oref("x", "a") });
        assert_eq!(changes, vec![Change::Pod(oref("x", "a"))]);
        assert_eq!(store.pod_by_ip(&"10.0.0.2".parse().unwrap()), None);
    }

    #[test]
    fn ports_report_added_changed_and_removed_ofports() {
        let mut store = Store::default();
        let port = |ofport: u32, name: &str| LocalPort {
            ofport,
            interface: format!("p{ofport}"),
            pod: oref("x", name),
            ips: vec![],
            mac: None,
        };
        assert_eq!(store.set_ports(&[port(1, "a"), port(2, "b")]), vec![Change::Port(1), Change::Port(2)]);
        assert!(store.set_ports(&[port(1, "a"), port(2, "b")]).is_empty());
        assert_eq!(store.set_ports(&[port(1, "a"), port(3, "c")]), vec![Change::Port(3), Change::Port(2)]);
    }

    #[test]
    fn a_policy_in_a_missing_namespace_is_kept_and_warned_about_once() {
        let mut store = Store::default();
        let changes = store.apply(reset(vec![namespace("x"), policy("ghost", "p", "10.0.0.0/8")]));
        store.check_policy_namespaces(&changes);
        assert!(store.orphans_warned.contains(&oref("ghost", "p")));
        assert!(store.model().policies.contains_key(&oref("ghost", "p")), "still compiled");
        // The namespace appears: the warning is cleared.
        let changes = store.apply(SourceEvent::Applied(sourced(namespace("ghost"))));
        store.check_policy_namespaces(&changes);
        assert!(store.orphans_warned.is_empty());
    }
}
