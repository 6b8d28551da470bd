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

use std::time::Duration;

use support::agent::Agent;
use support::policy::allow_egress;
use support::wait::wait_until;
use support::{write_atomic, Port, Testbed, GATEWAY_IP};

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

#[test]
fn a_pod_reaches_neither_the_nodes_stack_nor_its_routes_through_its_host_end() {
    let tb = Testbed::start_with_outside();
    write_atomic(&tb.manifests_dir().join("policy.yaml"), &allow_egress("x", "a-to-b", "a", "b", &[]));
    let mut agent = Agent::start_in_node(&tb.sandbox, &tb.manifests_dir(), &tb.sandbox.dir.join("np.log"), &[]);
    wait_until(Duration::from_secs(20), "x/a's egress policy", || !tb.reaches("x/a", "y/a", Port::Udp80));
    agent.wait_log("drops IP arriving on the host ends of 9 pod ports", Duration::from_secs(20));
    let _listener = tb.node_listener();
    let outside = tb.host("outside/h1").ip;
    for id in ["x/a", "x/b"] {
        via_host_end(&tb, id, GATEWAY_IP);
        via_host_end(&tb, id, &outside);
    }

    // Controls: x/b, whose egress nothing limits, reaches the node's service and the outside
    // host through the bridge, its frames addressed to its host end all the same.
    assert_eq!(tb.ports_reached("x/b", "node", GATEWAY_IP), Port::ALL, "x/b to the node's service");
    assert_eq!(tb.ports_reached("x/b", "outside/h1", &outside), Port::ALL, "x/b to outside/h1");

    // x/a reaches neither.
    assert_eq!(
        tb.ports_reached("x/a", "node", GATEWAY_IP),
        [],
        "x/a reached the node's service past its egress policy"
    );
    assert_eq!(tb.ports_reached("x/a", "outside/h1", &outside), [], "x/a reached outside/h1 past its egress policy");
}
