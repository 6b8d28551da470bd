//! deploy/: every manifest the kustomization lists, read with k8s-openapi's types (a field
//! those types do not know fails, as a misspelt one would otherwise be dropped silently by the
//! API server), the DaemonSet's container checked against npagent's own command line, and the
//! ClusterRole against what the kube-rs watchers use. No root, no cluster.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

use clap::{CommandFactory, Parser};
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Container, HTTPGetAction, Namespace, PodSpec, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use npagent::cli::Cli;
use npagent::source::kube::{VERBS, WATCHED_RESOURCES};
use serde::Deserialize;

#[path = "support/yaml.rs"]
mod yaml;

/// One object of deploy/, typed.
#[derive(Debug)]
enum Manifest {
    Namespace(Namespace),
    ServiceAccount(ServiceAccount),
    ClusterRole(ClusterRole),
    ClusterRoleBinding(ClusterRoleBinding),
    DaemonSet(Box<DaemonSet>),
}

/// The kustomization: only `resources`, so that no transformer changes the objects between
/// these files and the cluster.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Kustomization {
    api_version: String,
    kind: String,
    resources: Vec<String>,
}

fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The YAML documents of `text` as JSON values (empty documents skipped).
fn documents(text: &str) -> Result<Vec<serde_json::Value>, String> {
    yaml::documents(text).map_err(|e| e.to_string())
}

/// The first place where `want` and `got` differ, as a JSON path, or None.
fn first_difference(path: &str, want: &serde_json::Value, got: &serde_json::Value) -> Option<String> {
    use serde_json::Value::{Array, Object};
    match (want, got) {
        (Object(a), Object(b)) => {
            let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            keys.into_iter().find_map(|k| match (a.get(k), b.get(k)) {
                (Some(x), Some(y)) => first_difference(&format!("{path}.{k}"), x, y),
                (Some(_), None) => Some(format!("{path}.{k} is not a field of the type (misspelt or unknown)")),
                (None, Some(_)) => Some(format!("{path}.{k} appears only after the round trip")),
                (None, None) => None,
            })
        }
        (Array(a), Array(b)) if a.len() == b.len() => {
            a.iter().zip(b).enumerate().find_map(|(i, (x, y))| first_difference(&format!("{path}[{i}]"), x, y))
        }
        _ if want == got => None,
        _ => Some(format!("{path}: {want} reads back as {got}")),
    }
}

/// `doc` as `T`, or why not: it does not deserialize, or serializing it again does not give
/// the same JSON (a field `T` does not know, or a value it changes).
fn typed<T>(doc: &serde_json::Value) -> Result<T, String>
where
    T: serde::de::DeserializeOwned + serde::Serialize,
{
    let value: T = serde_json::from_value(doc.clone()).map_err(|e| e.to_string())?;
    let back = serde_json::to_value(&value).map_err(|e| e.to_string())?;
    match first_difference("", doc, &back) {
        None => Ok(value),
        Some(diff) => Err(diff),
    }
}

/// One document as the manifest of its kind.
fn manifest(doc: &serde_json::Value) -> Result<Manifest, String> {
    let kind = doc["kind"].as_str().ok_or("no kind")?;
    Ok(match kind {
        "Namespace" => Manifest::Namespace(typed(doc)?),
        "ServiceAccount" => Manifest::ServiceAccount(typed(doc)?),
        "ClusterRole" => Manifest::ClusterRole(typed(doc)?),
        "ClusterRoleBinding" => Manifest::ClusterRoleBinding(typed(doc)?),
        "DaemonSet" => Manifest::DaemonSet(Box::new(typed(doc)?)),
        other => return Err(format!("kind {other} is not one deploy/ is expected to hold")),
    })
}

