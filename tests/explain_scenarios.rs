//! `npagent explain` against every testbed scenario (`testbed/scenarios/*.yaml`): for every
//! step, every probe of the step (all ordered pairs of its endpoints, the outside hosts too
//! where the step names them, on every port it checks) is explained offline from the step's
//! manifests, and the verdict must be the scenario's expected reachability, which
//! `e2e_scenarios.rs` checks against real packets. The library function answers every probe;
//! the binary answers one allowed and one dropped probe of every scenario. No OVS needed.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

mod support;

#[path = "e2e_scenarios/scenario.rs"]
mod scenario;

use npagent::compiler::{self, IdAllocator};
use npagent::explain::{self, DestinationPort, EndpointSpec, Explanation, Query, Verdict};
use npagent::model::{ObjectRef, PortRef, Protocol};
use npagent::snapshot;
use scenario::{all_probes, docs_yaml, Base, PodId, PortKey, Probe, Proto, Scenario, Step};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use support::Testbed;

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn base() -> Base {
    Base::load(&repo("testbed/manifests"))
        .and_then(|b| b.with_outside(&Testbed::planned_outside_hosts()))
        .unwrap_or_else(|e| panic!("{e}"))
}

/// A directory holding the step's state: the testbed's objects as the step patches them, and
/// its policies.
fn step_dir(base: &Base, step: &Step) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let objects: Vec<_> = base.objects.iter().map(|(k, v)| step.patched.get(k).unwrap_or(v).clone()).collect();
    std::fs::write(dir.path().join("objects.yaml"), docs_yaml(&objects)).expect("write objects");
    if !step.policies.is_empty() {
        std::fs::write(dir.path().join("policies.yaml"), step.policies_yaml()).expect("write policies");
    }
    dir
}

fn endpoint(base: &Base, id: &PodId) -> EndpointSpec {
    match base.outside.get(id) {
        Some(ip) => EndpointSpec::Ip((*ip).into()),
        None => EndpointSpec::Pod(ObjectRef { namespace: id.ns.as_str().into(), name: id.pod.as_str().into() }),
    }
}

fn port_spec(k: PortKey) -> DestinationPort {
    let protocol = match k.proto {
        Proto::Tcp => Protocol::Tcp,
        Proto::Udp => Protocol::Udp,
        Proto::Sctp => Protocol::Sctp,
    };
    DestinationPort { protocol, port: PortRef::Number(k.port) }
}

fn probes(base: &Base, step: &Step) -> Vec<Probe> {
    let mut ports: BTreeSet<PortKey> = PortKey::PROBED.into_iter().collect();
    ports.extend(step.expect.extra_ports());
    all_probes(&step.expect.endpoints(&base.pods(), &base.outside_hosts()), &ports)
}

