//! A real node around the pods, with real packets: the gateway `gw0` in the node's network
//! namespace, kubelet-style connections from the node into isolated pods, Services through
//! kube-proxy-style DNAT in the node's namespace (with and without ingress and egress
//! policies), a pod in promiscuous mode, a port without external_ids, and a hostile pod
//! sending through the gateway with a forged source. Each case fails on a pipeline that
//! trusts unlabelled ports, floods with NORMAL or judges egress only by in_port. Needs root.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use support::agent::Agent;
use support::sandbox::repo_path;
use support::{eventually, finish_count, write_atomic, Port, Testbed, A_FROM_B, NAMESPACES_X_LOGGING};

/// x/b sends only to x/a on TCP 80.
const B_TO_A_80: &str = "apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: b-to-a-80, namespace: x}
spec:
  podSelector: {matchLabels: {pod: b}}
  policyTypes: [Egress]
  egress:
  - to: [{podSelector: {matchLabels: {pod: a}}}]
    ports: [{protocol: TCP, port: 80}]
";

/// x/c isolated in both directions, nothing allowed.
const C_ISOLATED: &str = "apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: c-isolated, namespace: x}
spec:
  podSelector: {matchLabels: {pod: c}}
  policyTypes: [Ingress, Egress]
";

struct Node {
    tb: Testbed,
    _agent: Agent,
    audit_log: std::path::PathBuf,
}

impl Node {
    /// The testbed with its outside hosts, namespace x logging, and npagent enforcing
    /// `policies`; returns once `ready` holds.
    fn start(policies: &[(&str, &str)], ready: impl Fn(&Testbed) -> bool) -> Node {
        let tb = Testbed::start_with_outside();
        write_atomic(&tb.manifests_dir().join("namespaces.yaml"), NAMESPACES_X_LOGGING);
        for (name, text) in policies {
            write_atomic(&tb.manifests_dir().join(format!("{name}.yaml")), text);
        }
        let audit_log = tb.sandbox.dir.join("np.log");
        let agent = Agent::start(&tb.sandbox, &tb.manifests_dir(), &audit_log, &[]);
        let deadline = Instant::now() + Duration::from_secs(20);
        while !ready(&tb) {
            assert!(Instant::now() < deadline, "not ready within 20 s");
        }
        Node { tb, _agent: agent, audit_log }
    }

    fn attack(&self, id: &str, args: &[&str]) -> String {
        self.tb.attack(id, args)
    }

    fn spawn_ready(&self, netns: &str, args: &[&str]) -> std::process::Child {
        self.tb.spawn_attack(netns, args)
    }

    fn audit_lines(&self) -> Vec<String> {
        std::fs::read_to_string(&self.audit_log).unwrap_or_default().lines().map(str::to_owned).collect()
    }
}

#[test]
fn the_node_reaches_isolated_pods_and_forwarded_traffic_meets_policy() {
    let node = Node::start(&[("a-from-b", A_FROM_B)], |tb| !tb.reaches("x/c", "x/a", Port::Tcp80));
    for port in [Port::Tcp80, Port::Tcp81, Port::Udp80] {
        // kubelet's probes come from the node's own address on the gateway.
        eventually(&format!("the node reaches isolated x/a on {port:?}"), || node.tb.node_reaches("x/a", port));
        // Traffic the node only forwards keeps its source and meets x/a's policy.
        assert!(!node.tb.reaches("outside/h1", "x/a", port), "outside/h1 reached isolated x/a on {port:?}");
        assert!(!node.tb.reaches("x/c", "x/a", port), "x/c reached isolated x/a on {port:?}");
        // Control: the allowed pod, and the outside host to a pod no policy isolates.
        eventually("x/b reaches x/a", || node.tb.reaches("x/b", "x/a", port));
        eventually("outside/h1 reaches x/c", || node.tb.reaches("outside/h1", "x/c", port));
    }
    // The node's connections are never drops in the log; the outside host's are.
    std::thread::sleep(Duration::from_millis(1500));
    let lines = node.audit_lines();
    assert!(!lines.iter().any(|l| l.contains("Drop") && l.contains(" 10.10.0.254 ")), "{lines:#?}");
    assert!(lines.iter().any(|l| l.contains("Drop") && l.contains(" 10.10.200.10 ")), "{lines:#?}");
}