/// Every object of deploy/, from the files the kustomization lists, in order.
fn load() -> Vec<Manifest> {
    let dir = deploy_dir();
    let k: Kustomization = yaml::from_str(&read(&dir.join("kustomization.yaml")))
        .unwrap_or_else(|e| panic!("deploy/kustomization.yaml: {e}"));
    assert_eq!(k.api_version, "kustomize.config.k8s.io/v1beta1");
    assert_eq!(k.kind, "Kustomization");
    let mut out = Vec::new();
    for res in &k.resources {
        let rel = Path::new(res);
        assert!(
            rel.components().all(|c| matches!(c, Component::Normal(_))),
            "kustomization resource {res}: not a file inside deploy/"
        );
        let path = dir.join(rel);
        assert!(path.is_file(), "kustomization resource {res} does not exist");
        let docs = documents(&read(&path)).unwrap_or_else(|e| panic!("deploy/{res}: {e}"));
        assert!(!docs.is_empty(), "deploy/{res} holds no object");
        for (i, doc) in docs.iter().enumerate() {
            out.push(manifest(doc).unwrap_or_else(|e| panic!("deploy/{res}, document {}: {e}", i + 1)));
        }
    }
    // A manifest the kustomization does not list would never be applied.
    let listed: BTreeSet<&str> = k.resources.iter().map(String::as_str).collect();
    assert_eq!(listed.len(), k.resources.len(), "a resource is listed twice: {:?}", k.resources);
    for entry in std::fs::read_dir(&dir).expect("deploy/") {
        let name = entry.expect("dir entry").file_name().to_string_lossy().into_owned();
        if name != "kustomization.yaml"
            && (name.ends_with(".yaml") || name.ends_with(".yml") || name.ends_with(".json"))
        {
            assert!(listed.contains(name.as_str()), "deploy/{name} is not in the kustomization's resources");
        }
    }
    out
}

/// The one object of a kind.
macro_rules! one {
    ($all:expr, $kind:ident) => {{
        let found: Vec<_> = $all
            .iter()
            .filter_map(|m| match m {
                Manifest::$kind(x) => Some(x),
                _ => None,
            })
            .collect();
        assert_eq!(found.len(), 1, "deploy/ should hold exactly one {}", stringify!($kind));
        found[0]
    }};
}

fn pod_spec(ds: &DaemonSet) -> &PodSpec {
    ds.spec.as_ref().and_then(|s| s.template.spec.as_ref()).expect("DaemonSet pod spec")
}

fn container(ds: &DaemonSet) -> &Container {
    let spec = pod_spec(ds);
    assert_eq!(spec.containers.len(), 1, "one container");
    assert!(spec.init_containers.is_none(), "no init containers");
    &spec.containers[0]
}

/// The container's command line as npagent sees it.
fn command_line(c: &Container) -> Vec<String> {
    assert!(c.command.is_none(), "the image's entrypoint runs npagent; set args, not command");
    let mut argv = vec!["npagent".to_owned()];
    argv.extend(c.args.clone().unwrap_or_default());
    argv
}

/// The raw value npagent's `run` takes for its option `--long`, given or defaulted.
fn run_value(argv: &[String], long: &str) -> String {
    let cmd = Cli::command();
    let run = cmd.find_subcommand("run").expect("run subcommand");
    let arg = run
        .get_arguments()
        .find(|a| a.get_long() == Some(long))
        .unwrap_or_else(|| panic!("npagent run has no --{long}"));
    let matches = Cli::command().try_get_matches_from(argv).unwrap_or_else(|e| panic!("{e}"));
    let run = matches.subcommand_matches("run").expect("args start with run");
    let raw = run
        .get_raw(arg.get_id().as_str())
        .and_then(|mut v| v.next())
        .unwrap_or_else(|| panic!("no value for --{long}"));
    raw.to_string_lossy().into_owned()
}

/// Where the container mounts the hostPath volume of host directory `host`; and whether
/// read-only.
fn mount_of_host_dir(ds: &DaemonSet, host: &str) -> (String, bool) {
    let spec = pod_spec(ds);
    let volume = spec
        .volumes
        .iter()
        .flatten()
        .find(|v| v.host_path.as_ref().is_some_and(|h| h.path == host))
        .unwrap_or_else(|| panic!("no hostPath volume of {host}"));
    let mount = container(ds)
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| m.name == volume.name)
        .unwrap_or_else(|| panic!("volume {} is not mounted", volume.name));
    (mount.mount_path.clone(), mount.read_only == Some(true))
}

#[test]
fn every_manifest_reads_back_unchanged_with_the_kubernetes_types() {
    let all = load();
    assert_eq!(all.len(), 5, "{all:#?}");
}