/// What an explanation must hold beyond its verdict: a dropped direction names its isolating
/// policies, an allowed isolated one names rules of those policies with their flows.
fn consistent(e: &Explanation) -> Result<(), String> {
    for d in [&e.egress, &e.ingress] {
        match &d.verdict {
            Verdict::Dropped { isolated_by } if isolated_by.is_empty() => {
                return Err(format!("{}: dropped without isolating policies", d.direction))
            }
            Verdict::Allowed { isolated_by, rules } => {
                if rules.is_empty() {
                    return Err(format!("{}: allowed without a rule", d.direction));
                }
                for r in rules {
                    if !isolated_by.contains(&r.policy) || r.direction != d.direction || r.flows.is_empty() {
                        return Err(format!(
                            "{}: rule {r:?} is not one of {isolated_by:?}'s, or has no flows",
                            d.direction
                        ));
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// Explains every probe of every step of the scenarios in `dir` on `base`; returns (probes
/// checked, allowed, with an outside host) and the wrong ones.
fn explain_all(base: &Base, dir: &str) -> (usize, usize, usize, Vec<String>) {
    let scenarios = Scenario::load_dir(&repo(dir), base).unwrap_or_else(|e| panic!("{e}"));
    let (mut checked, mut allowed, mut outside) = (0usize, 0usize, 0usize);
    let mut wrong = Vec::new();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    for s in &scenarios {
        for (i, step) in s.steps.iter().enumerate() {
            let dir = step_dir(base, step);
            let source = npagent::agent::SourceConfig::Manifests(dir.path().to_path_buf());
            let mut store =
                rt.block_on(snapshot::load_store(&source, true)).unwrap_or_else(|e| panic!("{}: {e:#}", s.file));
            // Every pod local, as on the testbed's single node.
            let pods: Vec<ObjectRef> = store.model().pods.keys().cloned().collect();
            let (ports, _) = explain::ports_with_stand_ins(store.model(), &pods.iter().collect::<Vec<_>>());
            store.set_ports(&ports);
            let compiler = compiler::compile(store.model(), compiler::Config::default(), IdAllocator::new(0), 0);
            for (p, want) in step.checks(base) {
                let q =
                    Query { from: endpoint(base, &p.from), to: endpoint(base, &p.to), port: Some(port_spec(p.port)) };
                checked += 1;
                allowed += usize::from(want);
                outside += usize::from(base.outside.contains_key(&p.from) || base.outside.contains_key(&p.to));
                match explain::explain(store.model(), &compiler, &q) {
                    Ok(e) if e.allowed != want => {
                        wrong.push(format!("{} step {}: {p}: expected {want}, explained {e:?}", s.file, i + 1))
                    }
                    Ok(e) => {
                        if let Err(why) = consistent(&e) {
                            wrong.push(format!("{} step {}: {p}: {why}", s.file, i + 1));
                        }
                    }
                    Err(e) => wrong.push(format!("{} step {}: {p}: {e}", s.file, i + 1)),
                }
            }
        }
    }
    eprintln!(
        "{dir}: {checked} probes explained ({allowed} allowed, {outside} with an outside host), {} wrong",
        wrong.len()
    );
    (checked, allowed, outside, wrong)
}

fn assert_none_wrong(checked: usize, wrong: &[String]) {
    assert!(
        wrong.is_empty(),
        "{} of {checked} probes explained wrong:\n{}",
        wrong.len(),
        wrong.iter().take(40).cloned().collect::<Vec<_>>().join("\n")
    );
}

#[test]
fn explain_agrees_with_every_scenario() {
    let (checked, allowed, outside, wrong) = explain_all(&base(), "testbed/scenarios");
    assert!(checked > 1000, "only {checked} probes");
    assert_none_wrong(checked, &wrong);
    assert!(
        allowed > 0 && allowed < checked && outside > 0,
        "the scenarios exercise both verdicts and the outside hosts"
    );
}

/// The upstream ClusterNetworkPolicy conformance tests ported to the testbed
/// (`testbed/conformance`): explain answers every step's probes as upstream expects.
#[test]
fn explain_agrees_with_every_cluster_policy_conformance_test() {
    let base = Base::load(&repo("testbed/conformance/manifests")).unwrap_or_else(|e| panic!("{e}"));
    let (checked, allowed, _, wrong) = explain_all(&base, "testbed/conformance");
    assert_none_wrong(checked, &wrong);
    assert!(allowed > 0 && allowed < checked, "both verdicts");
}

/// `npagent explain` on `p` in `dir`: its exit status and stdout.
fn run_binary(dir: &Path, base: &Base, p: &Probe, json: bool) -> (Option<i32>, String, String) {
    let arg = |id: &PodId| match base.outside.get(id) {
        Some(ip) => ip.to_string(),
        None => id.to_string(),
    };
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_npagent"));
    cmd.arg("explain").arg("--manifests").arg(dir).args(["--from", &arg(&p.from), "--to", &arg(&p.to), "--port"]);
    // Both spellings of a port.
    cmd.arg(if json { format!("{}/{}", p.port.port, p.port.proto.name().to_uppercase()) } else { p.port.to_string() });
    if json {
        cmd.args(["-o", "json"]);
    }
    let out = cmd.output().expect("run npagent explain");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_binary_agrees_on_one_allowed_and_one_dropped_probe_of_every_scenario() {
    let base = base();
    let scenarios = Scenario::load_dir(&repo("testbed/scenarios"), &base).unwrap_or_else(|e| panic!("{e}"));
    let mut wrong = Vec::new();
    let mut runs = 0;
    for s in &scenarios {
        let step = s.steps.last().expect("a step");
        let dir = step_dir(&base, step);
        let probes = probes(&base, step);
        for want in [true, false] {
            // The last probe of its kind: the outside hosts and SCTP come last.
            let Some(p) = probes.iter().rev().find(|p| step.expect.allows(p) == want) else { continue };
            let json = runs % 2 == 1;
            runs += 1;
            let (code, stdout, stderr) = run_binary(dir.path(), &base, p, json);
            let expected = if want { 0 } else { 1 };
            if code != Some(expected) {
                wrong.push(format!("{}: {p}: exit {code:?}, expected {expected}\n{stdout}{stderr}", s.file));
                continue;
            }
            if json {
                let v: serde_json::Value = serde_json::from_str(stdout.trim())
                    .unwrap_or_else(|e| panic!("{}: {p}: not JSON ({e}): {stdout}", s.file));
                if v["allowed"] != serde_json::Value::Bool(want)
                    || v["compiled"].as_str().is_none_or(|c| !c.contains("offline"))
                {
                    wrong.push(format!("{}: {p}: JSON {v}", s.file));
                }
            } else {
                let head = stdout.lines().next().unwrap_or_default().to_string();
                let verdict = if want { ": ALLOWED" } else { ": DROPPED" };
                if !head.ends_with(verdict) || !stdout.contains("compiled offline") {
                    wrong.push(format!("{}: {p}: output {stdout}", s.file));
                }
            }
        }
    }
    assert!(runs >= 100, "only {runs} runs of the binary");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
