//! Live changes on a running npagent (manifests mode) and a real switch: policies applied,
//! modified and deleted, pods and namespaces relabelled, pods added and removed each take
//! effect within one second, for ingress and egress (a new pod is a new egress peer and a
//! new egress-isolated source; a connection between local pods needs both the source's
//! egress and the destination's ingress; replies pass either way); a restart of npagent
//! changes nothing on the bridge (no flow_mod, no counter reset) and the datapath keeps
//! enforcing meanwhile; after ovs-vswitchd restarts, npagent restores enforcement by itself.
//! Quick verdicts come from `ofproto/trace` (the flow tables npagent controls), and every
//! phase is confirmed with real packets. Needs root.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

mod support;

#[path = "e2e_scenarios/harness.rs"]
mod harness;
#[path = "e2e_scenarios/scenario.rs"]
mod scenario;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::Value;

use harness::Check;
use scenario::{docs_yaml, merge_patch, obj_key, split_docs, Proto};
use support::policy::{allow_egress, allow_ingress, network_policy, pod_selector};
use support::{wait_until_every, write_atomic, Testbed};

/// How soon a manifest change must be enforced (README, "Using npagent").
const BOUND: Duration = Duration::from_secs(1);

/// npagent on a testbed's manifests, holding the timing lock: the tests here measure.
type Live = harness::Enforcing;

impl Live {
    /// A testbed with npagent running on its manifests, every pod reachable; takes the
    /// [`harness::timing_lock`] first and holds it until dropped.
    fn start() -> Live {
        let mut live = Live::launch(true, &[], |tb| harness::spawn_agent(tb, &[]));
        live.wait_verdicts("pipeline installed", &[("y/a", "x/a", Proto::Tcp, 80, true)], Duration::from_secs(20));
        live
    }

    fn dir(&self) -> PathBuf {
        self.tb.manifests_dir()
    }

    /// Writes (or replaces) a policy file of this test.
    fn put(&self, name: &str, yaml: &str) {
        self.write_manifest(&format!("live-{name}.yaml"), yaml);
    }

    /// Removes a policy file of this test.
    fn delete(&self, name: &str) {
        self.remove_manifest(&format!("live-{name}.yaml"));
    }

