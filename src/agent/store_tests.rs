//! Tests of the store: listings in chunks, invalid versions, fail-closed policies, address
//! claims and deadlines, ports.

use super::*;
use serde_json::json;

fn sourced(value: serde_json::Value) -> Sourced<KubeObject> {
    let object = match value["kind"].as_str() {
        Some("Namespace") => KubeObject::Namespace(serde_json::from_value(value).unwrap()),
        Some("Pod") => KubeObject::Pod(serde_json::from_value(value).unwrap()),
        Some("Node") => KubeObject::Node(serde_json::from_value(value).unwrap()),
        Some("StagedNetworkPolicy") => KubeObject::StagedNetworkPolicy(serde_json::from_value(value).unwrap()),
        Some("ClusterNetworkPolicy") => KubeObject::ClusterNetworkPolicy(serde_json::from_value(value).unwrap()),
        _ => KubeObject::NetworkPolicy(serde_json::from_value(value).unwrap()),
    };
    Sourced::new("test", object)
}

fn namespace(name: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
}

fn pod(ns: &str, name: &str, ip: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": ns, "name": name},
           "spec": {"containers": []}, "status": {"podIP": ip}})
}

fn policy(ns: &str, name: &str, cidr: &str) -> serde_json::Value {
    json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
           "metadata": {"namespace": ns, "name": name},
           "spec": {"podSelector": {}, "ingress": [{"from": [{"ipBlock": {"cidr": cidr}}]}]}})
}

fn oref(ns: &str, name: &str) -> ObjectRef {
    ObjectRef { namespace: ns.into(), name: name.into() }
}

fn reset(objects: Vec<serde_json::Value>) -> SourceEvent {
    SourceEvent::Reset { kinds: Kind::ALL.to_vec(), objects: objects.into_iter().map(sourced).collect() }
}

fn assert_same_model(a: &Store, b: &Store) {
    assert_eq!(a.model().namespaces, b.model().namespaces);
    assert_eq!(a.model().pods, b.model().pods);
    assert_eq!(a.model().policies, b.model().policies);
    assert_eq!(a.claims, b.claims);
}

fn chunk(objects: Vec<serde_json::Value>) -> SourceEvent {
    SourceEvent::ResetChunk { kinds: Kind::ALL.to_vec(), objects: objects.into_iter().map(sourced).collect() }
}

#[test]
fn a_listing_in_chunks_gives_the_same_model_and_changes_as_one_reset() {
    let first = || vec![namespace("x"), pod("x", "a", "10.0.0.1"), pod("x", "b", "10.0.0.2")];
    let second = || vec![policy("x", "p", "10.0.0.0/8"), namespace("y")];
    let third = || vec![pod("y", "c", "10.0.0.3")];
    let all = || [first(), second(), third()].concat();

    let mut whole = Store::default();
    let whole_changes = whole.apply(reset(all()));
    let mut parts = Store::default();
    let mut part_changes = parts.apply(chunk(first()));
    part_changes.extend(parts.apply(chunk(second())));
    part_changes.extend(parts.apply(reset(third())));
    assert_same_model(&parts, &whole);
    assert_eq!(part_changes, whole_changes);
    assert_eq!(parts.pod_by_ip(&"10.0.0.3".parse().unwrap()), Some(&oref("y", "c")));

    // A relist that lacks pod x/b and policy x/p, in chunks: the same outcome again.
    let relist = || vec![namespace("x"), namespace("y"), pod("x", "a", "10.0.0.1"), pod("y", "c", "10.0.0.3")];
    let whole_changes = whole.apply(reset(relist()));
    let mut part_changes = Vec::new();
    for o in relist() {
        part_changes.extend(parts.apply(chunk(vec![o])));
    }
    part_changes.extend(parts.apply(reset(vec![])));
    assert_same_model(&parts, &whole);
    assert_eq!(part_changes, whole_changes);
    assert_eq!(part_changes, vec![Change::Pod(oref("x", "b")), Change::Policy(oref("x", "p"))]);
}

#[test]
fn stale_objects_go_only_when_the_listing_ends_and_sync_waits_for_it() {
    let mut store = Store::default();
    store.apply(reset(vec![namespace("x"), pod("x", "a", "10.0.0.1"), pod("x", "old", "10.0.0.9")]));
    assert!(store.is_synced());

    let mut fresh = Store::default();
    fresh.apply(chunk(vec![namespace("x"), pod("x", "a", "10.0.0.1")]));
    assert!(!fresh.is_synced(), "a chunk is not a full listing");
    assert_eq!(fresh.model().pods.len(), 1, "chunks are converted as they arrive");

    // A relist in chunks: the pod it lacks stays until the closing reset.
    let changes = store.apply(chunk(vec![namespace("x"), pod("x", "a", "10.0.0.2")]));
    assert_eq!(changes, vec![Change::Pod(oref("x", "a"))]);
    assert!(store.model().pods.contains_key(&oref("x", "old")));
    let changes = store.apply(chunk(vec![]));
    assert!(changes.is_empty(), "{changes:?}");
    assert!(store.model().pods.contains_key(&oref("x", "old")));
    let changes = store.apply(reset(vec![]));
    assert_eq!(changes, vec![Change::Pod(oref("x", "old"))]);
    assert_eq!(store.model().pods.keys().cloned().collect::<Vec<_>>(), vec![oref("x", "a")]);
    assert!(store.model().namespaces.contains_key("x"), "listed in a chunk, so kept");

    // The listing is closed: the next reset stands on its own.
    let changes = store.apply(reset(vec![namespace("x")]));
    assert_eq!(changes, vec![Change::Pod(oref("x", "a"))]);
}

