//! Kubernetes objects (as [`crate::k8s`] reads them) to npagent's model, validated as the API server validates
//! them, so that a manifest the API server would refuse is refused here too, with the object
//! and the field path named.

use super::cidr::parse_cidr;
use super::liveness::{Phase, PodLife};
use super::logging::logging_annotations;
use super::names::{validate_label_key, validate_label_value, validate_namespace_name, validate_object_name};
use super::node::NodeFacts;
use super::{
    ContainerPort, EgressRule, IngressRule, Interner, LabelSelector, Labels, Namespace, Peer, Policy, PortRef,
    PortSpec, Protocol, Requirement, SelectorOp,
};
use crate::k8s::{self, namespace_or_default, NAMESPACE_NAME_LABEL};
use k8s_openapi::api::networking::v1 as net;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

/// Why an object could not be converted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConvertError {
    /// A field holds a value the API server would refuse.
    #[error("{kind} {object}: {path}: {message}")]
    Invalid { kind: &'static str, object: String, path: String, message: String },
    /// The object has no `metadata.name`.
    #[error("{kind} without metadata.name")]
    MissingName { kind: &'static str },
    /// `metadata.name` or `metadata.namespace` breaks Kubernetes' naming rules. The value is
    /// shown quoted and escaped: it may hold anything, a newline included.
    #[error("{kind} with {field} {value:?}: {message}")]
    BadName { kind: &'static str, field: &'static str, value: String, message: String },
}

impl ConvertError {
    /// Whether the object's identity itself is unusable (no name, or a bad name or namespace):
    /// nothing can be kept or enforced under it.
    pub fn is_identity(&self) -> bool {
        matches!(self, ConvertError::MissingName { .. } | ConvertError::BadName { .. })
    }

    /// The same error about an object of kind `kind`.
    fn of_kind(mut self, of: &'static str) -> ConvertError {
        match &mut self {
            ConvertError::Invalid { kind, .. }
            | ConvertError::MissingName { kind }
            | ConvertError::BadName { kind, .. } => *kind = of,
        }
        self
    }
}

/// Names the object being converted, for error messages (formatted only for an error: most
/// objects are valid).
pub(super) struct Ctx<'a> {
    pub(super) kind: &'static str,
    /// `None` for a cluster-scoped object.
    pub(super) namespace: Option<&'a str>,
    pub(super) name: &'a str,
}

impl<'a> Ctx<'a> {
    fn policy(namespace: &'a str, name: &'a str) -> Ctx<'a> {
        Ctx { kind: "NetworkPolicy", namespace: Some(namespace), name }
    }

    pub(super) fn err(&self, path: impl Into<String>, message: impl Into<String>) -> ConvertError {
        let object = match self.namespace {
            Some(ns) => format!("{ns}/{}", self.name),
            None => self.name.to_string(),
        };
        ConvertError::Invalid { kind: self.kind, object, path: path.into(), message: message.into() }
    }
}

/// `metadata.name`, validated with `rule` (names are printed in logs: see [`super::names`]).
pub(super) fn name_of(
    meta: &meta::ObjectMeta,
    kind: &'static str,
    rule: fn(&str) -> Result<(), String>,
) -> Result<String, ConvertError> {
    let name = match meta.name.as_deref() {
        Some(n) if !n.is_empty() => n,
        _ => return Err(ConvertError::MissingName { kind }),
    };
    rule(name).map_err(|message| ConvertError::BadName {
        kind,
        field: "metadata.name",
        value: name.to_string(),
        message,
    })?;
    Ok(name.to_string())
}

/// `metadata.namespace` ([`namespace_or_default`]), validated as a Namespace name.
fn namespace_of(meta: &meta::ObjectMeta, kind: &'static str) -> Result<String, ConvertError> {
    let ns = namespace_or_default(meta.namespace.as_deref());
    validate_namespace_name(ns).map_err(|message| ConvertError::BadName {
        kind,
        field: "metadata.namespace",
        value: ns.to_string(),
        message,
    })?;
    Ok(ns.to_string())
}

/// `metadata.labels`, validated, their strings from `strings`.
fn labels_of(ctx: &Ctx, meta: &meta::ObjectMeta, strings: &mut Interner) -> Result<Labels, ConvertError> {
    let Some(map) = &meta.labels else { return Ok(Labels::new()) };
    validate_labels(ctx, "metadata.labels", map)?;
    Ok(Labels::interned(map, strings))
}

/// Converts a Namespace; the `kubernetes.io/metadata.name` label is always set to its name.
/// Label strings come from `strings`.
pub fn namespace(ns: &k8s::Namespace, strings: &mut Interner) -> Result<Namespace, ConvertError> {
    let name = name_of(&ns.metadata, "Namespace", validate_namespace_name)?;
    let ctx = Ctx { kind: "Namespace", namespace: None, name: &name };
    let mut labels = labels_of(&ctx, &ns.metadata, strings)?;
    labels.insert(strings.intern(NAMESPACE_NAME_LABEL), strings.intern(&name));
    Ok(Namespace { name, labels, annotations: ns.metadata.annotations.clone().unwrap_or_default() })
}

/// The Node address types npagent reads: `InternalIP` (where other nodes route its pods, and
/// the node's own) and `ExternalIP` (the node's own).
const INTERNAL_IP: &str = "InternalIP";
const EXTERNAL_IP: &str = "ExternalIP";