    /// Merge-patches the testbed's manifest of one object (the file that holds it).
    fn patch(&self, kind: &str, namespace: &str, name: &str, patch: &str) {
        let patch: Value = support::yaml::from_str(patch).expect("patch yaml");
        for entry in std::fs::read_dir(self.dir()).expect("manifests dir") {
            let path = entry.expect("entry").path();
            if path.extension().is_none_or(|x| x != "yaml") {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("read manifest");
            let mut docs = split_docs(&text).expect("manifest yaml");
            let mut hit = false;
            for d in &mut docs {
                let k = obj_key(d).expect("object key");
                if k.kind == kind && k.namespace == namespace && k.name == name {
                    merge_patch(d, &patch);
                    hit = true;
                }
            }
            if hit {
                write_atomic(&path, &docs_yaml(&docs));
                return;
            }
        }
        panic!("no manifest holds {kind} {namespace}/{name}");
    }

    /// Like [`Live::wait_verdicts`], and asserts the change took at most [`BOUND`].
    fn converges(&mut self, what: &str, checks: &[Check]) {
        let took = self.wait_verdicts(what, checks, Duration::from_secs(5));
        eprintln!("{what}: converged after {:.3} s", took.as_secs_f64());
        assert!(took <= BOUND, "{what}: took {:.3} s, more than {BOUND:?}", took.as_secs_f64());
        self.confirm(what, checks);
    }
}

/// x/a accepts TCP 80 from x/b only.
fn allow_from_b() -> String {
    allow_ingress("x", "live-allow", "a", "b", &[("TCP", 80)])
}

#[test]
fn policy_apply_modify_delete_within_one_second() {
    let mut live = Live::start();

    live.put("p", &allow_from_b());
    live.converges(
        "apply",
        &[
            ("y/a", "x/a", Proto::Tcp, 80, false),
            ("x/b", "x/a", Proto::Tcp, 80, true),
            ("x/b", "x/a", Proto::Tcp, 81, false),
            ("x/c", "x/a", Proto::Tcp, 80, false),
            ("y/a", "y/b", Proto::Tcp, 80, true),
        ],
    );

    live.put("p", &allow_ingress("x", "live-allow", "a", "c", &[("TCP", 81)]));
    live.converges(
        "modify",
        &[
            ("x/b", "x/a", Proto::Tcp, 80, false),
            ("x/c", "x/a", Proto::Tcp, 81, true),
            ("x/c", "x/a", Proto::Tcp, 80, false),
            ("y/a", "x/a", Proto::Tcp, 81, false),
        ],
    );

    live.delete("p");
    live.converges(
        "delete",
        &[
            ("y/a", "x/a", Proto::Tcp, 80, true),
            ("x/b", "x/a", Proto::Tcp, 81, true),
            ("x/c", "x/a", Proto::Udp, 80, true),
        ],
    );
}

/// Peers of a rule: the pods labelled `role: friend` in every namespace, and every pod of the
/// namespaces labelled `team: blue`.
const FRIENDS: &str = r#"    - namespaceSelector: {}
      podSelector:
        matchLabels: {role: friend}
    - namespaceSelector:
        matchLabels: {team: blue}
"#;

#[test]
fn relabel_pod_and_namespace_within_one_second() {
    let mut live = Live::start();
    let friends = format!("  ingress:\n  - from:\n{FRIENDS}");
    live.put("p", &network_policy("x", "friends", &pod_selector("a"), &friends));
    live.converges("policy", &[("z/b", "x/a", Proto::Tcp, 80, false), ("y/a", "x/a", Proto::Tcp, 80, false)]);

    live.patch("Pod", "z", "b", "{metadata: {labels: {role: friend}}}");
    live.converges("pod relabelled", &[("z/b", "x/a", Proto::Tcp, 80, true), ("z/a", "x/a", Proto::Tcp, 80, false)]);

    live.patch("Namespace", "", "y", "{metadata: {labels: {team: blue}}}");
    live.converges(
        "namespace relabelled",
        &[
            ("y/a", "x/a", Proto::Tcp, 80, true),
            ("y/c", "x/a", Proto::Udp, 80, true),
            ("z/a", "x/a", Proto::Tcp, 80, false),
        ],
    );

    live.patch("Pod", "z", "b", "{metadata: {labels: {role: null}}}");
    live.patch("Namespace", "", "y", "{metadata: {labels: {team: null}}}");
    live.converges("labels removed", &[("z/b", "x/a", Proto::Tcp, 80, false), ("y/a", "x/a", Proto::Tcp, 80, false)]);

    // A relabel that makes a policy select a pod isolates it.
    live.patch("Pod", "x", "c", "{metadata: {labels: {pod: a}}}");
    live.converges(
        "pod relabelled into a policy",
        &[("y/a", "x/c", Proto::Tcp, 80, false), ("x/b", "x/c", Proto::Tcp, 80, false)],
    );
}

#[test]
fn pod_add_and_remove_within_one_second() {
    let mut live = Live::start();
    let deny_all = network_policy("x", "deny-all", "{}", "  policyTypes: [Ingress]\n");
    live.put("p", &format!("{deny_all}---\n{}", allow_ingress("x", "a-from-d", "a", "d", &[])));
    live.converges("policies", &[("y/a", "x/a", Proto::Tcp, 80, false), ("y/a", "x/b", Proto::Tcp, 80, false)]);
    let before = live.tb.sandbox.dump_flows();

    let start = Instant::now();
    live.tb.add_pod("x", "d", "10.10.1.14");
    eprintln!("add-pod took {:.3} s", start.elapsed().as_secs_f64());
    live.converges(
        "pod added",
        &[
            ("x/d", "x/a", Proto::Tcp, 80, true),
            ("y/a", "x/d", Proto::Tcp, 80, false),
            ("x/d", "y/a", Proto::Tcp, 80, true),
        ],
    );
    assert_ne!(live.tb.sandbox.dump_flows(), before, "a new pod adds flows");

    live.del_pod_converges("x", "d", &before);
    live.confirm("after removal", &[("x/b", "x/a", Proto::Tcp, 80, false), ("y/a", "x/b", Proto::Tcp, 80, false)]);
}

impl Live {
    /// Removes pod `ns/name` and asserts that within [`BOUND`] the bridge holds exactly the
    /// flows `before` (those of before the pod was added).
    fn del_pod_converges(&self, ns: &str, name: &str, before: &[String]) {
        self.tb.del_pod(ns, name);
        let flows_back = || self.tb.sandbox.dump_flows() == before;
        let differences = || {
            let now = self.tb.sandbox.dump_flows();
            let extra: Vec<_> = now.iter().filter(|f| !before.contains(f)).collect();
            let gone: Vec<_> = before.iter().filter(|f| !now.contains(f)).collect();
            format!("extra: {extra:#?}\nmissing: {gone:#?}")
        };
        let every = Duration::from_millis(10);
        let took = wait_until_every(
            Duration::from_secs(5),
            every,
            "pod removed: flows back to their state before the pod",
            flows_back,
            differences,
        );
        eprintln!("pod removed: flows back after {:.3} s", took.as_secs_f64());
        assert!(took <= BOUND, "pod removal took {took:?}");
    }
}

/// One flow of `dump-flows` with its statistics split off.
#[derive(Debug)]
struct FlowStats {
    duration: f64,
    n_packets: u64,
}

/// `dump-flows` with statistics, keyed by the flow without them.
fn flows_with_stats(tb: &Testbed) -> BTreeMap<String, FlowStats> {
    let text = tb.sandbox.ofctl(&["--names", "dump-flows"]);
    let mut out = BTreeMap::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.contains("_FLOW reply")) {
        let mut key = Vec::new();
        let mut stats = FlowStats { duration: -1.0, n_packets: 0 };
        for part in line.split(", ") {
            if let Some(v) = part.strip_prefix("duration=") {
                stats.duration = v.trim_end_matches('s').parse().unwrap_or(-1.0);
            } else if let Some(v) = part.strip_prefix("n_packets=") {
                stats.n_packets = v.parse().unwrap_or(0);
            } else if part.starts_with("n_bytes=") || part.starts_with("idle_age=") || part.starts_with("hard_age=") {
            } else {
                key.push(part);
            }
        }
        out.insert(key.join(", "), stats);
    }
    out
}

