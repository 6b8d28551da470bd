//! Determinism, conjunction id stability, incremental recompilation equal to a full one, and
//! the diff law diff(apply(diff)) = ∅.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

use npagent::compiler::synthetic::*;
use npagent::compiler::{
    apply, compile, diff, diff_keys, flows_text, is_staged_flow, tables, Change, Compiler, Config, FlowKey, FlowTable,
    FlowValue, IdAllocator,
};
use npagent::model::logging::LOGGING_ANNOTATION;
use npagent::model::{ContainerPort, EgressRule, IngressRule, LabelSelector, Model, Peer, PortRef, PortSpec, Protocol};
use ofp::{Action, FlowStats, Instruction, Oxm};
use proptest::prelude::*;
use std::collections::BTreeSet;

/// What a dump of `flows` would return (for id recovery).
fn as_stats(flows: &FlowTable) -> Vec<FlowStats> {
    flows
        .iter()
        .map(|(k, v)| FlowStats {
            table_id: k.table,
            priority: k.priority,
            idle_timeout: 0,
            hard_timeout: 0,
            flags: 0,
            importance: 0,
            cookie: v.cookie,
            match_: k.match_.clone(),
            stats: Default::default(),
            instructions: v.instructions.clone(),
        })
        .collect()
}

fn conj_ids(v: &FlowValue) -> BTreeSet<u32> {
    v.instructions
        .iter()
        .flat_map(|i| match i {
            Instruction::ApplyActions(a) => a.clone(),
            _ => vec![],
        })
        .filter_map(|a| if let Action::Conjunction { id, .. } = a { Some(id) } else { None })
        .collect()
}

fn small_cluster() -> Model {
    cluster(ClusterSpec { namespaces: 20, pods_per_ns: 10, policies_per_ns: 10, local_pods: 5 })
}

#[test]
fn same_input_same_output_whatever_the_order() {
    let m = small_cluster();
    let a = compile(&m, Config::default(), IdAllocator::new(60), 0);
    let b = compile(&m, Config::default(), IdAllocator::new(60), 0);
    assert_eq!(a.flows(), b.flows());
    assert_eq!(flows_text(a.flows(), &a.port_names()), flows_text(b.flows(), &b.port_names()));
    assert_eq!(a.rules(), b.rules());
    // Same objects inserted in reverse order.
    let mut r = Model::default();
    for (k, v) in m.namespaces.iter().rev() {
        r.namespaces.insert(k.clone(), v.clone());
    }
    for (k, v) in m.pods.iter().rev() {
        r.pods.insert(k.clone(), v.clone());
    }
    for (k, v) in m.policies.iter().rev() {
        r.policies.insert(k.clone(), v.clone());
    }
    for (k, v) in m.ports.iter().rev() {
        r.ports.insert(*k, v.clone());
    }
    assert_eq!(compile(&r, Config::default(), IdAllocator::new(60), 0).flows(), a.flows());
    // Recompiling unchanged inputs changes nothing.
    let mut c = compile(&m, Config::default(), IdAllocator::new(60), 0);
    assert!(c.full(&m, 1).is_empty());
    assert!(c.update(&m, &[Change::Policy(oref("ns0", "np0")), Change::Pod(oref("ns0", "pod3"))], 1).is_empty());
    assert!(!a.flows().is_empty());
}

