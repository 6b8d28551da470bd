//! The order in which ClusterNetworkPolicies and NetworkPolicies decide a connection, one
//! direction at a time, as upstream (kubernetes-sigs/network-policy-api, v1alpha2) defines it:
//! the Admin tier first (its policies by priority, lower first, ties by name; each policy's
//! rules in order; the first rule that matches decides), then NetworkPolicy, then the Baseline
//! tier, then the default: allowed. `Accept` and `Deny` are final; `Pass` skips the rest of
//! its tier. NetworkPolicy decides for a pod it isolates in that direction, whatever its
//! rules say; for other pods it says nothing.
//!
//! Pure: the reference the compiled flows, the audit log's decision chain and `explain` are
//! checked against.

use std::net::IpAddr;

use super::cluster_policy::{Action, ClusterPeer, ClusterPolicy, ClusterProtocol, ClusterRule, PodSet, Tier};
use super::{ContainerPort, Labels, Protocol};

/// Which side of a connection the rules speak for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// The destination's: `ingress` rules, peers are sources.
    Ingress,
    /// The source's: `egress` rules, peers are destinations.
    Egress,
}

/// A pod as the rules see it: its labels, its namespace's labels, its named container ports.
#[derive(Debug, Clone, Copy)]
pub struct PodView<'a> {
    pub labels: &'a Labels,
    pub namespace_labels: &'a Labels,
    pub ports: &'a [ContainerPort],
}

/// One direction of a connection: the pod judged for (the subject), the other end (a pod, or
/// only an address), and the destination's protocol and port.
#[derive(Debug, Clone, Copy)]
pub struct Connection<'a> {
    pub direction: Direction,
    pub subject: PodView<'a>,
    pub peer_ip: IpAddr,
    /// `None`: no pod (the node, another network).
    pub peer_pod: Option<PodView<'a>>,
    pub protocol: Protocol,
    pub port: u16,
}

/// The rule that decided in a tier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decided<'a> {
    pub policy: &'a ClusterPolicy,
    /// Its place in the policy's rules of the direction.
    pub rule: usize,
    pub action: Action,
}

impl Decided<'_> {
    /// The rule itself (`direction`: the one it was found for).
    pub fn rule(&self, direction: Direction) -> &ClusterRule {
        let rules = match direction {
            Direction::Ingress => &self.policy.ingress,
            Direction::Egress => &self.policy.egress,
        };
        &rules[self.rule]
    }
}

/// What the NetworkPolicies say of a connection in one direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetworkPolicySay {
    /// No NetworkPolicy isolates the pod in this direction.
    NotIsolated,
    Allowed,
    Denied,
}

/// The outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Allow,
    Deny,
}

/// One step of a decision chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step<'a> {
    /// A ClusterNetworkPolicy rule (Accept, Deny or Pass).
    Cluster(Decided<'a>),
    /// The NetworkPolicies, when they isolate the pod.
    NetworkPolicy(NetworkPolicySay),
    /// Nothing decided: Kubernetes' default.
    Default,
}

/// A ClusterNetworkPolicy rule's step in a decision chain, as the audit log and `explain`
/// write it: `Admin/Pass <policy>`, with `:<rule>` when the rule has a name.
pub fn cluster_step(tier: Tier, action: Action, policy: &str, rule: Option<&str>) -> String {
    let mut s = format!("{}/{} {policy}", tier.as_str(), action.as_str());
    if let Some(rule) = rule {
        s.push(':');
        s.push_str(rule);
    }
    s
}

/// The NetworkPolicies' step in a decision chain: the policy whose rule allowed
/// (`NetworkPolicy <ns>/<name>`), or the isolated pod's default drop.
pub fn network_policy_step(allowed_by: Option<&super::ObjectRef>) -> String {
    match allowed_by {
        Some(p) => format!("NetworkPolicy {p}"),
        None => "NetworkPolicy default drop".to_string(),
    }
}

/// The first rule of `tier` among `policies` that matches `conn`, in upstream's order.
pub fn first_match<'a>(policies: &'a [ClusterPolicy], tier: Tier, conn: &Connection) -> Option<Decided<'a>> {
    let in_tier = in_order(policies, tier).into_iter().filter(|p| selects(&p.subject, &conn.subject));
    in_tier.into_iter().find_map(|policy| {
        let rules = match conn.direction {
            Direction::Ingress => &policy.ingress,
            Direction::Egress => &policy.egress,
        };
        let rule = rules.iter().position(|r| rule_matches(r, conn))?;
        Some(Decided { policy, rule, action: rules[rule].action })
    })
}

