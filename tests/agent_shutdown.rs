//! SIGTERM while npagent waits on a switch that does not answer: it must exit within a second
//! with its audit log flushed, not when the request times out.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

mod support;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use support::agent::Agent;
use support::{sandbox::repo_path, write_atomic, Testbed};

/// Sends UDP datagrams to port 80 of `to_ip`.
const SEND_UDP_PY: &str = r#"
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for _ in range(int(sys.argv[2])):
    s.sendto(b"npagent-shutdown", (sys.argv[1], 80))
"#;

/// Stops a process with SIGSTOP; SIGCONT when dropped (a panicking test included), so the
/// sandbox can stop it.
struct Paused(u32);

impl Paused {
    fn new(pid: u32) -> Paused {
        signal(pid, "STOP");
        Paused(pid)
    }
}

impl Drop for Paused {
    fn drop(&mut self) {
        signal(self.0, "CONT");
    }
}

fn signal(pid: u32, name: &str) {
    let ok = Command::new("kill").args([&format!("-{name}"), &pid.to_string()]).status().is_ok_and(|s| s.success());
    assert!(ok, "kill -{name} {pid}");
}

fn copy_example(tb: &Testbed, name: &str) {
    let text = std::fs::read_to_string(repo_path(&format!("testbed/examples/{name}.yaml"))).expect("read example");
    write_atomic(&tb.manifests_dir().join(format!("{name}.yaml")), &text);
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

#[test]
fn sigterm_preempts_a_reconcile_the_switch_never_answers() {
    // The debug line that says a reconcile starts.
    std::env::set_var("NPA_AGENT_LOG", "info,npagent::agent=debug");
    let tb = Testbed::start();
    let sb = &tb.sandbox;
    // Logging on in namespace x; x/a isolated (only x/b may reach it, on TCP 80).
    let namespaces = tb.manifests_dir().join("namespaces.yaml");
    let logging =
        "  name: x\n  labels:\n    ns: x\n  annotations:\n    networkpolicy.antrea.io/enable-logging: \"true\"\n";
    write_atomic(&namespaces, &read(&namespaces).replacen("  name: x\n  labels:\n    ns: x\n", logging, 1));
    copy_example(&tb, "allow-xb-to-xa-tcp80");
    let logs = tempfile::Builder::new().prefix("npa-shutdown-").tempdir().expect("temp dir");
    let np_log = logs.path().join("np.log");
    // A long window: the drops below stay a pending aggregate that only the shutdown writes.
    let mut agent = Agent::start(sb, &tb.manifests_dir(), &np_log, &["--audit-dedup-window", "60s"]);

    let (xa, xc) = (tb.pod("x/a"), tb.pod("x/c"));
    let sent = tb.pod_exec("x/c", &["python3", "-c", SEND_UDP_PY, &xa.ip, "5"]);
    assert!(sent.status.success(), "{}", String::from_utf8_lossy(&sent.stderr));
    let started = Instant::now();
    while agent.metrics().count("npagent_packet_ins_decoded_total") < 5 {
        assert!(started.elapsed() < Duration::from_secs(5), "the drops were not audited:\n{}", agent.log_tail(30));
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(read(&np_log), "", "the drop aggregate is still pending");

    // The switch stops answering, then a policy change starts a reconcile that waits on it.
    let paused = Paused::new(sb.vswitchd_pid());
    copy_example(&tb, "default-deny-ingress-y");
    agent.wait_log("recompiling for", Duration::from_secs(5));
    std::thread::sleep(Duration::from_millis(200));

    let pid = agent.pid();
    let sigterm = Instant::now();
    signal(pid, "TERM");
    while agent.alive() {
        assert!(sigterm.elapsed() < Duration::from_secs(10), "npagent still runs 10 s after SIGTERM");
        std::thread::sleep(Duration::from_millis(5));
    }
    let took = sigterm.elapsed();
    drop(paused);
    eprintln!("npagent exited {took:?} after SIGTERM");
    assert!(took < Duration::from_secs(3), "npagent took {took:?} to exit after SIGTERM:\n{}", agent.log_tail(30));

    let log = read(&np_log);
    let line = log.lines().find(|l| l.contains(" Drop ")).unwrap_or_else(|| panic!("no Drop line in {log:?}"));
    assert!(line.contains(&format!(" {} ", xc.ip)) && line.contains(&format!(" {} ", xa.ip)), "{line}");
    assert!(line.contains(" [5 packets in "), "{line}");
}