#[test]
fn the_pods_spread_over_nodes_compile_to_the_same_flows() {
    let m = small_cluster();
    let mut spread = m.clone();
    let nodes = spread_over_nodes(&mut spread, 7);
    assert_eq!(nodes.len(), 7);
    assert_eq!(nodes.keys().cloned().collect::<BTreeSet<_>>(), (0..7).map(node_name).collect::<BTreeSet<_>>());
    let cidrs: BTreeSet<_> = nodes.values().map(|n| n.pod_cidrs.clone()).collect();
    let ips: BTreeSet<_> = nodes.values().map(|n| n.internal_ips.clone()).collect();
    assert_eq!((cidrs.len(), ips.len()), (7, 7), "distinct podCIDRs and InternalIPs");
    assert!(nodes.values().all(|n| n.internal_ips.iter().all(|ip| node_subnet().contains(ip))));
    let local: BTreeSet<_> = spread.ports.values().map(|p| p.pod.clone()).collect();
    assert_eq!(local.len(), 5);
    let mut per_node = std::collections::BTreeMap::<String, usize>::new();
    for (r, p) in &spread.pods {
        let node = p.node.as_deref().expect("every pod is scheduled");
        assert_eq!(node == "node-0", local.contains(r), "{r}: the local pods, and they alone, are on node-0");
        *per_node.entry(node.to_string()).or_default() += 1;
        assert!(nodes.values().all(|n| !n.pod_cidrs[0].contains(&p.ips[0])), "the pods keep their addresses");
    }
    let others: Vec<usize> = per_node.iter().filter(|(n, _)| *n != "node-0").map(|(_, c)| *c).collect();
    assert_eq!(others.len(), 6);
    assert!(others.iter().max().unwrap() - others.iter().min().unwrap() <= 1, "{per_node:?}");
    // Only the pods' node names differ, and the flows do not.
    let c = |m: &Model| compile(m, Config::default(), IdAllocator::new(60), 0);
    assert_eq!(c(&spread).flows(), c(&m).flows());
}

#[test]
fn changing_one_policy_changes_only_its_flows() {
    let mut m = small_cluster();
    let mut c = compile(&m, Config::default(), IdAllocator::new(60), 0);
    let before = c.flows().clone();
    let target = oref("ns0", "np0");
    let old_ids: BTreeSet<u32> = c.rules().rules().values().filter(|r| r.policy == target).map(|r| r.id).collect();
    assert!(!old_ids.is_empty());
    let others: Vec<(u32, npagent::model::ObjectRef)> =
        c.rules().rules().values().filter(|r| r.policy != target).map(|r| (r.id, r.policy.clone())).collect();

    m.policies.get_mut(&target).unwrap().ingress[0].ports = vec![tcp(8443)];
    let touched = c.update(&m, &[Change::Policy(target.clone())], 1);
    assert!(!touched.is_empty());
    let new_ids: BTreeSet<u32> =
        c.rules().rules().values().filter(|r| r.policy == target && !r.deleted).map(|r| r.id).collect();
    assert!(old_ids.is_disjoint(&new_ids), "a changed rule identity gets a new id");
    let mine: BTreeSet<u32> = old_ids.union(&new_ids).copied().collect();
    for k in &touched {
        let ids: BTreeSet<u32> = before.get(k).into_iter().chain(c.flows().get(k)).flat_map(conj_ids).collect();
        let conj = k.match_.fields.iter().find_map(|f| if let Oxm::ConjId(id) = f { Some(*id) } else { None });
        let strip = |v: Option<&FlowValue>| v.map(|v| conj_ids(v).difference(&mine).copied().collect::<BTreeSet<_>>());
        match conj {
            Some(id) => assert!(mine.contains(&id), "touched conj_id flow {id} of another policy"),
            None => {
                assert!(!ids.is_disjoint(&mine), "touched clause flow without the policy's conjunctions: {k:?}");
                assert_eq!(strip(before.get(k)).unwrap_or_default(), strip(c.flows().get(k)).unwrap_or_default());
            }
        }
    }
    // Every other rule keeps its id.
    for (id, policy) in others {
        assert_eq!(c.rules().rule(id).map(|r| &r.policy), Some(&policy));
    }
}

