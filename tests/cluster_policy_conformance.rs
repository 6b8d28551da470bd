//! The upstream ClusterNetworkPolicy conformance tests ported to the testbed
//! (`testbed/conformance/*.yaml`, run with real packets by `e2e_cluster_policy_conformance.rs`)
//! checked without a switch: every poke's expected verdict is what npagent's pure reference
//! evaluator says (`model::tiers`, the ClusterNetworkPolicies converted by
//! `model::cluster_policy::convert`, the NetworkPolicies' say from a small evaluation of the
//! policies `model::convert::policy` converts), every standard-profile test of upstream is
//! ported, and each ported test would fail against an agent that enforced NetworkPolicies but
//! not ClusterNetworkPolicies. Needs neither root nor OVS.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

mod support;

#[path = "e2e_scenarios/scenario.rs"]
mod scenario;

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

use npagent::k8s;
use npagent::model::cluster_policy::{self, ClusterPolicy, Tier};
use npagent::model::tiers::{decide, first_match, Connection, Direction, NetworkPolicySay, PodView, Step, Verdict};
use npagent::model::{convert, Interner, Namespace, Peer, Pod, Policy, PortRef, PortSpec, Protocol};
use scenario::{Base, Poke, Proto, Scenario};

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// The conformance layout's objects, as committed.
fn base() -> Base {
    Base::load(&repo("testbed/conformance/manifests")).unwrap_or_else(|e| panic!("{e}"))
}

fn scenarios() -> Vec<Scenario> {
    Scenario::load_dir(&repo("testbed/conformance"), &base()).unwrap_or_else(|e| panic!("{e}"))
}

/// The tests of upstream's standard profile (kubernetes-sigs/network-policy-api at 0eec1b0,
/// `conformance/tests/*standard*.go`: feature SupportClusterNetworkPolicy only) and the file
/// porting each. The experimental ones (named ports, node peers) are not ported.
const STANDARD_TESTS: [(&str, &str); 18] = [
    ("CNPAdminTierEgressInlineCIDRPeers", "cnp-admin-egress-inline-cidr.yaml"),
    ("CNPAdminTierEgressSCTP", "cnp-admin-egress-sctp.yaml"),
    ("CNPAdminTierEgressTCP", "cnp-admin-egress-tcp.yaml"),
    ("CNPAdminTierEgressUDP", "cnp-admin-egress-udp.yaml"),
    ("CNPAdminTierGress", "cnp-admin-gress.yaml"),
    ("CNPAdminTierIngressSCTP", "cnp-admin-ingress-sctp.yaml"),
    ("CNPAdminTierIngressTCP", "cnp-admin-ingress-tcp.yaml"),
    ("CNPAdminTierIngressUDP", "cnp-admin-ingress-udp.yaml"),
    ("CNPAdminTierIntegration", "cnp-admin-integration.yaml"),
    ("CNPAdminTierPriorityField", "cnp-admin-priority.yaml"),
    ("CNPBaselineTierEgressInlineCIDRPeers", "cnp-baseline-egress-inline-cidr.yaml"),
    ("CNPBaselineTierEgressSCTP", "cnp-baseline-egress-sctp.yaml"),
    ("CNPBaselineTierEgressTCP", "cnp-baseline-egress-tcp.yaml"),
    ("CNPBaselineTierEgressUDP", "cnp-baseline-egress-udp.yaml"),
    ("CNPBaselineTierGress", "cnp-baseline-gress.yaml"),
    ("CNPBaselineTierIngressSCTP", "cnp-baseline-ingress-sctp.yaml"),
    ("CNPBaselineTierIngressTCP", "cnp-baseline-ingress-tcp.yaml"),
    ("CNPBaselineTierIngressUDP", "cnp-baseline-ingress-udp.yaml"),
];

