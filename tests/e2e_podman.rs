//! npagent's CNI plugin driven by a real container runtime: Debian's podman 4.3 with its CNI
//! network backend (`podman run --network`, `podman rm`), on the testbed's node (userspace
//! datapath) with nothing done by hand in the container. podman names only the container to
//! the CNI (`K8S_POD_NAME`); it hands its own `CNI_ARGS` environment on to the plugins, which
//! is how the pod's namespace is named (`CNI_ARGS=K8S_POD_NAMESPACE=x podman run ...`).
//! The image is busybox-static's, imported here; the container's server is the testbed's own
//! listener from the host's Python (read-only volumes; busybox has no UDP server). Needs root,
//! podman, runc, busybox-static and host-local (scripts/test installs them).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

mod support;

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::audit_log::wait_json_line;
use support::cni_node::{all_ports, node_with, CniNode};
use support::podman::Podman;
use support::rootfs::{self, SHARE_IN_CONTAINER};
use support::{wait_until, write_atomic, Port};

const WITHIN: Duration = Duration::from_secs(20);

/// Runs container `name` as pod `namespace/name` with the testbed's listeners in it; returns
/// its address once the server's sockets are bound.
fn start_server(node: &CniNode, podman: &Podman, namespace: &str, name: &str) -> String {
    let share = node.tb.sandbox.dir.join("share");
    std::fs::create_dir_all(&share).unwrap();
    let mut volumes: Vec<String> =
        rootfs::server_mounts().iter().map(|(host, container)| format!("{}:{container}:ro", host.display())).collect();
    volumes.push(format!("{}:{SHARE_IN_CONTAINER}", share.display()));
    let started = Instant::now();
    podman.run(namespace, name, &volumes, &rootfs::server_command(name)).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("podman run {namespace}/{name}: {:?}", started.elapsed());
    let pidfile = share.join(format!("{name}.pid"));
    wait_until(WITHIN, "the container's server binds its sockets", || pidfile.exists());
    let ip = podman.ip(name).unwrap();
    assert!(ip.starts_with("10.10.50."), "container address {ip:?}");
    ip
}

/// Probes from inside container `name` (`podman exec`) to `to` at `ip` on the three ports.
fn probe_from_container(podman: &Podman, name: &str, to: &str, ip: &str) -> Vec<(Port, bool)> {
    let target = format!("{to}={ip}");
    let out = podman
        .run_ok(None, &["exec", name, "/usr/bin/python3", "/testbed/probe.py", "probe-from", "pod", &target])
        .unwrap_or_else(|e| panic!("{e}"));
    out.lines()
        .filter_map(|l| match l.split_whitespace().collect::<Vec<_>>().as_slice() {
            [_, _, port, ok] => Some((Port::parse(port)?, *ok == "1")),
            _ => None,
        })
        .collect()
}

/// Everything a gone container might leave: ports, veths, addresses, records.
fn leftovers(node: &CniNode) -> (Vec<String>, Vec<String>, Vec<String>, Vec<String>) {
    (node.ports(), node.veths(), node.allocated(), node.records())
}

#[test]
fn a_container_podman_runs_is_enforced_from_its_first_packet_and_named_in_np_log() {
    let Some((node, podman)) = node_with::<Podman>() else { return };
    let before = leftovers(&node);
    let ip = start_server(&node, &podman, "x", "n");

    // The first packets: x/b reaches it on every port, x/c on none (n-from-b).
    assert_eq!(node.probe_to("x/b", "x/n", &ip), all_ports(true), "x/b -> x/n (allowed by n-from-b)");
    assert_eq!(node.probe_to("x/c", "x/n", &ip), all_ports(false), "x/c -> x/n (isolated by n-from-b)");
    // And back: from inside the container it reaches x/a, which admits only it; x/c does not.
    let xa = node.tb.pod("x/a");
    let from_n = probe_from_container(&podman, "n", "x/a", &xa.ip);
    assert_eq!(from_n, Port::ALL.iter().map(|p| (*p, true)).collect::<Vec<_>>(), "x/n -> x/a (allowed by a-from-n)");
    assert_eq!(node.probe_to("x/c", "x/a", &xa.ip), all_ports(false), "x/c -> x/a (isolated by a-from-n)");

    // np.log names it.
    let named = |v: &Value, key: &str| v[key]["namespace"] == "x" && v[key]["pod"] == "n" && v[key]["ip"] == ip;
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

    // `podman rm` takes it apart: nothing of it is left.
    podman.remove("n").unwrap();
    assert_eq!(leftovers(&node), before, "(ports, veths, addresses, records) after the container's removal");
    wait_until(WITHIN, "the container's flows leave the bridge", || node.flows_naming(&ip).is_empty());
}

