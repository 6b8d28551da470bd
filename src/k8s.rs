//! The Kubernetes objects as npagent reads them, at the bottom of the layers so that the model
//! (which converts them) and the sources (which read them) share one definition: Namespaces,
//! Pods, Nodes, NetworkPolicies and npagent's StagedNetworkPolicies with only the fields npagent uses, deserialized straight from the
//! wire (manifest files, the API server's lists and watch events), and Kubernetes'
//! conventions about them ([`NAMESPACE_NAME_LABEL`], [`namespace_or_default`]). Everything else
//! in an object (a Pod's images, volumes, conditions, `managedFields`, owner references...) is
//! skipped while parsing, never stored.
//!
//! Field names and JSON shapes are Kubernetes' own, so a field of the wrong type is refused as
//! the API server's schema would refuse it; what the fields may hold is checked on conversion
//! ([`crate::model::convert`]). A NetworkPolicy's `spec` is read in full: npagent uses all of it.

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ContainerPort, NodeAddress, PodIP};
use k8s_openapi::api::networking::v1::NetworkPolicySpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, Time};
use serde::{Deserialize, Deserializer, Serialize};

/// The label the API server puts on every Namespace: its name.
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// The namespace of a namespaced object whose `metadata.namespace` is `ns`: `default` when
/// absent or empty, as kubectl and the API server fill it in.
pub fn namespace_or_default(ns: Option<&str>) -> &str {
    match ns {
        Some(ns) if !ns.is_empty() => ns,
        _ => "default",
    }
}

/// A Namespace: its metadata (name, labels, annotations).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Namespace {
    #[serde(default, deserialize_with = "slim_meta")]
    pub metadata: ObjectMeta,
}

/// A Pod: metadata, where it runs, its container ports and its addresses and phase.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Pod {
    #[serde(default, deserialize_with = "slim_meta")]
    pub metadata: ObjectMeta,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<PodSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<PodStatus>,
}

/// The part of `Pod.spec` npagent reads.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub containers: Option<Vec<Container>>,
}

/// The part of a container npagent reads: its ports (named ports resolve through them).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Container {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ports: Option<Vec<ContainerPort>>,
}

/// The part of `Pod.status` npagent reads.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    #[serde(default, rename = "podIP", skip_serializing_if = "Option::is_none")]
    pub pod_ip: Option<String>,
    #[serde(default, rename = "podIPs", skip_serializing_if = "Option::is_none")]
    pub pod_ips: Option<Vec<PodIP>>,
}

/// A Node: its name, pod subnets and addresses (the routes to its pods, and the node's own
/// addresses when it is this node).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Node {
    #[serde(default, deserialize_with = "slim_meta")]
    pub metadata: ObjectMeta,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<NodeSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<NodeStatus>,
}

/// The part of `Node.spec` npagent reads: the pod subnets the controller manager gave it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeSpec {
    #[serde(default, rename = "podCIDR", skip_serializing_if = "Option::is_none")]
    pub pod_cidr: Option<String>,
    #[serde(default, rename = "podCIDRs", skip_serializing_if = "Option::is_none")]
    pub pod_cidrs: Option<Vec<String>>,
}

/// The part of `Node.status` npagent reads: its addresses.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub addresses: Option<Vec<NodeAddress>>,
}

/// A NetworkPolicy: metadata and its whole spec.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NetworkPolicy {
    #[serde(default, deserialize_with = "slim_meta")]
    pub metadata: ObjectMeta,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<NetworkPolicySpec>,
}

/// A StagedNetworkPolicy (`policy.npagent.io/v1alpha1`, namespaced): a NetworkPolicy that is
/// read and judged but never enforced. Its `spec` is exactly a NetworkPolicy's; promoting it
/// is changing `kind` and `apiVersion`. `deploy/staged-network-policy-crd.yaml` is generated
/// from this type (`tests/deploy_manifests.rs`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StagedNetworkPolicy {
    #[serde(default, deserialize_with = "slim_meta")]
    pub metadata: ObjectMeta,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<NetworkPolicySpec>,
}

impl StagedNetworkPolicy {
    /// The NetworkPolicy it would be once promoted: the same metadata and spec.
    pub fn to_network_policy(&self) -> NetworkPolicy {
        NetworkPolicy { metadata: self.metadata.clone(), spec: self.spec.clone() }
    }
}

impl k8s_openapi::Resource for StagedNetworkPolicy {
    const API_VERSION: &'static str = "policy.npagent.io/v1alpha1";
    const GROUP: &'static str = "policy.npagent.io";
    const KIND: &'static str = "StagedNetworkPolicy";
    const VERSION: &'static str = "v1alpha1";
    const URL_PATH_SEGMENT: &'static str = "stagednetworkpolicies";
    type Scope = k8s_openapi::NamespaceResourceScope;
}