#[test]
fn the_committed_base_is_what_the_testbed_writes() {
    let out = tempfile::tempdir().expect("tempdir");
    let status = Command::new("bash")
        .arg(repo("testbed/testbed"))
        .args(["manifests"])
        .arg(out.path())
        .args(["--layout", "conformance"])
        .status()
        .expect("run testbed/testbed");
    assert!(status.success(), "testbed manifests --layout conformance: {status}");
    let names = |dir: &Path| -> BTreeSet<String> {
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect()
    };
    let committed = repo("testbed/conformance/manifests");
    assert_eq!(names(&committed), names(out.path()));
    for name in names(out.path()) {
        let a = std::fs::read_to_string(committed.join(&name)).unwrap();
        let b = std::fs::read_to_string(out.path().join(&name)).unwrap();
        assert_eq!(a, b, "testbed/conformance/manifests/{name} differs from what the testbed writes");
    }

    // Upstream's base: five houses, two replicas of a StatefulSet in four of them (the fifth's
    // pods are on the host network upstream), labelled like their house, with the named ports.
    let base = base();
    let model = Objects::of(&base.objects.values().cloned().collect::<Vec<_>>());
    let houses: Vec<(&str, &str)> = model
        .namespaces
        .values()
        .map(|n| (n.name.as_str(), n.labels.get("conformance-house").expect("house label")))
        .collect();
    assert_eq!(houses.len(), 5);
    for (ns, house) in &houses {
        assert_eq!(*ns, format!("network-policy-conformance-{house}"));
    }
    let pods: Vec<String> = model.pods.keys().map(|(ns, name)| format!("{ns}/{name}")).collect();
    assert_eq!(pods.len(), 8, "{pods:?}");
    for ((ns, name), pod) in &model.pods {
        let house = ns.strip_prefix("network-policy-conformance-").unwrap();
        assert_eq!(pod.labels.get("conformance-house"), Some(house), "{ns}/{name}");
        let ports: Vec<(Option<&str>, u16, Protocol)> =
            pod.ports.iter().map(|p| (p.name.as_deref(), p.port, p.protocol)).collect();
        assert_eq!(ports, [(Some("web"), 80, Protocol::Tcp), (Some("dns"), 53, Protocol::Udp)], "{ns}/{name}");
        assert_eq!(pod.ips.len(), 1, "{ns}/{name}");
    }
    for set in ["harry-potter", "draco-malfoy", "cedric-diggory", "luna-lovegood"] {
        assert_eq!(pods.iter().filter(|p| p.contains(&format!("/{set}-"))).count(), 2, "{set}");
    }
}

/// Every standard-profile test is ported, once, and says where from; every step names its
/// subtest; the policies are valid as npagent reads them.
#[test]
fn every_standard_test_is_ported_and_valid() {
    let scenarios = scenarios();
    let mut errors = Vec::new();
    let files: BTreeSet<&str> = scenarios.iter().map(|s| s.file.as_str()).collect();
    let wanted: BTreeSet<&str> = STANDARD_TESTS.iter().map(|(_, f)| *f).collect();
    assert_eq!(files, wanted, "one file per upstream standard test, no other");
    for s in &scenarios {
        let Some(up) = &s.upstream else {
            errors.push(format!("{}: no upstream", s.file));
            continue;
        };
        let test = STANDARD_TESTS.iter().find(|(_, f)| *f == s.file).map(|(t, _)| *t);
        if Some(up.test.as_str()) != test {
            errors.push(format!("{}: ports {}, expected {test:?}", s.file, up.test));
        }
        let go = up.file.strip_prefix("conformance/tests/").unwrap_or("");
        if up.repo != "kubernetes-sigs/network-policy-api" || !go.contains("-standard-") || !go.ends_with(".go") {
            errors.push(format!(
                "{}: upstream {} {} is not a standard test of network-policy-api",
                s.file, up.repo, up.file
            ));
        }
        if up.manifests.is_empty() || up.commit.is_empty() {
            errors.push(format!("{}: upstream names no manifests or no commit", s.file));
        }
        if !s.file.ends_with(&format!("-{}.yaml", s.name)) {
            errors.push(format!("{}: file name does not end in -{}.yaml", s.file, s.name));
        }
        for (i, step) in s.steps.iter().enumerate() {
            let ctx = format!("{} step {}", s.file, i + 1);
            if step.upstream.is_none() {
                errors.push(format!("{ctx}: names no upstream subtest"));
            }
            if step.pokes.iter().all(|p| p.derived) {
                errors.push(format!("{ctx}: no upstream poke"));
            }
            if let Err(e) = policies(&step.policies) {
                errors.push(format!("{ctx}: {e}"));
            }
        }
    }
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}

/// Every poke's expected verdict is the reference evaluator's.
#[test]
fn every_poke_is_what_the_reference_evaluator_says() {
    let base = base();
    let mut wrong = Vec::new();
    let (mut pokes, mut upstream) = (0, 0);
    for s in scenarios() {
        for (i, step) in s.steps.iter().enumerate() {
            let world = World::of(&base, step);
            for poke in &step.pokes {
                pokes += 1;
                upstream += usize::from(!poke.derived);
                let (allowed, why) = world.judge(poke, true);
                if allowed != poke.allow {
                    wrong.push(format!(
                        "{} step {} ({:?}): {poke}: the reference evaluator says {}: {why}",
                        s.file,
                        i + 1,
                        step.title(),
                        if allowed { "allow" } else { "deny" }
                    ));
                }
            }
        }
    }
    assert_eq!(upstream, 284, "upstream's standard tests poke 284 times");
    assert!(wrong.is_empty(), "{} of {pokes} pokes disagree:\n{}", wrong.len(), wrong.join("\n"));
}

