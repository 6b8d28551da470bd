//! The manifests directory source: reading, bad input, and live watching.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use npagent::model::ObjectRef;
use npagent::source::manifests::{load_dir, watch_manifests, Invalid, MAX_FILE_BYTES};
use npagent::source::{Kind, KubeObject, SourceEvent, Sourced};
use tokio::sync::mpsc;

#[path = "support/yaml.rs"]
mod yaml;

const NS_X: &str = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: x\n  labels: {ns: x}\n";

fn pod(name: &str, label: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: x\n  labels: {{pod: {label}}}\n\
         spec:\n  containers:\n  - name: c\n    image: i\n    ports: [{{name: http, containerPort: 80}}]\n\
         status:\n  podIP: 10.0.0.1\n"
    )
}

fn policy(name: &str) -> String {
    format!(
        "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata:\n  name: {name}\n  namespace: x\n\
         spec:\n  podSelector: {{}}\n  ingress:\n  - ports: [{{port: http}}]\n"
    )
}

fn write(dir: &Path, name: &str, text: &str) {
    let path = dir.join(name);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("mkdir");
    }
    // Atomic replace, as operators are told to do: never a half-written file.
    let tmp = dir.join(format!(".{}.tmp", name.replace('/', "_")));
    std::fs::write(&tmp, text).expect("write");
    std::fs::rename(&tmp, &path).expect("rename");
}

fn keys(objects: &[Sourced<KubeObject>]) -> Vec<String> {
    objects.iter().map(|o| format!("{} {}", o.object.kind(), o.object.object_ref())).collect()
}

fn find<'a>(invalid: &'a [Invalid], origin_part: &str) -> &'a Invalid {
    invalid
        .iter()
        .find(|i| i.origin.contains(origin_part))
        .unwrap_or_else(|| panic!("no problem reported for {origin_part}: {invalid:#?}"))
}

#[test]
fn reads_yaml_json_lists_and_subdirectories() {
    let d = tempfile::tempdir().expect("tempdir");
    write(d.path(), "a.yaml", &format!("{NS_X}---\n{}", pod("a", "a")));
    let json = r#"{"apiVersion":"v1","kind":"List","items":[
        {"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy",
         "metadata":{"name":"j","namespace":"x"},"spec":{"podSelector":{}}}]}"#;
    write(d.path(), "b.json", json);
    write(d.path(), "sub/deeper/c.yml", &pod("c", "c"));
    write(d.path(), ".hidden/d.yaml", &pod("hidden", "h"));
    write(d.path(), "notes.txt", "not a manifest");

    let (objects, invalid) = load_dir(d.path());
    assert!(invalid.is_empty(), "{invalid:#?}");
    assert_eq!(keys(&objects), vec!["Namespace /x", "Pod x/a", "Pod x/c", "NetworkPolicy x/j"]);
    let c = objects.iter().find(|o| o.object.object_ref().name.as_str() == "c").expect("pod c");
    assert!(c.origin.ends_with("sub/deeper/c.yml#1 Pod x/c"), "{}", c.origin);
}

#[test]
fn bad_input_is_reported_and_the_valid_rest_is_kept() {
    let d = tempfile::tempdir().expect("tempdir");
    // Unknown kind and wrong apiVersion beside a valid object in one file.
    let mixed = format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web, namespace: x}}\n---\n\
         apiVersion: extensions/v1beta1\nkind: NetworkPolicy\nmetadata: {{name: old, namespace: x}}\n---\n{}",
        policy("valid")
    );
    write(d.path(), "mixed.yaml", &mixed);
    write(d.path(), "broken.yaml", &format!("{}---\nspec: [unclosed\n", pod("lost", "l")));
    write(d.path(), "broken.json", "{\"apiVersion\": \"v1\", \"kind\": \"Pod\",,}");
    write(d.path(), "ok.yaml", &pod("a", "a"));

    let (objects, invalid) = load_dir(d.path());
    assert_eq!(keys(&objects), vec!["Pod x/a", "NetworkPolicy x/valid"]);

    let deployment = find(&invalid, "mixed.yaml#1 Deployment");
    assert!(deployment.error.contains("Deployment"), "{deployment:?}");
    let old = find(&invalid, "mixed.yaml#2 NetworkPolicy x/old");
    assert!(old.error.contains("networking.k8s.io/v1"), "{old:?}");
    let yaml = find(&invalid, "broken.yaml");
    assert!(yaml.error.contains("malformed YAML") && yaml.error.contains("line 15"), "{yaml:?}");
    let json = find(&invalid, "broken.json");
    assert!(json.error.contains("malformed JSON") && json.error.contains("line 1"), "{json:?}");
    assert_eq!(invalid.len(), 4, "{invalid:#?}");
}

