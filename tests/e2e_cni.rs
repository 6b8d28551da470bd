//! npagent as the CNI plugin, driven as a container runtime drives it: the `npagent` binary
//! run with `CNI_COMMAND` and a network configuration on stdin, against `npagent run
//! --cni-socket` in the node's network namespace, with real network namespaces, Debian's
//! host-local IPAM plugin and the real OVS of the testbed. Checks ADD, CHECK, DEL (twice),
//! GC, STATUS and VERSION, that a new pod is enforced from its first packet (as the target of
//! a policy and as its peer) and cannot spoof, that bad input is an error naming the culprit
//! that leaves nothing behind, that an ADD that can never succeed fails at once with its
//! cause, and that a restart takes apart what a gone pod left. Nothing is done to a pod that a
//! runtime would not do: on the testbed's userspace datapath the plugin itself turns the pod
//! interface's TX checksum offload off. Needs root, and host-local in /usr/lib/cni
//! (scripts/test installs containernetworking-plugins).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

mod support;

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};
use support::agent::{npagent_bin, Agent, FIRST_SYNC};
use support::cni_node::{POD_X_N, POLICIES};
use support::sandbox::{output, repo_path, run};
use support::{write_atomic, Testbed};

const WITHIN: Duration = Duration::from_secs(20);
/// Where Debian's containernetworking-plugins installs host-local.
const CNI_PATH: &str = "/usr/lib/cni";

/// A node with npagent serving the CNI socket, and what a runtime needs to call it.
struct Node {
    tb: Testbed,
    agent: Option<Agent>,
    socket: PathBuf,
    state_dir: PathBuf,
    ipam_dir: PathBuf,
    /// Network namespaces this test made (removed on drop).
    netns: std::sync::Mutex<Vec<String>>,
    /// Listeners started in them (killed on drop).
    listeners: std::sync::Mutex<Vec<std::process::Child>>,
}

/// What the plugin printed and whether it succeeded.
struct Reply {
    ok: bool,
    json: Value,
}

impl Reply {
    fn code(&self) -> u64 {
        assert!(!self.ok, "succeeded: {}", self.json);
        self.json["code"].as_u64().unwrap_or_else(|| panic!("no code: {}", self.json))
    }

    fn msg(&self) -> String {
        format!("{} {}", self.json["msg"].as_str().unwrap_or(""), self.json["details"].as_str().unwrap_or(""))
    }
}

impl Node {
    fn start() -> Node {
        let tb = Testbed::start();
        write_atomic(&tb.manifests_dir().join("pod-x-n.yaml"), POD_X_N);
        write_atomic(&tb.manifests_dir().join("policies.yaml"), POLICIES);
        let dir = tb.sandbox.dir.clone();
        let mut node = Node {
            socket: dir.join("cni.sock"),
            state_dir: dir.join("cni-state"),
            ipam_dir: dir.join("ipam"),
            tb,
            agent: None,
            netns: Default::default(),
            listeners: Default::default(),
        };
        node.start_agent();
        node
    }

    fn start_agent(&mut self) {
        let log = self.tb.sandbox.dir.join("npagent.log");
        let socket = self.socket.to_str().unwrap().to_string();
        let state = self.state_dir.to_str().unwrap().to_string();
        let args = ["--cni-socket", socket.as_str(), "--cni-state-dir", state.as_str()];
        let mut agent = Agent::spawn_in_node(&self.tb.sandbox, &self.tb.manifests_dir(), &log, &args);
        agent.wait_log(FIRST_SYNC, WITHIN);
        self.agent = Some(agent);
    }

    fn stop_agent(&mut self) {
        if let Some(agent) = self.agent.take() {
            agent.stop();
        }
    }

    /// The network configuration: host-local in a range of the testbed's pod subnet no
    /// testbed pod uses (`first`..=`last` of 10.10.50.x), in the version `npagent
    /// install-cni` writes.
    fn conf(&self, first: u8, last: u8) -> Value {
        json!({
            "cniVersion": "1.0.0", "name": "npagent-test", "type": "npagent",
            "socket": self.socket,
            "ipam": {"type": "host-local", "dataDir": self.ipam_dir,
                     "ranges": [[{"subnet": "10.10.0.0/16", "rangeStart": format!("10.10.50.{first}"),
                                  "rangeEnd": format!("10.10.50.{last}"), "gateway": "10.10.0.254"}]]},
        })
    }

