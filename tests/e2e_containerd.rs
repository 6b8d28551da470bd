//! npagent's CNI plugin driven by a real container runtime: Debian's containerd with its CRI
//! plugin, called over its CRI socket as kubelet calls it (RunPodSandbox, CreateContainer and
//! StartContainer, StopPodSandbox, RemovePodSandbox), on the testbed's node (userspace
//! datapath) with nothing done by hand in the pod. The image is busybox-static's, built and
//! imported here; the pod's server is the testbed's own listener from the host's Python
//! (hostPath mounts; busybox has no UDP server). Needs root, containerd, ctr, runc,
//! busybox-static and host-local (scripts/test installs them).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

mod support;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::audit_log::wait_json_line;
use support::cni_node::{all_ports, node_with, CniNode};
use support::containerd::Containerd;
use support::cri::PodRef;
use support::rootfs::{self, SHARE_IN_CONTAINER};
use support::{wait_until, write_atomic, Port};

const WITHIN: Duration = Duration::from_secs(20);

/// A pod of containerd's with the testbed's listeners running in it.
struct ServerPod {
    pod: PodRef,
    sandbox: String,
    container: String,
    ip: String,
}

/// Runs pod `namespace/name` through the CRI with a server container in it; returns once the
/// server's sockets are bound.
fn start_server_pod(node: &CniNode, containerd: &Containerd, namespace: &str, name: &str) -> ServerPod {
    let pod = PodRef::new(namespace, name);
    let started = Instant::now();
    let sandbox = containerd.run_pod(&pod).unwrap_or_else(|e| panic!("RunPodSandbox {}: {e}", pod.id()));
    eprintln!("RunPodSandbox {}: {:?}", pod.id(), started.elapsed());
    let ip = containerd.cri.pod_ip(&sandbox).unwrap();
    assert!(ip.starts_with("10.10.50."), "pod address {ip:?}");
    let share = node.tb.sandbox.dir.join("share");
    std::fs::create_dir_all(&share).unwrap();
    let mut mounts: Vec<(PathBuf, String, bool)> =
        rootfs::server_mounts().into_iter().map(|(host, container)| (host, container, true)).collect();
    mounts.push((share.clone(), SHARE_IN_CONTAINER.into(), false));
    let container = containerd
        .cri
        .start_container(&sandbox, &pod, "server", rootfs::IMAGE, &rootfs::server_command(name), &mounts)
        .unwrap_or_else(|e| panic!("CreateContainer/StartContainer in {}: {e}", pod.id()));
    containerd.created(&container);
    let pidfile = share.join(format!("{name}.pid"));
    wait_until(WITHIN, "the pod's server binds its sockets", || pidfile.exists());
    ServerPod { pod, sandbox, container, ip }
}

/// Probes from inside the pod's container (ExecSync, as `kubectl exec` does) to `to` at `ip`
/// on the three ports.
fn probe_from_pod(containerd: &Containerd, pod: &ServerPod, to: &str, ip: &str) -> Vec<(Port, bool)> {
    let target = format!("{to}={ip}");
    let cmd = ["/usr/bin/python3", "/testbed/probe.py", "probe-from", "pod", &target];
    let (code, out) = containerd.cri.exec_sync(&pod.container, &cmd).unwrap();
    assert_eq!(code, 0, "probe.py in {}: {out}", pod.pod.id());
    out.lines()
        .filter_map(|l| match l.split_whitespace().collect::<Vec<_>>().as_slice() {
            [_, _, port, ok] => Some((Port::parse(port)?, *ok == "1")),
            _ => None,
        })
        .collect()
}

/// The bridge's port of the attachment of sandbox `sandbox`, by its external_ids.
fn port_of(node: &CniNode, sandbox: &str) -> Option<String> {
    node.ports().into_iter().find(|p| {
        let ids = node.tb.sandbox.vsctl(&["get", "Port", p, "external_ids"]);
        ids.contains(&format!("container-id={sandbox}")) || ids.contains(&format!("container-id=\"{sandbox}\""))
    })
}

/// Everything a gone pod might leave: ports, veths, addresses, records.
fn leftovers(node: &CniNode) -> (Vec<String>, Vec<String>, Vec<String>, Vec<String>) {
    (node.ports(), node.veths(), node.allocated(), node.records())
}