#[test]
fn a_listing_of_some_kinds_leaves_the_others_alone() {
    let mut store = Store::default();
    store.apply(reset(vec![namespace("x"), pod("x", "a", "10.0.0.1"), policy("x", "p", "10.0.0.0/8")]));
    store.apply(SourceEvent::ResetChunk { kinds: vec![Kind::Pod], objects: vec![sourced(pod("x", "b", "10.0.0.2"))] });
    let changes = store.apply(SourceEvent::Reset { kinds: vec![Kind::Pod], objects: vec![] });
    assert_eq!(changes, vec![Change::Pod(oref("x", "a"))]);
    assert!(store.model().namespaces.contains_key("x"));
    assert!(store.model().policies.contains_key(&oref("x", "p")));
}

#[test]
fn not_synced_until_every_kind_is_listed() {
    let mut store = Store::default();
    assert!(!store.is_synced());
    store.apply(SourceEvent::Reset { kinds: vec![Kind::Namespace, Kind::Pod], objects: vec![] });
    assert!(!store.is_synced());
    store.apply(SourceEvent::Reset { kinds: vec![Kind::NetworkPolicy], objects: vec![] });
    assert!(!store.is_synced(), "the staged policies are not listed yet");
    store.apply(SourceEvent::Reset { kinds: vec![Kind::StagedNetworkPolicy], objects: vec![] });
    assert!(!store.is_synced(), "the Nodes are not listed yet");
    store.apply(SourceEvent::Reset { kinds: vec![Kind::Node], objects: vec![] });
    assert!(!store.is_synced(), "the ClusterNetworkPolicies are not listed yet");
    store.apply(SourceEvent::Reset { kinds: vec![Kind::ClusterNetworkPolicy], objects: vec![] });
    assert!(store.is_synced());
}

fn node(name: &str, pod_cidr: &str, internal_ip: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": {"podCIDR": pod_cidr},
           "status": {"addresses": [{"type": "InternalIP", "address": internal_ip}, {"type": "Hostname", "address": name}]}})
}

#[test]
fn nodes_change_no_flow_and_are_known_once_listed() {
    let mut store = Store::default();
    assert_eq!(store.nodes(), None, "not listed yet");
    let changes = store.apply(SourceEvent::Reset {
        kinds: vec![Kind::Node],
        objects: vec![sourced(node("n1", "10.10.0.0/24", "192.168.77.1"))],
    });
    assert_eq!(changes, vec![], "a Node is no flow");
    assert!(store.take_nodes_changed());
    assert!(!store.take_nodes_changed(), "said once");
    let n1 = &store.nodes().expect("listed")["n1"];
    assert_eq!(
        n1.route(true),
        Some((crate::model::cidr::parse_cidr("10.10.0.0/24").expect("cidr"), "192.168.77.1".parse().expect("ip")))
    );
    assert_eq!(n1.route(false), None);

    // A version that does not convert keeps the last good one.
    let changes = store.apply(SourceEvent::Applied(sourced(node("n1", "10.10.0.0/33", "192.168.77.9"))));
    assert_eq!(changes, vec![]);
    assert!(!store.take_nodes_changed());
    assert_eq!(store.nodes().expect("listed")["n1"].internal_ips, ["192.168.77.1".parse::<IpAddr>().expect("ip")]);

    store.apply(SourceEvent::Applied(sourced(node("n2", "10.10.1.0/24", "192.168.77.2"))));
    assert!(store.take_nodes_changed());
    store.apply(SourceEvent::Deleted { kind: Kind::Node, object: oref("", "n1") });
    assert!(store.take_nodes_changed());
    assert_eq!(store.nodes().expect("listed").keys().collect::<Vec<_>>(), ["n2"]);
}

#[test]
fn reset_reports_what_changed_and_removes_what_is_gone() {
    let mut store = Store::default();
    let changes = store.apply(reset(vec![namespace("x"), pod("x", "a", "10.0.0.1"), policy("x", "p", "10.0.0.0/8")]));
    assert_eq!(changes.len(), 3);
    // The same objects again: nothing changed.
    let same = store.apply(reset(vec![namespace("x"), pod("x", "a", "10.0.0.1"), policy("x", "p", "10.0.0.0/8")]));
    assert!(same.is_empty(), "{same:?}");
    // The pod is gone from the next list.
    let changes = store.apply(reset(vec![namespace("x"), policy("x", "p", "10.0.0.0/8")]));
    assert_eq!(changes, vec![Change::Pod(oref("x", "a"))]);
    assert!(store.model().pods.is_empty());
    assert_eq!(store.pod_by_ip(&"10.0.0.1".parse().unwrap()), None);
}

fn applied(value: serde_json::Value) -> SourceEvent {
    SourceEvent::Applied(sourced(value))
}

fn policy_with_selector(ns: &str, name: &str, operator: &str) -> serde_json::Value {
    json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
           "metadata": {"namespace": ns, "name": name},
           "spec": {"podSelector": {"matchExpressions": [{"key": "pod", "operator": operator, "values": ["a"]}]},
                    "ingress": [{"from": [{"podSelector": {"matchLabels": {"pod": "b"}}}]}]}})
}

#[test]
fn an_invalid_policy_leaves_the_valid_ones_alone() {
    let mut store = Store::default();
    store.apply(reset(vec![namespace("x"), policy("x", "good", "10.0.0.0/8"), pod("x", "p", "10.0.0.1")]));
    // Never valid, and its (absent = empty) podSelector reads: it fails closed.
    store.apply(applied(policy("x", "bad", "10.0.0.0/33")));
    let policies: Vec<_> = store.model().policies.keys().cloned().collect();
    assert_eq!(policies, vec![oref("x", "bad"), oref("x", "good")]);
    assert_eq!(store.model().policies[&oref("x", "good")].ingress.len(), 1, "the valid one is untouched");
}

