//! End-to-end NetworkPolicy scenarios: real packets between the testbed's nine pods (and its
//! outside hosts where a scenario names them), with npagent enforcing the policies of
//! `testbed/scenarios/*.yaml` (format: `scenario.rs`).
//!
//! One testbed and one npagent (manifests mode) serve every scenario, one after the other.
//! For each step the scenario's manifests go into the agent's directory; the prober then
//! checks every ordered pair of distinct endpoints on TCP 80, TCP 81 and UDP 80 (SCTP, absent
//! from the test kernel, through `ofproto/trace`) until the expectation holds and keeps
//! holding after the agent's one-second convergence bound, or a deadline passes; then
//! `npagent flows` has to print exactly the bridge's flows. Failures print a truth table per
//! port, every wrong probe, the flows and the agent's log; the test fails at the end if any
//! scenario failed. `NPA_SCENARIOS=word,word` runs the scenarios whose file name contains one
//! of the words. Needs root.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

mod support;

#[path = "e2e_scenarios/harness.rs"]
mod harness;
#[path = "e2e_scenarios/scenario.rs"]
mod scenario;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use harness::{run_scenarios, scenarios_dir, wait_all_allowed, Layout, ScenarioBed};
use scenario::{obj_key, Base, PodId, Scenario};
use support::agent::Agent;
use support::Testbed;

/// The testbed's standard manifests in the repository.
fn repo_manifests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("testbed/manifests")
}

#[test]
fn scenarios_on_the_testbed() {
    let _serial = harness::timing_lock();
    let ScenarioBed { tb, mut dir, outside, base, scenarios } = ScenarioBed::start();
    let pods = base.pods();
    assert_eq!(pods.len(), 9, "the testbed should have nine pods: {pods:?}");
    assert_eq!(outside, Testbed::planned_outside_hosts(), "the outside hosts are the planned ones");
    let endpoints: BTreeSet<PodId> = pods.iter().chain(&base.outside_hosts()).cloned().collect();
    let mut agent = Agent::spawn(&tb.sandbox, &tb.manifests_dir(), &tb.sandbox.dir.join("npagent.log"), &[]);
    let served = Layout::Standard.served_ports();

    // The pipeline has to be in place before anything is reachable (fail_mode=secure).
    let all_pairs = scenario::all_probes(&endpoints, &served);
    let took = wait_all_allowed(&tb, &mut agent, &served, &all_pairs, Duration::from_secs(20));
    eprintln!("npagent up, all pods and outside hosts reachable after {:.1} s", took.as_secs_f64());

    let failed = run_scenarios(&tb, &mut agent, &base, &served, &mut dir, &scenarios);
    let status = agent.stop_report();
    assert!(failed.is_empty(), "failed scenarios:\n  {}\n(npagent: {status})", failed.join("\n  "));
}