#[test]
fn deleted_ids_stay_resolvable_and_reserved_for_the_grace_period() {
    let mut m = small_cluster();
    let mut c = compile(&m, Config::default(), IdAllocator::new(60), 0);
    let target = oref("ns0", "np0");
    let ids: Vec<u32> = c.rules().rules().values().filter(|r| r.policy == target).map(|r| r.id).collect();
    m.policies.remove(&target);
    c.update(&m, &[Change::Policy(target.clone())], 100);
    for id in &ids {
        let r = c.rules().rule(*id).expect("deleted rule still resolvable");
        assert!(r.deleted && r.policy == target);
        assert!(c.ids().is_reserved(*id));
    }
    // New rules never take the reserved ids.
    for i in 0..20 {
        let p = policy(
            "ns0",
            &format!("new{i}"),
            LabelSelector::everything(),
            vec![IngressRule { from: vec![], ports: vec![tcp(1000 + i)] }],
        );
        m = m.with_policy(p);
        c.update(&m, &[Change::Policy(oref("ns0", &format!("new{i}")))], 101);
    }
    let live: BTreeSet<u32> = c.rules().rules().values().filter(|r| !r.deleted).map(|r| r.id).collect();
    for id in &ids {
        assert!(!live.contains(id));
    }
    c.expire(159);
    assert!(c.rules().rule(ids[0]).is_some());
    c.expire(160);
    assert!(c.rules().rule(ids[0]).is_none());
    assert!(!c.ids().is_reserved(ids[0]));
}

#[test]
fn recovery_from_installed_flows_gives_the_same_ids() {
    let mut m = small_cluster();
    let mut c = compile(&m, Config::default(), IdAllocator::new(60), 0);
    // Churn so ids no longer follow the sorted policy order.
    for name in ["np0", "np1"] {
        m.policies.remove(&oref("ns0", name));
        c.update(&m, &[Change::Policy(oref("ns0", name))], 1);
    }
    let p = policy("ns0", "aaa", LabelSelector::everything(), vec![IngressRule { from: vec![], ports: vec![tcp(7)] }]);
    m = m.with_policy(p);
    c.update(&m, &[Change::Policy(oref("ns0", "aaa"))], 2);

    let recovered = compile(&m, Config::default(), IdAllocator::recover(&as_stats(c.flows()), 60), 3);
    assert_eq!(recovered.flows(), c.flows());
    assert!(diff(recovered.flows(), c.flows()).is_empty());
    let live = |c: &Compiler| {
        c.rules().rules().values().filter(|r| !r.deleted).map(|r| (r.id, r.policy.clone(), r.index)).collect::<Vec<_>>()
    };
    assert_eq!(live(&recovered), live(&c));
    let fresh = compile(&m, Config::default(), IdAllocator::new(60), 3);
    assert_ne!(fresh.flows(), c.flows(), "the churn above must have made ids differ from a fresh compile");
}

/// Mutations of the base model for the incremental-equals-full property.
#[derive(Debug, Clone)]
enum Op {
    Relabel(usize, usize, u8),
    ToggleIp(usize, usize),
    NamedPort(usize, usize, u16),
    AddPolicy(usize, usize),
    RemovePolicy(usize, usize),
    Logging(usize, bool),
    NsLabel(usize, u8),
    TogglePort(usize, usize),
    /// Stages template t in a namespace: as an edit of the enforced `t<t>` or as a new policy.
    Stage(usize, usize, bool),
    Unstage(usize, usize, bool),
    /// Adds (or replaces) ClusterNetworkPolicy template t at priority p.
    AddClusterPolicy(usize, u16),
    RemoveClusterPolicy(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..3usize, 0..4usize, 0..4u8).prop_map(|(n, p, l)| Op::Relabel(n, p, l)),
        (0..3usize, 0..4usize).prop_map(|(n, p)| Op::ToggleIp(n, p)),
        (0..3usize, 0..4usize, 8000..8003u16).prop_map(|(n, p, port)| Op::NamedPort(n, p, port)),
        (0..3usize, 0..9usize).prop_map(|(n, t)| Op::AddPolicy(n, t)),
        (0..3usize, 0..9usize).prop_map(|(n, t)| Op::RemovePolicy(n, t)),
        (0..3usize, any::<bool>()).prop_map(|(n, b)| Op::Logging(n, b)),
        (0..3usize, 0..3u8).prop_map(|(n, l)| Op::NsLabel(n, l)),
        (0..3usize, 0..4usize).prop_map(|(n, p)| Op::TogglePort(n, p)),
        (0..3usize, 0..9usize, any::<bool>()).prop_map(|(n, t, e)| Op::Stage(n, t, e)),
        (0..3usize, 0..9usize, any::<bool>()).prop_map(|(n, t, e)| Op::Unstage(n, t, e)),
        (0..6usize, 0..3u16).prop_map(|(t, p)| Op::AddClusterPolicy(t, p)),
        (0..6usize).prop_map(Op::RemoveClusterPolicy),
    ]
}