#[test]
fn duplicates_last_in_path_order_wins_and_are_reported() {
    let d = tempfile::tempdir().expect("tempdir");
    write(d.path(), "1.yaml", &pod("a", "first"));
    write(d.path(), "2.yaml", &pod("a", "second"));
    let (objects, invalid) = load_dir(d.path());
    assert_eq!(objects.len(), 1);
    let Some(KubeObject::Pod(p)) = objects.first().map(|o| &o.object) else { panic!("no pod") };
    let label = p.metadata.labels.as_ref().and_then(|l| l.get("pod")).cloned();
    assert_eq!(label.as_deref(), Some("second"));
    let dup = find(&invalid, "1.yaml#1 Pod x/a");
    assert!(dup.error.contains("2.yaml"), "{dup:?}");
}

/// A consumer following the SourceEvent contract: a listing's chunks are collected and take
/// effect, with its closing Reset, all at once.
#[derive(Default)]
struct Store(BTreeMap<(Kind, ObjectRef), KubeObject>, Vec<KubeObject>);

impl Store {
    fn apply(&mut self, ev: &SourceEvent) {
        match ev {
            SourceEvent::ResetChunk { objects, .. } => {
                self.1.extend(objects.iter().map(|o| o.object.clone()));
            }
            SourceEvent::Reset { kinds, objects } => {
                self.0.retain(|(k, _), _| !kinds.contains(k));
                for o in std::mem::take(&mut self.1).into_iter().chain(objects.iter().map(|o| o.object.clone())) {
                    self.0.insert(o.key(), o);
                }
            }
            SourceEvent::Applied(o) => {
                self.0.insert(o.object.key(), o.object.clone());
            }
            SourceEvent::Deleted { kind, object } => {
                self.0.remove(&(*kind, object.clone()));
            }
            SourceEvent::Invalid { .. } => {}
        }
    }

    fn keys(&self) -> Vec<String> {
        self.0.keys().map(|(k, r)| format!("{k} {r}")).collect()
    }
}

struct Watch {
    rx: mpsc::Receiver<SourceEvent>,
    store: Store,
    task: tokio::task::JoinHandle<()>,
}

impl Watch {
    fn start(dir: &Path) -> Watch {
        let (tx, rx) = mpsc::channel(64);
        let task = tokio::spawn(watch_manifests(dir.to_path_buf(), tx));
        Watch { rx, store: Store::default(), task }
    }

    /// Receives events until `done` holds for one (applying them all); fails after 2 s.
    async fn until(&mut self, what: &str, done: impl Fn(&SourceEvent, &Store) -> bool) -> Vec<SourceEvent> {
        let mut seen = Vec::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
        loop {
            let ev = tokio::time::timeout_at(deadline, self.rx.recv())
                .await
                .unwrap_or_else(|_| panic!("{what}: not within 2 s; got {seen:#?}"))
                .expect("watcher ended");
            self.store.apply(&ev);
            let stop = done(&ev, &self.store);
            seen.push(ev);
            if stop {
                return seen;
            }
        }
    }
}