#[test]
fn services_through_the_node_meet_ingress_and_egress_after_dnat() {
    // x/a accepts only x/b; x/b may send only to x/a on TCP 80.
    let node = Node::start(&[("a-from-b", A_FROM_B), ("b-to-a-80", B_TO_A_80)], |tb| {
        !tb.reaches("x/c", "x/a", Port::Tcp80) && !tb.reaches("x/b", "y/a", Port::Tcp80)
    });
    let tb = &node.tb;
    // Allowed both ways through the ClusterIP: x/b -> x/a on TCP 80.
    eventually("x/b reaches x/a's Service on TCP 80", || tb.reaches_service("x/b", "x/a", Port::Tcp80));
    // x/b's egress: not on other ports of x/a, not to y/a (whose ingress is open).
    for port in [Port::Tcp81, Port::Udp80] {
        assert!(!tb.reaches_service("x/b", "x/a", port), "x/b reached x/a's Service on {port:?} past its egress");
    }
    assert!(!tb.reaches_service("x/b", "y/a", Port::Tcp80), "x/b reached y/a's Service past its egress");
    // x/a's ingress: x/c is not allowed in through the Service either.
    for port in [Port::Tcp80, Port::Tcp81, Port::Udp80] {
        assert!(!tb.reaches_service("x/c", "x/a", port), "x/c reached x/a's Service on {port:?} past its ingress");
        // Control: a Service whose backend no policy isolates, from a pod no policy isolates.
        eventually("x/c reaches y/b's Service", || tb.reaches_service("x/c", "y/b", port));
    }
    // The Allow line of the Service connection names the real backend, not the ClusterIP.
    std::thread::sleep(Duration::from_millis(500));
    let lines = node.audit_lines();
    let backend = tb.pod("x/a").ip;
    assert!(
        lines.iter().any(|l| l.contains("Allow")
            && l.contains("K8sNetworkPolicy:x/a-from-b")
            && l.contains(&format!(" {} ", tb.pod("x/b").ip))
            && l.contains(&format!(" {backend} 80 TCP"))),
        "{lines:#?}"
    );
    assert!(!lines.iter().any(|l| l.contains(" 10.96.")), "a log line names a ClusterIP: {lines:#?}");
}

#[test]
fn an_isolated_pod_in_promiscuous_mode_hears_nothing_of_others() {
    let node = Node::start(&[("c-isolated", C_ISOLATED)], |tb| !tb.reaches("x/a", "x/c", Port::Udp80));
    let (a, b, c) = (node.tb.pod("x/a"), node.tb.pod("x/b"), node.tb.pod("x/c"));
    // Sniffers on x/c (isolated) and, as a control, x/a, for frames from x/b's MAC.
    let sniff = |pod: &support::Pod| {
        node.spawn_ready(&pod.netns, &["sniff", "--iface", "eth0", "--from-mac", &b.mac, "--timeout", "3"])
    };
    let (on_c, on_a) = (sniff(&c), sniff(&a));
    // x/b talks to x/a, then tries every shape of frame that a flooding switch would carry
    // to x/c: unknown unicast, a broadcast IP, IP to x/c's MAC for someone else's address,
    // and a padded unicast ARP to x/c's MAC.
    assert!(node.tb.reaches("x/b", "x/a", Port::Udp80));
    for (mac, kind, dst) in [
        ("02:00:00:00:00:99", "udp", "10.10.1.99"),
        ("02:00:00:00:00:99", "udp", "10.10.200.10"),
        ("ff:ff:ff:ff:ff:ff", "udp", "255.255.255.255"),
        (c.mac.as_str(), "udp", "10.10.200.10"),
        (c.mac.as_str(), "udp", "255.255.255.255"),
        (c.mac.as_str(), "arp", c.ip.as_str()),
        ("ff:ff:ff:ff:ff:ff", "arp", c.ip.as_str()),
    ] {
        node.attack(
            "x/b",
            &["frame-send", "--iface", "eth0", "--dst-mac", mac, "--kind", kind, "--src", &b.ip, "--dst", dst],
        );
    }
    let count = finish_count;
    assert_eq!(count(on_c), 0, "isolated x/c received frames from x/b");
    assert!(count(on_a) > 0, "control: x/a received none of x/b's frames");
}