/// Converts a Node: its name, podCIDRs (`spec.podCIDRs`, else `spec.podCIDR`) and its
/// InternalIP and ExternalIP addresses; other address types (hostnames) are not read.
pub fn node(n: &k8s::Node) -> Result<(String, NodeFacts), ConvertError> {
    let name = name_of(&n.metadata, "Node", validate_object_name)?;
    let ctx = Ctx { kind: "Node", namespace: None, name: &name };
    let mut facts = NodeFacts::default();
    let spec = n.spec.as_ref();
    let listed = spec.and_then(|s| s.pod_cidrs.as_ref()).filter(|c| !c.is_empty());
    let cidrs: Vec<(String, &String)> = match (listed, spec.and_then(|s| s.pod_cidr.as_ref())) {
        (Some(list), _) => list.iter().enumerate().map(|(i, c)| (format!("spec.podCIDRs[{i}]"), c)).collect(),
        (None, Some(one)) if !one.is_empty() => vec![("spec.podCIDR".to_string(), one)],
        _ => Vec::new(),
    };
    for (path, text) in cidrs {
        facts.pod_cidrs.push(parse_cidr(text).map_err(|e| ctx.err(path, format!("{text:?}: {e}")))?);
    }
    let addresses = n.status.as_ref().and_then(|s| s.addresses.as_ref());
    for (i, a) in addresses.into_iter().flatten().enumerate() {
        let list = match a.type_.as_str() {
            INTERNAL_IP => &mut facts.internal_ips,
            EXTERNAL_IP => &mut facts.external_ips,
            _ => continue,
        };
        let ip: IpAddr = a
            .address
            .parse()
            .map_err(|_| ctx.err(format!("status.addresses[{i}].address"), format!("invalid IP {:?}", a.address)))?;
        if !list.contains(&ip) {
            list.push(ip);
        }
    }
    Ok((name, facts))
}

/// Converts a Pod: labels, IPs (`status.podIPs`, else `status.podIP`), named container ports
/// and the node. Label keys and values, the namespace, the node and port names come from
/// `strings`.
pub fn pod(p: &k8s::Pod, strings: &mut Interner) -> Result<super::Pod, ConvertError> {
    let name = name_of(&p.metadata, "Pod", validate_object_name)?;
    let namespace = namespace_of(&p.metadata, "Pod")?;
    let ctx = Ctx { kind: "Pod", namespace: Some(&namespace), name: &name };
    let labels = labels_of(&ctx, &p.metadata, strings)?;

    let mut ips = Vec::new();
    if let Some(status) = &p.status {
        match status.pod_ips.as_deref() {
            Some(list) if !list.is_empty() => {
                for (i, entry) in list.iter().enumerate() {
                    let ip: IpAddr = entry
                        .ip
                        .parse()
                        .map_err(|_| ctx.err(format!("status.podIPs[{i}].ip"), format!("invalid IP {:?}", entry.ip)))?;
                    if !ips.contains(&ip) {
                        ips.push(ip);
                    }
                }
            }
            _ => {
                if let Some(ip) = status.pod_ip.as_deref().filter(|s| !s.is_empty()) {
                    ips.push(ip.parse().map_err(|_| ctx.err("status.podIP", format!("invalid IP {ip:?}")))?);
                }
            }
        }
    }

    let mut ports = Vec::new();
    let mut node = None;
    if let Some(spec) = &p.spec {
        node = spec.node_name.as_deref().filter(|n| !n.is_empty()).map(|n| strings.intern(n));
        for (ci, c) in spec.containers.iter().flatten().enumerate() {
            for (pi, cp) in c.ports.iter().flatten().enumerate() {
                let path = |field: &str| format!("spec.containers[{ci}].ports[{pi}].{field}");
                let port = u16::try_from(cp.container_port)
                    .ok()
                    .filter(|p| *p != 0)
                    .ok_or_else(|| ctx.err(path("containerPort"), format!("invalid port {}", cp.container_port)))?;
                let protocol = protocol(&ctx, || path("protocol"), cp.protocol.as_deref())?;
                let name = cp.name.as_deref().filter(|n| !n.is_empty());
                if let Some(n) = name {
                    validate_port_name(n)
                        .map_err(|m| ctx.err(path("name"), format!("invalid port name {n:?}: {m}")))?;
                }
                ports.push(ContainerPort { name: name.map(|n| strings.intern(n)), port, protocol });
            }
        }
    }
    // Held for the pod's life, 100,000 times over: no room to grow.
    ips.shrink_to_fit();
    ports.shrink_to_fit();
    let namespace = strings.intern(&namespace);
    Ok(super::Pod { namespace, name: name.into(), labels, ips, ports, node })
}

/// What decides whether a pod is still a policy peer: `status.phase` (`Pending` when the
/// pod has no status yet, as the API server defaults it), `metadata.creationTimestamp` and the
/// deletion deadline. Pure: the caller judges it against its own clock
/// ([`PodLife::claim`]).
pub fn pod_life(p: &k8s::Pod) -> PodLife {
    let phase = match p.status.as_ref().and_then(|s| s.phase.as_deref()) {
        None | Some("Pending") => Phase::Pending,
        Some("Running") => Phase::Running,
        Some("Succeeded") => Phase::Succeeded,
        Some("Failed") => Phase::Failed,
        Some(_) => Phase::Unknown,
    };
    let time = |t: &meta::Time| std::time::SystemTime::from(t.0);
    let deletion = p.metadata.deletion_timestamp.as_ref().map(|t| {
        // Grace period 0 is a forced deletion: gone at once, whatever the clocks say.
        if p.metadata.deletion_grace_period_seconds == Some(0) {
            std::time::SystemTime::UNIX_EPOCH
        } else {
            time(t)
        }
    });
    PodLife { phase, created: p.metadata.creation_timestamp.as_ref().map(time), deletion }
}

