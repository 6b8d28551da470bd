//! Audit logging end to end: `npagent run` on the testbed (nine pods on a real userspace
//! OVS), real packets, and the np.log lines, flows, meter and metrics they lead to, for
//! ingress and egress.
//!
//! Each test has a testbed of its own (tests run in parallel) and starts the agent as a
//! child process with its own audit log; it stops it with SIGTERM, which flushes the log.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use npagent::audit::timefmt::Civil;

use support::agent::{Agent, Metrics};
use support::audit_log::json_lines;
use support::{wait_until, write_atomic, Pod, Port, Reachability, Sandbox, Testbed};

// ---------------------------------------------------------------------------------------
// Manifests

const ANTREA_KEY: &str = "networkpolicy.antrea.io/enable-logging";
const ALIAS_KEY: &str = "policy.antrea.io/enable-np-logging";
const ALLOW_XB_XA: &str = "allow-xb-to-xa-tcp80";
const ALLOW_XA_XB: &str = "allow-xa-to-xb-tcp80";

/// Rewrites namespaces.yaml: Namespaces x, y, z (label `ns: <name>`) with the annotations
/// given for each (`(namespace, [(key, value)])`; others get none).
fn set_namespaces(tb: &Testbed, annotations: &[(&str, &[(&str, &str)])]) {
    let mut text = String::new();
    for ns in ["x", "y", "z"] {
        if !text.is_empty() {
            text.push_str("---\n");
        }
        text.push_str(&format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n  labels:\n    ns: {ns}\n"));
        let ann: Vec<&(&str, &str)> =
            annotations.iter().filter(|(n, _)| *n == ns).flat_map(|(_, a)| a.iter()).collect();
        if !ann.is_empty() {
            text.push_str("  annotations:\n");
            for (k, v) in ann {
                text.push_str(&format!("    {k}: \"{v}\"\n"));
            }
        }
    }
    write_atomic(&tb.manifests_dir().join("namespaces.yaml"), &text);
}

/// Copies an example policy of testbed/examples into the manifests dir.
fn add_example(tb: &Testbed, name: &str) {
    let text = std::fs::read_to_string(support::sandbox::repo_path(&format!("testbed/examples/{name}.yaml")))
        .expect("read example policy");
    write_atomic(&tb.manifests_dir().join(format!("{name}.yaml")), &text);
}

/// A policy isolating every pod of `ns` for ingress with nothing allowed in.
fn add_deny_ingress(tb: &Testbed, ns: &str, name: &str) {
    let text = format!(
        "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n  podSelector: {{}}\n  policyTypes:\n  - Ingress\n"
    );
    write_atomic(&tb.manifests_dir().join(format!("{name}-{ns}.yaml")), &text);
}

/// A policy isolating x/a for egress: it may open TCP 80 to x/b, nothing else.
fn add_egress_xa_xb(tb: &Testbed) {
    let text = format!(
        "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata:\n  name: {ALLOW_XA_XB}\n  namespace: x\nspec:\n  podSelector:\n    matchLabels:\n      pod: a\n  policyTypes:\n  - Egress\n  egress:\n  - to:\n    - podSelector:\n        matchLabels:\n          pod: b\n    ports:\n    - protocol: TCP\n      port: 80\n"
    );
    write_atomic(&tb.manifests_dir().join(format!("{ALLOW_XA_XB}.yaml")), &text);
}

/// A testbed with logging on in namespace x and the example policy letting x/b reach x/a
/// (TCP 80), a fresh directory for audit logs, and the audit log's path in it.
fn logging_testbed() -> (Testbed, tempfile::TempDir, PathBuf) {
    let tb = Testbed::start();
    set_namespaces(&tb, &[("x", &[(ANTREA_KEY, "true")])]);
    add_example(&tb, ALLOW_XB_XA);
    let logs = log_dir();
    let np_log = logs.path().join("np.log");
    (tb, logs, np_log)
}

/// A fresh temporary directory for audit logs.
fn log_dir() -> tempfile::TempDir {
    tempfile::Builder::new().prefix("npa-e2e-audit-").tempdir().expect("temp dir")
}

// ---------------------------------------------------------------------------------------
// Traffic

/// Sends traffic from inside a pod: `udp-same` (one socket: one 5-tuple), `udp-distinct`
/// (a new socket, hence a new source port, per datagram) or `tcp` (connections, counted when
/// the handshake completes). Paced at `pps` (0: as fast as possible). Prints
/// `<succeeded> <seconds>`.
const TRAFFIC_PY: &str = r#"
import socket, sys, time
mode, dst, port, count, pps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
start = time.monotonic()
ok = 0
same = socket.socket(socket.AF_INET, socket.SOCK_DGRAM) if mode == "udp-same" else None
for i in range(count):
    if pps > 0:
        d = start + i / pps - time.monotonic()
        if d > 0:
            time.sleep(d)
    if mode == "udp-same":
        same.sendto(b"npagent-e2e", (dst, port))
        ok += 1
    elif mode == "udp-distinct":
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.sendto(b"npagent-e2e", (dst, port))
        s.close()
        ok += 1
    else:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(3)
        try:
            s.connect((dst, port))
            ok += 1
        except OSError:
            pass
        finally:
            s.close()
print(ok, time.monotonic() - start)
"#;

/// Length of the datagrams [`TRAFFIC_PY`] sends, as the IP total length.
const UDP_TRAFFIC_IP_LEN: u32 = 20 + 8 + 11;

/// A traffic generator running in a pod.
struct Traffic(std::process::Child);

impl Traffic {
    /// Starts [`TRAFFIC_PY`] in pod `from` towards `to_ip:port`.
    fn start(tb: &Testbed, from: &str, mode: &str, to_ip: &str, port: u16, count: u32, pps: u32) -> Traffic {
        let pod = tb.pod(from);
        let child = std::process::Command::new("ip")
            .args(["netns", "exec", &pod.netns, "/usr/bin/python3", "-c", TRAFFIC_PY, mode, to_ip])
            .args([port.to_string(), count.to_string(), pps.to_string()])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("start traffic generator");
        Traffic(child)
    }

    /// Waits for it; returns how many sends (or connections) succeeded.
    fn wait(self) -> u32 {
        let out = self.0.wait_with_output().expect("wait for traffic generator");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "traffic generator failed: {}{}", text, String::from_utf8_lossy(&out.stderr));
        text.split_whitespace().next().and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("bad output {text:?}"))
    }
}

/// Runs traffic to completion; returns the successes.
fn traffic(tb: &Testbed, from: &str, mode: &str, to_ip: &str, port: u16, count: u32, pps: u32) -> u32 {
    Traffic::start(tb, from, mode, to_ip, port, count, pps).wait()
}

// ---------------------------------------------------------------------------------------
// Flows

/// One flow of `dump-flows`, with its statistics.
#[derive(Debug, Clone)]
struct FlowStat {
    table: String,
    /// Priority and match, as OVS prints them (`priority=200,reg4=0x1`).
    matches: String,
    actions: String,
    n_packets: u64,
    duration: f64,
}

/// Every flow of the bridge, keyed by `table match`.
fn dump_flows(sb: &Sandbox) -> BTreeMap<String, FlowStat> {
    let text = sb.ofctl(&["--names", "dump-flows"]);
    let mut out = BTreeMap::new();
    for line in text.lines().map(str::trim).filter(|l| l.starts_with("cookie=")) {
        let (head, actions) = line.split_once(" actions=").unwrap_or_else(|| panic!("no actions in {line}"));
        let parts: Vec<&str> = head.split(", ").collect();
        let (matches, stats) = parts.split_last().expect("fields");
        let stat = |key: &str| -> &str {
            stats
                .iter()
                .find_map(|s| s.strip_prefix(key)?.strip_prefix('='))
                .unwrap_or_else(|| panic!("no {key} in {line}"))
        };
        let f = FlowStat {
            table: stat("table").to_owned(),
            matches: (*matches).to_owned(),
            actions: actions.to_owned(),
            n_packets: stat("n_packets").parse().expect("n_packets"),
            duration: stat("duration").trim_end_matches('s').parse().expect("duration"),
        };
        out.insert(format!("{} {}", f.table, f.matches), f);
    }
    out
}

/// Whether a policy flow sends copies to npagent: a default drop its own, a rule's first
/// packet through LogCopy (its rule in reg6). LogCopy and the security events' flows
/// (ConntrackQuota's refusals among them) are there whatever the policies, and so are the
/// staged verdicts' checks, whose copies (through LogCopy, no rule in reg6) are made whatever
/// the logging switch.
fn sends_copies(f: &FlowStat) -> bool {
    let allow_copy = f.actions.to_lowercase().contains("reg6") && f.actions.contains("resubmit(,LogCopy)");
    !["LogCopy", "SpoofGuard", "ConntrackState", "ConntrackQuota"].contains(&f.table.as_str())
        && (f.actions.contains("controller(") || allow_copy)
}

/// The default drop flow of the pod on `ofport`.
fn drop_flow(flows: &BTreeMap<String, FlowStat>, ofport: u32) -> FlowStat {
    flows
        .get(&format!("IngressDefaultRule priority=200,reg4={ofport:#x}"))
        .unwrap_or_else(|| panic!("no default drop flow for ofport {ofport}: {flows:#?}"))
        .clone()
}

