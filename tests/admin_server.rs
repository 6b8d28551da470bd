//! The admin server of a real `npagent run` on a real ovs-vswitchd: `/readyz` says 200 only
//! once the first resync is committed (the flows are on the bridge; a relay holds the bundle
//! to show that a connection alone is not enough), 503 with the reason while the switch is
//! away and 200 again after the next resync; `/livez`; `/metrics` read by
//! Prometheus' own text parser (Debian's python3-prometheus-client); 404 and 405; the flags
//! (`--admin-addr`, its deprecated alias `--metrics-addr`, NPAGENT_ADMIN_ADDR) and a bind
//! failure.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

mod support;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use support::agent::{get, get_raw, npagent_bin, parse_admin_addr, Agent};
use support::Sandbox;

/// Polls `GET path` until `want(status, body)` or `within` passes; returns the last answer.
fn poll(addr: SocketAddr, path: &str, within: Duration, want: impl Fn(u16, &str) -> bool) -> (u16, String) {
    let started = Instant::now();
    loop {
        let answer = get(addr, path).unwrap_or_else(|e| (0, e.to_string()));
        if want(answer.0, &answer.1) || started.elapsed() > within {
            return answer;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// An empty manifests directory in `dir`: no objects, so the flows are the base pipeline.
fn empty_manifests(dir: &Path) -> std::path::PathBuf {
    let m = dir.join("manifests");
    std::fs::create_dir_all(&m).expect("manifests dir");
    m
}

fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill").args([&format!("-{sig}"), &pid.to_string()]).status().expect("kill").success();
    assert!(ok, "kill -{sig} {pid}");
}

#[test]
fn ready_only_after_the_first_resync_and_again_after_the_switch_returns() {
    let sb = Sandbox::start();
    let manifests = empty_manifests(&sb.dir);
    let audit_log = sb.dir.join("np.log").display().to_string();
    // The switch accepts the connection but answers nothing: no handshake, no resync.
    let vswitchd = sb.vswitchd_pid();
    signal(vswitchd, "STOP");
    let mut agent = Agent::spawn(&sb, &manifests, &sb.dir.join("npagent.log"), &["--audit-log", &audit_log]);
    let addr = agent.admin_addr();

    let (status, body) = poll(addr, "/readyz", Duration::from_secs(10), |_, b| b.trim() == "switch not connected");
    assert_eq!((status, body.trim()), (503, "switch not connected"), "sources and OVSDB read, the switch silent");
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(get(addr, "/readyz").expect("readyz").0, 503, "still no resync");
    assert_eq!(get(addr, "/livez").expect("livez"), (200, "ok\n".to_owned()), "alive while waiting for the switch");
    let m = agent.metrics();
    assert_eq!((m.count("npagent_switch_connected"), m.count("npagent_synced")), (0, 0));
    assert!(!agent.log_text().contains("first sync complete"));

    // The switch wakes up: ready only once the flows are on it.
    signal(vswitchd, "CONT");
    let (status, _) = poll(addr, "/readyz", Duration::from_secs(20), |s, _| s == 200);
    let on_bridge = sb.dump_flows().len();
    assert_eq!(status, 200, "not ready after the switch woke up:\n{}", agent.log_tail(20));
    let m = agent.metrics();
    let desired: u64 = m.0.iter().filter(|(k, _)| k.starts_with("npagent_flows{")).map(|(_, v)| *v as u64).sum();
    assert!(desired > 0, "the base pipeline has flows");
    assert_eq!(on_bridge as u64, desired, "ready before the resync's flows were on the bridge");
    assert_eq!((m.count("npagent_switch_connected"), m.count("npagent_synced")), (1, 1));
    let first = agent.wait_log("first sync complete in", Duration::from_secs(1));
    assert!(
        first.contains("0 namespaces, 0 pods, 0 policies, 0 local ports")
            && first.contains(&format!("{desired} flows"))
            && first.contains("peak memory (VmHWM)")
            && first.contains(" MiB"),
        "{first}"
    );

    // The switch goes away: not ready, with the reason; back after its resync.
    sb.stop_vswitchd("KILL");
    let (status, body) = poll(addr, "/readyz", Duration::from_secs(15), |s, _| s == 503);
    assert_eq!((status, body.trim()), (503, "switch not connected"));
    assert_eq!(agent.metrics().count("npagent_synced"), 0);
    assert_eq!(get(addr, "/livez").expect("livez").0, 200);
    sb.start_vswitchd();
    let (status, _) = poll(addr, "/readyz", Duration::from_secs(20), |s, _| s == 200);
    let on_bridge = sb.dump_flows().len();
    assert_eq!(status, 200, "not ready after the switch came back:\n{}", agent.log_tail(20));
    assert_eq!(on_bridge as u64, desired, "ready before the new switch got its flows");
    let m = agent.metrics();
    assert_eq!(m.count("npagent_switch_reconnects_total"), 1);
    assert_eq!(m.count("npagent_synced"), 1);
    assert_eq!(agent.log_text().matches("first sync complete").count(), 1, "the first sync is logged once");
    assert!(agent.stop().success());
}

/// A relay between npagent and the switch's OpenFlow socket that holds npagent's messages from
/// its first OFPT_BUNDLE_CONTROL on (the first resync's bundle) until `release` is set.
struct BundleGate {
    path: std::path::PathBuf,
    held: Arc<AtomicBool>,
    release: Arc<AtomicBool>,
}

impl BundleGate {
    fn start(sb: &Sandbox) -> BundleGate {
        let path = sb.dir.join("gate.mgmt");
        let listener = UnixListener::bind(&path).expect("bind the relay");
        let switch_path = sb.ofp.strip_prefix("unix:").expect("unix endpoint").to_owned();
        let (held, release) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
        let (h, r) = (Arc::clone(&held), Arc::clone(&release));
        std::thread::spawn(move || {
            let Ok((mut agent, _)) = listener.accept() else { return };
            let mut switch = UnixStream::connect(&switch_path).expect("connect to the switch");
            let (mut agent_rx, mut switch_tx) = (agent.try_clone().expect("clone"), switch.try_clone().expect("clone"));
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut switch, &mut agent);
            });
            let mut header = [0u8; 8];
            while agent_rx.read_exact(&mut header).is_ok() {
                let len = usize::from(u16::from_be_bytes([header[2], header[3]])).max(8);
                let mut body = vec![0u8; len - 8];
                if agent_rx.read_exact(&mut body).is_err() {
                    return;
                }
                const OFPT_BUNDLE_CONTROL: u8 = 33;
                if header[1] == OFPT_BUNDLE_CONTROL && !r.load(Ordering::SeqCst) {
                    h.store(true, Ordering::SeqCst);
                    while !r.load(Ordering::SeqCst) {
                        std::thread::sleep(Duration::from_millis(10));
                    }
                }
                if switch_tx.write_all(&header).and_then(|()| switch_tx.write_all(&body)).is_err() {
                    return;
                }
            }
        });
        BundleGate { path, held, release }
    }
}

