//! A private ovsdb-server + ovs-vswitchd (userspace datapath) with bridge `br-int`, in a
//! network namespace and temporary run directory of its own, stopped by pid on drop.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Path of a file in the repository (the root package's manifest dir).
pub fn repo_path(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// Runs a command, panicking with its stderr when it cannot start or fails.
pub fn run(cmd: &mut Command) -> String {
    let out = output(cmd);
    if !out.status.success() {
        panic!(
            "{:?} failed ({}):\n{}{}",
            cmd,
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs a command and returns its output whatever the exit status.
pub fn output(cmd: &mut Command) -> Output {
    cmd.output().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"))
}

/// One running Open vSwitch sandbox (see `scripts/ovs-sandbox`).
pub struct Sandbox {
    /// The run directory: sockets, pidfiles, database and logs.
    pub dir: PathBuf,
    /// OpenFlow endpoint of br-int for a controller: `unix:<dir>/br-int.mgmt`.
    pub ofp: String,
    /// OVSDB endpoint: `unix:<dir>/db.sock`.
    pub ovsdb: String,
    /// The network namespace ovs-vswitchd (and the bridge's ports) live in.
    pub netns: String,
    tmp: Option<tempfile::TempDir>,
}

impl Sandbox {
    /// Starts a sandbox in a fresh temporary directory. Safe to call from many tests and
    /// test binaries at once.
    pub fn start() -> Sandbox {
        let tmp = tempfile::Builder::new().prefix("npa-sb-").tempdir().expect("create sandbox temp dir");
        let mut sb = Sandbox::start_in(tmp.path());
        sb.tmp = Some(tmp);
        sb
    }

    /// Starts a sandbox in `dir` (created if missing, left in place on drop).
    pub fn start_in(dir: &Path) -> Sandbox {
        let out = run(Command::new("bash").arg(repo_path("scripts/ovs-sandbox")).arg("up").arg(dir));
        let var = |key: &str| -> String {
            out.lines()
                .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
                .map(|v| v.trim_matches('"').to_owned())
                .unwrap_or_else(|| panic!("ovs-sandbox up printed no {key}:\n{out}"))
        };
        Sandbox {
            dir: PathBuf::from(var("RUNDIR")),
            ofp: var("OFP"),
            ovsdb: var("OVSDB"),
            netns: var("NETNS"),
            tmp: None,
        }
    }

    fn script(&self, verb: &str) -> Command {
        let mut cmd = Command::new("bash");
        cmd.arg(repo_path("scripts/ovs-sandbox")).arg(verb).arg(&self.dir);
        cmd
    }

    /// `ovs-ofctl -O OpenFlow15` against br-int. Leading `--options` go before the command,
    /// the bridge goes right after it: `ofctl(&["--bundle", "add-flows", "-"])` works as does
    /// `ofctl(&["add-flow", "priority=0,actions=drop"])`. Panics on failure.
    pub fn ofctl(&self, args: &[&str]) -> String {
        run(&mut self.ofctl_cmd(args))
    }

    /// Like [`Sandbox::ofctl`] but returns `Err(stderr)` on failure instead of panicking.
    pub fn try_ofctl(&self, args: &[&str]) -> Result<String, String> {
        let out = output(&mut self.ofctl_cmd(args));
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }

    /// `ovs-ofctl` with `stdin` fed to it (for `add-flows - ` and friends).
    pub fn ofctl_stdin(&self, args: &[&str], stdin: &str) -> String {
        use std::io::Write;
        use std::process::Stdio;
        let mut cmd = self.ofctl_cmd(args);
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
        child.stdin.take().expect("piped stdin").write_all(stdin.as_bytes()).expect("write ovs-ofctl stdin");
        let out = child.wait_with_output().expect("wait for ovs-ofctl");
        if !out.status.success() {
            panic!("{cmd:?} failed: {}", String::from_utf8_lossy(&out.stderr));
        }
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn ofctl_cmd(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("ovs-ofctl");
        cmd.args(["-O", "OpenFlow15"]);
        let n_opts = args.iter().take_while(|a| a.starts_with("--")).count();
        let (opts, rest) = args.split_at(n_opts);
        cmd.args(opts);
        if let Some((verb, tail)) = rest.split_first() {
            cmd.arg(verb).arg(&self.ofp).args(tail);
        }
        cmd
    }

    /// `ovs-vsctl --db=<ovsdb>`; panics on failure.
    pub fn vsctl(&self, args: &[&str]) -> String {
        run(Command::new("ovs-vsctl").arg(format!("--db={}", self.ovsdb)).arg("--timeout=20").args(args))
    }

    /// `ovs-appctl -t <dir>/vswitchd.ctl`; panics on failure.
    pub fn appctl(&self, args: &[&str]) -> String {
        run(Command::new("ovs-appctl").arg("-t").arg(self.dir.join("vswitchd.ctl")).args(args))
    }

    /// Runs a command inside the sandbox's network namespace.
    pub fn netns_exec(&self, args: &[&str]) -> String {
        run(Command::new("ip").args(["netns", "exec", &self.netns]).args(args))
    }

    /// Flushes the datapath's cached megaflows and waits for revalidation, so traffic right
    /// after a flow change sees the new flow table.
    pub fn flush_datapath(&self) {
        self.appctl(&["revalidator/purge"]);
        self.appctl(&["revalidator/wait"]);
    }

    /// Forgets every connection the switch's conntrack tracks (all zones): the next packet
    /// of any flow starts a new connection.
    pub fn flush_conntrack(&self) {
        self.appctl(&["dpctl/flush-conntrack"]);
    }

    /// Stops ovs-vswitchd (SIGTERM) and starts it again on the same database: the flow
    /// tables are empty afterwards, the ports come back.
    pub fn restart_vswitchd(&self) {
        run(&mut self.script("restart-vswitchd"));
    }

    /// Stops ovs-vswitchd with `signal` (`"TERM"`, `"KILL"`, ...) and leaves it stopped.
    pub fn stop_vswitchd(&self, signal: &str) {
        run(self.script("stop-vswitchd").arg(signal));
    }

    /// Starts ovs-vswitchd again after [`Sandbox::stop_vswitchd`]; returns when br-int answers.
    pub fn start_vswitchd(&self) {
        run(&mut self.script("start-vswitchd"));
    }

    /// The pid of the running ovs-vswitchd.
    pub fn vswitchd_pid(&self) -> u32 {
        let text = std::fs::read_to_string(self.dir.join("vswitchd.pid")).expect("vswitchd.pid");
        text.trim().parse().expect("pid in vswitchd.pid")
    }

    /// `dump-flows --no-stats --names` of every table: one flow per line, header removed,
    /// leading spaces trimmed, sorted.
    pub fn dump_flows(&self) -> Vec<String> {
        let text = self.ofctl(&["--no-stats", "--names", "dump-flows"]);
        let mut flows: Vec<String> = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.contains("_FLOW reply"))
            .map(str::to_owned)
            .collect();
        flows.sort();
        flows
    }

    /// The OpenFlow port number of interface `name` on br-int.
    pub fn ofport(&self, name: &str) -> u32 {
        let out = self.vsctl(&["get", "Interface", name, "ofport"]);
        out.trim().parse().unwrap_or_else(|_| panic!("ofport of {name}: {out}"))
    }

    /// The tail of ovs-vswitchd's log, for failure messages.
    pub fn vswitchd_log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(self.dir.join("vswitchd.log")).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let out = output(&mut self.script("down"));
        if !out.status.success() {
            eprintln!("ovs-sandbox down {} failed: {}", self.dir.display(), String::from_utf8_lossy(&out.stderr));
        }
        // keep the logs of a failed test (or on request) for a look afterwards
        if std::thread::panicking() || std::env::var_os("NPA_KEEP_SANDBOX").is_some() {
            if let Some(tmp) = self.tmp.take() {
                eprintln!("sandbox run dir kept: {}", tmp.keep().display());
            }
        }
    }
}