#[test]
fn a_policy_that_turns_invalid_keeps_its_last_good_version() {
    let mut store = Store::default();
    store.apply(reset(vec![namespace("x"), policy("x", "p", "10.10.1.12/32"), policy_with_selector("x", "s", "In")]));
    let good_p = store.model().policies[&oref("x", "p")].clone();
    let good_s = store.model().policies[&oref("x", "s")].clone();

    // An ipBlock /33 and a selector operator Bogus: nothing changes in the model.
    assert!(store.apply(applied(policy("x", "p", "10.10.1.12/33"))).is_empty());
    assert!(store.apply(applied(policy_with_selector("x", "s", "Bogus"))).is_empty());
    assert_eq!(store.model().policies[&oref("x", "p")], good_p);
    assert_eq!(store.model().policies[&oref("x", "s")], good_s);
    let warned = &store.invalid[&(Kind::NetworkPolicy, oref("x", "p"))];
    assert!(
        warned.contains("10.10.1.12/33") && warned.contains("last good version of NetworkPolicy x/p stays in force"),
        "{warned}"
    );
    let warned = &store.invalid[&(Kind::NetworkPolicy, oref("x", "s"))];
    assert!(warned.contains("\"Bogus\"") && warned.contains("x/s stays in force"), "{warned}");
    // Still invalid at a relist (kube mode): still kept, still the same report.
    let changes = store.apply(reset(vec![
        namespace("x"),
        policy("x", "p", "10.10.1.12/33"),
        policy_with_selector("x", "s", "Bogus"),
    ]));
    assert!(changes.is_empty(), "{changes:?}");
    assert_eq!(store.model().policies[&oref("x", "p")], good_p);

    // Fixed: the new version replaces the kept one.
    let changes = store.apply(applied(policy("x", "p", "10.10.1.13/32")));
    assert_eq!(changes, vec![Change::Policy(oref("x", "p"))]);
    assert_ne!(store.model().policies[&oref("x", "p")], good_p);
    assert!(!store.invalid.contains_key(&(Kind::NetworkPolicy, oref("x", "p"))));

    // Deleting the invalid object removes its kept version.
    let changes = store.apply(SourceEvent::Deleted { kind: Kind::NetworkPolicy, object: oref("x", "s") });
    assert_eq!(changes, vec![Change::Policy(oref("x", "s"))]);
    assert!(!store.model().policies.contains_key(&oref("x", "s")));
    assert!(store.invalid.is_empty());
}

#[test]
fn a_policy_that_never_was_valid_fails_closed_when_its_selector_reads() {
    let mut store = Store::default();
    store.apply(reset(vec![namespace("x")]));
    let bad_rule = json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"namespace": "x", "name": "np"},
        "spec": {"podSelector": {"matchLabels": {"pod": "a"}}, "policyTypes": ["Egress"],
                 "ingress": [{"from": [{"ipBlock": {"cidr": "10.10.1.12/33"}}]}]}});
    let changes = store.apply(applied(bad_rule));
    assert_eq!(changes, vec![Change::Policy(oref("x", "np"))]);
    // Isolated in the direction it declares (Egress), not in both.
    let p = &store.model().policies[&oref("x", "np")];
    assert!(!p.affects_ingress && p.affects_egress && p.ingress.is_empty() && p.egress.is_empty(), "{p:?}");
    assert_eq!(p.pod_selector.match_labels.get("pod"), Some("a"));
    let message = &store.invalid[&(Kind::NetworkPolicy, oref("x", "np"))];
    assert!(message.contains("fails closed") && message.contains("for egress (its policyTypes)"), "{message}");

    // Another invalid version whose selector still reads: the isolation follows it.
    store.apply(applied(policy("x", "np", "10.0.0.0/33")));
    assert!(store.model().policies[&oref("x", "np")].pod_selector.match_labels.is_empty());
    // One whose selector does not read: ignored, nothing isolated by it.
    let changes = store.apply(applied(policy_with_selector("x", "np", "Bogus")));
    assert_eq!(changes, vec![Change::Policy(oref("x", "np"))]);
    assert!(store.model().policies.is_empty());
    assert!(store.invalid[&(Kind::NetworkPolicy, oref("x", "np"))].contains("cannot be read: ignored"));

    // Fail closed again, then fixed: the real policy; then an invalid edit keeps that one.
    store.apply(applied(policy("x", "np", "10.0.0.0/33")));
    assert!(store.model().policies[&oref("x", "np")].ingress.is_empty());
    store.apply(applied(policy("x", "np", "10.0.0.0/8")));
    assert_eq!(store.model().policies[&oref("x", "np")].ingress.len(), 1);
    assert!(store.invalid.is_empty() && store.fail_closed.is_empty());
    store.apply(applied(policy("x", "np", "10.0.0.0/33")));
    assert_eq!(store.model().policies[&oref("x", "np")].ingress.len(), 1, "last good, not fail-closed");

    // Deleted while fail-closed: gone.
    store.apply(applied(policy("x", "other", "10.0.0.0/33")));
    assert!(store.fail_closed.contains(&oref("x", "other")));
    let changes = store.apply(SourceEvent::Deleted { kind: Kind::NetworkPolicy, object: oref("x", "other") });
    assert_eq!(changes, vec![Change::Policy(oref("x", "other"))]);
    assert!(store.fail_closed.is_empty());
}