#[tokio::test]
async fn watching_follows_every_change() {
    let d = tempfile::tempdir().expect("tempdir");
    let dir = d.path();
    write(dir, "ns.yaml", NS_X);
    write(dir, "pods.yaml", &format!("{}---\n{}", pod("a", "a"), pod("b", "b")));
    let mut w = Watch::start(dir);

    let first = w.until("initial Reset", |ev, _| matches!(ev, SourceEvent::Reset { .. })).await;
    assert_eq!(first.len(), 1, "Reset comes first: {first:#?}");
    assert_eq!(w.store.keys(), vec!["Namespace /x", "Pod x/a", "Pod x/b"]);

    // A new file.
    write(
        dir,
        "np.json",
        &serde_json::to_string(&yaml::from_str::<serde_json::Value>(&policy("p")).expect("yaml")).expect("json"),
    );
    w.until("new policy", |ev, _| matches!(ev, SourceEvent::Applied(o) if o.object.kind() == Kind::NetworkPolicy))
        .await;

    // A modified object: only that one is re-applied.
    write(dir, "pods.yaml", &format!("{}---\n{}", pod("a", "relabelled"), pod("b", "b")));
    let evs = w.until("relabel", |ev, _| matches!(ev, SourceEvent::Applied(_))).await;
    let SourceEvent::Applied(o) = evs.last().expect("event") else { unreachable!() };
    assert_eq!(&*o.object.object_ref().name, "a");

    // A malformed edit: reported, the file's objects stay.
    write(dir, "pods.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: [\n");
    let evs = w.until("malformed", |ev, _| matches!(ev, SourceEvent::Invalid { .. })).await;
    assert!(evs.iter().all(|e| matches!(e, SourceEvent::Invalid { .. })), "{evs:#?}");
    let SourceEvent::Invalid { origin, error } = evs.last().expect("event") else { unreachable!() };
    assert!(origin.ends_with("pods.yaml") && error.contains("keeping its last good 2"), "{origin}: {error}");

    // One object becomes invalid (a typo), one is removed from the file: the typo'd one keeps
    // its last good version, the removed one is deleted.
    write(dir, "pods.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: a, namespace: x}\nspec: {containers: 7}\n");
    w.until("pod b deleted", |ev, _| matches!(ev, SourceEvent::Deleted { object, .. } if &*object.name == "b")).await;
    assert_eq!(w.store.keys(), vec!["Namespace /x", "Pod x/a", "NetworkPolicy x/p"]);

    // An unknown kind in a new file: reported, nothing else changes.
    write(dir, "svc.yaml", "apiVersion: v1\nkind: Service\nmetadata: {name: s, namespace: x}\n");
    w.until(
        "unknown kind",
        |ev, _| matches!(ev, SourceEvent::Invalid { origin, .. } if origin.contains("svc.yaml#1 Service x/s")),
    )
    .await;

    // Deleting files removes their objects.
    std::fs::remove_file(dir.join("pods.yaml")).expect("rm");
    std::fs::remove_file(dir.join("np.json")).expect("rm");
    w.until("files deleted", |_, s| s.keys() == vec!["Namespace /x"]).await;

    // A new subdirectory.
    write(dir, "more/p.yaml", &pod("c", "c"));
    w.until("subdirectory", |_, s| s.keys().contains(&"Pod x/c".to_string())).await;

    // In the end the consumer holds exactly what a fresh read of the directory gives.
    let (objects, _) = load_dir(dir);
    let want: Vec<String> = keys(&objects);
    assert_eq!(w.store.keys().len(), want.len());
    for o in &objects {
        assert_eq!(w.store.0.get(&o.object.key()), Some(&o.object));
    }
    drop(w.rx);
    tokio::time::timeout(Duration::from_secs(2), w.task)
        .await
        .expect("watcher stops when the receiver is gone")
        .expect("join");
}

#[tokio::test]
async fn a_directory_created_later_is_picked_up() {
    let d = tempfile::tempdir().expect("tempdir");
    let dir = d.path().join("later");
    let mut w = Watch::start(&dir);
    // The missing directory is reported within the first listing, which is empty.
    let first = w.until("listing", |ev, _| matches!(ev, SourceEvent::Reset { .. })).await;
    assert!(matches!(first.last(), Some(SourceEvent::Reset { objects, .. }) if objects.is_empty()), "{first:#?}");
    assert!(first.iter().any(|e| matches!(e, SourceEvent::Invalid { .. })), "{first:#?}");
    write(&dir, "ns.yaml", NS_X);
    w.until("namespace", |_, s| s.keys() == vec!["Namespace /x"]).await;
}