/// The egress default drop flow of `pod` (matched on the port it sends from).
fn egress_drop_flow(flows: &BTreeMap<String, FlowStat>, pod: &Pod) -> FlowStat {
    flows
        .get(&format!("EgressDefaultRule priority=200,reg2={:#x}", pod.ofport))
        .unwrap_or_else(|| panic!("no egress default drop flow for {}: {flows:#?}", pod.id()))
        .clone()
}

/// Packets that entered the logging meters (every pod's Allow and Drop meters, and the
/// security events'), and those their bands dropped.
fn meter_stats(sb: &Sandbox) -> (u64, u64) {
    let text = sb.ofctl(&["meter-stats"]);
    let num = |key: &str| -> u64 {
        let values: Vec<u64> =
            text.split_whitespace().filter_map(|w| w.strip_prefix(key)).filter_map(|v| v.parse().ok()).collect();
        assert!(!values.is_empty(), "no {key} of any meter in {text}");
        values.iter().sum()
    };
    (num("packet_in_count:"), num("packet_count:"))
}

/// Packet-ins OVS dropped because more than `controller-queue-size` (100) were waiting for
/// a full socket to the agent (coverage counter `rconn_overflow`): the agent fell behind.
fn rconn_overflow(sb: &Sandbox) -> u64 {
    let text = sb.appctl(&["coverage/show"]);
    text.lines()
        .find(|l| l.starts_with("rconn_overflow "))
        .and_then(|l| l.rsplit("total: ").next())
        .map_or(0, |n| n.trim().parse().expect("coverage total"))
}

/// The flow_mods OVS logged receiving (vconn debug log) after byte `from` of its log.
fn received_flow_mods(sb: &Sandbox, from: usize) -> Vec<String> {
    let log = std::fs::read(sb.dir.join("vswitchd.log")).expect("vswitchd.log");
    let tail = String::from_utf8_lossy(log.get(from..).unwrap_or_default()).into_owned();
    tail.lines().filter(|l| l.contains("OFPT_FLOW_MOD")).map(str::to_owned).collect()
}

/// Waits until OVS logged `n` flow_mods after byte `from` of its log (ovs-vswitchd writes
/// its log from a thread of its own), gives it a moment for more, and returns them,
/// asserting there are exactly `n` (`what` names the step in failures).
fn expect_received_flow_mods(sb: &Sandbox, from: usize, n: usize, what: &str) -> Vec<String> {
    wait_until(Duration::from_secs(3), "flow_mods in the vswitchd log", || received_flow_mods(sb, from).len() >= n);
    std::thread::sleep(Duration::from_millis(200));
    let received = received_flow_mods(sb, from);
    assert_eq!(received.len(), n, "{what}: flow_mods OVS received:\n{}", received.join("\n"));
    received
}

fn vswitchd_log_len(sb: &Sandbox) -> usize {
    std::fs::metadata(sb.dir.join("vswitchd.log")).map(|m| m.len() as usize).unwrap_or(0)
}

// ---------------------------------------------------------------------------------------
// The audit log

/// One line of the `antrea` format: the 14 fields after the timestamp, and the aggregate.
#[derive(Debug, Clone, PartialEq)]
struct Line {
    time: SystemTime,
    table: String,
    policy: String,
    rule: String,
    direction: String,
    disposition: String,
    priority: String,
    applied_to: String,
    src_ip: String,
    src_port: String,
    dst_ip: String,
    dst_port: String,
    protocol: String,
    length: u32,
    label: String,
    /// Packets the line stands for (` [N packets in D]`, else 1).
    packets: u64,
    /// D of the aggregate suffix.
    span: Option<Duration>,
}

/// Parses `YYYY/MM/DD HH:MM:SS.uuuuuu` (UTC), strictly.
fn parse_timestamp(date: &str, clock: &str) -> SystemTime {
    let bad = || panic!("bad timestamp {date} {clock}");
    let d: Vec<&str> = date.split('/').collect();
    let (hms, micros) = clock.split_once('.').unwrap_or_else(bad);
    let c: Vec<&str> = hms.split(':').collect();
    let widths_ok = d.len() == 3
        && d[0].len() == 4
        && d[1].len() == 2
        && d[2].len() == 2
        && c.len() == 3
        && c.iter().all(|p| p.len() == 2)
        && micros.len() == 6
        && d.iter().chain(&c).chain([&micros]).all(|p| p.bytes().all(|b| b.is_ascii_digit()));
    if !widths_ok {
        bad();
    }
    let n = |s: &str| -> u32 { s.parse().expect("digits") };
    let civil = Civil {
        year: n(d[0]).into(),
        month: n(d[1]),
        day: n(d[2]),
        hour: n(c[0]),
        minute: n(c[1]),
        second: n(c[2]),
        nanos: n(micros) * 1_000,
    };
    civil.to_system_time().unwrap_or_else(|| panic!("timestamp {date} {clock} before the epoch"))
}

/// Parses a Go duration as Antrea prints it in aggregates (`1.5s`, `250ms`, `20.1µs`).
fn parse_go_duration(s: &str) -> Duration {
    let mut total = 0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let n = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or_else(|| panic!("bad duration {s}"));
        let (num, tail) = rest.split_at(n);
        let u = tail.find(|c: char| c.is_ascii_digit()).unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(u);
        let scale = match unit {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 1e-3,
            "µs" | "us" => 1e-6,
            "ns" => 1e-9,
            _ => panic!("bad unit in duration {s}"),
        };
        total += num.parse::<f64>().unwrap_or_else(|_| panic!("bad duration {s}")) * scale;
        rest = tail;
    }
    Duration::from_secs_f64(total)
}

/// Splits ` [N packets in D]` off a line.
fn split_aggregate(line: &str) -> (&str, u64, Option<Duration>) {
    match line.strip_suffix(']').and_then(|l| l.rsplit_once(" [")) {
        Some((body, agg)) => {
            let (n, d) = agg.split_once(" packets in ").unwrap_or_else(|| panic!("bad aggregate in {line}"));
            let n: u64 = n.parse().unwrap_or_else(|_| panic!("bad count in {line}"));
            assert!(n > 1, "an aggregate of {n} packet in {line}");
            (body, n, Some(parse_go_duration(d)))
        }
        None => (line, 1, None),
    }
}

/// Parses an `antrea` line, asserting its shape: timestamp and exactly 14 fields.
fn parse_antrea(line: &str) -> Line {
    let (body, packets, span) = split_aggregate(line);
    let f: Vec<&str> = body.split(' ').collect();
    assert_eq!(f.len(), 16, "expected a timestamp and 14 fields: {line:?}");
    Line {
        time: parse_timestamp(f[0], f[1]),
        table: f[2].into(),
        policy: f[3].into(),
        rule: f[4].into(),
        direction: f[5].into(),
        disposition: f[6].into(),
        priority: f[7].into(),
        applied_to: f[8].into(),
        src_ip: f[9].into(),
        src_port: f[10].into(),
        dst_ip: f[11].into(),
        dst_port: f[12].into(),
        protocol: f[13].into(),
        length: f[14].parse().unwrap_or_else(|_| panic!("bad length in {line}")),
        label: f[15].into(),
        packets,
        span,
    }
}

/// Lines of a log file (empty if it does not exist).
fn read_lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path).unwrap_or_default().lines().map(str::to_owned).collect()
}

fn is_port(s: &str) -> bool {
    s.parse::<u16>().is_ok_and(|p| p > 0)
}

/// Asserts the time of `l` is within [from - 1 s, to + 1 s].
fn assert_time_within(l: &Line, from: SystemTime, to: SystemTime) {
    let slack = Duration::from_secs(1);
    assert!(l.time + slack >= from && l.time <= to + slack, "line time {:?} outside [{from:?}, {to:?}]", l.time);
}

/// The total packets the lines stand for.
fn packets(lines: &[Line]) -> u64 {
    lines.iter().map(|l| l.packets).sum()
}

/// Step `step` of a logging toggle: writes the namespaces with `annotations`, waits (at most
/// 5 s) until `reached` holds of the switch's flows, and 300 ms more for the agent; asserts
/// that the flow set is that of `before` (modified, not re-added). Returns the agent's metrics
/// before the toggle and after it, the flows after it, and where the vswitchd log and the
/// audit log (in lines) stood before it.
fn toggle_logging(
    tb: &Testbed,
    agent: &Agent,
    np_log: &Path,
    step: u32,
    annotations: &[(&str, &[(&str, &str)])],
    before: &BTreeMap<String, FlowStat>,
    reached: impl Fn(&BTreeMap<String, FlowStat>) -> bool,
) -> (Metrics, Metrics, BTreeMap<String, FlowStat>, usize, usize) {
    let sb = &tb.sandbox;
    let metrics_before = agent.metrics();
    let vswitchd_log_at = vswitchd_log_len(sb);
    let audit_lines_at = read_lines(np_log).len();
    set_namespaces(tb, annotations);
    wait_until(Duration::from_secs(5), "the toggle reaches the switch", || reached(&dump_flows(sb)));
    std::thread::sleep(Duration::from_millis(300));
    let metrics_after = agent.metrics();
    let flows = dump_flows(sb);
    assert_eq!(flows.keys().collect::<Vec<_>>(), before.keys().collect::<Vec<_>>(), "step {step}: flow set changed");
    (metrics_before, metrics_after, flows, vswitchd_log_at, audit_lines_at)
}

