//! The model as the sources describe it: applies source events and bridge ports to a
//! [`Model`], converting Kubernetes objects on the way, and reports what changed.
//!
//! Bad input never stops the agent: an object that does not convert is reported once (naming
//! its origin) and left out, and every valid object stays in force.

use crate::compiler::Change;
use crate::model::{convert, LocalPort, Model, ObjectRef};
use crate::source::{Kind, KubeObject, SourceEvent, Sourced};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;

/// The model plus what the store needs to keep it honest.
#[derive(Debug, Default)]
pub struct Store {
    model: Model,
    /// Pod IP -> pod, for naming the far end of an audit entry.
    pods_by_ip: HashMap<IpAddr, ObjectRef>,
    /// Which kinds have had their initial list.
    synced: BTreeSet<Kind>,
    /// Policies already warned about for their egress part.
    egress_warned: BTreeSet<ObjectRef>,
    /// Namespace -> the logging annotation value already warned about.
    logging_warned: BTreeMap<String, String>,
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
            SourceEvent::Reset { kinds, objects } => self.reset(&kinds, objects),
            SourceEvent::Applied(obj) => {
                let mut changes = Vec::new();
                self.upsert(obj, &mut changes);
                changes
            }
            SourceEvent::Deleted { kind, object } => self.remove(kind, &object).into_iter().collect(),
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

    fn reset(&mut self, kinds: &[Kind], objects: Vec<Sourced<KubeObject>>) -> Vec<Change> {
        let mut changes = Vec::new();
        let mut seen: BTreeSet<(Kind, ObjectRef)> = BTreeSet::new();
        for obj in objects {
            seen.insert(obj.object.key());
            self.upsert(obj, &mut changes);
        }
        for kind in kinds {
            let stale: Vec<ObjectRef> = self.refs(*kind).filter(|r| !seen.contains(&(*kind, r.clone()))).collect();
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
                if policy.affects_egress && self.egress_warned.insert(r.clone()) {
                    tracing::warn!(policy = %r, "egress rules are not enforced yet; only the ingress part of this policy is");
                }
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
            Kind::NetworkPolicy => {
                self.egress_warned.remove(r);
                self.model.policies.remove(r).map(|_| Change::Policy(r.clone()))
            }
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