#[test]
fn ready_waits_for_the_first_bundle_to_commit_not_for_the_connection() {
    let sb = Sandbox::start();
    let dir = tempfile::tempdir().expect("temp dir");
    let manifests = empty_manifests(dir.path());
    let gate = BundleGate::start(&sb);
    let log = std::fs::File::create(dir.path().join("agent.log")).expect("agent log");
    let mut child = Command::new(npagent_bin())
        .args(["run", "--ovsdb", &sb.ovsdb, "--admin-addr", "127.0.0.1:0", "--ofp"])
        .arg(format!("unix:{}", gate.path.display()))
        .arg("--manifests")
        .arg(&manifests)
        .arg("--audit-log")
        .arg(dir.path().join("np.log"))
        .env("NO_COLOR", "1")
        .stdout(log.try_clone().expect("clone log"))
        .stderr(log)
        .spawn()
        .expect("start npagent");
    let (addr, _) = admin_line(dir.path(), &mut child);
    let started = Instant::now();
    while !gate.held.load(Ordering::SeqCst) {
        assert!(started.elapsed() < Duration::from_secs(15), "npagent sent no bundle");
        std::thread::sleep(Duration::from_millis(10));
    }
    // Connected, dumped, bundle on its way but not committed: not ready.
    std::thread::sleep(Duration::from_millis(300));
    let (status, body) = get(addr, "/readyz").expect("readyz");
    assert_eq!((status, body.trim()), (503, "resync with the switch (connection #1) not committed yet"));
    let page = get(addr, "/metrics").expect("metrics").1;
    assert!(page.contains("npagent_switch_connected 1\n") && page.contains("npagent_synced 0\n"), "{page}");
    assert!(sb.dump_flows().is_empty(), "nothing on the bridge yet");

    gate.release.store(true, Ordering::SeqCst);
    let (status, _) = poll(addr, "/readyz", Duration::from_secs(10), |s, _| s == 200);
    assert_eq!(status, 200, "not ready after the bundle went through");
    assert!(!sb.dump_flows().is_empty(), "ready with the flows on the bridge");
    let _ = child.kill();
    let _ = child.wait();
}

