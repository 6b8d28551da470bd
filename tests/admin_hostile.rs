//! The admin port against an unprivileged process on the node (uid 65534, through util-linux's
//! `setpriv`), which can reach `127.0.0.1:9496` like any local user or hostNetwork pod:
//!
//! - 300 connections it keeps open (idle ones, ones sending half a request head a byte at a
//!   time, ones that sent a whole request and never read the answer; each one that closes is
//!   opened again at once) hold every connection slot, and still `/livez` and `/readyz` answer
//!   200 to 100 of 100 probes each, every one within 1 s (a kubelet probe's timeout, not a
//!   speed measure); what the server shed is counted.
//! - With `--metrics-policy-labels=false` it reads no staged policy's name on `/metrics`, and
//!   the staged verdicts are still counted, per disposition; by default they are per policy.
//!
//! A real `npagent run` on a real ovs-vswitchd; the staged verdicts come from real packets on
//! the testbed. Needs root.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use npagent::admin::server::MAX_CONNECTIONS;
use support::agent::{Agent, Metrics};
use support::{write_atomic, Port, Sandbox, Testbed, NAMESPACES_X_LOGGING};

/// The user the hostile process runs as: `nobody`, no groups.
const NOBODY: u32 = 65534;

/// Runs `python3 -c script args` as [`NOBODY`].
fn as_nobody(script: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new("setpriv");
    cmd.args([format!("--reuid={NOBODY}"), format!("--regid={NOBODY}"), "--clear-groups".into()])
        .args(["/usr/bin/python3", "-c", script])
        .args(args)
        .current_dir("/");
    cmd
}

/// Holds `N` connections to HOST:PORT open, a third of each kind, and opens another of the
/// same kind as soon as one is closed by the server (refused, evicted, timed out): `idle`
/// sends nothing; `slow` sends a request head that never ends, one byte per connection every
/// 100 ms; `unread` sends a whole request for /metrics and never reads. Says `open N` once
/// all are connected, then `opened N` (all it ever opened) every second.
const HOSTILE: &str = r#"
import select, socket, sys, time
host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
KINDS = ("idle", "slow", "unread")
SLOW = b"GET /livez HTTP/1.1\r\nHost: npagent\r\nX-Pad: " + b"a" * 100000
UNREAD = b"GET /metrics HTTP/1.1\r\nHost: npagent\r\n\r\n"
WATCH = select.POLLRDHUP | select.POLLHUP | select.POLLERR
poller = select.poll()
conns = {}
opened = 0

def open_one(kind):
    global opened
    while True:
        s = socket.socket()
        s.settimeout(1)
        try:
            s.connect((host, port))
            if kind == "unread":
                s.sendall(UNREAD)
            break
        except OSError:
            s.close()
    s.setblocking(False)
    opened += 1
    conns[s.fileno()] = [s, kind, 0]
    poller.register(s.fileno(), WATCH)

for i in range(n):
    open_one(KINDS[i % 3])
print("open", len(conns), flush=True)
drip = report = time.monotonic()
while True:
    for fd, _ in poller.poll(20):
        s, kind, _ = conns.pop(fd)
        poller.unregister(fd)
        s.close()
        open_one(kind)
    now = time.monotonic()
    if now - drip >= 0.1:
        drip = now
        for c in list(conns.values()):
            if c[1] == "slow":
                try:
                    c[0].send(SLOW[c[2]:c[2] + 1])
                    c[2] += 1
                except OSError:
                    pass
    if now - report >= 1:
        report = now
        print("opened", opened, flush=True)
"#;