    /// A fresh network namespace, as a runtime makes one for a sandbox (IPv4 only, like the
    /// testbed's pods); its path.
    fn netns(&self, name: &str) -> String {
        let ns = format!("{}-cni-{name}", self.tb.sandbox.netns);
        run(Command::new("ip").args(["netns", "add", &ns]));
        run(Command::new("ip").args(["netns", "exec", &ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"]));
        run(Command::new("ip").args(["-n", &ns, "link", "set", "lo", "up"]));
        self.netns.lock().unwrap().push(ns.clone());
        format!("/var/run/netns/{ns}")
    }

    /// Runs the plugin: `command` for `container` as `eth0` in `netns`, pod `x/<pod>`.
    fn cni(&self, command: &str, container: &str, netns: Option<&str>, pod: &str, conf: &Value) -> Reply {
        self.cni_as(command, (container, "eth0"), netns, ("x", pod), conf)
    }

    /// Runs the plugin: `command` for attachment `(container, ifname)` in `netns`, for pod
    /// `(namespace, name)`, with the CNI_ARGS kubelet sends.
    fn cni_as(
        &self,
        command: &str,
        (container, ifname): (&str, &str),
        netns: Option<&str>,
        (namespace, pod): (&str, &str),
        conf: &Value,
    ) -> Reply {
        let mut cmd = Command::new(npagent_bin());
        cmd.env_clear()
            .env("CNI_COMMAND", command)
            .env("CNI_CONTAINERID", container)
            .env("CNI_IFNAME", ifname)
            .env("CNI_PATH", CNI_PATH)
            .env(
                "CNI_ARGS",
                format!(
                    "IgnoreUnknown=1;K8S_POD_NAMESPACE={namespace};K8S_POD_NAME={pod};K8S_POD_INFRA_CONTAINER_ID={container}"
                ),
            );
        if let Some(ns) = netns {
            cmd.env("CNI_NETNS", ns);
        }
        let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        child.stdin.take().unwrap().write_all(conf.to_string().as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let json = if text.trim().is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
        };
        Reply { ok: out.status.success(), json }
    }

    /// The bridge's ports.
    fn ports(&self) -> Vec<String> {
        self.tb.sandbox.vsctl(&["list-ports", "br-int"]).lines().map(str::to_owned).collect()
    }

    /// The node's network devices whose name starts with `prefix`.
    fn devices(&self, prefix: &str) -> Vec<String> {
        let out = output(Command::new("ip").args(["-n", &self.tb.sandbox.netns, "-o", "link", "show"]));
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split(": ").nth(1))
            .map(|n| n.split('@').next().unwrap_or(n).to_string())
            .filter(|n| n.starts_with(prefix))
            .collect()
    }

    /// The addresses host-local holds.
    fn allocated(&self) -> Vec<String> {
        let dir = self.ipam_dir.join("npagent-test");
        let mut ips: Vec<String> = std::fs::read_dir(&dir)
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.starts_with("10."))
                    .collect()
            })
            .unwrap_or_default();
        ips.sort();
        ips
    }

    /// Port `name`'s external_ids (Port table).
    fn external_ids(&self, table: &str, name: &str) -> String {
        self.tb.sandbox.vsctl(&["get", table, name, "external_ids"])
    }

    /// Starts the testbed's listeners (TCP 80, 81, UDP 80) in `netns` (a path), as a
    /// container's process would: nothing else is done to the pod.
    fn serve_in(&self, netns: &str) {
        let ns = Path::new(netns).file_name().unwrap().to_str().unwrap().to_string();
        let pidfile = self.tb.sandbox.dir.join(format!("{ns}.listener.pid"));
        let listener = Command::new("ip")
            .args(["netns", "exec", &ns, "python3"])
            .arg(repo_path("testbed/probe.py"))
            .args(["serve", "--pidfile"])
            .arg(&pidfile)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        self.listeners.lock().unwrap().push(listener);
        support::wait_until(WITHIN, "the listeners write their pidfile", || pidfile.exists());
    }

    /// Whether pod `from` (a testbed pod) reaches `ip` on TCP 80.
    fn reaches(&self, from: &str, ip: &str) -> bool {
        let got = self.tb.probe_from_netns(&self.tb.pod(from).netns, from, &[("t".into(), ip.into())]);
        got[&("t".to_string(), support::Port::Tcp80)]
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.stop_agent();
        for mut listener in std::mem::take(&mut *self.listeners.lock().unwrap()) {
            let _ = listener.kill();
            let _ = listener.wait();
        }
        for ns in self.netns.lock().unwrap().iter() {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

/// Whether `eth0` in `netns` (a path) has TX checksum offload on, as `ethtool -k` reports it
/// (read only: the test changes nothing).
fn tx_checksumming(netns: &str) -> String {
    let ns = Path::new(netns).file_name().unwrap().to_str().unwrap();
    let out = run(Command::new("ip").args(["netns", "exec", ns, "ethtool", "-k", "eth0"]));
    out.lines().find(|l| l.starts_with("tx-checksumming:")).unwrap_or("tx-checksumming: ?").to_string()
}

/// The records in the CNI state directory.
fn records(node: &Node) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(&node.state_dir)
        .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    names.sort();
    names
}

fn address_of(result: &Value) -> String {
    let cidr = result["ips"][0]["address"].as_str().unwrap_or_else(|| panic!("no address: {result}"));
    cidr.split('/').next().unwrap().to_string()
}

#[test]
fn a_pod_attached_by_the_plugin_is_enforced_from_its_first_packet_and_taken_apart_by_del() {
    let node = Node::start();
    let conf = node.conf(1, 20);
    let netns = node.netns("n");

    let version = node.cni("VERSION", "", None, "n", &json!({"cniVersion": "1.0.0"}));
    assert!(version.ok);
    assert_eq!(version.json["supportedVersions"], json!(["0.4.0", "1.0.0", "1.1.0"]));
    let status = node.cni("STATUS", "", None, "n", &conf);
    assert!(status.ok, "{}", status.json);

    let ports_before = node.ports();
    let add = node.cni("ADD", "c-n-1", Some(&netns), "n", &conf);
    assert!(add.ok, "ADD: {}", add.json);
    let ip = address_of(&add.json);
    assert!(ip.starts_with("10.10.50."), "{}", add.json);
    assert_eq!(add.json["cniVersion"], "1.0.0");
    // The bridge runs the userspace datapath: the plugin turned the offload off itself.
    assert_eq!(tx_checksumming(&netns), "tx-checksumming: off");
    assert_eq!(add.json["routes"][0], json!({"dst": "0.0.0.0/0", "gw": "10.10.0.254"}));
    let host = add.json["interfaces"][0]["name"].as_str().unwrap().to_string();
    let mac = add.json["interfaces"][1]["mac"].as_str().unwrap().to_string();
    assert_eq!(add.json["interfaces"][1]["sandbox"], netns.as_str());

    // Right after ADD: x/b reaches it, x/c does not; it reaches x/a, which admits only it.
    node.serve_in(&netns);
    assert!(node.reaches("x/b", &ip), "x/b did not reach the new pod right after ADD");
    assert!(!node.reaches("x/c", &ip), "x/c reached the new pod past n-from-b");
    let probe_from_n = |ip_to: &str| {
        let ns = Path::new(&netns).file_name().unwrap().to_str().unwrap();
        node.tb.probe_from_netns(ns, "x/n", &[("t".into(), ip_to.into())])[&("t".to_string(), support::Port::Tcp80)]
    };
    assert!(probe_from_n(&node.tb.pod("x/a").ip), "the new pod, a-from-n's peer, did not reach x/a");
    assert!(!node.reaches("x/c", &node.tb.pod("x/a").ip), "x/c reached x/a past a-from-n");

    // One port, its ids on the Port and the Interface, written with it.
    let added: Vec<_> = node.ports().into_iter().filter(|p| !ports_before.contains(p)).collect();
    assert_eq!(added, std::slice::from_ref(&host));
    for table in ["Port", "Interface"] {
        let ids = node.external_ids(table, &host);
        for want in [
            "antrea-type=container".to_string(),
            "container-id=c-n-1".into(),
            "pod-name=n".into(),
            "pod-namespace=x".into(),
            format!("ip-address=\"{ip}\""),
            format!("attached-mac=\"{mac}\""),
            "if-dev=eth0".into(),
        ] {
            assert!(
                ids.replace(['{', '}', ' '], ",").split(',').any(|kv| kv == want),
                "{table} {host}: {want} not in {ids}"
            );
        }
    }

    // CHECK against the result, then against a result that lies.
    let mut check_conf = conf.clone();
    check_conf["prevResult"] = add.json.clone();
    assert!(node.cni("CHECK", "c-n-1", Some(&netns), "n", &check_conf).ok);
    check_conf["prevResult"]["ips"][0]["address"] = json!("10.10.50.99/16");
    let lie = node.cni("CHECK", "c-n-1", Some(&netns), "n", &check_conf);
    assert!(lie.msg().contains("10.10.50.99"), "{}", lie.json);

    // A repeated ADD gives the same result.
    let again = node.cni("ADD", "c-n-1", Some(&netns), "n", &conf);
    assert_eq!(again.json, add.json);

    // DEL: no port, no veth, no address, no flow of its ofport; a second DEL succeeds too.
    let ofport = node.tb.sandbox.ofport(&host);
    assert!(node.cni("DEL", "c-n-1", Some(&netns), "n", &conf).ok);
    assert_eq!(node.ports(), ports_before);
    assert!(node.devices(&host).is_empty(), "veth {host} left");
    assert!(node.allocated().is_empty(), "addresses left: {:?}", node.allocated());
    support::wait_until(WITHIN, "the gone pod's flows leave the bridge", || {
        !node.tb.sandbox.dump_flows().iter().any(|f| f.contains(&format!("in_port={ofport},")) || f.contains(&ip))
    });
    let del = node.cni("DEL", "c-n-1", Some(&netns), "n", &conf);
    assert!(del.ok, "second DEL: {}", del.json);
    assert!(node.cni("DEL", "never-seen", None, "n", &conf).ok);
    assert_eq!(node.cni("CHECK", "c-n-1", Some(&netns), "n", &check_conf).code(), 3);

    // ADD after DEL: a new container in the same namespace.
    let readd = node.cni("ADD", "c-n-2", Some(&netns), "n", &conf);
    assert!(readd.ok, "{}", readd.json);
    let readd_ip = address_of(&readd.json);
    assert!(node.reaches("x/b", &readd_ip));
    // No gratuitous ARP is needed when an address changes hands: the node's neighbour entry
    // pinned to a MAC that is not the pod's (an earlier holder's) still reaches the pod, as
    // the switch forwards by address and writes the holder's MAC.
    let gw = node.tb.sandbox.netns.clone();
    run(Command::new("ip").args(["-n", &gw, "neigh", "replace", &readd_ip, "lladdr", "02:00:00:00:00:99"]).args([
        "dev",
        "gw0",
        "nud",
        "permanent",
    ]));
    let from_node = node.tb.probe_from_netns(&gw, "node", &[("t".into(), readd_ip.clone())]);
    assert!(from_node[&("t".to_string(), support::Port::Tcp80)], "a stale neighbour entry cut the node off the pod");
    // GC with only another attachment valid takes this one apart.
    let mut gc = conf.clone();
    gc["cni.dev/valid-attachments"] = json!([{"containerID": "other", "ifname": "eth0"}]);
    assert!(node.cni("GC", "", None, "n", &gc).ok);
    assert_eq!(node.ports(), ports_before);
    assert!(node.allocated().is_empty());
}

#[test]
fn a_new_pod_cannot_spoof() {
    let node = Node::start();
    let netns = node.netns("n");
    let add = node.cni("ADD", "c-spoof", Some(&netns), "n", &node.conf(1, 20));
    assert!(add.ok, "{}", add.json);
    node.serve_in(&netns);
    let ns = Path::new(&netns).file_name().unwrap().to_str().unwrap().to_string();
    let attack = |args: &[&str]| {
        let out = output(
            Command::new("ip").args(["netns", "exec", &ns, "python3"]).arg(repo_path("testbed/attack.py")).args(args),
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let (victim, target) = (node.tb.pod("x/b"), node.tb.pod("y/a"));
    // Its own address works: the echo comes back.
    assert_eq!(attack(&["udp-echo", "--dst", &target.ip, "--dport", "80", "--sport", "40100"]), "1");
    // x/b's address forged: the echo would land on x/b, where a listener counts it.
    let listener = node.tb.spawn_attack(&victim.netns, &["udp-listen", "--port", "40101", "--timeout", "2"]);
    let spoof = format!("udp-spoof --src {} --sport 40101 --dst {} --dport 80 --count 5", victim.ip, target.ip);
    attack(&spoof.split(' ').collect::<Vec<_>>());
    assert_eq!(support::finish(listener), "0", "a datagram forged by the new pod was answered");
}

#[test]
fn bad_input_is_an_error_naming_the_culprit_and_leaves_nothing_behind() {
    let node = Node::start();
    let conf = node.conf(30, 30); // one address
    let ports_before = node.ports();
    let netns = node.netns("bad");
    let add = |container: &str, ns: Option<&str>, conf: &Value| node.cni("ADD", container, ns, "n", conf);

    let mut old = conf.clone();
    old["cniVersion"] = json!("0.3.1");
    let r = add("c1", Some(&netns), &old);
    assert_eq!((r.code(), r.msg().contains("0.3.1")), (1, true), "{}", r.json);
    let r = add("c1", None, &conf);
    assert_eq!((r.code(), r.msg().contains("CNI_NETNS")), (4, true), "{}", r.json);
    let r = add("c1", Some("/var/run/netns/npagent-no-such-ns"), &conf);
    assert_eq!((r.code(), r.msg().contains("npagent-no-such-ns")), (4, true), "{}", r.json);
    let mut down = conf.clone();
    down["socket"] = json!(node.tb.sandbox.dir.join("nobody.sock"));
    let r = add("c1", Some(&netns), &down);
    assert_eq!((r.code(), r.msg().contains("nobody.sock")), (11, true), "{}", r.json);
    let mut child = Command::new(npagent_bin())
        .env("CNI_COMMAND", "ADD")
        .env("CNI_CONTAINERID", "c1")
        .env("CNI_IFNAME", "eth0")
        .env("CNI_NETNS", &netns)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"{\"cniVersion\":").unwrap();
    let out = child.wait_with_output().unwrap();
    let e: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((out.status.success(), e["code"].as_u64()), (false, Some(6)), "{e}");

    // The range's one address, then an exhausted range: the second ADD fails naming host-local.
    let first = add("c1", Some(&netns), &conf);
    assert!(first.ok, "{}", first.json);
    let netns2 = node.netns("bad2");
    let r = add("c2", Some(&netns2), &conf);
    assert!(r.msg().contains("host-local"), "{}", r.json);
    // Nothing half-made: one port, one veth, one address, and no record of the failed one.
    let added: Vec<_> = node.ports().into_iter().filter(|p| !ports_before.contains(p)).collect();
    assert_eq!(added.len(), 1, "{added:?}");
    assert_eq!(node.devices("n-").len(), 1, "{:?}", node.devices("n-"));
    assert_eq!(node.allocated(), ["10.10.50.30"]);
    let records: Vec<_> = std::fs::read_dir(&node.state_dir).unwrap().flatten().map(|e| e.file_name()).collect();
    assert_eq!(records.len(), 1, "{records:?}");
}

#[test]
fn a_restart_takes_apart_what_a_gone_pod_left_and_keeps_the_rest() {
    let mut node = Node::start();
    let conf = node.conf(40, 49);
    let (kept_ns, gone_ns) = (node.netns("kept"), node.netns("gone"));
    let kept = node.cni("ADD", "c-kept", Some(&kept_ns), "n", &conf);
    assert!(kept.ok, "{}", kept.json);
    let gone = node.cni("ADD", "c-gone", Some(&gone_ns), "n", &conf);
    assert!(gone.ok, "{}", gone.json);
    let (kept_host, gone_host) =
        (kept.json["interfaces"][0]["name"].as_str().unwrap(), gone.json["interfaces"][0]["name"].as_str().unwrap());

    // The agent stops; meanwhile the runtime loses a sandbox without a DEL.
    node.stop_agent();
    let name = Path::new(&gone_ns).file_name().unwrap().to_str().unwrap().to_string();
    run(Command::new("ip").args(["netns", "del", &name]));
    node.netns.lock().unwrap().retain(|n| *n != name);
    node.start_agent();
    node.agent.as_mut().unwrap().wait_log("CNI: 1 attachment(s) restored, 1 taken apart", WITHIN);

    let ports = node.ports();
    assert!(ports.iter().any(|p| p == kept_host) && !ports.iter().any(|p| p == gone_host), "{ports:?}");
    assert_eq!(node.allocated(), [address_of(&kept.json)]);
    // The kept pod is still enforced and attached, and DEL after the restart takes it apart.
    node.serve_in(&kept_ns);
    assert!(node.reaches("x/b", &address_of(&kept.json)));
    assert!(node.cni("DEL", "c-kept", Some(&kept_ns), "n", &conf).ok);
    assert!(node.allocated().is_empty());
    assert!(!node.ports().iter().any(|p| p == kept_host));
}

/// Pods attached at once in [`many_pods_attached_and_deleted_leak_nothing`]
/// (`NPA_CNI_PODS` to change it).
fn pod_count() -> usize {
    std::env::var("NPA_CNI_PODS").ok().and_then(|n| n.parse().ok()).unwrap_or(1000)
}

#[test]
fn many_pods_attached_and_deleted_leak_nothing() {
    let count = pod_count();
    let node = Node::start();
    let pods: String = (0..count)
        .map(|i| format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: m{i}, namespace: x, labels: {{pod: m}}}}\nspec: {{containers: [{{name: c, image: i}}]}}\n"))
        .collect::<Vec<_>>()
        .join("---\n");
    write_atomic(&node.tb.manifests_dir().join("many.yaml"), &pods);
    let mut conf = node.conf(1, 1);
    conf["ipam"]["ranges"] = json!([[{"subnet": "10.10.0.0/16", "rangeStart": "10.10.60.1", "rangeEnd": "10.10.67.254", "gateway": "10.10.0.254"}]]);
    let ports_before = node.ports();
    let flows_before = node.tb.sandbox.dump_flows().len();
    let netns: Vec<String> = (0..count).map(|i| node.netns(&format!("m{i}"))).collect();

    // Four runtimes at once, as a kubelet starting many sandboxes would.
    let run_all = |command: &'static str| {
        std::thread::scope(|s| {
            for worker in 0..4 {
                let (node, conf, netns) = (&node, &conf, &netns);
                s.spawn(move || {
                    for i in (worker..count).step_by(4) {
                        let reply = node.cni(command, &format!("c-m{i}"), Some(&netns[i]), &format!("m{i}"), conf);
                        assert!(reply.ok, "{command} m{i}: {}", reply.json);
                    }
                });
            }
        });
    };
    run_all("ADD");
    assert_eq!(node.ports().len(), ports_before.len() + count);
    assert_eq!(node.allocated().len(), count);
    run_all("DEL");

    assert_eq!(node.ports(), ports_before, "ports left");
    assert_eq!(node.devices("m"), Vec::<String>::new(), "veths left");
    assert_eq!(node.allocated(), Vec::<String>::new(), "addresses left");
    let records = std::fs::read_dir(&node.state_dir).unwrap().count();
    assert_eq!(records, 0, "attachment records left");
    support::wait_until(WITHIN, "the pods' flows leave the bridge", || {
        node.tb.sandbox.dump_flows().len() == flows_before
    });
}

