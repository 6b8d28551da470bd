//! ClusterNetworkPolicy (`policy.networking.k8s.io/v1alpha2`, kubernetes-sigs/network-policy-api)
//! as npagent's model holds it, converted from [`crate::k8s::ClusterNetworkPolicy`] with the
//! CRD's validation rules, each refusal naming the field.
//!
//! Upstream's meaning, kept here: a policy of tier Admin is judged before NetworkPolicies and
//! one of tier Baseline after them; within a tier lower `priority` first, within a policy its
//! rules in order; `Accept` and `Deny` are final, `Pass` hands the connection to the next
//! tier. A peer with none of the fields npagent knows (a newer CRD's) fails closed: it
//! matches nothing in an `Accept` rule, everything in a `Deny` or `Pass` rule
//! ([`ClusterRule::peers_match_everything`]). The experimental peers (`nodes`, `domainNames`)
//! are refused, naming them.

use super::cidr::parse_cidr;
use super::convert::{name_of, selector, validate_port_name, ConvertError, Ctx};
use super::names::validate_object_name;
use super::{Cidr, Interner, LabelSelector, PortRef, PortSpec, Protocol};
use crate::k8s;

/// The most rules of one direction, peers of one rule, protocols of one rule and networks of
/// one peer the CRD allows.
const MAX_ITEMS: usize = 25;
/// The longest rule name the CRD allows.
const MAX_RULE_NAME: usize = 100;
/// The highest priority the CRD allows.
const MAX_PRIORITY: i64 = 1000;

/// Where a ClusterNetworkPolicy is judged: before NetworkPolicies, or after them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Tier {
    Admin,
    Baseline,
}

impl Tier {
    /// Both tiers, in the order they are judged.
    pub const ALL: [Tier; 2] = [Tier::Admin, Tier::Baseline];

    /// `Admin` or `Baseline`, as the API spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Admin => "Admin",
            Tier::Baseline => "Baseline",
        }
    }
}

/// What a rule does with a connection it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// Allowed, final for this direction.
    Accept,
    /// Dropped, final.
    Deny,
    /// On to the next tier.
    Pass,
}

impl Action {
    /// `Accept`, `Deny` or `Pass`, as the API spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Accept => "Accept",
            Action::Deny => "Deny",
            Action::Pass => "Pass",
        }
    }
}

/// Pods, by their namespace's labels and their own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodSet {
    pub namespaces: LabelSelector,
    /// `None`: every pod of the selected namespaces.
    pub pods: Option<LabelSelector>,
}

impl PodSet {
    /// Whether it holds a pod with labels `labels` in a namespace with labels
    /// `namespace_labels`.
    pub fn matches(&self, namespace_labels: &super::Labels, labels: &super::Labels) -> bool {
        self.namespaces.matches(namespace_labels) && self.pods.as_ref().is_none_or(|s| s.matches(labels))
    }
}

/// A peer of a rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClusterPeer {
    Pods(PodSet),
    /// Egress only: addresses, pods' included.
    Networks(Vec<Cidr>),
    /// None of the fields npagent knows: fails closed (see the module's doc).
    Unrecognised,
}

/// A protocol a rule matches: a port (or range, or all ports) of one protocol, or a named
/// container port of any protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClusterProtocol {
    Port(PortSpec),
    NamedPort(String),
}

/// One ingress or egress rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterRule {
    /// Its `name`, for the audit log (`None` when not given).
    pub name: Option<String>,
    pub action: Action,
    /// Sources (ingress) or destinations (egress); never empty.
    pub peers: Vec<ClusterPeer>,
    /// Empty: every protocol and port.
    pub protocols: Vec<ClusterProtocol>,
}

impl ClusterRule {
    /// Whether an unrecognised peer makes this rule match every peer (`Deny`, `Pass`) rather
    /// than contribute none (`Accept`).
    pub fn peers_match_everything(&self) -> bool {
        self.action != Action::Accept && self.peers.contains(&ClusterPeer::Unrecognised)
    }
}

