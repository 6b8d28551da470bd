//! The admin server's metrics page against hostile or unlucky clients: many idle connections (slowloris)
//! and accept errors (EMFILE). `npagent run` is started as a child process with switch and
//! OVSDB endpoints that do not exist: it keeps retrying them, and serves its metrics meanwhile.
//! File descriptors are limited with util-linux's `prlimit`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

mod support;

use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use npagent::admin::server::MAX_CONNECTIONS;
use support::agent::{npagent_bin, parse_admin_addr, Metrics};

/// An `npagent run` with nothing to talk to but its metrics clients; killed on drop.
struct Standalone {
    child: Child,
    log: PathBuf,
    addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Standalone {
    /// Starts npagent, under `prlimit --nofile=N` when `nofile` is given, and waits for its
    /// admin server.
    fn start(nofile: Option<u32>) -> Standalone {
        let dir = tempfile::Builder::new().prefix("npa-metrics-").tempdir().expect("temp dir");
        let manifests = dir.path().join("manifests");
        std::fs::create_dir(&manifests).expect("manifests dir");
        let log = dir.path().join("agent.log");
        let out = std::fs::File::create(&log).expect("agent log");
        let err = out.try_clone().expect("clone log handle");
        let mut cmd = match nofile {
            Some(n) => {
                let mut c = Command::new("prlimit");
                c.arg(format!("--nofile={n}:{n}")).arg("--").arg(npagent_bin());
                c
            }
            None => Command::new(npagent_bin()),
        };
        let none = |name: &str| format!("unix:{}", dir.path().join(name).display());
        let child = cmd
            .args(["--log-level", "info", "run", "--ofp", &none("none.mgmt"), "--ovsdb", &none("none.sock")])
            .arg("--manifests")
            .arg(&manifests)
            .arg("--audit-log")
            .arg(dir.path().join("np.log"))
            .args(["--admin-addr", "127.0.0.1:0"])
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .expect("start npagent");
        let mut agent = Standalone { child, log, addr: "0.0.0.0:0".parse().expect("address"), _dir: dir };
        agent.addr = agent.wait_metrics_addr();
        agent
    }

    fn log_text(&self) -> String {
        support::agent::strip_ansi(&std::fs::read_to_string(&self.log).unwrap_or_default())
    }

    fn wait_metrics_addr(&mut self) -> SocketAddr {
        let started = Instant::now();
        loop {
            let text = self.log_text();
            if let Some(addr) = text.lines().find_map(parse_admin_addr) {
                return addr;
            }
            assert!(self.child.try_wait().ok().flatten().is_none(), "npagent exited:\n{text}");
            assert!(started.elapsed() < Duration::from_secs(20), "no admin server within 20 s:\n{text}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sockets the process holds open.
    fn sockets(&self) -> usize {
        let fds = std::fs::read_dir(format!("/proc/{}/fd", self.child.id())).expect("list the agent's fds");
        fds.filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
            .filter(|target| target.to_string_lossy().starts_with("socket:"))
            .count()
    }

    /// Scrapes until the page is served (status 200) or `within` has passed; returns the
    /// metrics and how long it took.
    fn scrape_within(&mut self, within: Duration) -> (Metrics, Duration) {
        let started = Instant::now();
        let mut last = String::new();
        while started.elapsed() < within {
            match scrape(self.addr) {
                Ok(text) if text.starts_with("HTTP/1.1 200") || text.starts_with("HTTP/1.0 200") => {
                    let body = text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or_default();
                    return (Metrics::parse(body), started.elapsed());
                }
                Ok(text) => last = text.lines().next().unwrap_or_default().to_owned(),
                Err(e) => last = e.to_string(),
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let exited = self.child.try_wait().ok().flatten();
        panic!("no scrape served within {within:?} (last answer: {last}; exited: {exited:?}):\n{}", self.log_text());
    }
}

impl Drop for Standalone {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One GET /metrics; the whole answer.
fn scrape(addr: SocketAddr) -> std::io::Result<String> {
    support::agent::get_raw(addr, "/metrics")
}

/// Opens `n` connections that never send a byte.
fn idle_connections(addr: SocketAddr, n: usize) -> Vec<TcpStream> {
    (0..n).filter_map(|_| TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok()).collect()
}

#[test]
fn idle_connections_are_bounded_and_cannot_starve_a_scrape() {
    let mut agent = Standalone::start(None);
    let baseline = agent.sockets();
    let idle = idle_connections(agent.addr, MAX_CONNECTIONS + 100);
    assert!(idle.len() > MAX_CONNECTIONS + 50, "the client opened only {} connections", idle.len());
    std::thread::sleep(Duration::from_millis(500));
    let held = agent.sockets().saturating_sub(baseline);
    assert!(held <= MAX_CONNECTIONS, "npagent holds {held} idle metrics connections, more than {MAX_CONNECTIONS}");
    // A scrape takes the slot of the connection idle the longest; each idle one past the
    // slots did the same to an older one, counted.
    let (metrics, took) = agent.scrape_within(Duration::from_secs(6));
    eprintln!("held {held} of {} idle connections; scrape served after {took:?}", idle.len());
    let evicted = metrics.count("npagent_metrics_connections_evicted_total");
    assert!(evicted > (idle.len() - MAX_CONNECTIONS) as u64, "{evicted} evicted connections counted");
    assert_eq!(metrics.count("npagent_metrics_connections_refused_total"), 0, "idle connections are evicted");
    drop(idle);
}

#[test]
fn the_endpoint_survives_running_out_of_file_descriptors() {
    let mut agent = Standalone::start(Some(48));
    // More connections than npagent has file descriptors: accepts fail with EMFILE.
    let idle = idle_connections(agent.addr, 100);
    std::thread::sleep(Duration::from_millis(500));
    drop(idle);
    let (metrics, took) = agent.scrape_within(Duration::from_secs(6));
    let errors = metrics.count("npagent_metrics_accept_errors_total");
    eprintln!("{errors} accept errors; scrape served {took:?} after the idle connections closed");
    assert!(errors > 0, "the test did not make accept fail:\n{}", agent.log_text());
    assert!(agent.log_text().contains("accept failed"), "the failure is reported:\n{}", agent.log_text());
    assert!(agent.child.try_wait().ok().flatten().is_none(), "npagent still runs");
}

/// Every meter's shed count is served from the start, each under its own `meter` label (the
/// staged verdicts' meter apart from the pods' and the security events'), and the staged
/// verdicts' family is described before any staged line exists.
#[test]
fn the_page_names_each_meters_sheds_and_describes_the_staged_verdicts() {
    let mut agent = Standalone::start(None);
    let (metrics, _) = agent.scrape_within(Duration::from_secs(6));
    for meter in ["allow", "drop", "security", "staged"] {
        assert_eq!(metrics.count(&format!("npagent_audit_shed_by_meter_total{{meter=\"{meter}\"}}")), 0, "{meter}");
    }
    assert_eq!(metrics.sum("npagent_audit_shed_by_meter_total"), 0);
    assert_eq!(metrics.sum("npagent_staged_verdicts_total"), 0, "no staged line yet: no series");
    let text = scrape(agent.addr).expect("GET /metrics");
    assert!(text.contains("# TYPE npagent_staged_verdicts_total counter\n"), "{text}");
    let help = text.lines().find(|l| l.starts_with("# HELP npagent_staged_verdicts_total ")).expect("its help");
    assert!(help.contains("per staged policy"), "the help says what bounds it: {help}");
}