/// Every scenario file parses, its patterns are valid, its manifests are valid Kubernetes
/// objects, and together the scenarios cover every ingress and egress semantic of Kubernetes NetworkPolicy.
#[test]
fn scenario_files_are_valid() {
    let base = Base::load(&repo_manifests_dir())
        .and_then(|b| b.with_outside(&Testbed::planned_outside_hosts()))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(base.pods().len(), 9);
    assert_eq!(base.outside_hosts().len(), 2);
    assert_eq!(base.ips().len(), 9, "every testbed pod has status.podIP");
    let scenarios = Scenario::load_dir(&scenarios_dir(), &base).unwrap_or_else(|e| panic!("{e}"));
    assert!(scenarios.len() >= 30, "only {} scenarios", scenarios.len());

    let mut names = BTreeSet::new();
    let mut errors = Vec::new();
    for s in &scenarios {
        if !names.insert(s.name.clone()) {
            errors.push(format!("{}: duplicate name {}", s.file, s.name));
        }
        if !s.file.ends_with(&format!("-{}.yaml", s.name)) {
            errors.push(format!("{}: file name does not end in -{}.yaml", s.file, s.name));
        }
        if s.doc.trim().is_empty() {
            errors.push(format!("{}: no doc", s.file));
        }
        for (i, step) in s.steps.iter().enumerate() {
            let ctx = format!("{} step {}", s.file, i + 1);
            let mut policy_names = BTreeSet::new();
            for p in &step.policies {
                if let Err(e) = serde_json::from_value::<k8s_openapi::api::networking::v1::NetworkPolicy>(p.clone()) {
                    errors.push(format!("{ctx}: NetworkPolicy does not parse: {e}"));
                }
                let key = obj_key(p).expect("key");
                if key.namespace.is_empty() {
                    errors.push(format!("{ctx}: {key} has no namespace"));
                }
                if !policy_names.insert(key.clone()) {
                    errors.push(format!("{ctx}: {key} twice"));
                }
            }
            for (k, v) in &step.patched {
                let r = match k.kind.as_str() {
                    "Pod" => serde_json::from_value::<k8s_openapi::api::core::v1::Pod>(v.clone()).map(|_| ()),
                    _ => serde_json::from_value::<k8s_openapi::api::core::v1::Namespace>(v.clone()).map(|_| ()),
                };
                if let Err(e) = r {
                    errors.push(format!("{ctx}: patched {k} does not parse: {e}"));
                }
            }
        }
    }
    assert!(errors.is_empty(), "{}", errors.join("\n"));

    // Coverage: every NetworkPolicy semantic appears in some scenario.
    let mut seen = BTreeSet::new();
    for s in &scenarios {
        for step in &s.steps {
            if step.patched.keys().any(|k| k.kind == "Pod") && s.steps.len() > 1 {
                seen.insert("pod relabel step".to_owned());
            }
            if step.patched.keys().any(|k| k.kind == "Namespace") && s.steps.len() > 1 {
                seen.insert("namespace relabel step".to_owned());
            }
            for p in &step.policies {
                features(p, &mut seen);
            }
            let namespaces: BTreeSet<_> = step.policies.iter().map(|p| obj_key(p).expect("key").namespace).collect();
            if namespaces.len() < step.policies.len() {
                seen.insert("several policies in one namespace".to_owned());
            }
            for l in &step.expect.lines {
                if l.text.contains("sctp/") {
                    seen.insert("sctp expectation".to_owned());
                }
            }
            if step.expect.endpoints(&base.pods(), &base.outside_hosts()).len() > base.pods().len() {
                seen.insert("outside hosts probed".to_owned());
            }
        }
    }
    let wanted = [
        "matchLabels",
        "matchExpressions In",
        "matchExpressions NotIn",
        "matchExpressions Exists",
        "matchExpressions DoesNotExist",
        "namespaceSelector",
        "empty namespaceSelector",
        "empty podSelector peer",
        "pod and namespace selector in one peer",
        "several peers",
        "ipBlock",
        "ipBlock except",
        "protocol TCP",
        "protocol UDP",
        "protocol SCTP",
        "protocol defaulted",
        "numeric port",
        "named port",
        "endPort",
        "port without number",
        "empty from",
        "empty ports",
        "ingress: []",
        "ingress: [{}]",
        "missing ingress",
        "policyTypes defaulted",
        "policyTypes Egress only",
        "several policies in one namespace",
        "pod relabel step",
        "namespace relabel step",
        "sctp expectation",
        // egress (issue 8)
        "missing egress",
        "egress: []",
        "egress: [{}]",
        "empty to",
        "egress empty ports",
        "egress podSelector peer",
        "egress matchLabels",
        "egress namespaceSelector",
        "egress pod and namespace selector in one peer",
        "egress ipBlock",
        "egress ipBlock except",
        "egress numeric port",
        "egress named port",
        "egress protocol UDP",
        "policyTypes defaulted with egress",
        "policyTypes Ingress and Egress",
        "outside hosts probed",
    ];
    let missing: Vec<_> = wanted.iter().filter(|w| !seen.contains(**w)).collect();
    assert!(missing.is_empty(), "no scenario covers: {missing:?}");
}