#[test]
fn a_policy_its_source_could_not_read_in_full_is_an_invalid_version() {
    let unreadable = |name: &str| {
        let mut s = sourced(json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"namespace": "x", "name": name}, "spec": {"podSelector": {"matchLabels": {"pod": "a"}}}}));
        s.unreadable = Some("invalid NetworkPolicy: invalid type: integer `5`, expected a sequence".into());
        SourceEvent::Applied(s)
    };
    let mut store = Store::default();
    store.apply(reset(vec![namespace("x"), policy("x", "kept", "10.0.0.0/8")]));
    let kept = store.model().policies[&oref("x", "kept")].clone();
    assert!(store.apply(unreadable("kept")).is_empty());
    assert_eq!(store.model().policies[&oref("x", "kept")], kept);
    assert!(
        store.invalid[&(Kind::NetworkPolicy, oref("x", "kept"))].contains("spec: invalid NetworkPolicy: invalid type")
    );

    assert_eq!(store.apply(unreadable("new")), vec![Change::Policy(oref("x", "new"))]);
    let p = &store.model().policies[&oref("x", "new")];
    assert!(p.affects_ingress && p.ingress.is_empty() && p.pod_selector.match_labels.contains_key("pod"), "{p:?}");
    assert!(store.fail_closed.contains(&oref("x", "new")));
    // A bad name is refused, whatever else.
    assert!(store.apply(unreadable("Bad")).is_empty());
    assert!(!store.model().policies.contains_key(&oref("x", "Bad")));
}

#[test]
fn pods_and_namespaces_that_turn_invalid_keep_their_last_good_version() {
    let mut store = Store::default();
    store.apply(reset(vec![namespace("x"), pod("x", "a", "10.0.0.1")]));
    let mut bad = pod("x", "a", "10.0.0.2");
    bad["metadata"]["labels"] = json!({"-bad": "v"});
    assert!(store.apply(applied(bad)).is_empty());
    assert_eq!(store.model().pods[&oref("x", "a")].ips, vec!["10.0.0.1".parse::<IpAddr>().unwrap()]);
    let mut bad = namespace("x");
    bad["metadata"]["labels"] = json!({"k": "bad value"});
    assert!(store.apply(applied(bad)).is_empty());
    assert!(store.model().namespaces.contains_key("x"));
    // A new invalid pod is left out.
    let mut bad = pod("x", "b", "10.0.0.3");
    bad["status"]["podIP"] = json!("10.0.0.300");
    assert!(store.apply(applied(bad)).is_empty());
    assert!(!store.model().pods.contains_key(&oref("x", "b")));
}

#[test]
fn names_the_api_server_would_refuse_are_refused() {
    let mut store = Store::default();
    store.apply(reset(vec![namespace("x")]));
    for (ns, name) in
        [("x", "a b"), ("x", "a\nx/forged 10.0.0.1"), ("x", "A"), ("x", "-a"), ("bad ns", "a"), ("X", "a")]
    {
        assert!(store.apply(applied(pod(ns, name, "10.0.0.1"))).is_empty(), "pod {ns:?}/{name:?}");
        assert!(store.apply(applied(policy(ns, name, "10.0.0.0/33"))).is_empty(), "policy {ns:?}/{name:?}");
        assert!(store.apply(applied(policy(ns, name, "10.0.0.0/8"))).is_empty(), "policy {ns:?}/{name:?}");
    }
    assert!(store.apply(applied(namespace("x.y"))).is_empty());
    assert!(store.apply(applied(namespace("x\n"))).is_empty());
    assert_eq!(store.model().pods.len() + store.model().policies.len(), 0);
    assert_eq!(store.model().namespaces.keys().collect::<Vec<_>>(), vec!["x"]);
    assert_eq!(store.pod_by_ip(&"10.0.0.1".parse().unwrap()), None);
    assert!(store.invalid.is_empty(), "refused, not held: {:?}", store.invalid);
}

fn pod_in(ns: &str, name: &str, ip: &str, phase: &str, created: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"namespace": ns, "name": name, "creationTimestamp": created},
           "spec": {"containers": []}, "status": {"podIP": ip, "phase": phase}})
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[test]
fn finished_pods_hold_no_ip() {
    let mut store = Store::default();
    store.apply(reset(vec![namespace("y")]));
    for phase in ["Succeeded", "Failed"] {
        store.apply(applied(pod_in("y", "gone", "10.0.0.1", phase, "2026-01-01T00:00:00Z")));
        assert!(store.model().pods[&oref("y", "gone")].ips.is_empty(), "{phase}");
        assert_eq!(store.pod_by_ip(&ip("10.0.0.1")), None, "{phase}");
    }
    // A running pod that finishes loses its address.
    store.apply(applied(pod_in("y", "job", "10.0.0.2", "Running", "2026-01-01T00:00:00Z")));
    assert_eq!(store.pod_by_ip(&ip("10.0.0.2")), Some(&oref("y", "job")));
    let changes = store.apply(applied(pod_in("y", "job", "10.0.0.2", "Succeeded", "2026-01-01T00:00:00Z")));
    assert_eq!(changes, vec![Change::Pod(oref("y", "job"))]);
    assert!(store.model().pods[&oref("y", "job")].ips.is_empty());
    assert_eq!(store.pod_by_ip(&ip("10.0.0.2")), None);
}

