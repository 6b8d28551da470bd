//! The test fixtures themselves, against real ovs-vswitchd: sandboxes side by side, restarts.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

mod support;

use support::{yaml, Sandbox};

#[test]
fn sandbox_bridge_answers_openflow15() {
    let sb = Sandbox::start();
    assert!(sb.ofp.starts_with("unix:") && sb.ofp.ends_with("/br-int.mgmt"));
    assert!(sb.dir.join("br-int.mgmt").exists());
    let show = sb.ofctl(&["show"]);
    assert!(show.contains("OFPT_FEATURES_REPLY (OF1.5)"), "{show}");
    assert_eq!(sb.vsctl(&["get", "Bridge", "br-int", "fail_mode"]).trim(), "secure");
    assert_eq!(sb.vsctl(&["get", "Bridge", "br-int", "datapath_type"]).trim(), "netdev");
    assert!(sb.dump_flows().is_empty(), "a fresh secure bridge has no flows");
}

#[test]
fn sandboxes_run_side_by_side_and_are_isolated() {
    let one = Sandbox::start();
    let two = Sandbox::start();
    assert_ne!(one.netns, two.netns);
    assert_ne!(one.vswitchd_pid(), two.vswitchd_pid());
    one.ofctl(&["add-flow", "table=0,priority=7,ip,actions=drop"]);
    assert_eq!(one.dump_flows(), vec!["priority=7,ip actions=drop".to_owned()]);
    assert!(two.dump_flows().is_empty(), "a flow leaked to the other sandbox");
    let pid_two = two.vswitchd_pid();
    drop(one);
    // the other sandbox is untouched by the first one's teardown
    assert_eq!(two.vswitchd_pid(), pid_two);
    assert!(two.ofctl(&["show"]).contains("FEATURES_REPLY"));
}

#[test]
fn sandbox_down_stops_its_daemons_and_netns() {
    let sb = Sandbox::start();
    let pid = sb.vswitchd_pid();
    let netns = sb.netns.clone();
    let dir = sb.dir.clone();
    drop(sb);
    assert!(!alive(pid), "ovs-vswitchd {pid} survived down");
    let list = support::sandbox::run(std::process::Command::new("ip").args(["netns", "list"]));
    assert!(!list.contains(&netns), "netns {netns} survived down");
    assert!(!dir.exists(), "temp run dir not removed");
}

#[test]
fn restart_vswitchd_empties_tables_and_bridge_comes_back() {
    let sb = Sandbox::start();
    sb.ofctl(&["add-flow", "priority=3,actions=drop"]);
    let before = sb.vswitchd_pid();
    sb.restart_vswitchd();
    let after = sb.vswitchd_pid();
    assert_ne!(before, after);
    assert!(!alive(before));
    assert!(sb.dump_flows().is_empty());
    sb.ofctl(&["add-flow", "priority=4,actions=drop"]);
    assert_eq!(sb.dump_flows(), vec!["priority=4 actions=drop".to_owned()]);

    sb.stop_vswitchd("KILL");
    assert!(!alive(after));
    assert!(sb.try_ofctl(&["show"]).is_err(), "switch still answers after stop");
    sb.start_vswitchd();
    assert!(sb.dump_flows().is_empty());
}

fn alive(pid: u32) -> bool {
    // a zombie is as good as gone: its parent (not us) has yet to reap it
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat.rsplit(')').next().unwrap_or("").trim_start().starts_with('Z'),
        Err(_) => false,
    }
}

// ---- testbed pods and the prober ----

use support::{Port, Reachability, Testbed};

/// With one NORMAL flow the bridge is a plain learning switch: everything reaches everything.
fn forward_all(tb: &Testbed) {
    tb.sandbox.ofctl(&["add-flow", "priority=0,actions=NORMAL"]);
}