// ---------------------------------------------------------------------------------------
// 1 + 6: Antrea's acceptance cases, every field of the line, and the metrics endpoint

#[test]
fn antrea_acceptance_cases_and_metrics() {
    let tb = Testbed::start();
    // x: Antrea's key; y: the alias with a ParseBool spelling; z: no annotation.
    set_namespaces(&tb, &[("x", &[(ANTREA_KEY, "true")]), ("y", &[(ALIAS_KEY, "True")])]);
    add_example(&tb, ALLOW_XB_XA);
    add_deny_ingress(&tb, "y", "default-deny-all");
    add_deny_ingress(&tb, "z", "default-deny-all");
    let logs = log_dir();
    let np_log = logs.path().join("np.log");
    let started = SystemTime::now();
    let agent = Agent::start(&tb.sandbox, &tb.manifests_dir(), &np_log, &[]);

    let (xa, xb, xc) = (tb.pod("x/a"), tb.pod("x/b"), tb.pod("x/c"));
    let (ya, yb) = (tb.pod("y/a"), tb.pod("y/b"));
    let zb = tb.pod("z/b");
    // x/b -> x/a: TCP 80 allowed, TCP 81 and UDP 80 dropped; x/c -> x/a: all dropped;
    // y/a -> y/b: dropped (y is deny-all); x/a -> z/b: dropped but z logs nothing.
    let mut expected = Reachability::between(&["x/b", "x/c", "y/a", "x/a"], &["x/a", "y/b", "z/b"], true);
    expected
        .expect("*", "x/a", None, false)
        .expect("x/b", "x/a", Some(Port::Tcp80), true)
        .expect("x/a", "x/a", None, true)
        .expect("*", "y/b", None, false)
        .expect("*", "z/b", None, false);
    // Re-probe (at most twice) when a datagram or SYN was lost: every round adds lines.
    let mut rounds = 0;
    loop {
        rounds += 1;
        let observed = tb.probe(&["x/b", "x/c", "y/a", "x/a"], &["x/a", "y/b", "z/b"]);
        if expected.diff(&observed).is_empty() {
            break;
        }
        if rounds == 3 {
            expected.assert_matches(&observed);
        }
    }
    // Aggregation windows (1 s) end, then the logger writes.
    std::thread::sleep(Duration::from_millis(2_500));
    let metrics = agent.metrics();
    let flows = dump_flows(&tb.sandbox);
    let (meter_in, meter_dropped) = meter_stats(&tb.sandbox);
    let status = agent.stop();
    assert!(status.success(), "npagent exited with {status}");
    let ended = SystemTime::now();

    let raw = read_lines(&np_log);
    let lines: Vec<Line> = raw.iter().map(|l| parse_antrea(l)).collect();
    for l in &lines {
        assert_time_within(l, started, ended);
        assert_eq!(l.direction, "Ingress");
        assert_eq!(l.rule, "<nil>", "K8s NetworkPolicy rules have no names");
        assert_eq!(l.label, "<nil>");
        assert!(["TCP", "UDP"].contains(&l.protocol.as_str()), "{l:?}");
        // every probe is a SYN (60 bytes on Linux) or a datagram with `from>to` as payload
        match l.protocol.as_str() {
            "TCP" => assert_eq!(l.length, 60, "{l:?}"),
            _ => assert_eq!(l.length, 20 + 8 + 7, "{l:?}"),
        }
        assert!(is_port(&l.src_port), "{l:?}");
        assert!(["80", "81"].contains(&l.dst_port.as_str()), "{l:?}");
    }

    // The Allow line: one per allowed connection (one per probe round), every field.
    let allows: Vec<&Line> = lines.iter().filter(|l| l.disposition == "Allow").collect();
    assert!(
        !allows.is_empty() && allows.len() <= rounds,
        "one Allow line per allowed connection ({rounds} probe rounds):\n{}",
        raw.join("\n")
    );
    for a in &allows {
        assert_eq!(a.table, "IngressRule");
        assert_eq!(a.policy, format!("K8sNetworkPolicy:x/{ALLOW_XB_XA}"));
        assert_eq!(a.priority, "190");
        assert_eq!(a.applied_to, "x/a");
        assert_eq!((a.src_ip.as_str(), a.dst_ip.as_str()), (xb.ip.as_str(), xa.ip.as_str()));
        assert_eq!((a.dst_port.as_str(), a.protocol.as_str(), a.packets), ("80", "TCP", 1));
    }

    // Drop lines: the default drop of x/a and of y/b, every probe accounted for.
    let drops: Vec<&Line> = lines.iter().filter(|l| l.disposition == "Drop").collect();
    assert_eq!(drops.len() + allows.len(), lines.len(), "only Allow and Drop lines");
    for d in &drops {
        assert_eq!(d.table, "IngressDefaultRule", "{d:?}");
        assert_eq!(d.policy, "K8sNetworkPolicy", "{d:?}");
        assert_eq!(d.priority, "<nil>", "{d:?}");
        let (ns, pod) = d.applied_to.split_once('/').expect("ns/pod");
        assert_eq!(tb.pod(&d.applied_to).ip, d.dst_ip, "applied-to is the destination pod: {d:?}");
        assert!(ns == "x" || ns == "y", "no lines for the unannotated z: {d:?} ({pod})");
    }
    let dropped = |src: &str, dst: &str, proto: &str, port: &str| -> u64 {
        drops
            .iter()
            .filter(|d| d.src_ip == src && d.dst_ip == dst && d.protocol == proto && d.dst_port == port)
            .map(|d| d.packets)
            .sum()
    };
    for (src, dst) in [(&xb, &xa), (&xc, &xa), (&ya, &yb)] {
        for (proto, port) in [("TCP", "81"), ("UDP", "80")] {
            assert!(
                dropped(&src.ip, &dst.ip, proto, port) >= 1,
                "no Drop line {} -> {} {proto}/{port}",
                src.id(),
                dst.id()
            );
        }
        if src.id() != "x/b" {
            assert!(dropped(&src.ip, &dst.ip, "TCP", "80") >= 1, "no Drop line {} -> {} TCP/80", src.id(), dst.id());
        }
    }
    assert_eq!(dropped(&xb.ip, &xa.ip, "TCP", "80"), 0, "the allowed connection was also logged as dropped");
    assert!(!lines.iter().any(|l| l.dst_ip == zb.ip || l.applied_to.starts_with("z/")), "z is not annotated");
    // z's default drop flows carry no logging action, x's and y's do.
    for pod in ["x/a", "y/a", "y/b", "y/c", "z/a", "z/b", "z/c"].map(|p| tb.pod(p)) {
        let f = drop_flow(&flows, pod.ofport);
        assert_eq!(f.actions.contains("controller("), pod.namespace != "z", "{}: {f:?}", pod.id());
    }
    // Nothing lost between OVS and the file: every packet the meter let through is a packet
    // of some line.
    assert_eq!(meter_dropped, 0);
    assert_eq!(packets(&lines), meter_in, "packets in the log vs packet-ins OVS sent");

    // 6: the metrics endpoint.
    let mut per_table: BTreeMap<&str, u64> = BTreeMap::new();
    for f in flows.values() {
        *per_table.entry(f.table.as_str()).or_default() += 1;
    }
    for (table, n) in &per_table {
        assert_eq!(metrics.count(&format!("npagent_flows{{table=\"{table}\"}}")), *n, "flows of {table}");
    }
    assert_eq!(metrics.count("npagent_flow_mods_total{kind=\"add\"}"), flows.len() as u64);
    assert_eq!(metrics.count("npagent_flow_mods_total{kind=\"modify\"}"), 0);
    assert_eq!(metrics.count("npagent_flow_mods_total{kind=\"delete\"}"), 0);
    assert!(metrics.count("npagent_bundles_committed_total") >= 1);
    assert_eq!(metrics.count("npagent_bundles_failed_total"), 0);
    assert_eq!(metrics.count("npagent_bundle_commit_seconds_count"), metrics.count("npagent_bundles_committed_total"));
    let latency = metrics.get("npagent_bundle_commit_seconds_sum");
    assert!(latency > 0.0 && latency < 5.0, "bundle commit latency sum {latency}");
    assert_eq!(metrics.count("npagent_switch_reconnects_total"), 0);
    assert_eq!(metrics.count("npagent_packet_ins_received_total"), meter_in);
    assert_eq!(metrics.count("npagent_packet_ins_decoded_total"), meter_in);
    assert_eq!(metrics.count("npagent_packet_ins_undecodable_total"), 0);
    assert_eq!(metrics.count("npagent_audit_entries_written_total"), lines.len() as u64);
    for meter in ["allow", "drop", "security", "staged"] {
        assert_eq!(metrics.count(&format!("npagent_audit_shed_by_meter_total{{meter=\"{meter}\"}}")), 0);
    }
    assert_eq!(metrics.count("npagent_audit_shed_by_queue_total"), 0);
    assert_eq!(metrics.count("npagent_audit_write_errors_total"), 0);
}

// ---------------------------------------------------------------------------------------
// 2: toggling on, off, on with policies in place