#[test]
fn results_are_in_the_version_the_configuration_declares() {
    let node = Node::start();
    // The field set each version defines for a result (ips[].version only in 0.4.0).
    for (i, version) in ["0.4.0", "1.0.0", "1.1.0"].into_iter().enumerate() {
        let mut conf = node.conf(70, 79);
        conf["cniVersion"] = json!(version);
        let netns = node.netns(&format!("v{i}"));
        let container = format!("c-version-{i}");
        let add = node.cni("ADD", &container, Some(&netns), "n", &conf);
        assert!(add.ok, "ADD in {version}: {}", add.json);
        assert_eq!(add.json["cniVersion"], version, "{}", add.json);
        let keys: BTreeSet<&str> = add.json.as_object().unwrap().keys().map(String::as_str).collect();
        assert!(keys.is_subset(&BTreeSet::from(["cniVersion", "interfaces", "ips", "routes", "dns"])), "{keys:?}");
        let ip_keys: BTreeSet<&str> = add.json["ips"][0].as_object().unwrap().keys().map(String::as_str).collect();
        let mut want = BTreeSet::from(["address", "gateway", "interface"]);
        if version == "0.4.0" {
            want.insert("version");
            assert_eq!(add.json["ips"][0]["version"], "4");
        }
        assert_eq!(ip_keys, want, "{version}: {}", add.json);
        // An error is in the configuration's version too.
        let mut bad = conf.clone();
        bad["ipam"]["type"] = json!("no-such-ipam");
        let err = node.cni("ADD", "c-version-err", Some(&netns), "n", &bad);
        assert_eq!(err.json["cniVersion"], version, "{}", err.json);
        // DEL as containerd sends it the second and third time: no CNI_NETNS, no prevResult.
        assert!(node.cni("DEL", &container, Some(&netns), "n", &conf).ok);
        let again = node.cni("DEL", &container, None, "n", &conf);
        assert!(again.ok, "DEL without CNI_NETNS in {version}: {}", again.json);
    }
    assert!(node.allocated().is_empty(), "{:?}", node.allocated());
}