/// ClusterNetworkPolicy template `t` at priority `priority`: both tiers, every action, every
/// kind of peer (an unknown one too) and protocol (a named port too).
fn cluster_template(t: usize, priority: u16) -> npagent::model::cluster_policy::ClusterPolicy {
    use serde_json::json;
    let role = |r: &str| json!({"pods": {"namespaceSelector": {}, "podSelector": {"matchLabels": {"role": r}}}});
    let team = |t: &str| json!({"namespaces": {"matchLabels": {"team": t}}});
    let spec = match t {
        0 => json!({"tier": "Admin", "priority": priority, "subject": {"namespaces": {}},
            "ingress": [{"name": "deny-r1", "action": "Deny", "from": [role("r1")],
                         "protocols": [{"tcp": {"destinationPort": {"number": 80}}}]},
                        {"action": "Pass", "from": [team("t1")]}]}),
        1 => json!({"tier": "Admin", "priority": priority,
            "subject": {"pods": {"namespaceSelector": {"matchLabels": {"team": "t0"}}, "podSelector": {"matchLabels": {"role": "r0"}}}},
            "egress": [{"name": "to-http", "action": "Accept", "to": [role("r2")],
                        "protocols": [{"destinationNamedPort": "http"}]},
                       {"action": "Accept", "to": [{"networks": ["10.1.2.0/24"]}]},
                       {"action": "Deny", "to": [{}]}]}),
        2 => {
            json!({"tier": "Baseline", "priority": priority, "subject": {"namespaces": {"matchLabels": {"team": "t1"}}},
            "ingress": [{"action": "Accept", "from": [team("t1")]},
                        {"action": "Deny", "from": [{"namespaces": {}}],
                         "protocols": [{"udp": {"destinationPort": {"range": {"start": 100, "end": 200}}}}]}],
            "egress": [{"action": "Pass", "to": [{"networks": ["10.1.0.0/16"]}]}]})
        }
        3 => json!({"tier": "Baseline", "priority": priority, "subject": {"namespaces": {}},
            "ingress": [{"name": "named", "action": "Deny", "from": [role("r3")],
                         "protocols": [{"destinationNamedPort": "http"}, {"sctp": {"destinationPort": {"number": 9}}}]}]}),
        4 => json!({"tier": "Admin", "priority": priority, "subject": {"namespaces": {"matchLabels": {"team": "t1"}}},
            "ingress": [{"action": "Accept", "from": [{}, role("r0")]}],
            "egress": [{"action": "Accept", "to": [team("t0")]}]}),
        _ => {
            json!({"tier": "Baseline", "priority": priority, "subject": {"pods": {"namespaceSelector": {}, "podSelector": {}}},
            "egress": [{"action": "Deny", "to": [role("r1")], "protocols": [{"destinationNamedPort": "http"}]}]})
        }
    };
    cluster_policy(&format!("cnp{t}"), spec)
}

const NS: [&str; 3] = ["a", "b", "c"];
const PODS: [&str; 4] = ["p0", "p1", "p2", "p3"];