#[tokio::test]
async fn a_rescan_without_content_changes_deletes_nothing() {
    let d = tempfile::tempdir().expect("tempdir");
    let dir = d.path();
    write(dir, "ns.yaml", NS_X);
    write(dir, "pods.yaml", &pod("a", "a"));
    let mut w = Watch::start(dir);
    w.until("initial Reset", |ev, _| matches!(ev, SourceEvent::Reset { .. })).await;

    // The same bytes written again: the file is rescanned (new mtime) but nothing changed.
    write(dir, "pods.yaml", &pod("a", "a"));
    tokio::time::sleep(Duration::from_millis(600)).await;
    // Then a real change: the events up to it must not delete anything.
    write(dir, "more.yaml", &pod("b", "b"));
    let evs = w
        .until("pod b", |ev, _| matches!(ev, SourceEvent::Applied(o) if o.object.object_ref().name.as_str() == "b"))
        .await;
    assert!(!evs.iter().any(|e| matches!(e, SourceEvent::Deleted { .. })), "{evs:#?}");
    assert_eq!(w.store.keys(), vec!["Namespace /x", "Pod x/a", "Pod x/b"]);
}

/// A billion-laughs Pod of about 100 KB: a 90 KB string, nine levels of ten aliases.
fn billion_laughs() -> String {
    npagent::source::manifests::parse::billion_laughs(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: lol, namespace: x}\nspec:\n",
        "  ",
    )
}

/// A valid pod manifest padded with a comment to one byte over the size limit.
fn oversized(name: &str) -> String {
    let head = pod(name, name);
    let limit = usize::try_from(MAX_FILE_BYTES).expect("limit fits");
    format!("{head}#{}\n", "x".repeat(limit - head.len()))
}

#[test]
fn oversized_and_alias_bomb_files_are_refused_by_name_and_the_rest_is_read() {
    let d = tempfile::tempdir().expect("tempdir");
    write(d.path(), "a.yaml", &format!("{NS_X}---\n{}", pod("a", "a")));
    write(d.path(), "big.yaml", &oversized("big"));
    write(d.path(), "bomb.yaml", &billion_laughs());
    write(d.path(), "z.yaml", &policy("p"));

    let started = std::time::Instant::now();
    let (objects, invalid) = load_dir(d.path());
    assert!(started.elapsed() < Duration::from_secs(10), "took {:?}", started.elapsed());
    assert_eq!(keys(&objects), vec!["Namespace /x", "Pod x/a", "NetworkPolicy x/p"]);
    assert_eq!(invalid.len(), 2, "{invalid:#?}");
    let big = find(&invalid, "big.yaml");
    assert!(big.origin.ends_with("big.yaml") && big.error.contains("larger than 16 MiB"), "{big:?}");
    let bomb = find(&invalid, "bomb.yaml");
    assert!(bomb.origin.ends_with("bomb.yaml") && bomb.error.contains("aliases"), "{bomb:?}");
}

#[tokio::test]
async fn a_file_turned_oversized_or_alias_bomb_keeps_its_last_good_objects() {
    let d = tempfile::tempdir().expect("tempdir");
    let dir = d.path();
    write(dir, "ns.yaml", NS_X);
    write(dir, "pods.yaml", &pod("b", "b"));
    let mut w = Watch::start(dir);
    w.until("initial Reset", |ev, _| matches!(ev, SourceEvent::Reset { .. })).await;

    for (what, text, says) in
        [("oversized", oversized("b"), "larger than 16 MiB"), ("alias bomb", billion_laughs(), "aliases")]
    {
        write(dir, "pods.yaml", &text);
        let evs = w
            .until(what, |ev, _| matches!(ev, SourceEvent::Invalid { origin, .. } if origin.ends_with("pods.yaml")))
            .await;
        assert!(evs.iter().all(|e| matches!(e, SourceEvent::Invalid { .. })), "{what}: {evs:#?}");
        let Some(SourceEvent::Invalid { error, .. }) = evs.last() else { unreachable!() };
        assert!(error.contains(says) && error.contains("keeping its last good 1"), "{what}: {error}");
        assert_eq!(w.store.keys(), vec!["Namespace /x", "Pod x/b"], "{what}");
    }
    // Fixed: read again.
    write(dir, "pods.yaml", &pod("c", "c"));
    w.until("fixed", |_, s| s.keys() == vec!["Namespace /x", "Pod x/c"]).await;
}