/// Converts a NetworkPolicy (networking.k8s.io/v1), defaulting `policyTypes` as the API
/// server does: Ingress always, Egress when egress rules are present.
pub fn policy(np: &k8s::NetworkPolicy, strings: &mut Interner) -> Result<Policy, ConvertError> {
    let (namespace, name) = policy_identity(np)?;
    let ctx = Ctx::policy(&namespace, &name);
    let no_spec = net::NetworkPolicySpec::default();
    let spec = np.spec.as_ref().unwrap_or(&no_spec);
    let pod_selector = policy_pod_selector(&ctx, spec.pod_selector.as_ref(), strings)?;

    let (affects_ingress, affects_egress) = policy_directions(&ctx, spec)?;

    let ingress = enumerated(&spec.ingress, |ri, rule| {
        let path = format!("spec.ingress[{ri}]");
        Ok(IngressRule {
            from: enumerated(&rule.from, |pi, peer| convert_peer(&ctx, &format!("{path}.from[{pi}]"), peer, strings))?,
            ports: enumerated(&rule.ports, |pi, port| convert_port(&ctx, &format!("{path}.ports[{pi}]"), port))?,
        })
    })?;
    let egress = enumerated(&spec.egress, |ri, rule| {
        let path = format!("spec.egress[{ri}]");
        Ok(EgressRule {
            to: enumerated(&rule.to, |pi, peer| convert_peer(&ctx, &format!("{path}.to[{pi}]"), peer, strings))?,
            ports: enumerated(&rule.ports, |pi, port| convert_port(&ctx, &format!("{path}.ports[{pi}]"), port))?,
        })
    })?;
    let annotations = logging_annotations(&np.metadata);
    Ok(Policy { namespace, name, pod_selector, affects_ingress, affects_egress, ingress, egress, annotations })
}

/// Converts a StagedNetworkPolicy exactly as the NetworkPolicy it would be once promoted
/// ([`policy`]); errors name it as a StagedNetworkPolicy.
pub fn staged_policy(snp: &k8s::StagedNetworkPolicy, strings: &mut Interner) -> Result<Policy, ConvertError> {
    policy(&snp.to_network_policy(), strings).map_err(|e| e.of_kind("StagedNetworkPolicy"))
}

/// Converts each item of an optional list with its index, stopping at the first error. The
/// Vec is allocated at its length: a cluster's policies are kept for the agent's lifetime.
fn enumerated<T, U>(
    items: &Option<Vec<T>>,
    mut convert: impl FnMut(usize, &T) -> Result<U, ConvertError>,
) -> Result<Vec<U>, ConvertError> {
    let items = items.as_deref().unwrap_or_default();
    let mut converted = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        converted.push(convert(i, item)?);
    }
    Ok(converted)
}

/// The directions a NetworkPolicy isolates: its `policyTypes`, defaulted as the API server
/// does (Ingress always, Egress when egress rules are present).
fn policy_directions(ctx: &Ctx, spec: &net::NetworkPolicySpec) -> Result<(bool, bool), ConvertError> {
    let Some(types) = spec.policy_types.as_deref().filter(|t| !t.is_empty()) else {
        return Ok((true, spec.egress.as_ref().is_some_and(|e| !e.is_empty())));
    };
    let (mut ingress, mut egress) = (false, false);
    for (i, t) in types.iter().enumerate() {
        match t.as_str() {
            "Ingress" => ingress = true,
            "Egress" => egress = true,
            other => {
                return Err(ctx.err(
                    format!("spec.policyTypes[{i}]"),
                    format!("unsupported value {other:?}: supported values: \"Ingress\", \"Egress\""),
                ))
            }
        }
    }
    Ok((ingress, egress))
}

/// The fail-closed stand-in for a NetworkPolicy that does not convert: its name and
/// podSelector only, isolating the selected pods with nothing allowed, in the directions its
/// `policyTypes` declare (defaulted as the API server does) when `spec_read` says its spec was
/// read whole and they are valid, else in both (whatever it meant to allow is unknown). `Err`
/// when not even its name and podSelector can be read.
pub fn policy_isolation(
    np: &k8s::NetworkPolicy,
    spec_read: bool,
    strings: &mut Interner,
) -> Result<Policy, ConvertError> {
    let (namespace, name) = policy_identity(np)?;
    let ctx = Ctx::policy(&namespace, &name);
    let pod_selector = policy_pod_selector(&ctx, np.spec.as_ref().and_then(|s| s.pod_selector.as_ref()), strings)?;
    let annotations = logging_annotations(&np.metadata);
    let declared = np.spec.as_ref().filter(|_| spec_read).and_then(|spec| policy_directions(&ctx, spec).ok());
    let (affects_ingress, affects_egress) = declared.unwrap_or((true, true));
    Ok(Policy {
        namespace,
        name,
        pod_selector,
        affects_ingress,
        affects_egress,
        ingress: Vec::new(),
        egress: Vec::new(),
        annotations,
    })
}

