//! StagedNetworkPolicies with real packets on the testbed (issue 21): a staged policy is
//! judged, never enforced. Every new connection whose verdict in the staged view (the
//! enforced policies with the staged ones applied on top) differs from the enforced one gets
//! a `WouldDrop` or `WouldAllow` line, whatever the namespace's logging switch says, through
//! a staged meter of the pod it belongs to.
//!
//! - The scenario suite with every NetworkPolicy staged keeps the no-policy truth table, and
//!   its `WouldDrop` lines name exactly the connections each scenario's truth table denies.
//! - A staged default-deny's `WouldDrop` lines name exactly what it drops once promoted.
//! - A staged edit of an enforced policy logs both `WouldDrop` and `WouldAllow`.
//! - Deleting a staged policy stops its lines.
//! - A flood of would-dropped connections hides no Allow or Drop line (separate meters).
//! - Staged lines are written in a namespace whose logging is off.
//!
//! Each test has a testbed and an agent of its own, writing a JSON audit log. Needs root.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

mod support;

#[path = "e2e_scenarios/harness.rs"]
mod harness;
#[path = "e2e_scenarios/scenario.rs"]
mod scenario;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use harness::{flows_command_diff, probed_port, ManifestDir, ScenarioBed};
use scenario::{all_probes, PodId, PortKey, Step};
use support::agent::Agent;
use support::audit_log::{json_lines, pod_id, wait_json_line};
use support::policy::network_policy;
use support::{write_atomic, Port, Reachability, Testbed, A_FROM_B, NAMESPACES_X_LOGGING};

// ---------------------------------------------------------------------------------------
// Staging, the agent, convergence

const STAGED_API_VERSION: &str = "policy.npagent.io/v1alpha1";
const STAGED_KIND: &str = "StagedNetworkPolicy";

/// A NetworkPolicy document (YAML text, one or more documents) as StagedNetworkPolicies: the
/// same spec, another kind and API group. Promoting is the reverse.
fn staged(text: &str) -> String {
    text.replace("apiVersion: networking.k8s.io/v1", &format!("apiVersion: {STAGED_API_VERSION}"))
        .replace("kind: NetworkPolicy", &format!("kind: {STAGED_KIND}"))
}

/// A NetworkPolicy document (a scenario's) as a StagedNetworkPolicy.
fn staged_doc(doc: &Value) -> Value {
    let mut doc = doc.clone();
    assert_eq!(doc["kind"], "NetworkPolicy", "{doc}");
    doc["apiVersion"] = STAGED_API_VERSION.into();
    doc["kind"] = STAGED_KIND.into();
    doc
}

/// The dedup window of the agents here: staged lines are aggregated like Drop lines, and
/// written when their window ends.
const DEDUP_WINDOW: &str = "100ms";
/// Longer than the dedup window, and the audit task's tick: every line of what happened
/// before is written by then.
const LINES_SETTLE: Duration = Duration::from_millis(400);

/// `npagent run` on the testbed's manifests with a JSON audit log `np.json` in the sandbox's
/// directory (and `extra` arguments); waits until it is ready.
fn start_agent(tb: &Testbed, extra: &[&str]) -> (Agent, std::path::PathBuf) {
    let log = tb.sandbox.dir.join("np.json");
    let mut args = vec!["--audit-format", "json", "--audit-dedup-window", DEDUP_WINDOW];
    args.extend_from_slice(extra);
    (Agent::start(&tb.sandbox, &tb.manifests_dir(), &log, &args), log)
}

/// Waits until the bridge holds exactly the flows `npagent flows` computes from the manifests
/// directory: the agent has acted on what the directory says now.
fn wait_converged(tb: &Testbed, agent: &Agent, what: &str) {
    let started = Instant::now();
    loop {
        let differ = flows_command_diff(tb, &tb.manifests_dir());
        if differ.is_empty() {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{what}: the bridge never held the flows of the manifests:\n  {}\nagent log:\n{}",
            differ.join("\n  "),
            agent.log_tail(30)
        );
    }
}