/// A ClusterNetworkPolicy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterPolicy {
    pub name: String,
    pub tier: Tier,
    /// 0 to 1000, lower first within its tier.
    pub priority: u16,
    /// The pods it applies to.
    pub subject: PodSet,
    pub ingress: Vec<ClusterRule>,
    pub egress: Vec<ClusterRule>,
}

/// Converts a ClusterNetworkPolicy, with the CRD's validation; label strings from `strings`.
pub fn convert(p: &k8s::ClusterNetworkPolicy, strings: &mut Interner) -> Result<ClusterPolicy, ConvertError> {
    let name = name_of(&p.metadata, "ClusterNetworkPolicy", validate_object_name)?;
    let ctx = Ctx { kind: "ClusterNetworkPolicy", namespace: None, name: &name };
    let spec = p.spec.as_ref().ok_or_else(|| ctx.err("spec", "required"))?;
    let tier = match spec.tier.as_deref() {
        Some("Admin") => Tier::Admin,
        Some("Baseline") => Tier::Baseline,
        Some(other) => {
            return Err(ctx.err("spec.tier", format!("{other:?}: supported values: \"Admin\", \"Baseline\"")))
        }
        None => return Err(ctx.err("spec.tier", "required")),
    };
    let priority = match spec.priority {
        Some(n @ 0..=MAX_PRIORITY) => n as u16,
        Some(n) => return Err(ctx.err("spec.priority", format!("{n}: must be from 0 to {MAX_PRIORITY}"))),
        None => return Err(ctx.err("spec.priority", "required")),
    };
    let subject = match &spec.subject {
        Some(k8s::ClusterNetworkPolicySubject { namespaces: Some(ns), pods: None }) => {
            PodSet { namespaces: selector(&ctx, "spec.subject.namespaces", ns, strings)?, pods: None }
        }
        Some(k8s::ClusterNetworkPolicySubject { namespaces: None, pods: Some(pods) }) => {
            pod_set(&ctx, "spec.subject.pods", pods, strings)?
        }
        Some(_) => return Err(ctx.err("spec.subject", "exactly one of `namespaces` and `pods` must be set")),
        None => return Err(ctx.err("spec.subject", "required")),
    };
    let ingress = rules(&ctx, "spec.ingress", spec.ingress.as_deref().unwrap_or_default(), |path, r| {
        let from = r.from.as_deref().unwrap_or_default();
        let peers = peer_list(&ctx, &format!("{path}.from"), from, |ppath, peer| {
            let known = [peer.namespaces.is_some(), peer.pods.is_some()];
            pods_peer(&ctx, ppath, known, peer.namespaces.as_ref(), peer.pods.as_ref(), strings)
        })?;
        rule(&ctx, path, r.name.as_deref(), r.action.as_deref(), peers, r.protocols.as_deref())
    })?;
    let egress = rules(&ctx, "spec.egress", spec.egress.as_deref().unwrap_or_default(), |path, r| {
        let to = r.to.as_deref().unwrap_or_default();
        let peers = peer_list(&ctx, &format!("{path}.to"), to, |ppath, peer| egress_peer(&ctx, ppath, peer, strings))?;
        let rule = rule(&ctx, path, r.name.as_deref(), r.action.as_deref(), peers, r.protocols.as_deref())?;
        let networks = rule.peers.iter().any(|p| matches!(p, ClusterPeer::Networks(_)));
        if networks && rule.protocols.iter().any(|p| matches!(p, ClusterProtocol::NamedPort(_))) {
            return Err(ctx.err(
                path,
                "a networks peer cannot be set with a destinationNamedPort (networks have no named ports)",
            ));
        }
        Ok(rule)
    })?;
    Ok(ClusterPolicy { name, tier, priority, subject, ingress, egress })
}