/// The error for a NetworkPolicy its source could not read in full (`problem` says why; the
/// object holds its name and podSelector only): a bad name or namespace if it has one, else
/// [`ConvertError::Invalid`] at `spec`.
pub fn unreadable_policy(np: &k8s::NetworkPolicy, problem: &str) -> ConvertError {
    match policy_identity(np) {
        Ok((namespace, name)) => Ctx::policy(&namespace, &name).err("spec", problem),
        Err(e) => e,
    }
}

/// The policy's namespace and name.
fn policy_identity(np: &k8s::NetworkPolicy) -> Result<(String, String), ConvertError> {
    let name = name_of(&np.metadata, "NetworkPolicy", validate_object_name)?;
    let namespace = namespace_of(&np.metadata, "NetworkPolicy")?;
    Ok((namespace, name))
}

/// `spec.podSelector`; absent = every pod of the namespace.
fn policy_pod_selector(
    ctx: &Ctx,
    s: Option<&meta::LabelSelector>,
    strings: &mut Interner,
) -> Result<LabelSelector, ConvertError> {
    match s {
        Some(s) => selector(ctx, "spec.podSelector", s, strings),
        None => Ok(LabelSelector::everything()),
    }
}

fn convert_peer(
    ctx: &Ctx,
    path: &str,
    peer: &net::NetworkPolicyPeer,
    strings: &mut Interner,
) -> Result<Peer, ConvertError> {
    match (&peer.ip_block, &peer.pod_selector, &peer.namespace_selector) {
        (Some(block), None, None) => {
            let cidr = parse_cidr(&block.cidr)
                .map_err(|m| ctx.err(format!("{path}.ipBlock.cidr"), format!("invalid CIDR {:?}: {m}", block.cidr)))?;
            let except = enumerated(&block.except, |i, e| {
                let epath = format!("{path}.ipBlock.except[{i}]");
                let ex = parse_cidr(e).map_err(|m| ctx.err(&epath, format!("invalid CIDR {e:?}: {m}")))?;
                if !cidr.strictly_contains(&ex) {
                    return Err(ctx.err(epath, format!("{e:?} must be a strict subset of cidr {:?}", block.cidr)));
                }
                Ok(ex)
            })?;
            Ok(Peer::IpBlock { cidr, except })
        }
        (Some(_), _, _) => Err(ctx.err(path, "may not specify both ipBlock and another peer")),
        (None, None, None) => Err(ctx.err(path, "must specify a peer")),
        (None, pods, namespaces) => Ok(Peer::Pods {
            pod_selector: pods
                .as_ref()
                .map(|s| selector(ctx, &format!("{path}.podSelector"), s, strings))
                .transpose()?,
            namespace_selector: namespaces
                .as_ref()
                .map(|s| selector(ctx, &format!("{path}.namespaceSelector"), s, strings))
                .transpose()?,
        }),
    }
}

fn convert_port(ctx: &Ctx, path: &str, port: &net::NetworkPolicyPort) -> Result<PortSpec, ConvertError> {
    let protocol = protocol(ctx, || format!("{path}.protocol"), port.protocol.as_deref())?;
    let port_ref = match &port.port {
        None => None,
        Some(IntOrString::Int(n)) => {
            Some(PortRef::Number(u16::try_from(*n).ok().filter(|p| *p != 0).ok_or_else(|| {
                ctx.err(format!("{path}.port"), format!("must be between 1 and 65535, inclusive: {n}"))
            })?))
        }
        Some(IntOrString::String(name)) => {
            validate_port_name(name)
                .map_err(|m| ctx.err(format!("{path}.port"), format!("invalid port name {name:?}: {m}")))?;
            Some(PortRef::Name(name.clone()))
        }
    };
    let end_port = match (port.end_port, &port_ref) {
        (None, _) => None,
        (Some(end), Some(PortRef::Number(start))) => {
            let end16 = u16::try_from(end).ok().filter(|e| *e != 0).ok_or_else(|| {
                ctx.err(format!("{path}.endPort"), format!("must be between 1 and 65535, inclusive: {end}"))
            })?;
            if end16 < *start {
                return Err(
                    ctx.err(format!("{path}.endPort"), format!("must be greater than or equal to port {start}: {end}"))
                );
            }
            Some(end16)
        }
        (Some(_), Some(PortRef::Name(_))) => {
            return Err(ctx.err(format!("{path}.endPort"), "may not be specified when port is non-numeric"))
        }
        (Some(_), None) => {
            return Err(ctx.err(format!("{path}.endPort"), "may not be specified when port is not specified"))
        }
    };
    Ok(PortSpec { protocol, port: port_ref, end_port })
}

/// `path` names the field, for the error.
fn protocol(ctx: &Ctx, path: impl FnOnce() -> String, p: Option<&str>) -> Result<Protocol, ConvertError> {
    match p {
        None | Some("TCP") => Ok(Protocol::Tcp),
        Some("UDP") => Ok(Protocol::Udp),
        Some("SCTP") => Ok(Protocol::Sctp),
        Some(other) => {
            Err(ctx
                .err(path(), format!("unsupported protocol {other:?}: supported values: \"TCP\", \"UDP\", \"SCTP\"")))
        }
    }
}

