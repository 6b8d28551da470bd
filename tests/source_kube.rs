//! The Kubernetes source against a mock API server (tower-test): list, watch with added,
//! modified and deleted objects, a 410 Gone that forces a relist, and a transient error.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

use std::time::Duration;

use http::{Request, Response, StatusCode};
use kube::client::Body;
use kube::Client;
use npagent::source::kube::watch_kube;
use npagent::source::{Kind, KubeObject, SourceEvent};
use serde_json::{json, Value};
use tokio::sync::mpsc;

fn pod(name: &str, rv: &str, label: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "x", "resourceVersion": rv, "labels": {"pod": label}},
        "spec": {"containers": [{"name": "c", "image": "i"}], "nodeName": "elsewhere"},
        "status": {"podIP": "10.0.0.1"}
    })
}

fn list(kind: &str, api_version: &str, rv: &str, items: Vec<Value>) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": api_version, "kind": format!("{kind}List"),
        "metadata": {"resourceVersion": rv}, "items": items
    }))
    .unwrap_or_default()
}

fn watch_lines(events: &[(&str, Value)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (ty, object) in events {
        out.extend(serde_json::to_vec(&json!({"type": ty, "object": object})).unwrap_or_default());
        out.push(b'\n');
    }
    out
}

fn gone() -> Value {
    json!({"apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Failure",
           "message": "too old resource version: 1 (5)", "reason": "Expired", "code": 410})
}

fn respond(status: StatusCode, body: Vec<u8>) -> Response<Body> {
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Body::from(body))
        .unwrap_or_else(|e| panic!("response: {e}"))
}

fn query_param<'a>(query: &'a str, key: &str) -> Option<&'a str> {
    query.split('&').find_map(|kv| kv.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
}

/// What the mock API server reads of a request.
struct Asked {
    path: String,
    /// A watch (`watch=true`), not a list.
    watch: bool,
    /// Its `resourceVersion` parameter ("" without one).
    rv: String,
}

/// Reads `req`, noting it in `seen` as `path?query`.
fn asked(req: &Request<Body>, seen: &mut Vec<String>) -> Asked {
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or("");
    seen.push(format!("{path}?{query}"));
    let watch = query_param(query, "watch") == Some("true");
    let rv = query_param(query, "resourceVersion").unwrap_or("").to_string();
    Asked { path, watch, rv }
}

fn cluster_policy(name: &str, rv: &str, priority: i64) -> Value {
    json!({
        "apiVersion": "policy.networking.k8s.io/v1alpha2", "kind": "ClusterNetworkPolicy",
        "metadata": {"name": name, "resourceVersion": rv},
        "spec": {"tier": "Admin", "priority": priority, "subject": {"namespaces": {}},
                 "ingress": [{"name": "deny-all", "action": "Deny", "from": [{"namespaces": {}}]}]}
    })
}

fn not_found() -> Response<Body> {
    respond(
        StatusCode::NOT_FOUND,
        serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Failure",
            "message": "the server could not find the requested resource", "reason": "NotFound", "code": 404}))
        .unwrap_or_default(),
    )
}