/// Against an agent that enforced the NetworkPolicies and ignored the ClusterNetworkPolicies,
/// every ported test has a poke that fails: the end-to-end test cannot pass without them.
#[test]
fn every_test_fails_without_cluster_network_policies() {
    let base = base();
    let mut blind = Vec::new();
    for s in scenarios() {
        let failing: usize = s
            .steps
            .iter()
            .map(|step| {
                let world = World::of(&base, step);
                step.pokes.iter().filter(|p| world.judge(p, false).0 != p.allow).count()
            })
            .sum();
        if failing == 0 {
            blind.push(s.file.clone());
        }
    }
    assert!(blind.is_empty(), "these would pass without ClusterNetworkPolicy: {blind:?}");
}

/// Namespaces and Pods as npagent's model holds them, converted by `model::convert`.
struct Objects {
    namespaces: BTreeMap<String, Namespace>,
    /// By (namespace, name).
    pods: BTreeMap<(String, String), Pod>,
}

impl Objects {
    /// The Namespaces and Pods among `docs`.
    fn of(docs: &[serde_json::Value]) -> Objects {
        let mut strings = Interner::default();
        let mut out = Objects { namespaces: BTreeMap::new(), pods: BTreeMap::new() };
        for d in docs {
            match d["kind"].as_str() {
                Some("Namespace") => {
                    let ns: k8s::Namespace = serde_json::from_value(d.clone()).unwrap();
                    let ns = convert::namespace(&ns, &mut strings).unwrap_or_else(|e| panic!("{e}"));
                    out.namespaces.insert(ns.name.clone(), ns);
                }
                Some("Pod") => {
                    let pod: k8s::Pod = serde_json::from_value(d.clone()).unwrap();
                    let pod = convert::pod(&pod, &mut strings).unwrap_or_else(|e| panic!("{e}"));
                    out.pods.insert((pod.namespace.to_string(), pod.name.to_string()), pod);
                }
                _ => {}
            }
        }
        out
    }
}

/// The ClusterNetworkPolicies and NetworkPolicies among `docs`, converted as npagent does.
fn policies(docs: &[serde_json::Value]) -> Result<(Vec<ClusterPolicy>, Vec<Policy>), String> {
    let mut strings = Interner::default();
    let (mut cluster, mut namespaced) = (Vec::new(), Vec::new());
    for d in docs {
        match d["kind"].as_str() {
            Some("ClusterNetworkPolicy") => {
                let p: k8s::ClusterNetworkPolicy = serde_json::from_value(d.clone()).map_err(|e| e.to_string())?;
                cluster.push(cluster_policy::convert(&p, &mut strings).map_err(|e| e.to_string())?);
            }
            Some("NetworkPolicy") => {
                let p: k8s::NetworkPolicy = serde_json::from_value(d.clone()).map_err(|e| e.to_string())?;
                namespaced.push(convert::policy(&p, &mut strings).map_err(|e| e.to_string())?);
            }
            other => return Err(format!("unexpected kind {other:?}")),
        }
    }
    Ok((cluster, namespaced))
}

/// One step's world: its objects (the base as the step patched it) and policies.
struct World {
    objects: Objects,
    cluster: Vec<ClusterPolicy>,
    network: Vec<Policy>,
}

impl World {
    fn of(base: &Base, step: &scenario::Step) -> World {
        let docs: Vec<_> = base.objects.iter().map(|(k, v)| step.patched.get(k).unwrap_or(v).clone()).collect();
        let objects = Objects::of(&docs);
        let (cluster, network) = policies(&step.policies).unwrap_or_else(|e| panic!("{e}"));
        World { objects, cluster, network }
    }