#[test]
fn pods_past_their_deletion_deadline_hold_no_ip() {
    let at = |s: u64| SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(s);
    let terminating = |grace: i64| {
        let mut p = pod_in("y", "t", "10.0.0.1", "Running", "1970-01-01T00:00:00Z");
        p["metadata"]["deletionTimestamp"] = json!("1970-01-01T00:01:40Z"); // 100 s
        p["metadata"]["deletionGracePeriodSeconds"] = json!(grace);
        p
    };
    let mut store = Store::default();
    store.apply_at(applied(terminating(30)), at(99));
    assert_eq!(store.pod_by_ip(&ip("10.0.0.1")), Some(&oref("y", "t")), "within the grace period");
    assert!(store.expire_pods(at(99)).is_empty());
    assert_eq!(store.expire_pods(at(100)), vec![Change::Pod(oref("y", "t"))]);
    assert_eq!(store.pod_by_ip(&ip("10.0.0.1")), None);
    assert!(store.model().pods[&oref("y", "t")].ips.is_empty());
    assert!(store.expire_pods(at(200)).is_empty());

    // Any later event ends it too.
    let mut store = Store::default();
    store.apply_at(applied(terminating(30)), at(99));
    let changes = store.apply_at(applied(namespace("y")), at(101));
    assert_eq!(changes, vec![Change::Pod(oref("y", "t")), Change::Namespace("y".into())]);
    assert_eq!(store.pod_by_ip(&ip("10.0.0.1")), None);

    let mut store = Store::default();
    store.apply_at(applied(terminating(30)), at(150));
    assert_eq!(store.pod_by_ip(&ip("10.0.0.1")), None, "past the deadline when it arrives");
    let mut store = Store::default();
    store.apply_at(applied(terminating(0)), at(1));
    assert_eq!(store.pod_by_ip(&ip("10.0.0.1")), None, "forced deletion");
}

#[test]
fn an_ip_two_pods_claim_belongs_to_the_running_then_the_newer_one() {
    let t1 = "2026-01-01T00:00:00Z";
    let t2 = "2026-01-02T00:00:00Z";
    // Whatever the order of events, the same pod wins.
    let objects = || {
        vec![
            pod_in("x", "old", "10.0.0.1", "Running", t1),
            pod_in("x", "new", "10.0.0.1", "Running", t2),
            pod_in("x", "pending", "10.0.0.1", "Pending", "2026-01-03T00:00:00Z"),
            pod_in("x", "done", "10.0.0.1", "Succeeded", "2026-01-04T00:00:00Z"),
        ]
    };
    for order in [[0, 1, 2, 3], [3, 2, 1, 0], [1, 3, 0, 2]] {
        let mut store = Store::default();
        let all = objects();
        for i in order {
            store.apply(applied(all[i].clone()));
        }
        assert_eq!(store.pod_by_ip(&ip("10.0.0.1")), Some(&oref("x", "new")), "{order:?}");
        let holders: Vec<_> =
            store.model().pods.values().filter(|p| !p.ips.is_empty()).map(|p| p.name.to_string()).collect();
        assert_eq!(holders, vec!["new"], "{order:?}");
    }

    let mut store = Store::default();
    store.apply(reset(objects()));
    // The winner goes: the next one takes the address over, and says so.
    let changes = store.apply(SourceEvent::Deleted { kind: Kind::Pod, object: oref("x", "new") });
    assert_eq!(changes, vec![Change::Pod(oref("x", "new")), Change::Pod(oref("x", "old"))]);
    assert_eq!(store.model().pods[&oref("x", "old")].ips, vec![ip("10.0.0.1")]);
    // The old one finishes: the pending one is all that is left.
    let changes = store.apply(applied(pod_in("x", "old", "10.0.0.1", "Failed", t1)));
    assert_eq!(changes, vec![Change::Pod(oref("x", "old")), Change::Pod(oref("x", "pending"))]);
    assert_eq!(store.pod_by_ip(&ip("10.0.0.1")), Some(&oref("x", "pending")));

    // Equal claims: the name order decides.
    let mut store = Store::default();
    store.apply(applied(pod_in("y", "b", "10.0.0.9", "Running", t1)));
    store.apply(applied(pod_in("x", "z", "10.0.0.9", "Running", t1)));
    assert_eq!(store.pod_by_ip(&ip("10.0.0.9")), Some(&oref("x", "z")));
    assert!(store.model().pods[&oref("y", "b")].ips.is_empty());
}

#[test]
fn a_pod_that_loses_one_of_its_addresses_gets_it_when_the_winner_goes() {
    let dual = |name: &str, created: &str, label: &str| {
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"namespace": "x", "name": name, "creationTimestamp": created, "labels": {"l": label}},
               "spec": {"containers": []},
               "status": {"phase": "Running", "podIP": "10.0.0.1", "podIPs": [{"ip": "10.0.0.1"}, {"ip": "fd00::1"}]}})
    };
    let (old, new) = ("2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z");
    let mut store = Store::default();
    store.apply(applied(dual("stale", old, "a")));
    store.apply(applied(pod_in("x", "fresh", "10.0.0.1", "Running", new)));
    let ips = |store: &Store, name: &str| store.model().pods[&oref("x", name)].ips.clone();
    assert_eq!(ips(&store, "stale"), vec![ip("fd00::1")], "it keeps the address nobody else claims");
    assert_eq!(store.pod_by_ip(&ip("10.0.0.1")), Some(&oref("x", "fresh")));

    // An update of the loser keeps its whole claim: the lost address is still claimed.
    store.apply(applied(dual("stale", old, "b")));
    assert_eq!(ips(&store, "stale"), vec![ip("fd00::1")]);
    let changes = store.apply(SourceEvent::Deleted { kind: Kind::Pod, object: oref("x", "fresh") });
    assert_eq!(changes, vec![Change::Pod(oref("x", "fresh")), Change::Pod(oref("x", "stale"))]);
    assert_eq!(ips(&store, "stale"), vec![ip("10.0.0.1"), ip("fd00::1")], "in the pod's order");

    // Gone: neither address is claimed any more.
    store.apply(SourceEvent::Deleted { kind: Kind::Pod, object: oref("x", "stale") });
    assert_eq!((store.pod_by_ip(&ip("10.0.0.1")), store.pod_by_ip(&ip("fd00::1"))), (None, None));
    assert!(store.claims.is_empty());
}

