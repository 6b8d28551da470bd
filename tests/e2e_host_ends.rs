//! A pod cannot talk to the node's own stack through its veth's host end, with real packets. On
//! the userspace datapath ovs-vswitchd reads the host end through a packet socket and the
//! node's kernel processes the same frames: it answers a pod's ARP for the gateway with the
//! host end's MAC, and IP sent to that MAC was the node's to deliver or route, past the
//! bridge. x/a, which may send only to x/b, reached a host-network service on the node
//! (UDP: the node's answer passed the bridge as a connection the node opened) and, routed
//! by the node, an outside host, unjudged and unlogged. The pod's neighbour entries are set to
//! the host end's MAC here, so the test does not hang on which ARP answer came first (the
//! kernel's usually does). Controls: x/b, with the same neighbour entries, reaches both
//! through the bridge. Needs root.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

mod support;

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use support::agent::{Agent, FIRST_SYNC};
use support::policy::allow_egress;
use support::wait::wait_until;
use support::{write_atomic, Port, Testbed, GATEWAY_IP};

/// The node's listener on TCP 80, TCP 81 and UDP 80 (a host-network service), stopped by pid
/// when dropped.
struct NodeListener(Child);

impl NodeListener {
    fn start(tb: &Testbed) -> NodeListener {
        let pidfile = tb.sandbox.dir.join("node-listener.pid");
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/testbed/probe.py");
        let child = Command::new("ip")
            .args(["netns", "exec", &tb.sandbox.netns, "python3", script, "serve", "--pidfile"])
            .arg(&pidfile)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the node's listener");
        wait_until(Duration::from_secs(10), "the node's listener", || pidfile.exists());
        NodeListener(child)
    }
}

impl Drop for NodeListener {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The MAC of pod `id`'s veth host end, in the node's namespace.
fn host_end_mac(tb: &Testbed, id: &str) -> String {
    let iface = tb.pod(id).iface;
    let out = tb.sandbox.netns_exec(&["cat", &format!("/sys/class/net/{iface}/address")]);
    out.trim().to_string()
}

/// Points pod `id`'s neighbour entry for `ip` at its host end's MAC.
fn via_host_end(tb: &Testbed, id: &str, ip: &str) {
    let mac = host_end_mac(tb, id);
    let out = tb.pod_exec(id, &["ip", "neigh", "replace", ip, "lladdr", &mac, "dev", "eth0", "nud", "permanent"]);
    assert!(out.status.success(), "ip neigh in {id}: {}", String::from_utf8_lossy(&out.stderr));
}

/// Which ports `from` reaches at `ip` (named `label` in the prober's answer).
fn reached(tb: &Testbed, from: &str, label: &str, ip: &str) -> Vec<Port> {
    let got = tb.probe_from_netns(&tb.pod(from).netns, from, &[(label.to_string(), ip.to_string())]);
    Port::ALL.into_iter().filter(|p| got[&(label.to_string(), *p)]).collect()
}

#[test]
fn a_pod_reaches_neither_the_nodes_stack_nor_its_routes_through_its_host_end() {
    let tb = Testbed::start_with_outside();
    let ports = [("TCP", 80), ("TCP", 81), ("UDP", 80)];
    write_atomic(&tb.manifests_dir().join("policy.yaml"), &allow_egress("x", "a-to-b", "a", "b", &ports));
    let log = tb.sandbox.dir.join("npagent.log");
    let audit_log = tb.sandbox.dir.join("np.log");
    let mut agent =
        Agent::spawn_in_node(&tb.sandbox, &tb.manifests_dir(), &log, &["--audit-log", audit_log.to_str().unwrap()]);
    agent.wait_log(FIRST_SYNC, Duration::from_secs(30));
    wait_until(Duration::from_secs(20), "x/a's egress policy", || !tb.reaches("x/a", "y/a", Port::Udp80));
    agent.wait_log("drops IP arriving on the host ends of 9 pod ports", Duration::from_secs(20));
    let _listener = NodeListener::start(&tb);
    let outside = tb.host("outside/h1").ip;
    for id in ["x/a", "x/b"] {
        via_host_end(&tb, id, GATEWAY_IP);
        via_host_end(&tb, id, &outside);
    }

    // Controls: x/b, whose egress nothing limits, reaches the node's service and the outside
    // host through the bridge, its frames addressed to its host end all the same.
    assert_eq!(reached(&tb, "x/b", "node", GATEWAY_IP), Port::ALL, "x/b to the node's service");
    assert_eq!(reached(&tb, "x/b", "outside/h1", &outside), Port::ALL, "x/b to outside/h1");

    // x/a reaches neither.
    assert_eq!(reached(&tb, "x/a", "node", GATEWAY_IP), [], "x/a reached the node's service past its egress policy");
    assert_eq!(reached(&tb, "x/a", "outside/h1", &outside), [], "x/a reached outside/h1 past its egress policy");
}