/// The hostile process; killed (by its pid) on drop.
struct Hostile {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Hostile {
    /// Starts [`HOSTILE`] as [`NOBODY`] against `addr` with `n` connections; returns once they
    /// are all open.
    fn start(addr: SocketAddr, n: usize) -> Hostile {
        let mut child = as_nobody(HOSTILE, &[&addr.ip().to_string(), &addr.port().to_string(), &n.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("setpriv python3");
        let out = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let hostile = Hostile { child, lines };
        let first = hostile.lines.recv_timeout(Duration::from_secs(30)).expect("the hostile process said nothing");
        assert_eq!(first, format!("open {n}"));
        hostile
    }

    /// The real user id the process runs as (from /proc).
    fn uid(&self) -> u32 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).expect("its status");
        let line = status.lines().find(|l| l.starts_with("Uid:")).expect("a Uid line");
        line.split_whitespace().nth(1).and_then(|u| u.parse().ok()).expect("a uid")
    }

    /// How many connections it has opened so far (its latest report).
    fn opened(&self) -> u64 {
        let mut last = 0;
        while let Ok(line) = self.lines.recv_timeout(Duration::from_millis(1500)) {
            last = line.strip_prefix("opened ").and_then(|n| n.parse().ok()).unwrap_or(last);
            if self.lines.try_recv().is_err() {
                break;
            }
        }
        last
    }
}

impl Drop for Hostile {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The sockets process `pid` holds open.
fn sockets(pid: u32) -> usize {
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).expect("the agent's fds");
    fds.filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .filter(|target| target.to_string_lossy().starts_with("socket:"))
        .count()
}

/// One probe as the kubelet makes it: a new connection, `GET path` (HTTP/1.1, Connection:
/// close), the answer read to its end; the status, or why there is none, within `timeout`.
fn probe(addr: SocketAddr, path: &str, timeout: Duration) -> Result<u16, String> {
    let started = Instant::now();
    let left = || timeout.checked_sub(started.elapsed()).filter(|d| !d.is_zero()).ok_or("timed out".to_owned());
    let mut sock = TcpStream::connect_timeout(&addr, timeout).map_err(|e| format!("connect: {e}"))?;
    sock.set_write_timeout(Some(left()?)).map_err(|e| e.to_string())?;
    let head = format!(
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nUser-Agent: kube-probe/1.30\r\nAccept: */*\r\nConnection: close\r\n\r\n"
    );
    sock.write_all(head.as_bytes()).map_err(|e| format!("send: {e}"))?;
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        sock.set_read_timeout(Some(left()?)).map_err(|e| e.to_string())?;
        match sock.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => answer.extend_from_slice(&buf[..n]),
            Err(e) => return Err(format!("read after {:?}: {e} ({} bytes)", started.elapsed(), answer.len())),
        }
    }
    let text = String::from_utf8_lossy(&answer);
    text.split(' ').nth(1).and_then(|s| s.parse().ok()).ok_or_else(|| format!("no HTTP answer: {text:?}"))
}

/// A kubelet's probe timeout: the answer must be there within it.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);
/// The hostile connections.
const HOSTILE_CONNECTIONS: usize = 300;

/// `rounds` probes of `/livez` and of `/readyz`, one after the other 20 ms apart; the ones
/// that got no 200 within [`PROBE_TIMEOUT`], with why, and the slowest answer (for the log).
fn probe_rounds(addr: SocketAddr, rounds: usize) -> (Vec<String>, Duration) {
    let mut failed = Vec::new();
    let mut slowest = Duration::ZERO;
    for round in 0..rounds {
        for path in ["/livez", "/readyz"] {
            let started = Instant::now();
            match probe(addr, path, PROBE_TIMEOUT) {
                Ok(200) => slowest = slowest.max(started.elapsed()),
                Ok(status) => failed.push(format!("#{round} {path}: {status}")),
                Err(e) => failed.push(format!("#{round} {path}: {e}")),
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    (failed, slowest)
}

#[test]
fn probes_answer_while_an_unprivileged_process_holds_300_connections() {
    let sb = Sandbox::start();
    let manifests = sb.dir.join("manifests");
    std::fs::create_dir_all(&manifests).expect("manifests dir");
    let agent = Agent::start(&sb, &manifests, &sb.dir.join("np.log"), &[]);
    let addr = agent.admin_addr();

    // Control: unloaded, every probe answers.
    let (failed, _) = probe_rounds(addr, 10);
    assert!(failed.is_empty(), "probes failed with nobody else connected: {failed:#?}");

    let baseline = sockets(agent.pid());
    let hostile = Hostile::start(addr, HOSTILE_CONNECTIONS);
    assert_eq!(hostile.uid(), NOBODY, "the hostile process is unprivileged");
    // Past the head deadline (2 s): every slot is held by connections it has reopened.
    std::thread::sleep(Duration::from_millis(2500));
    let samples: Vec<usize> = (0..20)
        .map(|_| {
            std::thread::sleep(Duration::from_millis(50));
            sockets(agent.pid()).saturating_sub(baseline)
        })
        .collect();
    let held = samples.iter().copied().max().unwrap_or(0);
    assert!(held >= MAX_CONNECTIONS, "the hostile process holds only {samples:?} of {MAX_CONNECTIONS} connections");
    let opened_before = hostile.opened();
    assert!(opened_before > HOSTILE_CONNECTIONS as u64, "no connection was shed and reopened: {opened_before}");

    let rounds = 100;
    let started = Instant::now();
    let (failed, slowest) = probe_rounds(addr, rounds);
    let took = started.elapsed();
    let opened_after = hostile.opened();
    eprintln!(
        "{} of {} probes failed in {took:?} (slowest answer {slowest:?}); the hostile process held {held} \
         connections and opened {} during the probes",
        failed.len(),
        2 * rounds,
        opened_after.saturating_sub(opened_before)
    );
    assert!(opened_after > opened_before, "the hostile process stopped reopening its connections");
    assert!(
        failed.is_empty(),
        "{} of {} probes got no 200 within {PROBE_TIMEOUT:?}: {failed:#?}",
        failed.len(),
        2 * rounds
    );

    // What the server shed is counted: the hostile process opens a connection only when the
    // server has closed one of its 300, and each close is counted before the socket closes.
    let m = agent.metrics();
    let count = |what: &str| m.count(&format!("npagent_metrics_connections_{what}_total"));
    let (evicted, refused, timed_out) = (count("evicted"), count("refused"), count("timed_out"));
    eprintln!("counted: {evicted} evicted, {refused} refused, {timed_out} timed out");
    let closed = opened_after - HOSTILE_CONNECTIONS as u64;
    assert!(
        evicted + refused + timed_out >= closed,
        "{closed} hostile connections closed by the server, {evicted} + {refused} + {timed_out} counted"
    );
    assert!(evicted > 0, "the probes were served by evicting");
    drop(hostile);
    assert!(agent.stop().success());
}

/// x/a's ingress isolated by a staged policy whose name says more than it should: y/a's
/// connections still pass, each a `WouldDrop` of it.
const STAGED_LOCKDOWN: &str = "apiVersion: policy.npagent.io/v1alpha1
kind: StagedNetworkPolicy
metadata: {name: lockdown-before-audit, namespace: x}
spec: {podSelector: {matchLabels: {pod: a}}, policyTypes: [Ingress]}
";

/// `/metrics` at `addr` as [`NOBODY`] reads it.
fn page_as_nobody(addr: SocketAddr) -> String {
    const GET: &str = "import sys, urllib.request\n\
        sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())\n";
    let out = as_nobody(GET, &[&format!("http://{addr}/metrics")]).output().expect("setpriv python3");
    assert!(out.status.success(), "nobody cannot read /metrics: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("UTF-8")
}

/// Starts npagent on `tb` with `extra` arguments, makes y/a connect to x/a until a staged
/// verdict is counted, and returns the page as [`NOBODY`] reads it then.
fn staged_page(tb: &Testbed, extra: &[&str]) -> (Agent, String) {
    let agent = Agent::start(&tb.sandbox, &tb.manifests_dir(), &tb.sandbox.dir.join("np.log"), extra);
    assert!(tb.reaches("y/a", "x/a", Port::Tcp80), "a staged policy is not enforced");
    support::wait_until(Duration::from_secs(5), "a staged verdict counted", || {
        agent.metrics().sum("npagent_staged_verdicts_total") > 0
    });
    let page = page_as_nobody(agent.admin_addr());
    (agent, page)
}

#[test]
fn metrics_policy_labels_false_keeps_staged_policy_names_from_local_users() {
    let tb = Testbed::start();
    write_atomic(&tb.manifests_dir().join("namespaces.yaml"), NAMESPACES_X_LOGGING);
    write_atomic(&tb.manifests_dir().join("staged.yaml"), STAGED_LOCKDOWN);

    // Control: by default any local user reads the staged policy's name, and what it would cut.
    let (agent, page) = staged_page(&tb, &[]);
    let named = Metrics::parse(&page);
    let key = "npagent_staged_verdicts_total{policy=\"x/lockdown-before-audit\",disposition=\"WouldDrop\"}";
    assert!(named.count(key) >= 1, "{page}");
    assert!(agent.stop().success());

    let (agent, page) = staged_page(&tb, &["--metrics-policy-labels=false"]);
    assert!(!page.contains("lockdown-before-audit") && !page.contains("policy="), "a staged policy named:\n{page}");
    let hidden = Metrics::parse(&page);
    assert!(hidden.count("npagent_staged_verdicts_total{disposition=\"WouldDrop\"}") >= 1, "{page}");
    assert_eq!(hidden.count("npagent_staged_verdicts_total{disposition=\"WouldAllow\"}"), 0, "{page}");
    let help = page.lines().find(|l| l.starts_with("# HELP npagent_staged_verdicts_total ")).expect("its help");
    assert!(help.contains("--metrics-policy-labels=false"), "{help}");
    assert!(agent.stop().success());
}

#[test]
fn metrics_policy_labels_is_on_by_default_and_set_by_flag_or_environment() {
    use clap::Parser;
    let parse = |args: &[&str]| {
        let cli = npagent::cli::Cli::try_parse_from([&["npagent", "run"], args].concat()).expect("parse");
        let npagent::cli::Command::Run(run) = cli.command else { panic!("not run") };
        run.metrics_policy_labels
    };
    assert!(parse(&[]));
    assert!(!parse(&["--metrics-policy-labels=false"]));
    assert!(!parse(&["--metrics-policy-labels", "false"]));
    assert!(parse(&["--metrics-policy-labels=true"]));
    let help = Command::new(support::agent::npagent_bin()).args(["run", "--help"]).output().expect("help");
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("--metrics-policy-labels") && help.contains("NPAGENT_METRICS_POLICY_LABELS"), "{help}");
    // The environment, in a process of its own (this one's is shared by the tests): npagent
    // with no switch to talk to, whose page already has the unnamed series.
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir(dir.path().join("manifests")).expect("manifests dir");
    let none = |name: &str| format!("unix:{}", dir.path().join(name).display());
    let log = std::fs::File::create(dir.path().join("agent.log")).expect("agent log");
    let child = Command::new(support::agent::npagent_bin())
        .args(["run", "--ofp", &none("none.mgmt"), "--ovsdb", &none("none.sock"), "--admin-addr", "127.0.0.1:0"])
        .arg("--manifests")
        .arg(dir.path().join("manifests"))
        .arg("--audit-log")
        .arg(dir.path().join("np.log"))
        .env("NPAGENT_METRICS_POLICY_LABELS", "false")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("clone log"))
        .stderr(log)
        .spawn()
        .expect("start npagent");
    let mut child = KillOnDrop(child);
    let mut addr = None;
    support::wait_until(Duration::from_secs(20), "the admin server's address logged", || {
        assert!(child.0.try_wait().expect("wait").is_none(), "npagent exited");
        let text = std::fs::read_to_string(dir.path().join("agent.log")).unwrap_or_default();
        addr = text.lines().find_map(support::agent::parse_admin_addr);
        addr.is_some()
    });
    let page = support::agent::get_raw(addr.expect("address"), "/metrics").expect("GET /metrics");
    assert!(page.contains("\nnpagent_staged_verdicts_total{disposition=\"WouldDrop\"} 0\n"), "{page}");
}

/// A child process killed (by its pid) on drop.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