/// The rules of one direction (at most [`MAX_ITEMS`]), each converted by `one` with its path.
fn rules<R>(
    ctx: &Ctx,
    path: &str,
    list: &[R],
    mut one: impl FnMut(&str, &R) -> Result<ClusterRule, ConvertError>,
) -> Result<Vec<ClusterRule>, ConvertError> {
    if list.len() > MAX_ITEMS {
        return Err(ctx.err(path, format!("{} rules: at most {MAX_ITEMS}", list.len())));
    }
    list.iter().enumerate().map(|(i, r)| one(&format!("{path}[{i}]"), r)).collect()
}

/// A rule's peers (1 to [`MAX_ITEMS`]), each converted by `one` with its path.
fn peer_list<P>(
    ctx: &Ctx,
    path: &str,
    list: &[P],
    mut one: impl FnMut(&str, &P) -> Result<ClusterPeer, ConvertError>,
) -> Result<Vec<ClusterPeer>, ConvertError> {
    if list.is_empty() || list.len() > MAX_ITEMS {
        return Err(ctx.err(path, format!("{} peers: from 1 to {MAX_ITEMS}", list.len())));
    }
    list.iter().enumerate().map(|(i, p)| one(&format!("{path}[{i}]"), p)).collect()
}

/// A rule's name, action and protocols around its converted `peers`.
fn rule(
    ctx: &Ctx,
    path: &str,
    name: Option<&str>,
    action: Option<&str>,
    peers: Vec<ClusterPeer>,
    protocols: Option<&[k8s::ClusterNetworkPolicyProtocol]>,
) -> Result<ClusterRule, ConvertError> {
    let name = name.filter(|n| !n.is_empty());
    if let Some(n) = name.filter(|n| n.chars().count() > MAX_RULE_NAME) {
        return Err(
            ctx.err(format!("{path}.name"), format!("{} characters: at most {MAX_RULE_NAME}", n.chars().count()))
        );
    }
    let action = match action {
        Some("Accept") => Action::Accept,
        Some("Deny") => Action::Deny,
        Some("Pass") => Action::Pass,
        Some(other) => {
            let supported = "supported values: \"Accept\", \"Deny\", \"Pass\"";
            return Err(ctx.err(format!("{path}.action"), format!("{other:?}: {supported}")));
        }
        None => return Err(ctx.err(format!("{path}.action"), "required")),
    };
    let protocols = match protocols {
        None => Vec::new(),
        Some(list) if list.is_empty() || list.len() > MAX_ITEMS => {
            return Err(ctx.err(format!("{path}.protocols"), format!("{} protocols: from 1 to {MAX_ITEMS}", list.len())))
        }
        Some(list) => list
            .iter()
            .enumerate()
            .map(|(i, p)| protocol(ctx, &format!("{path}.protocols[{i}]"), p))
            .collect::<Result<_, _>>()?,
    };
    Ok(ClusterRule { name: name.map(str::to_owned), action, peers, protocols })
}

/// A peer of `namespaces` or `pods` (`known`: which of the peer's fields are set).
fn pods_peer(
    ctx: &Ctx,
    path: &str,
    known: impl AsRef<[bool]>,
    namespaces: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
    pods: Option<&k8s::NamespacedPod>,
    strings: &mut Interner,
) -> Result<ClusterPeer, ConvertError> {
    match known.as_ref().iter().filter(|set| **set).count() {
        0 => return Ok(ClusterPeer::Unrecognised),
        1 => {}
        _ => return Err(ctx.err(path, "exactly one field must be set")),
    }
    Ok(match (namespaces, pods) {
        (Some(ns), _) => ClusterPeer::Pods(PodSet {
            namespaces: selector(ctx, &format!("{path}.namespaces"), ns, strings)?,
            pods: None,
        }),
        (None, Some(pods)) => ClusterPeer::Pods(pod_set(ctx, &format!("{path}.pods"), pods, strings)?),
        (None, None) => ClusterPeer::Unrecognised,
    })
}

