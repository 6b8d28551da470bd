//! A fair and complete audit log, with real packets on the testbed: one pod's flood of new
//! connections does not silence another pod's Allow lines (each pod has meters of its own,
//! and a connection's copies pass its source pod's), nor a ClusterNetworkPolicy Pass flood
//! another pod's Pass lines, nor a staged flood another pod's `WouldDrop` lines, nor a flood of forged packets another pod's security events; the gap
//! record of what was shed names the flooding pod and the meter; and the drops that no policy makes
//! (SpoofGuard's forged sources and tagged frames, conntrack's invalid packets) are logged as
//! security events naming the pod that sent them, whatever the namespace's logging switch
//! says. Needs root.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

mod support;

use serde_json::Value;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};
use support::agent::Agent;
use support::audit_log::{json_lines, pod_id, wait_json_line};
use support::{write_atomic, Testbed, NAMESPACES_X_LOGGING};

/// x/a and x/c accept everything (so every new connection to them is an Allow line: x logs).
const OPEN_A_AND_C: &str = "apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: open, namespace: x}
spec:
  podSelector: {matchExpressions: [{key: pod, operator: In, values: [a, c]}]}
  ingress: [{}]
";

/// Allow copies per second per pod in these tests: a flood exceeds it at once.
const ALLOW_RATE: &str = "10";

fn allow_to(v: &Value, ip: &str) -> bool {
    v["disposition"] == "Allow" && v["destination"]["ip"] == ip
}

#[test]
fn one_pods_flood_does_not_silence_another_pods_allow_lines() {
    let tb = Testbed::start();
    write_atomic(&tb.manifests_dir().join("namespaces.yaml"), NAMESPACES_X_LOGGING);
    write_atomic(&tb.manifests_dir().join("open.yaml"), OPEN_A_AND_C);
    let np_log = tb.sandbox.dir.join("np.log");
    // Gap records are written with the hash chain.
    let args = ["--audit-format", "json", "--audit-chain", "--audit-allow-rate", ALLOW_RATE];
    let _agent = Agent::start(&tb.sandbox, &tb.manifests_dir(), &np_log, &args);
    let (xa, xc) = (tb.pod("x/a"), tb.pod("x/c"));
    tb.attack("x/b", &["udp-burst", "--dst", &xa.ip, "--dport", "80", "--count", "1"]);
    wait_json_line(&np_log, 0, Duration::from_secs(10), "a first Allow to x/a", |v| allow_to(v, &xa.ip));
    let seen = json_lines(&np_log).len();

    // y/a floods x/c with new connections while x/b opens 15 to x/a, 50 ms apart.
    let flood =
        tb.spawn_attack(&tb.pod("y/a").netns, &["udp-burst", "--dst", &xc.ip, "--dport", "80", "--count", "30000"]);
    std::thread::sleep(Duration::from_millis(300));
    tb.attack("x/b", &["udp-burst", "--dst", &xa.ip, "--dport", "80", "--count", "15", "--interval", "0.05"]);
    let _ = support::finish(flood);

    let deadline = Instant::now() + Duration::from_secs(5);
    let ports = |lines: &[Value]| -> BTreeSet<u64> {
        lines.iter().filter(|v| allow_to(v, &xa.ip)).filter_map(|v| v["source"]["port"].as_u64()).collect()
    };
    while ports(&json_lines(&np_log)[seen..]).len() < 15 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    let lines = json_lines(&np_log);
    let to_c = lines[seen..].iter().filter(|v| allow_to(v, &xc.ip)).count();
    assert_eq!(
        ports(&lines[seen..]).len(),
        15,
        "x/b's 15 connections to x/a each make an Allow line beside y/a's flood ({to_c} lines of it)"
    );
    assert!(to_c < 1000, "the flood to x/c is metered ({to_c} lines)");

    // The flood's shed copies are a gap naming y/a, whose meter they passed (the meters are
    // read every 10 s).
    let gap = wait_json_line(&np_log, seen, Duration::from_secs(25), "a meter gap for y/a", |v| {
        v["type"] == "gap" && v["cause"] == "meter" && v["disposition"] == "Allow"
    });
    assert_eq!(pod_id(&gap["pod"]).as_deref(), Some("y/a"), "{gap}");
    assert!(gap["shed"].as_u64().unwrap() > 0, "{gap}");
}

