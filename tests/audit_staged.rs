//! Staged verdicts' packet-ins resolved by the agent's resolver against a real compiled model
//! (manifests, the compiler with its staged view), as the staged flows send them: the policies
//! a `WouldDrop` or a `WouldAllow` names are staged ones, the same `npagent explain` names for
//! the connection, and the counts reach `npagent_staged_verdicts_total`. Offline; no OVS.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

mod audit_support;
mod staged_support;

use audit_support::{ipv4, staged_packet_in, t_allow, tcp, TCP};
use npagent::admin::metrics::{registry, render, AgentMetrics};
use npagent::agent::{State, StateResolver};
use npagent::audit::format::{Format, Formatter};
use npagent::audit::{
    entry_from_packet_in, AuditConfig, AuditEntry, AuditStats, Direction, Pipeline, PolicyRef, Record,
};
use npagent::compiler;
use npagent::compiler::userdata::Disposition;
use npagent::explain::staged::StagedDifference;
use npagent::explain::{self, Query};
use npagent::explain_command::staged_explanation;
use npagent::model::ObjectRef;
use staged_support::{load, manifests, ALLOW_B, STAGED_ALLOW_C, STAGED_DENY_ALL};
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// The pods' subnet.
const SUBNET: &str = "10.10.1";

/// `x/deny-a` (enforced): a's ingress isolated, nothing allowed by it.
const DENY_A: &str = r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: deny-a, namespace: x}
spec: {podSelector: {matchLabels: {app: a}}, policyTypes: [Ingress]}
"#;

/// A staged edit of `x/allow-b` that no longer selects a.
const STAGED_ALLOW_B_ELSEWHERE: &str = r#"
apiVersion: policy.npagent.io/v1alpha1
kind: StagedNetworkPolicy
metadata: {name: allow-b, namespace: x}
spec:
  podSelector: {matchLabels: {app: c}}
  ingress: [{from: [{podSelector: {matchLabels: {app: b}}}], ports: [{port: 80}]}]
"#;

/// The agent's view of `docs` over the cluster, every pod local, compiled with its staged view.
struct Agent {
    state: Arc<RwLock<State>>,
    resolver: StateResolver,
}

impl Agent {
    fn new(docs: &[&str]) -> Agent {
        let (store, compiler) = load(manifests(SUBNET, docs).path());
        let state = Arc::new(RwLock::new(State { store, compiler: Some(compiler) }));
        Agent { resolver: StateResolver::new(Arc::clone(&state)), state }
    }

    /// The ofport of pod `x/<name>`.
    fn port(&self, name: &str) -> u32 {
        let state = self.state.read().unwrap();
        let ports = &state.store.model().ports;
        ports.iter().find(|(_, p)| &*p.pod.name == name).map(|(o, _)| *o).expect("a port")
    }

    /// The staged conjunction id of `x/<policy>`'s ingress rule `index`.
    fn staged_rule(&self, policy: &str, index: u32) -> u32 {
        let state = self.state.read().unwrap();
        let staged = state.compiler.as_ref().and_then(|c| c.staged()).expect("a staged view");
        let rules = staged.rules().rules();
        let rule = rules.values().find(|r| &*r.policy.name == policy && r.index == index && !r.deleted);
        rule.expect("the staged rule").id
    }

    /// The entry of a staged copy of x/<pods[from]> -> x/<pods[to]>'s TCP 80 (ingress, the
    /// pod `to`) with staged rule `rule` (`WouldAllow` only).
    fn entry(&self, from: usize, to: usize, disposition: Disposition, rule: u32) -> AuditEntry {
        entry_from_packet_in(&self.copy(from, to, disposition, rule), &self.resolver, t_allow()).expect("resolved")
    }

    fn copy(&self, from: usize, to: usize, disposition: Disposition, rule: u32) -> ofp::packet_in2::PacketIn2 {
        let frame = ipv4(&format!("10.10.1.{}", from + 1), &format!("10.10.1.{}", to + 1), TCP, &tcp(40000, 80, true));
        staged_packet_in(frame, disposition, Direction::Ingress, self.port(PODS[to]), rule)
    }
}