#[test]
fn without_the_namespace_in_cni_args_podman_run_fails_naming_it() {
    let Some((node, podman)) = node_with::<Podman>() else { return };
    let before = leftovers(&node);
    // podman alone sends K8S_POD_NAME only: npagent refuses to guess the namespace.
    let out =
        podman.output(None, &["run", "-d", "--name", "n", "--network", support::cni_node::NETWORK, rootfs::IMAGE]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "podman run without K8S_POD_NAMESPACE succeeded");
    assert!(stderr.contains("K8S_POD_NAMESPACE"), "podman's error does not name K8S_POD_NAMESPACE: {stderr}");
    let _ = podman.remove("n");
    assert_eq!(leftovers(&node), before, "(ports, veths, addresses, records) after the refused container");
}

#[test]
fn a_container_podman_runs_survives_an_agent_restart() {
    let Some((mut node, podman)) = node_with::<Podman>() else { return };
    let before = leftovers(&node);
    let ip = start_server(&node, &podman, "x", "n");
    assert_eq!(node.probe_to("x/b", "x/n", &ip), all_ports(true));

    node.stop_agent();
    node.start_agent();
    node.agent().wait_log("CNI: 1 attachment(s) restored", WITHIN);
    assert_eq!(node.probe_to("x/b", "x/n", &ip), all_ports(true), "x/b -> x/n after the restart");
    assert_eq!(node.probe_to("x/c", "x/n", &ip), all_ports(false), "x/c -> x/n after the restart");

    podman.remove("n").unwrap();
    assert_eq!(leftovers(&node), before, "(ports, veths, addresses, records) after the container's removal");
    wait_until(WITHIN, "the container's flows leave the bridge", || node.flows_naming(&ip).is_empty());
}

/// Containers run and removed at once in [`a_hundred_containers_at_once_leave_nothing`].
const CONTAINERS: usize = 100;
/// podman processes at a time (each takes its storage lock; more only wait).
const WORKERS: usize = 10;

#[test]
fn a_hundred_containers_at_once_leave_nothing() {
    let Some((node, podman)) = node_with::<Podman>() else { return };
    let names: Vec<String> = (0..CONTAINERS).map(|i| format!("m{i}")).collect();
    let manifests: Vec<String> = names
        .iter()
        .map(|n| format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: {n}, namespace: y, labels: {{pod: m}}}}\nspec: {{containers: [{{name: c, image: i}}]}}\n"))
        .collect();
    write_atomic(&node.tb.manifests_dir().join("many.yaml"), &manifests.join("---\n"));
    let before = leftovers(&node);
    let flows_before = node.flows();

    let each = |work: &(dyn Fn(&str) -> Result<(), String> + Sync)| {
        std::thread::scope(|s| {
            for worker in 0..WORKERS {
                let names = &names;
                s.spawn(move || {
                    for name in names.iter().skip(worker).step_by(WORKERS) {
                        work(name).unwrap_or_else(|e| panic!("{name}: {e}"));
                    }
                });
            }
        });
    };
    let started = Instant::now();
    each(&|name| podman.run("y", name, &[], &[]).map(|_| ()));
    eprintln!("{CONTAINERS} containers run, {WORKERS} at a time, in {:?}", started.elapsed());
    assert_eq!(node.ports().len(), before.0.len() + CONTAINERS, "ports");
    assert_eq!(node.allocated().len(), CONTAINERS, "addresses");
    assert_eq!(node.records().len(), CONTAINERS, "records");

    let started = Instant::now();
    each(&|name| podman.remove(name));
    eprintln!("{CONTAINERS} containers removed, {WORKERS} at a time, in {:?}", started.elapsed());
    assert_eq!(podman.containers(), Vec::<String>::new());
    assert_eq!(leftovers(&node), before, "(ports, veths, addresses, records) after removing them all");
    wait_until(WITHIN, "the containers' flows leave the bridge", || node.flows() == flows_before);
}
