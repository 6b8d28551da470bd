//! A cluster, not a node: two nodes (`testbed/cluster`, each its own OVS and br-int, joined by
//! an underlay), one npagent per node in routed mode, real packets between pods of both nodes
//! and to the internet host. Needs root.
//!
//! - The NetworkPolicy scenarios of `testbed/scenarios` with x's pods on n1 and y's and z's on
//!   n2 give the single-node truth tables: ingress is judged on the destination's node,
//!   egress on the source's.
//! - The source address survives between nodes (the server sees the client pod's), each node
//!   logs its own verdicts naming the remote peer.
//! - Pods reach the internet host only masqueraded, after their egress policy.
//! - Routes follow the Node objects and never touch a route npagent did not make; an agent
//!   restart leaves its routes in place throughout.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

mod support;

#[path = "e2e_scenarios/harness.rs"]
mod harness;
#[path = "e2e_scenarios/scenario.rs"]
mod scenario;

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use harness::{probed_port, scenarios_dir, selected, ManifestDir};
use scenario::{all_probes, mismatches, truth_table, Observed, PodId, PortKey, Scenario, Step};
use serde_json::Value;
use support::agent::Agent;
use support::audit_log::{json_lines, pod_id, wait_json_line};
use support::cluster::Cluster;
use support::{wait_until, write_atomic, Port, Testbed};

/// How long after writing a step's manifests a match still has to be confirmed (each agent's
/// convergence bound is 1 s).
const SETTLE: Duration = Duration::from_millis(1200);
/// Give up on a step this long after writing its manifests.
const DEADLINE: Duration = Duration::from_secs(6);

/// Both agents with the JSON audit log, each in the cluster's directory.
fn start_agents(cluster: &Cluster, dir: &Path) -> Vec<Agent> {
    ["n1", "n2"]
        .iter()
        .map(|n| cluster.start_agent(n, &dir.join(format!("{n}-np.log")), &["--audit-format", "json"]))
        .collect()
}

/// Probes the pods of `endpoints` on the probed ports (TCP 80, TCP 81, UDP 80).
fn observe(cluster: &Cluster, endpoints: &BTreeSet<PodId>, probes: &[scenario::Probe]) -> Observed {
    for node in &cluster.nodes {
        node.sandbox.flush_datapath();
    }
    let ids: Vec<String> = endpoints.iter().map(PodId::to_string).collect();
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    let reach = cluster.probe(&ids, &ids);
    let mut observed = Observed::new();
    for p in probes {
        if let Some(port) = probed_port(p.port) {
            observed.insert(p.clone(), reach.get(&p.from.to_string(), &p.to.to_string(), port));
        }
    }
    observed
}

/// Writes `step` and probes until it holds through [`SETTLE`]; the failure report otherwise.
fn run_step(cluster: &Cluster, pods: &BTreeSet<PodId>, dir: &mut ManifestDir, step: &Step) -> Result<(), String> {
    let ports: BTreeSet<PortKey> = PortKey::PROBED.into_iter().collect();
    let probes = all_probes(pods, &ports);
    let start = Instant::now();
    dir.apply(step);
    let mut first_match = None;
    loop {
        let observed = observe(cluster, pods, &probes);
        let wrong = mismatches(&step.expect, &probes, &observed);
        let elapsed = start.elapsed();
        if wrong.is_empty() {
            let at = *first_match.get_or_insert(elapsed);
            if elapsed >= at + SETTLE {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(300));
            continue;
        }
        first_match = None;
        if elapsed >= DEADLINE {
            let mut report = format!("{} of {} probes wrong:\n", wrong.len(), probes.len());
            for (p, want, got) in &wrong {
                report.push_str(&format!("  {p}: expected {want}, observed {got:?}\n"));
            }
            report.push_str(&truth_table(&step.expect, pods, &ports, &observed));
            return Err(report);
        }
    }
}