/// A small cluster as JSON values: a Namespace, two Pods (ports, addresses), two policies.
fn cluster_values() -> Vec<serde_json::Value> {
    use serde_json::json;
    let pod = |name: &str, ip: &str| {
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "x", "labels": {"app": name}, "managedFields": [{"manager": "m"}]},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i", "ports": [{"name": "http", "containerPort": 80}]}]},
            "status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}]}})
    };
    vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x", "labels": {"team": "a"}}, "spec": {"finalizers": ["kubernetes"]}}),
        pod("a", "10.0.0.1"),
        pod("b", "10.0.0.2"),
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "p", "namespace": "x"},
            "spec": {"podSelector": {"matchLabels": {"app": "a"}}, "policyTypes": ["Ingress", "Egress"],
                "ingress": [{"from": [{"podSelector": {"matchLabels": {"app": "b"}}}], "ports": [{"port": "http"}]}],
                "egress": [{"to": [{"ipBlock": {"cidr": "10.1.0.0/16", "except": ["10.1.2.0/24"]}}]}]}}),
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "q", "namespace": "x"},
            "spec": {"podSelector": {}}}),
    ]
}

fn pretty(v: &serde_json::Value) -> String {
    serde_json::to_string_pretty(v).expect("json")
}

#[test]
fn every_form_of_a_directory_gives_the_same_objects() {
    let docs = cluster_values();
    let of_kind =
        |kind: &str| -> Vec<serde_json::Value> { docs.iter().filter(|d| d["kind"] == kind).cloned().collect() };
    // The API server's typed lists: items without kind and apiVersion.
    let typed_list = |kind: &str, api_version: &str| {
        let items: Vec<serde_json::Value> = of_kind(kind)
            .into_iter()
            .map(|mut d| {
                let fields = d.as_object_mut().expect("object");
                fields.remove("kind");
                fields.remove("apiVersion");
                d
            })
            .collect();
        pretty(&serde_json::json!({"kind": format!("{kind}List"), "apiVersion": api_version,
            "metadata": {"resourceVersion": "7"}, "items": items}))
    };
    let forms: Vec<(&str, Vec<(&str, String)>)> = vec![
        // As `kubectl get -o json` writes them: `kind` after `items`.
        (
            "kubectl List",
            vec![(
                "x.json",
                pretty(&serde_json::json!({"apiVersion": "v1", "items": docs, "kind": "List",
                    "metadata": {"resourceVersion": ""}})),
            )],
        ),
        (
            "typed lists",
            vec![
                ("1-ns.json", typed_list("Namespace", "v1")),
                ("2-pods.json", typed_list("Pod", "v1")),
                ("3-np.json", typed_list("NetworkPolicy", "networking.k8s.io/v1")),
            ],
        ),
        ("concatenated JSON", vec![("x.json", docs.iter().map(|d| format!("{d}\n")).collect())]),
        ("JSON documents in YAML", vec![("x.yaml", docs.iter().map(|d| format!("---\n{}\n", pretty(d))).collect())]),
        (
            "block YAML",
            vec![(
                "x.yaml",
                docs.iter().map(|d| format!("---\n{}", serde_saphyr::to_string(d).expect("yaml"))).collect(),
            )],
        ),
    ];
    let mut first: Option<Vec<KubeObject>> = None;
    for (form, files) in forms {
        let d = tempfile::tempdir().expect("tempdir");
        for (name, text) in &files {
            write(d.path(), name, text);
        }
        let (objects, invalid) = load_dir(d.path());
        assert!(invalid.is_empty(), "{form}: {invalid:#?}");
        assert_eq!(
            keys(&objects),
            vec!["Namespace /x", "Pod x/a", "Pod x/b", "NetworkPolicy x/p", "NetworkPolicy x/q"]
        );
        let objects: Vec<KubeObject> = objects.into_iter().map(|o| o.object).collect();
        match &first {
            None => first = Some(objects),
            Some(first) => assert_eq!(&objects, first, "{form}"),
        }
    }
}

