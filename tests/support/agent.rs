//! An `npagent run` process on a [`Sandbox`], its log (stdout and stderr) appended to a file:
//! started plain ([`Agent::spawn`]) or with an audit log, waiting for `/readyz` to say it is in
//! sync ([`Agent::start`]); stopped with SIGTERM (it flushes the audit log), killed on drop if
//! still running. Its admin server listens on a free port (`--admin-addr 127.0.0.1:0`), read
//! from its log ([`Agent::admin_addr`]); [`get`] asks it.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::sandbox::Sandbox;

/// What npagent logs once its first resync with the switch is committed.
pub const FIRST_SYNC: &str = "first sync complete";

/// How long the agent may take to start and install the pipeline.
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// One running `npagent run`.
pub struct Agent {
    child: Option<Child>,
    /// npagent's own log (stdout and stderr); earlier runs' lines may precede this run's.
    pub log: PathBuf,
    /// Where its admin server listens, once read from the log.
    admin_addr: OnceLock<SocketAddr>,
    /// Where this run's lines start in `log`.
    log_from: u64,
}

impl Agent {
    /// Starts `npagent run` ([`npagent_bin`]) on `sb` with manifests from `manifests` and
    /// `extra` arguments, appending its log to `log`; returns at once. The log level is
    /// `$NPA_AGENT_LOG`, `info` by default. The admin server gets a free port unless `extra`
    /// says where.
    pub fn spawn(sb: &Sandbox, manifests: &Path, log: &Path, extra: &[&str]) -> Agent {
        Agent::spawn_in(None, sb, manifests, log, extra, &[])
    }

    /// Like [`Agent::spawn`], in the network namespace of the sandbox's ovs-vswitchd, as on a
    /// node (npagent and OVS share the host's): devices OVS makes are npagent's to see. Its
    /// admin server is in that namespace too, out of this process's reach: wait for its log
    /// ([`Agent::wait_log`], [`FIRST_SYNC`]) instead.
    pub fn spawn_in_node(sb: &Sandbox, manifests: &Path, log: &Path, extra: &[&str]) -> Agent {
        Agent::spawn_in(Some(&sb.netns), sb, manifests, log, extra, &[])
    }

    /// Like [`Agent::start`], in the node's network namespace ([`Agent::spawn_in_node`]):
    /// returns once its log says its first sync is complete.
    pub fn start_in_node(sb: &Sandbox, manifests: &Path, audit_log: &Path, extra: &[&str]) -> Agent {
        let log = audit_log.with_extension("agent.log");
        let audit_arg = audit_log.to_string_lossy();
        let mut args = vec!["--audit-log", audit_arg.as_ref()];
        args.extend_from_slice(extra);
        let mut agent = Agent::spawn_in_node(sb, manifests, &log, &args);
        agent.wait_log(FIRST_SYNC, START_TIMEOUT);
        agent
    }

    /// Like [`Agent::spawn_in_node`], without the environment variables `unset` that
    /// [`super::node_env`] sets (`NPAGENT_GATEWAY_IP`: npagent is told no gateway address).
    pub fn spawn_in_node_without(sb: &Sandbox, manifests: &Path, log: &Path, extra: &[&str], unset: &[&str]) -> Agent {
        Agent::spawn_in(Some(&sb.netns), sb, manifests, log, extra, unset)
    }