fn template(ns: &str, t: usize) -> npagent::model::Policy {
    let named = PortSpec { protocol: Protocol::Tcp, port: Some(PortRef::Name("http".into())), end_port: None };
    let peer = |l: &str| Peer::Pods { pod_selector: Some(sel(&[("role", l)])), namespace_selector: None };
    let nspeer =
        Peer::Pods { pod_selector: Some(sel(&[("role", "r1")])), namespace_selector: Some(sel(&[("team", "t1")])) };
    let (selector, rules) = match t {
        0 => (sel(&[("role", "r0")]), vec![IngressRule { from: vec![peer("r1")], ports: vec![tcp(80)] }]),
        1 => (LabelSelector::everything(), vec![]),
        2 => (sel(&[("role", "r2")]), vec![IngressRule { from: vec![nspeer], ports: vec![named] }]),
        3 => (LabelSelector::everything(), vec![IngressRule { from: vec![], ports: vec![] }]),
        4 => (
            sel(&[("role", "r1")]),
            vec![
                IngressRule { from: vec![ip_block("10.9.0.0/16", &["10.9.1.0/24"])], ports: vec![] },
                IngressRule {
                    from: vec![peer("r0"), peer("r3")],
                    ports: vec![PortSpec {
                        protocol: Protocol::Udp,
                        port: Some(PortRef::Number(100)),
                        end_port: Some(200),
                    }],
                },
            ],
        ),
        5 => (
            sel(&[("role", "r3")]),
            vec![IngressRule {
                from: vec![Peer::Pods { pod_selector: None, namespace_selector: Some(LabelSelector::everything()) }],
                ports: vec![named],
            }],
        ),
        _ => return egress_template(ns, t, named, peer, nspeer),
    };
    policy(ns, &format!("t{t}"), selector, rules)
}

/// Templates 6..9: egress, alone (6, 8) or with ingress (7).
fn egress_template(
    ns: &str,
    t: usize,
    named: PortSpec,
    peer: impl Fn(&str) -> Peer,
    nspeer: Peer,
) -> npagent::model::Policy {
    let (selector, rules, ingress) = match t {
        6 => (sel(&[("role", "r0")]), vec![EgressRule { to: vec![peer("r1")], ports: vec![tcp(80)] }], false),
        7 => (LabelSelector::everything(), vec![EgressRule { to: vec![nspeer], ports: vec![named] }], true),
        _ => (
            sel(&[("role", "r1")]),
            vec![
                EgressRule { to: vec![], ports: vec![named] },
                EgressRule { to: vec![ip_block("10.1.0.0/16", &["10.1.1.0/24"]), peer("r2")], ports: vec![] },
            ],
            false,
        ),
    };
    npagent::model::Policy {
        affects_ingress: ingress,
        affects_egress: true,
        egress: rules,
        ..policy(ns, &format!("t{t}"), selector, vec![])
    }
}

fn prop_base() -> Model {
    let mut m = Model::default();
    let mut ofport = 0;
    for (i, ns) in NS.iter().enumerate() {
        m = m.with_ns(namespace(ns, &[("team", &format!("t{}", i % 2))], &[]));
        for (j, name) in PODS.iter().enumerate() {
            let mut p = pod(ns, name, &[("role", &format!("r{j}"))], &[&format!("10.1.{i}.{j}")]);
            p.ports = vec![ContainerPort { name: Some("http".into()), port: 8000, protocol: Protocol::Tcp }];
            m = m.with_pod(p);
            if j < 2 {
                ofport += 1;
                m = m.with_port(port_with_ips(ofport, ns, name, ofport as u8, &[&format!("10.1.{i}.{j}")]));
            }
        }
    }
    m
}

