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

/// Plays the API server: returns the requests it saw (`path?query`).
async fn api_server(mut handle: tower_test::mock::Handle<Request<Body>, Response<Body>>) -> Vec<String> {
    let mut seen = Vec::new();
    let mut hanging = Vec::new(); // watches kept open forever
    let (mut pod_lists, mut policy_lists) = (0, 0);
    while let Some((req, send)) = handle.next_request().await {
        let path = req.uri().path().to_string();
        let query = req.uri().query().unwrap_or("").to_string();
        seen.push(format!("{path}?{query}"));
        let watch = query_param(&query, "watch") == Some("true");
        let rv = query_param(&query, "resourceVersion").unwrap_or("").to_string();
        match (path.as_str(), watch) {
            ("/api/v1/namespaces", false) => send.send_response(respond(
                StatusCode::OK,
                list("Namespace", "v1", "1", vec![json!({"apiVersion": "v1", "kind": "Namespace",
                    "metadata": {"name": "x", "resourceVersion": "1", "labels": {"kubernetes.io/metadata.name": "x"}}})]),
            )),
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
    let server = tokio::spawn(api_server(handle));
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
    while pods.len() < want_pods.len() || others.len() < 2 {
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
    assert_eq!(others, vec!["Reset [Namespace] [/x]", "Reset [NetworkPolicy] [x/deny]"]);

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
}

/// What the API server sends goes through the same store as manifests do: a policy that
/// turns invalid (the API server validates, but npagent checks some things more strictly, and
/// an older server less) keeps its last good version, also across a relist, and one that never
/// was valid fails closed.
#[test]
fn an_invalid_policy_from_the_api_server_keeps_its_last_good_version_or_fails_closed() {
    use kube::runtime::watcher::Event;
    use npagent::agent::Store;
    use npagent::model::ObjectRef;
    use npagent::source::kube::EventMapper;
    use npagent::source::objects::NetworkPolicy;

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