#[test]
fn security_events_name_the_pod_that_sent_them_without_any_logging_switch() {
    let tb = Testbed::start();
    let np_log = tb.sandbox.dir.join("np.log");
    let _agent = Agent::start(&tb.sandbox, &tb.manifests_dir(), &np_log, &["--audit-format", "json"]);
    let (ya, xa, xb) = (tb.pod("y/a"), tb.pod("x/a"), tb.pod("x/b"));
    let event = |v: &Value, name: &str| v["policy"]["kind"] == "SecurityEvent" && v["policy"]["name"] == name;
    let within = Duration::from_secs(10);

    // Control first: x/b's own traffic is no event.
    assert_eq!(tb.attack("x/b", &["udp-echo", "--dst", &xa.ip, "--dport", "80", "--sport", "40010"]), "1");

    tb.attack("y/a", &["udp-spoof", "--src", &xb.ip, "--sport", "40011", "--dst", &xa.ip, "--dport", "80"]);
    let forged = wait_json_line(&np_log, 0, within, "a ForgedSource event", |v| event(v, "ForgedSource"));
    assert_eq!(
        (forged["table"].as_str(), pod_id(&forged["applied_to"]).as_deref(), forged["source"]["ip"].as_str()),
        (Some("SpoofGuard"), Some("y/a"), Some(xb.ip.as_str())),
        "{forged}"
    );

    let tagged = [
        "frame-send",
        "--iface",
        "eth0",
        "--dst-mac",
        &xa.mac,
        "--kind",
        "udp",
        "--src",
        &ya.ip,
        "--dst",
        &xa.ip,
        "--vlan",
        "5",
    ];
    tb.attack("y/a", &tagged);
    let tagged = wait_json_line(&np_log, 0, within, "a TaggedFrame event", |v| event(v, "TaggedFrame"));
    assert_eq!(pod_id(&tagged["applied_to"]).as_deref(), Some("y/a"), "{tagged}");

    // A SYN+ACK out of nowhere: conntrack calls it invalid.
    tb.attack(
        "y/a",
        &["tcp-raw", "--src", &ya.ip, "--dst", &xa.ip, "--sport", "40012", "--dport", "80", "--flags", "0x12"],
    );
    let invalid = wait_json_line(&np_log, 0, within, "an InvalidConnection event", |v| event(v, "InvalidConnection"));
    assert_eq!(
        (invalid["table"].as_str(), pod_id(&invalid["applied_to"]).as_deref(), invalid["disposition"].as_str()),
        (Some("ConntrackState"), Some("y/a"), Some("Drop")),
        "{invalid}"
    );

    let from_xb =
        json_lines(&np_log).into_iter().filter(|v| pod_id(&v["applied_to"]).as_deref() == Some("x/b")).count();
    assert_eq!(from_xb, 0, "x/b's genuine traffic raised no event:\n{:#?}", json_lines(&np_log));
}

// ---------------------------------------------------------------------------------------
// No local pod sheds another local pod's lines: every class of copy has a meter per pod, and
// a copy of a connection a local pod opened passes that pod's meter.

/// The rates of every logging meter in the floods below: a flood exceeds them at once, and a
/// victim's 10 or 20 lines fit in its own meter's burst (twice the rate).
const FLOOD_RATE: &str = "10";

/// The source ports of the packet lines after the first `skip` that `pred` accepts: one per
/// connection (each datagram of a burst has a port of its own).
fn source_ports(log: &std::path::Path, skip: usize, pred: impl Fn(&Value) -> bool) -> BTreeSet<u64> {
    json_lines(log)[skip..].iter().filter(|v| pred(v)).filter_map(|v| v["source"]["port"].as_u64()).collect()
}