#[test]
fn pod_ips_follow_updates_and_deletes() {
    let mut store = Store::default();
    store.apply(SourceEvent::Applied(sourced(pod("x", "a", "10.0.0.1"))));
    store.apply(SourceEvent::Applied(sourced(pod("x", "a", "10.0.0.2"))));
    assert_eq!(store.pod_by_ip(&"10.0.0.1".parse().unwrap()), None);
    assert_eq!(store.pod_by_ip(&"10.0.0.2".parse().unwrap()), Some(&oref("x", "a")));
    let changes = store.apply(SourceEvent::Deleted { kind: Kind::Pod, object: oref("x", "a") });
    assert_eq!(changes, vec![Change::Pod(oref("x", "a"))]);
    assert_eq!(store.pod_by_ip(&"10.0.0.2".parse().unwrap()), None);
}

#[test]
fn ports_report_added_changed_and_removed_ofports() {
    let mut store = Store::default();
    let port = |ofport: u32, name: &str| LocalPort {
        ofport,
        interface: format!("p{ofport}"),
        pod: oref("x", name),
        ips: vec![],
        mac: None,
    };
    assert_eq!(store.set_ports(&[port(1, "a"), port(2, "b")]), vec![Change::Port(1), Change::Port(2)]);
    assert!(store.set_ports(&[port(1, "a"), port(2, "b")]).is_empty());
    assert_eq!(store.set_ports(&[port(1, "a"), port(3, "c")]), vec![Change::Port(3), Change::Port(2)]);
}

#[test]
fn a_policy_in_a_missing_namespace_is_kept_and_warned_about_once() {
    let mut store = Store::default();
    let changes = store.apply(reset(vec![namespace("x"), policy("ghost", "p", "10.0.0.0/8")]));
    store.check_policy_namespaces(&changes);
    assert!(store.orphans_warned.contains(&oref("ghost", "p")));
    assert!(store.model().policies.contains_key(&oref("ghost", "p")), "still compiled");
    // The namespace appears: the warning is cleared.
    let changes = store.apply(SourceEvent::Applied(sourced(namespace("ghost"))));
    store.check_policy_namespaces(&changes);
    assert!(store.orphans_warned.is_empty());
}

#[test]
fn a_pod_without_a_status_address_holds_its_ports_until_its_status_says_otherwise() {
    let ip = |s: &str| s.parse::<IpAddr>().unwrap();
    let port = |ips: &[&str]| LocalPort {
        ofport: 5,
        interface: "a-123456".into(),
        pod: oref("x", "a"),
        ips: ips.iter().map(|s| ip(s)).collect(),
        mac: None,
    };
    let unaddressed = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": "x", "name": "a"},
                             "spec": {"containers": []}, "status": {"phase": "Pending"}});
    let mut store = Store::default();
    store.apply(reset(vec![namespace("x"), unaddressed.clone()]));
    assert!(store.model().pods[&oref("x", "a")].ips.is_empty());

    // The CNI attaches it: the port's address is the pod's, as a peer and for ownership.
    let changes = store.set_ports(&[port(&["10.0.0.7"])]);
    assert!(changes.contains(&Change::Pod(oref("x", "a"))), "{changes:?}");
    assert_eq!(store.model().pods[&oref("x", "a")].ips, vec![ip("10.0.0.7")]);
    assert_eq!(store.pod_by_ip(&ip("10.0.0.7")), Some(&oref("x", "a")));
    // A relist without a status address keeps it.
    store.apply(SourceEvent::Applied(sourced(unaddressed)));
    assert_eq!(store.model().pods[&oref("x", "a")].ips, vec![ip("10.0.0.7")]);

    // The status names another address: the status wins.
    store.apply(SourceEvent::Applied(sourced(pod("x", "a", "10.0.0.9"))));
    assert_eq!(store.model().pods[&oref("x", "a")].ips, vec![ip("10.0.0.9")]);
    assert!(store.set_ports(&[port(&["10.0.0.8"])]).iter().all(|c| *c != Change::Pod(oref("x", "a"))));
    assert_eq!(store.model().pods[&oref("x", "a")].ips, vec![ip("10.0.0.9")]);

    // Without a status address again, then without its port: no address.
    let mut store = Store::default();
    store.apply(reset(vec![namespace("x"), pod("x", "a", "")]));
    store.set_ports(&[port(&["10.0.0.7"])]);
    assert_eq!(store.model().pods[&oref("x", "a")].ips, vec![ip("10.0.0.7")]);
    store.set_ports(&[]);
    assert!(store.model().pods[&oref("x", "a")].ips.is_empty());
    assert_eq!(store.pod_by_ip(&ip("10.0.0.7")), None);
}

/// `policy` as a StagedNetworkPolicy.
fn staged(ns: &str, name: &str, cidr: &str) -> serde_json::Value {
    let mut v = policy(ns, name, cidr);
    v["apiVersion"] = "policy.npagent.io/v1alpha1".into();
    v["kind"] = "StagedNetworkPolicy".into();
    v
}