/// An egress peer: pods, networks, or an experimental kind npagent refuses.
fn egress_peer(
    ctx: &Ctx,
    path: &str,
    peer: &k8s::ClusterNetworkPolicyEgressPeer,
    strings: &mut Interner,
) -> Result<ClusterPeer, ConvertError> {
    for (field, set) in [("nodes", peer.nodes.is_some()), ("domainNames", peer.domain_names.is_some())] {
        if set {
            return Err(ctx.err(
                format!("{path}.{field}"),
                "an experimental peer of the API, which npagent does not support: use `networks` for addresses",
            ));
        }
    }
    let known = [peer.namespaces.is_some(), peer.pods.is_some(), peer.networks.is_some()];
    let Some(networks) = peer.networks.as_ref().filter(|_| known.iter().filter(|k| **k).count() == 1) else {
        return pods_peer(ctx, path, known, peer.namespaces.as_ref(), peer.pods.as_ref(), strings);
    };
    let npath = format!("{path}.networks");
    if networks.is_empty() || networks.len() > MAX_ITEMS {
        return Err(ctx.err(npath, format!("{} networks: from 1 to {MAX_ITEMS}", networks.len())));
    }
    let cidrs = networks
        .iter()
        .enumerate()
        .map(|(i, n)| parse_cidr(n).map_err(|e| ctx.err(format!("{npath}[{i}]"), format!("invalid CIDR {n:?}: {e}"))))
        .collect::<Result<_, _>>()?;
    Ok(ClusterPeer::Networks(cidrs))
}

/// `namespaceSelector` (empty or absent: every namespace) and `podSelector` (required).
fn pod_set(ctx: &Ctx, path: &str, p: &k8s::NamespacedPod, strings: &mut Interner) -> Result<PodSet, ConvertError> {
    let namespaces = match &p.namespace_selector {
        Some(s) => selector(ctx, &format!("{path}.namespaceSelector"), s, strings)?,
        None => LabelSelector::default(),
    };
    let pods = p.pod_selector.as_ref().ok_or_else(|| ctx.err(format!("{path}.podSelector"), "required"))?;
    Ok(PodSet { namespaces, pods: Some(selector(ctx, &format!("{path}.podSelector"), pods, strings)?) })
}