#[test]
fn restart_without_churn() {
    let mut live = Live::start();
    live.put("p", &allow_from_b());
    live.assert_restart_without_churn(&[("y/a", "x/a", Proto::Tcp, 80, false), ("x/b", "x/a", Proto::Tcp, 80, true)]);
}

impl Live {
    /// With the policies in place and `checks` holding: probes every pair (so counters move),
    /// restarts npagent, and asserts that the flows stayed while it was away and that the
    /// restart sent no flow_mod (OVS's vconn log) and reset no counter or age. Returns the
    /// flows with their statistics of before the restart.
    fn assert_restart_without_churn(&mut self, checks: &[Check]) -> BTreeMap<String, FlowStats> {
        self.converges("policy", checks);
        self.tb.probe_all(); // traffic, so counters move
        let before = flows_with_stats(&self.tb);
        assert!(before.values().any(|s| s.n_packets > 0), "no flow counted packets");

        let status = self.agent.stop_report();
        eprintln!("npagent stopped: {status}");
        let after_stop = flows_with_stats(&self.tb);
        assert_eq!(
            after_stop.keys().collect::<Vec<_>>(),
            before.keys().collect::<Vec<_>>(),
            "npagent removed or changed flows on exit"
        );
        // The datapath keeps enforcing while no agent runs.
        self.confirm("agent stopped", checks);

        self.tb.sandbox.appctl(&["vlog/set", "vconn:file:dbg"]);
        let log_path = self.tb.sandbox.dir.join("vswitchd.log");
        let log_start = std::fs::metadata(&log_path).map(|m| m.len()).unwrap_or(0);
        let t0 = Instant::now();
        self.agent = harness::spawn_agent(&self.tb, &[]);
        // Let it connect, dump and (not) reconcile.
        std::thread::sleep(Duration::from_secs(3));
        assert!(self.agent.alive(), "npagent died after restart:\n{}", self.agent.log_tail(30));
        let after = flows_with_stats(&self.tb);
        let elapsed = t0.elapsed().as_secs_f64();
        self.tb.sandbox.appctl(&["vlog/set", "vconn:file:info"]);

        assert_eq!(
            after.keys().collect::<Vec<_>>(),
            before.keys().collect::<Vec<_>>(),
            "the flows differ after the restart"
        );
        let mut reset = Vec::new();
        for (flow, b) in &before {
            let a = &after[flow];
            if a.duration + 0.001 < b.duration + elapsed - 0.5 || a.n_packets < b.n_packets {
                reset.push(format!(
                    "{flow}: duration {} -> {}, n_packets {} -> {}",
                    b.duration, a.duration, b.n_packets, a.n_packets
                ));
            }
        }
        assert!(reset.is_empty(), "flows reset by the restart:\n{}", reset.join("\n"));

        let log = std::fs::read(&log_path).unwrap_or_default();
        let new = String::from_utf8_lossy(log.get(log_start as usize..).unwrap_or_default());
        assert!(
            new.contains("vconn"),
            "no vconn debug log after the restart: is the switch logging to {}?",
            log_path.display()
        );
        let mods: Vec<&str> =
            new.lines().filter(|l| l.contains("OFPT_FLOW_MOD") || l.contains("NXT_FLOW_MOD ")).collect();
        assert!(
            mods.is_empty(),
            "npagent sent {} flow_mods after a restart with unchanged inputs:\n{}",
            mods.len(),
            mods.join("\n")
        );
        self.confirm("after restart", checks);
        before
    }
}