#[test]
fn a_pod_containerd_starts_is_enforced_from_its_first_packet_and_named_in_np_log() {
    let Some((node, containerd)) = node_with::<Containerd>() else { return };
    let before = leftovers(&node);
    let n = start_server_pod(&node, &containerd, "x", "n");

    // The first packets: x/b reaches it on every port, x/c on none (n-from-b).
    assert_eq!(node.probe_to("x/b", "x/n", &n.ip), all_ports(true), "x/b -> x/n (allowed by n-from-b)");
    assert_eq!(node.probe_to("x/c", "x/n", &n.ip), all_ports(false), "x/c -> x/n (isolated by n-from-b)");
    // And back: from inside the pod it reaches x/a, which admits only it; x/c does not.
    let xa = node.tb.pod("x/a");
    let from_n = probe_from_pod(&containerd, &n, "x/a", &xa.ip);
    assert_eq!(from_n, Port::ALL.iter().map(|p| (*p, true)).collect::<Vec<_>>(), "x/n -> x/a (allowed by a-from-n)");
    assert_eq!(node.probe_to("x/c", "x/a", &xa.ip), all_ports(false), "x/c -> x/a (isolated by a-from-n)");

    // The port names the pod as containerd named it to the CNI.
    let port = port_of(&node, &n.sandbox).unwrap_or_else(|| panic!("no port of sandbox {}", n.sandbox));
    let ids = node.tb.sandbox.vsctl(&["get", "Port", &port, "external_ids"]);
    for want in ["pod-name=n", "pod-namespace=x", &format!("ip-address=\"{}\"", n.ip)] {
        assert!(ids.replace(['{', '}', ' '], ",").split(',').any(|kv| kv == want), "{want} not in {ids}");
    }

    // np.log names it: as the destination and applied-to pod of x/b's allowed and x/c's
    // dropped connections, and as the source of its own to x/a.
    let named = |v: &Value, key: &str| v[key]["namespace"] == "x" && v[key]["pod"] == "n" && v[key]["ip"] == n.ip;
    let (xb, xc) = (node.tb.pod("x/b"), node.tb.pod("x/c"));
    for (what, source, disposition) in [("x/b's allowed", &xb.ip, "Allow"), ("x/c's dropped", &xc.ip, "Drop")] {
        let line = wait_json_line(&node.np_log, 0, WITHIN, &format!("{what} connection to x/n"), |v| {
            v["disposition"] == disposition && v["source"]["ip"] == source.as_str() && named(v, "destination")
        });
        assert_eq!(line["applied_to"], json!({"namespace": "x", "pod": "n"}), "{line}");
    }
    wait_json_line(&node.np_log, 0, WITHIN, "x/n's allowed connection to x/a", |v| {
        v["disposition"] == "Allow" && named(v, "source") && v["destination"]["ip"] == xa.ip.as_str()
    });

    // StopPodSandbox and RemovePodSandbox take it apart: nothing of it is left.
    containerd.cri.remove_pod(&n.sandbox).unwrap();
    assert_eq!(leftovers(&node), before, "(ports, veths, addresses, records) after the pod's removal");
    wait_until(WITHIN, "the pod's flows leave the bridge", || node.flows_naming(&n.ip).is_empty());
}

#[test]
fn a_pod_containerd_starts_survives_an_agent_restart() {
    let Some((mut node, containerd)) = node_with::<Containerd>() else { return };
    let before = leftovers(&node);
    let n = start_server_pod(&node, &containerd, "x", "n");
    assert_eq!(node.probe_to("x/b", "x/n", &n.ip), all_ports(true));

    node.stop_agent();
    node.start_agent();
    node.agent().wait_log("CNI: 1 attachment(s) restored", WITHIN);
    assert_eq!(node.probe_to("x/b", "x/n", &n.ip), all_ports(true), "x/b -> x/n after the restart");
    assert_eq!(node.probe_to("x/c", "x/n", &n.ip), all_ports(false), "x/c -> x/n after the restart");

    // Removal after the restart takes it apart.
    containerd.cri.remove_pod(&n.sandbox).unwrap();
    assert_eq!(leftovers(&node), before, "(ports, veths, addresses, records) after the pod's removal");
    wait_until(WITHIN, "the pod's flows leave the bridge", || node.flows_naming(&n.ip).is_empty());
}

/// Sandboxes created and removed at once in [`a_hundred_sandboxes_at_once_leave_nothing`].
const SANDBOXES: usize = 100;

#[test]
fn a_hundred_sandboxes_at_once_leave_nothing() {
    let Some((node, containerd)) = node_with::<Containerd>() else { return };
    let pods: Vec<PodRef> = (0..SANDBOXES).map(|i| PodRef::new("y", &format!("m{i}"))).collect();
    let manifests: Vec<String> = pods
        .iter()
        .map(|p| format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: {}, namespace: y, labels: {{pod: m}}}}\nspec: {{containers: [{{name: c, image: i}}]}}\n", p.name))
        .collect();
    write_atomic(&node.tb.manifests_dir().join("many.yaml"), &manifests.join("---\n"));
    let before = leftovers(&node);
    let flows_before = node.flows();

    let started = Instant::now();
    let sandboxes: Vec<String> = std::thread::scope(|s| {
        let runs: Vec<_> = pods.iter().map(|pod| s.spawn(|| containerd.run_pod(pod))).collect();
        runs.into_iter()
            .zip(&pods)
            .map(|(r, p)| r.join().unwrap().unwrap_or_else(|e| panic!("{}: {e}", p.id())))
            .collect()
    });
    eprintln!("{SANDBOXES} sandboxes created at once in {:?}", started.elapsed());
    assert_eq!(node.ports().len(), before.0.len() + SANDBOXES, "ports");
    assert_eq!(node.allocated().len(), SANDBOXES, "addresses");
    assert_eq!(node.records().len(), SANDBOXES, "records");
    for (sandbox, pod) in sandboxes.iter().zip(&pods) {
        assert!(containerd.cri.pod_ip(sandbox).unwrap().starts_with("10.10.50."), "{}", pod.id());
    }

    let started = Instant::now();
    std::thread::scope(|s| {
        let removals: Vec<_> = sandboxes.iter().map(|id| s.spawn(|| containerd.cri.remove_pod(id))).collect();
        for (r, id) in removals.into_iter().zip(&sandboxes) {
            r.join().unwrap().unwrap_or_else(|e| panic!("removing {id}: {e}"));
        }
    });
    eprintln!("{SANDBOXES} sandboxes removed at once in {:?}", started.elapsed());
    assert_eq!(containerd.cri.sandboxes().unwrap(), Vec::<String>::new());
    assert_eq!(leftovers(&node), before, "(ports, veths, addresses, records) after removing them all");
    wait_until(WITHIN, "the sandboxes' flows leave the bridge", || node.flows() == flows_before);
}