/// The flows of the staged tables and the checks that copy staged verdicts, for failure
/// messages.
fn staged_flows(tb: &Testbed) -> String {
    let flows = tb.sandbox.dump_flows();
    flows
        .iter()
        .filter(|f| {
            f.contains("table=Staged") || f.contains("reg8") || f.contains("reg10") || f.contains("table=LogCopy")
        })
        .cloned()
        .collect::<Vec<_>>()
        .join("\n")
}

// ---------------------------------------------------------------------------------------
// Connections, in probes and in the log

/// A connection the tests name: source and destination (`ns/pod`, `outside/h1`) and the
/// destination port.
type Conn = (String, String, Port);

fn show(conns: &BTreeSet<Conn>) -> String {
    if conns.is_empty() {
        return "  (none)".into();
    }
    conns.iter().map(|(f, t, p)| format!("  {f} -> {t} {p}")).collect::<Vec<_>>().join("\n")
}

/// `ns/pod` (or `outside/name`) of every testbed address.
fn hosts_by_ip(tb: &Testbed) -> BTreeMap<String, String> {
    tb.hosts().into_iter().map(|h| (h.ip.clone(), h.id())).collect()
}

/// The connection a packet line is about.
fn conn_of(line: &Value, hosts: &BTreeMap<String, String>) -> Conn {
    let end = |side: &str| -> String {
        let ip = line[side]["ip"].as_str().unwrap_or_else(|| panic!("no {side} address: {line}"));
        hosts.get(ip).cloned().unwrap_or_else(|| panic!("{side} {ip} is no testbed host: {line}"))
    };
    let port = format!(
        "{}/{}",
        line["protocol"].as_str().unwrap_or_default().to_ascii_lowercase(),
        line["destination"]["port"].as_u64().unwrap_or_default()
    );
    let port = Port::parse(&port).unwrap_or_else(|| panic!("a line for a port never probed: {line}"));
    (end("source"), end("destination"), port)
}

/// The packet lines of the log after the first `skip` lines (gap records left out).
fn packet_lines(log: &Path, skip: usize) -> Vec<Value> {
    json_lines(log).into_iter().skip(skip).filter(|v| v.get("type").is_none()).collect()
}

/// The connections of the lines with `disposition`.
fn conns(lines: &[Value], disposition: &str, hosts: &BTreeMap<String, String>) -> BTreeSet<Conn> {
    lines.iter().filter(|v| v["disposition"] == disposition).map(|v| conn_of(v, hosts)).collect()
}

/// Waits (at most 5 s) until the log's lines after `skip` name every connection of `want`
/// with `disposition`, then [`LINES_SETTLE`] and until no line came for as long again (at
/// most 5 s more); returns the lines after `skip`.
fn wait_lines(log: &Path, skip: usize, disposition: &str, want: &BTreeSet<Conn>, tb: &Testbed) -> Vec<Value> {
    let hosts = hosts_by_ip(tb);
    let started = Instant::now();
    while !want.is_subset(&conns(&packet_lines(log, skip), disposition, &hosts))
        && started.elapsed() < Duration::from_secs(5)
    {
        std::thread::sleep(Duration::from_millis(100));
    }
    let quiet = Instant::now();
    let mut seen = json_lines(log).len();
    loop {
        std::thread::sleep(LINES_SETTLE);
        let now = json_lines(log).len();
        if now == seen || quiet.elapsed() > Duration::from_secs(5) {
            return packet_lines(log, skip);
        }
        seen = now;
    }
}

/// The probes of `r` that failed, a pod to itself aside.
fn unreachable(r: &Reachability) -> BTreeSet<Conn> {
    let (from, to) = r.pods();
    let mut out = BTreeSet::new();
    for f in from {
        for t in to {
            for p in Port::ALL {
                if f != t && !r.get(f, t, p) {
                    out.insert((f.clone(), t.clone(), p));
                }
            }
        }
    }
    out
}

/// Every probe among `pods` reachable but those of `denied` (a pod reaches itself).
fn reachability_without(pods: &[String], denied: &BTreeSet<Conn>) -> Reachability {
    let mut r = Reachability::new(pods, true);
    for (f, t, p) in denied {
        r.set(f, t, *p, false);
    }
    r
}

// ---------------------------------------------------------------------------------------
// 1: the scenario suite, staged

