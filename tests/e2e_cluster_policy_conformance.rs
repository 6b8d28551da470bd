//! The upstream ClusterNetworkPolicy conformance tests (kubernetes-sigs/network-policy-api,
//! standard profile), ported to the testbed (`testbed/conformance/*.yaml`, see its README), run
//! with real packets: the conformance layout's eight pods (`testbed/testbed up --layout
//! conformance`) with npagent enforcing in manifests mode.
//!
//! First, without any policy, every poke of the selected tests has to be allowed (npagent's
//! pipeline is in place and every server answers: TCP 80 and 8080, UDP 53 and 5353 with real
//! packets, SCTP 9003 and 9005 through `ofproto/trace`, the test kernel having no SCTP). Then
//! each test's steps, in order: the step's objects go into the agent's directory (upstream's
//! manifests, then its subtests' edits), and its pokes (upstream's, and the derived ones) have
//! to hold, and keep holding past the agent's convergence bound, within a deadline; then
//! `npagent flows` has to print exactly the bridge's flows (`harness::run_step`). A failing
//! step prints its file, step, upstream subtest, every poke with its verdict, the flows and the
//! agent's log; a test stops at its first failing step; the test fails at the end if any did.
//! `NPA_SCENARIOS=word,word` runs the files whose name contains one of the words. Needs root.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

mod support;

#[path = "e2e_scenarios/harness.rs"]
mod harness;
#[path = "e2e_scenarios/scenario.rs"]
mod scenario;

use std::collections::BTreeSet;
use std::time::Duration;

use harness::{run_scenarios, selected, spawn_agent, wait_all_allowed, Layout, ScenarioBed};
use scenario::Probe;

#[test]
fn upstream_conformance_on_the_testbed() {
    let _serial = harness::timing_lock();
    let ScenarioBed { tb, mut dir, base, scenarios, .. } = ScenarioBed::start_layout(Layout::Conformance);
    assert_eq!(base.pods().len(), 8, "the conformance layout has eight pods: {:?}", base.pods());
    assert_eq!(scenarios.len(), 18, "the 18 ported standard tests");
    let chosen: Vec<_> = scenarios.iter().filter(|s| selected(s)).collect();
    assert!(!chosen.is_empty(), "NPA_SCENARIOS selects none of the ported tests");
    let served = Layout::Conformance.served_ports();
    let mut agent = spawn_agent(&tb, &[]);

    // No policy yet: every poke of the selected tests is allowed, so a denied poke later is
    // the policy's doing, not a server's absence.
    let pokes: BTreeSet<Probe> =
        chosen.iter().flat_map(|s| &s.steps).flat_map(|st| &st.pokes).map(|p| p.probe.clone()).collect();
    let pokes: Vec<Probe> = pokes.into_iter().collect();
    let took = wait_all_allowed(&tb, &mut agent, &served, &pokes, Duration::from_secs(20));
    eprintln!(
        "npagent up: the {} distinct pokes of {} tests all allowed without policies after {:.1} s",
        pokes.len(),
        chosen.len(),
        took.as_secs_f64()
    );

    let failed = run_scenarios(&tb, &mut agent, &base, &served, &mut dir, &scenarios);
    let status = agent.stop_report();
    assert!(failed.is_empty(), "failed steps:\n  {}\n(npagent: {status})", failed.join("\n  "));
}