/// Records which semantics a NetworkPolicy document uses. Rule features carry the direction:
/// `empty from`, `ingress: []`, `ipBlock` for ingress; `empty to`, `egress: []`,
/// `egress ipBlock` for egress.
fn features(p: &Value, seen: &mut BTreeSet<String>) {
    let spec = p.get("spec").cloned().unwrap_or(Value::Null);
    let types = spec.get("policyTypes").and_then(Value::as_array);
    let has_type = |t: &str| types.is_some_and(|ts| ts.iter().any(|v| v.as_str() == Some(t)));
    match types {
        None => {
            seen.insert("policyTypes defaulted".into());
            if spec.get("egress").is_some() {
                seen.insert("policyTypes defaulted with egress".into());
            }
        }
        Some(t) if t.iter().all(|v| v.as_str() == Some("Egress")) => {
            seen.insert("policyTypes Egress only".into());
        }
        Some(_) if has_type("Ingress") && has_type("Egress") => {
            seen.insert("policyTypes Ingress and Egress".into());
        }
        _ => {}
    }
    if let Some(sel) = spec.get("podSelector") {
        selector_features(sel, &mut |name: &str| {
            seen.insert(name.to_owned());
        });
    }
    for (dir, peers_key, prefix) in [("ingress", "from", ""), ("egress", "to", "egress ")] {
        let rules = spec.get(dir).and_then(Value::as_array);
        match rules {
            None if has_type(if dir == "ingress" { "Ingress" } else { "Egress" }) => {
                seen.insert(format!("missing {dir}"));
            }
            Some(r) if r.is_empty() => {
                seen.insert(format!("{dir}: []"));
            }
            _ => {}
        }
        for rule in rules.into_iter().flatten() {
            if rule.as_object().is_some_and(|m| m.is_empty()) {
                seen.insert(format!("{dir}: [{{}}]"));
            }
            rule_features(rule, peers_key, prefix, seen);
        }
    }
}

/// The features of one ingress (`from`) or egress (`to`) rule, named with `prefix`.
fn rule_features(rule: &Value, peers_key: &str, prefix: &str, seen: &mut BTreeSet<String>) {
    // the rule's features, by name without the prefix
    let mut names: Vec<&'static str> = Vec::new();
    let mut saw = |name: &'static str| names.push(name);
    match rule.get(peers_key).and_then(Value::as_array) {
        Some(peers) if peers.is_empty() => {
            seen.insert(format!("empty {peers_key}"));
        }
        Some(peers) => {
            if peers.len() > 1 {
                saw("several peers");
            }
            for peer in peers {
                let ps = peer.get("podSelector");
                let ns = peer.get("namespaceSelector");
                if ps.is_some() && ns.is_some() {
                    saw("pod and namespace selector in one peer");
                }
                if ps.is_some() && ns.is_none() {
                    saw("podSelector peer");
                }
                if ns.is_some() {
                    saw("namespaceSelector");
                }
                if ns.and_then(Value::as_object).is_some_and(|m| m.is_empty()) {
                    saw("empty namespaceSelector");
                }
                if ns.is_none() && ps.and_then(Value::as_object).is_some_and(|m| m.is_empty()) {
                    saw("empty podSelector peer");
                }
                if let Some(b) = peer.get("ipBlock") {
                    saw("ipBlock");
                    if b.get("except").is_some() {
                        saw("ipBlock except");
                    }
                }
                for sel in [ps, ns].into_iter().flatten() {
                    selector_features(sel, &mut saw);
                }
            }
        }
        None => {}
    }
    match rule.get("ports").and_then(Value::as_array) {
        Some(ports) if ports.is_empty() => saw("empty ports"),
        Some(ports) => {
            for port in ports {
                saw(match port.get("protocol").and_then(Value::as_str) {
                    Some("TCP") => "protocol TCP",
                    Some("UDP") => "protocol UDP",
                    Some("SCTP") => "protocol SCTP",
                    _ => "protocol defaulted",
                });
                saw(match port.get("port") {
                    Some(Value::Number(_)) => "numeric port",
                    Some(Value::String(_)) => "named port",
                    _ => "port without number",
                });
                if port.get("endPort").is_some() {
                    saw("endPort");
                }
            }
        }
        None => {}
    }
    seen.extend(names.into_iter().map(|n| format!("{prefix}{n}")));
}

/// The features of one label selector, to `saw`.
fn selector_features(sel: &Value, saw: &mut impl FnMut(&'static str)) {
    if sel.get("matchLabels").is_some() {
        saw("matchLabels");
    }
    for e in sel.get("matchExpressions").and_then(Value::as_array).into_iter().flatten() {
        match e.get("operator").and_then(Value::as_str) {
            Some("In") => saw("matchExpressions In"),
            Some("NotIn") => saw("matchExpressions NotIn"),
            Some("Exists") => saw("matchExpressions Exists"),
            Some("DoesNotExist") => saw("matchExpressions DoesNotExist"),
            _ => {}
        }
    }
}