    fn spawn_in(
        netns: Option<&str>,
        sb: &Sandbox,
        manifests: &Path,
        log: &Path,
        extra: &[&str],
        unset: &[&str],
    ) -> Agent {
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .unwrap_or_else(|e| panic!("open {}: {e}", log.display()));
        let err = out.try_clone().expect("clone log handle");
        // Lines of earlier runs in the same file are skipped when looking for this run's.
        let log_from = std::fs::metadata(log).map(|m| m.len()).unwrap_or(0);
        let level = std::env::var("NPA_AGENT_LOG").unwrap_or_else(|_| "info".into());
        let admin_given = extra.iter().any(|a| a.starts_with("--admin-addr") || a.starts_with("--metrics-addr"));
        let admin: &[&str] = if admin_given { &[] } else { &["--admin-addr", "127.0.0.1:0"] };
        // `ip netns exec` execs npagent: the child's pid is npagent's.
        let mut cmd = match netns {
            None => Command::new(npagent_bin()),
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns]).arg(npagent_bin());
                c
            }
        };
        super::node_env(&mut cmd);
        for var in unset {
            cmd.env_remove(var);
        }
        let child = cmd
            .args(["--log-level", &level, "run", "--ofp", &sb.ofp, "--ovsdb", &sb.ovsdb])
            .arg("--manifests")
            .arg(manifests)
            .args(admin)
            .args(extra)
            .env("NO_COLOR", "1")
            // The sandbox's own ovs-vswitchd (conntrack zone limits), never the system's.
            .env("NPAGENT_VSWITCHD_CTL", sb.dir.join("vswitchd.ctl"))
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .expect("start npagent");
        Agent { child: Some(child), log: log.to_owned(), admin_addr: OnceLock::new(), log_from }
    }

    /// Starts `npagent run` on `sb` with manifests from `manifests`, writing `audit_log`, and
    /// `extra` arguments (`--audit-format json`, ...); its log is `<audit log name>.agent.log`
    /// next to the audit log. Returns once `/readyz` answers 200: its first resync with the
    /// switch is committed (the pipeline is installed).
    pub fn start(sb: &Sandbox, manifests: &Path, audit_log: &Path, extra: &[&str]) -> Agent {
        // Next to the audit log, or in its nearest existing ancestor: creating the audit
        // log's directory is npagent's job.
        let dir = audit_log.ancestors().skip(1).find(|d| d.is_dir()).unwrap_or(Path::new("/tmp"));
        let name = audit_log.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let audit_arg = audit_log.to_string_lossy();
        let mut args = vec!["--audit-log", audit_arg.as_ref()];
        args.extend_from_slice(extra);
        let mut agent = Agent::spawn(sb, manifests, &dir.join(format!("{name}.agent.log")), &args);
        agent.wait_ready(START_TIMEOUT);
        agent
    }

    /// Where the admin server listens, from the log line that says so (waits for it).
    pub fn admin_addr(&self) -> SocketAddr {
        *self.admin_addr.get_or_init(|| {
            let started = Instant::now();
            loop {
                let text = self.log_text();
                if let Some(addr) = text.lines().find_map(parse_admin_addr) {
                    return addr;
                }
                assert!(
                    started.elapsed() < START_TIMEOUT,
                    "npagent logged no {ADMIN_LINE:?} within {START_TIMEOUT:?}:\n{text}"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    }

    /// Waits until `/readyz` answers 200; panics with the last answer and the log otherwise.
    pub fn wait_ready(&mut self, within: Duration) {
        let addr = self.admin_addr();
        let child = &mut self.child;
        if let Err(why) = poll_ready(addr, within, || child.as_mut().and_then(|c| c.try_wait().ok().flatten())) {
            panic!("{why}:\n{}", self.log_text());
        }
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(Child::id).expect("agent running")
    }

    /// Is the process still running?
    pub fn alive(&mut self) -> bool {
        self.child.as_mut().is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// This run's log so far, ANSI colours removed.
    pub fn log_text(&self) -> String {
        let text = std::fs::read(&self.log).unwrap_or_default();
        let tail = text.get(usize::try_from(self.log_from).unwrap_or(0)..).unwrap_or_default();
        strip_ansi(&String::from_utf8_lossy(tail))
    }

    /// The last `lines` lines of this run's log.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = self.log_text();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// Waits until this run's log has a line containing `needle`; returns the first such.
    pub fn wait_log(&mut self, needle: &str, within: Duration) -> String {
        let started = Instant::now();
        loop {
            let text = self.log_text();
            if let Some(l) = text.lines().find(|l| l.contains(needle)) {
                return l.to_owned();
            }
            if let Some(status) = self.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                panic!("npagent exited ({status}) before logging {needle:?}:\n{text}");
            }
            if started.elapsed() > within {
                panic!("npagent logged no {needle:?} within {within:?}:\n{text}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Fetches the metrics page.
    pub fn metrics_text(&self) -> String {
        let addr = self.admin_addr();
        let text = get_raw(addr, "/metrics").expect("GET /metrics");
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or_else(|| panic!("no HTTP head: {text}"));
        assert!(head.starts_with("HTTP/1.1 200") || head.starts_with("HTTP/1.0 200"), "metrics answered {head}");
        assert!(head.to_ascii_lowercase().contains("content-type: text/plain; version=0.0.4"), "{head}");
        body.to_owned()
    }

    /// The metrics as `name{labels}` -> value.
    pub fn metrics(&self) -> Metrics {
        Metrics::parse(&self.metrics_text())
    }

    /// Sends SIGTERM and waits (at most 20 s) for the process to exit; returns its status.
    pub fn stop(mut self) -> ExitStatus {
        match self.terminate(Duration::from_secs(20)) {
            Ok(status) => status,
            Err(e) => panic!("npagent {e}:\n{}", self.log_text()),
        }
    }

    /// Stops the agent with SIGTERM (SIGKILL after 5 s) and tells how it ended; never panics.
    pub fn stop_report(&mut self) -> String {
        if let Some(status) = self.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
            self.child = None;
            return format!("had exited: {status}");
        }
        match self.terminate(Duration::from_secs(5)) {
            Ok(status) => status.to_string(),
            Err(e) => e,
        }
    }

    /// Sends SIGTERM and waits `within` for the exit; kills the process when it does not
    /// exit by then (Err, saying so).
    fn terminate(&mut self, within: Duration) -> Result<ExitStatus, String> {
        let Some(mut child) = self.child.take() else { return Err("not running".into()) };
        let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).stderr(Stdio::null()).status();
        let started = Instant::now();
        loop {
            match child.try_wait() {
                Ok(Some(status)) => return Ok(status),
                Ok(None) if started.elapsed() < within => std::thread::sleep(Duration::from_millis(20)),
                _ => {
                    let _ = child.kill();
                    let status = child.wait().map(|s| s.to_string()).unwrap_or_default();
                    return Err(format!("killed after no exit within {within:?} of SIGTERM ({status})"));
                }
            }
        }
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
            if std::thread::panicking() {
                eprintln!("npagent log:\n{}", self.log_text());
            }
        }
    }
}

/// What npagent logs when its admin server listens: "admin server on http://ADDR/ ...".
pub const ADMIN_LINE: &str = "admin server on http://";

/// The address in an [`ADMIN_LINE`].
pub fn parse_admin_addr(line: &str) -> Option<SocketAddr> {
    line.split(ADMIN_LINE).nth(1)?.split('/').next()?.parse().ok()
}

/// Asks the admin server at `addr` for `/readyz` until it answers 200 (its first resync with
/// the switch is committed). Errs, with the last answer, when `exited` gives the process's exit
/// status first or after `within`.
pub fn poll_ready(
    addr: SocketAddr,
    within: Duration,
    mut exited: impl FnMut() -> Option<ExitStatus>,
) -> Result<(), String> {
    let started = Instant::now();
    loop {
        let last = match get(addr, "/readyz") {
            Ok((200, _)) => return Ok(()),
            Ok((status, body)) => format!("{status} {}", body.trim()),
            Err(e) => e.to_string(),
        };
        if let Some(status) = exited() {
            return Err(format!("npagent exited ({status}) before it was ready (last /readyz: {last})"));
        }
        if started.elapsed() > within {
            return Err(format!("npagent not ready within {within:?} (last /readyz: {last})"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `GET path` (HTTP/1.0, so the server closes the connection); the whole answer.
pub fn get_raw(addr: SocketAddr, path: &str) -> std::io::Result<String> {
    let mut sock = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    sock.set_read_timeout(Some(Duration::from_secs(5)))?;
    sock.write_all(format!("GET {path} HTTP/1.0\r\nHost: npagent\r\n\r\n").as_bytes())?;
    let mut text = String::new();
    sock.read_to_string(&mut text)?;
    Ok(text)
}

/// `GET path`: the status code and the body.
pub fn get(addr: SocketAddr, path: &str) -> std::io::Result<(u16, String)> {
    let text = get_raw(addr, path)?;
    let bad = || std::io::Error::other(format!("not an HTTP answer: {text:?}"));
    let (head, body) = text.split_once("\r\n\r\n").ok_or_else(bad)?;
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).ok_or_else(bad)?;
    Ok((status, body.to_owned()))
}

/// The npagent binary: the one cargo built, or `$NPA_AGENT_BIN` (another build, or a private
/// copy when several checkouts share one target directory).
pub fn npagent_bin() -> PathBuf {
    std::env::var_os("NPA_AGENT_BIN").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_npagent")))
}

/// Prometheus text, parsed: `name{labels}` -> value (comments skipped).
#[derive(Debug, Clone, Default)]
pub struct Metrics(pub BTreeMap<String, f64>);

impl Metrics {
    /// Parses the text exposition format (one `name{labels} value` sample a line).
    pub fn parse(text: &str) -> Metrics {
        let mut out = BTreeMap::new();
        for line in text.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()) {
            let (name, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("bad sample line {line:?}"));
            let value: f64 = value.parse().unwrap_or_else(|_| panic!("bad value in {line:?}"));
            out.insert(name.to_owned(), value);
        }
        Metrics(out)
    }

    /// The sample `key` (`name` or `name{labels}`); panics when missing.
    pub fn get(&self, key: &str) -> f64 {
        *self.0.get(key).unwrap_or_else(|| panic!("no metric {key} in {:#?}", self.0))
    }

    /// [`Metrics::get`] as an integer count.
    pub fn count(&self, key: &str) -> u64 {
        let v = self.get(key);
        assert!(v >= 0.0 && v.fract() == 0.0, "{key} = {v} is not a count");
        v as u64
    }

    /// Sum of the samples of `name` over all its label sets (0 when it has none).
    pub fn sum(&self, name: &str) -> u64 {
        let labelled = format!("{name}{{");
        self.0.keys().filter(|k| *k == name || k.starts_with(&labelled)).map(|k| self.count(k)).sum()
    }

    /// Sum of `npagent_flow_mods_total` over its kinds.
    pub fn flow_mods(&self) -> u64 {
        ["add", "modify", "delete"]
            .iter()
            .map(|k| self.count(&format!("npagent_flow_mods_total{{kind=\"{k}\"}}")))
            .sum()
    }
}

/// Removes ANSI escape sequences (colours) from `s`.
pub fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // CSI: ESC [ parameters final-byte
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}