/// Runs `add` and returns its reply with how long it took.
fn timed(add: impl FnOnce() -> Reply) -> (Reply, Duration) {
    let started = std::time::Instant::now();
    let reply = add();
    (reply, started.elapsed())
}

/// Far below the 30 s an ADD waits for a Pod genuinely not yet known.
const AT_ONCE: Duration = Duration::from_secs(3);

#[test]
fn an_add_that_can_never_succeed_fails_at_once_naming_the_cause() {
    let mut node = Node::start();
    let ports_before = node.ports();
    // A Pod whose object the agent refused (its status holds no IP), and one whose name no
    // API server would take: both manifests are in the directory, both were refused.
    write_atomic(
        &node.tb.manifests_dir().join("refused.yaml"),
        "apiVersion: v1\nkind: Pod\nmetadata: {name: r, namespace: x}\nspec: {containers: [{name: c, image: i}]}\nstatus: {podIP: 10.10.999.1}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: Bad_Name, namespace: x}\nspec: {containers: [{name: c, image: i}]}\n",
    );
    node.agent.as_mut().unwrap().wait_log("10.10.999.1", WITHIN);
    let conf = node.conf(80, 89);
    let netns = node.netns("ff");

    let (r, took) = timed(|| node.cni_as("ADD", ("c-ff-1", "eth0"), Some(&netns), ("x", "r"), &conf));
    assert!(!r.ok && r.msg().contains("Pod x/r was refused") && r.msg().contains("10.10.999.1"), "{}", r.json);
    assert!(took < AT_ONCE, "the refused Pod's ADD took {took:?}");
    eprintln!("refused Pod: answered in {took:?}");
    let (r, took) = timed(|| node.cni_as("ADD", ("c-ff-2", "eth0"), Some(&netns), ("x", "Bad_Name"), &conf));
    assert_eq!((r.code(), r.msg().contains("K8S_POD_NAME \"Bad_Name\"")), (4, true), "{}", r.json);
    assert!(took < AT_ONCE, "the invalid name's ADD took {took:?}");

    // IPAM hands out an address a local pod holds already (x/a's, outside npagent's knowledge
    // of the range): the holder is named, and the address is released.
    let held = node.tb.pod("x/a").ip;
    let mut clash = conf.clone();
    clash["ipam"]["ranges"] =
        json!([[{"subnet": "10.10.0.0/16", "rangeStart": held, "rangeEnd": held, "gateway": "10.10.0.254"}]]);
    let (r, took) = timed(|| node.cni("ADD", "c-ff-3", Some(&netns), "n", &clash));
    assert!(!r.ok && r.msg().contains(&held) && r.msg().contains("local pod x/a"), "{}", r.json);
    assert!(took < AT_ONCE, "the held address's ADD took {took:?}");
    eprintln!("held address: answered in {took:?}");
    assert!(node.allocated().is_empty(), "the held address stays allocated: {:?}", node.allocated());

    // Nothing of the three is left, and the same namespace then attaches a known pod.
    assert_eq!(node.ports(), ports_before);
    assert!(records(&node).is_empty(), "{:?}", records(&node));
    let ok = node.cni("ADD", "c-ff-4", Some(&netns), "n", &conf);
    assert!(ok.ok, "{}", ok.json);
}

