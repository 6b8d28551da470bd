//! Two nodes of a cluster (`testbed/cluster`): each an OVS sandbox with its pods, joined by
//! an underlay, with the internet host behind n1; one npagent per node, started as a
//! DaemonSet would (`--node`, the same manifests, no gateway address given: each takes its
//! own from its Node's podCIDR and creates its gateway).

use super::agent::Agent;
use super::sandbox::{output, repo_path, run};
use super::{Hosts, Sandbox};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// A node of the cluster.
pub struct Node {
    /// `n1`, `n2`.
    pub name: String,
    /// Its InternalIP on the underlay.
    pub internal_ip: String,
    /// Its podCIDR.
    pub pod_cidr: String,
    pub sandbox: Sandbox,
}

impl Node {
    /// `ip ARGS` in the node's network namespace; its stdout.
    pub fn ip(&self, args: &[&str]) -> String {
        run(Command::new("ip").args(["-n", &self.sandbox.netns]).args(args))
    }

    /// The node's routes to `destination` in its main table, as `ip route` prints them.
    pub fn routes_to(&self, destination: &str) -> String {
        self.ip(&["route", "show", "exact", destination]).trim().to_string()
    }
}

/// The cluster: its nodes, its hosts (every node's pods and the internet host) and its
/// manifests directory.
pub struct Cluster {
    pub nodes: Vec<Node>,
    pub hosts: Hosts,
    dir: PathBuf,
    _tmp: Option<tempfile::TempDir>,
}

impl std::ops::Deref for Cluster {
    type Target = Hosts;
    fn deref(&self) -> &Hosts {
        &self.hosts
    }
}

impl Cluster {
    /// Two fresh sandboxes and the cluster on them.
    pub fn start() -> Cluster {
        let tmp = tempfile::Builder::new().prefix("npa-cluster-").tempdir().expect("create the cluster's temp dir");
        let dir = tmp.path().to_path_buf();
        let planned = run(Command::new("bash").arg(repo_path("testbed/cluster")).arg("nodes"));
        let mut nodes = Vec::new();
        for line in planned.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            let [name, cidr, ip, ..] = f.as_slice() else { panic!("bad node line: {line}") };
            let sandbox = Sandbox::start_in(&dir.join(name));
            nodes.push(Node {
                name: name.to_string(),
                internal_ip: ip.to_string(),
                pod_cidr: cidr.to_string(),
                sandbox,
            });
        }
        run(Command::new("bash").arg(repo_path("testbed/cluster")).arg("up").arg(&dir));
        Cluster { nodes, hosts: Hosts { state: dir.join("testbed") }, dir, _tmp: Some(tmp) }
    }

    /// The manifests both agents read: Nodes, Namespaces, Pods (and what tests add).
    pub fn manifests_dir(&self) -> PathBuf {
        self.dir.join("manifests")
    }

    /// Node `name`.
    pub fn node(&self, name: &str) -> &Node {
        self.nodes.iter().find(|n| n.name == name).unwrap_or_else(|| panic!("no node {name}"))
    }

    /// The node pod or host `id` runs on (the internet host: none).
    pub fn node_of(&self, id: &str) -> Option<&Node> {
        let netns = self.host(id).netns;
        self.nodes.iter().find(|n| netns.starts_with(&format!("{}-", n.sandbox.netns)) && !netns.ends_with("-inet"))
    }

    /// Starts npagent on node `name` as a DaemonSet's would run, writing `audit_log`, with
    /// `extra` arguments; returns once its first sync is done.
    pub fn start_agent(&self, name: &str, audit_log: &Path, extra: &[&str]) -> Agent {
        let node = self.node(name);
        let log = audit_log.with_extension("agent.log");
        let audit = audit_log.to_string_lossy();
        let mut args = vec!["--node", name, "--audit-log", audit.as_ref()];
        args.extend_from_slice(extra);
        let mut agent = Agent::spawn_in_node_without(
            &node.sandbox,
            &self.manifests_dir(),
            &log,
            &args,
            &["NPAGENT_GATEWAY_IP", "NPAGENT_GATEWAY"],
        );
        agent.wait_log(super::agent::FIRST_SYNC, Duration::from_secs(30));
        agent
    }

    /// What the internet host's listener saw: one `PROTO/PORT PEER-IP` line a connection.
    pub fn internet_peers(&self) -> String {
        std::fs::read_to_string(self.hosts.state.join("inet.log")).unwrap_or_default()
    }

    /// What pod `id`'s listener saw: one `PROTO/PORT PEER-IP` line a connection.
    pub fn peers_of(&self, id: &str) -> String {
        let pod = self.pod(id);
        let node = self.node_of(id).unwrap_or_else(|| panic!("{id} runs on no node"));
        let log = node.sandbox.dir.join("testbed").join(format!("{}-{}.log", pod.namespace, pod.name));
        std::fs::read_to_string(&log).unwrap_or_else(|e| panic!("{}: {e}", log.display()))
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let out = output(Command::new("bash").arg(repo_path("testbed/cluster")).arg("down").arg(&self.dir));
        if !out.status.success() {
            eprintln!("testbed/cluster down failed: {}", String::from_utf8_lossy(&out.stderr));
        }
        // The sandboxes stop when the nodes drop, after this.
        if std::thread::panicking() || std::env::var_os("NPA_KEEP_SANDBOX").is_some() {
            if let Some(tmp) = self._tmp.take() {
                eprintln!("cluster dir kept: {}", tmp.keep().display());
            }
        }
    }
}
