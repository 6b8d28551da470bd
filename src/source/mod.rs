//! Where the model comes from: Kubernetes objects from a manifests directory ([`manifests`]) or
//! the API server ([`kube`]), the bridge's pod ports from OVSDB ([`ovsdb`]), and the node's
//! gateway port, adopted or created, with the addresses its device holds ([`gateway`]); this
//! node's configuration from its Node and the ServiceCIDRs ([`node_config`]).
//!
//! The object sources deliver [`crate::k8s`] objects (Kubernetes objects with only the fields npagent
//! reads) wrapped in [`SourceEvent`]s; turning them into model types is
//! [`crate::model::convert`]'s job. The OVSDB source delivers
//! [`crate::model::LocalPort`]s directly.
//!
//! Contract for consumers of a [`SourceEvent`] stream: start empty; a [`SourceEvent::Reset`]
//! replaces every object of the listed kinds; [`SourceEvent::Applied`] inserts or replaces one
//! object (keyed by kind, namespace and name); [`SourceEvent::Deleted`] removes one;
//! [`SourceEvent::Invalid`] only reports input that was skipped (nothing to apply). Following
//! that contract, a consumer holds exactly the objects the source currently has.
//!
//! A listing may come in parts, so that a large one never exists in memory all at once: any
//! number of [`SourceEvent::ResetChunk`]s, then the [`SourceEvent::Reset`] that ends it, all of
//! the same kinds. A chunk inserts or replaces its objects and removes nothing; the closing
//! `Reset` inserts or replaces its own, then removes every object of its kinds that was in
//! neither it nor a chunk since the previous `Reset` of those kinds. A kind counts as listed
//! (synced) only once its `Reset` arrived. Between the parts of a listing come only
//! [`SourceEvent::Invalid`] reports and the parts of listings of other kinds (the kube source
//! lists its kinds at once).

pub mod gateway;
pub mod kube;
pub mod manifests;
pub mod node_config;
pub mod ovsdb;

use crate::k8s::{ClusterNetworkPolicy, Namespace, NetworkPolicy, Node, Pod, StagedNetworkPolicy};

use crate::model::ObjectRef;

/// One Kubernetes object of a kind npagent uses.
#[derive(Debug, Clone, PartialEq)]
pub enum KubeObject {
    Namespace(Namespace),
    Pod(Pod),
    /// The cluster's nodes: routes to their pods, and this node's own configuration.
    Node(Node),
    NetworkPolicy(NetworkPolicy),
    /// Read and judged, never enforced.
    StagedNetworkPolicy(StagedNetworkPolicy),
    /// Cluster-scoped (`policy.networking.k8s.io/v1alpha2`): its [`ObjectRef`] has namespace "".
    ClusterNetworkPolicy(ClusterNetworkPolicy),
}

/// The kinds of [`KubeObject`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Namespace,
    Pod,
    Node,
    NetworkPolicy,
    StagedNetworkPolicy,
    ClusterNetworkPolicy,
}

impl Kind {
    /// Every kind, in the order sources list them.
    pub const ALL: [Kind; 6] = [
        Kind::Namespace,
        Kind::Pod,
        Kind::Node,
        Kind::NetworkPolicy,
        Kind::StagedNetworkPolicy,
        Kind::ClusterNetworkPolicy,
    ];

