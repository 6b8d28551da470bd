//! A testbed node as a container runtime finds it: npagent serving its CNI socket in the
//! node's network namespace, writing a JSON audit log, and a CNI directory pair for the
//! runtime (`bin/`: `npagent` and Debian's host-local and loopback; `conf/`: a 1.0.0 conflist), with what
//! the runtime tests look at afterwards (the bridge's ports, the node's veths, host-local's
//! addresses, npagent's attachment records, the flows) and the probes between the testbed's
//! pods and a runtime's.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};

use super::agent::{npagent_bin, Agent, FIRST_SYNC};
use super::audit_log::json_lines;
use super::sandbox::output;
use super::testbed::{write_atomic, Port, Testbed, NAMESPACES_X_LOGGING};

/// How long the agent may take to start.
const WITHIN: Duration = Duration::from_secs(30);
/// Where Debian's containernetworking-plugins installs its plugins.
const CNI_PLUGINS: &str = "/usr/lib/cni";
/// The reference plugins a runtime needs besides npagent: host-local (npagent's IPAM here)
/// and loopback (containerd brings `lo` up with it).
const REFERENCE_PLUGINS: [&str; 2] = ["host-local", "loopback"];
/// The conflist's network name (libcni's cache files are named after it).
pub const NETWORK: &str = "npagent-runtime-test";

/// Pod x/n, labelled but without an address (the runtime's CNI call gives it one).
pub const POD_X_N: &str = "apiVersion: v1
kind: Pod
metadata: {name: n, namespace: x, labels: {pod: n}}
spec: {nodeName: testbed, containers: [{name: c, image: busybox}]}
status: {phase: Pending}
";

/// x/n admits x/b only; x/a admits x/n only: the runtime's pod as a policy's target and as
/// its peer.
pub const POLICIES: &str = "apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: n-from-b, namespace: x}
spec:
  podSelector: {matchLabels: {pod: n}}
  ingress: [{from: [{podSelector: {matchLabels: {pod: b}}}]}]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: a-from-n, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  ingress: [{from: [{podSelector: {matchLabels: {pod: n}}}]}]
";

/// The testbed, the agent and the runtime's CNI directories.
pub struct CniNode {
    pub tb: Testbed,
    agent: Option<Agent>,
    /// The agent's CNI socket.
    pub socket: PathBuf,
    /// npagent's attachment records (`--cni-state-dir`).
    pub state_dir: PathBuf,
    /// host-local's `dataDir`.
    pub ipam_dir: PathBuf,
    /// The runtime's CNI plugin directory.
    pub cni_bin: PathBuf,
    /// The runtime's CNI configuration directory.
    pub cni_conf: PathBuf,
    /// The JSON audit log.
    pub np_log: PathBuf,
}

impl CniNode {
    /// A testbed with audit logging on in namespace x, Pod x/n and [`POLICIES`] in its
    /// manifests, the agent started, and the CNI directories with a conflist handing out
    /// 10.10.50.1-10.10.50.200.
    pub fn start() -> CniNode {
        let tb = Testbed::start();
        let manifests = tb.manifests_dir();
        write_atomic(&manifests.join("namespaces.yaml"), NAMESPACES_X_LOGGING);
        write_atomic(&manifests.join("pod-x-n.yaml"), POD_X_N);
        write_atomic(&manifests.join("policies.yaml"), POLICIES);
        let dir = tb.sandbox.dir.join("cni");
        let mut node = CniNode {
            socket: dir.join("npagent.sock"),
            state_dir: dir.join("state"),
            ipam_dir: dir.join("ipam"),
            cni_bin: dir.join("bin"),
            cni_conf: dir.join("conf"),
            np_log: dir.join("np.log"),
            tb,
            agent: None,
        };
        std::fs::create_dir_all(&node.cni_bin).expect("create the CNI bin dir");
        std::fs::create_dir_all(&node.cni_conf).expect("create the CNI conf dir");
        std::os::unix::fs::symlink(npagent_bin(), node.cni_bin.join("npagent")).expect("link npagent");
        for plugin in REFERENCE_PLUGINS {
            std::os::unix::fs::symlink(Path::new(CNI_PLUGINS).join(plugin), node.cni_bin.join(plugin))
                .expect("link a plugin");
        }
        node.write_conflist("10.10.50.1", "10.10.50.200");
        node.start_agent();
        node
    }

    /// Writes the conflist (cniVersion 1.0.0, what libcni before 1.2 accepts) handing out
    /// `first`..=`last` of the testbed's pod subnet, by rename as an operator would.
    fn write_conflist(&self, first: &str, last: &str) {
        let conf = json!({
            "cniVersion": "1.0.0",
            "name": NETWORK,
            "plugins": [{
                "type": "npagent",
                "socket": self.socket,
                "ipam": {"type": "host-local", "dataDir": self.ipam_dir,
                         "ranges": [[{"subnet": "10.10.0.0/16", "rangeStart": first, "rangeEnd": last,
                                      "gateway": "10.10.0.254"}]]},
            }],
        });
        write_atomic(
            &self.cni_conf.join("10-npagent.conflist"),
            &serde_json::to_string_pretty(&conf).unwrap_or_default(),
        );
    }