#[test]
fn toggle_modifies_drop_flows_in_place() {
    let tb = Testbed::start();
    let sb = &tb.sandbox;
    let on: &[(&str, &str)] = &[(ANTREA_KEY, "true")];
    let off: &[(&str, &str)] = &[(ANTREA_KEY, "false")];
    set_namespaces(&tb, &[("x", on), ("y", on)]);
    add_example(&tb, ALLOW_XB_XA);
    add_example(&tb, "default-deny-ingress-y");
    let logs = log_dir();
    let np_log = logs.path().join("np.log");
    let mut agent = Agent::start(sb, &tb.manifests_dir(), &np_log, &["--audit-dedup-window", "200ms"]);
    // OVS's own record of the flow_mods it receives (vconn debug messages are rate-limited
    // by default, and the packet-ins would use up the budget).
    sb.appctl(&["vlog/set", "vconn:file:dbg"]);
    sb.appctl(&["vlog/disable-rate-limit", "vconn"]);
    let (xa, yb) = (tb.pod("x/a"), tb.pod("y/b"));

    // Traffic into the drop flows of x/a and y/b, so they have counters to keep.
    let send_drops = |n: u32| {
        assert_eq!(traffic(&tb, "x/c", "udp-same", &xa.ip, 80, n, 200), n);
        assert_eq!(traffic(&tb, "x/c", "udp-same", &yb.ip, 80, n, 200), n);
    };
    send_drops(7);
    // OVS credits datapath flow stats to its flows at revalidation: wait for the counts.
    let settle = |x: u64, y: u64| -> BTreeMap<String, FlowStat> {
        let mut flows = BTreeMap::new();
        wait_until(Duration::from_secs(5), "drop counters", || {
            flows = dump_flows(sb);
            drop_flow(&flows, xa.ofport).n_packets == x && drop_flow(&flows, yb.ofport).n_packets == y
        });
        flows
    };
    let mut before = settle(7, 7);
    let logged_at = |from: usize, pod: &str| -> u64 {
        let lines: Vec<Line> = read_lines(&np_log).iter().skip(from).map(|l| parse_antrea(l)).collect();
        packets(&lines.into_iter().filter(|l| l.applied_to == pod).collect::<Vec<_>>())
    };
    // Both aggregates written before the first step counts lines.
    wait_until(Duration::from_secs(10), "drops logged", || logged_at(0, "x/a") == 7 && logged_at(0, "y/b") == 7);

    let mut modifies_per_toggle = None;
    for (step, logging) in [(1, false), (2, true), (3, false), (4, true)] {
        // modified, not re-added: same flows, counters and age kept
        let annotations = [("x", if logging { on } else { off }), ("y", on)];
        let (m0, m1, after, log_at, lines_at) =
            toggle_logging(&tb, &agent, &np_log, step, &annotations, &before, |flows| {
                drop_flow(flows, xa.ofport).actions.contains("controller(") == logging
            });
        let adds = |m: &support::agent::Metrics| m.count("npagent_flow_mods_total{kind=\"add\"}");
        let dels = |m: &support::agent::Metrics| m.count("npagent_flow_mods_total{kind=\"delete\"}");
        let mods = |m: &support::agent::Metrics| m.count("npagent_flow_mods_total{kind=\"modify\"}");
        assert_eq!((adds(&m1), dels(&m1)), (adds(&m0), dels(&m0)), "step {step}: adds or deletes on a toggle");
        let modified = mods(&m1) - mods(&m0);
        assert!(modified >= 1, "step {step}: nothing modified");
        assert_eq!(*modifies_per_toggle.get_or_insert(modified), modified, "step {step}: toggles differ in size");
        for (key, b) in &before {
            let a = &after[key];
            assert_eq!(a.n_packets, b.n_packets, "step {step}: counters of {key} changed");
            assert!(
                a.duration >= b.duration,
                "step {step}: {key} was re-added (duration {} -> {})",
                b.duration,
                a.duration
            );
        }
        let f = drop_flow(&after, xa.ofport);
        assert_eq!(f.actions.contains("controller("), logging, "step {step}: {f:?}");
        if !logging {
            assert_eq!(f.actions, "drop", "step {step}");
        }
        for pod in ["y/a", "y/b", "y/c"].map(|p| tb.pod(p)) {
            let (a, b) = (drop_flow(&after, pod.ofport), drop_flow(&before, pod.ofport));
            assert_eq!(a.actions, b.actions, "step {step}: y's drop flows untouched");
        }
        // OVS's own record: only x's flows were modified, with MOD_STRICT, nothing else sent.
        let received = expect_received_flow_mods(sb, log_at, modified as usize, &format!("step {step}"));
        for fm in &received {
            assert!(fm.contains("MOD_STRICT"), "step {step}: {fm}");
            let x_drop = fm.contains(&format!("priority=200,reg4={:#x} ", xa.ofport));
            let x_allow = fm.contains("priority=190,conj_id=");
            assert!(x_drop || x_allow, "step {step}: a flow_mod for something else than x's logging flows: {fm}");
        }
        assert!(received.iter().any(|fm| fm.contains(&format!("reg4={:#x} ", xa.ofport))), "step {step}");

        // Traffic after the toggle (no cached datapath flow of before): counted by the same
        // flows; logged only when on.
        sb.flush_datapath();
        send_drops(5);
        let now = settle(drop_flow(&after, xa.ofport).n_packets + 5, drop_flow(&after, yb.ofport).n_packets + 5);
        let x_expected = if logging { 5 } else { 0 };
        let outcome = || (logged_at(lines_at, "x/a"), logged_at(lines_at, "y/b"));
        let waited = Instant::now();
        while outcome() != (x_expected, 5) && waited.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(100));
        }
        assert_eq!(
            outcome(),
            (x_expected, 5),
            "step {step}: packets logged for (x/a, y/b): x logs iff on, y keeps logging; log since the step:\n{}",
            read_lines(&np_log)[lines_at..].join("\n")
        );
        before = now;
    }

    // An unrelated annotation: no flow_mod at all. The toggle that follows is the marker:
    // changes are applied in order, so by the time it shows, the first has been handled.
    let m0 = agent.metrics();
    let log_at = vswitchd_log_len(sb);
    set_namespaces(&tb, &[("x", &[(ANTREA_KEY, "true"), ("example.com/owner", "team-a")]), ("y", on)]);
    std::thread::sleep(Duration::from_millis(1_000));
    assert_eq!(agent.metrics().flow_mods(), m0.flow_mods(), "an unrelated annotation sent flow_mods");
    set_namespaces(&tb, &[("x", &[(ANTREA_KEY, "false"), ("example.com/owner", "team-a")]), ("y", on)]);
    wait_until(Duration::from_secs(5), "the marker toggle", || {
        !drop_flow(&dump_flows(sb), xa.ofport).actions.contains("controller(")
    });
    std::thread::sleep(Duration::from_millis(300));
    let m1 = agent.metrics();
    assert_eq!(m1.flow_mods() - m0.flow_mods(), modifies_per_toggle.expect("toggled"));
    let toggle = modifies_per_toggle.expect("toggled");
    expect_received_flow_mods(sb, log_at, toggle as usize, "an unrelated change and a toggle");
    // also: an invalid value is false (and draws a warning naming the namespace)
    set_namespaces(&tb, &[("x", &[(ANTREA_KEY, "yes")]), ("y", on)]);
    let warning = agent.wait_log("yes", Duration::from_secs(5));
    assert!(warning.contains("WARN") && warning.contains("namespace=x"), "{warning}");
    assert!(!drop_flow(&dump_flows(sb), xa.ofport).actions.contains("controller("));
    assert!(agent.stop().success());
}

// ---------------------------------------------------------------------------------------
// 3: more logging packets than --packet-in-rate

#[test]
fn packet_in_rate_limits_entries_never_allowed_traffic() {
    const RATE: u64 = 50;
    let (tb, _logs, np_log) = logging_testbed();
    let sb = &tb.sandbox;
    let agent = Agent::start(sb, &tb.manifests_dir(), &np_log, &["--packet-in-rate", &RATE.to_string()]);
    let xa = tb.pod("x/a");

    // ~3 s of 3 x 700 dropped datagrams/s (distinct source ports) and as many allowed
    // connections as x/b can open: far above 50/s.
    let started = Instant::now();
    let floods: Vec<Traffic> = ["x/c", "y/a", "z/a"]
        .iter()
        .map(|from| Traffic::start(&tb, from, "udp-distinct", &xa.ip, 80, 2_100, 700))
        .collect();
    let allowed = traffic(&tb, "x/b", "tcp", &xa.ip, 80, 400, 150);
    let sent: u32 = floods.into_iter().map(Traffic::wait).sum();
    let elapsed = started.elapsed().as_secs_f64();
    assert_eq!(allowed, 400, "every allowed connection succeeds while logging is over its rate");
    assert_eq!(sent, 3 * 2_100);

    let (meter_in, meter_dropped) = meter_stats(sb);
    assert!(meter_in >= u64::from(sent) + 400, "meter saw {meter_in} packets");
    assert!(meter_dropped > 0, "the meter dropped nothing");
    // The agent reads the meter stats every 10 s.
    wait_until(Duration::from_secs(15), "shed count reported", || {
        agent.metrics().sum("npagent_audit_shed_by_meter_total") == meter_dropped
    });
    let m = agent.metrics();
    assert_eq!(m.count("npagent_packet_ins_received_total"), meter_in - meter_dropped);
    assert!(agent.log_text().contains("the logging meter"), "no warning about shed entries");
    assert!(agent.stop().success());

    let lines: Vec<Line> = read_lines(&np_log).iter().map(|l| parse_antrea(l)).collect();
    let logged = packets(&lines);
    // Two meters (x/a's Allow copies and its Drop copies), each at RATE with a burst of twice
    // that.
    let bound = 2.0 * (RATE as f64 * (elapsed + 0.5) + 2.0 * RATE as f64);
    assert!(
        (logged as f64) <= bound,
        "{logged} packets logged in {elapsed:.1} s, more than rate and burst allow ({bound})"
    );
    assert!(logged >= 2 * RATE, "{logged} packets logged: not even the burst");
    assert_eq!(logged, meter_in - meter_dropped, "every packet-in the meter let through is logged");
    // The Allow copies have a meter of their own at the same rate, below the connections'
    // rate: the Allow lines are a sample too, fewer than the connections, never more.
    let allow_lines = lines.iter().filter(|l| l.disposition == "Allow").count();
    assert!(allow_lines < 400, "{allow_lines} Allow lines");
}