#[test]
fn a_malformed_list_item_is_named_by_file_document_and_item_and_the_rest_is_kept() {
    let d = tempfile::tempdir().expect("tempdir");
    let docs = cluster_values();
    let mut bad = docs.clone();
    bad[2]["metadata"]["labels"] = serde_json::json!(["not", "a", "map"]);
    let list = |items: &[serde_json::Value]| serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items});
    // In a `.json` file of two lists and in a `.yaml` file of JSON documents, second document.
    write(d.path(), "a.json", &format!("{}\n{}", list(&docs[..1]), pretty(&list(&bad[1..]))));
    let other: Vec<serde_json::Value> = bad[1..]
        .iter()
        .map(|o| {
            let mut o = o.clone();
            o["metadata"]["namespace"] = "y".into();
            o
        })
        .collect();
    write(d.path(), "b.yaml", &format!("{NS_X}---\n{}", pretty(&list(&other))));

    let (objects, invalid) = load_dir(d.path());
    assert_eq!(
        keys(&objects),
        vec![
            "Namespace /x",
            "Pod x/a",
            "Pod y/a",
            "NetworkPolicy x/p",
            "NetworkPolicy x/q",
            "NetworkPolicy y/p",
            "NetworkPolicy y/q"
        ]
    );
    assert_eq!(invalid.len(), 3, "{invalid:#?}");
    let json = find(&invalid, "a.json#2.2 Pod x/b");
    assert!(json.error.starts_with("invalid Pod: invalid type: sequence"), "{json:?}");
    let yaml = find(&invalid, "b.yaml#2.2 Pod y/b");
    assert!(yaml.error.starts_with("invalid Pod: invalid type: sequence"), "{yaml:?}");
    // The Namespace is defined twice (a.json and b.yaml): reported as a duplicate.
    assert!(find(&invalid, "a.json#1.1 Namespace x").error.contains("b.yaml#1"), "{invalid:#?}");
}

/// `policy(name)` as a StagedNetworkPolicy.
fn staged(name: &str) -> String {
    policy(name).replace(
        "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy",
        "apiVersion: policy.npagent.io/v1alpha1\nkind: StagedNetworkPolicy",
    )
}

#[test]
fn staged_policies_are_read_in_every_form_with_their_whole_spec() {
    let d = tempfile::tempdir().expect("tempdir");
    write(d.path(), "a.yaml", &format!("{NS_X}---\n{}---\n{}", policy("p"), staged("p")));
    // JSON, in a List and in a typed list whose items carry neither kind nor apiVersion.
    let json = r#"{"apiVersion":"v1","kind":"List","items":[
        {"apiVersion":"policy.npagent.io/v1alpha1","kind":"StagedNetworkPolicy",
         "metadata":{"name":"j","namespace":"x"},"spec":{"podSelector":{},"policyTypes":["Egress"]}}]}"#;
    write(d.path(), "b.json", json);
    let typed_list = "apiVersion: policy.npagent.io/v1alpha1\nkind: StagedNetworkPolicyList\nitems:\n\
        - metadata: {name: t}\n  spec: {podSelector: {matchLabels: {app: t}}}\n";
    write(d.path(), "c.yaml", typed_list);

    let (objects, invalid) = load_dir(d.path());
    assert!(invalid.is_empty(), "{invalid:#?}");
    assert_eq!(
        keys(&objects),
        vec![
            "Namespace /x",
            "NetworkPolicy x/p",
            "StagedNetworkPolicy default/t",
            "StagedNetworkPolicy x/j",
            "StagedNetworkPolicy x/p"
        ]
    );
    let spec = |name: &str| {
        objects
            .iter()
            .find_map(|o| match &o.object {
                KubeObject::StagedNetworkPolicy(s) if s.metadata.name.as_deref() == Some(name) => s.spec.clone(),
                _ => None,
            })
            .unwrap_or_else(|| panic!("staged {name}"))
    };
    // The same spec as the NetworkPolicy of the same text.
    let KubeObject::NetworkPolicy(np) = &objects[1].object else { panic!("{:?}", objects[1]) };
    assert_eq!(Some(spec("p")), np.spec);
    assert_eq!(spec("j").policy_types, Some(vec!["Egress".to_string()]));
    assert!(spec("t").pod_selector.and_then(|s| s.match_labels).is_some());
}