/// One protocol match: exactly one of `tcp`, `udp`, `sctp` (each with its destination port)
/// and `destinationNamedPort`.
fn protocol(ctx: &Ctx, path: &str, p: &k8s::ClusterNetworkPolicyProtocol) -> Result<ClusterProtocol, ConvertError> {
    let set = [p.tcp.is_some(), p.udp.is_some(), p.sctp.is_some(), p.destination_named_port.is_some()];
    if set.iter().filter(|s| **s).count() != 1 {
        return Err(ctx.err(path, "exactly one of `tcp`, `udp`, `sctp` and `destinationNamedPort` must be set"));
    }
    if let Some(name) = &p.destination_named_port {
        validate_port_name(name)
            .map_err(|m| ctx.err(format!("{path}.destinationNamedPort"), format!("invalid port name {name:?}: {m}")))?;
        return Ok(ClusterProtocol::NamedPort(name.clone()));
    }
    let (field, protocol, port) = match (&p.tcp, &p.udp, &p.sctp) {
        (Some(port), _, _) => ("tcp", Protocol::Tcp, port),
        (_, Some(port), _) => ("udp", Protocol::Udp, port),
        (_, _, Some(port)) => ("sctp", Protocol::Sctp, port),
        (None, None, None) => return Err(ctx.err(path, "no protocol")),
    };
    let ppath = format!("{path}.{field}.destinationPort");
    let port = port.destination_port.as_ref().ok_or_else(|| ctx.err(&ppath, "required"))?;
    let number = |n: i64, at: &str| {
        u16::try_from(n).ok().filter(|n| *n != 0).ok_or_else(|| ctx.err(at, format!("{n}: must be from 1 to 65535")))
    };
    let (first, end) = match (port.number, &port.range) {
        (Some(n), None) => (number(n, &format!("{ppath}.number"))?, None),
        (None, Some(range)) => {
            let start = number(range.start, &format!("{ppath}.range.start"))?;
            let end = number(range.end, &format!("{ppath}.range.end"))?;
            if start >= end {
                return Err(ctx.err(format!("{ppath}.range"), format!("start {start} must be less than end {end}")));
            }
            (start, Some(end))
        }
        _ => return Err(ctx.err(&ppath, "exactly one of `number` and `range` must be set")),
    };
    Ok(ClusterProtocol::Port(PortSpec { protocol, port: Some(PortRef::Number(first)), end_port: end }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cnp(spec: serde_json::Value) -> Result<ClusterPolicy, String> {
        let object = serde_json::json!({
            "apiVersion": "policy.networking.k8s.io/v1alpha2", "kind": "ClusterNetworkPolicy",
            "metadata": {"name": "p"}, "spec": spec
        });
        let p: k8s::ClusterNetworkPolicy = serde_json::from_value(object).map_err(|e| e.to_string())?;
        convert(&p, &mut Interner::default()).map_err(|e| e.to_string())
    }

    fn base(extra: serde_json::Value) -> serde_json::Value {
        let mut spec = serde_json::json!({"tier": "Admin", "priority": 10, "subject": {"namespaces": {}}});
        if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
            spec.extend(extra.clone());
        }
        spec
    }

    #[test]
    fn a_policy_of_every_kind_of_peer_and_protocol_converts() {
        let p = cnp(serde_json::json!({
            "tier": "Baseline", "priority": 1000,
            "subject": {"pods": {"namespaceSelector": {"matchLabels": {"tenant": "a"}}, "podSelector": {}}},
            "ingress": [{"name": "from-monitoring", "action": "Accept",
                         "from": [{"namespaces": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}],
                         "protocols": [{"tcp": {"destinationPort": {"number": 9090}}}, {"destinationNamedPort": "metrics"}]}],
            "egress": [{"action": "Deny", "to": [{"networks": ["169.254.169.254/32", "fd00::/8"]}],
                        "protocols": [{"udp": {"destinationPort": {"range": {"start": 5000, "end": 5010}}}}]},
                       {"action": "Pass", "to": [{"pods": {"podSelector": {"matchLabels": {"app": "db"}}}}]}]
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((p.tier, p.priority), (Tier::Baseline, 1000));
        assert!(p.subject.pods.as_ref().is_some_and(|s| *s == LabelSelector::default()));
        let ingress = &p.ingress[0];
        assert_eq!((ingress.name.as_deref(), ingress.action), (Some("from-monitoring"), Action::Accept));
        assert_eq!(ingress.protocols[1], ClusterProtocol::NamedPort("metrics".into()));
        let deny = &p.egress[0];
        assert!(matches!(&deny.peers[0], ClusterPeer::Networks(n) if n.len() == 2));
        assert_eq!(
            deny.protocols,
            [ClusterProtocol::Port(PortSpec {
                protocol: Protocol::Udp,
                port: Some(PortRef::Number(5000)),
                end_port: Some(5010)
            })]
        );
        // An absent namespaceSelector selects every namespace.
        assert!(matches!(&p.egress[1].peers[0], ClusterPeer::Pods(s) if s.namespaces == LabelSelector::default()));
    }

    #[test]
    fn what_the_crd_refuses_is_refused_naming_the_field() {
        let peer = serde_json::json!([{"namespaces": {}}]);
        for (spec, culprit) in [
            (serde_json::json!({"priority": 1, "subject": {"namespaces": {}}}), "spec.tier: required"),
            (base(serde_json::json!({"tier": "Developer"})), "spec.tier: \"Developer\""),
            (base(serde_json::json!({"priority": 1001})), "spec.priority: 1001"),
            (base(serde_json::json!({"subject": {}})), "spec.subject: exactly one"),
            (
                base(serde_json::json!({"ingress": [{"action": "Allow", "from": peer}]})),
                "spec.ingress[0].action: \"Allow\"",
            ),
            (base(serde_json::json!({"ingress": [{"action": "Accept", "from": []}]})), "spec.ingress[0].from: 0 peers"),
            (
                base(
                    serde_json::json!({"ingress": [{"action": "Accept", "from": [{"namespaces": {}, "pods": {"podSelector": {}}}]}]}),
                ),
                "spec.ingress[0].from[0]: exactly one field",
            ),
            (
                base(
                    serde_json::json!({"egress": [{"action": "Accept", "to": [{"pods": {"namespaceSelector": {}}}]}]}),
                ),
                "spec.egress[0].to[0].pods.podSelector: required",
            ),
            (
                base(serde_json::json!({"egress": [{"action": "Accept", "to": [{"networks": ["10.0.0.0/33"]}]}]})),
                "spec.egress[0].to[0].networks[0]: invalid CIDR",
            ),
            (
                base(
                    serde_json::json!({"egress": [{"action": "Deny", "to": [{"networks": ["10.0.0.0/8"]}], "protocols": [{"destinationNamedPort": "web"}]}]}),
                ),
                "spec.egress[0]: a networks peer cannot be set with a destinationNamedPort",
            ),
            (
                base(
                    serde_json::json!({"egress": [{"action": "Accept", "to": peer, "protocols": [{"tcp": {"destinationPort": {"range": {"start": 90, "end": 80}}}}]}]}),
                ),
                "spec.egress[0].protocols[0].tcp.destinationPort.range: start 90 must be less than end 80",
            ),
            (
                base(
                    serde_json::json!({"egress": [{"action": "Accept", "to": peer, "protocols": [{"tcp": {"destinationPort": {"number": 0}}}]}]}),
                ),
                "spec.egress[0].protocols[0].tcp.destinationPort.number: 0",
            ),
            (
                base(
                    serde_json::json!({"egress": [{"action": "Accept", "to": peer, "protocols": [{"tcp": {}, "udp": {}}]}]}),
                ),
                "spec.egress[0].protocols[0]: exactly one of",
            ),
            (
                base(serde_json::json!({"ingress": [{"name": "n".repeat(101), "action": "Deny", "from": peer}]})),
                "spec.ingress[0].name: 101 characters",
            ),
        ] {
            let err = cnp(spec.clone()).expect_err(&spec.to_string());
            assert!(err.contains(culprit), "{spec}: {err}");
            assert!(err.starts_with("ClusterNetworkPolicy p: "), "{err}");
        }
    }

    #[test]
    fn experimental_peers_are_refused_naming_them() {
        for (peer, field) in [
            (serde_json::json!({"nodes": {}}), "spec.egress[0].to[0].nodes"),
            (serde_json::json!({"domainNames": ["*.example.com"]}), "spec.egress[0].to[0].domainNames"),
        ] {
            let err = cnp(base(serde_json::json!({"egress": [{"action": "Accept", "to": [peer]}]}))).expect_err(field);
            assert!(err.contains(field) && err.contains("experimental"), "{err}");
        }
    }

    #[test]
    fn a_peer_npagent_does_not_know_fails_closed() {
        // A newer CRD's peer: no field npagent reads (the API server keeps it; serde skips it).
        let rule = |action: &str| {
            let p = cnp(base(serde_json::json!({"ingress": [{"action": action, "from": [{"services": {}}]}]})))
                .unwrap_or_else(|e| panic!("{e}"));
            p.ingress[0].clone()
        };
        assert_eq!(rule("Accept").peers, [ClusterPeer::Unrecognised]);
        assert!(!rule("Accept").peers_match_everything(), "an Accept matches nothing by it");
        assert!(rule("Deny").peers_match_everything(), "a Deny denies everything by it");
        assert!(rule("Pass").peers_match_everything(), "a Pass passes everything by it");
    }
}