#[test]
fn prober_sees_normal_forwarding_and_drop_flows() {
    let tb = Testbed::start();
    let pods = Reachability::standard_pods();
    assert_eq!(tb.pod_ids(), pods);

    forward_all(&tb);
    let everything = Reachability::new(&pods, true);
    assert_eq!(everything.len(), 9 * 9 * 3);
    tb.assert_reachability(&everything);

    // Stateless drops of the requests only (TCP SYN, UDP to port 80), so that replies to
    // the pods' own connections still pass: everything into x/a; UDP 80 into y/b; TCP 81
    // into z/c.
    let xa = tb.pod("x/a");
    let yb = tb.pod("y/b");
    let zc = tb.pod("z/c");
    for flow in [
        format!("priority=100,tcp,nw_dst={},tcp_flags=+syn-ack,actions=drop", xa.ip),
        format!("priority=100,udp,nw_dst={},tp_dst=80,actions=drop", xa.ip),
        format!("priority=100,udp,nw_dst={},tp_dst=80,actions=drop", yb.ip),
        format!("priority=100,tcp,nw_dst={},tp_dst=81,actions=drop", zc.ip),
    ] {
        tb.sandbox.ofctl(&["add-flow", &flow]);
    }
    tb.sandbox.flush_datapath();

    let mut expected = Reachability::new(&pods, true);
    expected
        .expect_all_ingress("x/a", false)
        .expect("*", "y/b", Some(Port::Udp80), false)
        .expect("*", "z/c", Some(Port::Tcp81), false)
        .allow_loopback();
    assert_eq!(expected.count(false), 8 * 3 + 8 + 8);
    tb.assert_reachability(&expected);
}

#[test]
fn secure_bridge_without_flows_forwards_nothing() {
    let tb = Testbed::start();
    let pods = Reachability::standard_pods();
    let started = std::time::Instant::now();
    let observed = tb.probe_all();
    let elapsed = started.elapsed();
    let mut expected = Reachability::new(&pods, false);
    expected.allow_loopback();
    expected.assert_matches(&observed);
    // only loopback (9 pods x 3 ports) answers
    assert_eq!(observed.count(true), 27);
    // the probes time out in parallel, not one after the other (243 x 0.5 s)
    assert!(elapsed.as_secs() < 10, "full matrix took {elapsed:?}");
}

#[test]
fn pods_carry_antrea_style_external_ids() {
    let tb = Testbed::start();
    let pods = tb.pods();
    assert_eq!(pods.len(), 9);
    for (i, pod) in pods.iter().enumerate() {
        let ofport = u32::try_from(i + 1).expect("small");
        assert_eq!(pod.ofport, ofport);
        assert_eq!(tb.sandbox.ofport(&pod.iface), ofport);
        let ids = tb.sandbox.vsctl(&["get", "Interface", &pod.iface, "external_ids"]);
        for want in [
            format!("pod-name={}", pod.name),
            format!("pod-namespace={}", pod.namespace),
            format!("ip-address=\"{}/16\"", pod.ip),
            format!("attached-mac=\"{}\"", pod.mac),
        ] {
            assert!(ids.contains(&want), "{}: {want} missing in {ids}", pod.id());
        }
        // eth0 inside the pod has the MAC and IP the bridge was told about
        let link = support::sandbox::run(
            std::process::Command::new("ip").args(["-n", &pod.netns, "-br", "addr", "show", "dev", "eth0"]),
        );
        assert!(link.contains(&format!("{}/16", pod.ip)), "{link}");
        let mac = support::sandbox::run(
            std::process::Command::new("ip").args(["-n", &pod.netns, "-br", "link", "show", "dev", "eth0"]),
        );
        assert!(mac.contains(&pod.mac), "{mac}");
    }
    assert_eq!(tb.pod("x/a").ip, "10.10.1.11");
    assert_eq!(tb.pod("z/c").ip, "10.10.3.13");
}