/// The pods of [`staged_support::cluster`], by index: `x/a` is 10.10.1.1.
const PODS: [&str; 3] = ["a", "b", "c"];
const A: usize = 0;
const B: usize = 1;
const C: usize = 2;

fn obj(name: &str) -> ObjectRef {
    ObjectRef { namespace: "x".into(), name: name.into() }
}

/// What `npagent explain` says of x/<pods[from]> -> x/<pods[to]> on TCP 80: its staged
/// difference and the policies it names.
fn explained(docs: &[&str], from: usize, to: usize) -> Option<(&'static str, Vec<String>)> {
    let agent = Agent::new(docs);
    let state = agent.state.read().unwrap();
    let (model, compiler) = (state.store.model(), state.compiler.as_ref().unwrap());
    let q = Query {
        from: format!("x/{}", PODS[from]).parse().unwrap(),
        to: format!("x/{}", PODS[to]).parse().unwrap(),
        port: Some("80/TCP".parse().unwrap()),
    };
    let enforced = explain::explain(model, compiler, &q).expect("explained");
    let staged = staged_explanation(model, compiler::Config::default(), &q, &enforced).expect("staged explained")?;
    let d = staged.difference?;
    let (StagedDifference::WouldDrop(causes) | StagedDifference::WouldAllow(causes)) = &d;
    Some((d.as_str(), causes.iter().flat_map(|c| c.policies.clone()).collect()))
}

fn antrea(e: &AuditEntry) -> String {
    Formatter::new(Format::Antrea, "n1").line(&Record::single(e.clone()))
}

/// x/allow-b isolates a today; b is isolated by nothing. A staged default-deny would isolate
/// b: the WouldDrop of c -> b names it, not the enforced x/allow-b isolating another pod.
#[test]
fn a_staged_default_deny_names_itself_not_the_enforced_policy() {
    let docs = [ALLOW_B, STAGED_DENY_ALL];
    let agent = Agent::new(&docs);
    let e = agent.entry(C, B, Disposition::WouldDrop, 0);
    assert_eq!((e.policy.clone(), e.isolated_by.clone()), (PolicyRef::StagedDrop, vec![obj("deny-all")]));
    assert_eq!(
        antrea(&e),
        "2023/07/04 12:31:02.801442 StagedIngressDefaultRule StagedNetworkPolicy:x/deny-all <nil> Ingress WouldDrop \
         <nil> x/b 10.10.1.3 40000 10.10.1.2 80 TCP 60 <nil>"
    );
    assert_eq!(explained(&docs, C, B), Some(("WouldDrop", vec!["x/deny-all".to_string()])));
    // b -> a: x/allow-b allows it in both views, whatever x/deny-all adds.
    assert_eq!(explained(&docs, B, A), None);
}

#[test]
fn a_staged_edit_names_its_rule_for_a_would_allow_and_itself_for_a_would_drop() {
    let docs = [ALLOW_B, STAGED_ALLOW_C];
    let agent = Agent::new(&docs);
    // c -> a: dropped today; the staged edit's ingress rule 0 would allow it.
    let id = agent.staged_rule("allow-b", 0);
    let e = agent.entry(C, A, Disposition::WouldAllow, id);
    assert_eq!((e.policy.clone(), e.priority), (PolicyRef::Staged(obj("allow-b")), Some(190)));
    assert_eq!(
        antrea(&e),
        "2023/07/04 12:31:02.801442 StagedIngressRule StagedNetworkPolicy:x/allow-b <nil> Ingress WouldAllow 190 \
         x/a 10.10.1.3 40000 10.10.1.1 80 TCP 60 <nil>"
    );
    assert_eq!(explained(&docs, C, A), Some(("WouldAllow", vec!["x/allow-b".to_string()])));
    // b -> a: allowed today; the edit still isolates a and no longer allows b.
    let e = agent.entry(B, A, Disposition::WouldDrop, 0);
    assert_eq!(e.isolated_by, [obj("allow-b")]);
    assert_eq!(explained(&docs, B, A), Some(("WouldDrop", vec!["x/allow-b".to_string()])));
}

