//! The operator conventions of the `npagent` binary, run as a process: configuration errors
//! exit 2 naming the flag before anything connects, every option of `run` comes from an
//! `NPAGENT_*` variable too, JSON logs, no colours off a terminal, exit statuses on SIGTERM and
//! on a lost audit log, `--version`, completions and man pages.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

mod support;

use std::io::ErrorKind;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use support::agent::{npagent_bin, parse_admin_addr, poll_ready, Agent, ADMIN_LINE};
use support::sandbox::{repo_path, run};
use support::{write_atomic, Sandbox, Testbed};

/// How long an agent may take to install the pipeline.
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// One `npagent` process with exactly the environment it is given (nothing inherited), its
/// stderr in a file; killed on drop if still running.
struct Npagent {
    child: Option<Child>,
    stderr: PathBuf,
}

impl Npagent {
    fn spawn(args: &[&str], env: &[(&str, &str)], stderr: &Path) -> Npagent {
        let file = std::fs::File::create(stderr).unwrap_or_else(|e| panic!("create {}: {e}", stderr.display()));
        let child = Command::new(npagent_bin())
            .args(args)
            .env_clear()
            // Tests run at once: a free admin port each, unless the test says otherwise.
            .env("NPAGENT_ADMIN_ADDR", "127.0.0.1:0")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .expect("start npagent");
        Npagent { child: Some(child), stderr: stderr.to_owned() }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    fn exited(&mut self) -> Option<ExitStatus> {
        self.child.as_mut().and_then(|c| c.try_wait().ok().flatten())
    }

    /// Waits until stderr has a line containing `needle`; returns it.
    fn wait_log(&mut self, needle: &str, within: Duration) -> String {
        let started = Instant::now();
        loop {
            if let Some(line) = self.log().lines().find(|l| l.contains(needle)) {
                return line.to_owned();
            }
            if let Some(status) = self.exited() {
                panic!("npagent exited ({status}) before logging {needle:?}:\n{}", self.log());
            }
            assert!(started.elapsed() < within, "npagent logged no {needle:?} within {within:?}:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits until the admin server (its address read from the log) says the agent is ready:
    /// its first resync with the switch is committed.
    fn wait_ready(&mut self, within: Duration) {
        let addr = parse_admin_addr(&self.wait_log(ADMIN_LINE, within)).expect("the admin server's address");
        if let Err(why) = poll_ready(addr, within, || self.exited()) {
            panic!("{why}:\n{}", self.log());
        }
    }

    /// Waits (at most `within`) for the exit.
    fn wait_exit(&mut self, within: Duration) -> ExitStatus {
        let started = Instant::now();
        loop {
            if let Some(status) = self.exited() {
                self.child = None;
                return status;
            }
            assert!(started.elapsed() < within, "npagent still runs after {within:?}:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends SIGTERM and waits for the exit.
    fn terminate(&mut self) -> ExitStatus {
        let pid = self.child.as_ref().map(Child::id).expect("running");
        run(Command::new("kill").args(["-TERM", &pid.to_string()]));
        self.wait_exit(Duration::from_secs(10))
    }
}

impl Drop for Npagent {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
            if std::thread::panicking() {
                eprintln!("npagent stderr:\n{}", self.log());
            }
        }
    }
}

/// Runs `npagent args` with exactly `env` to its exit (at most 10 s); returns status and stderr.
fn npagent_exit(args: &[&str], env: &[(&str, &str)], dir: &Path) -> (ExitStatus, String) {
    let mut p = Npagent::spawn(args, env, &dir.join("stderr"));
    let status = p.wait_exit(Duration::from_secs(10));
    (status, p.log())
}

/// Runs `npagent args` (no environment) to a successful exit; returns stdout.
fn npagent_stdout(args: &[&str]) -> String {
    let out = Command::new(npagent_bin()).args(args).env_clear().output().expect("run npagent");
    assert!(out.status.success(), "npagent {args:?}: {}\n{}", out.status, String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

/// A configuration error: what is wrong, arguments after `run`, environment, and the flag the
/// message must name.
type Case<'a> = (&'a str, Vec<&'a str>, Vec<(&'a str, &'a str)>, &'a str);

#[test]
fn bad_configuration_exits_2_naming_the_flag_before_anything_connects() {
    let tmp = tempfile::tempdir().expect("temp dir");
    // Endpoints that do listen: a process that got past its checks would connect to them.
    let (ofp_path, ovsdb_path) = (tmp.path().join("br-int.mgmt"), tmp.path().join("db.sock"));
    let (ofp, ovsdb) = (UnixListener::bind(&ofp_path).expect("bind"), UnixListener::bind(&ovsdb_path).expect("bind"));
    for l in [&ofp, &ovsdb] {
        l.set_nonblocking(true).expect("nonblocking");
    }
    let ofp_arg = format!("unix:{}", ofp_path.display());
    let ovsdb_arg = format!("unix:{}", ovsdb_path.display());
    let a_file = tmp.path().join("a-file");
    std::fs::write(&a_file, "").expect("write");
    let under_a_file = format!("{}/np.log", a_file.display());
    let a_dir = tmp.path().to_string_lossy().into_owned();
    let manifests = tmp.path().join("manifests");
    std::fs::create_dir(&manifests).expect("mkdir");
    let manifests = manifests.to_string_lossy().into_owned();
    let good_log = tmp.path().join("ok/np.log").to_string_lossy().into_owned();
    let endpoints = [("NPAGENT_OFP", ofp_arg.as_str()), ("NPAGENT_OVSDB", ovsdb_arg.as_str())];
    let missing_kubeconfig = tmp.path().join("no-kubeconfig").to_string_lossy().into_owned();
    let bad_kubeconfig = tmp.path().join("kubeconfig").to_string_lossy().into_owned();
    std::fs::write(&bad_kubeconfig, "clusters: [unclosed").expect("write");

    let cases: Vec<Case> = vec![
        ("--ofp garbage", vec!["--ofp", "garbage"], vec![], "--ofp"),
        ("--ofp without a port", vec!["--ofp", "tcp:localhost"], vec![], "--ofp"),
        ("--ovsdb ssl:", vec!["--ovsdb", "ssl:1.2.3.4:6640"], vec![], "--ovsdb"),
        ("NPAGENT_OFP=garbage", vec![], vec![("NPAGENT_OFP", "garbage")], "--ofp"),
        ("NPAGENT_OVSDB=unix:", vec![], vec![("NPAGENT_OVSDB", "unix:")], "--ovsdb"),
        ("--packet-in-rate 0", vec!["--packet-in-rate", "0"], vec![], "--packet-in-rate"),
        ("NPAGENT_PACKET_IN_RATE=0", vec![], vec![("NPAGENT_PACKET_IN_RATE", "0")], "--packet-in-rate"),
        ("--audit-staged-rate 0", vec!["--audit-staged-rate", "0"], vec![], "--audit-staged-rate"),
        ("NPAGENT_AUDIT_STAGED_RATE=x", vec![], vec![("NPAGENT_AUDIT_STAGED_RATE", "x")], "--audit-staged-rate"),
        ("NPAGENT_LOG_LEVEL=verbose", vec![], vec![("NPAGENT_LOG_LEVEL", "verbose")], "--log-level"),
        ("--log-level info,warning", vec!["--log-level", "info,warning"], vec![], "--log-level"),
        ("NPAGENT_LOG_FORMAT=xml", vec![], vec![("NPAGENT_LOG_FORMAT", "xml")], "--log-format"),
        ("--audit-log under a file", vec!["--audit-log", &under_a_file], vec![], "--audit-log"),
        ("--audit-log a directory", vec!["--audit-log", &a_dir], vec![], "--audit-log"),
        ("NPAGENT_AUDIT_LOG in /proc", vec![], vec![("NPAGENT_AUDIT_LOG", "/proc/npagent/np.log")], "--audit-log"),
        ("NPAGENT_AUDIT_MAX_SIZE=lots", vec![], vec![("NPAGENT_AUDIT_MAX_SIZE", "lots")], "--audit-max-size"),
        ("NPAGENT_AUDIT_COMPRESS=maybe", vec![], vec![("NPAGENT_AUDIT_COMPRESS", "maybe")], "--audit-compress"),
        ("NPAGENT_CONTROLLER_ID=70000", vec![], vec![("NPAGENT_CONTROLLER_ID", "70000")], "--controller-id"),
        ("--kubeconfig missing", vec!["--kubeconfig", &missing_kubeconfig], vec![], "--kubeconfig"),
        ("NPAGENT_KUBECONFIG not YAML", vec![], vec![("NPAGENT_KUBECONFIG", &bad_kubeconfig)], "--kubeconfig"),
    ];
    for (what, extra, env, flag) in cases {
        let kube = extra.contains(&"--kubeconfig") || env.iter().any(|(k, _)| *k == "NPAGENT_KUBECONFIG");
        let mut args = vec!["run"];
        if !kube {
            args.extend(["--manifests", manifests.as_str()]);
        }
        if !extra.contains(&"--audit-log") && !env.iter().any(|(k, _)| *k == "NPAGENT_AUDIT_LOG") {
            args.extend(["--audit-log", &good_log]);
        }
        args.extend(extra);
        // The endpoints from the environment unless the case sets one: the command line wins.
        let mut all_env: Vec<(&str, &str)> =
            endpoints.iter().filter(|(k, _)| !env.iter().any(|(e, _)| e == k)).copied().collect();
        all_env.extend(env);
        let (status, stderr) = npagent_exit(&args, &all_env, tmp.path());
        assert_eq!(status.code(), Some(2), "{what}: {status}\n{stderr}");
        assert!(stderr.contains(flag), "{what}: the message does not name {flag}:\n{stderr}");
        for (name, l) in [("--ofp", &ofp), ("--ovsdb", &ovsdb)] {
            match l.accept() {
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                other => panic!("{what}: npagent connected to {name} before failing ({other:?})"),
            }
        }
    }
    // The control: the same command line without the error does connect.
    let args = ["run", "--manifests", &manifests, "--audit-log", &good_log];
    let mut agent = Npagent::spawn(&args, &endpoints, &tmp.path().join("control.stderr"));
    let started = Instant::now();
    while ofp.accept().is_err() {
        assert!(agent.exited().is_none(), "the control exited:\n{}", agent.log());
        assert!(started.elapsed() < START_TIMEOUT, "the control never connected to --ofp:\n{}", agent.log());
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn an_agent_configured_by_the_environment_alone_enforces() {
    let (sb, tmp, manifests) = sandbox_with_manifests();
    // A directory npagent must create, at start.
    let audit_log = tmp.path().join("audit/np.log");
    let (manifests_s, audit_s) = (manifests.to_string_lossy(), audit_log.to_string_lossy());
    assert!(sb.dump_flows().is_empty(), "the bridge starts empty: {:?}", sb.dump_flows());
    let env = [
        ("NPAGENT_OFP", sb.ofp.as_str()),
        ("NPAGENT_OVSDB", sb.ovsdb.as_str()),
        ("NPAGENT_BRIDGE", "br-int"),
        ("NPAGENT_MANIFESTS", manifests_s.as_ref()),
        ("NPAGENT_AUDIT_LOG", audit_s.as_ref()),
        ("NPAGENT_PACKET_IN_RATE", "1234"),
        ("NPAGENT_NODE", "node-a"),
        ("NODE_NAME", "node-from-the-downward-api"),
        ("NPAGENT_LOG_LEVEL", "debug"),
        ("NPAGENT_LOG_FORMAT", "text"),
    ];
    let mut agent = Npagent::spawn(&["run"], &env, &tmp.path().join("stderr"));
    agent.wait_ready(START_TIMEOUT);
    let starting = agent.wait_log(&format!("npagent {} (commit", env!("CARGO_PKG_VERSION")), Duration::ZERO);
    assert!(starting.contains("node \"node-a\""), "NPAGENT_NODE wins over NODE_NAME: {starting}");
    assert!(audit_log.is_file(), "the audit log was not created at start");
    let flows = sb.dump_flows();
    assert!(flows.len() > 3, "the pipeline is on the bridge: {flows:?}");
    let meters = sb.ofctl(&["dump-meters"]);
    assert!(meters.contains("rate=1234"), "the logging meter has NPAGENT_PACKET_IN_RATE: {meters}");

    assert_eq!(agent.terminate().code(), Some(0), "{}", agent.log());
    let log = agent.log();
    assert!(log.lines().count() > 3 && log.contains("DEBUG"), "a debug log: {log}");
    assert!(!log.contains('\u{1b}'), "escape sequences in a log that is not a terminal:\n{log:?}");
}

#[test]
fn json_logs_are_one_object_a_line() {
    let (sb, tmp, manifests) = sandbox_with_manifests();
    let audit_log = tmp.path().join("np.log").to_string_lossy().into_owned();
    let manifests = manifests.to_string_lossy();
    let args =
        [&["--log-format", "json", "--log-level", "debug"][..], &run_args(&sb.ofp, &sb.ovsdb, &manifests, &audit_log)]
            .concat();
    let mut agent = Npagent::spawn(&args, &[("NODE_NAME", "node-b")], &tmp.path().join("stderr"));
    agent.wait_ready(START_TIMEOUT);
    // A warning with fields of its own: the switch goes away for a moment.
    sb.restart_vswitchd();
    agent.wait_log("switch connection down", START_TIMEOUT);
    assert_eq!(agent.terminate().code(), Some(0), "{}", agent.log());

    let log = agent.log();
    let lines: Vec<serde_json::Value> =
        log.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l:?}"))).collect();
    assert!(lines.len() > 3, "{log}");
    for line in &lines {
        for key in ["timestamp", "level", "target", "message"] {
            assert!(line.get(key).is_some_and(serde_json::Value::is_string), "no string {key:?} in {line}");
        }
    }
    let starting =
        lines.iter().find(|l| l["message"].as_str().is_some_and(|m| m.contains("starting"))).expect("a start line");
    assert!(starting["message"].as_str().is_some_and(|m| m.contains("node \"node-b\"")), "NODE_NAME: {starting}");
    let down = lines.iter().find(|l| l["message"] == "switch connection down").expect("the warning");
    assert_eq!(down["level"], "WARN", "{down}");
    assert_eq!(down["endpoint"].as_str(), Some(sb.ofp.as_str()), "its fields: {down}");
    assert!(lines.iter().any(|l| l["level"] == "DEBUG"), "--log-level debug");
}

/// `npagent run` on these endpoints, manifests directory and audit log.
fn run_args<'a>(ofp: &'a str, ovsdb: &'a str, manifests: &'a str, audit_log: &'a str) -> [&'a str; 9] {
    ["run", "--ofp", ofp, "--ovsdb", ovsdb, "--manifests", manifests, "--audit-log", audit_log]
}

/// A sandbox, a temporary directory and an empty manifests directory in it.
fn sandbox_with_manifests() -> (Sandbox, tempfile::TempDir, std::path::PathBuf) {
    let sb = Sandbox::start();
    let tmp = tempfile::tempdir().expect("temp dir");
    let manifests = tmp.path().join("manifests");
    std::fs::create_dir(&manifests).expect("mkdir");
    (sb, tmp, manifests)
}

/// `ovs-appctl` against the sandbox's ovsdb-server.
fn ovsdb_appctl(sb: &Sandbox, args: &[&str]) -> String {
    run(Command::new("ovs-appctl").arg("-t").arg(sb.dir.join("ovsdb-server.ctl")).args(args))
}

#[test]
fn ovsdb_going_away_and_the_manifests_directory_vanishing_are_survived() {
    let (sb, tmp, manifests) = sandbox_with_manifests();
    let audit_log = tmp.path().join("np.log").to_string_lossy().into_owned();
    // npagent's own OVSDB socket, removed below: OVSDB goes away for npagent for good, while
    // ovs-vswitchd keeps its database (without one it stops answering OpenFlow too).
    let remote = format!("punix:{}", sb.dir.join("npagent-db.sock").display());
    ovsdb_appctl(&sb, &["ovsdb-server/add-remote", &remote]);
    let ovsdb = format!("unix:{}", sb.dir.join("npagent-db.sock").display());
    let manifests_arg = manifests.to_string_lossy();
    let args = run_args(&sb.ofp, &ovsdb, &manifests_arg, &audit_log);
    let mut agent = Npagent::spawn(&args, &[], &tmp.path().join("stderr"));
    agent.wait_ready(START_TIMEOUT);
    let flows = sb.dump_flows();

    ovsdb_appctl(&sb, &["ovsdb-server/remove-remote", &remote]);
    std::fs::remove_dir(&manifests).expect("rmdir");
    agent.wait_log("keeping the last known ports", Duration::from_secs(10));
    agent.wait_log("cannot read the manifests directory", Duration::from_secs(10));
    // Several reconnect attempts and manifest polls later, npagent still runs and enforces.
    std::thread::sleep(Duration::from_secs(2));
    assert!(agent.exited().is_none(), "npagent exited:\n{}", agent.log());
    assert!(agent.log().contains("Connection refused") || agent.log().contains("No such file"), "{}", agent.log());
    assert_eq!(sb.dump_flows(), flows, "the flows changed");
    assert_eq!(agent.terminate().code(), Some(0), "{}", agent.log());
}

/// Sends UDP datagrams to port 80 of `to_ip`.
const SEND_UDP_PY: &str = r#"
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for _ in range(int(sys.argv[2])):
    s.sendto(b"npagent-cli", (sys.argv[1], 80))
"#;

#[test]
fn sigterm_exits_0_with_the_audit_log_flushed_and_1_when_it_cannot_be() {
    let tb = Testbed::start();
    let sb = &tb.sandbox;
    // Logging on in namespace x; x/a isolated (only x/b may reach it, on TCP 80).
    let namespaces = tb.manifests_dir().join("namespaces.yaml");
    let text = std::fs::read_to_string(&namespaces).expect("namespaces.yaml");
    let logging =
        "  name: x\n  labels:\n    ns: x\n  annotations:\n    networkpolicy.antrea.io/enable-logging: \"true\"\n";
    write_atomic(&namespaces, &text.replacen("  name: x\n  labels:\n    ns: x\n", logging, 1));
    let policy = std::fs::read_to_string(repo_path("testbed/examples/allow-xb-to-xa-tcp80.yaml")).expect("example");
    write_atomic(&tb.manifests_dir().join("allow-xb-to-xa-tcp80.yaml"), &policy);
    let tmp = tempfile::Builder::new().prefix("npa-cli-").tempdir().expect("temp dir");
    let manifests = tb.manifests_dir().to_string_lossy().into_owned();
    let xa = tb.pod("x/a");
    let send_drops = || {
        let sent = tb.pod_exec("x/c", &["python3", "-c", SEND_UDP_PY, &xa.ip, "3"]);
        assert!(sent.status.success(), "{}", String::from_utf8_lossy(&sent.stderr));
    };

    // An audit log on a full disk: every write fails, so the entries are lost.
    let args = [&run_args(&sb.ofp, &sb.ovsdb, &manifests, "/dev/full")[..], &["--audit-dedup-window", "0"]].concat();
    let mut agent = Npagent::spawn(&args, &[], &tmp.path().join("full.stderr"));
    agent.wait_ready(START_TIMEOUT);
    send_drops();
    agent.wait_log("audit log write failed", Duration::from_secs(10));
    let status = agent.terminate();
    let log = agent.log();
    assert_eq!(status.code(), Some(1), "{log}");
    let last = log.lines().last().unwrap_or_default();
    assert!(last.contains("audit log not flushed") && last.contains("/dev/full"), "the last line says why: {log}");

    // A writable one: the pending aggregate is written at SIGTERM, and the exit is clean.
    let np_log = tmp.path().join("np.log");
    let agent = Agent::start(sb, &tb.manifests_dir(), &np_log, &["--audit-dedup-window", "60s"]);
    send_drops();
    let started = Instant::now();
    while agent.metrics().count("npagent_packet_ins_decoded_total") < 3 {
        assert!(started.elapsed() < Duration::from_secs(10), "the drops were not audited:\n{}", agent.log_tail(30));
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(std::fs::read_to_string(&np_log).unwrap_or_default(), "", "the aggregate is pending for 60 s");
    assert_eq!(agent.stop().code(), Some(0));
    let audit = std::fs::read_to_string(&np_log).expect("np.log");
    assert!(audit.contains(" Drop ") && audit.contains(" [3 packets in "), "flushed at SIGTERM:\n{audit}");
}

#[test]
fn version_names_the_commit() {
    let head = run(Command::new("git").arg("-C").arg(repo_path("")).args(["rev-parse", "--short=12", "HEAD"]));
    let version = npagent_stdout(&["--version"]);
    assert!(version.starts_with(&format!("npagent {} (commit ", env!("CARGO_PKG_VERSION"))), "{version}");
    assert!(version.contains(head.trim()), "{version:?} does not name HEAD {}", head.trim());
}

#[test]
fn completions_for_each_shell_name_the_commands_and_options() {
    for (shell, option) in [("bash", "--audit-log"), ("zsh", "--audit-log"), ("fish", "-l audit-log")] {
        let script = npagent_stdout(&["completions", shell]);
        assert!(script.contains("run") && script.contains(option), "{shell}: {script}");
    }
    // The bash script is valid bash and registers a completion for npagent.
    let tmp = tempfile::tempdir().expect("temp dir");
    let path = tmp.path().join("npagent.bash");
    std::fs::write(&path, npagent_stdout(&["completions", "bash"])).expect("write");
    let registered =
        run(Command::new("bash").arg("-c").arg(format!("source {} && complete -p npagent", path.display())));
    assert!(registered.contains("npagent"), "{registered}");
    let out = Command::new(npagent_bin()).args(["completions", "tcsh"]).output().expect("run");
    assert_eq!(out.status.code(), Some(2), "an unknown shell is a usage error");
}

#[test]
fn man_pages_render_and_document_run_and_the_environment() {
    let roff = npagent_stdout(&["man"]);
    assert!(roff.contains(".TH npagent 1") && roff.contains(".TH npagent-run 1"), "{roff}");
    let mut groff = Command::new("groff")
        .args(["-man", "-Tascii", "-P", "-cbou", "-ww", "-rLL=400n", "-rHY=0"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("groff (Debian package groff-base)");
    std::io::Write::write_all(&mut groff.stdin.take().expect("stdin"), roff.as_bytes()).expect("write");
    let out = groff.wait_with_output().expect("groff");
    let (text, warnings) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && warnings.is_empty(), "groff: {warnings}");
    // groff justifies a filled line with extra spaces: compare words, not spacing.
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    for needle in ["npagent run", "--audit-log", "NPAGENT_AUDIT_LOG", "--log-format", "NODE_NAME", "completions"] {
        assert!(text.contains(needle), "the rendered pages lack {needle:?}:\n{text}");
    }
}

#[test]
fn staged_report_errors_exit_2_naming_the_flag_or_the_file() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let missing = tmp.path().join("nowhere/np.log");
    let missing = missing.to_str().expect("utf-8");
    for (args, culprit) in [
        (vec!["staged", "report"], "--audit-log"),
        (vec!["staged", "report", "--audit-log", missing, "--since", "soon"], "--since"),
        (vec!["staged", "report", "--audit-log", missing, "-o", "yaml"], "--output"),
        (vec!["staged", "report", "--audit-log", missing], "nowhere"),
    ] {
        let (status, stderr) = npagent_exit(&args, &[], tmp.path());
        assert_eq!(status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(culprit), "{args:?}: stderr does not name {culprit}: {stderr}");
    }
}
