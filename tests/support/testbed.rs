//! The nine pods of the upstream netpol e2e model (namespaces x, y, z; pods a, b, c) on a
//! [`Sandbox`], optionally the outside hosts (`outside/h1`, `outside/h2`: network namespaces
//! behind ports of the node's own, see `testbed/testbed`), and reachability matrices probed
//! with real packets (`testbed/probe.py`).

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use super::sandbox::{repo_path, run, Sandbox};

/// A probed service: every testbed pod listens on all three.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Port {
    /// TCP 80 (container port `serve-80-tcp`).
    Tcp80,
    /// TCP 81 (container port `serve-81-tcp`).
    Tcp81,
    /// UDP 80 (container port `serve-80-udp`).
    Udp80,
}

impl Port {
    /// The three ports, in the prober's order.
    pub const ALL: [Port; 3] = [Port::Tcp80, Port::Tcp81, Port::Udp80];

    /// `tcp/80`, `tcp/81`, `udp/80`: the prober's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Port::Tcp80 => "tcp/80",
            Port::Tcp81 => "tcp/81",
            Port::Udp80 => "udp/80",
        }
    }

    /// Parses the prober's spelling.
    pub fn parse(s: &str) -> Option<Port> {
        Port::ALL.into_iter().find(|p| p.as_str() == s)
    }
}

