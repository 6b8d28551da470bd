//! The node's doors, with real packets: what the node forwards is not the node's own. The
//! testbed's node plays kube-proxy (iptables mode) in its network namespace: NodePorts in
//! KUBE-NODEPORTS (DNAT, marked 0x4000 by KUBE-MARK-MASQ) masqueraded in KUBE-POSTROUTING,
//! which comes first in POSTROUTING, as kube-proxy puts it. kube-proxy masquerades a NodePort
//! connection to the gateway's address, so npagent, which takes traffic from that address for
//! the node's own (kubelet's probes), let an outside host and a hostile pod into an isolated
//! pod through `<node>:<nodePort>`, TCP and UDP, with no log line. Now npagent, running in the
//! node's namespace, keeps a rule ahead of kube-proxy's masquerade that gives such forwarded
//! connections a source of their own (169.254.0.253): the isolated pod's ingress policy judges
//! them as a non-pod peer and logs the drops, while the node's own connections (kubelet's
//! probes) still pass, unlogged. Needs root.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

mod support;

use std::process::Command;
use std::time::Duration;

use support::agent::{Agent, FIRST_SYNC};
use support::sandbox::output;
use support::{eventually, write_atomic, Port, Testbed, A_FROM_B, NAMESPACES_X_LOGGING};

const WITHIN: Duration = Duration::from_secs(20);
/// x/a's NodePorts (30000, 30001) and y/b's (30100, 30101): y/b is isolated by no policy.
const X_A: u16 = 0;
const Y_B: u16 = 100;
/// The source npagent gives forwarded connections.
const FORWARDED: &str = "169.254.0.253";