/// Waits up to 5 s for `want` distinct source ports among the lines `pred` accepts.
fn wait_ports(log: &std::path::Path, skip: usize, want: usize, pred: impl Fn(&Value) -> bool) -> BTreeSet<u64> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let ports = source_ports(log, skip, &pred);
        if ports.len() >= want || Instant::now() >= deadline {
            return ports;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The packets the lines `pred` accepts stand for (a line aggregated by the dedup window
/// says how many in `count`).
fn packets(log: &std::path::Path, skip: usize, pred: impl Fn(&Value) -> bool) -> u64 {
    json_lines(log)[skip..].iter().filter(|v| pred(v)).map(|v| v["count"].as_u64().unwrap_or(1)).sum()
}

/// Waits (the meters are read every 10 s) for a gap record of `cause` naming pod `pod`, and
/// returns what it says was shed; no gap of that cause names `victim`.
fn meter_gap(log: &std::path::Path, skip: usize, cause: &str, pod: &str, victim: &str) -> u64 {
    let what = format!("a {cause} gap record naming {pod}");
    let named =
        |v: &Value, who: &str| v["type"] == "gap" && v["cause"] == cause && pod_id(&v["pod"]).as_deref() == Some(who);
    let gap = wait_json_line(log, skip, Duration::from_secs(25), &what, |v| named(v, pod));
    let victims: Vec<Value> = json_lines(log).into_iter().filter(|v| named(v, victim)).collect();
    assert!(victims.is_empty(), "{victim}'s meter shed nothing: {victims:#?}");
    gap["shed"].as_u64().unwrap()
}

/// y/a and x/b both connect to x/a, which accepts everything (x logs): y/a floods, x/b opens
/// 20 connections 50 ms apart. Every copy of a connection a local pod opened passes that
/// pod's own Allow meter, so all 20 of x/b's Allow lines are written; the flood is metered
/// (its pod's meter sheds most of it) and its gap record names y/a, not x/a.
#[test]
fn a_local_pods_allow_flood_into_a_pod_sheds_no_other_local_pods_allow_lines_into_it() {
    let tb = Testbed::start();
    write_atomic(&tb.manifests_dir().join("namespaces.yaml"), NAMESPACES_X_LOGGING);
    write_atomic(&tb.manifests_dir().join("open.yaml"), OPEN_A_AND_C);
    let log = tb.sandbox.dir.join("np.log");
    let args = ["--audit-format", "json", "--audit-chain", "--audit-allow-rate", FLOOD_RATE];
    let _agent = Agent::start(&tb.sandbox, &tb.manifests_dir(), &log, &args);
    let xa = tb.pod("x/a");
    let from = |v: &Value, pod: &str| v["source"]["ip"] == tb.pod(pod).ip.as_str();
    // Control: the setup logs x/b's connections to x/a.
    tb.attack("x/b", &["udp-burst", "--dst", &xa.ip, "--dport", "80", "--count", "1"]);
    wait_json_line(&log, 0, Duration::from_secs(10), "x/b's first Allow to x/a", |v| allow_to(v, &xa.ip));
    let seen = json_lines(&log).len();

    let flood =
        tb.spawn_attack(&tb.pod("y/a").netns, &["udp-burst", "--dst", &xa.ip, "--dport", "80", "--count", "30000"]);
    std::thread::sleep(Duration::from_millis(300));
    tb.attack("x/b", &["udp-burst", "--dst", &xa.ip, "--dport", "80", "--count", "20", "--interval", "0.05"]);
    let _ = support::finish(flood);

    let kept = wait_ports(&log, seen, 20, |v| allow_to(v, &xa.ip) && from(v, "x/b"));
    let flood_lines = source_ports(&log, seen, |v| allow_to(v, &xa.ip) && from(v, "y/a")).len();
    assert_eq!(kept.len(), 20, "x/b's Allow lines into x/a beside y/a's flood into x/a ({flood_lines} lines of it)");
    assert!(flood_lines > 0 && flood_lines < 1000, "the flood is logged and metered ({flood_lines} lines)");
    let shed = meter_gap(&log, seen, "meter", "y/a", "x/b");
    assert!(shed > 0, "y/a's Allow meter shed the flood");
}

/// An Admin ClusterNetworkPolicy hands every connection into x/a to the NetworkPolicies
/// (Pass), which let all in: each new connection is a Pass line and an Allow line, two copies
/// through its source pod's Allow meter. y/a floods x/a while x/b opens 10 connections to it,
/// 100 ms apart (20 copies: within its own meter's rate and burst): all 10 of x/b's Pass lines
/// are written, each before its Allow line; the flood is metered and its gap record names y/a.
#[test]
fn a_pass_flood_sheds_no_other_pods_pass_lines() {
    let tb = Testbed::start();
    write_atomic(&tb.manifests_dir().join("namespaces.yaml"), NAMESPACES_X_LOGGING);
    write_atomic(&tb.manifests_dir().join("open.yaml"), OPEN_A_AND_C);
    let pass = "apiVersion: policy.networking.k8s.io/v1alpha2
kind: ClusterNetworkPolicy
metadata: {name: hand-on}
spec:
  tier: Admin
  priority: 1
  subject: {pods: {namespaceSelector: {matchLabels: {ns: x}}, podSelector: {matchLabels: {pod: a}}}}
  ingress: [{name: to-network-policy, action: Pass, from: [{namespaces: {}}]}]
";
    write_atomic(&tb.manifests_dir().join("pass.yaml"), pass);
    let log = tb.sandbox.dir.join("np.log");
    let args = ["--audit-format", "json", "--audit-chain", "--audit-allow-rate", FLOOD_RATE];
    let _agent = Agent::start(&tb.sandbox, &tb.manifests_dir(), &log, &args);
    let xa = tb.pod("x/a");
    let from = |v: &Value, pod: &str| v["source"]["ip"] == tb.pod(pod).ip.as_str();
    let passed = |v: &Value| v["disposition"] == "Pass" && v["destination"]["ip"] == xa.ip.as_str();
    tb.attack("x/b", &["udp-burst", "--dst", &xa.ip, "--dport", "80", "--count", "1"]);
    wait_json_line(&log, 0, Duration::from_secs(10), "x/b's first Pass into x/a", passed);
    let seen = json_lines(&log).len();

    let flood =
        tb.spawn_attack(&tb.pod("y/a").netns, &["udp-burst", "--dst", &xa.ip, "--dport", "80", "--count", "30000"]);
    std::thread::sleep(Duration::from_millis(300));
    tb.attack("x/b", &["udp-burst", "--dst", &xa.ip, "--dport", "80", "--count", "10", "--interval", "0.1"]);
    let _ = support::finish(flood);

    let kept = wait_ports(&log, seen, 10, |v| passed(v) && from(v, "x/b"));
    let flood_lines = source_ports(&log, seen, |v| passed(v) && from(v, "y/a")).len();
    assert_eq!(kept.len(), 10, "x/b's Pass lines into x/a beside y/a's flood ({flood_lines} lines of it)");
    assert!(flood_lines > 0 && flood_lines < 1000, "the flood is logged and metered ({flood_lines} lines)");
    // Each kept Pass comes before its connection's Allow, which names the Pass in its chain.
    let lines = json_lines(&log);
    for port in &kept {
        let of = |v: &Value| from(v, "x/b") && v["source"]["port"].as_u64() == Some(*port);
        let pass_at = lines.iter().position(|v| passed(v) && of(v)).unwrap();
        let allow_at = lines.iter().position(|v| allow_to(v, &xa.ip) && of(v));
        let allow_at = allow_at.unwrap_or_else(|| panic!("no Allow line for x/b's port {port}"));
        assert!(pass_at < allow_at, "x/b's port {port}: the Pass line first");
        assert_eq!(lines[allow_at]["chain"][0], "Admin/Pass hand-on:to-network-policy", "{}", lines[allow_at]);
    }
    let shed = meter_gap(&log, seen, "meter", "y/a", "x/b");
    assert!(shed > 0, "y/a's Allow meter shed the flood");
}

/// A staged default-deny of x/a's ingress: every new connection to x/a is a `WouldDrop`.
/// y/a floods x/a while x/b opens 10 connections to it, 100 ms apart: a staged copy of a
/// connection a local pod opened passes that pod's own staged meter, so all 10 of x/b's
/// `WouldDrop` lines are written (the staged report shows them); the flood is metered and
/// its gap record (cause `staged-meter`) names y/a.
#[test]
fn a_staged_flood_sheds_no_other_pods_would_drop_lines() {
    let tb = Testbed::start();
    let deny = support::policy::network_policy("x", "deny-a", "{matchLabels: {pod: a}}", "  policyTypes: [Ingress]\n")
        .replace("apiVersion: networking.k8s.io/v1", "apiVersion: policy.npagent.io/v1alpha1")
        .replace("kind: NetworkPolicy", "kind: StagedNetworkPolicy");
    write_atomic(&tb.manifests_dir().join("staged.yaml"), &deny);
    let log = tb.sandbox.dir.join("np.log");
    let args = ["--audit-format", "json", "--audit-chain", "--audit-staged-rate", FLOOD_RATE];
    let _agent = Agent::start(&tb.sandbox, &tb.manifests_dir(), &log, &args);
    let xa = tb.pod("x/a");
    let would_drop = |v: &Value, pod: &str| {
        v["disposition"] == "WouldDrop"
            && v["destination"]["ip"] == xa.ip.as_str()
            && v["source"]["ip"] == tb.pod(pod).ip.as_str()
    };
    // Control: the staged policy is in force and x/b's connections to x/a are WouldDrops.
    tb.attack("x/b", &["udp-burst", "--dst", &xa.ip, "--dport", "80", "--count", "1"]);
    wait_json_line(&log, 0, Duration::from_secs(10), "x/b's first WouldDrop to x/a", |v| would_drop(v, "x/b"));
    std::thread::sleep(Duration::from_millis(1500));
    let seen = json_lines(&log).len();

    let flood =
        tb.spawn_attack(&tb.pod("y/a").netns, &["udp-burst", "--dst", &xa.ip, "--dport", "80", "--count", "30000"]);
    std::thread::sleep(Duration::from_millis(300));
    tb.attack("x/b", &["udp-burst", "--dst", &xa.ip, "--dport", "80", "--count", "10", "--interval", "0.1"]);
    let _ = support::finish(flood);

    let kept = wait_ports(&log, seen, 10, |v| would_drop(v, "x/b"));
    let flood_packets = packets(&log, seen, |v| would_drop(v, "y/a"));
    assert_eq!(
        kept.len(),
        10,
        "x/b's WouldDrop lines into x/a beside y/a's flood ({flood_packets} packets of it logged)"
    );
    assert!(flood_packets > 0 && flood_packets < 1000, "the flood is logged and metered ({flood_packets} packets)");
    let shed = meter_gap(&log, seen, "staged-meter", "y/a", "x/b");
    assert!(shed > 0, "y/a's staged meter shed the flood");
}

/// y/a floods x/a with datagrams from a forged source address (SpoofGuard drops each and
/// copies it as a `ForgedSource` security event) while x/b forges 10, 100 ms apart, from
/// ports of their own. Security events pass a meter of the sending pod, so all 10 of x/b's
/// events are written; y/a's flood is metered and its gap record (cause `security-meter`)
/// names y/a.
#[test]
fn a_security_event_flood_sheds_no_other_pods_events() {
    let tb = Testbed::start();
    let log = tb.sandbox.dir.join("np.log");
    let args = ["--audit-format", "json", "--audit-chain", "--audit-drop-rate", FLOOD_RATE];
    let _agent = Agent::start(&tb.sandbox, &tb.manifests_dir(), &log, &args);
    let xa = tb.pod("x/a");
    let forged = |v: &Value, pod: &str| {
        v["policy"]["kind"] == "SecurityEvent"
            && v["policy"]["name"] == "ForgedSource"
            && pod_id(&v["applied_to"]).as_deref() == Some(pod)
    };
    let spoof = |sport: &str, count: &str, interval: &str| {
        [
            "udp-spoof",
            "--src",
            "10.10.9.9",
            "--sport",
            sport,
            "--dst",
            &xa.ip,
            "--dport",
            "80",
            "--count",
            count,
            "--interval",
            interval,
        ]
        .map(String::from)
    };
    // Control: x/b's forged datagram is an event naming x/b.
    tb.attack("x/b", &spoof("41000", "1", "0").each_ref().map(String::as_str));
    wait_json_line(&log, 0, Duration::from_secs(10), "x/b's first ForgedSource event", |v| forged(v, "x/b"));
    std::thread::sleep(Duration::from_millis(1500));
    let seen = json_lines(&log).len();

    let mut flood =
        tb.spawn_attack(&tb.pod("y/a").netns, &spoof("40000", "100000000", "0").each_ref().map(String::as_str));
    std::thread::sleep(Duration::from_millis(300));
    for sport in 41001..=41010 {
        tb.attack("x/b", &spoof(&sport.to_string(), "1", "0").each_ref().map(String::as_str));
        std::thread::sleep(Duration::from_millis(100));
    }
    let flooding = flood.try_wait().unwrap().is_none();
    flood.kill().unwrap();
    flood.wait().unwrap();
    assert!(flooding, "y/a's flood lasted while x/b forged");

    let kept = wait_ports(&log, seen, 10, |v| forged(v, "x/b"));
    let flood_packets = packets(&log, seen, |v| forged(v, "y/a"));
    assert_eq!(kept.len(), 10, "x/b's ForgedSource events beside y/a's flood ({flood_packets} packets of it logged)");
    assert!(flood_packets > 0 && flood_packets < 1000, "the flood is logged and metered ({flood_packets} packets)");
    let shed = meter_gap(&log, seen, "security-meter", "y/a", "x/b");
    assert!(shed > 0, "y/a's security meter shed the flood");
}