#[test]
fn the_scenarios_across_two_nodes_give_the_single_node_truth_tables() {
    let _serial = harness::timing_lock();
    let cluster = Cluster::start();
    let mut dir = ManifestDir::open(&cluster.manifests_dir());
    // The scenarios may name the single-node testbed's outside hosts; the cluster has none
    // of them: their cells are not probed, every pod's are.
    let base = dir.base().with_outside(&Testbed::planned_outside_hosts()).unwrap_or_else(|e| panic!("{e}"));
    let scenarios = Scenario::load_dir(&scenarios_dir(), &base).unwrap_or_else(|e| panic!("{e}"));
    let pods = base.pods();
    assert_eq!(pods.len(), 9);
    let logs = tempfile::tempdir().unwrap();
    let mut agents = start_agents(&cluster, logs.path());

    let baseline = Step { doc: "baseline".into(), ..Default::default() };
    run_step(&cluster, &pods, &mut dir, &baseline).unwrap_or_else(|e| panic!("no policy, across nodes:\n{e}"));

    let (mut passed, mut failed) = (0, Vec::new());
    for s in scenarios.iter().filter(|s| selected(s)) {
        let outcome = s.steps.iter().enumerate().find_map(|(i, step)| {
            run_step(&cluster, &pods, &mut dir, step).err().map(|e| format!("{} step {}: {e}", s.file, i + 1))
        });
        match outcome {
            None => {
                eprintln!("ok    {}", s.file);
                passed += 1;
            }
            Some(report) => {
                eprintln!("FAIL  {report}\nn1:\n{}\nn2:\n{}", agents[0].log_tail(20), agents[1].log_tail(20));
                failed.push(s.file.clone());
            }
        }
        dir.reset();
        assert!(agents.iter_mut().all(Agent::alive), "an agent exited");
    }
    eprintln!("{passed} scenarios passed across two nodes");
    assert!(passed + failed.len() >= scenarios.len() || std::env::var_os("NPA_SCENARIOS").is_some());
    assert!(failed.is_empty(), "failed across two nodes: {failed:?}");
}

