//! ClusterNetworkPolicy end to end: `npagent run` on the testbed (nine pods on a real
//! userspace OVS) with the worked example of the README (testbed/examples: a tenant baseline
//! for x, the operator's Admin override, and x's own NetworkPolicy), real connections, and
//! the np.log lines they lead to: one line per verdict naming the policy and the rule, a
//! `Pass` line before the line of the tier that then decides, and the decision chain in JSON;
//! and the verdicts the tiers' flows counted, on `/metrics`, per policy and rule.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

mod support;

use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use support::agent::Agent;
use support::audit_log::json_lines;
use support::{wait_until, write_atomic, Port, Testbed};

const LOGGING: &str = "networkpolicy.antrea.io/enable-logging";

/// Namespaces x and y log (z does not); the worked example's three policies.
fn example_testbed() -> Testbed {
    example_testbed_logging(&["x", "y"])
}

/// The worked example's three policies; the namespaces `logging` log.
fn example_testbed_logging(logging: &[&str]) -> Testbed {
    let tb = Testbed::start();
    let mut text = String::new();
    for ns in ["x", "y", "z"] {
        text.push_str(&format!(
            "---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n  labels:\n    ns: {ns}\n"
        ));
        if logging.contains(&ns) {
            text.push_str(&format!("  annotations:\n    {LOGGING}: \"true\"\n"));
        }
    }
    write_atomic(&tb.manifests_dir().join("namespaces.yaml"), &text);
    for name in ["cnp-tenant-baseline-x", "cnp-admin-override", "allow-yb-to-xa-tcp80"] {
        let text = std::fs::read_to_string(support::sandbox::repo_path(&format!("testbed/examples/{name}.yaml")))
            .expect("read example");
        write_atomic(&tb.manifests_dir().join(format!("{name}.yaml")), &text);
    }
    tb
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path).unwrap_or_default().lines().map(str::to_string).collect()
}

/// (from, to, port, reaches): the tiers decide as upstream says.
const EXPECTED: [(&str, &str, Port, bool); 10] = [
    // Admin Accept (monitoring) over x/a's isolation.
    ("z/a", "x/a", Port::Tcp80, true),
    ("z/a", "x/a", Port::Tcp81, false),
    // Admin Pass, then x's NetworkPolicy: y/b allowed, y/c dropped by x/a's isolation.
    ("y/b", "x/a", Port::Tcp80, true),
    ("y/c", "x/a", Port::Tcp80, false),
    // x/c is isolated by no NetworkPolicy: the Baseline tier decides.
    ("x/b", "x/c", Port::Tcp80, true),
    ("z/b", "x/c", Port::Tcp80, false),
    ("y/a", "x/c", Port::Tcp80, false),
    // Admin Deny of every pod's egress to z on TCP 81.
    ("x/a", "z/b", Port::Tcp81, false),
    ("x/a", "z/b", Port::Tcp80, true),
    ("y/a", "z/b", Port::Tcp81, false),
];

