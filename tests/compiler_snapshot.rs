//! Snapshot of the compiled flow text for a small model, in `ovs-ofctl dump-flows --names`
//! syntax.

use npagent::compiler::synthetic::*;
use npagent::compiler::{compile, flows_text, Config, IdAllocator};
use npagent::model::{ContainerPort, IngressRule, Model, Peer, PortRef, PortSpec, Protocol};

/// x (logging on): pods a (local, port 1), b, c; y: pod d (local, port 2), default deny.
/// x/allow-b: b -> a on TCP 80 and the named port "web" (8080 on a).
pub fn small_model() -> Model {
    let mut a = pod("x", "a", &[("pod", "a")], &["10.0.0.1"]);
    a.ports = vec![ContainerPort { name: Some("web".into()), port: 8080, protocol: Protocol::Tcp }];
    Model::default()
        .with_ns(namespace("x", &[("ns", "x")], &[("networkpolicy.antrea.io/enable-logging", "true")]))
        .with_ns(namespace("y", &[("ns", "y")], &[]))
        .with_pod(a)
        .with_pod(pod("x", "b", &[("pod", "b")], &["10.0.0.2", "fd00::2"]))
        .with_pod(pod("x", "c", &[("pod", "c")], &["10.0.0.3"]))
        .with_pod(pod("y", "d", &[("pod", "d")], &["10.0.1.4"]))
        .with_port(port(1, "x", "a", 1))
        .with_port(port(2, "y", "d", 2))
        .with_policy(policy(
            "x",
            "allow-b",
            sel(&[("pod", "a")]),
            vec![IngressRule {
                from: vec![Peer::Pods { pod_selector: Some(sel(&[("pod", "b")])), namespace_selector: None }],
                ports: vec![tcp(80), PortSpec { protocol: Protocol::Tcp, port: Some(PortRef::Name("web".into())), end_port: None }],
            }],
        ))
        .with_policy(policy("y", "deny-all", sel(&[]), vec![]))
}

#[test]
fn small_model_flow_text() {
    let c = compile(&small_model(), Config::default(), IdAllocator::new(60), 0);
    let text = flows_text(c.flows(), &c.port_names()).join("\n");
    let want = include_str!("compiler_snapshot.txt");
    if std::env::var_os("UPDATE_SNAPSHOT").is_some() {
        std::fs::write(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/compiler_snapshot.txt"), format!("{text}\n")).unwrap();
        return;
    }
    assert_eq!(format!("{text}\n"), want);
}