// ---------------------------------------------------------------------------------------
// 4: restart with logging on

#[test]
fn restart_flushes_pending_aggregates_and_causes_no_churn() {
    let (tb, _logs, np_log) = logging_testbed();
    let sb = &tb.sandbox;
    let window = ["--audit-dedup-window", "10s"];
    let agent = Agent::start(sb, &tb.manifests_dir(), &np_log, &window);
    let (xa, xb, xc) = (tb.pod("x/a"), tb.pod("x/b"), tb.pod("x/c"));

    assert_eq!(traffic(&tb, "x/b", "tcp", &xa.ip, 80, 3, 0), 3);
    assert_eq!(traffic(&tb, "x/c", "udp-same", &xa.ip, 80, 20, 100), 20);
    wait_until(Duration::from_secs(5), "Allow lines", || read_lines(&np_log).len() == 3);
    // The drop aggregate is pending (10 s window): SIGTERM must write it.
    assert!(agent.stop().success());
    let lines: Vec<Line> = read_lines(&np_log).iter().map(|l| parse_antrea(l)).collect();
    assert_eq!(lines.len(), 4, "{lines:#?}");
    assert!(lines[..3].iter().all(|l| l.disposition == "Allow" && l.src_ip == xb.ip));
    let agg = &lines[3];
    assert_eq!((agg.disposition.as_str(), agg.src_ip.as_str(), agg.protocol.as_str()), ("Drop", xc.ip.as_str(), "UDP"));
    assert_eq!(agg.packets, 20, "the pending aggregate lost packets: {agg:?}");
    assert!(agg.span.expect("span") < Duration::from_secs(2), "{agg:?}");
    assert_eq!(agg.length, UDP_TRAFFIC_IP_LEN);

    // Restart: nothing to send, counters and ages kept, logging still on.
    let mut before = BTreeMap::new();
    wait_until(Duration::from_secs(5), "drop counters", || {
        before = dump_flows(sb);
        drop_flow(&before, xa.ofport).n_packets == 20
    });
    let mut agent = Agent::start(sb, &tb.manifests_dir(), &np_log, &window);
    let resync = agent.wait_log("resync with the switch", Duration::from_secs(1));
    assert!(resync.contains(" 0 flow_mods to send"), "{resync}");
    std::thread::sleep(Duration::from_millis(1_500));
    assert_eq!(agent.metrics().flow_mods(), 0, "a restart with unchanged inputs sent flow_mods");
    let after = dump_flows(sb);
    assert_eq!(after.keys().collect::<Vec<_>>(), before.keys().collect::<Vec<_>>());
    for (key, b) in &before {
        let a = &after[key];
        assert_eq!((a.n_packets, &a.actions), (b.n_packets, &b.actions), "{key}");
        assert!(a.duration > b.duration, "{key} re-added over the restart");
    }
    assert_eq!(read_lines(&np_log).len(), 4, "the restart rewrote lines");
    assert_eq!(traffic(&tb, "x/c", "udp-same", &xa.ip, 80, 5, 100), 5);
    assert_eq!(traffic(&tb, "x/b", "tcp", &xa.ip, 80, 1, 0), 1);
    wait_until(Duration::from_secs(5), "Allow line after the restart", || read_lines(&np_log).len() == 5);
    assert!(agent.stop().success());
    let lines: Vec<Line> = read_lines(&np_log).iter().map(|l| parse_antrea(l)).collect();
    assert_eq!(lines.len(), 6);
    assert_eq!((lines[4].disposition.as_str(), lines[4].src_ip.as_str()), ("Allow", xb.ip.as_str()));
    assert_eq!((lines[5].disposition.as_str(), lines[5].packets), ("Drop", 5));

    // Logging turned off while the agent is away: the restart installs the current flag.
    set_namespaces(&tb, &[("x", &[(ANTREA_KEY, "false")])]);
    let agent = Agent::start(sb, &tb.manifests_dir(), &np_log, &window);
    std::thread::sleep(Duration::from_millis(500));
    let m = agent.metrics();
    assert_eq!(m.count("npagent_flow_mods_total{kind=\"modify\"}"), 2, "x/a's drop flow and the policy's allow flow");
    assert_eq!(m.flow_mods(), 2);
    let mut flows = BTreeMap::new();
    wait_until(Duration::from_secs(5), "drop counters", || {
        flows = dump_flows(sb);
        drop_flow(&flows, xa.ofport).n_packets == 25
    });
    assert_eq!(drop_flow(&flows, xa.ofport).actions, "drop");
    assert!(!flows.values().any(sends_copies), "a stale logging flag survived the restart");
    assert!(agent.stop().success());
}

// ---------------------------------------------------------------------------------------
// 5: antrea-v1 and json, field by field; rotation

