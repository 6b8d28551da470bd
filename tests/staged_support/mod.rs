//! The cluster and the policies the staged tests share (tests/audit_staged.rs,
//! tests/explain_staged.rs), written to a manifests directory and read back as `npagent
//! explain` reads it: every pod local, on a stand-in port, the flows compiled with their
//! staged view. Offline.
#![allow(dead_code, reason = "each test uses a part")]

use npagent::agent::{SourceConfig, Store};
use npagent::compiler::{self, Compiler, IdAllocator};
use npagent::explain;
use npagent::model::ObjectRef;
use npagent::snapshot;
use std::path::Path;

/// Namespace x and its pods a, b, c (labelled `app: <name>`) at `<subnet>.1`, `.2`, `.3`.
pub fn cluster(subnet: &str) -> String {
    let mut docs =
        vec!["apiVersion: v1\nkind: Namespace\nmetadata: {name: x, labels: {kubernetes.io/metadata.name: x}}\n"
            .to_string()];
    for (i, name) in ["a", "b", "c"].iter().enumerate() {
        docs.push(format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: x, labels: {{app: {name}}}}}\n\
             spec: {{nodeName: n1, containers: [{{name: c, image: i}}]}}\nstatus: {{phase: Running, podIP: {subnet}.{}}}\n",
            i + 1
        ));
    }
    docs.join("---\n")
}

/// `x/allow-b` (enforced): a accepts b on TCP 80.
pub const ALLOW_B: &str = r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: allow-b, namespace: x}
spec:
  podSelector: {matchLabels: {app: a}}
  ingress: [{from: [{podSelector: {matchLabels: {app: b}}}], ports: [{port: 80}]}]
"#;

/// A staged edit of `x/allow-b`: a would accept c instead of b.
pub const STAGED_ALLOW_C: &str = r#"
apiVersion: policy.npagent.io/v1alpha1
kind: StagedNetworkPolicy
metadata: {name: allow-b, namespace: x}
spec:
  podSelector: {matchLabels: {app: a}}
  ingress: [{from: [{podSelector: {matchLabels: {app: c}}}], ports: [{port: 80}]}]
"#;

/// A staged default-deny of x's ingress.
pub const STAGED_DENY_ALL: &str = r#"
apiVersion: policy.npagent.io/v1alpha1
kind: StagedNetworkPolicy
metadata: {name: deny-all, namespace: x}
spec: {podSelector: {}, policyTypes: [Ingress]}
"#;

/// A manifests directory of the cluster of `subnet` with `docs`.
pub fn manifests(subnet: &str, docs: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let text: Vec<String> = std::iter::once(cluster(subnet)).chain(docs.iter().map(|d| d.to_string())).collect();
    std::fs::write(dir.path().join("all.yaml"), text.join("\n---\n")).expect("write");
    dir
}

/// The store of the manifests in `dir`, every pod local, and its flows compiled.
pub fn load(dir: &Path) -> (Store, Compiler) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let source = SourceConfig::Manifests(dir.to_path_buf());
    let mut store: Store = rt.block_on(snapshot::load_store(&source, true)).unwrap_or_else(|e| panic!("{e:#}"));
    let pods: Vec<ObjectRef> = store.model().pods.keys().cloned().collect();
    let (ports, _) = explain::ports_with_stand_ins(store.model(), &pods.iter().collect::<Vec<_>>());
    store.set_ports(&ports);
    let compiler = compiler::compile(store.model(), compiler::Config::default(), IdAllocator::new(0), 0);
    (store, compiler)
}