#[test]
fn switch_restart_recovery() {
    let mut live = Live::start();
    live.put("p", &allow_from_b());
    live.assert_switch_restart_recovers(&[
        ("y/a", "x/a", Proto::Tcp, 80, false),
        ("x/b", "x/a", Proto::Tcp, 80, true),
        ("x/b", "x/a", Proto::Udp, 80, false),
        ("y/a", "y/b", Proto::Tcp, 81, true),
    ]);
}

#[test]
fn egress_switch_restart_recovery() {
    let mut live = Live::start();
    live.put("p", &egress_a_to_b());
    live.assert_switch_restart_recovers(&[
        ("x/a", "x/b", Proto::Tcp, 80, true),
        ("x/a", "x/b", Proto::Udp, 80, false),
        ("x/a", "y/a", Proto::Tcp, 80, false),
        ("y/a", "x/a", Proto::Tcp, 81, true),
    ]);
}

impl Live {
    /// With the policies in place and `checks` holding: restarts ovs-vswitchd and asserts
    /// that npagent restores the same flows and the same verdicts by itself.
    fn assert_switch_restart_recovers(&mut self, checks: &[Check]) {
        self.converges("policy", checks);
        let before = self.tb.sandbox.dump_flows();

        self.tb.sandbox.restart_vswitchd();
        let t0 = Instant::now();
        let took = self.wait_verdicts("after ovs-vswitchd restart", checks, Duration::from_secs(15));
        eprintln!("enforcement back {:.3} s after ovs-vswitchd answered again", took.as_secs_f64());
        // Same bridge, same ports: the same flows.
        let deadline = t0 + Duration::from_secs(15);
        while self.tb.sandbox.dump_flows() != before && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        let after = self.tb.sandbox.dump_flows();
        assert_eq!(after, before, "flows after the switch restart differ from before");
        self.confirm("after switch restart", checks);
        assert!(self.agent.alive(), "npagent exited when the switch restarted:\n{}", self.agent.log_tail(30));
    }
}

/// `npagent flows` prints exactly what `ovs-ofctl dump-flows --no-stats --names` shows on the
/// bridge npagent enforces (an ingress and an egress policy in place).
#[test]
fn flows_command_matches_bridge() {
    let mut live = Live::start();
    live.put("p", &allow_from_b());
    live.put("egress", &egress_a_to_b());
    live.converges(
        "policies",
        &[
            ("y/a", "x/a", Proto::Tcp, 80, false),
            ("x/b", "x/a", Proto::Tcp, 80, true),
            ("x/a", "x/c", Proto::Tcp, 80, false),
        ],
    );
    let differ = harness::flows_command_diff(&live.tb, &live.tb.manifests_dir());
    assert!(differ.is_empty(), "npagent flows and the bridge differ:\n{}", differ.join("\n"));
}