/// One scenario step with its policies staged: what went wrong, if anything.
fn run_staged_step(
    tb: &Testbed,
    agent: &Agent,
    log: &Path,
    dir: &mut ManifestDir,
    endpoints: &BTreeSet<PodId>,
    step: &Step,
) -> Result<(), String> {
    let staged_step = Step { policies: step.policies.iter().map(staged_doc).collect(), ..step.clone() };
    dir.apply(&staged_step);
    wait_converged(tb, agent, &step.doc);
    let skip = json_lines(log).len();
    // Every probe a new connection: no 5-tuple of an earlier step's probe is still tracked.
    tb.sandbox.flush_conntrack();

    // Nothing staged changes connectivity: the no-policy truth table, every probe allowed.
    let ids: Vec<String> = endpoints.iter().map(PodId::to_string).collect();
    let everything = Reachability::new(&ids, true);
    let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    let mut observed = tb.probe(&refs, &refs);
    for _ in 0..2 {
        if everything.diff(&observed).is_empty() {
            break;
        }
        observed = tb.probe(&refs, &refs);
    }
    let wrong = everything.diff(&observed);
    if !wrong.is_empty() {
        return Err(format!(
            "staged policies changed connectivity in {} probes:\n  {}\nstaged flows:\n{}",
            wrong.len(),
            wrong.join("\n  "),
            staged_flows(tb)
        ));
    }

    // What the step's truth table denies is what the staged view would drop: one WouldDrop
    // line (or two: egress and ingress) per denied connection, and no other staged line.
    let ports: BTreeSet<PortKey> = PortKey::PROBED.into_iter().collect();
    let denied: BTreeSet<Conn> = all_probes(endpoints, &ports)
        .into_iter()
        .filter(|p| !step.expect.allows(p))
        .filter_map(|p| Some((p.from.to_string(), p.to.to_string(), probed_port(p.port)?)))
        .collect();
    let lines = wait_lines(log, skip, "WouldDrop", &denied, tb);
    let hosts = hosts_by_ip(tb);
    let would_drop = conns(&lines, "WouldDrop", &hosts);
    let others: Vec<&Value> = lines.iter().filter(|v| v["disposition"] != "WouldDrop").collect();
    if would_drop == denied && others.is_empty() {
        return Ok(());
    }
    Err(format!(
        "WouldDrop lines for connections the truth table allows:\n{}\nno WouldDrop line for connections it denies:\n{}\nother lines:\n{}\nstaged flows:\n{}\nagent log (tail):\n{}",
        show(&would_drop.difference(&denied).cloned().collect()),
        show(&denied.difference(&would_drop).cloned().collect()),
        others.iter().map(|v| format!("  {v}")).collect::<Vec<_>>().join("\n"),
        staged_flows(tb),
        agent.log_tail(20)
    ))
}

/// Every scenario of testbed/scenarios with its NetworkPolicies rewritten as
/// StagedNetworkPolicies (Namespace and Pod patches as they are): every probe is allowed,
/// as with no policy at all, and the `WouldDrop` lines name exactly the connections the
/// scenario's own truth table denies (per step; its SCTP expectations are not probed). No
/// other line is written: nothing is enforced, and nothing logs. After each step `npagent
/// flows` prints exactly the bridge's flows, staged ones included. `NPA_SCENARIOS=word,...`
/// runs the scenarios whose file name contains one of the words.
#[test]
fn staged_scenarios_keep_the_no_policy_truth_table_and_would_drop_what_they_deny() {
    let _serial = harness::timing_lock();
    let ScenarioBed { tb, mut dir, base, scenarios, .. } = ScenarioBed::start();
    let (agent, log) = start_agent(&tb, &[]);

    let started = Instant::now();
    let (mut failed, mut steps) = (Vec::new(), 0);
    for s in scenarios.iter().filter(|s| harness::selected(s)) {
        for (i, step) in s.steps.iter().enumerate() {
            let label = if s.steps.len() > 1 { format!("{} step {}", s.file, i + 1) } else { s.file.clone() };
            let endpoints = step.expect.endpoints(&base.pods(), &base.outside_hosts());
            steps += 1;
            if let Err(why) = run_staged_step(&tb, &agent, &log, &mut dir, &endpoints, step) {
                eprintln!("FAIL  {label} (staged)\n  {}\n{why}", s.doc.trim());
                failed.push(label);
                break;
            }
        }
        dir.reset();
    }
    eprintln!("{steps} staged steps in {:.1} s, {} failed", started.elapsed().as_secs_f64(), failed.len());
    assert!(failed.is_empty(), "failed staged scenarios:\n  {}", failed.join("\n  "));
    assert!(agent.stop().success());
}