#[test]
fn manifests_describe_the_live_pods() {
    let tb = Testbed::start();
    let committed = support::sandbox::repo_path("testbed/manifests");
    let live = tb.manifests_dir();
    let mut names: Vec<String> = std::fs::read_dir(&committed)
        .expect("testbed/manifests")
        .map(|e| e.expect("dir entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names.len(), 10, "{names:?}");
    for name in &names {
        let a = std::fs::read_to_string(committed.join(name)).expect("committed manifest");
        let b = std::fs::read_to_string(live.join(name)).expect("live manifest");
        assert_eq!(a, b, "testbed/manifests/{name} differs from what the testbed writes");
    }
    for pod in tb.pods() {
        let text = std::fs::read_to_string(live.join(format!("pod-{}-{}.yaml", pod.namespace, pod.name)))
            .expect("pod manifest");
        let doc: serde_json::Value = yaml::from_str(&text).expect("pod manifest is YAML");
        let typed: k8s_openapi::api::core::v1::Pod = yaml::from_str(&text).expect("pod manifest is a Kubernetes Pod");
        assert_eq!(typed.metadata.name.as_deref(), Some(pod.name.as_str()));
        assert_eq!(doc["kind"].as_str(), Some("Pod"));
        assert_eq!(doc["metadata"]["namespace"].as_str(), Some(pod.namespace.as_str()));
        assert_eq!(doc["metadata"]["labels"]["pod"].as_str(), Some(pod.name.as_str()));
        assert_eq!(doc["status"]["podIP"].as_str(), Some(pod.ip.as_str()));
        let ports: Vec<&str> = doc["spec"]["containers"]
            .as_array()
            .expect("containers")
            .iter()
            .filter_map(|c| c["ports"][0]["name"].as_str())
            .collect();
        assert_eq!(ports, ["serve-80-tcp", "serve-81-tcp", "serve-80-udp"]);
    }
    let text = std::fs::read_to_string(live.join("namespaces.yaml")).expect("namespaces.yaml");
    let labels: Vec<(String, String)> = yaml::documents(&text)
        .expect("namespace YAML")
        .iter()
        .map(|v| {
            let name = v["metadata"]["name"].as_str().expect("name").to_owned();
            let label = v["metadata"]["labels"]["ns"].as_str().expect("ns label").to_owned();
            (name, label)
        })
        .collect();
    let want: Vec<(String, String)> = ["x", "y", "z"].iter().map(|n| (n.to_string(), n.to_string())).collect();
    assert_eq!(labels, want);
}

/// The outside hosts: ports of the node's own (no external_ids at all), addresses in the pods'
/// /16 (reached on-link, both ways), listening like the pods, and neither pods nor manifests.
#[test]
fn outside_hosts_are_routed_by_the_node() {
    let tb = Testbed::start_with_outside();
    let hosts = tb.outside_hosts();
    let listed: Vec<(String, String)> = hosts.iter().map(|h| (h.id(), h.ip.clone())).collect();
    assert_eq!(listed, Testbed::planned_outside_hosts());
    assert_eq!(
        listed,
        [("outside/h1".to_owned(), "10.10.200.10".to_owned()), ("outside/h2".to_owned(), "10.10.201.10".to_owned())]
    );
    let ports = tb.sandbox.vsctl(&["list-ports", "br-int"]);
    for h in &hosts {
        assert_eq!(h.ofport, 0);
        assert!(!ports.lines().any(|p| p == h.iface), "{}: an outside host is not on br-int: {ports}", h.id());
        let link = tb.pod_exec(&h.id(), &["ip", "-br", "addr", "show", "dev", "eth0"]);
        assert!(String::from_utf8_lossy(&link.stdout).contains(&format!("{}/24", h.ip)), "{link:?}");
        let router = tb.sandbox.netns_exec(&["ip", "-br", "addr", "show", "dev", &h.iface]);
        assert!(router.contains(&format!("{}.1/24", h.ip.rsplit_once('.').unwrap().0)), "{router}");
    }
    // The node's gateway, as npagent finds it.
    let ids = tb.sandbox.vsctl(&["get", "Interface", "gw0", "external_ids"]);
    assert_eq!(ids.trim(), "{antrea-type=gateway}");
    let gw = tb.sandbox.netns_exec(&["ip", "-br", "addr", "show", "dev", "gw0"]);
    assert!(gw.contains("10.10.0.254/16"), "{gw}");
    assert_eq!(tb.pod_ids(), Reachability::standard_pods(), "outside hosts are not pods");
    let manifests = std::fs::read_dir(tb.manifests_dir()).expect("manifests").count();
    assert_eq!(manifests, 10, "no manifest for an outside host");

    let mut ids = tb.pod_ids();
    ids.extend(hosts.iter().map(|h| h.id()));
    let mut none = Reachability::new(&ids, false);
    none.allow_loopback();
    // The outside hosts reach each other through the node's routing, not the bridge.
    none.expect("outside/h1", "outside/h2", None, true).expect("outside/h2", "outside/h1", None, true);
    none.assert_matches(&tb.probe_all_with_outside());

    forward_all(&tb);
    tb.assert_reachability(&Reachability::new(&ids, true));
    // requests to outside/h2 dropped (its own connections' replies still pass)
    let h2 = tb.host("outside/h2");
    for flow in [
        format!("priority=100,tcp,nw_dst={},tcp_flags=+syn-ack,actions=drop", h2.ip),
        format!("priority=100,udp,nw_dst={},tp_dst=80,actions=drop", h2.ip),
    ] {
        tb.sandbox.ofctl(&["add-flow", &flow]);
    }
    tb.sandbox.flush_datapath();
    let mut expected = Reachability::new(&ids, true);
    expected.expect_all_ingress("outside/h2", false).allow_loopback();
    // outside/h1 reaches outside/h2 through the node, not the bridge.
    expected.expect("outside/h1", "outside/h2", None, true);
    assert_eq!(expected.count(false), 9 * 3);
    tb.assert_reachability(&expected);
}

#[test]
fn pods_come_and_go() {
    let tb = Testbed::start();
    forward_all(&tb);
    let xd = tb.add_pod("x", "d", "10.10.1.14");
    assert_eq!(xd.ofport, 10);
    assert!(tb.manifests_dir().join("pod-x-d.yaml").exists());
    assert!(tb.reaches("x/d", "z/c", Port::Udp80));
    let ping = tb.pod_exec("x/d", &["ping", "-c1", "-W2", &tb.pod("y/a").ip]);
    assert!(ping.status.success(), "{}", String::from_utf8_lossy(&ping.stdout));
    let r = tb.probe(&["x/a", "x/d"], &["x/a", "x/d"]);
    assert_eq!(r.len(), 2 * 2 * 3);
    Reachability::new(&["x/a", "x/d"], true).assert_matches(&r);

    tb.del_pod("x", "d");
    tb.del_pod("y", "b");
    assert_eq!(tb.pods().len(), 8);
    assert!(!tb.manifests_dir().join("pod-x-d.yaml").exists());
    let ports = tb.sandbox.vsctl(&["list-ports", "br-int"]);
    assert!(!ports.contains("x-d") && !ports.contains("y-b"), "{ports}");
    let netns = support::sandbox::run(std::process::Command::new("ip").args(["netns", "list"]));
    assert!(!netns.contains(&xd.netns), "{netns}");
    // the rest still works
    let left = tb.pod_ids();
    tb.assert_reachability(&Reachability::new(&left, true));
}

#[test]
fn testbeds_run_side_by_side() {
    let one = Testbed::start();
    let two = Testbed::start();
    forward_all(&one);
    let pods = Reachability::standard_pods();
    one.assert_reachability(&Reachability::new(&pods, true));
    // same IPs and MACs on the other bridge, which has no flows: nothing leaks across
    let mut none = Reachability::new(&pods, false);
    none.allow_loopback();
    none.assert_matches(&two.probe_all());
}

#[test]
fn examples_are_kubernetes_objects() {
    use k8s_openapi::api::core::v1::Namespace;
    use k8s_openapi::api::networking::v1::NetworkPolicy;
    let dir = support::sandbox::repo_path("testbed/examples");
    let mut policies = 0;
    for entry in std::fs::read_dir(&dir).expect("testbed/examples") {
        let path = entry.expect("dir entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("read example");
        let v: serde_json::Value = yaml::from_str(&text).expect("example is YAML");
        match v["kind"].as_str() {
            Some("NetworkPolicy") => {
                let np: NetworkPolicy = yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                assert!(np.spec.is_some(), "{}", path.display());
                policies += 1;
            }
            Some("Namespace") => {
                let _: Namespace = yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            }
            Some("StagedNetworkPolicy") => {
                assert_eq!(v["apiVersion"], "policy.npagent.io/v1alpha1", "{}", path.display());
                let snp: npagent::k8s::StagedNetworkPolicy =
                    yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                assert!(snp.spec.is_some(), "{}", path.display());
            }
            Some("ClusterNetworkPolicy") => {
                assert_eq!(v["apiVersion"], "policy.networking.k8s.io/v1alpha2", "{}", path.display());
                let cnp: npagent::k8s::ClusterNetworkPolicy =
                    yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                npagent::model::cluster_policy::convert(&cnp, &mut Default::default())
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            }
            other => panic!("{}: unexpected kind {other:?}", path.display()),
        }
    }
    assert!(policies >= 3);
}

#[test]
fn wait_reachability_follows_a_live_flow_change() {
    let tb = Testbed::start();
    forward_all(&tb);
    let pods = Reachability::standard_pods();
    tb.assert_reachability(&Reachability::new(&pods, true));

    let xb = tb.pod("x/b");
    let ofp_flow = format!("priority=100,tcp,nw_dst={},tp_dst=80,tcp_flags=+syn-ack,actions=drop", xb.ip);
    let sandbox_dir = tb.sandbox.dir.clone();
    let changer = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(700));
        support::sandbox::run(
            std::process::Command::new("ovs-ofctl")
                .args(["-O", "OpenFlow15", "add-flow"])
                .arg(format!("unix:{}/br-int.mgmt", sandbox_dir.display()))
                .arg(&ofp_flow),
        );
    });
    let mut expected = Reachability::new(&pods, true);
    expected.expect("*", "x/b", Some(Port::Tcp80), false).allow_loopback();
    let took = tb.wait_reachability(&expected, std::time::Duration::from_secs(15));
    changer.join().expect("flow changer");
    assert!(took >= std::time::Duration::from_millis(700), "converged before the change: {took:?}");
}