#[test]
fn a_misspelt_or_unknown_field_is_caught() {
    let ds = documents(&read(&deploy_dir().join("daemonset.yaml"))).expect("daemonset.yaml");
    let ds = ds.into_iter().find(|d| d["kind"] == "DaemonSet").expect("a DaemonSet");
    assert!(manifest(&ds).is_ok());

    let mut misspelt = ds.clone();
    let spec = misspelt["spec"]["template"]["spec"].as_object_mut().expect("pod spec");
    let value = spec.remove("hostNetwork").expect("hostNetwork is set");
    spec.insert("hostNetwrok".into(), value);
    let err = manifest(&misspelt).expect_err("a misspelt field must fail");
    assert!(err.contains(".spec.template.spec.hostNetwrok"), "{err}");

    let mut deep = ds.clone();
    deep["spec"]["template"]["spec"]["containers"][0]["securityContext"]["capabilites"] =
        serde_json::json!({"add": ["NET_ADMIN"]});
    let err = manifest(&deep).expect_err("an unknown nested field must fail");
    assert!(err.contains("securityContext.capabilites"), "{err}");

    let mut kind = ds.clone();
    kind["kind"] = "Deployment".into();
    assert!(manifest(&kind).is_err(), "a kind deploy/ does not hold");
    let mut version = ds;
    version["apiVersion"] = "extensions/v1beta1".into();
    assert!(manifest(&version).is_err(), "a DaemonSet of another API version");
}

#[test]
fn daemonset_args_parse_with_npagents_own_command_line() {
    let all = load();
    let c = container(one!(all, DaemonSet));
    let argv = command_line(c);
    assert_eq!(argv.get(1).map(String::as_str), Some("run"), "the container runs `npagent run`: {argv:?}");
    if let Err(e) = Cli::try_parse_from(&argv) {
        panic!("deploy/daemonset.yaml args do not parse: {e}");
    }
    // The image test runs the image's binary with its defaults at the DaemonSet's mount
    // points, so the DaemonSet's paths must be those defaults.
    let defaults = ["npagent".to_owned(), "run".to_owned()];
    for long in ["ofp", "ovsdb", "audit-log"] {
        assert_eq!(run_value(&argv, long), run_value(&defaults, long), "--{long}");
    }
}

#[test]
fn daemonset_env_vars_are_read_by_npagent_and_name_the_node() {
    let all = load();
    let c = container(one!(all, DaemonSet));
    let cmd = Cli::command();
    let run = cmd.find_subcommand("run").expect("run subcommand");
    let read: BTreeSet<String> = cmd
        .get_arguments()
        .chain(run.get_arguments())
        .filter_map(|a| a.get_env())
        .map(|e| e.to_string_lossy().into_owned())
        .collect();
    let env = c.env.clone().unwrap_or_default();
    assert!(!env.is_empty(), "the node name comes from the environment");
    for var in &env {
        assert!(read.contains(&var.name), "npagent reads no {} (it reads {read:?})", var.name);
    }
    let node = run.get_arguments().find(|a| a.get_long() == Some("node")).expect("--node");
    let node_env = node.get_env().expect("--node has an env var").to_string_lossy().into_owned();
    let var = env.iter().find(|v| v.name == node_env).unwrap_or_else(|| panic!("{node_env} is not set"));
    let field = var.value_from.as_ref().and_then(|f| f.field_ref.as_ref()).map(|f| f.field_path.as_str());
    assert_eq!(field, Some("spec.nodeName"), "{node_env} from the downward API");
    assert!(var.value.is_none());
}

#[test]
fn daemonset_mounts_the_ovs_sockets_and_the_audit_log_directory() {
    let all = load();
    let ds = one!(all, DaemonSet);
    let argv = command_line(container(ds));
    let (ovs, ovs_read_only) = mount_of_host_dir(ds, "/var/run/openvswitch");
    assert!(ovs_read_only, "connecting to a unix socket needs no write access to the mount");
    for long in ["ofp", "ovsdb"] {
        let endpoint = run_value(&argv, long);
        let path = endpoint.strip_prefix("unix:").unwrap_or_else(|| panic!("--{long} {endpoint}: a unix socket"));
        assert_eq!(Path::new(path).parent(), Some(Path::new(&ovs)), "--{long} {endpoint} in the OVS mount");
    }
    let (audit, audit_read_only) = mount_of_host_dir(ds, "/var/log/antrea/networkpolicy");
    assert!(!audit_read_only, "np.log is written");
    let log = run_value(&argv, "audit-log");
    assert_eq!(Path::new(&log).parent(), Some(Path::new(&audit)), "--audit-log {log}");
    let volumes = pod_spec(ds).volumes.clone().unwrap_or_default();
    assert_eq!(volumes.len(), 2, "only the two host directories: {volumes:#?}");
    for v in &volumes {
        let host = v.host_path.as_ref().expect("hostPath volumes only");
        let want = if host.path == "/var/run/openvswitch" { "Directory" } else { "DirectoryOrCreate" };
        assert_eq!(host.type_.as_deref(), Some(want), "{}", host.path);
    }
}