/// Bad input never stops enforcement: each broken object or file is reported by name, and
/// every valid policy (also in the same file as a broken one) stays enforced.
#[test]
fn bad_input_is_reported_and_the_valid_rest_stays_enforced() {
    let mut live = Live::start();
    live.put("good", &allow_from_b());
    live.wait_verdicts(
        "valid policy",
        &[("x/b", "x/a", Proto::Tcp, 80, true), ("x/c", "x/a", Proto::Tcp, 80, false)],
        BOUND * 5,
    );

    // A malformed file, an unknown kind, an invalid CIDR beside a valid policy (isolating
    // y/a) in one file, an invalid selector, and a policy in a namespace that does not exist.
    std::fs::write(live.dir().join("live-broken.yaml"), "apiVersion: v1\nkind: Pod\nmetadata: {name: [\n")
        .expect("write");
    live.put(
        "svc",
        "apiVersion: v1\nkind: Service\nmetadata: {namespace: x, name: web}\nspec: {ports: [{port: 80}]}\n",
    );
    live.put(
        "mixed",
        r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {namespace: y, name: bad-cidr}
spec:
  podSelector: {}
  ingress:
  - from: [{ipBlock: {cidr: 10.10.0.0/33}}]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {namespace: y, name: deny-a}
spec:
  podSelector: {matchLabels: {pod: a}}
  policyTypes: [Ingress]
"#,
    );
    live.put(
        "selector",
        r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {namespace: z, name: bad-selector}
spec:
  podSelector: {matchExpressions: [{key: pod, operator: In}]}
"#,
    );
    live.put(
        "orphan",
        "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {namespace: nowhere, name: orphan}\nspec: {podSelector: {}}\n",
    );

    live.wait_verdicts(
        "valid policies enforced beside broken input",
        &[
            ("x/b", "x/a", Proto::Tcp, 80, true),
            ("x/c", "x/a", Proto::Tcp, 80, false),
            ("x/b", "y/a", Proto::Tcp, 80, false),
            // bad-cidr never was valid and its podSelector reads: y's pods fail closed.
            // bad-selector's podSelector does not read: ignored, z/* stay open.
            ("x/b", "y/b", Proto::Tcp, 80, false),
            ("x/b", "z/a", Proto::Tcp, 80, true),
        ],
        BOUND * 5,
    );
    let wanted = [
        "live-broken.yaml",
        "live-svc.yaml#1 Service x/web",
        "NetworkPolicy y/bad-cidr",
        "10.10.0.0/33",
        "NetworkPolicy z/bad-selector",
        "nowhere/orphan",
    ];
    let missing = || -> Vec<&str> {
        let log = live.agent.log_text();
        wanted.iter().copied().filter(|w| !log.contains(w)).collect()
    };
    let every = Duration::from_millis(50);
    wait_until_every(
        Duration::from_secs(5),
        every,
        "the agent log names every broken input",
        || missing().is_empty(),
        || format!("the agent log does not name {:?}:\n{}", missing(), live.agent.log_tail(40)),
    );
    assert!(live.agent.alive(), "the agent must keep running");
    live.confirm(
        "real packets",
        &[
            ("x/b", "x/a", Proto::Tcp, 80, true),
            ("x/b", "y/a", Proto::Tcp, 80, false),
            ("x/b", "y/b", Proto::Tcp, 80, false),
        ],
    );
}

// ---------------------------------------------------------------------------------------
// Egress: the same live changes for the other half of NetworkPolicy. Every check of these
// tests that expects `false` for a pod sending out is one only egress enforcement can give.

/// x/a may open TCP 80 to x/b and nothing else (egress-isolated).
fn egress_a_to_b() -> String {
    allow_egress("x", "live-egress", "a", "b", &[("TCP", 80)])
}