/// One metric family as Prometheus' parser sees it: type and samples (name, labels, value).
#[derive(Debug, serde::Deserialize)]
struct Family {
    #[serde(rename = "type")]
    kind: String,
    samples: Vec<(String, BTreeMap<String, String>, f64)>,
}

/// Parses `text` with `prometheus_client.parser.text_string_to_metric_families`.
fn prometheus_parse(text: &str) -> BTreeMap<String, Family> {
    const SCRIPT: &str = "import json, sys\n\
        from prometheus_client.parser import text_string_to_metric_families\n\
        out = {f.name: {'type': f.type, 'samples': [[s.name, s.labels, s.value] for s in f.samples]}\n\
               for f in text_string_to_metric_families(sys.stdin.read())}\n\
        print(json.dumps(out))\n";
    let mut child = Command::new("/usr/bin/python3")
        .args(["-c", SCRIPT])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("Debian's python3 (scripts/test installs python3-prometheus-client)");
    std::io::Write::write_all(&mut child.stdin.take().expect("stdin"), text.as_bytes()).expect("write the page");
    let out = child.wait_with_output().expect("python3");
    assert!(
        out.status.success(),
        "Prometheus' parser rejects the page: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the parser's JSON")
}

#[test]
fn metrics_parse_with_prometheus_and_carry_histograms_and_build_info() {
    let sb = Sandbox::start();
    let manifests = empty_manifests(&sb.dir);
    let agent = Agent::start(&sb, &manifests, &sb.dir.join("np.log"), &[]);
    let addr = agent.admin_addr();
    let raw = get_raw(addr, "/metrics").expect("GET /metrics");
    let (head, text) = raw.split_once("\r\n\r\n").expect("an HTTP answer");
    assert!(head.to_ascii_lowercase().contains("content-type: text/plain; version=0.0.4"), "{head}");
    let families = prometheus_parse(text);

    let committed = agent.metrics().count("npagent_bundles_committed_total");
    assert!(committed >= 1, "the first resync sent a bundle");
    for (name, count) in [("npagent_bundle_commit_seconds", committed), ("npagent_compile_seconds", 1)] {
        let f = families.get(name).unwrap_or_else(|| panic!("no {name} in {:?}", families.keys()));
        assert_eq!(f.kind, "histogram", "{name}");
        let buckets: Vec<_> = f.samples.iter().filter(|s| s.0 == format!("{name}_bucket")).collect();
        assert!(buckets.len() > 10, "{name} has {} buckets", buckets.len());
        let inf = buckets.iter().find(|s| s.1.get("le").map(String::as_str) == Some("+Inf")).expect("+Inf bucket");
        let n = f.samples.iter().find(|s| s.0 == format!("{name}_count")).expect("_count").2;
        assert_eq!(inf.2, n, "{name}: +Inf bucket equals the count");
        assert!(n >= count as f64, "{name}_count {n}, at least {count}");
        let sum = f.samples.iter().find(|s| s.0 == format!("{name}_sum")).expect("_sum").2;
        assert!(sum > 0.0 && sum < 10.0, "{name}_sum {sum}");
    }
    let build = families.get("npagent_build_info").expect("npagent_build_info");
    assert_eq!(build.samples.len(), 1);
    let (_, labels, value) = &build.samples[0];
    assert_eq!((labels.get("version").map(String::as_str), *value), (Some(env!("CARGO_PKG_VERSION")), 1.0));
    for (name, kind) in [
        ("npagent_flow_mods", "counter"),
        ("npagent_switch_reconnects", "counter"),
        ("npagent_packet_ins_received", "counter"),
        ("npagent_audit_shed_by_queue", "counter"),
        ("npagent_flows", "gauge"),
        ("npagent_synced", "gauge"),
        ("npagent_switch_connected", "gauge"),
    ] {
        let f = families.get(name).unwrap_or_else(|| panic!("no {name} in {:?}", families.keys()));
        assert_eq!(f.kind, kind, "{name}");
    }
    assert_eq!(families["npagent_synced"].samples[0].2, 1.0);
    assert_eq!(get(addr, "/livez").expect("livez"), (200, "ok\n".to_owned()));
}

