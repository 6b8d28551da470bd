//! A hostile pod against npagent's enforcement, with real packets on the testbed: group and
//! unknown destination MACs, a forged source address from a raw socket, an ARP claim of
//! another pod's address. Each attack gets through a pipeline without SpoofGuard or without
//! classification by IP address; each has a control that a genuine pod gets through. A
//! dual-stack pod cannot fail another pod's duplicate address detection. Needs
//! root.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::agent::Agent;
use support::policy::allow_ingress;
use support::sandbox::repo_path;
use support::{write_atomic, Port, Testbed};

/// x/a accepts only x/b (every port).
fn a_from_b() -> String {
    allow_ingress("x", "a-from-b", "a", "b", &[])
}

struct Node {
    tb: Testbed,
    agent: Option<Agent>,
}

impl Node {
    /// The testbed with npagent enforcing [`a_from_b`].
    fn start() -> Node {
        let tb = Testbed::start();
        write_atomic(&tb.manifests_dir().join("a-from-b.yaml"), &a_from_b());
        let agent = Agent::spawn(&tb.sandbox, &tb.manifests_dir(), &tb.sandbox.dir.join("npagent.log"), &[]);
        let node = Node { tb, agent: Some(agent) };
        let deadline = Instant::now() + Duration::from_secs(20);
        let enforced = |tb: &Testbed| tb.reaches("x/b", "x/a", Port::Udp80) && !tb.reaches("x/c", "x/a", Port::Udp80);
        while !enforced(&node.tb) {
            assert!(Instant::now() < deadline, "policy not enforced within 20 s");
        }
        node
    }