#[test]
fn namespaces_and_routes_that_are_not_the_pods_own_are_refused() {
    let node = Node::start();
    let conf = node.conf(90, 99);
    let ports_before = node.ports();
    // The agent's own namespace under two paths (the node's, where it runs, as with
    // hostNetwork), and the host's where this machine lets root read PID 1's (without
    // CAP_SYS_PTRACE it does not, and the agent cannot tell it either).
    let agent_ns = format!("/var/run/netns/{}", node.tb.sandbox.netns);
    let agent_pid = node.agent.as_ref().unwrap().pid();
    let mut foreign = vec![
        (agent_ns.clone(), "the npagent agent's own"),
        (format!("/proc/{agent_pid}/ns/net"), "the npagent agent's own"),
    ];
    if std::fs::metadata("/proc/1/ns/net").is_ok() {
        foreign.push(("/proc/1/ns/net".to_string(), "the host's"));
    } else {
        eprintln!("/proc/1/ns/net cannot be read here: the host's namespace is not tried");
    }
    for (netns, whose) in &foreign {
        let r = node.cni("ADD", "c-ns", Some(netns.as_str()), "n", &conf);
        assert_eq!((r.code(), r.msg().contains(whose)), (4, true), "{netns}: {}", r.json);
    }
    let node_routes = output(Command::new("ip").args(["-n", &node.tb.sandbox.netns, "route", "show"]));
    assert!(!String::from_utf8_lossy(&node_routes.stdout).contains("10.10.50."), "a pod address landed on the node");

    // A namespace whose default route points elsewhere: an error naming it, nothing left.
    let netns = node.netns("route");
    let ns = Path::new(&netns).file_name().unwrap().to_str().unwrap().to_string();
    run(Command::new("ip").args([
        "-n",
        &ns,
        "link",
        "add",
        "elsewhere",
        "type",
        "veth",
        "peer",
        "name",
        "elsewhere-p",
    ]));
    run(Command::new("ip").args(["-n", &ns, "addr", "add", "192.0.2.2/24", "dev", "elsewhere"]));
    run(Command::new("ip").args(["-n", &ns, "link", "set", "elsewhere", "up"]));
    run(Command::new("ip").args(["-n", &ns, "route", "add", "default", "via", "192.0.2.1"]));
    let r = node.cni("ADD", "c-route", Some(&netns), "n", &conf);
    assert!(!r.ok && r.msg().contains("default route") && r.msg().contains("192.0.2.1"), "{}", r.json);
    assert_eq!(node.ports(), ports_before);
    assert!(node.allocated().is_empty(), "{:?}", node.allocated());
    assert!(records(&node).is_empty(), "{:?}", records(&node));
    let eth0 = output(Command::new("ip").args(["-n", &ns, "link", "show", "eth0"]));
    assert!(!eth0.status.success(), "eth0 left in the pod's namespace");
}