/// A staged edit that stops selecting a while x/deny-a (enforced) still isolates it: no staged
/// policy isolates a, and the WouldDrop names the edit that takes b's rule away (as explain
/// does), never x/deny-a, which is not staged.
#[test]
fn a_would_drop_no_staged_policy_isolates_names_the_edit_that_removes_the_rule() {
    let docs = [DENY_A, ALLOW_B, STAGED_ALLOW_B_ELSEWHERE];
    let agent = Agent::new(&docs);
    let e = agent.entry(B, A, Disposition::WouldDrop, 0);
    assert_eq!(e.isolated_by, [obj("allow-b")]);
    assert!(antrea(&e).contains(" StagedNetworkPolicy:x/allow-b <nil> Ingress WouldDrop "), "{}", antrea(&e));
    assert_eq!(explained(&docs, B, A), Some(("WouldDrop", vec!["x/allow-b".to_string()])));
}

/// Without x/deny-a the same edit leaves a isolated by nothing: c's connection, dropped today,
/// would be allowed by no rule (register 0); the line names the edit that ends the isolation.
#[test]
fn a_would_allow_by_no_rule_names_the_edit_that_ends_the_isolation() {
    let docs = [ALLOW_B, STAGED_ALLOW_B_ELSEWHERE];
    let agent = Agent::new(&docs);
    let e = agent.entry(C, A, Disposition::WouldAllow, 0);
    assert_eq!((e.policy.clone(), e.priority), (PolicyRef::Staged(obj("allow-b")), None));
    assert_eq!(e.isolated_by, [obj("allow-b")]);
    assert_eq!(explained(&docs, C, A), Some(("WouldAllow", vec!["x/allow-b".to_string()])));
}

/// Each staged entry the pipeline resolves is counted per staged policy it names, on the
/// metrics page: the WouldDrop of two staged policies once for each.
#[test]
fn staged_verdicts_are_counted_per_staged_policy_on_the_metrics_page() {
    let docs = [ALLOW_B, STAGED_DENY_ALL, STAGED_ALLOW_C];
    let agent = Agent::new(&docs);
    let stats = Arc::new(AuditStats::default());
    let cfg = AuditConfig { dedup_window: Duration::ZERO, ..AuditConfig::default() };
    let mut pipeline = Pipeline::new(&cfg, Arc::new(agent.resolver.clone()), Vec::<u8>::new(), Arc::clone(&stats));
    let id = agent.staged_rule("allow-b", 0);
    let moment = audit_support::clocks(t_allow());
    for _ in 0..3 {
        pipeline.handle(&agent.copy(B, A, Disposition::WouldDrop, 0), moment).expect("b -> a");
    }
    pipeline.handle(&agent.copy(C, A, Disposition::WouldAllow, id), moment).expect("c -> a");
    // Unresolvable: not counted as a verdict.
    assert!(pipeline.handle(&agent.copy(C, A, Disposition::WouldAllow, id + 100), moment).is_err());
    let page = render(&registry(Arc::new(AgentMetrics::default()), Arc::clone(&stats)));
    let samples: Vec<&str> = page.lines().filter(|l| l.starts_with("npagent_staged_verdicts_total{")).collect();
    assert_eq!(
        samples,
        [
            "npagent_staged_verdicts_total{policy=\"x/allow-b\",disposition=\"WouldDrop\"} 3",
            "npagent_staged_verdicts_total{policy=\"x/allow-b\",disposition=\"WouldAllow\"} 1",
            "npagent_staged_verdicts_total{policy=\"x/deny-all\",disposition=\"WouldDrop\"} 3",
            "npagent_staged_verdicts_total{policy=\"x/deny-all\",disposition=\"WouldAllow\"} 0",
        ],
        "{page}"
    );
    assert!(page.contains("npagent_packet_ins_unresolved_total 1\n"), "{page}");
    let lines = String::from_utf8(pipeline.sink().clone()).unwrap();
    assert_eq!(lines.lines().count(), 4, "{lines}");
    assert!(lines.lines().take(3).all(|l| l.contains(" StagedNetworkPolicy:x/allow-b,x/deny-all ")), "{lines}");
}
