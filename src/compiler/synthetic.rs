//! Model builders for tests and a synthetic cluster generator for benchmarks.
//!
//! The generated cluster follows the shape of the scale target: `namespaces` namespaces with
//! `pods_per_ns` pods and `policies_per_ns` policies each; one pod in every
//! `namespaces / local_pods`-th namespace sits on the bridge. Policies mix same-namespace
//! podSelector peers, namespaceSelector+podSelector peers, ipBlocks with except, numeric,
//! ranged and named ports, and select-all policies, deterministically. A third of the
//! policies (every third one in generation order, starting with the third) also carry an egress section, in five shapes: to a same-namespace podSelector on TCP 5432 plus DNS (UDP/TCP 53) to anywhere
//! (empty `to`); to namespaceSelector+podSelector peers on the named port `http` (resolved on
//! each destination pod); to an ipBlock with except on TCP 443 plus to every pod of one other
//! namespace (namespaceSelector alone) on any port; to anywhere (empty `to`) on TCP 80 and
//! the range 8000-8100; and `egress: []` (egress isolation only). [`cluster_without_egress`]
//! is the same cluster without them, the baseline of the benchmarks. [`add_staged`] adds
//! StagedNetworkPolicies to either (edits of enforced policies, default-denies and allows).
//! [`spread_over_nodes`] schedules the pods on a number of nodes and gives their Node facts.
//!
//! Built only with the `testing` feature (the crate's tests, benches and examples enable it).
#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "its inputs are literals of the tests, so a malformed one may panic"
)]

use crate::model::cluster_policy::ClusterPolicy;
use crate::model::node::{ClusterNodes, NodeFacts};
use crate::model::{
    Annotations, Cidr, ContainerPort, EgressRule, IngressRule, LabelSelector, Labels, LocalPort, Model, Namespace,
    ObjectRef, Peer, Pod, Policy, PortRef, PortSpec, Protocol, Requirement, SelectorOp,
};
use std::net::{IpAddr, Ipv4Addr};

/// Labels from pairs.
pub fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs.iter().copied().collect()
}

