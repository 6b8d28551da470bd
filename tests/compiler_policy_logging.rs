//! Per-policy audit logging in the compiled flows: a NetworkPolicy annotated
//! `networkpolicy.antrea.io/enable-logging` logs its own Allows and the default drops of the
//! pods it isolates, in a Namespace that does not log; the incremental compiler follows the
//! annotation being added and removed exactly as a full compile does.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

use npagent::compiler::synthetic::*;
use npagent::compiler::{compile, flows_text, Change, Config, FlowTable, IdAllocator};
use npagent::model::logging::{LOGGING_ANNOTATION, LOG_LABEL_ANNOTATION};
use npagent::model::{IngressRule, Model, Peer, Policy};

/// Namespace y (not logging) with pods a and b on ports 1 and 2; x/c a peer elsewhere.
fn base() -> Model {
    Model::default()
        .with_ns(namespace("x", &[], &[]))
        .with_ns(namespace("y", &[], &[]))
        .with_pod(pod("y", "a", &[("pod", "a")], &["10.0.1.1"]))
        .with_pod(pod("y", "b", &[("pod", "b")], &["10.0.1.2"]))
        .with_pod(pod("x", "c", &[("pod", "c")], &["10.0.0.3"]))
        .with_port(port(1, "y", "a", 1))
        .with_port(port(2, "y", "b", 2))
}

/// y/allow-a: x/c to y/a on TCP 80, annotated as given.
fn allow_a(annotations: &[(&str, &str)]) -> Policy {
    let from = vec![Peer::Pods { pod_selector: Some(sel(&[("pod", "c")])), namespace_selector: Some(sel(&[])) }];
    let mut p = policy("y", "allow-a", sel(&[("pod", "a")]), vec![IngressRule { from, ports: vec![tcp(80)] }]);
    p.annotations = annotations.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    p
}

/// y/deny-b: isolates y/b, not annotated.
fn deny_b() -> Policy {
    policy("y", "deny-b", sel(&[("pod", "b")]), vec![])
}

fn text(flows: &FlowTable) -> Vec<String> {
    flows_text(flows, &Default::default())
}

/// The policy flows that send a copy to npagent: default drops (their own copy), and rule
/// flows through LogCopy (their rule in reg6). LogCopy and the security events' flows
/// (ConntrackQuota's refusals among them) are there whatever the policies, and so are the staged verdicts' checks, whose copies (through
/// LogCopy, no rule in reg6) are made whatever the logging switch.
fn logging(flows: &FlowTable) -> Vec<String> {
    let always = ["table=LogCopy", "table=SpoofGuard", "table=ConntrackState", "table=ConntrackQuota"];
    let allow_copy = |l: &str| l.contains("->reg6,") && l.contains("resubmit(,LogCopy)");
    text(flows)
        .into_iter()
        .filter(|l| !always.iter().any(|t| l.contains(t)))
        .filter(|l| l.contains("controller(") || allow_copy(l))
        .collect()
}

#[test]
fn an_annotated_policy_logs_its_rules_and_its_pods_default_drops() {
    let m = base()
        .with_policy(allow_a(&[(LOGGING_ANNOTATION, "true"), (LOG_LABEL_ANNOTATION, "team-y")]))
        .with_policy(deny_b());
    let c = compile(&m, Config::default(), IdAllocator::new(0), 0);
    let logged = logging(c.flows());
    assert_eq!(logged.len(), 2, "allow-a's conj_id flow and y/a's default drop:\n{}", logged.join("\n"));
    assert!(logged.iter().any(|l| l.contains("table=IngressRule") && l.contains("conj_id=")), "{logged:?}");
    assert!(logged.iter().any(|l| l.contains("table=IngressDefaultRule") && l.contains("reg4=0x1")), "{logged:?}");
    let rule = c.rules().rules().values().find(|r| r.policy == oref("y", "allow-a")).expect("allow-a's rule");
    assert_eq!(rule.log_label.as_deref(), Some("team-y"));

    // Without the annotation nothing logs; a bad value is off too.
    for anns in [&[][..], &[(LOGGING_ANNOTATION, "yes")][..]] {
        let m = base().with_policy(allow_a(anns)).with_policy(deny_b());
        assert_eq!(
            logging(compile(&m, Config::default(), IdAllocator::new(0), 0).flows()),
            Vec::<String>::new(),
            "{anns:?}"
        );
    }
}

#[test]
fn the_incremental_compiler_follows_the_annotation() {
    let quiet = base().with_policy(allow_a(&[])).with_policy(deny_b());
    let loud = base().with_policy(allow_a(&[(LOGGING_ANNOTATION, "true")])).with_policy(deny_b());
    let mut c = compile(&quiet, Config::default(), IdAllocator::new(0), 0);
    for (m, logs) in [(&loud, 2), (&quiet, 0), (&loud, 2)] {
        c.update(m, &[Change::Policy(oref("y", "allow-a"))], 0);
        let full = compile(m, Config::default(), IdAllocator::new(0), 0);
        assert_eq!(text(c.flows()), text(full.flows()), "incremental and full compiles differ");
        assert_eq!(logging(c.flows()).len(), logs);
    }
}