pub(super) fn selector(
    ctx: &Ctx,
    path: &str,
    s: &meta::LabelSelector,
    strings: &mut Interner,
) -> Result<LabelSelector, ConvertError> {
    let match_labels = match &s.match_labels {
        Some(map) => {
            validate_labels(ctx, &format!("{path}.matchLabels"), map)?;
            Labels::interned(map, strings)
        }
        None => Labels::new(),
    };
    let mut match_expressions = Vec::new();
    for (i, r) in s.match_expressions.iter().flatten().enumerate() {
        let rpath = format!("{path}.matchExpressions[{i}]");
        validate_label_key(&r.key)
            .map_err(|m| ctx.err(format!("{rpath}.key"), format!("invalid label key {:?}: {m}", r.key)))?;
        let values: BTreeSet<String> = r.values.iter().flatten().cloned().collect();
        let op = match r.operator.as_str() {
            "In" => SelectorOp::In,
            "NotIn" => SelectorOp::NotIn,
            "Exists" => SelectorOp::Exists,
            "DoesNotExist" => SelectorOp::DoesNotExist,
            other => {
                return Err(ctx.err(
                    format!("{rpath}.operator"),
                    format!("not a valid selector operator {other:?}: supported values: \"In\", \"NotIn\", \"Exists\", \"DoesNotExist\""),
                ))
            }
        };
        match op {
            SelectorOp::In | SelectorOp::NotIn if values.is_empty() => {
                return Err(ctx.err(format!("{rpath}.values"), "must be specified when `operator` is 'In' or 'NotIn'"))
            }
            SelectorOp::Exists | SelectorOp::DoesNotExist if !values.is_empty() => {
                return Err(ctx.err(
                    format!("{rpath}.values"),
                    "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                ))
            }
            _ => {}
        }
        for (vi, v) in r.values.iter().flatten().enumerate() {
            validate_label_value(v)
                .map_err(|m| ctx.err(format!("{rpath}.values[{vi}]"), format!("invalid label value {v:?}: {m}")))?;
        }
        match_expressions.push(Requirement { key: r.key.clone(), op, values });
    }
    match_expressions.shrink_to_fit();
    Ok(LabelSelector { match_labels, match_expressions })
}

fn validate_labels(ctx: &Ctx, path: &str, labels: &BTreeMap<String, String>) -> Result<(), ConvertError> {
    for (k, v) in labels {
        validate_label_key(k).map_err(|m| ctx.err(path, format!("invalid label key {k:?}: {m}")))?;
        validate_label_value(v)
            .map_err(|m| ctx.err(format!("{path}.{k}"), format!("invalid label value {v:?}: {m}")))?;
    }
    Ok(())
}

/// IANA service name: 1-15 lowercase alphanumerics and '-', at least one letter, no leading,
/// trailing or doubled '-'.
pub(super) fn validate_port_name(name: &str) -> Result<(), String> {
    let b = name.as_bytes();
    if b.is_empty() || b.len() > 15 {
        return Err("must be 1-15 characters".into());
    }
    if !b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-') {
        return Err("must contain only lowercase alphanumerics and '-'".into());
    }
    if !b.iter().any(|c| c.is_ascii_lowercase()) {
        return Err("must contain at least one letter".into());
    }
    if b.first() == Some(&b'-') || b.last() == Some(&b'-') || name.contains("--") {
        return Err("must not begin or end with '-' or contain '--'".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::logging::{LOGGING_ANNOTATION, LOGGING_ANNOTATION_ALIAS, LOG_LABEL_ANNOTATION, LOG_LABEL_MAX};
    use serde_json::json;

    fn np(spec: serde_json::Value) -> k8s::NetworkPolicy {
        serde_json::from_value(json!({
            "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": "p", "namespace": "x"}, "spec": spec
        }))
        .expect("test policy json")
    }

    fn err_text(spec: serde_json::Value) -> String {
        policy(&np(spec), &mut Interner::default()).expect_err("policy should be refused").to_string()
    }

    #[test]
    fn namespace_gets_name_label() {
        let ns: k8s::Namespace =
            serde_json::from_value(json!({"metadata": {"name": "x", "labels": {"a": "b"}}})).unwrap();
        let n = namespace(&ns, &mut Interner::default()).unwrap();
        assert_eq!(n.labels.get(NAMESPACE_NAME_LABEL), Some("x"));
        assert_eq!(n.labels.get("a"), Some("b"));
    }

    #[test]
    fn pod_fields() {
        let p: k8s::Pod = serde_json::from_value(json!({
            "metadata": {"name": "a", "namespace": "x", "labels": {"pod": "a"}},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "ports": [
                {"containerPort": 80, "name": "http"}, {"containerPort": 53, "protocol": "UDP"}]}]},
            "status": {"podIP": "10.0.0.9", "podIPs": [{"ip": "10.0.0.1"}, {"ip": "fd00::1"}]}
        }))
        .unwrap();
        let m = pod(&p, &mut Interner::default()).unwrap();
        assert_eq!(m.ips, vec!["10.0.0.1".parse::<IpAddr>().unwrap(), "fd00::1".parse().unwrap()]);
        assert_eq!(m.node.as_deref(), Some("n1"));
        assert_eq!(m.ports[0], ContainerPort { name: Some("http".into()), port: 80, protocol: Protocol::Tcp });
        assert_eq!(m.ports[1], ContainerPort { name: None, port: 53, protocol: Protocol::Udp });

        let p: k8s::Pod = serde_json::from_value(json!({
            "metadata": {"name": "a"}, "status": {"podIP": "10.0.0.9"}}))
        .unwrap();
        let m = pod(&p, &mut Interner::default()).unwrap();
        assert_eq!((&*m.namespace, m.ips.len()), ("default", 1));

        let p: k8s::Pod = serde_json::from_value(json!({
            "metadata": {"name": "a", "namespace": "x"}, "status": {"podIP": "10.0.0.300"}}))
        .unwrap();
        assert_eq!(
            pod(&p, &mut Interner::default()).unwrap_err().to_string(),
            "Pod x/a: status.podIP: invalid IP \"10.0.0.300\""
        );
    }

    #[test]
    fn policy_types_defaulting() {
        let cases = [
            (json!({"podSelector": {}}), (true, false)),
            (json!({"podSelector": {}, "egress": [{}]}), (true, true)),
            (json!({"podSelector": {}, "egress": []}), (true, false)),
            (json!({"podSelector": {}, "policyTypes": ["Egress"]}), (false, true)),
            (json!({"podSelector": {}, "policyTypes": ["Ingress"], "egress": [{}]}), (true, false)),
            (json!({"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}), (true, true)),
        ];
        for (spec, want) in cases {
            let p = policy(&np(spec.clone()), &mut Interner::default()).unwrap();
            assert_eq!((p.affects_ingress, p.affects_egress), want, "{spec}");
        }
    }

    #[test]
    fn missing_and_empty_ingress_have_no_rules() {
        assert!(policy(&np(json!({"podSelector": {}})), &mut Interner::default()).unwrap().ingress.is_empty());
        assert!(policy(&np(json!({"podSelector": {}, "ingress": []})), &mut Interner::default())
            .unwrap()
            .ingress
            .is_empty());
        let p = policy(&np(json!({"podSelector": {}, "ingress": [{}]})), &mut Interner::default()).unwrap();
        assert_eq!(p.ingress, vec![IngressRule { from: vec![], ports: vec![] }]);
    }

    #[test]
    fn peers_and_ports() {
        let p = policy(&np(json!({"podSelector": {"matchLabels": {"pod": "a"}}, "ingress": [{
            "from": [
                {"podSelector": {"matchExpressions": [{"key": "pod", "operator": "In", "values": ["b", "c"]}]},
                 "namespaceSelector": {"matchLabels": {"ns": "y"}}},
                {"ipBlock": {"cidr": "10.1.2.3/16", "except": ["10.1.3.0/24"]}}
            ],
            "ports": [{"port": 80}, {"protocol": "UDP", "port": "dns"}, {"port": 1000, "endPort": 2000}, {"protocol": "SCTP"}]
        }]})), &mut Interner::default()).unwrap();
        let rule = &p.ingress[0];
        match &rule.from[0] {
            Peer::Pods { pod_selector: Some(ps), namespace_selector: Some(ns) } => {
                assert_eq!(ps.match_expressions[0].op, SelectorOp::In);
                assert_eq!(ns.match_labels.get("ns"), Some("y"));
            }
            other => panic!("unexpected peer {other:?}"),
        }
        assert_eq!(
            rule.from[1],
            Peer::IpBlock {
                cidr: parse_cidr("10.1.0.0/16").unwrap(),
                except: vec![parse_cidr("10.1.3.0/24").unwrap()]
            }
        );
        assert_eq!(
            rule.ports[0],
            PortSpec { protocol: Protocol::Tcp, port: Some(PortRef::Number(80)), end_port: None }
        );
        assert_eq!(
            rule.ports[1],
            PortSpec { protocol: Protocol::Udp, port: Some(PortRef::Name("dns".into())), end_port: None }
        );
        assert_eq!(rule.ports[2].end_port, Some(2000));
        assert_eq!(rule.ports[3], PortSpec { protocol: Protocol::Sctp, port: None, end_port: None });
    }

    #[test]
    fn invalid_policies_name_the_field() {
        let cases = [
            (json!({"ingress": [{"from": [{}, {"ipBlock": {"cidr": "10.0.0.0/33"}}]}]}),
             "NetworkPolicy x/p: spec.ingress[0].from[0]: must specify a peer"),
            (json!({"ingress": [{"from": [{"podSelector": {}}, {"ipBlock": {"cidr": "10.0.0.0/33"}}]}]}),
             "NetworkPolicy x/p: spec.ingress[0].from[1].ipBlock.cidr: invalid CIDR \"10.0.0.0/33\": prefix length 33 exceeds 32"),
            (json!({"ingress": [{"from": [{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["11.0.0.0/16"]}}]}]}),
             "NetworkPolicy x/p: spec.ingress[0].from[0].ipBlock.except[0]: \"11.0.0.0/16\" must be a strict subset of cidr \"10.0.0.0/8\""),
            (json!({"ingress": [{"from": [{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["fd00::/64"]}}]}]}),
             "NetworkPolicy x/p: spec.ingress[0].from[0].ipBlock.except[0]: \"fd00::/64\" must be a strict subset of cidr \"10.0.0.0/8\""),
            (json!({"ingress": [{"from": [{"ipBlock": {"cidr": "10.0.0.0/8"}, "podSelector": {}}]}]}),
             "NetworkPolicy x/p: spec.ingress[0].from[0]: may not specify both ipBlock and another peer"),
            (json!({"podSelector": {"matchExpressions": [{"key": "a", "operator": "In"}]}}),
             "NetworkPolicy x/p: spec.podSelector.matchExpressions[0].values: must be specified when `operator` is 'In' or 'NotIn'"),
            (json!({"podSelector": {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}}),
             "NetworkPolicy x/p: spec.podSelector.matchExpressions[0].values: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"),
            (json!({"podSelector": {"matchExpressions": [{"key": "a", "operator": "Like", "values": ["x"]}]}}),
             "NetworkPolicy x/p: spec.podSelector.matchExpressions[0].operator: not a valid selector operator \"Like\": supported values: \"In\", \"NotIn\", \"Exists\", \"DoesNotExist\""),
            (json!({"podSelector": {"matchLabels": {"-bad": "x"}}}),
             "NetworkPolicy x/p: spec.podSelector.matchLabels: invalid label key \"-bad\": name part must be 1-63 alphanumerics, '-', '_' or '.', starting and ending alphanumeric"),
            (json!({"podSelector": {"matchLabels": {"Example.com/a": "x"}}}),
             "NetworkPolicy x/p: spec.podSelector.matchLabels: invalid label key \"Example.com/a\": prefix must be a DNS-1123 subdomain of at most 253 characters"),
            (json!({"ingress": [{"ports": [{"port": "http", "endPort": 90}]}]}),
             "NetworkPolicy x/p: spec.ingress[0].ports[0].endPort: may not be specified when port is non-numeric"),
            (json!({"ingress": [{"ports": [{"port": 90, "endPort": 80}]}]}),
             "NetworkPolicy x/p: spec.ingress[0].ports[0].endPort: must be greater than or equal to port 90: 80"),
            (json!({"ingress": [{"ports": [{"endPort": 80}]}]}),
             "NetworkPolicy x/p: spec.ingress[0].ports[0].endPort: may not be specified when port is not specified"),
            (json!({"ingress": [{"ports": [{"port": 70000}]}]}),
             "NetworkPolicy x/p: spec.ingress[0].ports[0].port: must be between 1 and 65535, inclusive: 70000"),
            (json!({"ingress": [{"ports": [{"port": "HTTP"}]}]}),
             "NetworkPolicy x/p: spec.ingress[0].ports[0].port: invalid port name \"HTTP\": must contain only lowercase alphanumerics and '-'"),
            (json!({"ingress": [{"ports": [{"protocol": "ICMP"}]}]}),
             "NetworkPolicy x/p: spec.ingress[0].ports[0].protocol: unsupported protocol \"ICMP\": supported values: \"TCP\", \"UDP\", \"SCTP\""),
            (json!({"policyTypes": ["Both"]}),
             "NetworkPolicy x/p: spec.policyTypes[0]: unsupported value \"Both\": supported values: \"Ingress\", \"Egress\""),
        ];
        for (spec, want) in cases {
            assert_eq!(err_text(spec), want);
        }
    }

    #[test]
    fn names_are_validated_and_shown_escaped() {
        let named = |ns: &str, name: &str| {
            serde_json::from_value::<k8s::NetworkPolicy>(
                json!({"metadata": {"name": name, "namespace": ns}, "spec": {}}),
            )
            .expect("policy json")
        };
        assert_eq!(
            policy(&named("x", "a b\nc"), &mut Interner::default()).unwrap_err().to_string(),
            "NetworkPolicy with metadata.name \"a b\\nc\": must be a DNS-1123 subdomain of at most 253 characters: \
             lowercase alphanumerics, '-' or '.', starting and ending alphanumeric"
        );
        let e = policy(&named("x.y", "p"), &mut Interner::default()).unwrap_err();
        assert!(
            e.is_identity()
                && e.to_string().starts_with("NetworkPolicy with metadata.namespace \"x.y\": must be a DNS-1123 label"),
            "{e}"
        );
        assert!(policy_isolation(&named("x", "A"), true, &mut Interner::default()).unwrap_err().is_identity());
        let p: k8s::Pod = serde_json::from_value(json!({"metadata": {"name": "a\n", "namespace": "x"}})).unwrap();
        assert!(pod(&p, &mut Interner::default()).unwrap_err().to_string().contains("\"a\\n\""));
        let ns: k8s::Namespace = serde_json::from_value(json!({"metadata": {"name": "a.b"}})).unwrap();
        assert!(namespace(&ns, &mut Interner::default()).unwrap_err().is_identity());
        assert!(!policy(&np(json!({"podSelector": {"matchLabels": {"-": "x"}}})), &mut Interner::default())
            .unwrap_err()
            .is_identity());
    }

    #[test]
    fn the_isolation_of_an_invalid_policy_keeps_its_selector_and_declared_directions() {
        let bad = np(json!({"podSelector": {"matchLabels": {"pod": "a"}}, "policyTypes": ["Egress"],
            "ingress": [{"from": [{"ipBlock": {"cidr": "10.0.0.0/33"}}]}]}));
        assert!(policy(&bad, &mut Interner::default()).is_err());
        // Its policyTypes are readable: it isolates for egress only, as it declares.
        let p = policy_isolation(&bad, true, &mut Interner::default()).unwrap();
        assert_eq!((p.namespace.as_str(), p.name.as_str()), ("x", "p"));
        assert!(!p.affects_ingress && p.affects_egress && p.ingress.is_empty() && p.egress.is_empty());
        assert_eq!(p.pod_selector.match_labels.get("pod"), Some("a"));
        // Its spec was not read whole: both directions.
        let p = policy_isolation(&bad, false, &mut Interner::default()).unwrap();
        assert!(p.affects_ingress && p.affects_egress);
        // Defaulted policyTypes: Ingress, and Egress with egress rules.
        let ingress_only =
            np(json!({"podSelector": {}, "ingress": [{"from": [{"ipBlock": {"cidr": "10.0.0.0/33"}}]}]}));
        let p = policy_isolation(&ingress_only, true, &mut Interner::default()).unwrap();
        assert!(p.affects_ingress && !p.affects_egress);
        let with_egress = np(json!({"podSelector": {}, "egress": [{"to": [{"ipBlock": {"cidr": "nope"}}]}]}));
        let p = policy_isolation(&with_egress, true, &mut Interner::default()).unwrap();
        assert!(p.affects_ingress && p.affects_egress);
        // An unknown policyType: nothing can be told, both directions.
        let bad_type = np(json!({"podSelector": {}, "policyTypes": ["Ingress", "Both"]}));
        let p = policy_isolation(&bad_type, true, &mut Interner::default()).unwrap();
        assert!(p.affects_ingress && p.affects_egress);
        let unreadable = np(json!({"podSelector": {"matchExpressions": [{"key": "pod", "operator": "Bogus"}]}}));
        assert!(policy_isolation(&unreadable, true, &mut Interner::default()).is_err());
    }

    #[test]
    fn pod_life_reads_phase_times_and_forced_deletion() {
        use std::time::{Duration, SystemTime};
        let life = |v: serde_json::Value| pod_life(&serde_json::from_value::<k8s::Pod>(v).unwrap());
        let l = life(json!({"metadata": {"name": "a"}}));
        assert_eq!((l.phase, l.created, l.deletion), (Phase::Pending, None, None));
        let l = life(json!({"metadata": {"name": "a", "creationTimestamp": "1970-01-01T00:00:10Z",
            "deletionTimestamp": "1970-01-01T00:01:00Z", "deletionGracePeriodSeconds": 30},
            "status": {"phase": "Running"}}));
        assert_eq!(l.phase, Phase::Running);
        assert_eq!(l.created, Some(SystemTime::UNIX_EPOCH + Duration::from_secs(10)));
        assert_eq!(l.deletion, Some(SystemTime::UNIX_EPOCH + Duration::from_secs(60)));
        let l = life(json!({"metadata": {"name": "a", "deletionTimestamp": "2999-01-01T00:00:00Z",
            "deletionGracePeriodSeconds": 0}}));
        assert_eq!(l.deletion, Some(SystemTime::UNIX_EPOCH), "forced deletion: gone at once");
        for (s, want) in [
            ("Succeeded", Phase::Succeeded),
            ("Failed", Phase::Failed),
            ("Unknown", Phase::Unknown),
            ("Odd", Phase::Unknown),
        ] {
            assert_eq!(life(json!({"metadata": {"name": "a"}, "status": {"phase": s}})).phase, want);
        }
    }

    #[test]
    fn policy_logging_and_log_label_annotations() {
        let annotated = |anns: serde_json::Value| {
            let mut np = np(json!({"podSelector": {}}));
            np.metadata.annotations = serde_json::from_value(anns).expect("annotations");
            policy(&np, &mut Interner::default()).expect("policy")
        };
        let p = annotated(json!({LOGGING_ANNOTATION: "true", LOG_LABEL_ANNOTATION: "team-a.audit_1"}));
        assert_eq!(p.logging_enabled(), Ok(true));
        assert_eq!(p.log_label(), Ok(Some("team-a.audit_1")));
        let p = annotated(json!({}));
        assert_eq!((p.logging_enabled(), p.log_label()), (Ok(false), Ok(None)));
        let p =
            annotated(json!({LOGGING_ANNOTATION_ALIAS: "1", "kubectl.kubernetes.io/last-applied-configuration": "{}"}));
        assert_eq!(p.annotations.len(), 1, "only the logging annotations are kept");
        assert_eq!(p.logging_enabled(), Ok(true));
        let p = annotated(json!({LOGGING_ANNOTATION: "on"}));
        let warn = p.logging_enabled().unwrap_err();
        assert!(warn.contains("NetworkPolicy x/p") && warn.contains("\"on\""), "{warn}");
        for bad in ["", "has space", "tab\t", "ünicode", &"x".repeat(LOG_LABEL_MAX + 1)] {
            let p = annotated(json!({LOG_LABEL_ANNOTATION: bad}));
            let warn = p.log_label().unwrap_err();
            assert!(warn.contains("NetworkPolicy x/p") && warn.contains(LOG_LABEL_ANNOTATION), "{bad:?}: {warn}");
        }
        assert_eq!(
            annotated(json!({LOG_LABEL_ANNOTATION: "x".repeat(LOG_LABEL_MAX)})).log_label().map(|l| l.map(str::len)),
            Ok(Some(LOG_LABEL_MAX))
        );
    }
}