    /// The Kubernetes `kind` string.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Namespace => "Namespace",
            Kind::Pod => "Pod",
            Kind::Node => "Node",
            Kind::NetworkPolicy => "NetworkPolicy",
            Kind::StagedNetworkPolicy => "StagedNetworkPolicy",
            Kind::ClusterNetworkPolicy => "ClusterNetworkPolicy",
        }
    }

    /// The `apiVersion` npagent accepts for this kind.
    pub fn api_version(self) -> &'static str {
        match self {
            Kind::Namespace | Kind::Pod | Kind::Node => "v1",
            Kind::NetworkPolicy => "networking.k8s.io/v1",
            Kind::StagedNetworkPolicy => <StagedNetworkPolicy as k8s_openapi::Resource>::API_VERSION,
            Kind::ClusterNetworkPolicy => <ClusterNetworkPolicy as k8s_openapi::Resource>::API_VERSION,
        }
    }

    /// The kind named by a Kubernetes `kind` string, if npagent uses it.
    pub fn from_kind_str(kind: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.as_str() == kind)
    }

    /// Cluster-scoped kinds have no namespace (their [`ObjectRef::namespace`] is "").
    pub fn is_namespaced(self) -> bool {
        !matches!(self, Kind::Namespace | Kind::Node | Kind::ClusterNetworkPolicy)
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl KubeObject {
    /// The object's kind.
    pub fn kind(&self) -> Kind {
        match self {
            KubeObject::Namespace(_) => Kind::Namespace,
            KubeObject::Pod(_) => Kind::Pod,
            KubeObject::Node(_) => Kind::Node,
            KubeObject::NetworkPolicy(_) => Kind::NetworkPolicy,
            KubeObject::StagedNetworkPolicy(_) => Kind::StagedNetworkPolicy,
            KubeObject::ClusterNetworkPolicy(_) => Kind::ClusterNetworkPolicy,
        }
    }

    fn metadata(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        match self {
            KubeObject::Namespace(o) => &o.metadata,
            KubeObject::Pod(o) => &o.metadata,
            KubeObject::Node(o) => &o.metadata,
            KubeObject::NetworkPolicy(o) => &o.metadata,
            KubeObject::StagedNetworkPolicy(o) => &o.metadata,
            KubeObject::ClusterNetworkPolicy(o) => &o.metadata,
        }
    }

    /// `namespace/name` (namespace "" for cluster-scoped kinds: Namespaces, Nodes,
    /// ClusterNetworkPolicies; `default` for a namespaced object
    /// without one, as the model's conversion has it); an empty name where metadata lacks it.
    pub fn object_ref(&self) -> ObjectRef {
        let meta = self.metadata();
        ObjectRef {
            namespace: match self.kind().is_namespaced() {
                true => crate::k8s::namespace_or_default(meta.namespace.as_deref()).into(),
                false => "".into(),
            },
            name: meta.name.as_deref().unwrap_or_default().into(),
        }
    }

    /// Kind and reference together: the identity of an object within a source.
    pub fn key(&self) -> (Kind, ObjectRef) {
        (self.kind(), self.object_ref())
    }
}

/// Something together with where it came from, for error messages and logs.
#[derive(Debug, Clone, PartialEq)]
pub struct Sourced<T> {
    /// E.g. `manifests/x.yaml#2 NetworkPolicy x/allow` or `kube`.
    pub origin: String,
    pub object: T,
    /// Set when the source could not read the whole object, only enough of it to fail closed
    /// (for a NetworkPolicy: its name and podSelector, which is all `object` then holds): why.
    /// Consumers treat it as an invalid version of the object.
    pub unreadable: Option<String>,
}

impl<T> Sourced<T> {
    /// An object read in full.
    pub fn new(origin: impl Into<String>, object: T) -> Self {
        Sourced { origin: origin.into(), object, unreadable: None }
    }
}

/// A change reported by an object source. See the module documentation for the contract.
#[allow(
    clippy::large_enum_variant,
    reason = "unboxed on purpose: `Applied` is most of a watch's events, and boxing it would add an allocation to each to shrink the rarer variants"
)]
#[derive(Debug, Clone, PartialEq)]
pub enum SourceEvent {
    /// Replace everything of these kinds (initial list, watcher InitDone/relist, manifest load).
    /// Ends a listing that may have come in [`SourceEvent::ResetChunk`]s before it.
    Reset { kinds: Vec<Kind>, objects: Vec<Sourced<KubeObject>> },
    /// Part of a listing of these kinds: insert or replace these objects, remove nothing yet
    /// (the [`SourceEvent::Reset`] that ends the listing does that).
    ResetChunk { kinds: Vec<Kind>, objects: Vec<Sourced<KubeObject>> },
    /// Insert or replace one object.
    Applied(Sourced<KubeObject>),
    /// Remove one object (`object.namespace` is "" for cluster-scoped kinds).
    Deleted { kind: Kind, object: ObjectRef },
    /// Input that could not be used: `origin` names the culprit (file, document, kind, ns/name),
    /// `error` says why. Nothing changes for consumers.
    Invalid { origin: String, error: String },
}

/// Errors of the source layer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("{path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("Kubernetes client: {0}")]
    Kube(String),
}