/// Plays the API server: returns the requests it saw (`path?query`). When `serve_crds`, it
/// serves StagedNetworkPolicies and ClusterNetworkPolicies (a listing, then one watch with a
/// change and a deletion of the ClusterNetworkPolicy), else answers 404 for them (no CRDs).
async fn api_server(
    mut handle: tower_test::mock::Handle<Request<Body>, Response<Body>>,
    serve_crds: bool,
) -> Vec<String> {
    let mut seen = Vec::new();
    let mut hanging = Vec::new(); // watches kept open forever
    let (mut pod_lists, mut policy_lists) = (0, 0);
    while let Some((req, send)) = handle.next_request().await {
        let Asked { path, watch, rv } = asked(&req, &mut seen);
        match (path.as_str(), watch) {
            ("/api/v1/namespaces", false) => send.send_response(respond(
                StatusCode::OK,
                list("Namespace", "v1", "1", vec![json!({"apiVersion": "v1", "kind": "Namespace",
                    "metadata": {"name": "x", "resourceVersion": "1", "labels": {"kubernetes.io/metadata.name": "x"}}})]),
            )),
            ("/api/v1/nodes", false) => send.send_response(respond(StatusCode::OK, list("Node", "v1", "1", vec![]))),
            ("/apis/networking.k8s.io/v1/networkpolicies", false) => {
                policy_lists += 1;
                if policy_lists == 1 {
                    // A transient failure: retried with backoff.
                    send.send_response(respond(StatusCode::INTERNAL_SERVER_ERROR, serde_json::to_vec(&json!({
                        "apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Failure",
                        "message": "etcd is napping", "reason": "InternalError", "code": 500})).unwrap_or_default()));
                } else {
                    send.send_response(respond(StatusCode::OK, list("NetworkPolicy", "networking.k8s.io/v1", "7", vec![json!({
                        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
                        "metadata": {"name": "deny", "namespace": "x", "resourceVersion": "7"},
                        "spec": {"podSelector": {}}})])));
                }
            }
            ("/apis/policy.npagent.io/v1alpha1/stagednetworkpolicies", false) if serve_crds => {
                send.send_response(respond(
                    StatusCode::OK,
                    list("StagedNetworkPolicy", "policy.npagent.io/v1alpha1", "5", vec![json!({
                        "apiVersion": "policy.npagent.io/v1alpha1", "kind": "StagedNetworkPolicy",
                        "metadata": {"name": "deny-staged", "namespace": "x", "resourceVersion": "5"},
                        "spec": {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}})]),
                ))
            }
            ("/apis/policy.networking.k8s.io/v1alpha2/clusternetworkpolicies", false) if serve_crds => send
                .send_response(respond(
                    StatusCode::OK,
                    list("ClusterNetworkPolicy", "policy.networking.k8s.io/v1alpha2", "6", vec![cluster_policy(
                        "deny-all", "6", 10,
                    )]),
                )),
            ("/apis/policy.networking.k8s.io/v1alpha2/clusternetworkpolicies", true) if serve_crds && rv == "6" => {
                send.send_response(respond(
                    StatusCode::OK,
                    watch_lines(&[
                        ("MODIFIED", cluster_policy("deny-all", "7", 20)),
                        ("DELETED", cluster_policy("deny-all", "8", 20)),
                    ]),
                ))
            }
            (
                "/apis/policy.npagent.io/v1alpha1/stagednetworkpolicies"
                | "/apis/policy.networking.k8s.io/v1alpha2/clusternetworkpolicies",
                false,
            ) => send.send_response(not_found()),
            ("/api/v1/pods", false) => {
                pod_lists += 1;
                let body = if pod_lists == 1 {
                    list("Pod", "v1", "1", vec![pod("a", "1", "a"), pod("b", "1", "b")])
                } else {
                    list("Pod", "v1", "10", vec![pod("a", "8", "a2"), pod("c", "2", "c"), pod("d", "9", "d")])
                };
                send.send_response(respond(StatusCode::OK, body));
            }
            ("/api/v1/pods", true) if rv == "1" => send.send_response(respond(
                StatusCode::OK,
                watch_lines(&[
                    ("ADDED", pod("c", "2", "c")),
                    ("MODIFIED", pod("a", "3", "a2")),
                    ("DELETED", pod("b", "4", "b")),
                    ("ERROR", gone()),
                ]),
            )),
            (_, true) => hanging.push(send),
            _ => send.send_response(respond(StatusCode::NOT_FOUND, Vec::new())),
        }
    }
    seen
}

/// Every request in `seen` is for a resource in `WATCHED_RESOURCES`: the ClusterRole that
/// grants those (tests/deploy_manifests.rs) covers every watcher.
fn assert_watched(seen: &[String]) {
    use npagent::source::kube::WATCHED_RESOURCES;
    for request in seen {
        let path = request.split_once('?').map_or(request.as_str(), |(p, _)| p);
        let resource = match path.split('/').collect::<Vec<_>>().as_slice() {
            ["", "api", "v1", resource] => ("", *resource),
            ["", "apis", group, _, resource] => (*group, *resource),
            _ => panic!("unexpected request {request}"),
        };
        assert!(WATCHED_RESOURCES.contains(&resource), "{request}: {resource:?} is not in WATCHED_RESOURCES");
    }
}