#[test]
fn a_staged_policy_of_the_wrong_version_or_shape_is_named_and_skipped() {
    let d = tempfile::tempdir().expect("tempdir");
    let wrong_version = staged("v").replace("v1alpha1", "v1");
    let wrong_shape = staged("s").replace("podSelector: {}", "podSelector: []");
    write(d.path(), "a.yaml", &format!("{NS_X}---\n{wrong_version}---\n{wrong_shape}---\n{}", staged("ok")));
    let (objects, invalid) = load_dir(d.path());
    assert_eq!(keys(&objects), vec!["Namespace /x", "StagedNetworkPolicy x/ok"]);
    let v = find(&invalid, "StagedNetworkPolicy x/v");
    assert!(v.error.contains("needs apiVersion policy.npagent.io/v1alpha1"), "{v:?}");
    let s = find(&invalid, "StagedNetworkPolicy x/s");
    assert!(s.error.starts_with("invalid StagedNetworkPolicy"), "{s:?}");
}

/// A ClusterNetworkPolicy (cluster-scoped) of tier Admin that denies ingress from `from_ns`.
fn cluster_policy(name: &str, from_ns: &str) -> String {
    format!(
        "apiVersion: policy.networking.k8s.io/v1alpha2\nkind: ClusterNetworkPolicy\nmetadata:\n  name: {name}\n\
         spec:\n  tier: Admin\n  priority: 10\n  subject:\n    namespaces: {{matchLabels: {{ns: x}}}}\n\
         \x20 ingress:\n  - name: deny-{from_ns}\n    action: Deny\n    from:\n    - namespaces: {{matchLabels: {{ns: {from_ns}}}}}\n"
    )
}

#[test]
fn cluster_policies_are_read_in_every_form_without_a_namespace() {
    let d = tempfile::tempdir().expect("tempdir");
    // A namespace in the metadata of a cluster-scoped object is ignored, as the API server does.
    let namespaced = cluster_policy("n", "y").replace("  name: n\n", "  name: n\n  namespace: x\n");
    write(d.path(), "a.yaml", &format!("{NS_X}---\n{}---\n{namespaced}", cluster_policy("c", "y")));
    // JSON, in a List and in a typed list whose items carry neither kind nor apiVersion.
    let json = r#"{"apiVersion":"v1","kind":"List","items":[
        {"apiVersion":"policy.networking.k8s.io/v1alpha2","kind":"ClusterNetworkPolicy",
         "metadata":{"name":"j"},"spec":{"tier":"Baseline","priority":5,"subject":{"namespaces":{}},
         "egress":[{"action":"Deny","to":[{"networks":["10.0.0.0/8"]}]}]}}]}"#;
    write(d.path(), "b.json", json);
    let typed_list = "apiVersion: policy.networking.k8s.io/v1alpha2\nkind: ClusterNetworkPolicyList\nitems:\n\
        - metadata: {name: t}\n  spec: {tier: Admin, priority: 0, subject: {pods: {namespaceSelector: {}, podSelector: {}}}}\n";
    write(d.path(), "c.yaml", typed_list);

    let (objects, invalid) = load_dir(d.path());
    assert!(invalid.is_empty(), "{invalid:#?}");
    assert_eq!(
        keys(&objects),
        vec![
            "Namespace /x",
            "ClusterNetworkPolicy /c",
            "ClusterNetworkPolicy /j",
            "ClusterNetworkPolicy /n",
            "ClusterNetworkPolicy /t"
        ]
    );
    let spec = |name: &str| {
        objects
            .iter()
            .find_map(|o| match &o.object {
                KubeObject::ClusterNetworkPolicy(p) if p.metadata.name.as_deref() == Some(name) => p.spec.clone(),
                _ => None,
            })
            .unwrap_or_else(|| panic!("cluster policy {name}"))
    };
    let c = spec("c");
    assert_eq!((c.tier.as_deref(), c.priority), (Some("Admin"), Some(10)));
    let rule = &c.ingress.as_deref().unwrap_or_default()[0];
    assert_eq!((rule.name.as_deref(), rule.action.as_deref()), (Some("deny-y"), Some("Deny")));
    assert_eq!(spec("n"), c, "the same spec, whatever the namespace said");
    let j = spec("j");
    assert_eq!(j.tier.as_deref(), Some("Baseline"));
    let networks = j.egress.as_deref().unwrap_or_default()[0].to.as_deref().unwrap_or_default()[0].networks.clone();
    assert_eq!(networks, Some(vec!["10.0.0.0/8".to_string()]));
    assert!(spec("t").subject.and_then(|s| s.pods).is_some());
}