// ---------------------------------------------------------------------------------------
// 2: a staged default-deny, then promoted

/// Namespace x isolated both ways, with a few allowances: x/a accepts x/b on TCP 80; x's
/// pods may open UDP 80 to namespace y and TCP 80 to any x/a.
const X_DEFAULT_DENY: &str = "apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {namespace: x, name: default-deny}
spec:
  podSelector: {}
  policyTypes: [Ingress, Egress]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {namespace: x, name: a-from-b}
spec:
  podSelector: {matchLabels: {pod: a}}
  policyTypes: [Ingress]
  ingress:
  - from: [{podSelector: {matchLabels: {pod: b}}}]
    ports: [{protocol: TCP, port: 80}]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {namespace: x, name: out}
spec:
  podSelector: {}
  policyTypes: [Egress]
  egress:
  - to: [{namespaceSelector: {matchLabels: {ns: y}}}]
    ports: [{protocol: UDP, port: 80}]
  - to: [{podSelector: {matchLabels: {pod: a}}}]
    ports: [{protocol: TCP, port: 80}]
";

/// x's default-deny staged: every pair still connects, and the `WouldDrop` lines name a set
/// of connections. Promoted live (the same manifest as NetworkPolicies): exactly that set
/// fails, and exactly that set has Drop lines (x logs); no staged line is written any more.
#[test]
fn a_staged_default_deny_would_drop_exactly_what_it_drops_once_promoted() {
    let tb = Testbed::start();
    write_atomic(&tb.manifests_dir().join("namespaces.yaml"), NAMESPACES_X_LOGGING);
    let policies = tb.manifests_dir().join("x-policies.yaml");
    write_atomic(&policies, &staged(X_DEFAULT_DENY));
    let (agent, log) = start_agent(&tb, &[]);
    wait_converged(&tb, &agent, "staged");
    let pods = tb.pod_ids();
    let hosts = hosts_by_ip(&tb);

    tb.assert_reachability(&Reachability::new(&pods, true));
    let staged_lines = wait_lines(&log, 0, "WouldDrop", &BTreeSet::new(), &tb);
    let would_drop = conns(&staged_lines, "WouldDrop", &hosts);
    let others: Vec<&Value> = staged_lines.iter().filter(|v| v["disposition"] != "WouldDrop").collect();
    assert!(others.is_empty(), "nothing but WouldDrop lines while staged: {others:#?}");
    // Not vacuous: what the policies say, in both directions.
    let c = |f: &str, t: &str, p: Port| (f.to_string(), t.to_string(), p);
    for cut in [c("y/a", "x/a", Port::Tcp80), c("x/b", "x/a", Port::Udp80), c("x/a", "z/a", Port::Tcp80)] {
        assert!(would_drop.contains(&cut), "no WouldDrop for {cut:?}:\n{}", show(&would_drop));
    }
    for kept in [c("x/b", "x/a", Port::Tcp80), c("x/c", "y/b", Port::Udp80), c("y/a", "z/a", Port::Tcp81)] {
        assert!(!would_drop.contains(&kept), "a WouldDrop for {kept:?}");
    }

    // Promoted.
    write_atomic(&policies, X_DEFAULT_DENY);
    wait_converged(&tb, &agent, "promoted");
    tb.sandbox.flush_conntrack();
    let skip = json_lines(&log).len();
    tb.assert_reachability(&reachability_without(&pods, &would_drop));
    let lines = wait_lines(&log, skip, "Drop", &would_drop, &tb);
    let dropped = conns(&lines, "Drop", &hosts);
    assert_eq!(
        dropped,
        would_drop,
        "Drop lines once promoted vs WouldDrop lines while staged:\nonly dropped:\n{}\nonly would-dropped:\n{}",
        show(&dropped.difference(&would_drop).cloned().collect()),
        show(&would_drop.difference(&dropped).cloned().collect())
    );
    let staged_after: Vec<&Value> =
        lines.iter().filter(|v| v["disposition"] == "WouldDrop" || v["disposition"] == "WouldAllow").collect();
    assert!(staged_after.is_empty(), "staged lines after the promotion: {staged_after:#?}");
    assert!(agent.stop().success());
}

