//! The model as the sources describe it: applies source events and bridge ports to a
//! [`Model`], converting Kubernetes objects on the way, and reports what changed.
//!
//! Bad input never stops the agent: an object that does not convert is reported once (naming
//! its origin) and left out, and every valid object stays in force.

use crate::compiler::Change;
use crate::model::{convert, LocalPort, Model, ObjectRef};
use crate::source::{Kind, KubeObject, SourceEvent, Sourced};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::net::IpAddr;

/// The model plus what the store needs to keep it honest.
#[derive(Debug, Default)]
pub struct Store {
    model: Model,
    /// Pod IP -> pod, for naming the far end of an audit entry.
    pods_by_ip: HashMap<IpAddr, ObjectRef>,
    /// Which kinds have had their initial list.
    synced: BTreeSet<Kind>,
    /// Per kind with a listing under way (chunks received, closing reset not yet): the
    /// objects it contained so far.
    listing: BTreeMap<Kind, HashSet<ObjectRef>>,
    /// Namespace -> the logging annotation value already warned about.
    logging_warned: BTreeMap<String, String>,
    /// Policies already warned about for living in a namespace that does not exist.
    orphans_warned: BTreeSet<ObjectRef>,
}

impl Store {
    /// The current model.
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// The pod with this IP, if the model knows one.
    pub fn pod_by_ip(&self, ip: &IpAddr) -> Option<&ObjectRef> {
        self.pods_by_ip.get(ip)
    }

    /// True once every kind has had its initial list.
    pub fn is_synced(&self) -> bool {
        Kind::ALL.iter().all(|k| self.synced.contains(k))
    }

    /// Applies one source event; returns the model changes it caused.
    pub fn apply(&mut self, event: SourceEvent) -> Vec<Change> {
        match event {
            SourceEvent::ResetChunk { kinds, objects } => {
                let mut changes = Vec::new();
                self.list(&kinds, objects, &mut changes);
                changes
            }
            SourceEvent::Reset { kinds, objects } => self.reset(&kinds, objects),
            SourceEvent::Applied(obj) => {
                let mut changes = Vec::new();
                let (kind, r) = obj.object.key();
                if let Some(seen) = self.listing.get_mut(&kind) {
                    seen.insert(r);
                }
                self.upsert(obj, &mut changes);
                changes
            }
            SourceEvent::Deleted { kind, object } => {
                if let Some(seen) = self.listing.get_mut(&kind) {
                    seen.remove(&object);
                }
                self.remove(kind, &object).into_iter().collect()
            }
            SourceEvent::Invalid { origin, error } => {
                tracing::warn!(%origin, "{error}");
                Vec::new()
            }
        }
    }