fn describe(ev: &SourceEvent) -> String {
    let obj = |o: &KubeObject| {
        let label = match o {
            KubeObject::Pod(p) => p.metadata.labels.as_ref().and_then(|l| l.get("pod")).cloned(),
            _ => None,
        };
        format!("{}{}", o.object_ref(), label.map(|l| format!("({l})")).unwrap_or_default())
    };
    match ev {
        SourceEvent::Reset { kinds, objects } => {
            let names: Vec<String> = objects.iter().map(|o| obj(&o.object)).collect();
            format!("Reset {kinds:?} [{}]", names.join(" "))
        }
        SourceEvent::ResetChunk { kinds, objects } => {
            let names: Vec<String> = objects.iter().map(|o| obj(&o.object)).collect();
            format!("ResetChunk {kinds:?} [{}]", names.join(" "))
        }
        SourceEvent::Applied(o) => format!("Applied {} {}", o.object.kind(), obj(&o.object)),
        SourceEvent::Deleted { kind, object } => format!("Deleted {kind} {object}"),
        SourceEvent::Invalid { origin, error } => format!("Invalid {origin}: {error}"),
    }
}

fn kind_of(ev: &SourceEvent) -> Option<Kind> {
    match ev {
        SourceEvent::Reset { kinds, .. } | SourceEvent::ResetChunk { kinds, .. } => kinds.first().copied(),
        SourceEvent::Applied(o) => Some(o.object.kind()),
        SourceEvent::Deleted { kind, .. } => Some(*kind),
        SourceEvent::Invalid { .. } => None,
    }
}

#[tokio::test]
async fn list_watch_and_resync_after_410_gone() {
    let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let server = tokio::spawn(api_server(handle, true));
    let client = Client::new(service, "default");
    let (tx, mut rx) = mpsc::channel(64);
    let source = tokio::spawn(watch_kube(client, tx));

    let want_pods = [
        "Reset [Pod] [x/a(a) x/b(b)]",
        "Applied Pod x/c(c)",
        "Applied Pod x/a(a2)",
        "Deleted Pod x/b",
        "Reset [Pod] [x/a(a2) x/c(c) x/d(d)]",
    ];
    let mut pods = Vec::new();
    let mut others = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while pods.len() < want_pods.len() || others.len() < 7 {
        let ev = tokio::time::timeout_at(deadline, rx.recv())
            .await
            .unwrap_or_else(|_| panic!("not all events within 20 s: pods {pods:#?} others {others:#?}"))
            .expect("source ended");
        match kind_of(&ev) {
            Some(Kind::Pod) => pods.push(describe(&ev)),
            _ => others.push(describe(&ev)),
        }
    }
    assert_eq!(pods, want_pods);
    others.sort();
    assert_eq!(
        others,
        vec![
            "Applied ClusterNetworkPolicy /deny-all",
            "Deleted ClusterNetworkPolicy /deny-all",
            "Reset [ClusterNetworkPolicy] [/deny-all]",
            "Reset [Namespace] [/x]",
            "Reset [NetworkPolicy] [x/deny]",
            "Reset [Node] []",
            "Reset [StagedNetworkPolicy] [x/deny-staged]"
        ]
    );

    // Nothing more: the last watches hang, no spurious events.
    assert!(tokio::time::timeout(Duration::from_millis(300), rx.recv()).await.is_err());
    drop(rx);
    tokio::time::timeout(Duration::from_secs(5), source).await.expect("source stops").expect("join");

    let seen = tokio::time::timeout(Duration::from_secs(5), server)
        .await
        .expect("server ends with the client")
        .expect("server");
    let pod_requests: Vec<&String> = seen.iter().filter(|r| r.starts_with("/api/v1/pods?")).collect();
    // list, watch from the list's resourceVersion, relist after 410, watch from the new one.
    assert_eq!(pod_requests.len(), 4, "{pod_requests:#?}");
    assert!(!pod_requests[0].contains("watch=true"));
    let rv = |r: &str| r.split_once('?').and_then(|(_, q)| query_param(q, "resourceVersion")).map(str::to_string);
    assert!(pod_requests[1].contains("watch=true"), "{}", pod_requests[1]);
    assert_eq!(rv(pod_requests[1]).as_deref(), Some("1"), "{}", pod_requests[1]);
    assert!(!pod_requests[2].contains("watch=true"));
    assert!(pod_requests[3].contains("watch=true"), "{}", pod_requests[3]);
    assert_eq!(rv(pod_requests[3]).as_deref(), Some("10"), "{}", pod_requests[3]);
    let policy_lists = seen
        .iter()
        .filter(|r| r.starts_with("/apis/networking.k8s.io/v1/networkpolicies?") && !r.contains("watch=true"))
        .count();
    assert_eq!(policy_lists, 2, "the failed list is retried: {seen:#?}");
    assert_watched(&seen);
}