// ---------------------------------------------------------------------------------------
// 3: a staged edit

/// One staged line, reduced to what the tests compare: disposition, direction, table, the
/// policy's `namespace/name` (or `-`), priority, applied-to pod and the connection.
fn staged_line(v: &Value, hosts: &BTreeMap<String, String>) -> (String, String, String, String, String, String, Conn) {
    let policy = match (v["policy"]["namespace"].as_str(), v["policy"]["name"].as_str()) {
        (Some(ns), Some(name)) => format!("{ns}/{name}"),
        _ => "-".into(),
    };
    assert_eq!(v["policy"]["kind"], STAGED_KIND, "{v}");
    (
        v["disposition"].as_str().unwrap_or_default().to_string(),
        v["direction"].as_str().unwrap_or_default().to_string(),
        v["table"].as_str().unwrap_or_default().to_string(),
        policy,
        v["priority"].as_u64().map_or("-".into(), |p| p.to_string()),
        pod_id(&v["applied_to"]).unwrap_or_default(),
        conn_of(v, hosts),
    )
}

/// x/a accepts x/b on TCP 80 and x/c may open TCP 80 to x/b (enforced); the staged edits of
/// both policies say TCP 81 instead. TCP 80 is still what connects, with Allow lines (x
/// logs), and each direction's TCP 80 connection is a `WouldDrop` naming the staged policy
/// that would isolate the pod, its TCP 81 one a `WouldAllow` naming the staged policy whose
/// rule would allow it, beside its Drop line. Nothing else is staged-logged.
#[test]
fn a_staged_edit_logs_would_drop_and_would_allow() {
    let tb = Testbed::start();
    write_atomic(&tb.manifests_dir().join("namespaces.yaml"), NAMESPACES_X_LOGGING);
    let web = |port| support::policy::allow_ingress("x", "web", "a", "b", &[("TCP", port)]);
    let out = |port| support::policy::allow_egress("x", "out", "c", "b", &[("TCP", port)]);
    write_atomic(&tb.manifests_dir().join("enforced.yaml"), &format!("{}---\n{}", web(80), out(80)));
    write_atomic(&tb.manifests_dir().join("staged.yaml"), &staged(&format!("{}---\n{}", web(81), out(81))));
    let (agent, log) = start_agent(&tb, &[]);
    wait_converged(&tb, &agent, "staged edits");
    let hosts = hosts_by_ip(&tb);

    let (from, to) = (["x/b", "x/c"], ["x/a", "x/b"]);
    let mut expected = Reachability::between(&from, &to, false);
    expected.expect("x/b", "x/b", None, true).set("x/b", "x/a", Port::Tcp80, true);
    expected.set("x/c", "x/b", Port::Tcp80, true);
    tb.assert_reachability(&expected);

    let c = |f: &str, t: &str, p: Port| (f.to_string(), t.to_string(), p);
    let want_staged = [
        ("WouldDrop", "Ingress", "StagedIngressDefaultRule", "-", "-", "x/a", c("x/b", "x/a", Port::Tcp80)),
        ("WouldAllow", "Ingress", "StagedIngressRule", "x/web", "190", "x/a", c("x/b", "x/a", Port::Tcp81)),
        ("WouldDrop", "Egress", "StagedEgressDefaultRule", "-", "-", "x/c", c("x/c", "x/b", Port::Tcp80)),
        ("WouldAllow", "Egress", "StagedEgressRule", "x/out", "190", "x/c", c("x/c", "x/b", Port::Tcp81)),
    ];
    let want_staged: BTreeSet<_> = want_staged
        .into_iter()
        .map(|(d, dir, t, p, pr, at, conn)| (d.into(), dir.into(), t.into(), p.into(), pr.into(), at.into(), conn))
        .collect();
    let would: BTreeSet<Conn> = want_staged.iter().map(|l| l.6.clone()).collect();
    let lines = wait_lines(&log, 0, "WouldAllow", &would.iter().filter(|c| c.2 == Port::Tcp81).cloned().collect(), &tb);
    let staged_lines: Vec<&Value> =
        lines.iter().filter(|v| v["disposition"] == "WouldDrop" || v["disposition"] == "WouldAllow").collect();
    let got: BTreeSet<_> = staged_lines.iter().map(|v| staged_line(v, &hosts)).collect();
    assert_eq!(got, want_staged, "staged lines:\n{staged_lines:#?}");
    // The WouldDrop lines name the staged policy that would isolate the pod.
    for v in staged_lines.iter().filter(|v| v["disposition"] == "WouldDrop") {
        let name = if v["direction"] == "Ingress" { "web" } else { "out" };
        assert_eq!(v["isolated_by"], serde_json::json!([{"namespace": "x", "name": name}]), "{v}");
    }
    // The enforced lines are what they were: Allow on TCP 80, Drop for everything else.
    let allowed = conns(&lines, "Allow", &hosts);
    assert_eq!(allowed, [c("x/b", "x/a", Port::Tcp80), c("x/c", "x/b", Port::Tcp80)].into_iter().collect());
    let dropped = conns(&lines, "Drop", &hosts);
    assert_eq!(dropped, unreachable(&expected), "Drop lines");
    assert!(agent.stop().success());
}