    /// Runs `testbed/attack.py` in pod `id`'s network namespace; returns its stdout.
    fn attack(&self, id: &str, args: &[&str]) -> String {
        let script = repo_path("testbed/attack.py");
        let mut all = vec!["python3", script.to_str().unwrap()];
        all.extend_from_slice(args);
        let out = self.tb.pod_exec(id, &all);
        assert!(out.status.success(), "attack.py {args:?} in {id}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Stops npagent; its flows stay on the bridge.
    fn stop_agent(&mut self) {
        if let Some(agent) = self.agent.take() {
            assert!(agent.stop().success(), "npagent did not exit cleanly");
        }
    }

    /// Whether a datagram forged with `victim`'s address, sent by `attacker` to `target`:80,
    /// is answered (the echo lands on the victim, where a listener counts it).
    fn forged_datagram_answered(&self, attacker: &str, victim: &str, target: &str, sport: u16) -> bool {
        let (victim, target) = (self.tb.pod(victim), self.tb.pod(target));
        let sport = sport.to_string();
        let mut listener = Command::new("ip")
            .args(["netns", "exec", &victim.netns, "python3", repo_path("testbed/attack.py").to_str().unwrap()])
            .args(["udp-listen", "--port", &sport, "--timeout", "2"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start listener");
        let mut ready = String::new();
        BufReader::new(listener.stderr.take().unwrap()).read_line(&mut ready).unwrap();
        assert_eq!(ready.trim(), "ready");
        self.attack(
            attacker,
            &[
                "udp-spoof",
                "--src",
                &victim.ip,
                "--sport",
                &sport,
                "--dst",
                &target.ip,
                "--dport",
                "80",
                "--count",
                "5",
            ],
        );
        let out = listener.wait_with_output().unwrap();
        String::from_utf8_lossy(&out.stdout).trim() != "0"
    }

    /// Pod `id`'s neighbour entry for `ip`, as `ip neigh` prints it.
    fn neighbour(&self, id: &str, ip: &str) -> String {
        String::from_utf8_lossy(&self.tb.pod_exec(id, &["ip", "neigh", "show", ip]).stdout).to_lowercase()
    }

    /// Makes pod `id` send to `ip` with destination MAC `mac` (`None`: back to ARP).
    fn set_neighbour(&self, id: &str, ip: &str, mac: Option<&str>) {
        let args: Vec<&str> = match mac {
            Some(mac) => vec!["ip", "neigh", "replace", ip, "lladdr", mac, "dev", "eth0", "nud", "permanent"],
            None => vec!["ip", "neigh", "del", ip, "dev", "eth0"],
        };
        let out = self.tb.pod_exec(id, &args);
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
}

#[test]
fn group_and_unknown_destination_macs_do_not_skip_ingress_policy() {
    let node = Node::start();
    let a = node.tb.pod("x/a");
    for mac in ["ff:ff:ff:ff:ff:ff", "01:00:5e:00:00:01", "33:33:00:00:00:01", "02:00:00:00:00:99"] {
        node.set_neighbour("x/c", &a.ip, Some(mac));
        node.set_neighbour("x/b", &a.ip, Some(mac));
        for port in [Port::Udp80, Port::Tcp80] {
            assert!(!node.tb.reaches("x/c", "x/a", port), "x/c reached isolated x/a on {port:?} through MAC {mac}");
        }
        // Control: a group MAC still gets the allowed pod's datagrams to x/a, through its
        // policy (a unicast MAC that is not x/a's is discarded by x/a's own stack).
        if mac != "02:00:00:00:00:99" {
            assert!(node.tb.reaches("x/b", "x/a", Port::Udp80), "allowed x/b lost x/a through MAC {mac}");
        }
    }
    node.set_neighbour("x/c", &a.ip, None);
    node.set_neighbour("x/b", &a.ip, None);
    assert!(node.tb.reaches("x/b", "x/a", Port::Udp80));
}

#[test]
fn forged_source_address_is_dropped() {
    let node = Node::start();
    for (attacker, sport) in [("y/a", 40001), ("x/c", 40003)] {
        assert!(
            !node.forged_datagram_answered(attacker, "x/b", "x/a", sport),
            "{attacker}'s datagram forged as x/b's reached x/a"
        );
    }
    // Control: x/b itself gets its echo.
    let a = node.tb.pod("x/a");
    assert_eq!(node.attack("x/b", &["udp-echo", "--dst", &a.ip, "--dport", "80", "--sport", "40002"]), "1");
}

/// The flows stay when npagent stops, and so does the protection: no window for a hostile pod
/// while the agent restarts.
#[test]
fn enforcement_holds_while_npagent_is_down() {
    let mut node = Node::start();
    node.stop_agent();
    assert!(
        !node.forged_datagram_answered("y/a", "x/b", "x/a", 40005),
        "forged datagram answered while npagent was down"
    );
    let a = node.tb.pod("x/a");
    node.set_neighbour("x/c", &a.ip, Some("ff:ff:ff:ff:ff:ff"));
    assert!(
        !node.tb.reaches("x/c", "x/a", Port::Udp80),
        "x/c reached isolated x/a through a broadcast MAC while npagent was down"
    );
    assert!(node.tb.reaches("x/b", "x/a", Port::Udp80), "the allowed pod lost x/a while npagent was down");
}

#[test]
fn arp_claim_of_another_pods_address_is_dropped() {
    let node = Node::start();
    let (a, b, attacker) = (node.tb.pod("x/a"), node.tb.pod("x/b"), node.tb.pod("y/a"));
    let attacker_mac = attacker.mac.to_lowercase();
    node.attack("y/a", &["arp-claim", "--iface", "eth0", "--spa", &b.ip, "--tpa", &a.ip]);
    // Control: x/a learns y/a's own address (the switch answers x/a's ARP for it).
    assert!(node.tb.reaches("x/a", "y/a", Port::Udp80));
    let deadline = Instant::now() + Duration::from_secs(2);
    while !node.neighbour("x/a", &attacker.ip).contains(&attacker_mac) {
        assert!(
            Instant::now() < deadline,
            "x/a never learned y/a's own address: {}",
            node.neighbour("x/a", &attacker.ip)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let entry = node.neighbour("x/a", &b.ip);
    assert!(!entry.contains(&attacker_mac), "x/a believes y/a holds x/b's address: {entry}");
}

/// Pod `id` with IPv6 on and `v6` added to its OVSDB `ip-address` (a dual-stack pod).
fn dual_stack(node: &Node, id: &str, v6: &str) {
    let pod = node.tb.pod(id);
    let sysctl = ["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=0", "net.ipv6.conf.eth0.disable_ipv6=0"];
    assert!(node.tb.pod_exec(id, &sysctl).status.success());
    node.tb.sandbox.vsctl(&["set", "Interface", &pod.iface, &format!("external_ids:ip-address=\"{},{v6}\"", pod.ip)]);
}

/// Pod `id`'s IPv6 address `v6` once its duplicate address detection is over: `ip addr`'s
/// flags for it (`dadfailed` when another holder answered).
fn settled_v6(node: &Node, id: &str, v6: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let out = node.tb.pod_exec(id, &["ip", "-6", "addr", "show", "dev", "eth0"]);
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let line = text.lines().find(|l| l.contains(&format!("{v6}/"))).unwrap_or_default().to_string();
        if line.contains("dadfailed") || !line.contains("tentative") {
            return line;
        }
        assert!(Instant::now() < deadline, "{v6} still tentative in {id}: {text}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn duplicate_address_detection_of_another_pod_cannot_be_failed() {
    let node = Node::start();
    let (victim, attacker) = ("fd00:10::13", "fd00:10::21");
    dual_stack(&node, "x/c", victim);
    dual_stack(&node, "y/a", attacker);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !node.tb.sandbox.dump_flows().iter().any(|f| f.contains(&format!("nd_target={victim}"))) {
        assert!(Instant::now() < deadline, "no neighbour discovery flows for {victim}");
        std::thread::sleep(Duration::from_millis(100));
    }
    // Control: the attacker's own address passes its own detection.
    let add = |id: &str, a: &str| {
        let out = node.tb.pod_exec(id, &["ip", "-6", "addr", "add", &format!("{a}/64"), "dev", "eth0"]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    };
    add("y/a", attacker);
    let own = settled_v6(&node, "y/a", attacker);
    assert!(!own.contains("dadfailed") && !own.is_empty(), "y/a's own address: {own}");

    // y/a claims, from ::, the address x/c is detecting.
    let probes = node
        .tb
        .spawn_attack(&node.tb.pod("y/a").netns, &["nd-dad", "--iface", "eth0", "--target", victim, "--seconds", "4"]);
    add("x/c", victim);
    let line = settled_v6(&node, "x/c", victim);
    let _ = support::finish(probes);
    assert!(!line.contains("dadfailed"), "y/a's probes failed x/c's duplicate address detection: {line}");
    // And the address works: y/a reaches it (neighbour discovery from y/a's own address).
    let ping = node.tb.pod_exec("y/a", &["ping", "-6", "-c", "1", "-W", "3", victim]);
    assert!(ping.status.success(), "y/a cannot reach x/c at {victim}: {}", String::from_utf8_lossy(&ping.stdout));
}