    /// Starts `npagent run` serving the CNI socket; returns after its first sync.
    pub fn start_agent(&mut self) {
        let log = self.tb.sandbox.dir.join("npagent.log");
        let (socket, state, np_log) = (
            self.socket.display().to_string(),
            self.state_dir.display().to_string(),
            self.np_log.display().to_string(),
        );
        let args = [
            "--cni-socket",
            socket.as_str(),
            "--cni-state-dir",
            state.as_str(),
            "--audit-log",
            np_log.as_str(),
            "--audit-format",
            "json",
        ];
        let mut agent = Agent::spawn_in_node(&self.tb.sandbox, &self.tb.manifests_dir(), &log, &args);
        agent.wait_log(FIRST_SYNC, WITHIN);
        self.agent = Some(agent);
    }

    /// Stops the agent (SIGTERM: it flushes the audit log).
    pub fn stop_agent(&mut self) {
        if let Some(agent) = self.agent.take() {
            assert!(agent.stop().success(), "npagent did not exit cleanly");
        }
    }

    /// The running agent.
    pub fn agent(&mut self) -> &mut Agent {
        self.agent.as_mut().expect("the agent runs")
    }

    /// The node's network namespace (where the runtimes run).
    pub fn netns(&self) -> &str {
        &self.tb.sandbox.netns
    }

    /// The bridge's ports, sorted.
    pub fn ports(&self) -> Vec<String> {
        let mut ports: Vec<String> =
            self.tb.sandbox.vsctl(&["list-ports", "br-int"]).lines().map(str::to_owned).collect();
        ports.sort();
        ports
    }

    /// The node's veths (not the testbed's own, which it names `<ns>-<pod>`), sorted.
    pub fn veths(&self) -> Vec<String> {
        let testbed: Vec<String> = self.tb.pods().iter().map(|p| p.iface.clone()).collect();
        let out = output(Command::new("ip").args(["-n", self.netns(), "-o", "link", "show", "type", "veth"]));
        let mut veths: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split(": ").nth(1))
            .map(|n| n.split('@').next().unwrap_or(n).to_string())
            .filter(|n| !testbed.contains(n))
            .collect();
        veths.sort();
        veths
    }

    /// The addresses host-local holds.
    pub fn allocated(&self) -> Vec<String> {
        names_in(&self.ipam_dir.join(NETWORK)).into_iter().filter(|n| n.starts_with("10.")).collect()
    }

    /// npagent's attachment records.
    pub fn records(&self) -> Vec<String> {
        names_in(&self.state_dir)
    }

    /// The flows of every table, sorted.
    pub fn flows(&self) -> Vec<String> {
        self.tb.sandbox.dump_flows()
    }

    /// The agent's view of `ip`: flows naming it.
    pub fn flows_naming(&self, ip: &str) -> Vec<String> {
        let pattern = format!("={ip},");
        let end = format!("={ip}");
        self.flows().into_iter().filter(|f| f.contains(&pattern) || f.split(' ').any(|w| w.ends_with(&end))).collect()
    }

    /// Probes `ip` (a runtime's pod, named `to`) on TCP 80, TCP 81 and UDP 80 from testbed
    /// pod `from`, once each, with real packets.
    pub fn probe_to(&self, from: &str, to: &str, ip: &str) -> BTreeMap<Port, bool> {
        let netns = self.tb.pod(from).netns;
        self.probe_from_netns(&netns, from, to, ip)
    }

    /// Probes `ip` (named `to`) on the three ports from network namespace `netns` (named
    /// `from`).
    pub fn probe_from_netns(&self, netns: &str, from: &str, to: &str, ip: &str) -> BTreeMap<Port, bool> {
        let got = self.tb.probe_from_netns(netns, from, &[(to.to_string(), ip.to_string())]);
        got.into_iter().map(|((_, port), ok)| (port, ok)).collect()
    }

    /// The audit log's lines so far.
    pub fn audit_lines(&self) -> Vec<Value> {
        json_lines(&self.np_log)
    }
}

impl Drop for CniNode {
    fn drop(&mut self) {
        if let Some(mut agent) = self.agent.take() {
            agent.stop_report();
        }
    }
}

/// What the three probes should say: every port `reached` or none.
pub fn all_ports(reached: bool) -> BTreeMap<Port, bool> {
    Port::ALL.into_iter().map(|p| (p, reached)).collect()
}

/// The names in `dir`, sorted (none when it does not exist).
fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    names.sort();
    names
}

/// A container runtime the tests drive on a [`CniNode`] (podman, containerd).
pub trait Runtime: Sized {
    /// What messages call it.
    const NAME: &'static str;
    /// Why it cannot run on this machine at all, if so.
    fn unavailable() -> Option<String>;
    /// Starts a private instance of it for `node`.
    fn start(node: &CniNode) -> Result<Self, String>;
    /// Its version, as it reports it.
    fn version(&self) -> String;
}

/// The node and runtime `R` on it, or None (printing why) when `R` cannot run on this machine
/// at all.
pub fn node_with<R: Runtime>() -> Option<(CniNode, R)> {
    if let Some(why) = R::unavailable() {
        eprintln!("{} cannot run on this machine: {why}; not tested", R::NAME);
        return None;
    }
    let node = CniNode::start();
    let runtime = R::start(&node).unwrap_or_else(|e| panic!("{} did not start: {e}", R::NAME));
    eprintln!("runtime: {}", runtime.version());
    Some((node, runtime))
}
