//! A testbed with `npagent run` enforcing a few manifests (Namespace x logging), for the tests
//! that attack one policy with real packets: it starts the agent, waits until the manifests
//! are enforced, changes them, and sends UDP echoes to x/a.

use std::time::{Duration, Instant};

use super::agent::Agent;
use super::{write_atomic, Testbed, NAMESPACES_X_LOGGING};

/// The testbed, its agent, and the agent's audit log.
pub struct Bed {
    pub tb: Testbed,
    _agent: Agent,
    audit_log: std::path::PathBuf,
}

impl Bed {
    /// Starts the agent on `tb` with Namespace x logging and the manifests `files` (name,
    /// text); returns once `ready` holds.
    pub fn start(tb: Testbed, files: &[(&str, &str)], ready: impl Fn(&Testbed) -> bool) -> Bed {
        write_atomic(&tb.manifests_dir().join("namespaces.yaml"), NAMESPACES_X_LOGGING);
        for (name, text) in files {
            write_atomic(&tb.manifests_dir().join(name), text);
        }
        let audit_log = tb.sandbox.dir.join("np.log");
        let agent = Agent::start(&tb.sandbox, &tb.manifests_dir(), &audit_log, &["--audit-dedup-window", "200ms"]);
        let bed = Bed { tb, _agent: agent, audit_log };
        wait_for("the manifests", || ready(&bed.tb));
        bed
    }

    /// Writes (or replaces) manifest `name`.
    pub fn put(&self, name: &str, text: &str) {
        write_atomic(&self.tb.manifests_dir().join(name), text);
    }

    /// Removes manifest `name`.
    pub fn remove(&self, name: &str) {
        std::fs::remove_file(self.tb.manifests_dir().join(name)).expect("remove manifest");
    }

    /// Echoes of `count` datagrams of `size` bytes from `from`:`sport` to x/a:80.
    pub fn echoes(&self, from: &str, sport: u16, count: u32, size: u32) -> u32 {
        let a = self.tb.pod("x/a").ip;
        let (sport, count, size) = (sport.to_string(), count.to_string(), size.to_string());
        let args = ["udp-echo", "--dst", &a, "--dport", "80", "--sport", &sport, "--count", &count, "--size", &size];
        self.tb.attack(from, &args).parse().expect("a count")
    }

    /// The audit log's lines so far.
    pub fn audit_lines(&self) -> Vec<String> {
        std::fs::read_to_string(&self.audit_log).unwrap_or_default().lines().map(str::to_owned).collect()
    }
}

/// Waits up to 20 s for `check`; panics naming `what`.
pub fn wait_for(what: &str, check: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !check() {
        assert!(Instant::now() < deadline, "{what}: not within 20 s");
        std::thread::sleep(Duration::from_millis(200));
    }
}