impl fmt::Display for Port {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The answer of a listener [`Testbed::spawn_attack`] started, once it ends.
pub fn finish(child: std::process::Child) -> String {
    let out = child.wait_with_output().expect("wait for attack.py");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The count a counting listener (`sniff`, `udp-listen`) printed.
pub fn finish_count(child: std::process::Child) -> u32 {
    let answer = finish(child);
    answer.parse().unwrap_or_else(|_| panic!("not a count: {answer:?}"))
}

/// The testbed's Namespaces (as `testbed/manifests/namespaces.yaml`), with audit logging on
/// in `x`.
pub const NAMESPACES_X_LOGGING: &str = "apiVersion: v1
kind: Namespace
metadata:
  name: x
  labels: {ns: x}
  annotations: {networkpolicy.antrea.io/enable-logging: \"true\"}
---
apiVersion: v1
kind: Namespace
metadata: {name: y, labels: {ns: y}}
---
apiVersion: v1
kind: Namespace
metadata: {name: z, labels: {ns: z}}
";

/// x/a accepts only x/b (every port).
pub const A_FROM_B: &str = "apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: a-from-b, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  ingress:
  - from: [{podSelector: {matchLabels: {pod: b}}}]
";

/// Panics unless `check` holds within three tries (a lost SYN or datagram is not a verdict).
pub fn eventually(what: &str, check: impl Fn() -> bool) {
    for _ in 0..3 {
        if check() {
            return;
        }
    }
    panic!("{what}: not after 3 tries");
}

/// The testbed node's gateway address (`gw0` in the sandbox's network namespace).
pub const GATEWAY_IP: &str = "10.10.0.254";
/// The Service range of the testbed's ClusterIPs (pod 10.10.n.m has Service 10.96.n.m).
pub const SERVICE_CIDR: &str = "10.96.0.0/12";

/// Tells an `npagent` command about the testbed's node (`--gateway-ip`, `--service-cidr`,
/// through their environment variables). It creates no gateway (`--gateway ''`): npagent
/// adopts the testbed's `gw0`, and a bare sandbox stays without one unless a test asks
/// (`--gateway NAME` on the command line wins).
pub fn node_env(cmd: &mut std::process::Command) -> &mut std::process::Command {
    cmd.env("NPAGENT_GATEWAY_IP", GATEWAY_IP).env("NPAGENT_SERVICE_CIDR", SERVICE_CIDR).env("NPAGENT_GATEWAY", "")
}

/// The ClusterIP of the Service of pod address `ip` (10.10.n.m -> 10.96.n.m).
pub fn cluster_ip(ip: &str) -> String {
    format!("10.96.{}", ip.strip_prefix("10.10.").unwrap_or_else(|| panic!("not a testbed pod address: {ip}")))
}

/// One testbed pod, as `testbed/testbed` created it (a line of its pods.tsv), or an outside
/// host (a line of outside.tsv: namespace `outside`, routed by the node, not on br-int
/// (ofport 0), no Pod manifest).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pod {
    /// Kubernetes namespace (`x`).
    pub namespace: String,
    /// Pod name (`a`).
    pub name: String,
    /// IPv4 address without prefix length (`10.10.1.11`).
    pub ip: String,
    /// MAC of the pod's eth0.
    pub mac: String,
    /// OpenFlow port of its veth on br-int (0 for an outside host).
    pub ofport: u32,
    /// The pod's network namespace.
    pub netns: String,
    /// The bridge-side interface name (in the sandbox's netns).
    pub iface: String,
}

impl Pod {
    /// `ns/name`.
    pub fn id(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// Pods on an OVS sandbox with listeners on TCP 80, TCP 81 and UDP 80. Dropping it stops the
/// sandbox, which removes the pods too.
pub struct Testbed {
    /// The OVS underneath.
    pub sandbox: Sandbox,
    /// Its hosts (`<sandbox dir>/testbed`: pods.tsv, listener pidfiles and logs, manifests/).
    pub hosts: Hosts,
}

impl Testbed {
    /// A fresh sandbox with the nine standard pods (x/a = 10.10.1.11 ... z/c = 10.10.3.13,
    /// ofports 1..=9 in that order).
    pub fn start() -> Testbed {
        Testbed::on(Sandbox::start())
    }

    /// The nine standard pods on an existing sandbox.
    pub fn on(sandbox: Sandbox) -> Testbed {
        Testbed::up(sandbox, &[])
    }

    /// A fresh sandbox with the pods of the upstream ClusterNetworkPolicy conformance base
    /// (`testbed/testbed up --layout conformance`: eight pods in four of the five
    /// `network-policy-conformance-*` namespaces, listening on TCP 80 and 8080 and UDP 53 and
    /// 5353; their manifests are `testbed/conformance/manifests`). Probe them with
    /// [`Hosts::probe_ports`].
    pub fn start_conformance() -> Testbed {
        Testbed::up(Sandbox::start(), &["--layout", "conformance"])
    }

    /// A fresh sandbox with the nine standard pods and the outside hosts
    /// ([`Testbed::outside_hosts`]).
    pub fn start_with_outside() -> Testbed {
        Testbed::up(Sandbox::start(), &["--outside"])
    }

    /// A fresh sandbox with the nine standard pods but no gateway port on the bridge: the
    /// node's namespace forwards, its pods route through 10.10.0.254, but nothing holds that
    /// address until a gateway is made (then [`Testbed::tune_gateway`]).
    pub fn start_without_gateway() -> Testbed {
        Testbed::up(Sandbox::start(), &["--no-gateway"])
    }

    /// Gives gateway device `name` (made by someone else than the testbed) the node's
    /// settings the testbed gives `gw0`: proxy ARP, no redirects. Its checksum offload is
    /// left as its maker left it.
    pub fn tune_gateway(&self, name: &str) {
        run(Command::new("bash")
            .arg(repo_path("testbed/testbed"))
            .arg("tune-gateway")
            .arg(&self.sandbox.dir)
            .arg(name));
    }

    fn up(sandbox: Sandbox, options: &[&str]) -> Testbed {
        run(Command::new("bash").arg(repo_path("testbed/testbed")).arg("up").arg(&sandbox.dir).args(options));
        let state = sandbox.dir.join("testbed");
        Testbed { sandbox, hosts: Hosts { state } }
    }

    /// The outside hosts `testbed/testbed` creates (`--outside`): id (`outside/h1`) and IPv4
    /// address each, from the script itself. Needs neither root nor a testbed.
    pub fn planned_outside_hosts() -> Vec<(String, String)> {
        let out = run(Command::new("bash").arg(repo_path("testbed/testbed")).arg("outside-hosts"));
        out.lines()
            .filter_map(|l| {
                let mut f = l.split('\t');
                Some((f.next()?.to_owned(), f.next()?.to_owned()))
            })
            .collect()
    }

    /// Adds a pod (listeners started, port on br-int with the next free ofport, manifest
    /// written). The namespace's manifest is the caller's business if it is a new one.
    pub fn add_pod(&self, namespace: &str, name: &str, ip: &str) -> Pod {
        run(Command::new("bash")
            .arg(repo_path("testbed/testbed"))
            .args(["add-pod"])
            .arg(&self.sandbox.dir)
            .args([namespace, name, ip]));
        self.pod(&format!("{namespace}/{name}"))
    }

    /// Removes a pod: listener, port, netns and manifest.
    pub fn del_pod(&self, namespace: &str, name: &str) {
        run(Command::new("bash")
            .arg(repo_path("testbed/testbed"))
            .args(["del-pod"])
            .arg(&self.sandbox.dir)
            .args([namespace, name]));
    }

    /// Starts a listener on TCP 80, TCP 81 and UDP 80 in the node's own network namespace (a
    /// host-network service), stopped by pid when the value is dropped.
    pub fn node_listener(&self) -> NodeListener {
        let pidfile = self.sandbox.dir.join("node-listener.pid");
        let child = Command::new("ip")
            .args(["netns", "exec", &self.sandbox.netns, "python3"])
            .arg(repo_path("testbed/probe.py"))
            .args(["serve", "--pidfile"])
            .arg(&pidfile)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start the node's listener");
        super::wait::wait_until(Duration::from_secs(10), "the node's listener", || pidfile.exists());
        NodeListener(child)
    }

    /// Does pod `from` reach the Service of pod `to` (its ClusterIP, DNATed by the node) on
    /// `port`?
    pub fn reaches_service(&self, from: &str, to: &str, port: Port) -> bool {
        let target = (to.to_string(), cluster_ip(&self.pod(to).ip));
        self.probe_from_netns(&self.pod(from).netns, from, &[target])[&(to.to_string(), port)]
    }

    /// Gives pod `id`'s Service NodePorts as kube-proxy does (`externalTrafficPolicy:
    /// Cluster`: DNAT to the pod, masqueraded): TCP `30000 + offset` for 80, `30001 + offset`
    /// for 81, UDP `30000 + offset` for 80, on every address of the node.
    pub fn add_nodeport(&self, id: &str, offset: u16) {
        let (ns, name) = id.split_once('/').unwrap_or_else(|| panic!("not ns/name: {id}"));
        run(Command::new("bash").arg(repo_path("testbed/testbed")).arg("add-nodeport").arg(&self.sandbox.dir).args([
            ns,
            name,
            &offset.to_string(),
        ]));
    }

    /// Does `from` (a pod or outside host) reach pod `to` on `port` through the NodePort
    /// [`Testbed::add_nodeport`] gave it with `offset`, at the node's gateway address?
    pub fn reaches_nodeport(&self, from: &str, to: &str, port: Port, offset: u16) -> bool {
        let target = (to.to_string(), format!("{GATEWAY_IP}:{}", 30000 + offset));
        self.probe_from_netns(&self.host(from).netns, from, &[target])[&(to.to_string(), port)]
    }

    /// Does the node itself reach pod `to` on `port`, from its gateway address (as kubelet's
    /// probes do)?
    pub fn node_reaches(&self, to: &str, port: Port) -> bool {
        let target = (to.to_string(), self.pod(to).ip);
        self.probe_from_netns(&self.sandbox.netns, "node", &[target])[&(to.to_string(), port)]
    }
}

impl std::ops::Deref for Testbed {
    type Target = Hosts;
    fn deref(&self) -> &Hosts {
        &self.hosts
    }
}

/// The hosts of a testbed, one node's or a cluster's (`testbed/cluster`): its tables
/// (pods.tsv, outside.tsv in `state`) and the prober.
#[derive(Debug, Clone)]
pub struct Hosts {
    /// `pods.tsv`, `outside.tsv`, listener pidfiles and logs, `manifests/`.
    pub state: PathBuf,
}

impl Hosts {
    /// Namespace and Pod manifests of the live pods (one file per object), for
    /// `npagent run --manifests`. Policies may be written next to them.
    pub fn manifests_dir(&self) -> PathBuf {
        self.state.join("manifests")
    }

    /// The pods, in creation order.
    pub fn pods(&self) -> Vec<Pod> {
        self.read_table("pods.tsv")
    }

    /// The outside hosts (none unless the testbed was started with them).
    pub fn outside_hosts(&self) -> Vec<Pod> {
        if self.state.join("outside.tsv").exists() {
            self.read_table("outside.tsv")
        } else {
            Vec::new()
        }
    }

    /// The pods, then the outside hosts.
    pub fn hosts(&self) -> Vec<Pod> {
        let mut all = self.pods();
        all.extend(self.outside_hosts());
        all
    }

    /// The pod or outside host `id`; panics if there is none.
    pub fn host(&self, id: &str) -> Pod {
        self.hosts()
            .into_iter()
            .find(|p| p.id() == id)
            .unwrap_or_else(|| panic!("no pod or outside host {id} in the testbed"))
    }

    /// One of the testbed's tables (pods.tsv, outside.tsv).
    fn read_table(&self, name: &str) -> Vec<Pod> {
        let text = std::fs::read_to_string(self.state.join(name)).unwrap_or_else(|e| panic!("read {name}: {e}"));
        text.lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                let f: Vec<&str> = l.split('\t').collect();
                assert_eq!(f.len(), 7, "bad {name} line: {l}");
                Pod {
                    namespace: f[0].to_owned(),
                    name: f[1].to_owned(),
                    ip: f[2].to_owned(),
                    mac: f[3].to_owned(),
                    ofport: f[4].parse().unwrap_or_else(|_| panic!("ofport in {name}: {l}")),
                    netns: f[5].to_owned(),
                    iface: f[6].to_owned(),
                }
            })
            .collect()
    }

    /// The pod `ns/name`; panics if there is none.
    pub fn pod(&self, id: &str) -> Pod {
        self.pods().into_iter().find(|p| p.id() == id).unwrap_or_else(|| panic!("no pod {id} in the testbed"))
    }

    /// `ns/name` of every pod, in creation order.
    pub fn pod_ids(&self) -> Vec<String> {
        self.pods().iter().map(Pod::id).collect()
    }

    /// Runs a command inside the network namespace of pod (or outside host) `id` (`ping`,
    /// `nc`, ...) and returns its output whatever the exit status.
    pub fn pod_exec(&self, id: &str, args: &[&str]) -> std::process::Output {
        let pod = self.host(id);
        super::sandbox::output(Command::new("ip").args(["netns", "exec", &pod.netns]).args(args))
    }

    /// One probe: does `from` reach `to` on `port` (both `ns/name`)?
    pub fn reaches(&self, from: &str, to: &str, port: Port) -> bool {
        self.probe(&[from], &[to]).get(from, to, port)
    }

    /// Runs `testbed/attack.py ARGS` in the network namespace of pod (or host) `id`; returns
    /// its stdout, trimmed. Panics when it fails.
    pub fn attack(&self, id: &str, args: &[&str]) -> String {
        let script = repo_path("testbed/attack.py");
        let mut all = vec!["python3", script.to_str().expect("utf-8 path")];
        all.extend_from_slice(args);
        let out = self.pod_exec(id, &all);
        assert!(out.status.success(), "attack.py {args:?} in {id}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Starts `testbed/attack.py ARGS` (a listener: `sniff`, `udp-listen`, `udp-victim`) in
    /// network namespace `netns` and returns once it says it is ready; [`finish`] reads its
    /// answer.
    pub fn spawn_attack(&self, netns: &str, args: &[&str]) -> std::process::Child {
        use std::io::BufRead;
        let mut child = Command::new("ip")
            .args(["netns", "exec", netns, "python3"])
            .arg(repo_path("testbed/attack.py"))
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("start attack.py");
        let mut ready = String::new();
        let stderr = child.stderr.take().expect("stderr");
        std::io::BufReader::new(stderr).read_line(&mut ready).expect("read attack.py");
        assert_eq!(ready.trim(), "ready", "attack.py {args:?}");
        child
    }

    /// Probes `targets` (`(id, IP)`) on every port from network namespace `netns`, naming the
    /// source `from`: `(target id, port) -> reached`.
    pub fn probe_from_netns(
        &self,
        netns: &str,
        from: &str,
        targets: &[(String, String)],
    ) -> BTreeMap<(String, Port), bool> {
        let python = if std::path::Path::new("/usr/bin/python3").exists() { "/usr/bin/python3" } else { "python3" };
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", netns, python]).arg(repo_path("testbed/probe.py")).args(["probe-from", from]);
        cmd.args(targets.iter().map(|(id, ip)| format!("{id}={ip}")));
        let out = run(&mut cmd);
        let mut got = BTreeMap::new();
        for line in out.lines().filter(|l| !l.trim().is_empty()) {
            match line.split_whitespace().collect::<Vec<_>>().as_slice() {
                [_, to, port, ok] => {
                    let port = Port::parse(port).unwrap_or_else(|| panic!("bad port in prober line: {line}"));
                    got.insert((to.to_string(), port), *ok == "1");
                }
                _ => panic!("bad prober line: {line}"),
            }
        }
        got
    }

    /// The ports on which pod `from` reaches address `ip` (named `label` in the prober's
    /// answer), in [`Port::ALL`]'s order.
    pub fn ports_reached(&self, from: &str, label: &str, ip: &str) -> Vec<Port> {
        let got = self.probe_from_netns(&self.pod(from).netns, from, &[(label.to_string(), ip.to_string())]);
        Port::ALL.into_iter().filter(|p| got[&(label.to_string(), *p)]).collect()
    }

    /// Probes every pod pair (self included: loopback, which never crosses the bridge) on
    /// every port, all at once, with real packets.
    pub fn probe_all(&self) -> Reachability {
        self.probe(&[], &[])
    }

    /// Probes every pod and outside host pair on every port, like [`Testbed::probe_all`].
    pub fn probe_all_with_outside(&self) -> Reachability {
        let ids: Vec<String> = self.hosts().iter().map(Pod::id).collect();
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        self.probe(&ids, &ids)
    }

    /// Probes from `from` to `to` (pods `ns/name` or outside hosts `outside/name`; empty
    /// means every pod), with the default timeout (0.5 s, or `NPA_PROBE_TIMEOUT` seconds).
    pub fn probe(&self, from: &[&str], to: &[&str]) -> Reachability {
        self.probe_with_timeout(from, to, None)
    }

    /// `probe.py matrix` of this testbed from `from` to `to`.
    fn prober_matrix(&self, from: &[&str], to: &[&str]) -> Command {
        let python = if std::path::Path::new("/usr/bin/python3").exists() { "/usr/bin/python3" } else { "python3" };
        let mut cmd = Command::new(python);
        cmd.arg(repo_path("testbed/probe.py"))
            .arg("matrix")
            .arg(&self.state)
            .arg(format!("--from={}", from.join(",")))
            .arg(format!("--to={}", to.join(",")));
        cmd
    }

    /// Like [`Testbed::probe`] with a per-probe timeout in seconds.
    pub fn probe_with_timeout(&self, from: &[&str], to: &[&str], timeout: Option<f64>) -> Reachability {
        let mut cmd = self.prober_matrix(from, to);
        if let Some(t) = timeout {
            cmd.arg(format!("--timeout={t}"));
        }
        let out = run(&mut cmd);
        // the prober's choice: every pod when empty, else the named pods and hosts in order
        let pods = self.pod_ids();
        let hosts: Vec<String> = self.hosts().iter().map(Pod::id).collect();
        let pick = |sel: &[&str]| -> Vec<String> {
            if sel.is_empty() {
                pods.clone()
            } else {
                hosts.iter().filter(|id| sel.contains(&id.as_str())).cloned().collect()
            }
        };
        let mut r = Reachability::between(&pick(from), &pick(to), false);
        let mut seen = 0;
        for line in out.lines().filter(|l| !l.trim().is_empty()) {
            let f: Vec<&str> = line.split_whitespace().collect();
            let (from, to, port, ok) = match f.as_slice() {
                [a, b, p, o] => (*a, *b, Port::parse(p), *o),
                _ => panic!("bad prober line: {line}"),
            };
            let port = port.unwrap_or_else(|| panic!("bad port in prober line: {line}"));
            r.set(from, to, port, ok == "1");
            seen += 1;
        }
        assert_eq!(seen, r.cells.len(), "prober answered {seen} of {} probes:\n{out}", r.cells.len());
        r
    }

    /// Probes from `from` to `to` (as [`Hosts::probe`] chooses them) on `ports`, in the
    /// prober's spelling (`tcp/8080`, `udp/53`: any TCP or UDP port, whatever the testbed's
    /// layout listens on), with the default timeout: `(from, to, port) -> reached`.
    pub fn probe_ports(
        &self,
        from: &[&str],
        to: &[&str],
        ports: &[String],
    ) -> BTreeMap<(String, String, String), bool> {
        let mut cmd = self.prober_matrix(from, to);
        cmd.arg(format!("--ports={}", ports.join(",")));
        let out = run(&mut cmd);
        let mut got = BTreeMap::new();
        for line in out.lines().filter(|l| !l.trim().is_empty()) {
            match line.split_whitespace().collect::<Vec<_>>().as_slice() {
                [f, t, port, ok] => {
                    got.insert((f.to_string(), t.to_string(), port.to_string()), *ok == "1");
                }
                _ => panic!("bad prober line: {line}"),
            }
        }
        let count = |sel: &[&str]| if sel.is_empty() { self.pods().len() } else { sel.len() };
        let want = count(from) * count(to) * ports.len();
        assert_eq!(got.len(), want, "prober answered {} of {want} probes:\n{out}", got.len());
        got
    }

    /// Probes the pairs of `expected` and asserts the result, re-probing up to twice when it
    /// differs (as upstream's e2e suite does: a lost SYN or datagram is not a verdict).
    pub fn assert_reachability(&self, expected: &Reachability) {
        let (from, to) = expected.pods();
        let (from, to): (Vec<&str>, Vec<&str>) =
            (from.iter().map(String::as_str).collect(), to.iter().map(String::as_str).collect());
        let mut observed = self.probe(&from, &to);
        for _ in 0..2 {
            if expected.diff(&observed).is_empty() {
                return;
            }
            observed = self.probe(&from, &to);
        }
        expected.assert_matches(&observed);
    }

    /// Probes until the pairs of `expected` behave as expected, for at most `within`;
    /// returns how long that took (from the call), or panics with the last observation.
    pub fn wait_reachability(&self, expected: &Reachability, within: Duration) -> Duration {
        let started = Instant::now();
        let (from, to) = expected.pods();
        let (from, to): (Vec<&str>, Vec<&str>) =
            (from.iter().map(String::as_str).collect(), to.iter().map(String::as_str).collect());
        loop {
            let observed = self.probe(&from, &to);
            if expected.diff(&observed).is_empty() {
                return started.elapsed();
            }
            if started.elapsed() >= within {
                eprintln!("no convergence within {within:?}");
                expected.assert_matches(&observed);
            }
        }
    }
}

/// Which (from, to, port) is reachable: observed by the prober or expected by a test.
/// Rows are sources, columns destinations, both `ns/name`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reachability {
    from: Vec<String>,
    to: Vec<String>,
    cells: BTreeMap<(String, String, Port), bool>,
}

/// Does the pattern (`x/a`, `x/*`, `*/a`, `*`) match pod `ns/name`?
fn matches(pattern: &str, id: &str) -> bool {
    if pattern == "*" {
        return true;
    }
    let (pn, pp) = pattern.split_once('/').unwrap_or((pattern, "*"));
    let (n, p) = id.split_once('/').unwrap_or((id, ""));
    (pn == "*" || pn == n) && (pp == "*" || pp == p)
}

impl Reachability {
    /// Every pair among `pods` on every port set to `value`.
    pub fn new<S: AsRef<str>>(pods: &[S], value: bool) -> Reachability {
        Reachability::between(pods, pods, value)
    }

    /// Every pair from `from` to `to` on every port set to `value`.
    pub fn between<S: AsRef<str>>(from: &[S], to: &[S], value: bool) -> Reachability {
        let from: Vec<String> = from.iter().map(|s| s.as_ref().to_owned()).collect();
        let to: Vec<String> = to.iter().map(|s| s.as_ref().to_owned()).collect();
        let mut cells = BTreeMap::new();
        for f in &from {
            for t in &to {
                for p in Port::ALL {
                    cells.insert((f.clone(), t.clone(), p), value);
                }
            }
        }
        Reachability { from, to, cells }
    }

    /// The nine standard pods, x/a ... z/c.
    pub fn standard_pods() -> Vec<String> {
        ["x", "y", "z"].iter().flat_map(|n| ["a", "b", "c"].iter().map(move |p| format!("{n}/{p}"))).collect()
    }

    /// Source and destination pods (`ns/name`), in order.
    pub fn pods(&self) -> (&[String], &[String]) {
        (&self.from, &self.to)
    }

    /// Reachability of one probe; panics for a pair outside the matrix.
    pub fn get(&self, from: &str, to: &str, port: Port) -> bool {
        *self
            .cells
            .get(&(from.to_owned(), to.to_owned(), port))
            .unwrap_or_else(|| panic!("{from} -> {to} {port} is not in the matrix"))
    }

    /// Sets one cell; panics for a pair outside the matrix.
    pub fn set(&mut self, from: &str, to: &str, port: Port, value: bool) {
        let cell = self
            .cells
            .get_mut(&(from.to_owned(), to.to_owned(), port))
            .unwrap_or_else(|| panic!("{from} -> {to} {port} is not in the matrix"));
        *cell = value;
    }

    /// Sets every cell whose source matches `from` and destination matches `to`
    /// (patterns `x/a`, `x/*`, `*/a`, `*`) on `port`, or on all ports for `None`.
    pub fn expect(&mut self, from: &str, to: &str, port: Option<Port>, value: bool) -> &mut Self {
        for ((f, t, p), v) in self.cells.iter_mut() {
            if matches(from, f) && matches(to, t) && port.is_none_or(|q| q == *p) {
                *v = value;
            }
        }
        self
    }

    /// Everything into pods matching `to`, on all ports (upstream's ExpectAllIngress).
    pub fn expect_all_ingress(&mut self, to: &str, value: bool) -> &mut Self {
        self.expect("*", to, None, value)
    }

    /// Everything out of pods matching `from`, on all ports (upstream's ExpectAllEgress).
    pub fn expect_all_egress(&mut self, from: &str, value: bool) -> &mut Self {
        self.expect(from, "*", None, value)
    }

    /// A pod reaches itself (its own IP is local: the packets never cross the bridge).
    pub fn allow_loopback(&mut self) -> &mut Self {
        for ((f, t, _), v) in self.cells.iter_mut() {
            if f == t {
                *v = true;
            }
        }
        self
    }

    /// How many probes have `value`.
    pub fn count(&self, value: bool) -> usize {
        self.cells.values().filter(|v| **v == value).count()
    }

    /// Number of probes in the matrix.
    pub fn len(&self) -> usize {
        self.cells.len()
    }

    /// The truth table of one port, as upstream prints it: `.` reachable, `X` not.
    pub fn table(&self, port: Port) -> String {
        let width = self.from.iter().chain(&self.to).map(String::len).max().unwrap_or(1) + 1;
        let mut s = format!("{:<width$}", port.as_str());
        for t in &self.to {
            s.push_str(&format!("{t:<width$}"));
        }
        s.push('\n');
        for f in &self.from {
            s.push_str(&format!("{f:<width$}"));
            for t in &self.to {
                let ok = self.cells.get(&(f.clone(), t.clone(), port)).copied().unwrap_or(false);
                s.push_str(&format!("{:<width$}", if ok { "." } else { "X" }));
            }
            s.truncate(s.trim_end().len());
            s.push('\n');
        }
        s
    }

    /// The cells where `observed` differs from `self` (the expectation), one line each.
    pub fn diff(&self, observed: &Reachability) -> Vec<String> {
        let mut out = Vec::new();
        for (key, want) in &self.cells {
            let got = observed.cells.get(key);
            if got != Some(want) {
                let (f, t, p) = key;
                let got = got.map_or("missing".to_owned(), |g| g.to_string());
                out.push(format!("{f} -> {t} {p}: expected {want}, observed {got}"));
            }
        }
        out
    }

    /// Panics, printing both truth tables and the wrong cells, unless `observed` equals the
    /// expectation `self`.
    pub fn assert_matches(&self, observed: &Reachability) {
        let wrong = self.diff(observed);
        if !wrong.is_empty() {
            panic!(
                "reachability differs in {} of {} probes:\n{}\n\nexpected:\n{self}\nobserved:\n{observed}",
                wrong.len(),
                self.len(),
                wrong.join("\n")
            );
        }
    }
}

impl fmt::Display for Reachability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for p in Port::ALL {
            writeln!(f, "{}", self.table(p))?;
        }
        Ok(())
    }
}

/// Writes a file atomically (temporary dot-file + rename), so the agent never reads half a file.
pub fn write_atomic(path: &Path, text: &str) {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.tmp"));
    std::fs::write(&tmp, text).unwrap_or_else(|e| panic!("write {}: {e}", tmp.display()));
    std::fs::rename(&tmp, path).unwrap_or_else(|e| panic!("rename to {}: {e}", path.display()));
}

/// A listener in the node's network namespace ([`Testbed::node_listener`]), stopped by pid when
/// dropped.
pub struct NodeListener(std::process::Child);

impl Drop for NodeListener {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