/// A ClusterNetworkPolicy (`policy.networking.k8s.io/v1alpha2`, cluster-scoped), as upstream
/// (kubernetes-sigs/network-policy-api) defines it: field names and shapes are the CRD's,
/// every field optional here so that what is missing is an error naming it
/// ([`crate::model::cluster_policy`]) rather than a parse failure. Fields it does not define
/// are skipped, as the API server prunes them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClusterNetworkPolicy {
    #[serde(default, deserialize_with = "slim_meta")]
    pub metadata: ObjectMeta,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<ClusterNetworkPolicySpec>,
}

/// `ClusterNetworkPolicy.spec`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterNetworkPolicySpec {
    /// `Admin` or `Baseline`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier: Option<String>,
    /// 0 to 1000; lower is first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<ClusterNetworkPolicySubject>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingress: Option<Vec<ClusterNetworkPolicyIngressRule>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress: Option<Vec<ClusterNetworkPolicyEgressRule>>,
}

/// The pods a ClusterNetworkPolicy applies to: exactly one field.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClusterNetworkPolicySubject {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespaces: Option<LabelSelector>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pods: Option<NamespacedPod>,
}

/// Pods selected by a namespace selector and a pod selector together.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NamespacedPod {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelector>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_selector: Option<LabelSelector>,
}

/// An ingress rule of a ClusterNetworkPolicy.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClusterNetworkPolicyIngressRule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `Accept`, `Deny` or `Pass`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<Vec<ClusterNetworkPolicyIngressPeer>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocols: Option<Vec<ClusterNetworkPolicyProtocol>>,
}

/// An egress rule of a ClusterNetworkPolicy.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClusterNetworkPolicyEgressRule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `Accept`, `Deny` or `Pass`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<Vec<ClusterNetworkPolicyEgressPeer>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocols: Option<Vec<ClusterNetworkPolicyProtocol>>,
}

/// A source of an ingress rule: exactly one field.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClusterNetworkPolicyIngressPeer {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespaces: Option<LabelSelector>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pods: Option<NamespacedPod>,
}

/// A destination of an egress rule: exactly one field (`nodes` and `domainNames` are
/// upstream's experimental peers).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterNetworkPolicyEgressPeer {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespaces: Option<LabelSelector>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pods: Option<NamespacedPod>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<LabelSelector>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub networks: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain_names: Option<Vec<String>>,
}

/// A protocol match: exactly one field.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterNetworkPolicyProtocol {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp: Option<ProtocolPort>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp: Option<ProtocolPort>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sctp: Option<ProtocolPort>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destination_named_port: Option<String>,
}

/// A protocol's destination port.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProtocolPort {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destination_port: Option<ClusterPort>,
}

/// A port number or an inclusive range: exactly one field.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClusterPort {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub number: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range: Option<ClusterPortRange>,
}

/// An inclusive port range, `start` below `end`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClusterPortRange {
    #[serde(default)]
    pub start: i64,
    #[serde(default)]
    pub end: i64,
}

impl k8s_openapi::Resource for ClusterNetworkPolicy {
    const API_VERSION: &'static str = "policy.networking.k8s.io/v1alpha2";
    const GROUP: &'static str = "policy.networking.k8s.io";
    const KIND: &'static str = "ClusterNetworkPolicy";
    const VERSION: &'static str = "v1alpha2";
    const URL_PATH_SEGMENT: &'static str = "clusternetworkpolicies";
    type Scope = k8s_openapi::ClusterResourceScope;
}

/// The metadata fields npagent reads; every other field is skipped without being built.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct MetaFields {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    labels: Option<BTreeMap<String, String>>,
    #[serde(default)]
    annotations: Option<BTreeMap<String, String>>,
    #[serde(default)]
    creation_timestamp: Option<Time>,
    #[serde(default)]
    deletion_timestamp: Option<Time>,
    #[serde(default)]
    deletion_grace_period_seconds: Option<i64>,
    /// Read for the API server's watch protocol (kube-rs resumes watches from it).
    #[serde(default)]
    resource_version: Option<String>,
}

/// Deserializes object metadata keeping only the fields npagent reads (a `null` or absent
/// `metadata` is empty).
pub fn slim_meta<'de, D: Deserializer<'de>>(d: D) -> Result<ObjectMeta, D::Error> {
    let Some(m) = Option::<MetaFields>::deserialize(d)? else { return Ok(ObjectMeta::default()) };
    Ok(ObjectMeta {
        name: m.name,
        namespace: m.namespace,
        labels: m.labels,
        annotations: m.annotations,
        creation_timestamp: m.creation_timestamp,
        deletion_timestamp: m.deletion_timestamp,
        deletion_grace_period_seconds: m.deletion_grace_period_seconds,
        resource_version: m.resource_version,
        ..ObjectMeta::default()
    })
}