/// The verdict and its chain, from the Admin tier's first match, the NetworkPolicies' say and
/// the Baseline tier's first match.
pub fn decide<'a>(
    admin: Option<Decided<'a>>,
    network_policy: NetworkPolicySay,
    baseline: Option<Decided<'a>>,
) -> (Verdict, Vec<Step<'a>>) {
    let mut chain = Vec::new();
    let final_of = |d: &Decided| match d.action {
        Action::Accept => Some(Verdict::Allow),
        Action::Deny => Some(Verdict::Deny),
        Action::Pass => None,
    };
    if let Some(d) = admin {
        chain.push(Step::Cluster(d));
        if let Some(v) = final_of(&d) {
            return (v, chain);
        }
    }
    if network_policy != NetworkPolicySay::NotIsolated {
        chain.push(Step::NetworkPolicy(network_policy));
        let verdict = if network_policy == NetworkPolicySay::Allowed { Verdict::Allow } else { Verdict::Deny };
        return (verdict, chain);
    }
    if let Some(d) = baseline {
        chain.push(Step::Cluster(d));
        if let Some(v) = final_of(&d) {
            return (v, chain);
        }
    }
    chain.push(Step::Default);
    (Verdict::Allow, chain)
}

/// The policies of `tier` in the order they are judged: lower priority first; ties (which
/// upstream leaves to the implementation) by name, so that every node judges alike.
pub fn in_order<'a>(policies: impl IntoIterator<Item = &'a ClusterPolicy>, tier: Tier) -> Vec<&'a ClusterPolicy> {
    let mut in_tier: Vec<&ClusterPolicy> = policies.into_iter().filter(|p| p.tier == tier).collect();
    in_tier.sort_by(|a, b| (a.priority, &a.name).cmp(&(b.priority, &b.name)));
    in_tier
}

fn selects(set: &PodSet, pod: &PodView) -> bool {
    set.matches(pod.namespace_labels, pod.labels)
}