    /// Replaces the bridge ports; returns the changes.
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
                Change::Namespace(ns) => self.policies_in(ns),
                _ => continue,
            };
            for r in policies {
                let missing = self.model.policies.contains_key(&r) && !self.model.namespaces.contains_key(&r.namespace);
                if !missing {
                    self.orphans_warned.remove(&r);
                } else if self.orphans_warned.insert(r.clone()) {
                    tracing::warn!(policy = %r, "NetworkPolicy {r} names namespace {:?}, which does not exist", r.namespace);
                }
            }
        }
    }

    fn policies_in(&self, namespace: &str) -> Vec<ObjectRef> {
        let from = ObjectRef { namespace: namespace.to_string(), name: String::new() };
        self.model.policies.range(from..).map(|(r, _)| r).take_while(|r| r.namespace == namespace).cloned().collect()
    }

    /// Applies part of a listing of `kinds`: converts and stores the objects, and notes them
    /// as seen by the listing.
    fn list(&mut self, kinds: &[Kind], objects: Vec<Sourced<KubeObject>>, changes: &mut Vec<Change>) {
        for kind in kinds {
            self.listing.entry(*kind).or_default();
        }
        for obj in objects {
            let (kind, r) = obj.object.key();
            self.listing.entry(kind).or_default().insert(r);
            self.upsert(obj, changes);
        }
    }

    /// Ends a listing of `kinds`: what it did not contain (here or in its chunks) is gone.
    fn reset(&mut self, kinds: &[Kind], objects: Vec<Sourced<KubeObject>>) -> Vec<Change> {
        let mut changes = Vec::new();
        self.list(kinds, objects, &mut changes);
        for kind in kinds {
            let seen = self.listing.remove(kind).unwrap_or_default();
            let stale: Vec<ObjectRef> = self.refs(*kind).filter(|r| !seen.contains(r)).collect();
            for r in stale {
                changes.extend(self.remove(*kind, &r));
            }
            self.synced.insert(*kind);
        }
        changes
    }

    fn refs(&self, kind: Kind) -> Box<dyn Iterator<Item = ObjectRef> + '_> {
        match kind {
            Kind::Namespace => Box::new(
                self.model.namespaces.keys().map(|n| ObjectRef { namespace: String::new(), name: n.clone() }),
            ),
            Kind::Pod => Box::new(self.model.pods.keys().cloned()),
            Kind::NetworkPolicy => Box::new(self.model.policies.keys().cloned()),
        }
    }

    fn upsert(&mut self, obj: Sourced<KubeObject>, changes: &mut Vec<Change>) {
        let Sourced { origin, object } = obj;
        let (kind, key) = object.key();
        let converted = match &object {
            KubeObject::Namespace(ns) => convert::namespace(ns).map(|ns| {
                self.check_logging_annotation(&ns);
                if self.model.namespaces.get(&ns.name) != Some(&ns) {
                    changes.push(Change::Namespace(ns.name.clone()));
                    self.model.namespaces.insert(ns.name.clone(), ns);
                }
            }),
            KubeObject::Pod(pod) => convert::pod(pod).map(|pod| {
                let r = ObjectRef { namespace: pod.namespace.clone(), name: pod.name.clone() };
                if self.model.pods.get(&r) != Some(&pod) {
                    self.unindex_pod_ips(&r);
                    for ip in &pod.ips {
                        self.pods_by_ip.insert(*ip, r.clone());
                    }
                    self.model.pods.insert(r.clone(), pod);
                    changes.push(Change::Pod(r));
                }
            }),
            KubeObject::NetworkPolicy(np) => convert::policy(np).map(|policy| {
                let r = ObjectRef { namespace: policy.namespace.clone(), name: policy.name.clone() };
                if self.model.policies.get(&r) != Some(&policy) {
                    self.model.policies.insert(r.clone(), policy);
                    changes.push(Change::Policy(r));
                }
            }),
        };
        if let Err(e) = converted {
            // The previous valid version (if any) is dropped: an invalid object is not
            // enforced at all, as the API server would not have admitted it.
            tracing::warn!(%origin, "ignored: {e}");
            changes.extend(self.remove(kind, &key));
        }
    }

    fn remove(&mut self, kind: Kind, r: &ObjectRef) -> Option<Change> {
        match kind {
            Kind::Namespace => {
                self.logging_warned.remove(&r.name);
                self.model.namespaces.remove(&r.name).map(|_| Change::Namespace(r.name.clone()))
            }
            Kind::Pod => {
                self.unindex_pod_ips(r);
                self.model.pods.remove(r).map(|_| Change::Pod(r.clone()))
            }
            Kind::NetworkPolicy => self.model.policies.remove(r).map(|_| Change::Policy(r.clone())),
        }
    }

    fn unindex_pod_ips(&mut self, r: &ObjectRef) {
        if let Some(old) = self.model.pods.get(r) {
            for ip in &old.ips {
                if self.pods_by_ip.get(ip) == Some(r) {
                    self.pods_by_ip.remove(ip);
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
        Sourced { origin: "test".into(), object }
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
        assert_eq!(a.pods_by_ip, b.pods_by_ip);
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
        store.apply(SourceEvent::ResetChunk { kinds: vec![Kind::Pod], objects: vec![sourced(pod("x", "b", "10.0.0.2"))] });
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
        let changes = store.apply(reset(vec![namespace("x"), pod("x", "a", "10.0.0.1"), policy("x", "p", "10.0.0.0/8")]));
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

    #[test]
    fn an_invalid_object_is_left_out_and_the_valid_ones_stay() {
        let mut store = Store::default();
        store.apply(reset(vec![namespace("x"), policy("x", "good", "10.0.0.0/8"), policy("x", "bad", "10.0.0.0/33")]));
        let policies: Vec<_> = store.model().policies.keys().cloned().collect();
        assert_eq!(policies, vec![oref("x", "good")]);
        // A valid policy that turns invalid is no longer enforced.
        let changes = store.apply(SourceEvent::Applied(sourced(policy("x", "good", "300.0.0.0/8"))));
        assert_eq!(changes, vec![Change::Policy(oref("x", "good"))]);
        assert!(store.model().policies.is_empty());
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