fn mutate(m: &mut Model, op: &Op) -> Change {
    match op {
        Op::Relabel(n, p, l) => {
            m.pods.get_mut(&oref(NS[*n], PODS[*p])).unwrap().labels.insert("role", format!("r{l}"));
            Change::Pod(oref(NS[*n], PODS[*p]))
        }
        Op::ToggleIp(n, p) => {
            let pod = m.pods.get_mut(&oref(NS[*n], PODS[*p])).unwrap();
            pod.ips = if pod.ips.is_empty() {
                vec![format!("10.1.{n}.{p}").parse().unwrap(), format!("fd00::{n}:{p}").parse().unwrap()]
            } else {
                vec![]
            };
            Change::Pod(oref(NS[*n], PODS[*p]))
        }
        Op::NamedPort(n, p, port) => {
            m.pods.get_mut(&oref(NS[*n], PODS[*p])).unwrap().ports[0].port = *port;
            Change::Pod(oref(NS[*n], PODS[*p]))
        }
        Op::AddPolicy(n, t) => {
            let p = template(NS[*n], *t);
            m.policies.insert(oref(NS[*n], &p.name), p);
            Change::Policy(oref(NS[*n], &format!("t{t}")))
        }
        Op::RemovePolicy(n, t) => {
            m.policies.remove(&oref(NS[*n], &format!("t{t}")));
            Change::Policy(oref(NS[*n], &format!("t{t}")))
        }
        Op::Logging(n, on) => {
            let a = &mut m.namespaces.get_mut(NS[*n]).unwrap().annotations;
            if *on {
                a.insert(LOGGING_ANNOTATION.into(), "true".into());
            } else {
                a.clear();
            }
            Change::Namespace(NS[*n].into())
        }
        Op::NsLabel(n, l) => {
            m.namespaces.get_mut(NS[*n]).unwrap().labels.insert("team", format!("t{l}"));
            Change::Namespace(NS[*n].into())
        }
        Op::TogglePort(n, p) => {
            let ofport = 100 + (*n * 4 + *p) as u32;
            // A second port of the pod, with the pod's address: for p0 and p1 the same
            // address as their first port, and for some the same MAC as another pod's port.
            if m.ports.remove(&ofport).is_none() {
                let ip = format!("10.1.{n}.{p}");
                m.ports.insert(
                    ofport,
                    port_with_ips(ofport, NS[*n], PODS[*p], (*n * 4 + *p) as u8 + 1, &[&ip, &format!("fd00::{n}:{p}")]),
                );
            }
            Change::Port(ofport)
        }
        Op::Stage(n, t, edit) => {
            let p = staged_template(NS[*n], *t, *edit);
            let r = oref(NS[*n], &p.name);
            m.staged_policies.insert(r.clone(), p);
            Change::StagedPolicy(r)
        }
        Op::Unstage(n, t, edit) => {
            let r = oref(NS[*n], &staged_template(NS[*n], *t, *edit).name);
            m.staged_policies.remove(&r);
            Change::StagedPolicy(r)
        }
        Op::AddClusterPolicy(t, priority) => {
            let p = cluster_template(*t, *priority);
            let name = p.name.clone();
            m.cluster_policies.insert(name.clone(), p);
            Change::ClusterPolicy(name)
        }
        Op::RemoveClusterPolicy(t) => {
            let name = format!("cnp{t}");
            m.cluster_policies.remove(&name);
            Change::ClusterPolicy(name)
        }
    }
}

/// Template `t` as a staged policy: an edit of the enforced `t<t>` (named alike, with one
/// rule fewer), or a new one.
fn staged_template(ns: &str, t: usize, edit: bool) -> npagent::model::Policy {
    let mut p = template(ns, t);
    if edit {
        p.ingress.pop();
        p.egress.pop();
    } else {
        p.name = format!("staged{t}");
    }
    p
}

/// The flows holding two instructions of one kind (OVS refuses them: OFPBIC_DUP_INST).
fn duplicate_instructions(flows: &FlowTable) -> Vec<String> {
    flows
        .iter()
        .filter(|(_, v)| {
            let kinds: Vec<_> = v.instructions.iter().map(std::mem::discriminant).collect();
            kinds.iter().collect::<std::collections::HashSet<_>>().len() != kinds.len()
        })
        .map(|(k, v)| format!("{k:?} {v:?}"))
        .collect()
}