#[test]
fn the_worked_example_decides_and_logs_every_verdict() {
    let tb = example_testbed();
    let logs = tempfile::Builder::new().prefix("npa-e2e-cnp-").tempdir().expect("temp dir");
    let json_log = logs.path().join("np.json");
    let agent = Agent::start(&tb.sandbox, &tb.manifests_dir(), &json_log, &["--audit-format", "json"]);
    let mut wrong = Vec::new();
    for (from, to, port, want) in EXPECTED {
        if tb.reaches(from, to, port) != want {
            wrong.push(format!("{from} -> {to} {port}: expected {}", if want { "reached" } else { "not reached" }));
        }
    }
    assert!(wrong.is_empty(), "{}\n{}", wrong.join("\n"), agent.log_tail(40));
    std::thread::sleep(Duration::from_millis(1_500)); // drop aggregates are written within 1 s
    assert!(agent.stop().success());
    let objs = json_lines(&json_log);
    let find = |pred: &dyn Fn(&Value) -> bool, what: &str| -> Vec<Value> {
        let found: Vec<Value> = objs.iter().filter(|o| pred(o)).cloned().collect();
        assert!(
            !found.is_empty(),
            "no line {what}:\n{}",
            objs.iter().map(Value::to_string).collect::<Vec<_>>().join("\n")
        );
        found
    };
    let ip = |id: &str| tb.pod(id).ip;
    let between = |o: &Value, from: &str, to: &str| o["source"]["ip"] == ip(from) && o["destination"]["ip"] == ip(to);
    let cnp = |o: &Value, name: &str, rule: &str| {
        o["policy"] == serde_json::json!({"kind": "ClusterNetworkPolicy", "namespace": null, "name": name})
            && o["rule"] == rule
    };

    // Admin Accept: one line, Admin tier, its priority, the chain of its one step.
    let monitoring = find(&|o| between(o, "z/a", "x/a") && cnp(o, "admin-override", "monitoring"), "monitoring");
    let m = &monitoring[0];
    assert_eq!(
        (&m["table"], &m["direction"], &m["disposition"]),
        (&"AdminIngressRule".into(), &"Ingress".into(), &"Allow".into())
    );
    assert_eq!((&m["tier"], &m["tier_priority"]), (&"Admin".into(), &10.into()));
    assert_eq!(m["chain"], serde_json::json!(["Admin/Accept admin-override:monitoring"]));
    assert_eq!(m["applied_to"], serde_json::json!({"namespace": "x", "pod": "a"}));

    // Pass, then x's NetworkPolicy: the Pass line first, the NetworkPolicy's Allow after it,
    // for the same connection (source port), the chain naming both.
    let pass_rule = "y-to-x-by-network-policy";
    let passes = find(&|o| between(o, "y/b", "x/a") && cnp(o, "admin-override", pass_rule), "Pass y/b -> x/a");
    assert_eq!(passes[0]["disposition"], "Pass");
    assert_eq!(passes[0]["chain"], serde_json::json!([format!("Admin/Pass admin-override:{pass_rule}")]));
    let allow = find(
        &|o| between(o, "y/b", "x/a") && o["policy"]["kind"] == "K8sNetworkPolicy" && o["disposition"] == "Allow",
        "NetworkPolicy Allow y/b -> x/a",
    );
    let chain =
        serde_json::json!([format!("Admin/Pass admin-override:{pass_rule}"), "NetworkPolicy x/allow-yb-to-xa-tcp80"]);
    assert_eq!(allow[0]["chain"], chain);
    let position = |o: &Value| objs.iter().position(|x| x == o).unwrap();
    let same_port = passes
        .iter()
        .find(|p| p["source"]["port"] == allow[0]["source"]["port"])
        .expect("a Pass line of the allowed connection");
    assert!(position(same_port) < position(&allow[0]), "the Pass line comes first");

    // Pass, then x/a's default drop.
    let dropped = find(
        &|o| between(o, "y/c", "x/a") && o["policy"]["kind"] == "K8sNetworkPolicy" && o["disposition"] == "Drop",
        "default drop y/c -> x/a",
    );
    assert_eq!(
        dropped[0]["chain"],
        serde_json::json!([format!("Admin/Pass admin-override:{pass_rule}"), "NetworkPolicy default drop"])
    );

    // The Baseline tier where no NetworkPolicy isolates: Accept from x, Deny from the others
    // (after the Admin Pass for y's).
    let own = find(&|o| between(o, "x/b", "x/c") && cnp(o, "tenant-baseline-x", "from-own-tenant"), "baseline Accept");
    assert_eq!(
        (&own[0]["table"], &own[0]["disposition"], &own[0]["tier"]),
        (&"BaselineIngressRule".into(), &"Allow".into(), &"Baseline".into())
    );
    let other =
        find(&|o| between(o, "z/b", "x/c") && cnp(o, "tenant-baseline-x", "from-other-tenants"), "baseline Deny");
    assert_eq!(other[0]["disposition"], "Drop");
    assert_eq!(other[0]["chain"], serde_json::json!(["Baseline/Deny tenant-baseline-x:from-other-tenants"]));
    let from_y = find(
        &|o| between(o, "y/a", "x/c") && cnp(o, "tenant-baseline-x", "from-other-tenants"),
        "baseline Deny after Pass",
    );
    assert_eq!(
        from_y[0]["chain"],
        serde_json::json!([
            format!("Admin/Pass admin-override:{pass_rule}"),
            "Baseline/Deny tenant-baseline-x:from-other-tenants"
        ])
    );

    // Admin Deny of egress, logged for the source pod.
    let denied =
        find(&|o| between(o, "x/a", "z/b") && cnp(o, "admin-override", "no-tcp-81-into-z"), "Admin Deny egress");
    assert_eq!(
        (&denied[0]["table"], &denied[0]["direction"], &denied[0]["disposition"]),
        (&"AdminEgressRule".into(), &"Egress".into(), &"Drop".into())
    );

    // z does not log: no line is applied to a pod of z.
    assert!(objs.iter().all(|o| o["applied_to"]["namespace"] != "z"), "z logs nothing");
}