#[test]
fn attachments_never_take_each_others_records_or_devices() {
    let mut node = Node::start();
    let conf = node.conf(100, 109);
    // Two attachments whose "<container id>-<interface>" is the same string.
    let (ns1, ns2) = (node.netns("r1"), node.netns("r2"));
    let one = node.cni_as("ADD", ("a-b", "eth0"), Some(&ns1), ("x", "n"), &conf);
    assert!(one.ok, "{}", one.json);
    let two = node.cni_as("ADD", ("a", "b-eth0"), Some(&ns2), ("x", "n"), &conf);
    assert!(two.ok, "{}", two.json);
    assert_eq!(records(&node).len(), 2, "{:?}", records(&node));
    assert!(node.cni_as("DEL", ("a-b", "eth0"), Some(&ns1), ("x", "n"), &conf).ok);
    assert_eq!(records(&node).len(), 1, "one DEL removed the other attachment's record: {:?}", records(&node));
    // The survivor is still known after a restart, and its DEL releases its address.
    node.stop_agent();
    node.start_agent();
    node.agent.as_mut().unwrap().wait_log("CNI: 1 attachment(s) restored, 0 taken apart", WITHIN);
    assert!(node.cni_as("DEL", ("a", "b-eth0"), Some(&ns2), ("x", "n"), &conf).ok);
    assert!(node.allocated().is_empty(), "{:?}", node.allocated());

    // A device of the node that happens to have the name an ADD wants (the pod name's first
    // 8 characters and 24 bits of the container id's hash) is not npagent's: it stays.
    let taken = "n-".to_string() + &sha1_hex("c-collide")[..6];
    let peer = format!("{taken}p");
    run(Command::new("ip").args([
        "-n",
        &node.tb.sandbox.netns,
        "link",
        "add",
        &taken,
        "type",
        "veth",
        "peer",
        "name",
        &peer,
    ]));
    let ns3 = node.netns("r3");
    let r = node.cni("ADD", "c-collide", Some(&ns3), "n", &conf);
    assert!(!r.ok && r.msg().contains(&taken) && r.msg().contains("not this attachment's"), "{}", r.json);
    let mut left = node.devices(&taken);
    left.sort();
    assert_eq!(left, [taken.clone(), peer], "the node's own device was deleted");
    assert!(node.allocated().is_empty(), "{:?}", node.allocated());
}

/// SHA-1 of `s` in hex, as `sha1sum` prints it.
fn sha1_hex(s: &str) -> String {
    let mut child = Command::new("sha1sum").stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    child.stdin.take().unwrap().write_all(s.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    String::from_utf8_lossy(&out.stdout).split_whitespace().next().unwrap().to_string()
}