/// npagent with a switch and OVSDB that do not exist and an empty manifests directory.
fn standalone(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> std::process::Child {
    let manifests = empty_manifests(dir);
    let none = |name: &str| format!("unix:{}", dir.join(name).display());
    let log = std::fs::File::create(dir.join("agent.log")).expect("agent log");
    Command::new(npagent_bin())
        .args(["run", "--ofp", &none("none.mgmt"), "--ovsdb", &none("none.sock"), "--audit-log"])
        .arg(dir.join("np.log"))
        .arg("--manifests")
        .arg(manifests)
        .args(args)
        .envs(env.iter().copied())
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("clone log"))
        .stderr(log)
        .spawn()
        .expect("start npagent")
}

/// Waits for the admin line in `dir`'s agent log; the address and the log.
fn admin_line(dir: &Path, child: &mut std::process::Child) -> (SocketAddr, String) {
    let started = Instant::now();
    loop {
        let text = std::fs::read_to_string(dir.join("agent.log")).unwrap_or_default();
        if let Some(addr) = text.lines().find_map(parse_admin_addr) {
            return (addr, text);
        }
        assert!(child.try_wait().expect("wait").is_none(), "npagent exited:\n{text}");
        assert!(started.elapsed() < Duration::from_secs(20), "no admin line:\n{text}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn paths_and_methods_over_the_wire() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut child = standalone(dir.path(), &["--admin-addr", "127.0.0.1:0"], &[]);
    let (addr, _) = admin_line(dir.path(), &mut child);
    let (status, body) =
        poll(addr, "/readyz", Duration::from_secs(10), |_, b| !b.contains("waiting for the manifests"));
    assert_eq!(status, 503);
    assert!(body.contains("waiting for OVSDB") && body.contains("switch not connected"), "{body}");
    assert_eq!(get(addr, "/livez").expect("livez").0, 200);
    assert_eq!(get(addr, "/").expect("/").0, 404);
    assert_eq!(get(addr, "/metrics/../readyz").expect("dots").0, 404);
    assert_eq!(get(addr, "/readyz?verbose=1").expect("query").0, 503, "a query string is no other page");
    let post = send(addr, "POST /metrics HTTP/1.0\r\nContent-Length: 0\r\n\r\n");
    assert!(post.starts_with("HTTP/1.0 405") || post.starts_with("HTTP/1.1 405"), "{post}");
    assert!(post.to_ascii_lowercase().contains("allow: get"), "{post}");
    // Garbage is a client error, and the server goes on.
    let garbage = send(addr, "\u{1}\u{2}not http at all\r\n\r\n");
    assert!(garbage.is_empty() || garbage.contains(" 400 "), "{garbage:?}");
    assert_eq!(get(addr, "/livez").expect("livez after garbage").0, 200);
    // Keep-alive: two requests on one connection.
    let two =
        send(addr, "GET /livez HTTP/1.1\r\nHost: x\r\n\r\nGET /livez HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assert_eq!(two.matches("HTTP/1.1 200").count(), 2, "{two}");
    let _ = child.kill();
    let _ = child.wait();
}

/// Sends `request` raw; the whole answer (empty when the server just closes).
fn send(addr: SocketAddr, request: &str) -> String {
    let mut sock = std::net::TcpStream::connect(addr).expect("connect");
    sock.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
    sock.write_all(request.as_bytes()).expect("send");
    let mut out = Vec::new();
    let _ = sock.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn a_taken_admin_address_is_a_clear_error_and_a_failed_start() {
    let dir = tempfile::tempdir().expect("temp dir");
    let taken = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = taken.local_addr().expect("addr").to_string();
    let mut child = standalone(dir.path(), &["--admin-addr", &addr], &[]);
    let started = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "npagent runs without its admin server");
        std::thread::sleep(Duration::from_millis(20));
    };
    let log = std::fs::read_to_string(dir.path().join("agent.log")).expect("log");
    assert!(!status.success(), "exit status {status}");
    assert!(log.contains(&format!("--admin-addr {addr}")) && log.contains("in use"), "{log}");
    assert!(!log.contains("switch connected"), "it did nothing else first:\n{log}");
}

#[test]
fn metrics_addr_is_a_deprecated_alias_and_the_address_can_come_from_the_environment() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut child = standalone(dir.path(), &["--metrics-addr", "127.0.0.1:0"], &[]);
    let (addr, log) = admin_line(dir.path(), &mut child);
    assert!(log.contains("--metrics-addr is deprecated"), "{log}");
    assert_eq!(get(addr, "/livez").expect("livez").0, 200);
    let _ = child.kill();
    let _ = child.wait();

    let dir = tempfile::tempdir().expect("temp dir");
    let mut child = standalone(dir.path(), &[], &[("NPAGENT_ADMIN_ADDR", "127.0.0.1:0")]);
    let (addr, log) = admin_line(dir.path(), &mut child);
    assert!(!log.contains("deprecated"), "{log}");
    assert_ne!(addr.port(), 9496, "the environment's address, not the default");
    assert_eq!(get(addr, "/metrics").expect("metrics").0, 200);
    let _ = child.kill();
    let _ = child.wait();

    let both = Command::new(npagent_bin())
        .args(["run", "--admin-addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0"])
        .output()
        .expect("npagent");
    assert_eq!(both.status.code(), Some(2), "both flags: a usage error");
    assert!(String::from_utf8_lossy(&both.stderr).contains("--metrics-addr"));
}

#[test]
fn the_default_admin_address_is_loopback_9496() {
    use clap::Parser;
    let cli = npagent::cli::Cli::try_parse_from(["npagent", "run"]).expect("parse");
    let npagent::cli::Command::Run(run) = cli.command else { panic!("not run") };
    assert_eq!(run.admin_addr, "127.0.0.1:9496".parse::<SocketAddr>().expect("addr"));
    let help = Command::new(npagent_bin()).args(["run", "--help"]).output().expect("help");
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("--admin-addr") && help.contains("127.0.0.1:9496") && help.contains("NPAGENT_ADMIN_ADDR"),
        "{help}"
    );
}