// ---------------------------------------------------------------------------------------
// 4: deleting a staged policy

/// A staged default-deny of x's ingress logs `WouldDrop` lines; once its manifest is gone
/// and the agent has converged, the bridge holds exactly the flows it held before anything
/// was staged, and new connections (every pair) make no staged line.
#[test]
fn deleting_a_staged_policy_stops_its_lines() {
    let tb = Testbed::start();
    let (agent, log) = start_agent(&tb, &[]);
    wait_converged(&tb, &agent, "nothing staged");
    let before = tb.sandbox.dump_flows();
    let file = tb.manifests_dir().join("staged.yaml");
    let deny = network_policy("x", "deny-ingress", "{}", "  policyTypes: [Ingress]\n");
    write_atomic(&file, &staged(&deny));
    wait_converged(&tb, &agent, "staged");
    let hosts = hosts_by_ip(&tb);
    let cut: BTreeSet<Conn> = Port::ALL.into_iter().map(|p| ("y/a".to_string(), "x/a".to_string(), p)).collect();
    tb.assert_reachability(&Reachability::new(&tb.pod_ids(), true));
    let lines = wait_lines(&log, 0, "WouldDrop", &cut, &tb);
    assert!(cut.is_subset(&conns(&lines, "WouldDrop", &hosts)), "{lines:#?}");

    std::fs::remove_file(&file).expect("remove the staged policy");
    wait_converged(&tb, &agent, "unstaged");
    assert_eq!(tb.sandbox.dump_flows(), before, "flows left of the deleted staged policy");
    tb.sandbox.flush_conntrack();
    let skip = json_lines(&log).len();
    tb.assert_reachability(&Reachability::new(&tb.pod_ids(), true));
    let after = wait_lines(&log, skip, "WouldDrop", &BTreeSet::new(), &tb);
    assert!(after.is_empty(), "lines after the staged policy was deleted: {after:#?}");
    assert!(agent.stop().success());
}

// ---------------------------------------------------------------------------------------
// 5: a flood of would-dropped connections

/// The meter rates of the staged lines and of the Drop lines in the flood test: a flood
/// exceeds them at once.
const FLOOD_METER_RATE: &str = "10";

/// Packets the staged meter of `pod` (id 0x40000 + its ofport) has dropped on the switch.
fn staged_meter_shed(tb: &Testbed, pod: &str) -> u64 {
    let meter = format!("meter={}", 0x4_0000 + tb.pod(pod).ofport);
    let text = tb.sandbox.ofctl(&["meter-stats", &meter]);
    let bands = text.split("bands:").nth(1).unwrap_or_else(|| panic!("no bands in {text}"));
    bands.split_whitespace().filter_map(|w| w.strip_prefix("packet_count:")).filter_map(|n| n.parse::<u64>().ok()).sum()
}