#[test]
fn formats_field_by_field_and_rotation() {
    let tb = Testbed::start();
    let sb = &tb.sandbox;
    set_namespaces(&tb, &[("x", &[(ANTREA_KEY, "1")])]);
    add_example(&tb, ALLOW_XB_XA);
    let logs = log_dir();
    let (xa, xb, xc) = (tb.pod("x/a"), tb.pod("x/b"), tb.pod("x/c"));
    let run_traffic = || {
        assert_eq!(traffic(&tb, "x/b", "tcp", &xa.ip, 80, 1, 0), 1);
        assert_eq!(traffic(&tb, "x/c", "udp-same", &xa.ip, 80, 3, 100), 3);
    };

    // antrea-v1: the 10 fields of Antrea 1.8, default drop priority -1.
    let v1_log = logs.path().join("v1.log");
    let started = SystemTime::now();
    let agent = Agent::start(sb, &tb.manifests_dir(), &v1_log, &["--audit-format", "antrea-v1"]);
    run_traffic();
    assert!(agent.stop().success());
    let ended = SystemTime::now();
    let v1 = read_lines(&v1_log);
    assert_eq!(v1.len(), 2, "{v1:#?}");
    let fields = |line: &str| -> (Vec<String>, u64) {
        let (body, n, _) = split_aggregate(line);
        let f: Vec<String> = body.split(' ').map(str::to_owned).collect();
        assert_eq!(f.len(), 12, "timestamp and 10 fields: {line}");
        let t = parse_timestamp(&f[0], &f[1]);
        assert!(t + Duration::from_secs(1) >= started && t <= ended + Duration::from_secs(1));
        (f[2..].to_vec(), n)
    };
    let (allow, n) = fields(&v1[0]);
    assert_eq!(n, 1);
    assert_eq!(allow[..4], ["IngressRule", &format!("K8sNetworkPolicy:x/{ALLOW_XB_XA}"), "Allow", "190"]);
    assert_eq!(allow[4], xb.ip);
    assert!(is_port(&allow[5]));
    assert_eq!(allow[6..], [xa.ip.as_str(), "80", "TCP", "60"]);
    let (drop, n) = fields(&v1[1]);
    assert_eq!(n, 3, "{}", v1[1]);
    assert_eq!(drop[..4], ["IngressDefaultRule", "K8sNetworkPolicy", "Drop", "-1"]);
    assert_eq!(drop[4], xc.ip);
    assert!(is_port(&drop[5]));
    assert_eq!(drop[6..], [xa.ip.as_str(), "80", "UDP", &UDP_TRAFFIC_IP_LEN.to_string()]);

    // json: one object per line, both ends named.
    let json_log = logs.path().join("np.json");
    let agent = Agent::start(sb, &tb.manifests_dir(), &json_log, &["--audit-format", "json", "--node", "node-1"]);
    run_traffic();
    assert!(agent.stop().success());
    let objs: Vec<serde_json::Value> = json_lines(&json_log);
    assert_eq!(objs.len(), 2, "{objs:#?}");
    let rfc3339 = |v: &serde_json::Value| -> String {
        let s = v.as_str().unwrap_or_else(|| panic!("not a string: {v}")).to_owned();
        // 2026-01-02T03:04:05.123456789Z
        assert_eq!(s.len(), 30, "RFC 3339 with nanoseconds: {s}");
        assert!(s.ends_with('Z') && &s[10..11] == "T" && &s[19..20] == ".", "{s}");
        s
    };
    let (a, d) = (&objs[0], &objs[1]);
    for o in [a, d] {
        assert_eq!(o["node"], "node-1");
        assert_eq!(o["direction"], "Ingress");
        assert_eq!(o["destination"]["ip"], xa.ip.as_str());
        assert_eq!(o["destination"]["port"], 80);
        assert_eq!(o["destination"]["namespace"], "x");
        assert_eq!(o["destination"]["pod"], "a");
        assert_eq!(o["applied_to"], serde_json::json!({"namespace": "x", "pod": "a"}));
        assert_eq!(o["policy"]["kind"], "K8sNetworkPolicy");
        assert!(o["source"]["port"].as_u64().is_some_and(|p| p > 0 && p <= 65_535), "{o}");
        assert!(o["log_label"].is_null() && o["rule"].is_null(), "{o}");
        let (first, last, time) = (rfc3339(&o["first_seen"]), rfc3339(&o["last_seen"]), rfc3339(&o["time"]));
        assert!(first <= last && last <= time, "{first} {last} {time}");
    }
    assert_eq!(a["disposition"], "Allow");
    assert_eq!(a["table"], "IngressRule");
    assert_eq!(a["priority"], 190);
    assert_eq!(a["policy"]["namespace"], "x");
    assert_eq!(a["policy"]["name"], ALLOW_XB_XA);
    assert_eq!(
        (&a["source"]["ip"], &a["source"]["namespace"], &a["source"]["pod"]),
        (&xb.ip.as_str().into(), &"x".into(), &"b".into())
    );
    assert_eq!((&a["protocol"], &a["length"], &a["count"]), (&"TCP".into(), &60.into(), &1.into()));
    assert_eq!(a["first_seen"], a["last_seen"]);
    assert_eq!(d["disposition"], "Drop");
    assert_eq!(d["table"], "IngressDefaultRule");
    assert!(d["priority"].is_null());
    assert!(d["policy"]["namespace"].is_null() && d["policy"]["name"].is_null(), "{d}");
    assert_eq!(
        (&d["source"]["ip"], &d["source"]["namespace"], &d["source"]["pod"]),
        (&xc.ip.as_str().into(), &"x".into(), &"c".into())
    );
    assert_eq!((&d["protocol"], &d["length"], &d["count"]), (&"UDP".into(), &UDP_TRAFFIC_IP_LEN.into(), &3.into()));
    assert!(rfc3339(&d["first_seen"]) < rfc3339(&d["last_seen"]), "three packets 10 ms apart");

    // Rotation: --audit-max-size is in MB (1 is the smallest), so write more than 1 MiB:
    // 9,000 lines of ~150 bytes, one per datagram (no aggregation window, distinct source
    // ports), ~3.75 s at 2,400 datagrams/s.
    let rot_log = logs.path().join("rot").join("np.log");
    let agent = Agent::start(
        sb,
        &tb.manifests_dir(),
        &rot_log,
        &["--audit-max-size", "1", "--audit-dedup-window", "0", "--audit-max-backups", "3"],
    );
    let (in0, _) = meter_stats(sb);
    let overflow0 = rconn_overflow(sb);
    let floods: Vec<Traffic> = ["x/c", "y/a", "z/a"]
        .iter()
        .map(|from| Traffic::start(&tb, from, "udp-distinct", &xa.ip, 80, 3_000, 800))
        .collect();
    let sent: u32 = floods.into_iter().map(Traffic::wait).sum();
    assert_eq!(sent, 9_000);
    let (in1, dropped) = meter_stats(sb);
    assert_eq!(dropped, 0, "under the default 5000/s rate, burst 10000");
    // What OVS sent: what the meter passed, less what its queue to the agent dropped (a
    // loaded CI machine can stall the agent; scripts/bench-audit-e2e measures that).
    let mut sent_by_ovs = 0;
    wait_until(Duration::from_secs(10), "every packet-in OVS sent received", || {
        sent_by_ovs = in1 - in0 - (rconn_overflow(sb) - overflow0);
        agent.metrics().count("npagent_packet_ins_received_total") == sent_by_ovs
    });
    if sent_by_ovs < in1 - in0 {
        eprintln!("note: OVS dropped {} packet-ins on a full queue to the agent", in1 - in0 - sent_by_ovs);
    }
    assert!(agent.stop().success());
    let dir = rot_log.parent().expect("dir");
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(dir).expect("log dir created").permissions().mode() & 0o777;
    assert_eq!(mode, 0o755, "the audit log's directory is created 0755");
    let mut backups: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("list log dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("np-")))
        .collect();
    backups.sort();
    assert!(!backups.is_empty(), "no rotation: {:?}", std::fs::read_dir(dir).map(|d| d.count()));
    let mut all = Vec::new();
    for b in &backups {
        let name = b.file_name().expect("name").to_string_lossy().into_owned();
        assert!(name.ends_with(".log.gz"), "backups are gzipped: {name}");
        let mut text = String::new();
        use std::io::Read as _;
        flate2::read::GzDecoder::new(std::fs::File::open(b).expect("open backup"))
            .read_to_string(&mut text)
            .expect("gunzip");
        assert!(text.len() as u64 <= 1024 * 1024, "{name} is {} bytes, over the max size", text.len());
        assert!(text.ends_with('\n'), "a line was split across files");
        all.extend(text.lines().map(str::to_owned));
    }
    let current = read_lines(&rot_log);
    assert!(!current.is_empty());
    all.extend(current);
    let lines: Vec<Line> = all.iter().map(|l| parse_antrea(l)).collect();
    assert_eq!(lines.len() as u64, sent_by_ovs, "one line per packet-in, none lost across rotation");
    assert_eq!(in1 - in0, 9_000, "the meter saw every datagram");
    assert!(lines.iter().all(|l| l.disposition == "Drop" && l.dst_ip == xa.ip));
    assert!(lines.iter().all(|l| l.packets == 1));
}

// ---------------------------------------------------------------------------------------
// 4 (switch side): a switch restart reinstalls the current flag, not the one of before

#[test]
fn switch_restart_reinstalls_the_current_flag() {
    let (tb, _logs, np_log) = logging_testbed();
    let sb = &tb.sandbox;
    let agent = Agent::start(sb, &tb.manifests_dir(), &np_log, &[]);
    let xa = tb.pod("x/a");
    let installed = dump_flows(sb);
    assert!(drop_flow(&installed, xa.ofport).actions.contains("controller("));

    // Logging goes off while the switch is down.
    sb.stop_vswitchd("TERM");
    set_namespaces(&tb, &[("x", &[(ANTREA_KEY, "false")])]);
    std::thread::sleep(Duration::from_millis(500));
    sb.start_vswitchd();
    let mut flows = BTreeMap::new();
    wait_until(Duration::from_secs(20), "the pipeline reinstalled", || {
        flows = dump_flows(sb);
        flows.len() == installed.len()
    });
    assert_eq!(flows.keys().collect::<Vec<_>>(), installed.keys().collect::<Vec<_>>());
    assert_eq!(drop_flow(&flows, xa.ofport).actions, "drop");
    assert!(!flows.values().any(sends_copies), "a stale logging flag came back");
    let m = agent.metrics();
    assert_eq!(m.count("npagent_switch_reconnects_total"), 1);
    sb.flush_datapath();
    assert_eq!(traffic(&tb, "x/c", "udp-same", &xa.ip, 80, 5, 100), 5);
    std::thread::sleep(Duration::from_millis(1_500));
    assert!(read_lines(&np_log).is_empty(), "logging is off");

    // And on again, on the new switch: the meter is back too.
    set_namespaces(&tb, &[("x", &[(ANTREA_KEY, "true")])]);
    wait_until(Duration::from_secs(5), "logging on", || {
        drop_flow(&dump_flows(sb), xa.ofport).actions.contains("controller(")
    });
    sb.flush_datapath();
    assert_eq!(traffic(&tb, "x/c", "udp-same", &xa.ip, 80, 5, 100), 5);
    wait_until(Duration::from_secs(5), "the drops logged", || {
        packets(&read_lines(&np_log).iter().map(|l| parse_antrea(l)).collect::<Vec<_>>()) == 5
    });
    assert_eq!(meter_stats(sb), (5, 0));
    assert!(agent.stop().success());
}

// ---------------------------------------------------------------------------------------
// 7: egress lines, field by field, in the antrea, json and antrea-v1 formats

/// x/a is isolated for egress (TCP 80 to x/b only) and x logs: each allowed connection logs
/// one `EgressRule` Allow line, x/a's dropped datagrams one aggregated `EgressDefaultRule`
/// Drop line per destination, all applied to the source x/a; x/a's replies to connections
/// others open are no new connections and log nothing.
#[test]
fn egress_lines_field_by_field_in_every_format() {
    let tb = Testbed::start();
    let sb = &tb.sandbox;
    set_namespaces(&tb, &[("x", &[(ANTREA_KEY, "true")])]);
    add_egress_xa_xb(&tb);
    let logs = log_dir();
    let np_log = logs.path().join("np.log");
    let (xa, xb, xc, ya) = (tb.pod("x/a"), tb.pod("x/b"), tb.pod("x/c"), tb.pod("y/a"));

    let started = SystemTime::now();
    let agent = Agent::start(sb, &tb.manifests_dir(), &np_log, &[]);
    assert_eq!(traffic(&tb, "x/a", "tcp", &xb.ip, 80, 3, 0), 3);
    // One socket each: one 5-tuple per destination, so one aggregate each. y is not
    // annotated, but the applied-to pod (the source) is in x.
    assert_eq!(traffic(&tb, "x/a", "udp-same", &xc.ip, 80, 20, 100), 20);
    assert_eq!(traffic(&tb, "x/a", "udp-same", &ya.ip, 80, 5, 100), 5);
    assert_eq!(traffic(&tb, "y/a", "tcp", &xa.ip, 81, 2, 0), 2, "x/a answers connections into it");
    wait_until(Duration::from_secs(5), "five lines", || read_lines(&np_log).len() >= 5);
    std::thread::sleep(Duration::from_millis(1_500)); // any further line would be written by now
    let (meter_in, meter_dropped) = meter_stats(sb);
    assert!(agent.stop().success());
    let ended = SystemTime::now();

    let raw = read_lines(&np_log);
    let lines: Vec<Line> = raw.iter().map(|l| parse_antrea(l)).collect();
    assert_eq!(lines.len(), 5, "three Allow lines and two Drop aggregates:\n{}", raw.join("\n"));
    for l in &lines {
        assert_time_within(l, started, ended);
        assert!(is_port(&l.src_port), "{l:?}");
    }
    // Every field, in Antrea's order (the timestamp is 27 characters).
    let body = |i: usize| -> &str { split_aggregate(&raw[i]).0.get(27..).unwrap_or_default() };
    let allows: Vec<usize> = (0..lines.len()).filter(|i| lines[*i].disposition == "Allow").collect();
    assert_eq!(allows.len(), 3, "one Allow line per connection:\n{}", raw.join("\n"));
    for &i in &allows {
        let expected = format!(
            "EgressRule K8sNetworkPolicy:x/{ALLOW_XA_XB} <nil> Egress Allow 190 x/a {} {} {} 80 TCP 60 <nil>",
            xa.ip, lines[i].src_port, xb.ip
        );
        assert_eq!(body(i), expected);
        assert_eq!(lines[i].packets, 1);
    }
    let ports: std::collections::BTreeSet<&str> = allows.iter().map(|i| lines[*i].src_port.as_str()).collect();
    assert_eq!(ports.len(), 3, "three connections, three source ports");
    for (dst, n) in [(&xc, 20), (&ya, 5)] {
        let i = (0..lines.len())
            .find(|i| lines[*i].disposition == "Drop" && lines[*i].dst_ip == dst.ip)
            .unwrap_or_else(|| panic!("no Drop line to {}:\n{}", dst.id(), raw.join("\n")));
        let expected = format!(
            "EgressDefaultRule K8sNetworkPolicy <nil> Egress Drop <nil> x/a {} {} {} 80 UDP {UDP_TRAFFIC_IP_LEN} <nil>",
            xa.ip, lines[i].src_port, dst.ip
        );
        assert_eq!(body(i), expected);
        assert_eq!(lines[i].packets, n, "deduplicated into one aggregate: {}", raw[i]);
        // (like the ingress aggregates: the first datagram may wait for ARP)
        assert!(lines[i].span.expect("aggregate span") < Duration::from_secs(2), "{}", raw[i]);
    }
    assert_eq!(meter_dropped, 0);
    assert_eq!(packets(&lines), meter_in, "packets in the log vs packet-ins OVS sent");

    // json: both ends named.
    let json_log = logs.path().join("np.json");
    let agent = Agent::start(sb, &tb.manifests_dir(), &json_log, &["--audit-format", "json"]);
    assert_eq!(traffic(&tb, "x/a", "tcp", &xb.ip, 80, 1, 0), 1);
    assert_eq!(traffic(&tb, "x/a", "udp-same", &xc.ip, 80, 3, 100), 3);
    wait_until(Duration::from_secs(5), "two json lines", || read_lines(&json_log).len() >= 2);
    assert!(agent.stop().success());
    let objs: Vec<serde_json::Value> = json_lines(&json_log);
    assert_eq!(objs.len(), 2, "{objs:#?}");
    let (a, d) = (&objs[0], &objs[1]);
    for o in [a, d] {
        assert_eq!(o["direction"], "Egress", "{o}");
        assert_eq!(o["applied_to"], serde_json::json!({"namespace": "x", "pod": "a"}), "{o}");
        assert_eq!(
            (&o["source"]["ip"], &o["source"]["namespace"], &o["source"]["pod"]),
            (&xa.ip.as_str().into(), &"x".into(), &"a".into()),
            "{o}"
        );
        assert!(o["source"]["port"].as_u64().is_some_and(|p| p > 0 && p <= 65_535), "{o}");
        assert_eq!(o["destination"]["port"], 80, "{o}");
        assert_eq!(o["policy"]["kind"], "K8sNetworkPolicy", "{o}");
    }
    assert_eq!(
        (&a["table"], &a["disposition"], &a["priority"]),
        (&"EgressRule".into(), &"Allow".into(), &190.into()),
        "{a}"
    );
    assert_eq!((&a["policy"]["namespace"], &a["policy"]["name"]), (&"x".into(), &ALLOW_XA_XB.into()), "{a}");
    assert_eq!(
        (&a["destination"]["ip"], &a["destination"]["namespace"], &a["destination"]["pod"]),
        (&xb.ip.as_str().into(), &"x".into(), &"b".into()),
        "{a}"
    );
    assert_eq!((&a["protocol"], &a["length"], &a["count"]), (&"TCP".into(), &60.into(), &1.into()), "{a}");
    assert_eq!((&d["table"], &d["disposition"]), (&"EgressDefaultRule".into(), &"Drop".into()), "{d}");
    assert!(d["priority"].is_null() && d["policy"]["namespace"].is_null() && d["policy"]["name"].is_null(), "{d}");
    assert_eq!(
        (&d["destination"]["ip"], &d["destination"]["namespace"], &d["destination"]["pod"]),
        (&xc.ip.as_str().into(), &"x".into(), &"c".into()),
        "{d}"
    );
    assert_eq!(
        (&d["protocol"], &d["length"], &d["count"]),
        (&"UDP".into(), &UDP_TRAFFIC_IP_LEN.into(), &3.into()),
        "{d}"
    );

    // antrea-v1 has no direction: the table names it, as in Antrea 1.8.
    let v1_log = logs.path().join("v1.log");
    let agent = Agent::start(sb, &tb.manifests_dir(), &v1_log, &["--audit-format", "antrea-v1"]);
    assert_eq!(traffic(&tb, "x/a", "tcp", &xb.ip, 80, 1, 0), 1);
    assert_eq!(traffic(&tb, "x/a", "udp-same", &xc.ip, 80, 3, 100), 3);
    wait_until(Duration::from_secs(5), "two antrea-v1 lines", || read_lines(&v1_log).len() >= 2);
    assert!(agent.stop().success());
    let v1 = read_lines(&v1_log);
    assert_eq!(v1.len(), 2, "{v1:#?}");
    let fields =
        |line: &str| -> Vec<String> { line.get(27..).unwrap_or_default().split(' ').map(str::to_owned).collect() };
    let allow = fields(&v1[0]);
    assert!(is_port(&allow[5]), "{}", v1[0]);
    assert_eq!(
        allow.join(" "),
        format!("EgressRule K8sNetworkPolicy:x/{ALLOW_XA_XB} Allow 190 {} {} {} 80 TCP 60", xa.ip, allow[5], xb.ip)
    );
    let (body, n, _) = split_aggregate(&v1[1]);
    let drop = fields(body);
    assert_eq!(n, 3, "{}", v1[1]);
    assert!(is_port(&drop[5]), "{}", v1[1]);
    assert_eq!(
        drop.join(" "),
        format!(
            "EgressDefaultRule K8sNetworkPolicy Drop -1 {} {} {} 80 UDP {UDP_TRAFFIC_IP_LEN}",
            xa.ip, drop[5], xc.ip
        )
    );
}

// ---------------------------------------------------------------------------------------
// 8: the toggle with egress: only the logging flows of both directions change, in place

/// x/a is isolated both ways (egress: TCP 80 to x/b; ingress: TCP 80 from x/b). Toggling x's
/// logging modifies exactly its two default drops (EgressDefaultRule, IngressDefaultRule)
/// and the two policies' `conj_id` flows, with MOD_STRICT, counters and ages kept; every
/// line of both directions comes iff logging is on.
#[test]
fn egress_toggle_modifies_only_logging_flows_in_place() {
    let tb = Testbed::start();
    let sb = &tb.sandbox;
    let on: &[(&str, &str)] = &[(ANTREA_KEY, "true")];
    let off: &[(&str, &str)] = &[(ANTREA_KEY, "false")];
    set_namespaces(&tb, &[("x", on)]);
    add_egress_xa_xb(&tb);
    add_example(&tb, ALLOW_XB_XA);
    let logs = log_dir();
    let np_log = logs.path().join("np.log");
    let agent = Agent::start(sb, &tb.manifests_dir(), &np_log, &["--audit-dedup-window", "200ms"]);
    sb.appctl(&["vlog/set", "vconn:file:dbg"]);
    sb.appctl(&["vlog/disable-rate-limit", "vconn"]);
    let (xa, xb, xc) = (tb.pod("x/a"), tb.pod("x/b"), tb.pod("x/c"));

    // Into both drop flows of x/a (to x/c, from x/c) and both allow flows (x/a -> x/b,
    // x/b -> x/a, TCP 80).
    let send = |drops: u32| {
        assert_eq!(traffic(&tb, "x/a", "udp-same", &xc.ip, 80, drops, 200), drops);
        assert_eq!(traffic(&tb, "x/c", "udp-same", &xa.ip, 80, drops, 200), drops);
        assert_eq!(traffic(&tb, "x/a", "tcp", &xb.ip, 80, 1, 0), 1);
        assert_eq!(traffic(&tb, "x/b", "tcp", &xa.ip, 80, 1, 0), 1);
    };
    let drop_counts =
        |f: &BTreeMap<String, FlowStat>| (egress_drop_flow(f, &xa).n_packets, drop_flow(f, xa.ofport).n_packets);
    let settle = |want: u64| -> BTreeMap<String, FlowStat> {
        let mut flows = BTreeMap::new();
        wait_until(Duration::from_secs(5), "drop counters", || {
            flows = dump_flows(sb);
            drop_counts(&flows) == (want, want)
        });
        flows
    };
    // Packets logged since line `from`, by "<direction> <disposition>".
    let logged = |from: usize| -> BTreeMap<String, u64> {
        let mut out = BTreeMap::new();
        for l in read_lines(&np_log).iter().skip(from).map(|l| parse_antrea(l)) {
            *out.entry(format!("{} {}", l.direction, l.disposition)).or_default() += l.packets;
        }
        out
    };
    let all_logged = |drops: u64| -> BTreeMap<String, u64> {
        [("Egress Allow", 1), ("Egress Drop", drops), ("Ingress Allow", 1), ("Ingress Drop", drops)]
            .into_iter()
            .map(|(k, n)| (k.to_owned(), n))
            .collect()
    };
    let wait_logged = |from: usize, want: &BTreeMap<String, u64>| {
        let waited = Instant::now();
        while logged(from) != *want && waited.elapsed() < Duration::from_secs(3) {
            std::thread::sleep(Duration::from_millis(100));
        }
        assert_eq!(logged(from), *want, "log since line {from}:\n{}", read_lines(&np_log)[from..].join("\n"));
    };
    send(7);
    let mut before = settle(7);
    wait_logged(0, &all_logged(7));
    // The conj_id flows of a connection's first packet (ct_state=+new): the ones that log.
    let conj_flows = |f: &BTreeMap<String, FlowStat>| -> Vec<FlowStat> {
        f.values().filter(|s| s.matches.contains("conj_id=") && s.matches.contains("ct_state=+new")).cloned().collect()
    };
    assert_eq!(
        conj_flows(&before).iter().map(|f| f.table.as_str()).collect::<Vec<_>>(),
        ["EgressRule", "IngressRule"],
        "one first-packet conj_id flow per policy"
    );

    for (step, logging) in [(1, false), (2, true), (3, false), (4, true)] {
        // Modified, not re-added: the same flows, counters and ages kept.
        let annotations = [("x", if logging { on } else { off })];
        let (m0, m1, after, log_at, lines_at) =
            toggle_logging(&tb, &agent, &np_log, step, &annotations, &before, |flows| {
                egress_drop_flow(flows, &xa).actions.contains("controller(") == logging
            });
        for kind in ["add", "delete"] {
            let key = format!("npagent_flow_mods_total{{kind=\"{kind}\"}}");
            assert_eq!(m1.count(&key), m0.count(&key), "step {step}: {kind} on a toggle");
        }
        let key = "npagent_flow_mods_total{kind=\"modify\"}";
        assert_eq!(m1.count(key) - m0.count(key), 4, "step {step}: two drop flows and two conj_id flows modified");
        let logging_flows = [egress_drop_flow(&after, &xa), drop_flow(&after, xa.ofport)]
            .into_iter()
            .chain(conj_flows(&after))
            .map(|f| format!("{} {}", f.table, f.matches))
            .collect::<Vec<_>>();
        for (key, b) in &before {
            let a = &after[key];
            assert!(a.n_packets >= b.n_packets, "step {step}: counters of {key} reset");
            assert!(
                a.duration >= b.duration,
                "step {step}: {key} was re-added (duration {} -> {})",
                b.duration,
                a.duration
            );
            if logging_flows.contains(key) {
                assert_eq!(sends_copies(a), logging, "step {step}: {key}: {}", a.actions);
            } else {
                assert_eq!(a.actions, b.actions, "step {step}: {key} is no logging flow but changed");
            }
        }
        if !logging {
            assert_eq!(egress_drop_flow(&after, &xa).actions, "drop", "step {step}");
            assert_eq!(drop_flow(&after, xa.ofport).actions, "drop", "step {step}");
        }
        // OVS's own record: four MOD_STRICTs of those flows, nothing else.
        let received = expect_received_flow_mods(sb, log_at, 4, &format!("step {step}"));
        let egress_drop = format!("priority=200,reg2={:#x} ", xa.ofport);
        let ingress_drop = format!("priority=200,reg4={:#x} ", xa.ofport);
        for fm in &received {
            assert!(fm.contains("MOD_STRICT"), "step {step}: {fm}");
            assert!(
                fm.contains(&egress_drop) || fm.contains(&ingress_drop) || fm.contains("priority=190,conj_id="),
                "step {step}: a flow_mod for something else than x/a's logging flows: {fm}"
            );
        }
        for want in [&egress_drop, &ingress_drop] {
            assert!(
                received.iter().any(|fm| fm.contains(want.as_str())),
                "step {step}: no flow_mod with {want}:\n{}",
                received.join("\n")
            );
        }

        // Traffic after the toggle (no cached datapath flow of before): counted by the same
        // flows, logged in both directions only when on.
        sb.flush_datapath();
        send(3);
        let now = settle(drop_counts(&after).0 + 3);
        wait_logged(lines_at, &if logging { all_logged(3) } else { BTreeMap::new() });
        before = now;
    }
    assert!(agent.stop().success());
}

// ---------------------------------------------------------------------------------------
// 9: egress logging across an agent restart

/// Logging turned off in x while npagent is away: the restart modifies exactly x/a's egress
/// default drop and the egress policy's `conj_id` flow, counters kept, and nothing is
/// logged afterwards; a restart with unchanged inputs sends nothing.
#[test]
fn egress_logging_flag_changed_while_the_agent_is_away() {
    let (tb, logs) = (Testbed::start(), log_dir());
    let np_log = logs.path().join("np.log");
    let sb = &tb.sandbox;
    set_namespaces(&tb, &[("x", &[(ANTREA_KEY, "true")])]);
    add_egress_xa_xb(&tb);
    let (xa, xb, xc) = (tb.pod("x/a"), tb.pod("x/b"), tb.pod("x/c"));
    let agent = Agent::start(sb, &tb.manifests_dir(), &np_log, &[]);
    assert_eq!(traffic(&tb, "x/a", "udp-same", &xc.ip, 80, 4, 100), 4);
    assert_eq!(traffic(&tb, "x/a", "tcp", &xb.ip, 80, 1, 0), 1);
    wait_until(Duration::from_secs(5), "the lines", || read_lines(&np_log).len() == 2);
    assert!(agent.stop().success());
    let mut before = BTreeMap::new();
    wait_until(Duration::from_secs(5), "drop counter", || {
        before = dump_flows(sb);
        egress_drop_flow(&before, &xa).n_packets == 4
    });

    // Unchanged inputs: nothing sent.
    let agent = Agent::start(sb, &tb.manifests_dir(), &np_log, &[]);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(agent.metrics().flow_mods(), 0, "a restart with unchanged inputs sent flow_mods");
    assert!(agent.stop().success());

    set_namespaces(&tb, &[("x", &[(ANTREA_KEY, "false")])]);
    let agent = Agent::start(sb, &tb.manifests_dir(), &np_log, &[]);
    std::thread::sleep(Duration::from_millis(500));
    let m = agent.metrics();
    assert_eq!(
        m.count("npagent_flow_mods_total{kind=\"modify\"}"),
        2,
        "x/a's egress drop flow and the policy's allow flow"
    );
    assert_eq!(m.flow_mods(), 2);
    let after = dump_flows(sb);
    assert_eq!(after.keys().collect::<Vec<_>>(), before.keys().collect::<Vec<_>>());
    for (key, b) in &before {
        let a = &after[key];
        assert_eq!(a.n_packets, b.n_packets, "{key}: counter reset");
        assert!(a.duration > b.duration, "{key} re-added over the restart");
        if a.actions != b.actions {
            assert!(
                key.starts_with("EgressDefaultRule ") || key.contains("conj_id="),
                "{key} changed: {} -> {}",
                b.actions,
                a.actions
            );
        }
    }
    assert_eq!(egress_drop_flow(&after, &xa).actions, "drop");
    assert!(!after.values().any(sends_copies), "a stale logging flag survived the restart");
    sb.flush_datapath();
    assert_eq!(traffic(&tb, "x/a", "udp-same", &xc.ip, 80, 4, 100), 4);
    assert_eq!(traffic(&tb, "x/a", "tcp", &xb.ip, 80, 1, 0), 1);
    std::thread::sleep(Duration::from_millis(1_500));
    assert!(agent.stop().success());
    assert_eq!(read_lines(&np_log).len(), 2, "logging is off: {:#?}", read_lines(&np_log));
}