/// Without the StagedNetworkPolicy and ClusterNetworkPolicy CRDs (404), each kind is listed
/// empty, once: the store syncs, nothing is staged, no ClusterNetworkPolicy is held, the other
/// kinds are watched as ever and neither 404 is asked again.
#[tokio::test]
async fn without_the_crds_nothing_is_staged_nor_cluster_wide_and_the_rest_goes_on() {
    let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let server = tokio::spawn(api_server(handle, false));
    let client = Client::new(service, "default");
    let (tx, mut rx) = mpsc::channel(64);
    let source = tokio::spawn(watch_kube(client, tx));
    let mut store = npagent::agent::Store::default();
    let mut optional = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !store.is_synced() {
        let ev = tokio::time::timeout_at(deadline, rx.recv())
            .await
            .unwrap_or_else(|_| panic!("not synced within 20 s; optional kinds' events {optional:#?}"))
            .expect("source ended");
        if matches!(kind_of(&ev), Some(Kind::StagedNetworkPolicy | Kind::ClusterNetworkPolicy)) {
            optional.push(describe(&ev));
        }
        store.apply(ev);
    }
    optional.sort();
    assert_eq!(optional, vec!["Reset [ClusterNetworkPolicy] []", "Reset [StagedNetworkPolicy] []"]);
    assert!(store.model().staged_policies.is_empty());
    assert!(store.model().cluster_policies.is_empty());
    assert_eq!(store.model().policies.len(), 1, "the NetworkPolicy is read all the same");
    // The pods' watch goes on (a relist after its 410), no staged event follows.
    let more = tokio::time::timeout(Duration::from_secs(3), async {
        let mut kinds = Vec::new();
        while let Some(ev) = rx.recv().await {
            kinds.push(kind_of(&ev));
            if kinds.len() >= 4 {
                break;
            }
        }
        kinds
    })
    .await
    .unwrap_or_default();
    assert!(!more.contains(&Some(Kind::StagedNetworkPolicy)), "{more:?}");
    assert!(!more.contains(&Some(Kind::ClusterNetworkPolicy)), "{more:?}");
    drop(rx);
    tokio::time::timeout(Duration::from_secs(5), source).await.expect("source stops").expect("join");
    let seen = tokio::time::timeout(Duration::from_secs(5), server).await.expect("server ends").expect("server");
    let staged_requests = seen.iter().filter(|r| r.contains("stagednetworkpolicies")).count();
    assert_eq!(staged_requests, 1, "{seen:#?}");
    let cluster_requests = seen.iter().filter(|r| r.contains("clusternetworkpolicies")).count();
    assert_eq!(cluster_requests, 1, "{seen:#?}");
    assert_watched(&seen);
}

/// What the API server sends goes through the same store as manifests do: a policy that
/// turns invalid (the API server validates, but npagent checks some things more strictly, and
/// an older server less) keeps its last good version, also across a relist, and one that never
/// was valid fails closed.
#[test]
fn an_invalid_policy_from_the_api_server_keeps_its_last_good_version_or_fails_closed() {
    use kube::runtime::watcher::Event;
    use npagent::agent::Store;
    use npagent::k8s::NetworkPolicy;
    use npagent::model::ObjectRef;
    use npagent::source::kube::EventMapper;

    let np = |name: &str, cidr: &str| -> NetworkPolicy {
        serde_json::from_value(json!({
            "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": name, "namespace": "x", "resourceVersion": "1"},
            "spec": {"podSelector": {"matchLabels": {"pod": "a"}}, "ingress": [{"from": [{"ipBlock": {"cidr": cidr}}]}]}
        }))
        .expect("policy json")
    };
    let r = |name: &str| ObjectRef { namespace: "x".into(), name: name.into() };
    let mut mapper = EventMapper::<NetworkPolicy>::default();
    let mut store = Store::default();
    let mut feed = |store: &mut Store, events: Vec<Event<NetworkPolicy>>| {
        for ev in events {
            if let Some(ev) = mapper.map(ev) {
                store.apply(ev);
            }
        }
    };

    feed(&mut store, vec![Event::Init, Event::InitApply(np("p", "10.10.1.12/32")), Event::InitDone]);
    let good = store.model().policies.get(&r("p")).cloned().expect("valid policy in force");
    feed(&mut store, vec![Event::Apply(np("p", "10.10.1.12/33"))]);
    assert_eq!(store.model().policies.get(&r("p")), Some(&good), "kept after an invalid update");

    // A relist (after a 410 Gone) with the invalid version and a never-valid policy.
    feed(
        &mut store,
        vec![
            Event::Init,
            Event::InitApply(np("p", "10.10.1.12/33")),
            Event::InitApply(np("q", "300.0.0.0/8")),
            Event::InitDone,
        ],
    );
    assert_eq!(store.model().policies.get(&r("p")), Some(&good), "kept across a relist");
    let q = store.model().policies.get(&r("q")).expect("never valid: fails closed");
    assert!(
        q.affects_ingress && q.ingress.is_empty() && q.pod_selector.match_labels.get("pod").is_some_and(|v| v == "a"),
        "{q:?}"
    );

    // Deleting removes the kept version and the isolation.
    feed(&mut store, vec![Event::Delete(np("p", "10.10.1.12/33")), Event::Delete(np("q", "300.0.0.0/8"))]);
    assert!(store.model().policies.is_empty(), "{:?}", store.model().policies);
}