/// y/a's egress is staged shut (y does not log), and y/a floods y/b with new UDP
/// connections, each a `WouldDrop`, at the speed it can. Meanwhile x/b opens 15 connections
/// to x/a (Allow lines: x logs, x/a accepts x/b) and x/c 15 (Drop lines). Every one of those
/// 30 lines is written: the staged copies pass meters of their own (`--audit-staged-rate`
/// 10 a second per pod, and the Drop meters the same), y/a's sheds the flood, and the agent
/// reports what it shed (gap records of cause `staged-meter` naming y/a, the staged meters'
/// shed counter; the Allow and Drop meters shed nothing).
#[test]
fn a_flood_of_would_dropped_connections_hides_no_allow_or_drop_line() {
    let tb = Testbed::start();
    write_atomic(&tb.manifests_dir().join("namespaces.yaml"), NAMESPACES_X_LOGGING);
    write_atomic(&tb.manifests_dir().join("a-from-b.yaml"), A_FROM_B);
    let shut = network_policy("y", "shut", "{matchLabels: {pod: a}}", "  policyTypes: [Egress]\n");
    write_atomic(&tb.manifests_dir().join("staged.yaml"), &staged(&shut));
    let rates = ["--audit-staged-rate", FLOOD_METER_RATE, "--audit-drop-rate", FLOOD_METER_RATE];
    let mut extra = vec!["--audit-chain"];
    extra.extend(rates);
    let (agent, log) = start_agent(&tb, &extra);
    wait_converged(&tb, &agent, "staged");
    let (xa, yb) = (tb.pod("x/a"), tb.pod("y/b"));
    let burst = |count: &str, interval: &str| {
        vec!["udp-burst", "--dst", &xa.ip, "--dport", "80", "--count", count, "--interval", interval]
            .into_iter()
            .map(String::from)
            .collect::<Vec<_>>()
    };

    let flood =
        tb.spawn_attack(&tb.pod("y/a").netns, &["udp-burst", "--dst", &yb.ip, "--dport", "80", "--count", "20000"]);
    std::thread::sleep(Duration::from_millis(300));
    let allow = std::thread::scope(|s| {
        let allowed = s.spawn(|| {
            let args = burst("15", "0.05");
            tb.attack("x/b", &args.iter().map(String::as_str).collect::<Vec<_>>())
        });
        let args = burst("15", "0.05");
        tb.attack("x/c", &args.iter().map(String::as_str).collect::<Vec<_>>());
        allowed.join().expect("x/b's connections")
    });
    let _ = (allow, support::finish(flood));

    let hosts = hosts_by_ip(&tb);
    let from = |v: &Value, pod: &str| {
        hosts.get(v["source"]["ip"].as_str().unwrap_or_default()).map(String::as_str) == Some(pod)
    };
    let ports = |lines: &[Value], disposition: &str, pod: &str| -> BTreeSet<u64> {
        lines
            .iter()
            .filter(|v| v["disposition"] == disposition && from(v, pod) && v["destination"]["ip"] == xa.ip.as_str())
            .filter_map(|v| v["source"]["port"].as_u64())
            .collect()
    };
    let started = Instant::now();
    while (ports(&packet_lines(&log, 0), "Allow", "x/b").len() < 15
        || ports(&packet_lines(&log, 0), "Drop", "x/c").len() < 15)
        && started.elapsed() < Duration::from_secs(5)
    {
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(LINES_SETTLE);
    let lines = packet_lines(&log, 0);
    let flood_packets: u64 = lines
        .iter()
        .filter(|v| v["disposition"] == "WouldDrop" && from(v, "y/a"))
        .map(|v| v["count"].as_u64().unwrap_or(1))
        .sum();
    assert_eq!(
        ports(&lines, "Allow", "x/b").len(),
        15,
        "x/b's Allow lines beside the flood ({flood_packets} WouldDrop packets logged)"
    );
    assert_eq!(
        ports(&lines, "Drop", "x/c").len(),
        15,
        "x/c's Drop lines beside the flood ({flood_packets} WouldDrop packets logged)"
    );
    assert!(flood_packets > 0, "the flood's WouldDrop lines");
    assert!(flood_packets < 500, "the flood is metered: {flood_packets} WouldDrop packets logged");

    // y/a's staged meter shed the rest, and the agent says so.
    let shed = staged_meter_shed(&tb, "y/a");
    // (The userspace datapath loses part of such a flood before any flow sees it.)
    assert!(shed >= 1_000, "y/a's staged meter shed {shed} of the flood's 20000 copies");
    let staged_gap =
        |v: &Value| v["type"] == "gap" && v["cause"] == "staged-meter" && pod_id(&v["pod"]).as_deref() == Some("y/a");
    wait_json_line(&log, 0, Duration::from_secs(25), "a gap record of the staged meter", staged_gap);
    let reported: u64 =
        json_lines(&log).iter().filter(|v| staged_gap(v)).map(|v| v["shed"].as_u64().unwrap_or(0)).sum();
    assert!(reported > 0 && reported <= shed, "gap records of {reported} shed, the switch's meter shed {shed}");
    let metrics = agent.metrics();
    let metric = metrics.count("npagent_audit_shed_by_meter_total{meter=\"staged\"}");
    assert!(metric >= reported, "the staged meter's shed counter says {metric}, its gap records {reported}");
    for meter in ["allow", "drop"] {
        let other = metrics.count(&format!("npagent_audit_shed_by_meter_total{{meter=\"{meter}\"}}"));
        assert_eq!(other, 0, "the {meter} meters shed nothing of the flood");
    }
    assert!(agent.stop().success());
}

// ---------------------------------------------------------------------------------------
// 6: no logging switch needed

/// Namespace x says no logging (`enable-logging: "false"`) and its pod x/c is isolated
/// (enforced: nothing in). Staged: a default-deny of x's ingress and an edit of x/c's policy
/// letting namespace y in. y/a's connections make `WouldDrop` lines for x/a and x/b and
/// `WouldAllow` lines for x/c naming the edited policy; nothing enforced is logged.
#[test]
fn staged_lines_need_no_logging_switch() {
    let tb = Testbed::start();
    let ns = NAMESPACES_X_LOGGING.replace("enable-logging: \"true\"", "enable-logging: \"false\"");
    assert_ne!(ns, NAMESPACES_X_LOGGING);
    write_atomic(&tb.manifests_dir().join("namespaces.yaml"), &ns);
    let closed = |spec: &str| network_policy("x", "c-closed", "{matchLabels: {pod: c}}", spec);
    write_atomic(&tb.manifests_dir().join("enforced.yaml"), &closed("  policyTypes: [Ingress]\n"));
    let from_y = "  ingress:\n  - from: [{namespaceSelector: {matchLabels: {ns: y}}}]\n";
    let deny = network_policy("x", "deny-ingress", "{}", "  policyTypes: [Ingress]\n");
    write_atomic(&tb.manifests_dir().join("staged.yaml"), &staged(&format!("{}---\n{deny}", closed(from_y))));
    let (agent, log) = start_agent(&tb, &[]);
    wait_converged(&tb, &agent, "staged");
    let hosts = hosts_by_ip(&tb);

    let mut expected = Reachability::between(&["y/a"], &["x/a", "x/b", "x/c"], true);
    expected.expect("y/a", "x/c", None, false);
    tb.assert_reachability(&expected);
    let conn = |t: &str, p: Port| ("y/a".to_string(), t.to_string(), p);
    let would_drop: BTreeSet<Conn> = ["x/a", "x/b"].iter().flat_map(|t| Port::ALL.map(|p| conn(t, p))).collect();
    let would_allow: BTreeSet<Conn> = Port::ALL.into_iter().map(|p| conn("x/c", p)).collect();
    let lines = wait_lines(&log, 0, "WouldAllow", &would_allow, &tb);
    assert_eq!(conns(&lines, "WouldDrop", &hosts), would_drop);
    assert_eq!(conns(&lines, "WouldAllow", &hosts), would_allow);
    for v in lines.iter().filter(|v| v["disposition"] == "WouldAllow") {
        assert_eq!((&v["policy"]["namespace"], &v["policy"]["name"]), (&"x".into(), &"c-closed".into()), "{v}");
    }
    let enforced: Vec<&Value> =
        lines.iter().filter(|v| v["disposition"] == "Allow" || v["disposition"] == "Drop").collect();
    assert!(enforced.is_empty(), "x does not log: {enforced:#?}");
    assert!(agent.stop().success());
}