    fn view(&self, ns: &str, pod: &str) -> PodView<'_> {
        let p = &self.objects.pods[&(ns.to_string(), pod.to_string())];
        PodView { labels: &p.labels, namespace_labels: &self.objects.namespaces[ns].labels, ports: &p.ports }
    }

    fn ip(&self, ns: &str, pod: &str) -> IpAddr {
        self.objects.pods[&(ns.to_string(), pod.to_string())].ips[0]
    }

    /// Whether the poke's connection is allowed (its source's egress and its destination's
    /// ingress both), and why; `cluster`: whether the ClusterNetworkPolicies count.
    fn judge(&self, poke: &Poke, cluster: bool) -> (bool, String) {
        let p = &poke.probe;
        let protocol = match p.port.proto {
            Proto::Tcp => Protocol::Tcp,
            Proto::Udp => Protocol::Udp,
            Proto::Sctp => Protocol::Sctp,
        };
        let (from, to) = (self.view(&p.from.ns, &p.from.pod), self.view(&p.to.ns, &p.to.pod));
        let (from_ip, to_ip) = (self.ip(&p.from.ns, &p.from.pod), self.ip(&p.to.ns, &p.to.pod));
        let none: &[ClusterPolicy] = &[];
        let policies = if cluster { &self.cluster[..] } else { none };
        let mut allowed = true;
        let mut why = Vec::new();
        for (direction, subject, subject_ns, peer, peer_ip) in
            [(Direction::Egress, from, &p.from.ns, to, to_ip), (Direction::Ingress, to, &p.to.ns, from, from_ip)]
        {
            let conn = Connection { direction, subject, peer_ip, peer_pod: Some(peer), protocol, port: p.port.port };
            let say = self.network_policy_say(&conn, subject_ns, peer_ip);
            let (verdict, chain) =
                decide(first_match(policies, Tier::Admin, &conn), say, first_match(policies, Tier::Baseline, &conn));
            allowed &= verdict == Verdict::Allow;
            let chain: Vec<String> = chain
                .iter()
                .map(|s| match s {
                    Step::Cluster(d) => format!(
                        "{:?} {} rule {} ({:?}) {:?}",
                        d.policy.tier,
                        d.policy.name,
                        d.rule,
                        d.rule(direction).name.as_deref().unwrap_or(""),
                        d.action
                    ),
                    Step::NetworkPolicy(say) => format!("NetworkPolicy {say:?}"),
                    Step::Default => "default".into(),
                })
                .collect();
            why.push(format!("{direction:?} {verdict:?} [{}]", chain.join(" -> ")));
        }
        (allowed, why.join("; "))
    }

    /// What the NetworkPolicies say of `conn` (Kubernetes' semantics, for the subject in
    /// namespace `subject_ns`): not isolated when none selects the subject for the
    /// direction, else allowed when a rule of one that does matches the peer and the port.
    fn network_policy_say(&self, conn: &Connection, subject_ns: &str, peer_ip: IpAddr) -> NetworkPolicySay {
        let isolating: Vec<&Policy> = self
            .network
            .iter()
            .filter(|p| p.namespace == subject_ns && p.pod_selector.matches(conn.subject.labels))
            .filter(|p| match conn.direction {
                Direction::Ingress => p.affects_ingress,
                Direction::Egress => p.affects_egress,
            })
            .collect();
        if isolating.is_empty() {
            return NetworkPolicySay::NotIsolated;
        }
        // The destination's named ports: the subject's for ingress, the peer's for egress.
        let destination = match conn.direction {
            Direction::Ingress => Some(conn.subject),
            Direction::Egress => conn.peer_pod,
        };
        let peer_matches = |policy: &Policy, peer: &Peer| match peer {
            Peer::Pods { pod_selector, namespace_selector } => conn.peer_pod.is_some_and(|pod| {
                let ns = match namespace_selector {
                    Some(sel) => sel.matches(pod.namespace_labels),
                    None => pod.namespace_labels.get(k8s::NAMESPACE_NAME_LABEL) == Some(policy.namespace.as_str()),
                };
                ns && pod_selector.as_ref().is_none_or(|s| s.matches(pod.labels))
            }),
            Peer::IpBlock { cidr, except } => cidr.contains(&peer_ip) && !except.iter().any(|e| e.contains(&peer_ip)),
        };
        let port_matches = |spec: &PortSpec| {
            spec.protocol == conn.protocol
                && match &spec.port {
                    None => true,
                    Some(PortRef::Number(n)) => (*n..=spec.end_port.unwrap_or(*n)).contains(&conn.port),
                    Some(PortRef::Name(name)) => destination.is_some_and(|d| {
                        d.ports.iter().any(|c| {
                            c.name.as_deref() == Some(name.as_str())
                                && c.port == conn.port
                                && c.protocol == conn.protocol
                        })
                    }),
                }
        };
        let rule_matches = |policy: &Policy, peers: &[Peer], ports: &[PortSpec]| {
            (peers.is_empty() || peers.iter().any(|peer| peer_matches(policy, peer)))
                && (ports.is_empty() || ports.iter().any(port_matches))
        };
        let allowed = isolating.iter().any(|p| match conn.direction {
            Direction::Ingress => p.ingress.iter().any(|r| rule_matches(p, &r.from, &r.ports)),
            Direction::Egress => p.egress.iter().any(|r| rule_matches(p, &r.to, &r.ports)),
        });
        if allowed {
            NetworkPolicySay::Allowed
        } else {
            NetworkPolicySay::Denied
        }
    }
}
