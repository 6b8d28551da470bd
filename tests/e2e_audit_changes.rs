//! Policy changes as audit events (`--audit-changes-log`) on a running npagent and a real
//! switch: a NetworkPolicy added, modified, refused as invalid and deleted, each one JSON line,
//! the enforced ones written only once the bridge holds their flows. Needs root.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use support::agent::Agent;
use support::{write_atomic, Testbed};

const WITHIN: Duration = Duration::from_secs(10);

fn events(path: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"))).collect()
}

/// Waits for the `n`th event (1-based) and returns it.
fn nth_event(path: &Path, n: usize) -> serde_json::Value {
    let deadline = Instant::now() + WITHIN;
    loop {
        let all = events(path);
        if all.len() >= n {
            return all[n - 1].clone();
        }
        assert!(Instant::now() < deadline, "only {} event(s) after {WITHIN:?}: {all:?}", all.len());
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn deny_all(rules: &str) -> String {
    format!(
        "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {{name: deny-all, namespace: x}}\n\
         spec:\n  podSelector: {{}}\n  policyTypes: [Ingress]\n{rules}"
    )
}

/// Default drops of the IngressDefaultRule table: present once x is isolated.
fn isolation_flows(tb: &Testbed) -> usize {
    tb.sandbox.dump_flows().iter().filter(|f| f.contains("table=IngressDefaultRule") && f.contains("reg4=")).count()
}

#[test]
fn policy_changes_are_logged_once_enforced_or_refused() {
    let tb = Testbed::start();
    let log = tb.sandbox.dir.join("changes/np-changes.log");
    let log_arg = log.to_string_lossy().into_owned();
    let audit = tb.sandbox.dir.join("np.log");
    let _agent = Agent::start(&tb.sandbox, &tb.manifests_dir(), &audit, &["--audit-changes-log", &log_arg]);
    assert!(log.exists(), "the change log (and its directory) is created at start");
    assert_eq!(isolation_flows(&tb), 0, "no policy yet");
    let file = tb.manifests_dir().join("deny-all.yaml");

    write_atomic(&file, &deny_all(""));
    let added = nth_event(&log, 1);
    assert_eq!((added["event"].as_str(), added["policy"].as_str()), (Some("added"), Some("x/deny-all")), "{added}");
    // Written after the bundle committed: the bridge isolates x already.
    assert!(isolation_flows(&tb) > 0, "'added' was logged before the bridge held the policy's flows");
    let first_hash = added["hash"].as_str().expect("hash").to_string();
    assert_eq!(first_hash.len(), 64, "a SHA-256");

    write_atomic(&file, &deny_all("  ingress:\n  - from: [{namespaceSelector: {matchLabels: {ns: y}}}]\n"));
    let modified = nth_event(&log, 2);
    assert_eq!(modified["event"], "modified", "{modified}");
    assert_ne!(modified["hash"].as_str(), Some(first_hash.as_str()), "another version, another hash");

    write_atomic(&file, &deny_all("  ingress:\n  - from: [{ipBlock: {cidr: 10.10.1.12/33}}]\n"));
    let rejected = nth_event(&log, 3);
    assert_eq!((rejected["event"].as_str(), rejected["policy"].as_str()), (Some("rejected"), Some("x/deny-all")));
    assert!(
        rejected["reason"].as_str().is_some_and(|r| r.contains("10.10.1.12/33")),
        "the reason names the culprit: {rejected}"
    );

    std::fs::remove_file(&file).expect("remove the policy");
    let deleted = nth_event(&log, 4);
    assert_eq!((deleted["event"].as_str(), deleted["policy"].as_str()), (Some("deleted"), Some("x/deny-all")));
    let deadline = Instant::now() + WITHIN;
    while isolation_flows(&tb) > 0 {
        assert!(Instant::now() < deadline, "x still isolated after the deletion was logged");
        std::thread::sleep(Duration::from_millis(50));
    }

    let all = events(&log);
    assert_eq!(all.len(), 4, "one line per change, nothing repeated: {all:?}");
    let times: Vec<&str> = all.iter().map(|e| e["time"].as_str().expect("time")).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "times in order: {times:?}");
}