#[test]
fn daemonset_probes_reach_the_admin_server() {
    let all = load();
    let c = container(one!(all, DaemonSet));
    let admin = run_value(&command_line(c), "admin-addr");
    let admin: std::net::SocketAddr = admin.parse().unwrap_or_else(|e| panic!("--admin-addr {admin}: {e}"));
    assert!(admin.ip().is_loopback(), "the admin server stays on the node's loopback: {admin}");
    let probe = |name: &str, p: Option<&k8s_openapi::api::core::v1::Probe>| -> HTTPGetAction {
        p.and_then(|p| p.http_get.clone()).unwrap_or_else(|| panic!("{name}: an httpGet probe"))
    };
    for (name, get, path) in [
        ("livenessProbe", probe("livenessProbe", c.liveness_probe.as_ref()), "/livez"),
        ("readinessProbe", probe("readinessProbe", c.readiness_probe.as_ref()), "/readyz"),
    ] {
        assert_eq!(get.host.as_deref(), Some(admin.ip().to_string().as_str()), "{name} host");
        assert_eq!(get.port, IntOrString::Int(i32::from(admin.port())), "{name} port");
        assert_eq!(get.path.as_deref(), Some(path), "{name} path");
        assert!(get.scheme.is_none() || get.scheme.as_deref() == Some("HTTP"), "{name} scheme");
    }
}

#[test]
fn daemonset_runs_on_every_node_with_the_node_network() {
    let all = load();
    let ds = one!(all, DaemonSet);
    let spec = pod_spec(ds);
    assert_eq!(spec.host_network, Some(true));
    assert_eq!(spec.dns_policy.as_deref(), Some("ClusterFirstWithHostNet"));
    assert_eq!(spec.priority_class_name.as_deref(), Some("system-node-critical"));
    assert!(spec.host_pid.is_none() && spec.host_ipc.is_none(), "no host PID or IPC namespace");
    let tolerates_all =
        spec.tolerations.iter().flatten().any(|t| {
            t.operator.as_deref() == Some("Exists") && t.key.is_none() && t.effect.is_none() && t.value.is_none()
        });
    assert!(tolerates_all, "a toleration of every taint: {:?}", spec.tolerations);
    assert!(spec.termination_grace_period_seconds.is_some_and(|s| s >= 10), "time to flush np.log");
    let update = ds.spec.as_ref().and_then(|s| s.update_strategy.as_ref()).expect("updateStrategy");
    assert_eq!(update.type_.as_deref(), Some("RollingUpdate"));
    let unavailable = update.rolling_update.as_ref().and_then(|r| r.max_unavailable.as_ref());
    assert_eq!(unavailable, Some(&IntOrString::Int(1)));
    let selector = ds.spec.as_ref().and_then(|s| s.selector.match_labels.clone()).expect("matchLabels");
    let labels =
        ds.spec.as_ref().and_then(|s| s.template.metadata.as_ref()).and_then(|m| m.labels.clone()).expect("labels");
    for (k, v) in &selector {
        assert_eq!(labels.get(k), Some(v), "the selector selects the template");
    }
    let image = container(ds).image.as_deref().expect("image");
    assert_eq!(image, format!("localhost/npagent:{}", env!("CARGO_PKG_VERSION")), "scripts/build-image's default tag");
}