#[test]
fn antrea_lines_name_the_cluster_policy_and_the_pass() {
    let tb = example_testbed();
    let logs = tempfile::Builder::new().prefix("npa-e2e-cnp-").tempdir().expect("temp dir");
    let np_log = logs.path().join("np.log");
    let agent = Agent::start(&tb.sandbox, &tb.manifests_dir(), &np_log, &[]);
    assert!(tb.reaches("y/b", "x/a", Port::Tcp80));
    wait_until(Duration::from_secs(5), "two lines", || lines(&np_log).len() >= 2);
    assert!(agent.stop().success());
    let all = lines(&np_log);
    let body = |l: &str| l.get(27..).unwrap_or_default().to_string();
    let (yb, xa) = (tb.pod("y/b").ip, tb.pod("x/a").ip);
    let ingress: Vec<String> = all.iter().map(|l| body(l)).filter(|b| b.contains(" Ingress ")).collect();
    assert!(ingress.len() >= 2, "{all:#?}");
    let port = ingress[0].split(' ').nth(8).unwrap().to_string();
    let pass_priority = ingress[0].split(' ').nth(5).unwrap().to_string();
    assert_eq!(
        ingress[0],
        format!("AdminIngressRule ClusterNetworkPolicy:admin-override y-to-x-by-network-policy Ingress Pass {pass_priority} x/a {yb} {port} {xa} 80 TCP 60 <nil>")
    );
    assert!(pass_priority.parse::<u16>().unwrap() > 210, "{pass_priority}: above the NetworkPolicy tables' priorities");
    assert_eq!(
        ingress[1],
        format!("IngressRule K8sNetworkPolicy:x/allow-yb-to-xa-tcp80 <nil> Ingress Allow 190 x/a {yb} {port} {xa} 80 TCP 60 <nil>")
    );
}

/// A restart with the same ClusterNetworkPolicies sends nothing: their conjunction ids and
/// cookies are recovered from the bridge, and the tiers keep deciding (and logging) as before.
#[test]
fn a_restart_keeps_the_tiers_flows_and_ids() {
    let tb = example_testbed();
    let logs = tempfile::Builder::new().prefix("npa-e2e-cnp-").tempdir().expect("temp dir");
    let np_log = logs.path().join("np.log");
    let agent = Agent::start(&tb.sandbox, &tb.manifests_dir(), &np_log, &[]);
    assert!(tb.reaches("z/a", "x/a", Port::Tcp80));
    let before = tb.sandbox.ofctl(&["dump-flows", "--no-stats", "--names"]);
    assert!(before.contains("table=AdminIngressRule") && before.contains("conj_id="), "{before}");
    assert!(agent.stop().success());
    let mut agent = Agent::start(&tb.sandbox, &tb.manifests_dir(), &np_log, &[]);
    let resync = agent.wait_log("resync with the switch", Duration::from_secs(5));
    assert!(resync.contains(" 0 flow_mods to send"), "{resync}");
    let after = tb.sandbox.ofctl(&["dump-flows", "--no-stats", "--names"]);
    let sorted = |text: &str| {
        let mut l: Vec<String> = text.lines().map(str::to_string).collect();
        l.sort();
        l
    };
    assert_eq!(sorted(&after), sorted(&before), "the restart changed flows");
    assert!(tb.reaches("y/b", "x/a", Port::Tcp80) && !tb.reaches("y/c", "x/a", Port::Tcp80));
    wait_until(Duration::from_secs(5), "a Pass line after the restart", || {
        lines(&np_log).iter().filter(|l| l.contains(" Pass ")).count() >= 2
    });
    assert!(agent.stop().success());
}

/// A baseline for z beside the example's, its one rule unnamed (`ingress-0` on /metrics):
/// connections from y are refused.
const BASELINE_Z: &str = "apiVersion: policy.networking.k8s.io/v1alpha2
kind: ClusterNetworkPolicy
metadata:
  name: tenant-baseline-z
spec:
  tier: Baseline
  priority: 60
  subject:
    namespaces:
      matchLabels:
        ns: z
  ingress:
  - action: Deny
    from:
    - namespaces:
        matchLabels:
          ns: y
";

/// Connections whose verdicts the tiers count (each probe opens TCP 80, TCP 81 and UDP 80 at
/// once, and gives up on a refused one after 0.5 s, before TCP sends its SYN again): the
/// monitoring Accept lets z/a's TCP 80 into x/a (1); y's connections into x/a and z/a pass
/// the Admin tier (3 + 2); z/b's are refused by x's tenant baseline (3 packets); TCP 81 into
/// z is denied on the way out of x/a and y/a (2 packets), and y/a's other two by z's unnamed
/// baseline rule (2 packets).
fn connect(tb: &Testbed) {
    for (from, to, port, want) in [
        ("z/a", "x/a", Port::Tcp80, true),
        ("y/b", "x/a", Port::Tcp80, true),
        ("z/b", "x/c", Port::Tcp80, false),
        ("x/a", "z/b", Port::Tcp81, false),
        ("y/a", "z/a", Port::Tcp80, false),
    ] {
        assert_eq!(tb.reaches(from, to, port), want, "{from} -> {to} {port}");
    }
}