/// Makes a slim type a [`kube::Resource`] with the identity of the k8s-openapi type `K`, so
/// that kube-rs watches the same API paths and stores only the slim values.
macro_rules! resource_like {
    ($slim:ty, $k8s:ty) => {
        impl kube::Resource for $slim {
            type DynamicType = ();
            type Scope = <$k8s as k8s_openapi::Resource>::Scope;

            fn kind(_: &()) -> Cow<'_, str> {
                Cow::Borrowed(<$k8s as k8s_openapi::Resource>::KIND)
            }
            fn group(_: &()) -> Cow<'_, str> {
                Cow::Borrowed(<$k8s as k8s_openapi::Resource>::GROUP)
            }
            fn version(_: &()) -> Cow<'_, str> {
                Cow::Borrowed(<$k8s as k8s_openapi::Resource>::VERSION)
            }
            fn api_version(_: &()) -> Cow<'_, str> {
                Cow::Borrowed(<$k8s as k8s_openapi::Resource>::API_VERSION)
            }
            fn plural(_: &()) -> Cow<'_, str> {
                Cow::Borrowed(<$k8s as k8s_openapi::Resource>::URL_PATH_SEGMENT)
            }
            fn meta(&self) -> &ObjectMeta {
                &self.metadata
            }
            fn meta_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        }
    };
}

resource_like!(Namespace, k8s_openapi::api::core::v1::Namespace);
resource_like!(Pod, k8s_openapi::api::core::v1::Pod);
resource_like!(Node, k8s_openapi::api::core::v1::Node);
resource_like!(NetworkPolicy, k8s_openapi::api::networking::v1::NetworkPolicy);
resource_like!(StagedNetworkPolicy, StagedNetworkPolicy);
resource_like!(ClusterNetworkPolicy, ClusterNetworkPolicy);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_fields_npagent_reads_are_kept() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "name": "a", "namespace": "x", "labels": {"app": "a"}, "resourceVersion": "7",
                "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}],
                "ownerReferences": [{"apiVersion": "v1", "kind": "X", "name": "o", "uid": "u"}]
            },
            "spec": {"nodeName": "n", "containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 80, "name": "http"}]}],
                     "volumes": [{"name": "v"}]},
            "status": {"phase": "Running", "podIP": "10.0.0.1", "podIPs": [{"ip": "10.0.0.1"}], "conditions": [{"type": "Ready"}]}
        }))
        .expect("a pod");
        assert_eq!(pod.metadata.managed_fields, None);
        assert_eq!(pod.metadata.owner_references, None);
        assert_eq!(pod.metadata.resource_version.as_deref(), Some("7"));
        let spec = pod.spec.clone().unwrap_or_default();
        assert_eq!(spec.node_name.as_deref(), Some("n"));
        let ports = spec.containers.unwrap_or_default().remove(0).ports.unwrap_or_default();
        assert_eq!((ports[0].container_port, ports[0].name.as_deref()), (80, Some("http")));
        assert_eq!(pod.status.and_then(|s| s.pod_ips).map(|ips| ips[0].ip.clone()).as_deref(), Some("10.0.0.1"));
    }

    #[test]
    fn a_known_field_of_the_wrong_type_is_refused() {
        let bad = serde_json::json!({"metadata": {"name": "a", "labels": ["x"]}});
        assert!(serde_json::from_value::<Namespace>(bad).is_err());
        let bad = serde_json::json!({"metadata": {"name": "a"}, "spec": {"containers": 5}});
        let e = serde_json::from_value::<Pod>(bad).expect_err("containers: 5");
        assert!(e.to_string().starts_with("invalid type"), "{e}");
    }

    #[test]
    fn the_api_paths_are_kubernetes_own() {
        use kube::Resource;
        assert_eq!(Pod::url_path(&(), None), "/api/v1/pods");
        assert_eq!(Namespace::url_path(&(), None), "/api/v1/namespaces");
        assert_eq!(NetworkPolicy::url_path(&(), Some("x")), "/apis/networking.k8s.io/v1/namespaces/x/networkpolicies");
        assert_eq!(
            StagedNetworkPolicy::url_path(&(), Some("x")),
            "/apis/policy.npagent.io/v1alpha1/namespaces/x/stagednetworkpolicies"
        );
        assert_eq!(
            ClusterNetworkPolicy::url_path(&(), None),
            "/apis/policy.networking.k8s.io/v1alpha2/clusternetworkpolicies"
        );
    }
}