#[test]
fn egress_policy_apply_modify_delete_within_one_second() {
    let mut live = Live::start();

    live.put("p", &egress_a_to_b());
    live.converges(
        "egress apply",
        &[
            ("x/a", "x/b", Proto::Tcp, 80, true),
            ("x/a", "x/b", Proto::Tcp, 81, false),
            ("x/a", "x/b", Proto::Udp, 80, false),
            ("x/a", "x/c", Proto::Tcp, 80, false),
            ("x/a", "y/b", Proto::Tcp, 80, false),
            // Egress isolation of x/a says nothing about others, nor about x/a's ingress:
            // connections into x/a pass, and so do x/a's replies (established, not new).
            ("x/c", "x/b", Proto::Tcp, 81, true),
            ("y/a", "x/a", Proto::Tcp, 81, true),
            ("x/b", "x/a", Proto::Tcp, 80, true),
            ("x/b", "x/a", Proto::Udp, 80, true),
            ("x/c", "x/a", Proto::Udp, 80, true),
        ],
    );

    live.put("p", &allow_egress("x", "live-egress", "a", "b", &[("TCP", 81)]));
    live.converges(
        "egress port changed",
        &[
            ("x/a", "x/b", Proto::Tcp, 80, false),
            ("x/a", "x/b", Proto::Tcp, 81, true),
            ("x/a", "x/c", Proto::Tcp, 81, false),
        ],
    );

    live.put("p", &allow_egress("x", "live-egress", "a", "c", &[("TCP", 81)]));
    live.converges(
        "egress peer changed",
        &[
            ("x/a", "x/b", Proto::Tcp, 81, false),
            ("x/a", "x/c", Proto::Tcp, 81, true),
            ("x/a", "x/c", Proto::Tcp, 80, false),
        ],
    );

    live.delete("p");
    live.converges(
        "egress delete",
        &[
            ("x/a", "x/b", Proto::Tcp, 80, true),
            ("x/a", "x/c", Proto::Udp, 80, true),
            ("x/a", "y/b", Proto::Tcp, 81, true),
        ],
    );
}

#[test]
fn egress_relabel_destination_pod_and_namespace_within_one_second() {
    let mut live = Live::start();
    let friends = format!("  policyTypes: [Egress]\n  egress:\n  - to:\n{FRIENDS}");
    live.put("p", &network_policy("x", "egress-friends", &pod_selector("a"), &friends));
    live.converges("egress policy", &[("x/a", "z/b", Proto::Tcp, 80, false), ("x/a", "y/a", Proto::Tcp, 80, false)]);

    live.patch("Pod", "z", "b", "{metadata: {labels: {role: friend}}}");
    live.converges(
        "destination pod relabelled into the allowed set",
        &[
            ("x/a", "z/b", Proto::Tcp, 80, true),
            ("x/a", "z/b", Proto::Udp, 80, true),
            ("x/a", "z/a", Proto::Tcp, 80, false),
        ],
    );

    live.patch("Namespace", "", "y", "{metadata: {labels: {team: blue}}}");
    live.converges(
        "destination namespace relabelled into the allowed set",
        &[
            ("x/a", "y/a", Proto::Tcp, 80, true),
            ("x/a", "y/c", Proto::Udp, 80, true),
            ("x/a", "z/a", Proto::Tcp, 80, false),
        ],
    );

    live.patch("Pod", "z", "b", "{metadata: {labels: {role: null}}}");
    live.converges(
        "destination pod relabelled out of the allowed set",
        &[("x/a", "z/b", Proto::Tcp, 80, false), ("x/a", "y/a", Proto::Tcp, 80, true)],
    );
    live.patch("Namespace", "", "y", "{metadata: {labels: {team: null}}}");
    live.converges(
        "destination namespace relabelled out of the allowed set",
        &[("x/a", "y/a", Proto::Tcp, 80, false), ("x/a", "y/c", Proto::Udp, 80, false)],
    );

    // A relabel that makes the policy select a pod isolates it for egress.
    live.patch("Pod", "x", "c", "{metadata: {labels: {pod: a}}}");
    live.converges(
        "source pod relabelled into the policy",
        &[
            ("x/c", "y/a", Proto::Tcp, 80, false),
            ("x/c", "x/b", Proto::Tcp, 80, false),
            ("x/b", "x/c", Proto::Tcp, 80, true),
        ],
    );
}

/// Between two local pods a new connection needs the source's egress and the
/// destination's ingress: x/a sends only TCP 80 to x/b; x/b accepts from x/c only, then
/// from x/a on every port.
#[test]
fn egress_and_ingress_must_both_allow_between_local_pods() {
    let mut live = Live::start();
    let ingress_b = |from: &str| allow_ingress("x", "live-ingress-b", "b", from, &[]);
    live.put("egress", &egress_a_to_b());
    live.put("ingress", &ingress_b("c"));
    live.converges(
        "egress allows, ingress does not",
        &[
            ("x/a", "x/b", Proto::Tcp, 80, false),
            ("x/c", "x/b", Proto::Tcp, 80, true),
            ("x/c", "x/b", Proto::Tcp, 81, true),
        ],
    );

    live.put("ingress", &ingress_b("a"));
    live.converges(
        "both allow, or only ingress",
        &[
            ("x/a", "x/b", Proto::Tcp, 80, true),
            ("x/a", "x/b", Proto::Tcp, 81, false),
            ("x/a", "x/b", Proto::Udp, 80, false),
            ("x/c", "x/b", Proto::Tcp, 80, false),
        ],
    );
}