/// The flows that are not the staged view's.
fn enforced(flows: &FlowTable) -> FlowTable {
    flows.iter().filter(|(k, v)| !is_staged_flow(k, v)).map(|(k, v)| (k.clone(), v.clone())).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// After any sequence of changes, the incrementally maintained flows equal a full
    /// compile (with the ids recovered from them), and the touched keys cover every change.
    #[test]
    fn incremental_equals_full(ops in proptest::collection::vec(op(), 1..25)) {
        let mut m = prop_base();
        let mut c = compile(&m, Config::default(), IdAllocator::new(60), 0);
        for (t, op) in ops.iter().enumerate() {
            let before = c.flows().clone();
            let change = mutate(&mut m, op);
            let touched = c.update(&m, &[change], t as u64 + 1);
            prop_assert_eq!(diff_keys(c.flows(), &before, &touched), diff(c.flows(), &before), "{:?}", op);
            let mut full = Compiler::recovering(Config::default(), &as_stats(c.flows()), 60);
            full.full(&m, t as u64 + 1);
            prop_assert_eq!(full.flows(), c.flows(), "after {:?}", op);
        }
    }

    /// Staged policies change no enforced flow: for any model, adding StagedNetworkPolicies
    /// (new ones, and edits of enforced ones by the same name) compiles to the same flows and
    /// rules, apart from the staged view's own flows; and those exist for every local pod a
    /// staged policy selects.
    #[test]
    fn staged_policies_change_no_flow(
        ops in proptest::collection::vec(op(), 0..15),
        policies in proptest::collection::vec((0..3usize, 0..9usize), 0..4),
        logging in proptest::collection::vec(any::<bool>(), 3),
        staged in proptest::collection::vec((0..3usize, 0..9usize, any::<bool>()), 1..6),
    ) {
        let mut m = prop_base();
        for op in &ops {
            mutate(&mut m, op);
        }
        // Enforced policies and logging switches beside the staged ones (a touched pod's
        // logging default drop gets a WouldAllow check).
        for (n, t) in &policies {
            mutate(&mut m, &Op::AddPolicy(*n, *t));
        }
        for (n, on) in logging.iter().enumerate() {
            mutate(&mut m, &Op::Logging(n, *on));
        }
        let without = compile(&m, Config::default(), IdAllocator::new(60), 0);
        for (n, t, edit) in &staged {
            let p = staged_template(NS[*n], *t, *edit);
            m.staged_policies.insert(oref(NS[*n], &p.name), p);
        }
        let with = compile(&m, Config::default(), IdAllocator::new(60), 0);
        prop_assert_eq!(duplicate_instructions(with.flows()), Vec::<String>::new());
        prop_assert_eq!(enforced(with.flows()), enforced(without.flows()));
        prop_assert_eq!(with.rules().rules(), without.rules().rules());
        // A local pod enters the staged tables exactly when a staged policy touches it: one
        // selects it, or one replaces an enforced policy that selects it. The packets of any
        // other pod take no staged table.
        let entries = ["ConnectionSource", "ConnectionDestination"].map(|t| tables::table_id(t).unwrap());
        for port in m.ports.values() {
            let pod = &m.pods[&port.pod];
            let selects = |p: &npagent::model::Policy| {
                p.namespace == *port.pod.namespace && p.pod_selector.matches(&pod.labels)
            };
            let touched = m.staged_policies.iter().any(|(r, p)| selects(p) || m.policies.get(r).is_some_and(selects));
            let entry = with.flows().iter().any(|(k, v)| {
                entries.contains(&k.table) && is_staged_flow(k, v) && v.cookie & 0xff_ffff_ffff == u64::from(port.ofport)
            });
            prop_assert_eq!(touched, entry, "{}: touched by a staged policy, or entering the staged tables, but not both", port.pod);
        }
    }

    #[test]
    fn diff_then_apply_converges(desired in flow_table(), installed in flow_table()) {
        let mods = diff(&desired, &installed);
        let differing = desired.keys().chain(installed.keys()).collect::<BTreeSet<_>>().into_iter()
            .filter(|k| desired.get(*k) != installed.get(*k)).count();
        prop_assert_eq!(mods.len(), differing, "one flow_mod per differing flow, none for equal ones");
        let mut after = installed.clone();
        apply(&mut after, &mods);
        prop_assert!(diff(&desired, &after).is_empty());
        prop_assert_eq!(after, desired);
    }
}

