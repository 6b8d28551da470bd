//! The gateway npagent creates and adopts, with real packets: on a bridge without a gateway
//! port, `npagent run --gateway gw0 --gateway-ip 10.10.0.254/16` (in the node's network
//! namespace, beside ovs-vswitchd) creates `gw0` as an OVS internal port marked
//! `antrea-type=gateway`, gives its device the address and brings it up; the node then reaches
//! an isolated pod through it (kubelet's probes) and pods reach Services through it. A restart
//! adopts that port (same ofport, no second port), and a gateway address the adopted device
//! lacks is reported, not added. Without `--gateway-ip`, the addresses an adopted gateway's
//! device holds are the gateway's, followed as they change: the node reaches isolated pods
//! from them, and nothing else does. Needs root.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use support::agent::{Agent, FIRST_SYNC};
use support::sandbox::output;
use support::{eventually, write_atomic, Port, Testbed, A_FROM_B, NAMESPACES_X_LOGGING};

const WITHIN: Duration = Duration::from_secs(20);

/// `ip -o ARGS` in the node's network namespace.
fn node_ip(tb: &Testbed, args: &[&str]) -> String {
    let out = output(Command::new("ip").args(["-n", &tb.sandbox.netns, "-o"]).args(args));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The interfaces marked as a gateway in OVSDB.
fn gateways(tb: &Testbed) -> Vec<String> {
    let out = tb.sandbox.vsctl(&["--bare", "--columns=name", "find", "Interface", "external_ids:antrea-type=gateway"]);
    out.split_whitespace().map(str::to_owned).collect()
}

/// Starts npagent in the node's namespace with `extra` arguments; returns once it has synced.
fn start_agent(tb: &Testbed, extra: &[&str]) -> Agent {
    let log = tb.sandbox.dir.join("npagent.log");
    let mut agent = Agent::spawn_in_node(&tb.sandbox, &tb.manifests_dir(), &log, extra);
    agent.wait_log(FIRST_SYNC, WITHIN);
    agent
}

/// Like [`start_agent`], with no gateway address configured (no `--gateway-ip`, nor its
/// environment variable).
fn start_agent_without_gateway_ip(tb: &Testbed) -> Agent {
    let log = tb.sandbox.dir.join("npagent.log");
    let mut agent = Agent::spawn_in_node_without(&tb.sandbox, &tb.manifests_dir(), &log, &[], &["NPAGENT_GATEWAY_IP"]);
    agent.wait_log(FIRST_SYNC, WITHIN);
    agent
}

/// Does any flow on the bridge name `ip` (as a whole address)?
fn flows_name(tb: &Testbed, ip: &str) -> bool {
    tb.sandbox.dump_flows().iter().any(|f| f.split(|c: char| !(c.is_ascii_digit() || c == '.')).any(|w| w == ip))
}

#[test]
fn npagent_creates_the_missing_gateway_and_a_restart_adopts_it() {
    let tb = Testbed::start_without_gateway();
    write_atomic(&tb.manifests_dir().join("namespaces.yaml"), NAMESPACES_X_LOGGING);
    write_atomic(&tb.manifests_dir().join("a-from-b.yaml"), A_FROM_B);
    assert_eq!(gateways(&tb), Vec::<String>::new(), "the testbed made a gateway");
    let addrs = node_ip(&tb, &["addr", "show"]);
    assert!(!addrs.contains("10.10.0.254"), "the node holds the gateway address already: {addrs}");

    let args = ["--gateway", "gw0", "--gateway-ip", "10.10.0.254/16"];
    let mut agent = start_agent(&tb, &args);
    agent.wait_log("gateway gw0 created", WITHIN);
    // An internal port marked as the gateway, at Antrea's ofport, its device addressed and up.
    assert_eq!(gateways(&tb), ["gw0"]);
    assert_eq!(tb.sandbox.vsctl(&["get", "Interface", "gw0", "type"]).trim(), "internal");
    let ofport = tb.sandbox.ofport("gw0");
    assert_eq!(ofport, 32769);
    let addr = node_ip(&tb, &["addr", "show", "dev", "gw0"]);
    assert!(addr.contains("inet 10.10.0.254/16"), "{addr}");
    let link = node_ip(&tb, &["link", "show", "dev", "gw0"]);
    assert!(link.contains(",UP"), "{link}");
    // Its MAC is the device's own, read back through OVSDB into the flows.
    let mac = link.split("link/ether ").nth(1).and_then(|r| r.split_whitespace().next()).expect("a MAC").to_owned();
    agent.wait_log(&format!("gateway gw0 created (ofport 32769, MAC {mac}) with 10.10.0.254/16, up"), WITHIN);
    assert!(tb.sandbox.dump_flows().iter().any(|f| f.contains(&mac)), "no flow names the gateway's MAC {mac}");

    // On the userspace datapath npagent turned the created device's TX checksum offload off.
    let features = tb.sandbox.netns_exec(&["ethtool", "-k", "gw0"]);
    assert!(features.lines().any(|l| l == "tx-checksumming: off"), "{features}");
    tb.tune_gateway("gw0");
    for port in Port::ALL {
        // kubelet's probes: from the node's gateway address into isolated x/a.
        eventually(&format!("the node reaches isolated x/a on {port} through the created gateway"), || {
            tb.node_reaches("x/a", port)
        });
        assert!(!tb.reaches("x/c", "x/a", port), "x/c reached isolated x/a on {port}");
    }
    // A Service: the pod's connection goes to the gateway, the node DNATs it and sends it back.
    eventually("x/b reaches x/a's Service through the created gateway", || {
        tb.reaches_service("x/b", "x/a", Port::Tcp80)
    });

    // A restart adopts the port it created: same port, no second one, nothing re-created.
    assert!(agent.stop().success());
    let mut agent = start_agent(&tb, &args);
    agent.wait_log("gateway gw0 (ofport 32769) adopted, holding 10.10.0.254/16", WITHIN);
    let log = agent.log_text();
    assert!(!log.contains("gateway gw0 created") && !log.contains("created gw0"), "{log}");
    assert_eq!(gateways(&tb), ["gw0"]);
    assert_eq!(tb.sandbox.ofport("gw0"), ofport);
    eventually("the node reaches isolated x/a after the restart", || tb.node_reaches("x/a", Port::Tcp80));

    // An adopted gateway whose device lacks the address is reported, and left as it is.
    assert!(agent.stop().success());
    let started = Instant::now();
    let mut agent = start_agent(&tb, &["--gateway", "gw0", "--gateway-ip", "10.10.0.1/16"]);
    let warning = agent.wait_log("holds 10.10.0.254/16, not the configured gateway address 10.10.0.1/16", WITHIN);
    assert!(warning.contains("WARN") && warning.contains("gw0"), "{warning}");
    assert_eq!(gateways(&tb), ["gw0"]);
    let addr = node_ip(&tb, &["addr", "show", "dev", "gw0"]);
    assert!(!addr.contains("10.10.0.1/"), "npagent changed an adopted gateway: {addr}");
    assert!(started.elapsed() < WITHIN * 2);
    assert!(agent.stop().success());
}

#[test]
fn without_gateway_ip_the_adopted_gateways_own_addresses_are_the_nodes() {
    let tb = Testbed::start_with_outside();
    write_atomic(&tb.manifests_dir().join("namespaces.yaml"), NAMESPACES_X_LOGGING);
    write_atomic(&tb.manifests_dir().join("a-from-b.yaml"), A_FROM_B);
    let addr = node_ip(&tb, &["addr", "show", "dev", "gw0"]);
    assert!(addr.contains("inet 10.10.0.254/16"), "the testbed's gateway holds no 10.10.0.254/16: {addr}");

    let mut agent = start_agent_without_gateway_ip(&tb);
    let said = agent.wait_log("gateway gw0 (ofport 32769) adopted, holding", WITHIN);
    assert!(said.contains("holding 10.10.0.254/16: the gateway's addresses, read from its device"), "{said}");
    for port in Port::ALL {
        // kubelet's probes: from the address the node's stack gives the gateway.
        eventually(&format!("the node reaches isolated x/a on {port} from its gateway's own address"), || {
            tb.node_reaches("x/a", port)
        });
        // Traffic the node only forwards, and other pods, still meet x/a's policy.
        assert!(!tb.reaches("outside/h1", "x/a", port), "outside/h1 reached isolated x/a on {port}");
        assert!(!tb.reaches("x/c", "x/a", port), "x/c reached isolated x/a on {port}");
        // Control: the pod the policy allows.
        eventually(&format!("x/b reaches x/a on {port}"), || tb.reaches("x/b", "x/a", port));
    }
    assert!(flows_name(&tb, "10.10.0.254"), "no flow names the gateway's address 10.10.0.254");

    // The device's addresses are followed: 10.10.0.254 replaced by 10.10.0.253 (with IPv6 on
    // the device, whose link-local addresses are never the gateway's).
    let node = |args: &[&str]| {
        let out = output(Command::new("ip").args(["netns", "exec", &tb.sandbox.netns]).args(args));
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    node(&["sysctl", "-qw", "net.ipv6.conf.gw0.disable_ipv6=0"]);
    node(&["ip", "addr", "add", "fe80::1/64", "dev", "gw0", "nodad"]);
    node(&["ip", "addr", "del", "10.10.0.254/16", "dev", "gw0"]);
    node(&["ip", "addr", "add", "10.10.0.253/16", "dev", "gw0"]);
    let said = agent.wait_log("adopted, holding 10.10.0.253", WITHIN);
    assert!(said.contains("holding 10.10.0.253/16: the gateway's addresses"), "{said}");
    eventually("no flow names the address the gateway no longer holds", || !flows_name(&tb, "10.10.0.254"));
    for port in Port::ALL {
        eventually(&format!("the node reaches isolated x/a on {port} from the gateway's new address"), || {
            tb.node_reaches("x/a", port)
        });
        assert!(!tb.reaches("outside/h1", "x/a", port), "outside/h1 reached isolated x/a on {port}");
    }
    assert!(agent.stop().success());
}

#[test]
fn a_configured_gateway_address_the_device_does_not_hold_is_a_warning_and_wins() {
    let tb = Testbed::start();
    write_atomic(&tb.manifests_dir().join("namespaces.yaml"), NAMESPACES_X_LOGGING);
    write_atomic(&tb.manifests_dir().join("a-from-b.yaml"), A_FROM_B);

    let mut agent = start_agent(&tb, &["--gateway-ip", "10.10.0.1/16"]);
    let warning = agent.wait_log("gateway gw0 (ofport 32769) adopted", WITHIN);
    assert!(
        warning.contains("WARN")
            && warning.contains("its device holds 10.10.0.254/16, not the configured gateway address 10.10.0.1/16"),
        "{warning}"
    );
    // The configured address is the gateway's: the node's connections from the device's own
    // address are not the node's, and meet x/a's policy.
    eventually("control: x/b reaches x/a", || tb.reaches("x/b", "x/a", Port::Tcp80));
    assert!(flows_name(&tb, "10.10.0.1") && !flows_name(&tb, "10.10.0.254"), "{:#?}", tb.sandbox.dump_flows());
    for port in Port::ALL {
        assert!(!tb.node_reaches("x/a", port), "the node reached isolated x/a on {port} from an unconfigured address");
    }
    let addr = node_ip(&tb, &["addr", "show", "dev", "gw0"]);
    assert!(!addr.contains("10.10.0.1/"), "npagent changed an adopted gateway: {addr}");
    assert!(agent.stop().success());
}