#[test]
fn reachability_patterns_diff_and_tables() {
    let pods = Reachability::standard_pods();
    let mut r = Reachability::new(&pods, true);
    r.expect("x/*", "*/a", Some(Port::Udp80), false);
    assert!(!r.get("x/b", "y/a", Port::Udp80));
    assert!(r.get("x/b", "y/a", Port::Tcp80));
    assert!(r.get("y/b", "y/a", Port::Udp80));
    assert_eq!(r.count(false), 3 * 3);
    r.allow_loopback();
    assert!(r.get("x/a", "x/a", Port::Udp80));
    assert_eq!(r.count(false), 8);

    let all = Reachability::new(&pods, true);
    let diff = all.diff(&r);
    assert_eq!(diff.len(), 8);
    assert!(diff.contains(&"x/c -> z/a udp/80: expected true, observed false".to_owned()), "{diff:?}");
    let table = r.table(Port::Udp80);
    let row: Vec<&str> = table.lines().nth(2).expect("x/b row").split_whitespace().collect();
    assert_eq!(row, ["x/b", "X", ".", ".", "X", ".", ".", "X", ".", "."]);
    let caught = std::panic::catch_unwind(|| all.assert_matches(&r));
    assert!(caught.is_err(), "differing matrices must fail the assertion");
}