/// Annotations from pairs.
pub fn annotations(pairs: &[(&str, &str)]) -> Annotations {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// `matchLabels` selector.
pub fn sel(pairs: &[(&str, &str)]) -> LabelSelector {
    LabelSelector {
        match_labels: pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        match_expressions: vec![],
    }
}

/// `namespace/name`.
pub fn oref(ns: &str, name: &str) -> ObjectRef {
    ObjectRef { namespace: ns.into(), name: name.into() }
}

/// A namespace with its name label set.
pub fn namespace(name: &str, extra: &[(&str, &str)], annotations: &[(&str, &str)]) -> Namespace {
    let mut l = labels(extra);
    l.insert(crate::k8s::NAMESPACE_NAME_LABEL, name);
    Namespace { name: name.into(), labels: l, annotations: self::annotations(annotations) }
}

/// A pod with labels and IPs (no container ports).
pub fn pod(ns: &str, name: &str, l: &[(&str, &str)], ips: &[&str]) -> Pod {
    Pod {
        namespace: ns.into(),
        name: name.into(),
        labels: labels(l),
        ips: ips.iter().filter_map(|s| s.parse().ok()).collect(),
        ports: vec![],
        node: None,
    }
}

/// A bridge port for pod `ns/name`.
pub fn port(ofport: u32, ns: &str, name: &str, mac_last: u8) -> LocalPort {
    LocalPort {
        ofport,
        interface: format!("{name}-{ns}"),
        pod: oref(ns, name),
        ips: vec![],
        mac: Some([0x0a, 0x58, 0, 0, (ofport >> 8) as u8, mac_last]),
    }
}

/// A local pod's port that carries the addresses OVSDB's `ip-address` gives it.
pub fn port_with_ips(ofport: u32, ns: &str, name: &str, mac_last: u8, ips: &[&str]) -> LocalPort {
    LocalPort { ips: ips.iter().map(|ip| ip.parse().expect("test IP")).collect(), ..port(ofport, ns, name, mac_last) }
}

/// An ingress policy.
pub fn policy(ns: &str, name: &str, pod_selector: LabelSelector, ingress: Vec<IngressRule>) -> Policy {
    Policy {
        namespace: ns.into(),
        name: name.into(),
        pod_selector,
        affects_ingress: true,
        affects_egress: false,
        ingress,
        egress: vec![],
        annotations: Default::default(),
    }
}

/// An ipBlock peer: `cidr` less `except` (CIDR text; panics on a bad one: test input).
pub fn ip_block(cidr: &str, except: &[&str]) -> Peer {
    let parse = |c: &str| crate::model::cidr::parse_cidr(c).unwrap_or_else(|e| panic!("{c}: {e}"));
    Peer::IpBlock { cidr: parse(cidr), except: except.iter().map(|c| parse(c)).collect() }
}

/// A numeric TCP port.
pub fn tcp(p: u16) -> PortSpec {
    PortSpec { protocol: Protocol::Tcp, port: Some(PortRef::Number(p)), end_port: None }
}

/// Adds objects to a model.
pub trait ModelExt {
    fn with_ns(self, n: Namespace) -> Self;
    fn with_pod(self, p: Pod) -> Self;
    fn with_port(self, p: LocalPort) -> Self;
    fn with_policy(self, p: Policy) -> Self;
    fn with_node(self, n: crate::model::Node) -> Self;
    fn with_cluster_policy(self, p: ClusterPolicy) -> Self;
}

impl ModelExt for Model {
    fn with_ns(mut self, n: Namespace) -> Self {
        self.namespaces.insert(n.name.clone(), n);
        self
    }
    fn with_pod(mut self, p: Pod) -> Self {
        self.pods.insert(oref(&p.namespace, &p.name), Box::new(p));
        self
    }
    fn with_port(mut self, p: LocalPort) -> Self {
        self.ports.insert(p.ofport, p);
        self
    }
    fn with_node(mut self, n: crate::model::Node) -> Self {
        self.node = n;
        self
    }

    fn with_policy(mut self, p: Policy) -> Self {
        self.policies.insert(oref(&p.namespace, &p.name), p);
        self
    }
    fn with_cluster_policy(mut self, p: ClusterPolicy) -> Self {
        self.cluster_policies.insert(p.name.clone(), p);
        self
    }
}

/// The ClusterNetworkPolicy `name` with `spec` as the API writes it (JSON); panics when it
/// does not convert (test input).
pub fn cluster_policy(name: &str, spec: serde_json::Value) -> ClusterPolicy {
    let object: crate::k8s::ClusterNetworkPolicy =
        serde_json::from_value(serde_json::json!({"metadata": {"name": name}, "spec": spec}))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    crate::model::cluster_policy::convert(&object, &mut crate::model::Interner::default())
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Adds `count` ClusterNetworkPolicies to a [`cluster`] of `spec`, alternately of the Admin
/// and the Baseline tier, policy `c` at priority `c % 50` (so that ties are judged by name):
/// - Admin, `c % 4 == 0`: the namespaces of `team{c % 50}` may not reach the others' TCP 22
///   and 3389 (Deny), a rule name given;
/// - Admin, `c % 4 == 2`: monitoring (pods `app0` of `team{(c + 1) % 50}`) is accepted into
///   every pod of the `prod` namespaces, then everything else from those namespaces passed
///   to NetworkPolicy;
/// - Baseline, odd `c`: the namespaces of team `t = (c / 2 * 10) % 50` (so that every local
///   pod, of team 0, 10, 20, 30 or 40, is a subject of some) accept ingress from their own
///   team's namespaces and deny it from team `t + 1`'s, and deny egress to 192.168.0.0/16 but
///   its `c % 256` /24.
pub fn add_cluster_policies(m: &mut Model, count: usize) {
    use serde_json::json;
    let team = |n: usize| json!({"matchLabels": {"team": format!("team{}", n % 50)}});
    for c in 0..count {
        let (name, spec) = match c % 4 {
            0 => (
                format!("admin-deny-remote-admin-{c}"),
                json!({"tier": "Admin", "priority": c % 50, "subject": {"namespaces": {}},
                    "ingress": [{"name": "deny-remote-admin", "action": "Deny",
                        "from": [{"namespaces": team(c)}],
                        "protocols": [{"tcp": {"destinationPort": {"number": 22}}},
                                      {"tcp": {"destinationPort": {"number": 3389}}}]}]}),
            ),
            2 => (
                format!("admin-monitoring-{c}"),
                json!({"tier": "Admin", "priority": c % 50, "subject": {"namespaces": {"matchLabels": {"env": "prod"}}},
                    "ingress": [
                        {"name": "accept-monitoring", "action": "Accept",
                         "from": [{"pods": {"namespaceSelector": team(c + 1), "podSelector": {"matchLabels": {"app": "app0"}}}}],
                         "protocols": [{"tcp": {"destinationPort": {"number": 9100}}}]},
                        {"name": "pass-the-rest", "action": "Pass", "from": [{"namespaces": team(c + 1)}]}]}),
            ),
            _ => (
                format!("baseline-tenant-{c}"),
                json!({"tier": "Baseline", "priority": c % 50, "subject": {"namespaces": team(c / 2 * 10)},
                    "ingress": [
                        {"name": "same-team", "action": "Accept", "from": [{"namespaces": team(c / 2 * 10)}]},
                        {"name": "next-team", "action": "Deny", "from": [{"namespaces": team(c / 2 * 10 + 1)}]}],
                    "egress": [
                        {"name": "own-net", "action": "Accept",
                         "to": [{"networks": [format!("192.168.{}.0/24", c % 256)]}]},
                        {"name": "no-private", "action": "Deny", "to": [{"networks": ["192.168.0.0/16"]}]}]}),
            ),
        };
        let p = cluster_policy(&name, spec);
        m.cluster_policies.insert(p.name.clone(), p);
    }
}

/// Size of a synthetic cluster.
#[derive(Debug, Clone, Copy)]
pub struct ClusterSpec {
    pub namespaces: usize,
    pub pods_per_ns: usize,
    pub policies_per_ns: usize,
    pub local_pods: usize,
}

impl ClusterSpec {
    /// The scale target: 1,000 namespaces, 100,000 pods, 10,000 policies, 100 local pods.
    pub const TARGET: ClusterSpec =
        ClusterSpec { namespaces: 1000, pods_per_ns: 100, policies_per_ns: 10, local_pods: 100 };
}

fn pod_ip(ns: usize, i: usize) -> IpAddr {
    let n = ns * 256 + i;
    IpAddr::V4(Ipv4Addr::new(10, (n >> 16) as u8 & 0x7f, (n >> 8) as u8, n as u8))
}

/// Name of namespace `i`.
pub fn ns_name(i: usize) -> String {
    format!("ns{i}")
}

/// Name of pod `j`.
pub fn pod_name(j: usize) -> String {
    format!("pod{j}")
}

/// Generates the cluster, an egress section in every third policy.
pub fn cluster(spec: ClusterSpec) -> Model {
    generate(spec, true)
}

/// Generates the cluster without egress sections: every policy is Ingress-only (the
/// generator's shape before egress was enforced).
pub fn cluster_without_egress(spec: ClusterSpec) -> Model {
    generate(spec, false)
}

fn generate(spec: ClusterSpec, with_egress: bool) -> Model {
    let mut m = Model::default();
    let stride = (spec.namespaces / spec.local_pods.max(1)).max(1);
    let mut ofport = 0u32;
    for i in 0..spec.namespaces {
        let name = ns_name(i);
        let team = format!("team{}", i % 50);
        let env = if i % 2 == 0 { "prod" } else { "dev" };
        let mut ns = namespace(&name, &[("team", &team), ("env", env)], &[]);
        if i % 10 == 0 {
            ns.annotations.insert(crate::model::logging::LOGGING_ANNOTATION.into(), "true".into());
        }
        m.namespaces.insert(name.clone(), ns);
        for j in 0..spec.pods_per_ns {
            let app = format!("app{}", j % 10);
            let tier = if j % 3 == 0 { "front" } else { "back" };
            let pname = pod_name(j);
            let mut p = pod(&name, &pname, &[("app", &app), ("tier", tier), ("pod", &pname)], &[]);
            p.ips = vec![pod_ip(i, j)];
            p.ports =
                vec![ContainerPort { name: Some("http".into()), port: 8000 + (j % 4) as u16, protocol: Protocol::Tcp }];
            p.node =
                Some(if i % stride == 0 && j == 0 { "local".into() } else { format!("node{}", (i + j) % 50).into() });
            if i % stride == 0 && j == 0 && (ofport as usize) < spec.local_pods {
                ofport += 1;
                let mut lp = port(ofport, &name, &pname, (ofport & 0xff) as u8);
                lp.ips = p.ips.clone();
                m.ports.insert(ofport, lp);
            }
            m.pods.insert(oref(&name, &pname), Box::new(p));
        }
        for k in 0..spec.policies_per_ns {
            let mut p = synthetic_policy(&name, i, k, spec.namespaces);
            let g = i * spec.policies_per_ns + k;
            if with_egress && g % 3 == 2 {
                add_egress(&mut p, i, k, spec.namespaces);
            }
            m.policies.insert(oref(&name, &format!("np{k}")), p);
        }
    }
    m
}

fn synthetic_policy(ns: &str, i: usize, k: usize, namespaces: usize) -> Policy {
    let app = |n: usize| format!("app{}", n % 10);
    let pod_selector = if k == 9 { LabelSelector::everything() } else { sel(&[("app", &app(k))]) };
    let same_ns = Peer::Pods { pod_selector: Some(sel(&[("app", &app(k + 1))])), namespace_selector: None };
    let other_ns = Peer::Pods {
        pod_selector: Some(sel(&[("tier", "front")])),
        namespace_selector: Some(LabelSelector {
            match_labels: Default::default(),
            match_expressions: vec![Requirement {
                key: crate::k8s::NAMESPACE_NAME_LABEL.into(),
                op: SelectorOp::In,
                values: [ns_name((i + k + 1) % namespaces), ns_name((i + 7 * k + 3) % namespaces)]
                    .into_iter()
                    .collect(),
            }],
        }),
    };
    let block = Peer::IpBlock {
        cidr: Cidr::new(IpAddr::V4(Ipv4Addr::new(172, 16 + (k as u8), 0, 0)), 16),
        except: vec![Cidr::new(IpAddr::V4(Ipv4Addr::new(172, 16 + (k as u8), (i % 256) as u8, 0)), 24)],
    };
    let rules = match k % 4 {
        0 => vec![IngressRule { from: vec![same_ns], ports: vec![tcp(80)] }],
        1 => vec![
            IngressRule {
                from: vec![other_ns],
                ports: vec![PortSpec {
                    protocol: Protocol::Tcp,
                    port: Some(PortRef::Name("http".into())),
                    end_port: None,
                }],
            },
            IngressRule { from: vec![block], ports: vec![] },
        ],
        2 => vec![IngressRule {
            from: vec![same_ns, other_ns],
            ports: vec![
                PortSpec { protocol: Protocol::Tcp, port: Some(PortRef::Number(1000)), end_port: Some(2000) },
                PortSpec { protocol: Protocol::Udp, port: Some(PortRef::Number(53)), end_port: None },
            ],
        }],
        _ => vec![IngressRule { from: vec![], ports: vec![tcp(443)] }],
    };
    policy(ns, &format!("np{k}"), pod_selector, rules)
}

/// Adds an egress section to policy `k` of namespace `i`, of shape `(i / 10 + k) % 5`, so that
/// the policies that select a local pod (`np0` and `np9` of every tenth namespace) get every
/// shape too. ns0's policies have none (tests change `ns0/np0` as an ingress policy); ns110 has
/// two that select its local pod: `np0` (named port) and `np9` (podSelector and DNS).
fn add_egress(p: &mut Policy, i: usize, k: usize, namespaces: usize) {
    let names = |ns: &[usize]| LabelSelector {
        match_labels: Default::default(),
        match_expressions: vec![Requirement {
            key: crate::k8s::NAMESPACE_NAME_LABEL.into(),
            op: SelectorOp::In,
            values: ns.iter().map(|n| ns_name(*n % namespaces)).collect(),
        }],
    };
    let port = |protocol, n| PortSpec { protocol, port: Some(PortRef::Number(n)), end_port: None };
    let dns = vec![port(Protocol::Udp, 53), port(Protocol::Tcp, 53)];
    p.affects_egress = true;
    p.egress = match (i / 10 + k) % 5 {
        0 => vec![
            EgressRule {
                to: vec![Peer::Pods {
                    pod_selector: Some(sel(&[("app", &format!("app{}", (k + 5) % 10))])),
                    namespace_selector: None,
                }],
                ports: vec![tcp(5432)],
            },
            EgressRule { to: vec![], ports: dns },
        ],
        1 => vec![EgressRule {
            to: vec![Peer::Pods {
                pod_selector: Some(sel(&[("tier", "back")])),
                namespace_selector: Some(names(&[i + 1, i + 3 * k + 2])),
            }],
            ports: vec![PortSpec { protocol: Protocol::Tcp, port: Some(PortRef::Name("http".into())), end_port: None }],
        }],
        2 => vec![
            EgressRule {
                to: vec![Peer::IpBlock {
                    cidr: Cidr::new(IpAddr::V4(Ipv4Addr::new(192, 168, 0, 0)), 16),
                    except: vec![Cidr::new(IpAddr::V4(Ipv4Addr::new(192, 168, (i % 256) as u8, 0)), 24)],
                }],
                ports: vec![tcp(443)],
            },
            EgressRule {
                to: vec![Peer::Pods { pod_selector: None, namespace_selector: Some(names(&[i + 500])) }],
                ports: vec![],
            },
        ],
        3 => vec![EgressRule {
            to: vec![],
            ports: vec![
                tcp(80),
                PortSpec { protocol: Protocol::Tcp, port: Some(PortRef::Number(8000)), end_port: Some(8100) },
            ],
        }],
        _ => vec![],
    };
}

/// The name of node `k` of [`spread_over_nodes`]; `node-0` is the local node.
pub fn node_name(k: usize) -> String {
    format!("node-{k}")
}

/// How many nodes [`spread_over_nodes`] can give distinct podCIDRs and InternalIPs.
pub const MAX_NODES: usize = 1 << 15;

/// The podCIDR of node `k` (`k < MAX_NODES`): the `k`-th /24 of 10.128.0.0/9, apart from the
/// synthetic pods' addresses (10.0.0.0/14), the ipBlocks of [`cluster`]'s policies
/// (172.16.0.0/16 to 172.25.0.0/16, 192.168.0.0/16) and [`node`]'s Service range (10.96.0.0/12).
pub fn node_pod_cidr(k: usize) -> Cidr {
    let n = 128 * 256 + k;
    Cidr::new(IpAddr::V4(Ipv4Addr::new(10, (n >> 8) as u8, n as u8, 0)), 24)
}

/// The InternalIP of node `k` (`k < MAX_NODES`): the `k + 1`-th address of [`NODE_SUBNET`].
pub fn node_internal_ip(k: usize) -> IpAddr {
    let n = k + 1;
    IpAddr::V4(Ipv4Addr::new(172, 31, (n >> 8) as u8, n as u8))
}

/// The subnet of the nodes' InternalIPs (172.31.0.0/16): on-link for the routes to their pods.
pub fn node_subnet() -> Cidr {
    Cidr::new(IpAddr::V4(Ipv4Addr::new(172, 31, 0, 0)), 16)
}

/// What the Node object of node `k` says: podCIDR [`node_pod_cidr`], InternalIP
/// [`node_internal_ip`].
pub fn node_facts(k: usize) -> NodeFacts {
    NodeFacts { pod_cidrs: vec![node_pod_cidr(k)], internal_ips: vec![node_internal_ip(k)], external_ips: vec![] }
}

/// Schedules the pods of `m` on `nodes` nodes (`1..=MAX_NODES`) and gives their Node facts,
/// by name: the local pods (those with a bridge port) on `node-0`, every other pod on one of
/// `node-1` to `node-{nodes - 1}` by turn in the model's order (about the same number on
/// each; on `node-0` too when it is the only one). The pods keep their addresses, so they are
/// not inside their node's podCIDR ([`node_pod_cidr`]): the flows are those of the cluster
/// before, whatever nodes it has.
pub fn spread_over_nodes(m: &mut Model, nodes: usize) -> ClusterNodes {
    assert!((1..=MAX_NODES).contains(&nodes), "{nodes} nodes: 1 to {MAX_NODES}");
    let local: std::collections::BTreeSet<ObjectRef> = m.ports.values().map(|p| p.pod.clone()).collect();
    let names: Vec<crate::model::SharedStr> = (0..nodes).map(|k| node_name(k).into()).collect();
    let mut turn = 0;
    for (r, p) in &mut m.pods {
        p.node = Some(if local.contains(r) || nodes == 1 {
            names[0].clone()
        } else {
            turn += 1;
            names[1 + (turn - 1) % (nodes - 1)].clone()
        });
    }
    (0..nodes).map(|k| (node_name(k), node_facts(k))).collect()
}

/// Adds `count` StagedNetworkPolicies to `m`, a cluster of `spec` from [`cluster`] or
/// [`cluster_without_egress`]: staged policy `s` goes to namespace `s % namespaces` (the
/// `s / namespaces`-th there), so 1,000 at the scale target put one in every namespace, and
/// only those of the local pods' namespaces (every tenth) can touch a local pod. Ten kinds by
/// turn, `(i + i / 10 + t) % 10` for the `t`-th of namespace `i` (so the local pods'
/// namespaces get every kind too):
/// - 0, 1: a staged edit of enforced `np{e}` (`e = (i / 10 + 3t) % policies_per_ns`) that
///   moves its first ingress rule to TCP 8443 (ns0's is np0's: it selects ns0's local pod);
/// - 2, 3: a staged edit of `np{e}` that adds egress isolation with DNS (UDP/TCP 53) allowed;
/// - 4, 5: a new default-deny of ingress, `staged-deny-ingress-{t}` (every pod, no rule);
/// - 6: a new default-deny of both directions with DNS allowed, `staged-deny-all-{t}`;
/// - 7, 8, 9: a new allow, `staged-allow-{t}`: pods `app{(i / 7 + t) % 10}` from the same
///   namespace's `app{(i / 7 + t + 1) % 10}` and from the front tier of the namespaces of team
///   `team{(i + 1) % 50}` (a namespaceSelector on a label, not a name) on TCP 9090.
///
/// [`touched_ports`] says which local pods they touch.
pub fn add_staged(m: &mut Model, spec: ClusterSpec, count: usize) {
    let namespaces = spec.namespaces.max(1);
    let dns = || vec![port_spec(Protocol::Udp, 53), port_spec(Protocol::Tcp, 53)];
    for s in 0..count {
        let (i, t) = (s % namespaces, s / namespaces);
        let ns = ns_name(i);
        let kind = (i + i / 10 + t) % 10;
        let edited = || {
            let e = (i / 10 + 3 * t) % spec.policies_per_ns.max(1);
            m.policies.get(&oref(&ns, &format!("np{e}"))).cloned()
        };
        let p = match kind {
            0 | 1 => edited().map(|mut p| {
                if let Some(rule) = p.ingress.first_mut() {
                    rule.ports = vec![tcp(8443)];
                }
                p
            }),
            2 | 3 => edited().map(|mut p| {
                p.affects_egress = true;
                p.egress = vec![EgressRule { to: vec![], ports: dns() }];
                p
            }),
            4 | 5 => Some(policy(&ns, &format!("staged-deny-ingress-{t}"), LabelSelector::everything(), vec![])),
            6 => Some(Policy {
                affects_egress: true,
                egress: vec![EgressRule { to: vec![], ports: dns() }],
                ..policy(&ns, &format!("staged-deny-all-{t}"), LabelSelector::everything(), vec![])
            }),
            _ => {
                let app = |n: usize| format!("app{}", (i / 7 + t + n) % 10);
                let same_ns = Peer::Pods { pod_selector: Some(sel(&[("app", &app(1))])), namespace_selector: None };
                let team = Peer::Pods {
                    pod_selector: Some(sel(&[("tier", "front")])),
                    namespace_selector: Some(sel(&[("team", &format!("team{}", (i + 1) % 50))])),
                };
                let rule = IngressRule { from: vec![same_ns, team], ports: vec![tcp(9090)] };
                Some(policy(&ns, &format!("staged-allow-{t}"), sel(&[("app", &app(0))]), vec![rule]))
            }
        };
        if let Some(p) = p {
            m.staged_policies.insert(oref(&p.namespace, &p.name), p);
        }
    }
}

/// The local ports a staged policy touches: one selects the port's pod, or replaces an
/// enforced policy that selects it (the pods the staged view's flows are compiled for).
pub fn touched_ports(m: &Model) -> Vec<u32> {
    let selects =
        |p: &Policy, pod: &Pod| (p.affects_ingress || p.affects_egress) && p.pod_selector.matches(&pod.labels);
    m.ports
        .values()
        .filter(|port| {
            m.pods.get(&port.pod).is_some_and(|pod| {
                m.staged_policies
                    .iter()
                    .filter(|(r, _)| r.namespace == port.pod.namespace)
                    .any(|(r, p)| selects(p, pod) || m.policies.get(r).is_some_and(|e| selects(e, pod)))
            })
        })
        .map(|port| port.ofport)
        .collect()
}

fn port_spec(protocol: Protocol, n: u16) -> PortSpec {
    PortSpec { protocol, port: Some(PortRef::Number(n)), end_port: None }
}

/// The gateway's MAC in [`node`].
pub const GATEWAY_MAC: [u8; 6] = [0x0a, 0x58, 0, 0, 0, 0xfe];

/// A node with gateway `gw0` (ofport 100, 10.0.0.254 and fd00::fe), uplink `uplink0`
/// (ofport 200) and Service range 10.96.0.0/12.
pub fn node() -> crate::model::Node {
    use crate::model::{Cidr, Node, NodePort};
    Node {
        gateway: Some(NodePort { ofport: 100, interface: "gw0".into(), mac: Some(GATEWAY_MAC) }),
        uplinks: vec![NodePort { ofport: 200, interface: "uplink0".into(), mac: None }],
        gateway_ips: vec!["10.0.0.254".parse().expect("ip"), "fd00::fe".parse().expect("ip")],
        node_ips: Default::default(),
        service_cidrs: vec![Cidr::new("10.96.0.0".parse().expect("ip"), 12)],
    }
}

/// x (logging on): pods a (local, port 1), b, c; y: pod d (local, port 2), default deny; the
/// node of [`node`].
/// x/allow-b: b -> a on TCP 80 and the named port "web" (8080 on a).
pub fn small_model() -> Model {
    use crate::model::ContainerPort;
    let mut a = pod("x", "a", &[("pod", "a")], &["10.0.0.1", "fd00::1"]);
    a.ports = vec![ContainerPort { name: Some("web".into()), port: 8080, protocol: Protocol::Tcp }];
    Model::default()
        .with_ns(namespace("x", &[("ns", "x")], &[("networkpolicy.antrea.io/enable-logging", "true")]))
        .with_ns(namespace("y", &[("ns", "y")], &[]))
        .with_pod(a)
        .with_pod(pod("x", "b", &[("pod", "b")], &["10.0.0.2", "fd00::2"]))
        .with_pod(pod("x", "c", &[("pod", "c")], &["10.0.0.3"]))
        .with_pod(pod("y", "d", &[("pod", "d")], &["10.0.1.4"]))
        .with_port(port_with_ips(1, "x", "a", 1, &["10.0.0.1", "fd00::1"]))
        .with_port(port_with_ips(2, "y", "d", 2, &["10.0.1.4"]))
        .with_policy(policy(
            "x",
            "allow-b",
            sel(&[("pod", "a")]),
            vec![IngressRule {
                from: vec![Peer::Pods { pod_selector: Some(sel(&[("pod", "b")])), namespace_selector: None }],
                ports: vec![
                    tcp(80),
                    PortSpec { protocol: Protocol::Tcp, port: Some(PortRef::Name("web".into())), end_port: None },
                ],
            }],
        ))
        .with_policy(policy("y", "deny-all", sel(&[]), vec![]))
        .with_node(node())
}