fn flow_table() -> impl Strategy<Value = FlowTable> {
    let key = (0..3u8, prop_oneof![Just(0u16), Just(200)], 0..4u32).prop_map(|(t, p, m)| {
        let fields = match m {
            0 => vec![],
            1 => vec![npagent::compiler::flow::reg1(3)],
            2 => vec![Oxm::EthType(0x0800)],
            _ => vec![Oxm::ConjId(9)],
        };
        FlowKey::new(t, p, fields)
    });
    let value = (1..3u64, 0..3u8).prop_map(|(cookie, i)| FlowValue {
        cookie,
        instructions: match i {
            0 => vec![],
            1 => vec![Instruction::GotoTable(4)],
            _ => vec![Instruction::ApplyActions(vec![Action::Conjunction { id: 1, clause: 0, n_clauses: 2 }])],
        },
    });
    proptest::collection::btree_map(key, value, 0..12)
}

#[test]
fn logging_toggle_modifies_exactly_the_logging_flows() {
    let mut m = small_cluster();
    let mut c = compile(&m, Config::default(), IdAllocator::new(60), 0);
    // ns4 has logging off (every tenth namespace has it on) and a local pod.
    let ns = ns_name(4);
    assert!(m.ports.values().any(|p| *p.pod.namespace == *ns));
    let installed = c.flows().clone();

    // An unrelated annotation: nothing at all.
    m.namespaces.get_mut(&ns).unwrap().annotations.insert("owner".into(), "me".into());
    assert!(c.update(&m, &[Change::Namespace(ns.clone())], 1).is_empty());

    // On: only MODIFY_STRICT, of the namespace's default drops and its rules' conj_id flows.
    m.namespaces.get_mut(&ns).unwrap().annotations.insert(LOGGING_ANNOTATION.into(), "true".into());
    let touched = c.update(&m, &[Change::Namespace(ns.clone())], 2);
    let mods = diff_keys(c.flows(), &installed, &touched);
    assert!(!mods.is_empty());
    let local: BTreeSet<u32> = m.ports.values().filter(|p| *p.pod.namespace == *ns).map(|p| p.ofport).collect();
    let ns_rules: BTreeSet<u32> =
        c.rules().rules().values().filter(|r| *r.policy.namespace == *ns).map(|r| r.id).collect();
    for fm in &mods {
        assert_eq!(fm.command, ofp::FlowModCommand::ModifyStrict, "{fm:?}");
        match fm.match_.fields.as_slice() {
            // The first-packet conj_id flow (ct_state=+new+trk) of a rule.
            [Oxm::CtState(_), Oxm::ConjId(id)] => assert!(ns_rules.contains(id)),
            // reg4, the high half of xreg2: the isolated pod.
            [Oxm::XReg { value, .. }] => {
                assert_eq!(fm.table_id, npagent::compiler::tables::INGRESS_DEFAULT_RULE);
                assert!(local.contains(&((value.value >> 32) as u32)));
            }
            other => panic!("unexpected flow_mod match {other:?}"),
        }
    }
    let drops = mods.iter().filter(|fm| fm.table_id == npagent::compiler::tables::INGRESS_DEFAULT_RULE).count();
    assert_eq!(drops, local.len(), "every isolated local pod of the namespace");
    assert!(mods.len() > drops, "and its rules' conj_id flows");
    // Off again: back to exactly the installed flows.
    m.namespaces.get_mut(&ns).unwrap().annotations.remove(LOGGING_ANNOTATION);
    c.update(&m, &[Change::Namespace(ns.clone())], 3);
    assert_eq!(c.flows(), &installed);
}