#[test]
fn a_port_without_external_ids_sends_and_receives_nothing() {
    let node = Node::start(&[], |tb| tb.reaches("x/b", "x/a", Port::Udp80));
    let out = Command::new("bash")
        .arg(repo_path("testbed/testbed"))
        .args(["add-stray", node.tb.sandbox.dir.to_str().unwrap(), "s1", "10.10.9.9", "60"])
        .output()
        .expect("add-stray");
    assert!(out.status.success(), "add-stray: {}", String::from_utf8_lossy(&out.stderr));
    let stray_netns = format!("{}-stray-s1", node.tb.sandbox.netns);
    let target = |id: &str| vec![(id.to_string(), node.tb.pod(id).ip)];
    // The stray sends: nothing reaches a pod (not even as "the node's own" traffic).
    let from_stray = node.tb.probe_from_netns(&stray_netns, "stray/s1", &target("x/a"));
    assert!(from_stray.values().all(|ok| !ok), "the stray reached x/a: {from_stray:?}");
    // Pods send to it: nothing arrives (no flooding to unknown ports).
    let to_stray =
        node.tb.probe_from_netns(&node.tb.pod("x/b").netns, "x/b", &[("stray/s1".into(), "10.10.9.9".into())]);
    assert!(to_stray.values().all(|ok| !ok), "x/b reached the stray: {to_stray:?}");
    // Control: labelled pods still reach each other.
    eventually("x/b reaches x/a", || node.tb.reaches("x/b", "x/a", Port::Udp80));
}

#[test]
fn a_forged_source_through_the_gateway_is_dropped() {
    let node = Node::start(&[], |tb| tb.reaches("x/b", "x/a", Port::Udp80));
    let h1 = node.tb.host("outside/h1");
    let listen = |port: &str| node.spawn_ready(&h1.netns, &["udp-listen", "--port", port, "--timeout", "2"]);
    let count = finish_count;
    // x/c forges x/a's address, and an address of nobody, to the outside host (via the gateway).
    for (i, forged) in ["10.10.1.11", "10.10.77.7", "10.10.0.254"].into_iter().enumerate() {
        let port = (41000 + i).to_string();
        let listener = listen(&port);
        node.attack(
            "x/c",
            &["udp-spoof", "--src", forged, "--sport", "4000", "--dst", &h1.ip, "--dport", &port, "--count", "5"],
        );
        assert_eq!(count(listener), 0, "a datagram forged from {forged} crossed the gateway");
    }
    // Control: x/c's own address gets through.
    let listener = listen("41010");
    let own = node.tb.pod("x/c").ip;
    node.attack(
        "x/c",
        &["udp-spoof", "--src", &own, "--sport", "4000", "--dst", &h1.ip, "--dport", "41010", "--count", "5"],
    );
    assert!(count(listener) > 0, "control: x/c's genuine datagrams did not cross the gateway");
}

#[test]
fn tagged_frames_from_a_pod_go_nowhere() {
    let node = Node::start(&[], |tb| tb.reaches("x/b", "x/a", Port::Udp80));
    let (a, b) = (node.tb.pod("x/a"), node.tb.pod("x/b"));
    let count = finish_count;
    let sniff = || node.spawn_ready(&a.netns, &["sniff", "--iface", "eth0", "--from-mac", &b.mac, "--timeout", "2"]);
    // x/b sends x/a its own, otherwise genuine, frames tagged for VLAN 5, and priority-tagged
    // (VLAN 0): on a node whose uplink is a trunk, a tag would hop VLANs.
    for tci in ["5", "0", "8197"] {
        let on_a = sniff();
        for kind in ["udp", "arp"] {
            node.attack(
                "x/b",
                &[
                    "frame-send",
                    "--iface",
                    "eth0",
                    "--dst-mac",
                    &a.mac,
                    "--kind",
                    kind,
                    "--src",
                    &b.ip,
                    "--dst",
                    &a.ip,
                    "--vlan",
                    tci,
                ],
            );
        }
        assert_eq!(count(on_a), 0, "x/a received x/b's frames tagged {tci}");
    }
    // Control: the same IP frame untagged arrives.
    let on_a = sniff();
    node.attack(
        "x/b",
        &["frame-send", "--iface", "eth0", "--dst-mac", &a.mac, "--kind", "udp", "--src", &b.ip, "--dst", &a.ip],
    );
    assert!(count(on_a) > 0, "control: x/a did not receive x/b's untagged frame");
}