#[test]
fn failed_sandbox_start_leaves_nothing_running() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("sb");
    let script = support::sandbox::repo_path("scripts/ovs-sandbox");
    let out = support::sandbox::output(
        std::process::Command::new("bash")
            .arg(&script)
            .arg("up")
            .arg(&dir)
            .env("OVS_SANDBOX_PROTOCOLS", "NoSuchProtocol"),
    );
    // whatever happens below, do not leak daemons if the script failed to clean up
    struct Down<'a>(&'a std::path::Path, &'a std::path::Path);
    impl Drop for Down<'_> {
        fn drop(&mut self) {
            let _ = std::process::Command::new("bash").arg(self.0).arg("down").arg(self.1).output();
        }
    }
    let _down = Down(&script, &dir);
    assert!(!out.status.success(), "a bridge with a bogus protocol came up");
    let env = support::sandbox::run(std::process::Command::new("bash").arg(&script).arg("env").arg(&dir));
    let netns = env.lines().find_map(|l| l.strip_prefix("NETNS=")).expect("NETNS line").trim_matches('"').to_owned();
    let list = support::sandbox::run(std::process::Command::new("ip").args(["netns", "list"]));
    assert!(!list.contains(&netns), "netns {netns} left behind");
    let needle = dir.to_string_lossy().into_owned();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        let pid = entry.file_name().to_string_lossy().into_owned();
        if cmdline.contains(&needle) && pid.parse::<u32>().is_ok_and(alive) {
            panic!("process left behind: {pid} {cmdline}");
        }
    }
}

#[test]
fn pods_survive_a_vswitchd_restart() {
    let tb = Testbed::start();
    forward_all(&tb);
    let pods = Reachability::standard_pods();
    tb.assert_reachability(&Reachability::new(&pods, true));

    tb.sandbox.restart_vswitchd();
    // the ports come back with their ofports; the flow tables do not
    for pod in tb.pods() {
        assert_eq!(tb.sandbox.ofport(&pod.iface), pod.ofport, "{}", pod.id());
    }
    assert!(tb.sandbox.dump_flows().is_empty());
    let mut nothing = Reachability::new(&pods, false);
    nothing.allow_loopback();
    nothing.assert_matches(&tb.probe_all());

    forward_all(&tb);
    tb.assert_reachability(&Reachability::new(&pods, true));
}