#[test]
fn daemonset_drops_every_capability_but_net_admin() {
    let all = load();
    let c = container(one!(all, DaemonSet));
    let sc = c.security_context.as_ref().expect("securityContext");
    let caps = sc.capabilities.as_ref().expect("capabilities");
    assert_eq!(caps.drop.as_deref(), Some(&["ALL".to_owned()][..]));
    // NET_ADMIN gives a gateway port npagent creates its address (netlink); nothing else.
    assert_eq!(caps.add.as_deref(), Some(&["NET_ADMIN".to_owned()][..]), "npagent needs NET_ADMIN alone");
    assert_eq!(sc.allow_privilege_escalation, Some(false));
    assert_eq!(sc.read_only_root_filesystem, Some(true));
    assert_ne!(sc.privileged, Some(true));
    assert_eq!(sc.run_as_user, Some(0), "uid 0 owns the OVS sockets");
    let seccomp = sc.seccomp_profile.as_ref().map(|p| p.type_.as_str());
    assert_eq!(seccomp, Some("RuntimeDefault"));
}

/// Bytes of a Kubernetes memory quantity in the binary suffixes these manifests use.
fn bytes(q: &str) -> u64 {
    let (num, unit) = q.split_at(q.find(|c: char| !c.is_ascii_digit()).unwrap_or(q.len()));
    let n: u64 = num.parse().unwrap_or_else(|_| panic!("quantity {q}"));
    let scale = match unit {
        "" => 1,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        _ => panic!("quantity {q}: use Ki, Mi or Gi"),
    };
    n * scale
}

#[test]
fn daemonset_resources_cover_the_measured_peak() {
    let all = load();
    let c = container(one!(all, DaemonSet));
    let r = c.resources.as_ref().expect("resources");
    let requests = r.requests.as_ref().expect("requests");
    let limits = r.limits.as_ref().expect("limits");
    assert!(requests.contains_key("cpu") && requests.contains_key("memory"), "{requests:?}");
    assert!(!limits.contains_key("cpu"), "no CPU limit (throttling delays packet-ins)");
    let request = bytes(&requests["memory"].0);
    let limit = bytes(&limits["memory"].0);
    assert!(request <= limit);
    // docs/BENCHMARKS.md: 775 MiB, the peak of a listing handed over in one piece at 100,000
    // pods, the largest RSS measured.
    assert!(limit >= 775 << 20, "memory limit {limit} below the measured peak");
}

#[test]
fn rbac_grants_exactly_what_the_watchers_use() {
    let all = load();
    let role = one!(all, ClusterRole);
    assert!(role.aggregation_rule.is_none());
    let mut granted = BTreeSet::new();
    for rule in role.rules.iter().flatten() {
        assert!(rule.resource_names.is_none() && rule.non_resource_urls.is_none(), "{rule:?}");
        for group in rule.api_groups.iter().flatten() {
            for resource in rule.resources.iter().flatten() {
                for verb in &rule.verbs {
                    assert!(granted.insert((group.clone(), resource.clone(), verb.clone())), "granted twice: {rule:?}");
                }
            }
        }
    }
    let needed: BTreeSet<(String, String, String)> = WATCHED_RESOURCES
        .iter()
        .flat_map(|(g, r)| VERBS.iter().map(move |v| (g.to_string(), r.to_string(), v.to_string())))
        .collect();
    assert_eq!(granted, needed);

    let ns = one!(all, Namespace).metadata.name.clone().expect("namespace name");
    let sa = one!(all, ServiceAccount);
    assert_eq!(sa.metadata.namespace.as_deref(), Some(ns.as_str()));
    let ds = one!(all, DaemonSet);
    assert_eq!(ds.metadata.namespace.as_deref(), Some(ns.as_str()));
    assert_eq!(pod_spec(ds).service_account_name, sa.metadata.name, "the DaemonSet runs as the ServiceAccount");
    let binding = one!(all, ClusterRoleBinding);
    assert_eq!(binding.role_ref.kind, "ClusterRole");
    assert_eq!(binding.role_ref.api_group, "rbac.authorization.k8s.io");
    assert_eq!(Some(&binding.role_ref.name), role.metadata.name.as_ref());
    let subjects = binding.subjects.clone().unwrap_or_default();
    assert_eq!(subjects.len(), 1, "{subjects:?}");
    assert_eq!(subjects[0].kind, "ServiceAccount");
    assert_eq!(Some(&subjects[0].name), sa.metadata.name.as_ref());
    assert_eq!(subjects[0].namespace.as_deref(), Some(ns.as_str()));
}