#[test]
fn staged_policies_are_kept_apart_and_change_nothing_enforced() {
    let mut store = Store::default();
    store.apply(reset(vec![namespace("x"), policy("x", "p", "10.0.0.0/8")]));
    let enforced = store.model().policies.clone();
    // Staged: a new one and an edit of x/p. Changes of the staged view only, the policies intact.
    let staged_change = |ns: &str, name: &str| vec![Change::StagedPolicy(oref(ns, name))];
    assert_eq!(store.apply(applied(staged("x", "p", "10.1.0.0/16"))), staged_change("x", "p"));
    assert_eq!(store.apply(applied(staged("x", "new", "10.2.0.0/16"))), staged_change("x", "new"));
    assert_eq!(store.model().policies, enforced);
    let staged_names: Vec<String> = store.model().staged_policies.keys().map(ToString::to_string).collect();
    assert_eq!(staged_names, ["x/new", "x/p"]);
    assert_ne!(store.model().staged_policies[&oref("x", "p")], enforced[&oref("x", "p")]);

    // An invalid version keeps the last good one staged, and says so naming the kind.
    assert!(store.apply(applied(staged("x", "p", "10.1.0.0/33"))).is_empty(), "the last good version stays");
    let warned = &store.invalid[&(Kind::StagedNetworkPolicy, oref("x", "p"))];
    assert!(
        warned.starts_with("StagedNetworkPolicy x/p: spec.ingress[0].from[0].ipBlock.cidr")
            && warned.ends_with("the last good version of StagedNetworkPolicy x/p stays staged"),
        "{warned}"
    );
    assert!(store.model().staged_policies.contains_key(&oref("x", "p")));
    // One that never was valid is reported and not staged: it isolates nothing.
    assert!(store.apply(applied(staged("x", "bad", "nonsense"))).is_empty());
    assert!(!store.model().staged_policies.contains_key(&oref("x", "bad")));
    assert!(store.invalid[&(Kind::StagedNetworkPolicy, oref("x", "bad"))].contains("not staged"));
    assert_eq!(store.model().policies, enforced);

    // Deleting one, and a relist without the other, unstage them; still nothing enforced moves.
    let deleted = store.apply(SourceEvent::Deleted { kind: Kind::StagedNetworkPolicy, object: oref("x", "new") });
    assert_eq!(deleted, staged_change("x", "new"));
    let relisted = store.apply(SourceEvent::Reset { kinds: vec![Kind::StagedNetworkPolicy], objects: vec![] });
    assert_eq!(relisted, staged_change("x", "p"));
    assert!(store.model().staged_policies.is_empty());
    assert_eq!(store.model().policies, enforced);
    // Staged policies are not refused NetworkPolicies (the policy change log's business).
    assert!(store.refused_policies().is_empty());
}

#[test]
fn a_pod_scheduled_to_another_node_is_refused_here() {
    let mut store = Store::default();
    let mut there = pod("x", "a", "10.0.0.1");
    there["spec"]["nodeName"] = json!("n2");
    let mut here = pod("x", "b", "10.0.0.2");
    here["spec"]["nodeName"] = json!("n1");
    store.apply(reset(vec![namespace("x"), there, here, pod("x", "c", "10.0.0.3")]));
    // Without --node every known Pod may be attached, as before.
    assert_eq!(store.pod_status("x", "a"), PodStatus::Known);
    store.set_local_node("n1");
    match store.pod_status("x", "a") {
        PodStatus::Refused(why) => assert!(why.contains("\"n2\"") && why.contains("\"n1\""), "{why}"),
        other => panic!("x/a runs on n2, yet {other:?}"),
    }
    assert_eq!(store.pod_status("x", "b"), PodStatus::Known);
    assert_eq!(store.pod_status("x", "c"), PodStatus::Known, "no spec.nodeName: today's behaviour");
}

/// A ClusterNetworkPolicy of tier Admin, `priority`, denying ingress from namespace `from`.
fn cluster_policy(name: &str, priority: i64, from: &str) -> serde_json::Value {
    json!({"apiVersion": "policy.networking.k8s.io/v1alpha2", "kind": "ClusterNetworkPolicy",
           "metadata": {"name": name},
           "spec": {"tier": "Admin", "priority": priority, "subject": {"namespaces": {}},
                    "ingress": [{"name": "deny", "action": "Deny",
                                 "from": [{"namespaces": {"matchLabels": {"kubernetes.io/metadata.name": from}}}]}]}})
}

/// A ClusterNetworkPolicy's reference: cluster-scoped, namespace "".
fn cref(name: &str) -> ObjectRef {
    oref("", name)
}

fn cluster_change(name: &str) -> Vec<Change> {
    vec![Change::ClusterPolicy(name.to_string())]
}

#[test]
fn a_cluster_policy_is_added_by_name_and_an_unchanged_one_changes_nothing() {
    let mut store = Store::default();
    let changes = store.apply(reset(vec![namespace("x"), cluster_policy("deny-y", 10, "y")]));
    assert!(changes.contains(&Change::ClusterPolicy("deny-y".into())), "{changes:?}");
    assert!(store.is_synced());
    let held = &store.model().cluster_policies["deny-y"];
    assert_eq!((held.name.as_str(), held.priority), ("deny-y", 10));
    assert_eq!(store.refs(Kind::ClusterNetworkPolicy).collect::<Vec<_>>(), vec![cref("deny-y")]);

    // The same again, applied or relisted: no change.
    assert!(store.apply(applied(cluster_policy("deny-y", 10, "y"))).is_empty());
    assert!(store.apply(reset(vec![namespace("x"), cluster_policy("deny-y", 10, "y")])).is_empty());
    // A new one, and an edit: each its change.
    assert_eq!(store.apply(applied(cluster_policy("deny-z", 20, "z"))), cluster_change("deny-z"));
    assert_eq!(store.apply(applied(cluster_policy("deny-y", 11, "y"))), cluster_change("deny-y"));
    assert_eq!(store.model().cluster_policies["deny-y"].priority, 11);
    // Nothing else of the model moves.
    assert!(store.model().policies.is_empty() && store.model().staged_policies.is_empty());
}