fn rule_matches(rule: &ClusterRule, conn: &Connection) -> bool {
    let peer = rule.peers_match_everything()
        || rule.peers.iter().any(|p| match p {
            ClusterPeer::Pods(set) => conn.peer_pod.is_some_and(|pod| selects(set, &pod)),
            ClusterPeer::Networks(cidrs) => cidrs.iter().any(|c| c.contains(&conn.peer_ip)),
            ClusterPeer::Unrecognised => false,
        });
    // The destination's named ports: the subject's for ingress, the peer pod's for egress.
    let destination = match conn.direction {
        Direction::Ingress => Some(conn.subject),
        Direction::Egress => conn.peer_pod,
    };
    let protocol = rule.protocols.is_empty()
        || rule.protocols.iter().any(|p| match p {
            ClusterProtocol::Port(spec) => {
                let (first, last) = match &spec.port {
                    Some(super::PortRef::Number(n)) => (*n, spec.end_port.unwrap_or(*n)),
                    _ => (1, u16::MAX),
                };
                spec.protocol == conn.protocol && (first..=last).contains(&conn.port)
            }
            ClusterProtocol::NamedPort(name) => destination.is_some_and(|d| {
                d.ports.iter().any(|c| {
                    c.name.as_deref() == Some(name.as_str()) && c.port == conn.port && c.protocol == conn.protocol
                })
            }),
        });
    peer && protocol
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::cluster_policy::convert;
    use crate::model::Interner;

    fn policy(name: &str, tier: &str, priority: u16, ingress: serde_json::Value) -> ClusterPolicy {
        let object = serde_json::json!({
            "metadata": {"name": name},
            "spec": {"tier": tier, "priority": priority, "subject": {"namespaces": {}}, "ingress": ingress}
        });
        let p = serde_json::from_value(object).unwrap_or_else(|e| panic!("{e}"));
        convert(&p, &mut Interner::default()).unwrap_or_else(|e| panic!("{e}"))
    }

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        let map = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Labels::interned(&map, &mut Interner::default())
    }

    /// A connection into a pod on TCP `port` from a pod labelled `app` in a namespace
    /// labelled `ns`.
    fn into_pod<'a>(
        pod: &'a Labels,
        ns: &'a Labels,
        peer: &'a Labels,
        peer_ns: &'a Labels,
        port: u16,
    ) -> Connection<'a> {
        Connection {
            direction: Direction::Ingress,
            subject: PodView { labels: pod, namespace_labels: ns, ports: &[] },
            peer_ip: "10.0.0.9".parse().unwrap_or_else(|e| panic!("{e}")),
            peer_pod: Some(PodView { labels: peer, namespace_labels: peer_ns, ports: &[] }),
            protocol: Protocol::Tcp,
            port,
        }
    }

    #[test]
    fn admin_decides_first_by_priority_then_name_then_rule_order() {
        let from_monitoring = serde_json::json!([{"namespaces": {"matchLabels": {"ns": "monitoring"}}}]);
        let everyone = serde_json::json!([{"namespaces": {}}]);
        let policies = vec![
            policy("b-deny-all", "Admin", 20, serde_json::json!([{"name": "all", "action": "Deny", "from": everyone}])),
            policy(
                "a-monitoring",
                "Admin",
                10,
                serde_json::json!([
                    {"name": "tcp-9090", "action": "Accept", "from": from_monitoring, "protocols": [{"tcp": {"destinationPort": {"number": 9090}}}]},
                    {"name": "rest", "action": "Pass", "from": from_monitoring}
                ]),
            ),
            policy("a-tie", "Admin", 20, serde_json::json!([{"name": "tie", "action": "Accept", "from": everyone}])),
        ];
        let (pod, ns, mon, other) = (labels(&[]), labels(&[]), labels(&[("ns", "monitoring")]), labels(&[("ns", "x")]));
        let d = first_match(&policies, Tier::Admin, &into_pod(&pod, &ns, &pod, &mon, 9090)).expect("a match");
        assert_eq!((d.policy.name.as_str(), d.rule, d.action), ("a-monitoring", 0, Action::Accept));
        let d = first_match(&policies, Tier::Admin, &into_pod(&pod, &ns, &pod, &mon, 80)).expect("a match");
        assert_eq!(
            (d.policy.name.as_str(), d.rule(Direction::Ingress).name.as_deref()),
            ("a-monitoring", Some("rest"))
        );
        // Priority 20 twice: the name orders them, so the choice is the same on every node.
        let d = first_match(&policies, Tier::Admin, &into_pod(&pod, &ns, &pod, &other, 80)).expect("a match");
        assert_eq!(d.policy.name, "a-tie");
        assert!(first_match(&policies, Tier::Baseline, &into_pod(&pod, &ns, &pod, &other, 80)).is_none());
    }

    #[test]
    fn the_tiers_decide_in_order_and_pass_hands_on() {
        let everyone = serde_json::json!([{"namespaces": {}}]);
        let rule = |action: &str| serde_json::json!([{"action": action, "from": everyone}]);
        let (accept, deny, pass) = (
            policy("accept", "Admin", 1, rule("Accept")),
            policy("deny", "Baseline", 1, rule("Deny")),
            policy("pass", "Admin", 1, rule("Pass")),
        );
        fn d(p: &ClusterPolicy) -> Decided<'_> {
            Decided { policy: p, rule: 0, action: p.ingress[0].action }
        }
        use NetworkPolicySay::*;
        // Admin's Accept and Deny are final, whatever the tiers below say.
        assert_eq!(decide(Some(d(&accept)), Denied, Some(d(&deny))).0, Verdict::Allow);
        // Pass: the NetworkPolicies decide for a pod they isolate ...
        let (v, chain) = decide(Some(d(&pass)), Allowed, Some(d(&deny)));
        assert_eq!((v, chain), (Verdict::Allow, vec![Step::Cluster(d(&pass)), Step::NetworkPolicy(Allowed)]));
        // ... and the Baseline tier for one they do not.
        let (v, chain) = decide(Some(d(&pass)), NotIsolated, Some(d(&deny)));
        assert_eq!((v, chain), (Verdict::Deny, vec![Step::Cluster(d(&pass)), Step::Cluster(d(&deny))]));
        // A Baseline Pass, or nothing at all: Kubernetes' default.
        let baseline_pass = policy("bpass", "Baseline", 1, rule("Pass"));
        let (v, chain) = decide(None, NotIsolated, Some(d(&baseline_pass)));
        assert_eq!((v, chain), (Verdict::Allow, vec![Step::Cluster(d(&baseline_pass)), Step::Default]));
        assert_eq!(decide(None, NotIsolated, None), (Verdict::Allow, vec![Step::Default]));
        assert_eq!(decide(None, Denied, Some(d(&deny))).1, vec![Step::NetworkPolicy(Denied)]);
    }

    #[test]
    fn a_named_port_is_the_destinations_and_networks_match_pods_addresses() {
        let p = policy(
            "named",
            "Admin",
            1,
            serde_json::json!([{"action": "Deny", "from": [{"namespaces": {}}], "protocols": [{"destinationNamedPort": "web"}]}]),
        );
        let (pod, ns) = (labels(&[]), labels(&[]));
        let web = [ContainerPort { name: Some("web".into()), port: 8080, protocol: Protocol::Tcp }];
        let mut conn = into_pod(&pod, &ns, &pod, &ns, 8080);
        assert!(first_match(std::slice::from_ref(&p), Tier::Admin, &conn).is_none(), "the pod has no port named web");
        conn.subject.ports = &web;
        assert!(first_match(std::slice::from_ref(&p), Tier::Admin, &conn).is_some());
        conn.port = 8081;
        assert!(first_match(std::slice::from_ref(&p), Tier::Admin, &conn).is_none());

        // `networks` match a pod's address too (upstream: 0.0.0.0/0 takes in pod traffic).
        let object = serde_json::json!({"metadata": {"name": "net"}, "spec": {"tier": "Admin", "priority": 1,
            "subject": {"namespaces": {}}, "egress": [{"action": "Deny", "to": [{"networks": ["10.0.0.0/24"]}]}]}});
        let net = convert(&serde_json::from_value(object).unwrap_or_else(|e| panic!("{e}")), &mut Interner::default())
            .unwrap_or_else(|e| panic!("{e}"));
        conn.direction = Direction::Egress;
        assert!(first_match(std::slice::from_ref(&net), Tier::Admin, &conn).is_some(), "10.0.0.9 is a pod's");
        conn.peer_ip = "10.0.1.9".parse().unwrap_or_else(|e| panic!("{e}"));
        assert!(first_match(std::slice::from_ref(&net), Tier::Admin, &conn).is_none());
    }
}