const LOGGING_NAMESPACES: &str = "apiVersion: v1
kind: Namespace
metadata:
  name: x
  labels: {ns: x}
  annotations: {networkpolicy.antrea.io/enable-logging: \"true\"}
---
apiVersion: v1
kind: Namespace
metadata:
  name: y
  labels: {ns: y}
  annotations: {networkpolicy.antrea.io/enable-logging: \"true\"}
---
apiVersion: v1
kind: Namespace
metadata: {name: z, labels: {ns: z}}
";

/// x/a may open connections to y's pods only (egress, judged on n1); y/a admits x/a only
/// (ingress, judged on n2).
const POLICIES: &str = "apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {namespace: x, name: a-to-y-only}
spec:
  podSelector: {matchLabels: {pod: a}}
  policyTypes: [Egress]
  egress:
  - to:
    - namespaceSelector: {matchLabels: {ns: y}}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {namespace: y, name: a-from-x-a}
spec:
  podSelector: {matchLabels: {pod: a}}
  ingress:
  - from:
    - namespaceSelector: {matchLabels: {ns: x}}
      podSelector: {matchLabels: {pod: a}}
";

/// Is JSON line `l` a verdict of this disposition and direction from pod `from` to `to`?
fn verdict(l: &Value, disposition: &str, direction: &str, from: &str, to: &str) -> bool {
    l["disposition"] == disposition
        && l["direction"] == direction
        && pod_id(&l["source"]).as_deref() == Some(from)
        && pod_id(&l["destination"]).as_deref() == Some(to)
}

#[test]
fn each_node_judges_and_logs_its_direction_and_the_server_sees_the_client_pod() {
    let cluster = Cluster::start();
    let logs = tempfile::tempdir().unwrap();
    let manifests = cluster.manifests_dir();
    write_atomic(&manifests.join("namespaces.yaml"), LOGGING_NAMESPACES);
    write_atomic(&manifests.join("policies.yaml"), POLICIES);
    let _agents = start_agents(&cluster, logs.path());
    let (n1_log, n2_log) = (logs.path().join("n1-np.log"), logs.path().join("n2-np.log"));

    wait_until(Duration::from_secs(10), "x/a reaches y/a across the nodes", || {
        cluster.reaches("x/a", "y/a", Port::Tcp80)
    });
    // The server on n2 saw the client pod's own address: nothing between pod subnets is
    // masqueraded.
    let x_a = cluster.pod("x/a").ip;
    assert!(cluster.peers_of("y/a").lines().any(|l| l == format!("tcp/80 {x_a}")), "{}", cluster.peers_of("y/a"));
    // x/a's egress policy: allowed to y's pods, denied to z/a (all on n2), judged on n1.
    let to_y = cluster.probe(&["x/a"], &["y/a", "y/b", "z/a"]);
    for (to, want) in [("y/a", true), ("y/b", true), ("z/a", false)] {
        assert_eq!(to_y.get("x/a", to, Port::Tcp80), want, "x/a -> {to}:\n{to_y}");
    }
    // y/a's ingress policy: x/b (on n1) is dropped on n2.
    assert!(!cluster.reaches("x/b", "y/a", Port::Tcp80), "x/b reached y/a past its ingress policy");
    assert!(cluster.reaches("x/b", "y/b", Port::Tcp80), "control: x/b reaches y/b, which no policy isolates");

    // n1 logs x/a's egress verdicts, naming the remote pod; n2 logs y/a's ingress verdicts,
    // naming the remote client.
    let within = Duration::from_secs(10);
    wait_json_line(&n1_log, 0, within, "n1's Allow of x/a -> y/a", |l| {
        verdict(l, "Allow", "Egress", "x/a", "y/a") && l["policy"]["name"] == "a-to-y-only"
    });
    wait_json_line(&n1_log, 0, within, "n1's Drop of x/a -> z/a", |l| verdict(l, "Drop", "Egress", "x/a", "z/a"));
    wait_json_line(&n2_log, 0, within, "n2's Allow of x/a -> y/a", |l| {
        verdict(l, "Allow", "Ingress", "x/a", "y/a") && l["policy"]["name"] == "a-from-x-a"
    });
    wait_json_line(&n2_log, 0, within, "n2's Drop of x/b -> y/a", |l| verdict(l, "Drop", "Ingress", "x/b", "y/a"));
    // Each node writes the verdicts of its own direction only.
    assert!(
        json_lines(&n2_log)
            .iter()
            .all(|l| l["direction"] != "Egress" || pod_id(&l["source"]).as_deref() != Some("x/a")),
        "n2 logged an egress verdict of n1's pod"
    );
    assert!(
        json_lines(&n1_log)
            .iter()
            .all(|l| l["direction"] != "Ingress" || pod_id(&l["destination"]).as_deref() != Some("y/a")),
        "n1 logged an ingress verdict of n2's pod"
    );
}

#[test]
fn pods_reach_the_internet_masqueraded_after_their_egress_policy() {
    let cluster = Cluster::start();
    let logs = tempfile::tempdir().unwrap();
    write_atomic(&cluster.manifests_dir().join("namespaces.yaml"), LOGGING_NAMESPACES);
    write_atomic(&cluster.manifests_dir().join("policies.yaml"), POLICIES);
    let _agents = start_agents(&cluster, logs.path());
    let inet = "outside/inet";
    wait_until(Duration::from_secs(10), "x/b reaches the internet host", || cluster.reaches("x/b", inet, Port::Tcp80));
    for pod in ["y/b", "z/c"] {
        assert!(cluster.reaches(pod, inet, Port::Tcp80), "{pod} (on n2) does not reach the internet host");
        assert!(cluster.reaches(pod, inet, Port::Udp80), "{pod} (on n2) does not reach the internet host on UDP");
    }
    // The internet host saw the nodes' addresses, never a pod's: n1's own on its side, n2's
    // underlay address (n1 routes it).
    let peers = cluster.internet_peers();
    let seen: BTreeSet<&str> = peers.lines().filter_map(|l| l.split_whitespace().nth(1)).collect();
    assert_eq!(seen, BTreeSet::from(["198.51.100.1", cluster.node("n2").internal_ip.as_str()]), "{peers}");
    // x/a's egress policy admits y's pods only: the internet host is denied before any
    // masquerade, and n1 logs it.
    assert!(!cluster.reaches("x/a", inet, Port::Tcp80), "x/a reached the internet host past its egress policy");
    let n1_log = logs.path().join("n1-np.log");
    wait_json_line(&n1_log, 0, Duration::from_secs(10), "n1's Drop of x/a -> the internet host", |l| {
        l["disposition"] == "Drop"
            && pod_id(&l["source"]).as_deref() == Some("x/a")
            && l["destination"]["ip"] == "198.51.100.10"
    });
}

const NODE_N3: &str = "apiVersion: v1
kind: Node
metadata: {name: n3}
spec: {podCIDR: 10.10.4.0/23}
status:
  addresses:
  - {type: InternalIP, address: 192.168.77.13}
";

#[test]
fn routes_follow_the_nodes_and_leave_other_routes_alone() {
    let cluster = Cluster::start();
    let logs = tempfile::tempdir().unwrap();
    let n1 = cluster.node("n1");
    let n2_cidr = cluster.node("n2").pod_cidr.clone();
    // Routes npagent did not make: one to a destination a Node will want, one elsewhere.
    n1.ip(&["route", "add", "10.10.4.0/23", "via", "192.168.77.12"]);
    n1.ip(&["route", "add", "10.99.0.0/24", "via", "192.168.77.12"]);
    let foreign = (n1.routes_to("10.10.4.0/23"), n1.routes_to("10.99.0.0/24"));
    write_atomic(&cluster.manifests_dir().join("node-n3.yaml"), NODE_N3);
    let mut agents = start_agents(&cluster, logs.path());
    let via_n2 = format!("{n2_cidr} via 192.168.77.12 dev ul0 proto 78");
    wait_until(Duration::from_secs(10), "n1's route to n2's pods", || n1.routes_to(&n2_cidr) == via_n2);
    assert!(cluster.reaches("x/a", "y/a", Port::Tcp80));
    agents[0].wait_log("10.10.4.0/23", Duration::from_secs(10));
    assert_eq!((n1.routes_to("10.10.4.0/23"), n1.routes_to("10.99.0.0/24")), foreign, "a route not npagent's changed");

    // n2's Node goes: its route goes, the others stay.
    let n2_manifest = cluster.manifests_dir().join("node-n2.yaml");
    let n2_text = std::fs::read_to_string(&n2_manifest).unwrap();
    std::fs::remove_file(&n2_manifest).unwrap();
    wait_until(Duration::from_secs(10), "n1's route to n2's pods removed", || n1.routes_to(&n2_cidr).is_empty());
    assert!(!cluster.reaches("x/a", "y/a", Port::Tcp80), "x/a reached y/a with no route to n2's pods");
    assert_eq!((n1.routes_to("10.10.4.0/23"), n1.routes_to("10.99.0.0/24")), foreign, "a route not npagent's changed");

    // It comes back: so does its route, and the connections.
    write_atomic(&n2_manifest, &n2_text);
    wait_until(Duration::from_secs(10), "n1's route to n2's pods back", || n1.routes_to(&n2_cidr) == via_n2);
    wait_until(Duration::from_secs(10), "x/a reaches y/a again", || cluster.reaches("x/a", "y/a", Port::Tcp80));
    assert_eq!((n1.routes_to("10.10.4.0/23"), n1.routes_to("10.99.0.0/24")), foreign, "a route not npagent's changed");
    assert!(agents.iter_mut().all(Agent::alive));
}

#[test]
fn an_agent_restart_keeps_the_routes_and_cross_node_connections() {
    let cluster = Cluster::start();
    let logs = tempfile::tempdir().unwrap();
    let mut agents = start_agents(&cluster, logs.path());
    let n1 = cluster.node("n1");
    let n2_cidr = cluster.node("n2").pod_cidr.clone();
    wait_until(Duration::from_secs(10), "x/a reaches y/a", || cluster.reaches("x/a", "y/a", Port::Tcp80));
    let route = n1.routes_to(&n2_cidr);
    assert!(route.contains("proto 78"), "{route}");

    // Watch the route while n1's agent stops and starts again: it is there at every look.
    let stop = std::sync::atomic::AtomicBool::new(false);
    let (looks, gaps) = std::thread::scope(|s| {
        let watcher = s.spawn(|| {
            let (mut looks, mut gaps) = (0, 0);
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                looks += 1;
                if n1.routes_to(&n2_cidr) != route {
                    gaps += 1;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            (looks, gaps)
        });
        let old = agents.remove(0);
        let status = old.stop();
        assert!(status.success(), "n1's agent did not stop cleanly: {status}");
        // Between the two agents the bridge keeps its flows and the node its route.
        assert!(cluster.reaches("x/a", "y/a", Port::Tcp80), "x/a lost y/a while n1's agent was away");
        agents.insert(0, cluster.start_agent("n1", &logs.path().join("n1-np.log"), &["--audit-format", "json"]));
        assert!(cluster.reaches("x/a", "y/a", Port::Tcp80), "x/a lost y/a after n1's agent restarted");
        std::thread::sleep(Duration::from_secs(6)); // a keeper's check (every 5 s) after the restart
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        watcher.join().unwrap()
    });
    assert!(looks > 50, "only {looks} looks at the route");
    assert_eq!(gaps, 0, "the route to n2's pods was missing or changed at {gaps} of {looks} looks");
}

/// y/a admits z/c (its neighbour on n2) only.
const Y_A_FROM_Z_C: &str = "apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {namespace: y, name: a-from-z-c}
spec:
  podSelector: {matchLabels: {pod: a}}
  ingress:
  - from:
    - namespaceSelector: {matchLabels: {ns: z}}
      podSelector: {matchLabels: {pod: c}}
";

/// How many of pod `id`'s listener's peers were `ip` on UDP 80.
fn udp_peers(cluster: &Cluster, id: &str, ip: &str) -> usize {
    cluster.peers_of(id).lines().filter(|l| *l == format!("udp/80 {ip}")).count()
}

#[test]
fn a_host_beyond_the_node_cannot_send_in_a_local_pods_name() {
    let cluster = Cluster::start();
    let logs = tempfile::tempdir().unwrap();
    write_atomic(&cluster.manifests_dir().join("policies.yaml"), Y_A_FROM_Z_C);
    let _agents = start_agents(&cluster, logs.path());
    wait_until(Duration::from_secs(10), "z/c reaches y/a", || cluster.reaches("z/c", "y/a", Port::Udp80));
    assert!(!cluster.reaches("x/c", "y/a", Port::Udp80), "control: x/c reached y/a, which admits z/c only");

    // The internet host routes n2's pods through n1 (its own table: an attacker's choice) and
    // sends UDP in z/c's name (a pod of n2) to y/a, which admits z/c.
    let inet = "outside/inet";
    let out = cluster.pod_exec(inet, &["ip", "route", "add", &cluster.node("n2").pod_cidr, "via", "198.51.100.1"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let (z_c, y_a) = (cluster.pod("z/c").ip, cluster.pod("y/a").ip);
    let before = udp_peers(&cluster, "y/a", &z_c);
    let spoof = |src: &str, dst: &str| {
        cluster.attack(
            inet,
            &["udp-spoof", "--src", src, "--sport", "4444", "--dst", dst, "--dport", "80", "--count", "20"],
        );
    };
    spoof(&z_c, &y_a);
    // Control: the same path delivers datagrams in a name outside every pod subnet to y/b,
    // which admits everyone.
    let stranger = "203.0.113.5";
    spoof(stranger, &cluster.pod("y/b").ip);
    wait_until(Duration::from_secs(5), "the control's datagrams at y/b", || udp_peers(&cluster, "y/b", stranger) >= 20);
    assert_eq!(udp_peers(&cluster, "y/a", &z_c), before, "datagrams in z/c's name from beyond n2 reached y/a");
}