/// Plays the API server for the node's configuration: Node `n1` (listed, then one change
/// by watch) and the ServiceCIDRs (`service_cidrs`: a listing, or `None` for a 404 as from
/// an API server before 1.33). Returns the requests it saw.
async fn node_api_server(
    mut handle: tower_test::mock::Handle<Request<Body>, Response<Body>>,
    service_cidrs: Option<Vec<Value>>,
) -> Vec<String> {
    let node = |rv: &str, internal: &str| {
        json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "n1", "resourceVersion": rv},
            "spec": {"podCIDR": "10.244.1.0/24", "podCIDRs": ["10.244.1.0/24", "fd00:10:244:1::/64"]},
            "status": {"addresses": [
                {"type": "InternalIP", "address": internal},
                {"type": "ExternalIP", "address": "203.0.113.5"},
                {"type": "Hostname", "address": "n1"}
            ]}
        })
    };
    let mut seen = Vec::new();
    let mut hanging = Vec::new();
    while let Some((req, send)) = handle.next_request().await {
        let Asked { path, watch, rv } = asked(&req, &mut seen);
        match (path.as_str(), watch, &service_cidrs) {
            ("/api/v1/nodes", false, _) => {
                send.send_response(respond(StatusCode::OK, list("Node", "v1", "1", vec![node("1", "192.168.1.5")])))
            }
            ("/api/v1/nodes", true, _) if rv == "1" => {
                send.send_response(respond(StatusCode::OK, watch_lines(&[("MODIFIED", node("2", "192.168.1.6"))])))
            }
            ("/apis/networking.k8s.io/v1/servicecidrs", false, Some(items)) => send.send_response(respond(
                StatusCode::OK,
                list("ServiceCIDR", "networking.k8s.io/v1", "3", items.clone()),
            )),
            ("/apis/networking.k8s.io/v1/servicecidrs", false, None) => send.send_response(respond(
                StatusCode::NOT_FOUND,
                serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Failure",
                    "message": "the server could not find the requested resource", "reason": "NotFound", "code": 404}))
                .unwrap_or_default(),
            )),
            (_, true, _) => hanging.push(send),
            _ => send.send_response(respond(StatusCode::NOT_FOUND, Vec::new())),
        }
    }
    seen
}

fn service_cidr(name: &str, cidrs: &[&str]) -> Value {
    json!({"apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR",
           "metadata": {"name": name, "resourceVersion": "3"}, "spec": {"cidrs": cidrs}})
}

