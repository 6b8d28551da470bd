//! npagent's own view of the cluster: the parts of Namespaces, Pods, NetworkPolicies and the
//! bridge's ports that enforcement and audit logging need. Kubernetes client types stop at
//! [`convert`]; everything above works on these.

pub mod cidr;
pub mod cluster_policy;
pub mod convert;
pub mod intern;
pub mod labels;
pub mod liveness;
pub mod logging;
pub mod names;
pub mod node;
pub mod selector;
pub mod staged;
pub mod tiers;

pub use cidr::Cidr;
pub use intern::Interner;
pub use labels::Labels;
pub use liveness::{ClaimRank, Phase, PodLife};
pub use node::{Node, NodePort};
pub use selector::{LabelSelector, Requirement, SelectorOp};

use ofp::numbers::ip_proto;
use std::collections::BTreeMap;
use std::net::IpAddr;

/// A shared string: reference counted, one pointer wide (half an `Arc<str>`), so that the
/// keys, labels and names a cluster's worth of pods holds take half the room.
pub type SharedStr = arcstr::ArcStr;

/// Annotations (of the few objects whose annotations the model keeps: Namespaces, and a
/// NetworkPolicy's logging annotations).
pub type Annotations = BTreeMap<String, String>;

/// `namespace/name`. The strings are shared: a clone (the store and the compiler keep several
/// per object) copies two pointers, and the store's pods all share their namespace's name
/// (see [`intern`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectRef {
    pub namespace: SharedStr,
    pub name: SharedStr,
}

impl std::fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Namespace {
    pub name: String,
    /// Always holds `kubernetes.io/metadata.name=<name>`, as the API server sets it.
    pub labels: Labels,
    pub annotations: Annotations,
}

/// IP protocol of a port or rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Protocol {
    Tcp,
    Udp,
    Sctp,
}

impl Protocol {
    /// Its IP protocol number.
    pub fn number(self) -> u8 {
        match self {
            Protocol::Tcp => ip_proto::TCP,
            Protocol::Udp => ip_proto::UDP,
            Protocol::Sctp => ip_proto::SCTP,
        }
    }
}

/// A container port (used to resolve named ports).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerPort {
    pub name: Option<SharedStr>,
    pub port: u16,
    pub protocol: Protocol,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pod {
    pub namespace: SharedStr,
    pub name: SharedStr,
    pub labels: Labels,
    /// `status.podIPs` (or `status.podIP`); empty until the pod has an address. In the
    /// agent's model only the addresses the pod holds: none once it has finished, none that a
    /// pod with a stronger claim has (see [`liveness`]).
    pub ips: Vec<IpAddr>,
    pub ports: Vec<ContainerPort>,
    pub node: Option<SharedStr>,
}

/// One `from` peer of an ingress rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Peer {
    /// podSelector and/or namespaceSelector. `namespace_selector: None` means the policy's own
    /// namespace; `pod_selector: None` means all pods of the selected namespaces.
    Pods {
        pod_selector: Option<LabelSelector>,
        namespace_selector: Option<LabelSelector>,
    },
    IpBlock {
        cidr: Cidr,
        except: Vec<Cidr>,
    },
}

/// A port as written in a rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortRef {
    Number(u16),
    Name(String),
}

/// One entry of a rule's `ports`. `port: None` = all ports of the protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortSpec {
    pub protocol: Protocol,
    pub port: Option<PortRef>,
    /// Inclusive end of a numeric range (`endPort`).
    pub end_port: Option<u16>,
}

/// One ingress rule. Empty `from` = all sources; empty `ports` = all ports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IngressRule {
    pub from: Vec<Peer>,
    pub ports: Vec<PortSpec>,
}

/// One egress rule. Empty `to` = all destinations; empty `ports` = all ports. A named port
/// resolves on the destination pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EgressRule {
    pub to: Vec<Peer>,
    pub ports: Vec<PortSpec>,
}

/// A NetworkPolicy (networking.k8s.io/v1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    pub namespace: String,
    pub name: String,
    pub pod_selector: LabelSelector,
    /// Ingress is in the effective policyTypes (explicit, or defaulted).
    pub affects_ingress: bool,
    /// Egress is in the effective policyTypes.
    pub affects_egress: bool,
    pub ingress: Vec<IngressRule>,
    pub egress: Vec<EgressRule>,
    /// The `metadata.annotations` about audit logging: per-policy logging and its log label
    /// (see [`Policy::logging_enabled`], [`Policy::log_label`]).
    pub annotations: Annotations,
}

impl Policy {
    /// Every peer of the policy's rules, ingress `from` and egress `to` alike.
    pub fn peers(&self) -> impl Iterator<Item = &Peer> {
        self.ingress.iter().flat_map(|r| &r.from).chain(self.egress.iter().flat_map(|r| &r.to))
    }
}

/// A port of the bridge that belongs to a local pod (from OVSDB).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LocalPort {
    pub ofport: u32,
    pub interface: String,
    pub pod: ObjectRef,
    pub ips: Vec<IpAddr>,
    pub mac: Option<[u8; 6]>,
}

/// Everything the compiler needs, indexed by name, and the staged policies, which it never
/// reads.
#[derive(Debug, Clone, Default)]
pub struct Model {
    pub namespaces: BTreeMap<String, Namespace>,
    /// Boxed: filled in key order (as listings come), a B-tree's nodes stay about half
    /// full, and a pod inline would leave the empty half several times larger.
    pub pods: BTreeMap<ObjectRef, Box<Pod>>,
    pub policies: BTreeMap<ObjectRef, Policy>,
    /// Keyed by ofport.
    pub ports: BTreeMap<u32, LocalPort>,
    /// The gateway, uplinks, the node's addresses and the Service ranges.
    pub node: Node,
    /// The StagedNetworkPolicies, converted as NetworkPolicies are: judged ([`staged`]),
    /// never enforced. The compiler does not read them.
    pub staged_policies: BTreeMap<ObjectRef, Policy>,
    /// The ClusterNetworkPolicies (cluster-scoped), by name.
    pub cluster_policies: BTreeMap<String, cluster_policy::ClusterPolicy>,
}

impl Model {
    /// The pods of `namespace`, by name.
    pub fn pods_in<'a>(&'a self, namespace: &'a str) -> impl Iterator<Item = (&'a ObjectRef, &'a Pod)> + 'a {
        in_namespace(&self.pods, namespace).map(|(r, pod)| (r, &**pod))
    }

    /// The policies of `namespace`, by name.
    pub fn policies_in<'a>(&'a self, namespace: &'a str) -> impl Iterator<Item = (&'a ObjectRef, &'a Policy)> + 'a {
        in_namespace(&self.policies, namespace)
    }
}

/// The entries of one namespace: a range, as the maps are sorted by namespace first.
fn in_namespace<'a, V>(
    map: &'a BTreeMap<ObjectRef, V>,
    namespace: &'a str,
) -> impl Iterator<Item = (&'a ObjectRef, &'a V)> + 'a {
    let first = ObjectRef { namespace: namespace.into(), name: "".into() };
    map.range(first..).take_while(move |(r, _)| &*r.namespace == namespace)
}