/// The agent's `npagent_cluster_policy_verdicts_total` samples, labels -> count.
fn verdict_samples(agent: &Agent) -> std::collections::BTreeMap<String, u64> {
    const NAME: &str = "npagent_cluster_policy_verdicts_total";
    let metrics = agent.metrics();
    metrics.0.keys().filter_map(|k| Some((k.strip_prefix(NAME)?.to_owned(), metrics.count(k)))).collect()
}

/// Waits (at most two dump periods and some) until the agent's verdicts are `want`; panics
/// with what they are otherwise.
fn wait_for_verdicts(agent: &Agent, want: &[(String, u64)]) {
    let holds = || {
        let got = verdict_samples(agent);
        want.iter().all(|(labels, n)| got.get(labels) == Some(n))
    };
    let explain = || format!("want {want:#?}\ngot {:#?}", verdict_samples(agent));
    support::wait_until_every(Duration::from_secs(25), Duration::from_millis(500), "the verdicts", holds, explain);
}

/// The labels of a rule's series.
fn rule(tier: &str, policy: &str, rule: &str, action: &str, direction: &str) -> String {
    format!("{{tier=\"{tier}\",policy=\"{policy}\",rule=\"{rule}\",action=\"{action}\",direction=\"{direction}\"}}")
}

#[test]
fn the_tiers_verdicts_are_counted_per_policy_and_rule_from_the_switchs_counters() {
    // No namespace logs: the counts are the switch's, not the audit log's.
    let tb = example_testbed_logging(&[]);
    write_atomic(&tb.manifests_dir().join("cnp-tenant-baseline-z.yaml"), BASELINE_Z);
    let logs = tempfile::Builder::new().prefix("npa-e2e-cnp-").tempdir().expect("temp dir");
    let np_log = logs.path().join("np.log");
    let agent = Agent::start(&tb.sandbox, &tb.manifests_dir(), &np_log, &[]);
    connect(&tb);
    let want = [
        (rule("Admin", "admin-override", "monitoring", "Accept", "Ingress"), 1),
        (rule("Admin", "admin-override", "y-to-x-by-network-policy", "Pass", "Ingress"), 5),
        (rule("Admin", "admin-override", "no-tcp-81-into-z", "Deny", "Egress"), 2),
        (rule("Baseline", "tenant-baseline-x", "from-own-tenant", "Accept", "Ingress"), 0),
        (rule("Baseline", "tenant-baseline-x", "from-other-tenants", "Deny", "Ingress"), 3),
        (rule("Baseline", "tenant-baseline-z", "ingress-0", "Deny", "Ingress"), 2),
    ];
    wait_for_verdicts(&agent, &want);
    let got = verdict_samples(&agent);
    assert_eq!(got.len(), want.len(), "one series per rule, none unresolved: {got:#?}");
    assert!(lines(&np_log).is_empty(), "nothing logged, all counted");
    assert!(agent.stop().success());

    // Again, without the names: the restarted agent counts what its run saw, by tier, action
    // and direction.
    let agent = Agent::start(&tb.sandbox, &tb.manifests_dir(), &np_log, &["--metrics-policy-labels=false"]);
    connect(&tb);
    let sum = |tier: &str, action: &str, direction: &str, n| {
        (format!("{{tier=\"{tier}\",action=\"{action}\",direction=\"{direction}\"}}"), n)
    };
    let mut want = Vec::new();
    for tier in ["Admin", "Baseline"] {
        for action in ["Accept", "Deny", "Pass"] {
            for direction in ["Egress", "Ingress"] {
                let n = match (tier, action, direction) {
                    ("Admin", "Accept", "Ingress") => 1,
                    ("Admin", "Pass", "Ingress") => 5,
                    ("Admin", "Deny", "Egress") => 2,
                    ("Baseline", "Deny", "Ingress") => 5,
                    _ => 0,
                };
                want.push(sum(tier, action, direction, n));
            }
        }
    }
    wait_for_verdicts(&agent, &want);
    assert_eq!(verdict_samples(&agent).len(), 12, "{:#?}", verdict_samples(&agent));
    let page = agent.metrics_text();
    for name in ["admin-override", "tenant-baseline", "monitoring", "ingress-0", "policy=\"", "rule=\""] {
        assert!(!page.contains(name), "{name} on the page:\n{page}");
    }
    assert!(agent.stop().success());
}