/// `iptables -t nat -S CHAIN` in the node's network namespace.
fn nat_chain(tb: &Testbed, chain: &str) -> String {
    let out = output(Command::new("ip").args([
        "netns",
        "exec",
        &tb.sandbox.netns,
        "iptables",
        "-w",
        "-t",
        "nat",
        "-S",
        chain,
    ]));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The first rule of the node's nat POSTROUTING.
fn first_postrouting_rule(tb: &Testbed) -> String {
    nat_chain(tb, "POSTROUTING").lines().find(|l| l.starts_with("-A ")).unwrap_or_default().to_owned()
}

fn audit_lines(path: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(path).unwrap_or_default().lines().map(str::to_owned).collect()
}

#[test]
fn nodeport_connections_meet_ingress_policy_and_the_nodes_own_still_pass() {
    let tb = Testbed::start_with_outside();
    write_atomic(&tb.manifests_dir().join("namespaces.yaml"), NAMESPACES_X_LOGGING);
    write_atomic(&tb.manifests_dir().join("a-from-b.yaml"), A_FROM_B);
    tb.add_nodeport("x/a", X_A);
    tb.add_nodeport("y/b", Y_B);
    let audit_log = tb.sandbox.dir.join("np.log");
    let log = tb.sandbox.dir.join("npagent.log");
    let mut agent =
        Agent::spawn_in_node(&tb.sandbox, &tb.manifests_dir(), &log, &["--audit-log", audit_log.to_str().unwrap()]);
    agent.wait_log(FIRST_SYNC, WITHIN);
    eventually("x/c kept out of isolated x/a", || !tb.reaches("x/c", "x/a", Port::Tcp80));

    let mut breaches = Vec::new();
    for port in Port::ALL {
        // Controls: the NodePort works (to a pod no policy isolates, from outside and from a
        // pod), and so do the node's own connections into isolated x/a (kubelet's probes).
        eventually(&format!("outside/h1 reaches y/b's NodePort on {port}"), || {
            tb.reaches_nodeport("outside/h1", "y/b", port, Y_B)
        });
        eventually(&format!("x/c reaches y/b's NodePort on {port}"), || tb.reaches_nodeport("x/c", "y/b", port, Y_B));
        eventually(&format!("the node reaches isolated x/a on {port}"), || tb.node_reaches("x/a", port));
        // The attack: isolated x/a through its NodePort, from outside and from a pod.
        for from in ["outside/h1", "x/c"] {
            if tb.reaches_nodeport(from, "x/a", port, X_A) {
                breaches.push(format!("{from} on {port}"));
            }
        }
    }
    assert!(breaches.is_empty(), "isolated x/a reached through its NodePort: {breaches:?}");
    // The rule is npagent's, ahead of kube-proxy's masquerade.
    assert_eq!(first_postrouting_rule(&tb), "-A POSTROUTING -j NPAGENT-POSTROUTING");
    let chain = nat_chain(&tb, "NPAGENT-POSTROUTING");
    assert!(
        chain.contains(&format!(
            "-o gw0 -m mark --mark 0x4000/0x4000 -m addrtype ! --src-type LOCAL -j SNAT --to-source {FORWARDED}"
        )),
        "{chain}"
    );

    // The drops are logged as from the forwarded source, TCP and UDP; the node's own
    // connections never as drops.
    std::thread::sleep(Duration::from_millis(1500));
    let lines = audit_lines(&audit_log);
    for proto in ["TCP", "UDP"] {
        assert!(
            lines.iter().any(|l| l.contains("IngressDefaultRule")
                && l.contains("Drop")
                && l.contains(&format!(" {FORWARDED} "))
                && l.contains(&format!(" {proto} "))),
            "no {proto} drop from {FORWARDED} logged: {lines:#?}"
        );
    }
    assert!(!lines.iter().any(|l| l.contains("Drop") && l.contains(" 10.10.0.254 ")), "{lines:#?}");

    // kube-proxy restarting prepends its jump again: npagent puts its own back in front.
    let ipt = |args: &[&str]| {
        output(Command::new("ip").args(["netns", "exec", &tb.sandbox.netns, "iptables", "-w", "-t", "nat"]).args(args))
    };
    assert!(ipt(&["-D", "POSTROUTING", "-j", "KUBE-POSTROUTING"]).status.success());
    assert!(ipt(&["-I", "POSTROUTING", "1", "-j", "KUBE-POSTROUTING"]).status.success());
    assert_eq!(first_postrouting_rule(&tb), "-A POSTROUTING -j KUBE-POSTROUTING");
    let deadline = std::time::Instant::now() + WITHIN;
    while first_postrouting_rule(&tb) != "-A POSTROUTING -j NPAGENT-POSTROUTING" {
        assert!(
            std::time::Instant::now() < deadline,
            "npagent's jump not back in front: {}",
            nat_chain(&tb, "POSTROUTING")
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(nat_chain(&tb, "POSTROUTING").matches("NPAGENT-POSTROUTING").count(), 1);
    tb.sandbox.appctl(&["dpctl/flush-conntrack"]);
    assert!(
        !tb.reaches_nodeport("outside/h1", "x/a", Port::Tcp80, X_A),
        "outside/h1 reached x/a after kube-proxy's jump moved"
    );

    // A restart leaves the rule in place (never removed), and adopts it as it is.
    assert!(agent.stop().success());
    assert_eq!(first_postrouting_rule(&tb), "-A POSTROUTING -j NPAGENT-POSTROUTING");
    assert!(
        !tb.reaches_nodeport("outside/h1", "x/a", Port::Udp80, X_A),
        "outside/h1 reached x/a while npagent was away"
    );
}

/// `dpctl/ct-get-limits zone=<zone>`'s line for the zone.
fn zone_limit(tb: &Testbed, zone: u32) -> String {
    let out = tb.sandbox.appctl(&["dpctl/ct-get-limits", &format!("zone={zone}")]);
    out.lines().find(|l| l.starts_with(&format!("zone={zone},"))).unwrap_or_default().to_string()
}

/// Two pods flooded x/a's NodePort with new connections: each was charged to x/a's own
/// conntrack zone (no local pod was its source), which filled, so the node's probes of x/a
/// and x/a's own new connections were refused, unlogged. Now a connection is charged to the
/// zone of the local pod that opens it, or, entering by the gateway, to the node's zone (the
/// node's own) or the inbound zone (the rest): the flood fills the inbound zone only, every
/// refused connection is a `SecurityEvent:ConntrackLimit` line naming x/a (or, for the
/// flooders' own connections to the node past their own limit, the flooder), and x/a's own
/// connections and the node's probes go on.
#[test]
fn a_flood_through_the_node_fills_no_pods_zone() {
    const LIMIT: u32 = 20;
    let tb = Testbed::start();
    write_atomic(&tb.manifests_dir().join("namespaces.yaml"), NAMESPACES_X_LOGGING);
    tb.add_nodeport("x/a", X_A);
    let audit_log = tb.sandbox.dir.join("np.log");
    let log = tb.sandbox.dir.join("npagent.log");
    let limit = LIMIT.to_string();
    let mut agent = Agent::spawn_in_node(
        &tb.sandbox,
        &tb.manifests_dir(),
        &log,
        &["--audit-log", audit_log.to_str().unwrap(), "--conntrack-pod-limit", &limit],
    );
    agent.wait_log(FIRST_SYNC, WITHIN);
    let x_a = tb.pod("x/a");
    let deadline = std::time::Instant::now() + WITHIN;
    while !zone_limit(&tb, x_a.ofport).contains(&format!("limit={LIMIT},")) {
        assert!(std::time::Instant::now() < deadline, "x/a's zone limit not set");
        std::thread::sleep(Duration::from_millis(200));
    }
    eventually("y/a reaches x/a's NodePort", || tb.reaches_nodeport("y/a", "x/a", Port::Udp80, X_A));
    tb.sandbox.appctl(&["dpctl/flush-conntrack"]);

    // Two pods open three times the limit of connections to x/a through its NodePort.
    let flows = (3 * LIMIT).to_string();
    let through: u32 = ["y/a", "y/b"]
        .iter()
        .map(|id| {
            tb.attack(
                id,
                &["udp-flood", "--dst", support::GATEWAY_IP, "--dport", "30000", "--flows", &flows, "--wait", "1"],
            )
            .parse::<u32>()
            .expect("a count")
        })
        .sum();

    // x/a's own new connection and the node's probe of x/a still get through.
    let peer = tb.pod("y/c").ip;
    let args = ["udp-echo", "--dst", &peer, "--dport", "80", "--sport", "40800", "--count", "5"];
    let echoes: u32 = tb.attack("x/a", &args).parse().expect("a count");
    assert_eq!(
        echoes, 5,
        "x/a could not open a connection after the flood through the node ({through} flows got through)"
    );
    for port in Port::ALL {
        eventually(&format!("the node reaches x/a on {port} after the flood"), || tb.node_reaches("x/a", port));
    }
    // The flood stopped at the inbound zone's limit, and x/a's zone holds only its own.
    assert!(through <= LIMIT, "{through} flows through the node, over the inbound zone's limit {LIMIT}");
    let inbound = zone_limit(&tb, 65522);
    assert_eq!(inbound, format!("zone=65522,limit={LIMIT},count={LIMIT}"));
    let own = zone_limit(&tb, x_a.ofport);
    assert_eq!(
        own,
        format!("zone={},limit={LIMIT},count=1", x_a.ofport),
        "x/a's zone holds more than its own connection"
    );

    // Each refused connection is a security event: the inbound zone's name x/a, the one they
    // were opened to; the flooders' own zones (their connections to the node) name them.
    std::thread::sleep(Duration::from_millis(1500));
    let lines = audit_lines(&audit_log);
    let refused: Vec<&String> =
        lines.iter().filter(|l| l.contains("ConntrackQuota SecurityEvent:ConntrackLimit")).collect();
    let into_x_a = format!("Ingress Drop <nil> x/a {FORWARDED} ");
    assert!(refused.iter().any(|l| l.contains(&into_x_a)), "no ConntrackLimit line naming x/a: {lines:#?}");
    let own = |id: &str| format!("Egress Drop <nil> {id} {} ", tb.pod(id).ip);
    assert!(
        refused.iter().all(|l| l.contains(&into_x_a) || l.contains(&own("y/a")) || l.contains(&own("y/b"))),
        "{refused:#?}"
    );
}