#[test]
fn a_cluster_policy_of_the_wrong_version_or_shape_is_named_and_skipped() {
    let d = tempfile::tempdir().expect("tempdir");
    let wrong_version = cluster_policy("v", "y").replace("v1alpha2", "v1alpha1");
    let wrong_shape = cluster_policy("s", "y").replace("priority: 10", "priority: [10]");
    // Its predecessor, kind AdminNetworkPolicy, is not read.
    let admin = "apiVersion: policy.networking.k8s.io/v1alpha1\nkind: AdminNetworkPolicy\nmetadata: {name: a}\n";
    write(
        d.path(),
        "a.yaml",
        &format!("{wrong_version}---\n{wrong_shape}---\n{admin}---\n{}", cluster_policy("ok", "y")),
    );
    let (objects, invalid) = load_dir(d.path());
    assert_eq!(keys(&objects), vec!["ClusterNetworkPolicy /ok"]);
    let v = find(&invalid, "ClusterNetworkPolicy v");
    assert!(
        v.error
            .contains("needs apiVersion policy.networking.k8s.io/v1alpha2, not \"policy.networking.k8s.io/v1alpha1\""),
        "{v:?}"
    );
    let s = find(&invalid, "ClusterNetworkPolicy s");
    assert!(s.error.starts_with("invalid ClusterNetworkPolicy: invalid type"), "{s:?}");
    let a = find(&invalid, "AdminNetworkPolicy a");
    assert!(a.error.contains("is not used by npagent") && a.error.contains("ClusterNetworkPolicy)"), "{a:?}");
    assert_eq!(invalid.len(), 3, "{invalid:#?}");
}

#[tokio::test]
async fn watching_follows_a_cluster_policy() {
    let d = tempfile::tempdir().expect("tempdir");
    let dir = d.path();
    write(dir, "ns.yaml", NS_X);
    let mut w = Watch::start(dir);
    w.until("initial Reset", |ev, _| matches!(ev, SourceEvent::Reset { .. })).await;

    let is_cluster = |ev: &SourceEvent| match ev {
        SourceEvent::Applied(o) => o.object.kind() == Kind::ClusterNetworkPolicy,
        SourceEvent::Deleted { kind, .. } => *kind == Kind::ClusterNetworkPolicy,
        _ => false,
    };
    write(dir, "cnp.yaml", &cluster_policy("deny", "y"));
    w.until("new cluster policy", |ev, _| is_cluster(ev)).await;
    assert_eq!(w.store.keys(), vec!["Namespace /x", "ClusterNetworkPolicy /deny"]);
    // A change is applied again; the deletion names it without a namespace.
    write(dir, "cnp.yaml", &cluster_policy("deny", "z"));
    w.until("changed cluster policy", |ev, _| is_cluster(ev)).await;
    std::fs::remove_file(dir.join("cnp.yaml")).expect("rm");
    let seen = w.until("deleted cluster policy", |ev, _| matches!(ev, SourceEvent::Deleted { .. })).await;
    let deleted = seen.last().expect("an event");
    assert_eq!(
        deleted,
        &SourceEvent::Deleted {
            kind: Kind::ClusterNetworkPolicy,
            object: ObjectRef { namespace: "".into(), name: "deny".into() }
        }
    );
    assert_eq!(w.store.keys(), vec!["Namespace /x"]);
    drop(w.rx);
    tokio::time::timeout(Duration::from_secs(2), w.task)
        .await
        .expect("watcher stops when the receiver is gone")
        .expect("join");
}