#[test]
fn a_cluster_policy_that_turns_invalid_keeps_its_last_good_version() {
    let mut store = Store::default();
    store.apply(reset(vec![cluster_policy("deny-y", 10, "y")]));
    let good = store.model().cluster_policies["deny-y"].clone();

    assert!(store.apply(applied(cluster_policy("deny-y", 2000, "y"))).is_empty(), "the last good version stays");
    assert_eq!(store.model().cluster_policies["deny-y"], good);
    let warned = &store.invalid[&(Kind::ClusterNetworkPolicy, cref("deny-y"))];
    assert!(
        warned.starts_with("ClusterNetworkPolicy deny-y: spec.priority: 2000")
            && warned.ends_with("; the last good version of ClusterNetworkPolicy deny-y stays in force"),
        "{warned}"
    );
    // Still invalid at a relist: still kept, no change.
    assert!(store.apply(reset(vec![cluster_policy("deny-y", 2000, "y")])).is_empty());
    assert_eq!(store.model().cluster_policies["deny-y"], good);
    // One its source could not read in full is an invalid version too.
    let mut unreadable = sourced(cluster_policy("deny-y", 10, "y"));
    unreadable.unreadable = Some("invalid ClusterNetworkPolicy: invalid type: string \"high\"".into());
    assert!(store.apply(SourceEvent::Applied(unreadable)).is_empty());
    assert_eq!(store.model().cluster_policies["deny-y"], good);
    assert!(store.invalid[&(Kind::ClusterNetworkPolicy, cref("deny-y"))]
        .starts_with("ClusterNetworkPolicy deny-y: spec: invalid ClusterNetworkPolicy: invalid type"));

    // Fixed: the new version replaces the kept one and the report goes.
    assert_eq!(store.apply(applied(cluster_policy("deny-y", 5, "y"))), cluster_change("deny-y"));
    assert_eq!(store.model().cluster_policies["deny-y"].priority, 5);
    assert!(store.invalid.is_empty());
}

#[test]
fn a_cluster_policy_that_never_was_valid_is_not_enforced() {
    let mut store = Store::default();
    store.apply(reset(vec![namespace("x")]));
    let mut bad = cluster_policy("bad", 10, "y");
    bad["spec"]["tier"] = json!("Top");
    assert!(store.apply(applied(bad)).is_empty());
    assert!(store.model().cluster_policies.is_empty());
    let message = &store.invalid[&(Kind::ClusterNetworkPolicy, cref("bad"))];
    assert!(
        message.starts_with("ClusterNetworkPolicy bad: spec.tier: \"Top\"")
            && message.ends_with("; ClusterNetworkPolicy bad never was valid: not enforced"),
        "{message}"
    );
    // A name the API server would refuse: nothing held, nothing kept under it.
    assert!(store.apply(applied(cluster_policy("Bad_Name", 10, "y"))).is_empty());
    assert!(store.model().cluster_policies.is_empty());
    // Fixed: enforced at last.
    assert_eq!(store.apply(applied(cluster_policy("bad", 10, "y"))), cluster_change("bad"));
    assert!(store.invalid.is_empty());
    // Nor is it a refused NetworkPolicy (the policy change log's business).
    assert!(store.refused_policies().is_empty());
}

#[test]
fn a_cluster_policy_deleted_or_not_relisted_is_gone() {
    let mut store = Store::default();
    store.apply(reset(vec![cluster_policy("a", 1, "y"), cluster_policy("b", 2, "y"), cluster_policy("c", 3, "y")]));
    // Deleted while its latest version is invalid: the kept one goes, and the report.
    store.apply(applied(cluster_policy("a", -1, "y")));
    assert!(store.invalid.contains_key(&(Kind::ClusterNetworkPolicy, cref("a"))));
    let deleted = store.apply(SourceEvent::Deleted { kind: Kind::ClusterNetworkPolicy, object: cref("a") });
    assert_eq!(deleted, cluster_change("a"));
    assert!(store.invalid.is_empty());
    // Deleting what is not held changes nothing.
    assert!(store.apply(SourceEvent::Deleted { kind: Kind::ClusterNetworkPolicy, object: cref("a") }).is_empty());

    // A listing of the kind alone removes what it lacks, leaving the other kinds alone.
    store.apply(applied(namespace("x")));
    let relisted = store.apply(SourceEvent::Reset {
        kinds: vec![Kind::ClusterNetworkPolicy],
        objects: vec![sourced(cluster_policy("c", 3, "y"))],
    });
    assert_eq!(relisted, cluster_change("b"));
    assert_eq!(store.model().cluster_policies.keys().collect::<Vec<_>>(), ["c"]);
    assert!(store.model().namespaces.contains_key("x"));
    // An empty listing (the CRD is not installed) removes them all.
    let emptied = store.apply(SourceEvent::Reset { kinds: vec![Kind::ClusterNetworkPolicy], objects: vec![] });
    assert_eq!(emptied, cluster_change("c"));
    assert!(store.model().cluster_policies.is_empty());
}