/// Runs the node's configuration source against [`node_api_server`] with `flags` until the
/// published configuration satisfies `done`; returns it and the requests the server saw.
async fn node_config_until(
    flags: npagent::model::node::NodeConfig,
    service_cidrs: Option<Vec<Value>>,
    done: impl Fn(&npagent::model::node::NodeConfig) -> bool,
) -> (npagent::model::node::NodeConfig, Vec<String>) {
    let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let server = tokio::spawn(node_api_server(handle, service_cidrs));
    let client = Client::new(service, "default");
    let (tx, mut rx) = tokio::sync::watch::channel(flags.clone());
    // The agent's path: the objects' watchers feed the store, whose Nodes feed the node's
    // configuration beside the ServiceCIDRs' watcher.
    let (events_tx, mut events) = tokio::sync::mpsc::channel(64);
    let objects = tokio::spawn(npagent::source::kube::watch_kube(client.clone(), events_tx));
    let (nodes_tx, nodes_rx) = tokio::sync::watch::channel(None);
    let store = tokio::spawn(async move {
        let mut store = npagent::agent::Store::default();
        while let Some(ev) = events.recv().await {
            store.apply(ev);
            if store.take_nodes_changed() {
                nodes_tx.send_replace(store.nodes().cloned());
            }
        }
    });
    let service_cidrs = npagent::source::node_config::service_cidr_events(client);
    let source =
        tokio::spawn(npagent::source::node_config::follow_node_config("n1".into(), flags, nodes_rx, service_cidrs, tx));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let config = rx.borrow_and_update().clone();
        if done(&config) {
            break;
        }
        tokio::time::timeout_at(deadline, rx.changed())
            .await
            .unwrap_or_else(|_| panic!("not within 20 s; last: {config:#?}"))
            .expect("source ended");
    }
    // Settle: nothing more is asked for, nothing else is published.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let config = rx.borrow().clone();
    drop(rx);
    tokio::time::timeout(Duration::from_secs(5), source).await.expect("source stops").expect("join");
    objects.abort();
    let _ = store.await;
    let seen = tokio::time::timeout(Duration::from_secs(5), server).await.expect("server ends").expect("server");
    assert_watched(&seen);
    (config, seen)
}

fn addrs(list: &[&str]) -> Vec<npagent::model::node::InterfaceAddr> {
    list.iter().map(|a| npagent::model::node::InterfaceAddr::parse(a).expect("address")).collect()
}

fn cidrs(list: &[&str]) -> Vec<npagent::model::Cidr> {
    list.iter().map(|c| npagent::model::cidr::parse_cidr(c).expect("cidr")).collect()
}

#[tokio::test]
async fn the_nodes_pod_cidrs_addresses_and_the_service_cidrs_reach_the_node_config() {
    let flags = npagent::model::node::NodeConfig {
        node_ips: ["10.0.0.9".parse().expect("ip")].into(),
        service_cidrs: cidrs(&["10.100.0.0/16"]),
        ..Default::default()
    };
    let objects = vec![
        service_cidr("kubernetes", &["10.96.0.0/16", "fd00:96::/112"]),
        service_cidr("extra", &["10.97.0.0/16", "not-a-cidr"]),
    ];
    let changed = |c: &npagent::model::node::NodeConfig| c.node_ips.contains(&"192.168.1.6".parse().expect("ip"));
    let (config, seen) = node_config_until(flags, Some(objects), changed).await;
    // The first address of each podCIDR is the gateway's (no --gateway-ip).
    assert_eq!(config.gateway_addrs, addrs(&["10.244.1.1/24", "fd00:10:244:1::1/64"]));
    // The flags' address, the InternalIP as the watch changed it and the ExternalIP; not the
    // Hostname, not the InternalIP it replaced.
    let ips: Vec<String> = config.node_ips.iter().map(ToString::to_string).collect();
    assert_eq!(ips, ["10.0.0.9", "192.168.1.6", "203.0.113.5"]);
    assert_eq!(config.service_cidrs, cidrs(&["10.96.0.0/16", "10.97.0.0/16", "10.100.0.0/16", "fd00:96::/112"]));
    // Every Node is listed (the other nodes' podCIDRs are routes), not only this one.
    let node_requests: Vec<&String> = seen.iter().filter(|r| r.starts_with("/api/v1/nodes?")).collect();
    assert!(!node_requests.is_empty());
    assert!(node_requests.iter().all(|r| !r.contains("fieldSelector")), "{node_requests:#?}");
}

#[tokio::test]
async fn without_servicecidrs_the_flags_alone_give_the_service_ranges() {
    let flags = npagent::model::node::NodeConfig {
        gateway_addrs: addrs(&["10.10.0.254/16"]),
        service_cidrs: cidrs(&["10.96.0.0/12"]),
        ..Default::default()
    };
    let changed = |c: &npagent::model::node::NodeConfig| c.node_ips.contains(&"192.168.1.6".parse().expect("ip"));
    let (config, seen) = node_config_until(flags, None, changed).await;
    // --gateway-ip wins over the podCIDRs; the Service ranges are the flags'.
    assert_eq!(config.gateway_addrs, addrs(&["10.10.0.254/16"]));
    assert_eq!(config.service_cidrs, cidrs(&["10.96.0.0/12"]));
    // The 404 ends the ServiceCIDR watch: asked once, never again.
    let asked = seen.iter().filter(|r| r.starts_with("/apis/networking.k8s.io/v1/servicecidrs")).count();
    assert_eq!(asked, 1, "{seen:#?}");
}
