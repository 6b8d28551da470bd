//! testbed/kind/ and scripts/kind-e2e, checked as far as a machine without Docker, Kind or an
//! API server can: the Kind configs (one node; one control-plane and two workers) read with the
//! fields the issue asks for (and no field Kind would not know) and the same networks, the
//! overlay the script applies renders with `kubectl kustomize` to deploy/ plus the cluster's
//! Service range for npagent, and the script is valid bash, clean under shellcheck, documents
//! its options, checks its arguments before anything else, names what it lacks, and refers to
//! files that exist. No root, no cluster: the script runs here only against stand-ins for
//! docker, kind, kubectl and podman, which show which config it picks, that it waits for
//! npagent on every node and collects every node's logs.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

use clap::CommandFactory;
use npagent::cli::Cli;
use serde::Deserialize;

#[path = "support/kustomize.rs"]
mod kustomize;
#[path = "support/yaml.rs"]
mod yaml;

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The Kind config, as far as testbed/kind/kind-config.yaml uses it; any other field (a
/// misspelt one, which Kind would reject or ignore) fails.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct KindConfig {
    kind: String,
    api_version: String,
    networking: Networking,
    nodes: Vec<KindNode>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Networking {
    #[serde(rename = "disableDefaultCNI")]
    disable_default_cni: bool,
    pod_subnet: String,
    service_subnet: String,
    kube_proxy_mode: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct KindNode {
    role: String,
    #[serde(default)]
    kubeadm_config_patches: Vec<String>,
}

/// An IPv4 or IPv6 prefix: its address and length.
fn cidr(s: &str) -> (IpAddr, u8) {
    let (addr, len) = s.split_once('/').unwrap_or_else(|| panic!("{s}: not ADDR/LEN"));
    let addr: IpAddr = addr.parse().unwrap_or_else(|e| panic!("{s}: {e}"));
    let len: u8 = len.parse().unwrap_or_else(|e| panic!("{s}: {e}"));
    assert!(npagent::model::cidr::parse_cidr(s).is_ok(), "{s}: npagent refuses it");
    (addr, len)
}

/// Whether two IPv4 prefixes share an address.
fn overlap(a: (IpAddr, u8), b: (IpAddr, u8)) -> bool {
    let (IpAddr::V4(x), IpAddr::V4(y)) = (a.0, b.0) else { return false };
    let len = a.1.min(b.1);
    let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
    (u32::from(x) & mask) == (u32::from(y) & mask)
}

fn kind_config() -> KindConfig {
    kind_config_at("testbed/kind/kind-config.yaml")
}

fn kind_config_at(rel: &str) -> KindConfig {
    let path = repo(rel);
    yaml::from_str(&read(&path)).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A node's kubeadm config patches, as JSON values.
fn kubeadm_patches(node: &KindNode) -> Vec<serde_json::Value> {
    node.kubeadm_config_patches
        .iter()
        .map(|p| yaml::from_str(p).unwrap_or_else(|e| panic!("kubeadm patch {p:?}: {e}")))
        .collect()
}

#[test]
fn kind_config_disables_the_default_cni_on_one_untainted_node() {
    let config = kind_config();
    assert_eq!((config.kind.as_str(), config.api_version.as_str()), ("Cluster", "kind.x-k8s.io/v1alpha4"));
    let net = &config.networking;
    assert!(net.disable_default_cni, "kindnet would attach the pods instead of npagent");
    let pods = cidr(&net.pod_subnet);
    let services = cidr(&net.service_subnet);
    assert!(pods.1 <= 24, "the node's podCIDR (a /24 by default) comes from {}", net.pod_subnet);
    assert!(!overlap(pods, services), "{} and {} overlap", net.pod_subnet, net.service_subnet);
    assert_eq!(net.kube_proxy_mode, "iptables", "kube-proxy on the node handles the ClusterIPs");

    assert_eq!(config.nodes.len(), 1, "a single node");
    let node = &config.nodes[0];
    assert_eq!(node.role, "control-plane");
    // Untainted: kubeadm's InitConfiguration gives the control-plane node no taint.
    let patches = kubeadm_patches(node);
    let init = patches.iter().find(|p| p["kind"] == "InitConfiguration").expect("an InitConfiguration patch");
    assert_eq!(init["nodeRegistration"]["taints"], serde_json::json!([]), "no taint on the node: {init}");
}

#[test]
fn kind_config_3_nodes_is_one_control_plane_and_two_workers_on_the_same_networks() {
    let one = kind_config();
    let config = kind_config_at("testbed/kind/kind-config-3-nodes.yaml");
    assert_eq!((config.kind.as_str(), config.api_version.as_str()), ("Cluster", "kind.x-k8s.io/v1alpha4"));
    let net = &config.networking;
    assert!(net.disable_default_cni, "kindnet would attach the pods instead of npagent");
    // The overlay, which both clusters get, tells npagent the one-node config's Service range.
    assert_eq!(
        (net.pod_subnet.as_str(), net.service_subnet.as_str(), net.kube_proxy_mode.as_str()),
        (
            one.networking.pod_subnet.as_str(),
            one.networking.service_subnet.as_str(),
            one.networking.kube_proxy_mode.as_str()
        ),
        "podSubnet, serviceSubnet and kubeProxyMode as in kind-config.yaml"
    );
    let pods = cidr(&net.pod_subnet);
    let services = cidr(&net.service_subnet);
    assert!(!overlap(pods, services), "{} and {} overlap", net.pod_subnet, net.service_subnet);
    // The controller manager gives each Node a /24 (its default --node-cidr-mask-size) from it.
    assert!(pods.1 <= 24 && 1u64 << (24 - pods.1) >= 3, "no room for three /24 podCIDRs in {}", net.pod_subnet);
    // Kind's Docker network, where the nodes' InternalIPs (the routes' next hops) come from,
    // takes its range from Docker's default pools.
    for pool in ["172.16.0.0/12", "192.168.0.0/16"] {
        for (what, range) in [("podSubnet", pods), ("serviceSubnet", services)] {
            assert!(!overlap(range, cidr(pool)), "{what} overlaps Docker's default pool {pool}");
        }
    }

    let roles: Vec<&str> = config.nodes.iter().map(|n| n.role.as_str()).collect();
    assert_eq!(roles.iter().filter(|r| **r == "control-plane").count(), 1, "one control-plane: {roles:?}");
    assert_eq!(roles.iter().filter(|r| **r == "worker").count(), 2, "two workers: {roles:?}");
    assert_eq!(roles.len(), 3, "nothing else: {roles:?}");
    // Kind's own taints: the control-plane node keeps kubeadm's (the suite's pods go to the
    // workers), the workers have none. No patch changes them.
    for node in &config.nodes {
        for patch in kubeadm_patches(node) {
            assert!(patch["nodeRegistration"]["taints"].is_null(), "{} node: a patch sets taints: {patch}", node.role);
        }
    }
}

#[test]
fn kind_overlay_is_deploy_with_the_service_range() {
    let rendered = kustomize::render(&repo("testbed/kind/overlay"));
    let deploy = kustomize::render(&repo("deploy"));
    let keys = |v: &[serde_json::Value]| v.iter().map(kustomize::key).collect::<Vec<_>>();
    assert_eq!(keys(&rendered), keys(&deploy), "the same objects as deploy/");
    let service_subnet = kind_config().networking.service_subnet;

    // npagent reads the variable the overlay sets as --service-cidr.
    let cmd = Cli::command();
    let run = cmd.find_subcommand("run").expect("run");
    let flag = run.get_arguments().find(|a| a.get_long() == Some("service-cidr")).expect("--service-cidr");
    let var = flag.get_env().expect("an env var").to_string_lossy().into_owned();

    // Containers by name: a strategic merge patch moves the one it patches to the front.
    let by_name = |v: &mut serde_json::Value| {
        if let Some(cs) = v["spec"]["template"]["spec"]["containers"].as_array_mut() {
            cs.sort_by_key(|c| c["name"].as_str().unwrap_or_default().to_owned());
        }
    };
    for (got, want) in rendered.iter().zip(&deploy) {
        let (mut got, mut want) = (got.clone(), want.clone());
        by_name(&mut got);
        by_name(&mut want);
        if want["kind"] == "DaemonSet" {
            let containers = want["spec"]["template"]["spec"]["containers"].as_array_mut().expect("containers");
            let agent = containers.iter_mut().find(|c| c["name"] == "npagent").expect("npagent container");
            let env = agent["env"].as_array_mut().expect("env");
            assert!(env.iter().all(|e| e["name"] != var.as_str()), "deploy/ sets {var} itself");
            env.insert(0, serde_json::json!({"name": var, "value": service_subnet}));
        }
        assert_eq!(got, want, "{:?}: the overlay changes more than the Service range", kustomize::key(&got));
    }
}

/// scripts/kind-e2e.
fn script() -> PathBuf {
    repo("scripts/kind-e2e")
}

#[test]
fn kind_e2e_is_valid_bash_and_clean_under_shellcheck() {
    let out = Command::new("bash").arg("-n").arg(script()).output().expect("bash");
    assert!(out.status.success(), "bash -n: {}", String::from_utf8_lossy(&out.stderr));
    let out = Command::new("shellcheck").arg(script()).output().unwrap_or_else(|e| {
        panic!("cannot run shellcheck ({e}): scripts/test installs it (Debian: apt-get install shellcheck)")
    });
    assert!(out.status.success(), "shellcheck:\n{}", String::from_utf8_lossy(&out.stdout));
}

#[test]
fn kind_e2e_documents_its_options_and_names_what_it_lacks() {
    let out = Command::new(script()).arg("--help").output().expect("run kind-e2e --help");
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && help.starts_with("Runs the upstream Kubernetes NetworkPolicy e2e suite"));
    assert!(!help.contains("set -euo"), "the help is the header only:\n{help}");
    // Every option the parser takes is documented, and only those.
    let text = read(&script());
    let parser = text.split("while (($#)); do").nth(1).and_then(|t| t.split("\ndone").next()).expect("the parser");
    let mut taken: Vec<&str> = parser
        .split(|c: char| c.is_whitespace() || c == '|' || c == ')')
        .filter(|w| w.starts_with("--") && w.len() > 2 && *w != "--help")
        .collect();
    taken.sort_unstable();
    taken.dedup();
    assert_eq!(taken.len(), 9, "{taken:?}");
    for option in &taken {
        assert!(help.contains(&format!("\n{option} ")), "--help does not describe {option}:\n{help}");
    }

    // Without its tools it stops at once, naming the first missing one.
    let (code, err) = without_tools(&["--no-build"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("scripts/kind-e2e: error: docker not found"), "{err}");
    let out = Command::new(script()).arg("--name").output().expect("run kind-e2e");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--name needs a value"));
}

/// Runs kind-e2e with `args` where PATH has bash and dirname only: its exit code and stderr.
fn without_tools(args: &[&str]) -> (Option<i32>, String) {
    let bin = tempfile::Builder::new().prefix("npa-kind-path-").tempdir().expect("temp dir");
    for tool in ["bash", "dirname"] {
        let found = ["/usr/bin", "/bin"].iter().map(|d| Path::new(d).join(tool)).find(|p| p.exists()).expect(tool);
        std::os::unix::fs::symlink(found, bin.path().join(tool)).expect("symlink");
    }
    let out = Command::new(bin.path().join("bash"))
        .arg(script())
        .args(args)
        .env_clear()
        .env("PATH", bin.path())
        .output()
        .expect("run kind-e2e");
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn kind_e2e_checks_its_arguments_before_it_needs_any_tool() {
    // 1 and 3 pass the check and get as far as the first tool.
    for n in ["1", "3"] {
        let (code, err) = without_tools(&["--nodes", n, "--no-build"]);
        assert_eq!(code, Some(1), "--nodes {n}: {err}");
        assert!(err.contains("scripts/kind-e2e: error: docker not found"), "--nodes {n}: {err}");
    }
    // Any other size stops it first, whatever comes after.
    for n in ["7", "2", "0", "three", ""] {
        let (code, err) = without_tools(&["--nodes", n, "--no-build"]);
        assert_eq!(code, Some(1), "--nodes {n:?}: {err}");
        assert!(
            err.contains(&format!("scripts/kind-e2e: error: --nodes {n}: the cluster has 1 or 3 nodes")),
            "--nodes {n:?}: {err}"
        );
        assert!(!err.contains("not found"), "--nodes {n:?} checked after the tools: {err}");
    }
    let (code, err) = without_tools(&["--no-build", "--nodes"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("scripts/kind-e2e: error: --nodes needs a value"), "{err}");
}

/// Stands in for docker, kind, kubectl, podman, curl, tar and e2e.test: logs each call to
/// $STUB_LOG, one line each, and answers as a Kind cluster of the nodes in $STUB_NODES whose
/// npagent DaemonSet reports $STUB_READY (numberReady/desiredNumberScheduled) would.
const STAND_IN: &str = r#"#!/bin/bash
tool=${0##*/}
echo "$tool $*" >>"$STUB_LOG"
read -ra nodes <<<"$STUB_NODES"
case "$tool $*" in
    "docker cp "*) mkdir -p "$3" && echo "np.log of ${2%%:*}" >"$3/np.log" ;;
    "kind create cluster "*) while (($#)); do [[ $1 == --kubeconfig ]] && touch "$2"; shift; done ;;
    "kind get nodes "*) printf '%s\n' "${nodes[@]}" ;;
    "podman save "*) while (($#)); do [[ $1 == -o ]] && touch "$2"; shift; done ;;
    *" get nodes -o name"*) printf 'node/%s\n' "${nodes[@]}" ;;
    *" get daemonset/npagent "*) printf '%s' "$STUB_READY" ;;
    *" get pods -l "*) for n in "${nodes[@]}"; do echo "npagent-$n $n"; done ;;
    *" logs "*" --previous"*) exit 1 ;;
    *" logs pod/"*) echo "log of $*" ;;
esac
exit 0
"#;

/// What a run of kind-e2e against the stand-ins left.
struct StandInRun {
    code: Option<i32>,
    stderr: String,
    calls: Vec<String>,
    out: tempfile::TempDir,
}

/// Runs `kind-e2e --no-build` with `args` against the stand-ins (first in PATH, the system's
/// own tools after them), for a cluster `nodes` whose DaemonSet reports `ready`.
fn with_stand_ins(args: &[&str], nodes: &[&str], ready: &str) -> StandInRun {
    let bin = tempfile::Builder::new().prefix("npa-kind-bin-").tempdir().expect("temp dir");
    let out = tempfile::Builder::new().prefix("npa-kind-out-").tempdir().expect("temp dir");
    let stub = bin.path().join("stand-in");
    std::fs::write(&stub, STAND_IN).expect("write the stand-in");
    std::fs::set_permissions(&stub, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
    for tool in ["docker", "kind", "kubectl", "podman", "curl", "tar", "e2e.test"] {
        std::os::unix::fs::symlink(&stub, bin.path().join(tool)).expect("symlink");
    }
    let log = bin.path().join("calls");
    let run = Command::new("bash")
        .arg(script())
        .args(["--no-build", "--output"])
        .arg(out.path())
        .arg("--e2e-test")
        .arg(bin.path().join("e2e.test"))
        .args(args)
        .env("PATH", format!("{}:/usr/bin:/bin", bin.path().display()))
        .env("STUB_LOG", &log)
        .env("STUB_NODES", nodes.join(" "))
        .env("STUB_READY", ready)
        .output()
        .expect("run kind-e2e");
    let calls = std::fs::read_to_string(&log).unwrap_or_default().lines().map(str::to_owned).collect();
    StandInRun { code: run.status.code(), stderr: String::from_utf8_lossy(&run.stderr).into_owned(), calls, out }
}

impl StandInRun {
    fn called(&self, prefix: &str) -> Vec<&str> {
        self.calls.iter().filter(|c| c.starts_with(prefix)).map(String::as_str).collect()
    }

    /// Asserts that every node's np.log and npagent pod's container logs were collected.
    fn collected_from(&self, nodes: &[&str]) {
        let dir = self.out.path().join("nodes");
        let mut got: Vec<String> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}\n{}", dir.display(), self.stderr))
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        got.sort_unstable();
        let mut want: Vec<String> = nodes.iter().map(|n| (*n).to_owned()).collect();
        want.sort_unstable();
        assert_eq!(got, want, "one directory per node under {}", dir.display());
        for node in nodes {
            let np = read(&dir.join(node).join("np-log/np.log"));
            assert_eq!(np.trim(), format!("np.log of {node}"), "{node}'s np.log");
            for c in ["install-cni", "ovs", "npagent"] {
                let log = read(&dir.join(node).join(format!("{c}.log")));
                assert!(log.contains(&format!("logs pod/npagent-{node} -c {c}")), "{node}'s {c} log: {log}");
            }
        }
    }
}

#[test]
fn kind_e2e_picks_the_config_loads_waits_and_collects_on_every_node() {
    let three = ["npagent-e2e-control-plane", "npagent-e2e-worker", "npagent-e2e-worker2"];
    let run = with_stand_ins(&["--nodes", "3"], &three, "3/3");
    assert_eq!(run.code, Some(0), "{}\n{:#?}", run.stderr, run.calls);
    let create = run.called("kind create cluster");
    assert_eq!(create.len(), 1, "{:#?}", run.calls);
    let config = repo("testbed/kind/kind-config-3-nodes.yaml");
    assert!(create[0].contains(&format!(" --config {} ", config.display())), "{}", create[0]);
    // `kind load` without --nodes loads onto every node of the cluster.
    let loads = run.called("kind load image-archive");
    assert_eq!(loads.len(), 2, "both images: {loads:#?}");
    assert!(loads.iter().all(|l| l.ends_with(" --name npagent-e2e")), "onto every node: {loads:#?}");
    for wait in ["rollout status daemonset/npagent", "wait --for=condition=Ready nodes --all"] {
        assert!(run.calls.iter().any(|c| c.starts_with("kubectl ") && c.contains(wait)), "no {wait}: {:#?}", run.calls);
    }
    run.collected_from(&three);

    // One node by default.
    let run = with_stand_ins(&[], &["npagent-e2e-control-plane"], "1/1");
    assert_eq!(run.code, Some(0), "{}\n{:#?}", run.stderr, run.calls);
    let config = repo("testbed/kind/kind-config.yaml");
    assert!(run.called("kind create cluster")[0].contains(&format!(" --config {} ", config.display())));
    run.collected_from(&["npagent-e2e-control-plane"]);

    // npagent ready on two nodes of three: no suite; the logs are collected all the same.
    let run = with_stand_ins(&["--nodes", "3"], &three, "2/3");
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert!(run.stderr.contains("error: npagent ready/scheduled on 2/3 nodes, not on all 3"), "{}", run.stderr);
    assert!(run.called("e2e.test").is_empty(), "the suite ran: {:#?}", run.calls);
    run.collected_from(&three);
    assert_eq!(run.called("kind delete cluster").len(), 1, "{:#?}", run.calls);

    // Two nodes registered where three should be.
    let run = with_stand_ins(&["--nodes", "3"], &three[..2], "2/2");
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert!(run.stderr.contains("error: the cluster has 2 nodes, not 3"), "{}", run.stderr);
    assert!(run.called("e2e.test").is_empty(), "the suite ran: {:#?}", run.calls);
}

#[test]
fn kind_e2e_refers_to_files_that_exist() {
    let text = read(&script());
    let mut referred = Vec::new();
    for part in text.split("\"$repo/").skip(1) {
        let path = part.split('"').next().expect("a path");
        referred.push(path.to_owned());
    }
    for want in [
        "scripts/build-image",
        "scripts/build-ovs-image",
        "testbed/kind/kind-config.yaml",
        "testbed/kind/kind-config-3-nodes.yaml",
        "testbed/kind/overlay",
    ] {
        assert!(referred.iter().any(|p| p == want), "kind-e2e does not use {want}: {referred:?}");
    }
    for path in &referred {
        assert!(repo(path).exists(), "kind-e2e refers to {path}, which does not exist");
    }
}