/// Replies of allowed connections pass an egress-isolated pod: x/a sends only TCP 80 to
/// x/b, x/b sends nothing new at all (`egress: []`). x/b's SYN-ACKs to x/a pass, as do x/a's
/// replies to connections others open (x/a is not isolated for ingress), while x/a itself
/// opens nothing else.
#[test]
fn egress_isolated_pods_still_reply() {
    let mut live = Live::start();
    live.put("a", &allow_egress("x", "live-egress", "a", "b", &[("TCP", 80), ("UDP", 80)]));
    let sends_nothing = "  policyTypes: [Egress]\n  egress: []\n";
    live.put("b", &network_policy("x", "live-b-sends-nothing", &pod_selector("b"), sends_nothing));
    live.converges(
        "replies pass",
        &[
            // x/b's handshake replies and UDP echoes pass its own egress isolation.
            ("x/a", "x/b", Proto::Tcp, 80, true),
            ("x/a", "x/b", Proto::Udp, 80, true),
            ("x/a", "x/b", Proto::Tcp, 81, false),
            // x/b opens nothing, not even to x/a, which would accept it.
            ("x/b", "x/a", Proto::Tcp, 80, false),
            ("x/b", "x/c", Proto::Udp, 80, false),
            // x/a answers connections from pods it may not send to itself.
            ("x/c", "x/a", Proto::Tcp, 81, true),
            ("x/c", "x/a", Proto::Udp, 80, true),
            ("y/a", "x/a", Proto::Tcp, 80, true),
            ("x/a", "x/c", Proto::Tcp, 81, false),
            ("x/a", "x/c", Proto::Udp, 80, false),
        ],
    );
}

#[test]
fn egress_restart_without_churn() {
    let mut live = Live::start();
    live.put("egress", &egress_a_to_b());
    live.put("ingress", &allow_from_b());
    let before = live.assert_restart_without_churn(&[
        ("x/a", "x/b", Proto::Tcp, 80, true),
        ("x/a", "x/c", Proto::Tcp, 80, false),
        ("x/a", "y/a", Proto::Udp, 80, false),
        ("x/b", "x/a", Proto::Tcp, 80, true),
        ("y/a", "x/a", Proto::Tcp, 80, false),
    ]);
    // The kept counters include the egress flows': the allow and the default drop counted.
    for wanted in ["table=EgressRule, priority=190,conj_id=", "table=EgressDefaultRule, priority=200,reg2="] {
        let counted = before.iter().filter(|(f, _)| f.contains(wanted)).map(|(_, s)| s.n_packets).sum::<u64>();
        assert!(counted > 0, "no packets counted by {wanted}: {before:#?}");
    }
}

/// A new pod is a new egress peer and, in a namespace with an egress deny-all, a new
/// egress-isolated source; removing it restores the flows of before.
#[test]
fn egress_pod_add_and_remove_within_one_second() {
    let mut live = Live::start();
    let deny_all = network_policy("x", "deny-all-egress", "{}", "  policyTypes: [Egress]\n");
    live.put("p", &format!("{deny_all}---\n{}", allow_egress("x", "a-to-d", "a", "d", &[])));
    live.converges(
        "egress policies",
        &[
            ("x/a", "x/b", Proto::Tcp, 80, false),
            ("x/b", "y/a", Proto::Tcp, 80, false),
            ("y/a", "x/a", Proto::Tcp, 80, true),
        ],
    );
    let before = live.tb.sandbox.dump_flows();

    live.tb.add_pod("x", "d", "10.10.1.14");
    live.converges(
        "pod added",
        &[
            ("x/a", "x/d", Proto::Tcp, 80, true),
            ("x/a", "x/d", Proto::Udp, 80, true),
            ("x/d", "y/a", Proto::Tcp, 80, false),
            ("x/d", "x/a", Proto::Udp, 80, false),
            ("y/a", "x/d", Proto::Tcp, 81, true),
        ],
    );
    live.del_pod_converges("x", "d", &before);
    live.confirm("after removal", &[("x/a", "x/b", Proto::Tcp, 80, false), ("x/b", "y/a", Proto::Tcp, 80, false)]);
}
