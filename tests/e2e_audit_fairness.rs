//! A fair and complete audit log, with real packets on the testbed: one pod's flood of new
//! connections does not silence another pod's Allow lines (each pod has meters of its own),
//! the gap record of what was shed names the flooded pod, and the drops that no policy makes
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

    // The flood's shed copies are a gap naming x/c (the meters are read every 10 s).
    let gap = wait_json_line(&np_log, seen, Duration::from_secs(25), "a meter gap for x/c", |v| {
        v["type"] == "gap" && v["cause"] == "meter" && v["disposition"] == "Allow"
    });
    assert_eq!(pod_id(&gap["pod"]).as_deref(), Some("x/c"), "{gap}");
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
