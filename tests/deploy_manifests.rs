//! deploy/: every manifest the kustomization lists, read with k8s-openapi's types (a field
//! those types do not know fails, as a misspelt one would otherwise be dropped silently by the
//! API server), the DaemonSet's containers checked against npagent's own command line (the
//! agent and the init container that installs the CNI plugin) and against the OVS image's
//! start script, the ClusterRole against what the kube-rs watchers use, the
//! StagedNetworkPolicy CRD against what its Rust type generates, and the ClusterNetworkPolicy
//! CRD's install command (upstream's file, not a copy in deploy/). No root, no cluster.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

use clap::{CommandFactory, Parser};
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Container, HTTPGetAction, Namespace, PodSpec, ServiceAccount, VolumeMount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiext;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use npagent::cli::{Cli, InstallCniArgs};
use npagent::source::kube::{VERBS, WATCHED_RESOURCES};
use serde::Deserialize;

#[path = "support/kustomize.rs"]
mod kustomize;
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
    CustomResourceDefinition(Box<CustomResourceDefinition>),
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
        "CustomResourceDefinition" => Manifest::CustomResourceDefinition(Box::new(typed(doc)?)),
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

/// The DaemonSet's containers, init containers first, by name.
fn all_containers(ds: &DaemonSet) -> impl Iterator<Item = &Container> {
    let spec = pod_spec(ds);
    spec.init_containers.iter().flatten().chain(&spec.containers)
}

/// The container (or init container) `name`.
fn container<'a>(ds: &'a DaemonSet, name: &str) -> &'a Container {
    all_containers(ds).find(|c| c.name == name).unwrap_or_else(|| panic!("no container {name}"))
}

/// The container that runs the agent.
fn agent(ds: &DaemonSet) -> &Container {
    container(ds, "npagent")
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

/// How container `c` mounts the hostPath volume of host directory `host`.
fn mount_of_host_dir<'a>(ds: &DaemonSet, c: &'a Container, host: &str) -> &'a VolumeMount {
    let spec = pod_spec(ds);
    let volume = spec
        .volumes
        .iter()
        .flatten()
        .find(|v| v.host_path.as_ref().is_some_and(|h| h.path == host))
        .unwrap_or_else(|| panic!("no hostPath volume of {host}"));
    c.volume_mounts
        .iter()
        .flatten()
        .find(|m| m.name == volume.name)
        .unwrap_or_else(|| panic!("volume {} is not mounted in {}", volume.name, c.name))
}

/// Whether a mount is read-only.
fn read_only(m: &VolumeMount) -> bool {
    m.read_only == Some(true)
}

/// The install-cni arguments of the init container, parsed by npagent's own command line.
fn install_cni_args(ds: &DaemonSet) -> InstallCniArgs {
    let argv = command_line(container(ds, "install-cni"));
    match Cli::try_parse_from(&argv).unwrap_or_else(|e| panic!("install-cni args {argv:?}: {e}")).command {
        npagent::cli::Command::InstallCni(args) => args,
        other => panic!("the init container runs {other:?}, not install-cni"),
    }
}

#[test]
fn every_manifest_reads_back_unchanged_with_the_kubernetes_types() {
    let all = load();
    assert_eq!(all.len(), 6, "{all:#?}");
}

#[test]
fn kustomize_renders_exactly_the_files() {
    // What `kubectl apply -k deploy/` sends: the files' objects, none added, none changed.
    let mut rendered = kustomize::render(&deploy_dir());
    let k: Kustomization = yaml::from_str(&read(&deploy_dir().join("kustomization.yaml"))).expect("kustomization");
    let mut files: Vec<serde_json::Value> = Vec::new();
    for res in &k.resources {
        files.extend(documents(&read(&deploy_dir().join(res))).expect("documents"));
    }
    rendered.sort_by_key(kustomize::key);
    files.sort_by_key(kustomize::key);
    assert_eq!(rendered.len(), files.len(), "objects rendered");
    for (r, f) in rendered.iter().zip(&files) {
        assert_eq!(first_difference("", f, r), None, "{:?}: kustomize changed it", kustomize::key(f));
    }
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
    let c = agent(one!(all, DaemonSet));
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
    let ds = one!(all, DaemonSet);
    for other in all_containers(ds).filter(|c| c.name != "npagent") {
        assert!(other.env.is_none() && other.env_from.is_none(), "{}: the images' defaults", other.name);
    }
    let c = agent(ds);
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
    let c = agent(ds);
    let argv = command_line(c);
    let ovs = mount_of_host_dir(ds, c, "/var/run/openvswitch");
    assert!(read_only(ovs), "connecting to a unix socket needs no write access to the mount");
    for long in ["ofp", "ovsdb"] {
        let endpoint = run_value(&argv, long);
        let path = endpoint.strip_prefix("unix:").unwrap_or_else(|| panic!("--{long} {endpoint}: a unix socket"));
        assert_eq!(Path::new(path).parent(), Some(Path::new(&ovs.mount_path)), "--{long} {endpoint} in the OVS mount");
    }
    let ctl = run_value(&argv, "vswitchd-ctl");
    assert_eq!(Path::new(&ctl).parent(), Some(Path::new(&ovs.mount_path)), "--vswitchd-ctl {ctl} in the OVS mount");
    let audit = mount_of_host_dir(ds, c, "/var/log/antrea/networkpolicy");
    assert!(!read_only(audit), "np.log is written");
    let log = run_value(&argv, "audit-log");
    assert_eq!(Path::new(&log).parent(), Some(Path::new(&audit.mount_path)), "--audit-log {log}");

    // Every volume, and what checks the kubelet makes of its host path.
    let volumes = pod_spec(ds).volumes.clone().unwrap_or_default();
    let mut got: Vec<(String, String)> = volumes
        .iter()
        .map(|v| match (&v.host_path, &v.empty_dir) {
            (Some(h), None) => (h.path.clone(), h.type_.clone().unwrap_or_default()),
            (None, Some(_)) => (format!("emptyDir {}", v.name), String::new()),
            _ => panic!("volume {}: a hostPath or an emptyDir", v.name),
        })
        .collect();
    got.sort();
    let mut want: Vec<(String, String)> = [
        ("/etc/cni/net.d", "DirectoryOrCreate"),
        ("/etc/openvswitch", "DirectoryOrCreate"),
        ("/lib/modules", "Directory"),
        ("/opt/cni/bin", "DirectoryOrCreate"),
        ("/var/lib/cni", "DirectoryOrCreate"),
        ("/var/lib/npagent", "DirectoryOrCreate"),
        ("/var/log/antrea/networkpolicy", "DirectoryOrCreate"),
        ("/var/run/netns", "DirectoryOrCreate"),
        ("/var/run/npagent", "DirectoryOrCreate"),
        ("/var/run/openvswitch", "DirectoryOrCreate"),
        ("emptyDir ovs-tmp", ""),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    want.sort();
    assert_eq!(got, want, "the pod's volumes");
    for v in &volumes {
        assert!(
            all_containers(ds).any(|c| c.volume_mounts.iter().flatten().any(|m| m.name == v.name)),
            "{} unused",
            v.name
        );
    }
}

#[test]
fn daemonset_installs_the_cni_plugin_and_serves_it() {
    let all = load();
    let ds = one!(all, DaemonSet);
    let spec = pod_spec(ds);
    let names = |cs: &[Container]| cs.iter().map(|c| c.name.clone()).collect::<Vec<_>>();
    assert_eq!(names(spec.init_containers.as_deref().unwrap_or_default()), ["install-cni"]);
    assert_eq!(names(&spec.containers), ["ovs", "npagent"]);

    // The init container: npagent's image, its install-cni, into the node's CNI directories.
    let init = container(ds, "install-cni");
    assert_eq!(init.image, agent(ds).image, "the plugin is the agent's own binary");
    let args = install_cni_args(ds);
    let bin = mount_of_host_dir(ds, init, "/opt/cni/bin");
    let conf = mount_of_host_dir(ds, init, "/etc/cni/net.d");
    assert!(!read_only(bin) && !read_only(conf), "install-cni writes both");
    assert_eq!(args.bin_dir, Path::new(&bin.mount_path), "--bin-dir");
    assert_eq!(args.conf_dir, Path::new(&conf.mount_path), "--conf-dir");
    assert_eq!(args.ipam_plugins, Path::new("/usr/lib/cni"), "host-local where the image has it");
    // tests/container_image.rs runs the image's install-cni with these mount points.
    assert_eq!((bin.mount_path.as_str(), conf.mount_path.as_str()), ("/host/opt/cni/bin", "/host/etc/cni/net.d"));
    assert_eq!(init.volume_mounts.as_ref().map(Vec::len), Some(2), "the CNI directories only");

    // The agent serves the socket the config names, in a directory of the node's, where the
    // plugin (run by the runtime on the host) finds it at the same path.
    let c = agent(ds);
    let argv = command_line(c);
    let socket = run_value(&argv, "cni-socket");
    assert_eq!(Path::new(&socket), args.socket, "--cni-socket is the config's socket");
    let run_dir = mount_of_host_dir(ds, c, "/var/run/npagent");
    assert!(!read_only(run_dir), "the agent creates the socket");
    assert_eq!(Path::new(&socket).parent(), Some(Path::new("/var/run/npagent")), "same path in and out");
    assert_eq!(run_dir.mount_path, "/var/run/npagent");

    // What the agent's CNI work needs of the node, at the node's own paths: the pods' network
    // namespaces (created after the agent started, hence HostToContainer), the IPAM plugin to
    // run from CNI_PATH, and host-local's store.
    let netns = mount_of_host_dir(ds, c, "/var/run/netns");
    assert_eq!(netns.mount_path, "/var/run/netns");
    assert_eq!(netns.mount_propagation.as_deref(), Some("HostToContainer"));
    assert!(read_only(netns), "namespaces are opened, not created");
    let cni_bin = mount_of_host_dir(ds, c, "/opt/cni/bin");
    assert_eq!((cni_bin.mount_path.as_str(), read_only(cni_bin)), ("/opt/cni/bin", true));
    let store = mount_of_host_dir(ds, c, "/var/lib/cni");
    assert_eq!((store.mount_path.as_str(), read_only(store)), ("/var/lib/cni", false));
    // npagent's own records, at the path its --cni-state-dir defaults to.
    let records = mount_of_host_dir(ds, c, "/var/lib/npagent");
    assert!(!read_only(records));
    assert_eq!(
        Path::new(npagent::cli::DEFAULT_CNI_STATE_DIR).parent(),
        Some(Path::new(records.mount_path.as_str())),
        "--cni-state-dir lies on the node's disk"
    );
    assert!(spec.host_pid.is_none(), "namespaces are opened by path: no host PID namespace");
}

/// The default `start-ovs` gives an environment variable: `NAME=${NAME:-DEFAULT}` in the
/// script.
fn start_ovs_default(var: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("images/ovs/start-ovs");
    let script = read(&path);
    let needle = format!("${{{var}:-");
    let at = script.find(&needle).unwrap_or_else(|| panic!("start-ovs has no default for {var}"));
    let rest = &script[at + needle.len()..];
    rest[..rest.find('}').expect("closing brace")].to_owned()
}

#[test]
fn daemonset_runs_open_vswitch_where_npagent_looks_for_it() {
    let all = load();
    let ds = one!(all, DaemonSet);
    let ovs = container(ds, "ovs");
    let image = ovs.image.as_deref().expect("image");
    assert_eq!(image, format!("localhost/npagent-ovs:{}", env!("CARGO_PKG_VERSION")), "build-ovs-image's default tag");
    assert!(ovs.command.is_none() && ovs.args.is_none(), "the image's entrypoint, start-ovs, runs as it is");
    let sc = ovs.security_context.as_ref().expect("securityContext");
    assert_eq!(sc.privileged, Some(true), "the kernel datapath and modprobe");
    assert_eq!(sc.read_only_root_filesystem, Some(true));
    let modules = mount_of_host_dir(ds, ovs, "/lib/modules");
    assert_eq!((modules.mount_path.as_str(), read_only(modules)), ("/lib/modules", true));
    let tmp = ovs.volume_mounts.iter().flatten().find(|m| m.mount_path == "/tmp").expect("a /tmp");
    assert!(!read_only(tmp), "ovsdb-server's temporary files");

    // start-ovs's defaults are the mounts: the run directory npagent connects to, and the
    // database kept on the node across restarts; the kernel datapath and br-int.
    let run_dir = mount_of_host_dir(ds, ovs, "/var/run/openvswitch");
    assert_eq!(run_dir.mount_path, start_ovs_default("OVS_RUNDIR"));
    assert!(!read_only(run_dir), "ovs creates the sockets");
    let agent_run = mount_of_host_dir(ds, agent(ds), "/var/run/openvswitch");
    assert_eq!(agent_run.mount_path, run_dir.mount_path, "the agent sees the sockets where ovs makes them");
    let db = mount_of_host_dir(ds, ovs, "/etc/openvswitch");
    assert_eq!(db.mount_path, start_ovs_default("OVS_DBDIR"));
    assert!(!read_only(db));
    assert_eq!(start_ovs_default("NPAGENT_OVS_DATAPATH"), "system", "the kernel datapath on a node");
    let argv = command_line(agent(ds));
    assert_eq!(run_value(&argv, "bridge"), start_ovs_default("NPAGENT_OVS_BRIDGE"), "the bridge start-ovs makes");
    assert!(start_ovs_default("NPAGENT_OVS_PROTOCOLS").split(',').any(|p| p == "OpenFlow15"), "npagent speaks 1.5");
}

#[test]
fn daemonset_probes_reach_the_admin_server() {
    let all = load();
    let c = agent(one!(all, DaemonSet));
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
    let image = agent(ds).image.as_deref().expect("image");
    assert_eq!(image, format!("localhost/npagent:{}", env!("CARGO_PKG_VERSION")), "scripts/build-image's default tag");
}

#[test]
fn daemonset_drops_every_capability_but_net_admin_and_sys_admin() {
    let all = load();
    let ds = one!(all, DaemonSet);
    for (name, add) in [("npagent", &["NET_ADMIN", "SYS_ADMIN"][..]), ("install-cni", &[][..])] {
        let sc = container(ds, name).security_context.as_ref().expect("securityContext");
        let caps = sc.capabilities.as_ref().expect("capabilities");
        assert_eq!(caps.drop.as_deref(), Some(&["ALL".to_owned()][..]), "{name}");
        // npagent: NET_ADMIN for the veths and addresses (netlink), SYS_ADMIN to enter a pod's
        // network namespace (setns); install-cni: none.
        let added: Vec<&str> = caps.add.iter().flatten().map(String::as_str).collect();
        assert_eq!(added, add, "{name}'s capabilities");
        assert_eq!(sc.allow_privilege_escalation, Some(false), "{name}");
        assert_eq!(sc.read_only_root_filesystem, Some(true), "{name}");
        assert_ne!(sc.privileged, Some(true), "{name}");
        assert_eq!(sc.run_as_user, Some(0), "{name}: uid 0 owns the OVS sockets and the CNI directories");
        let seccomp = sc.seccomp_profile.as_ref().map(|p| p.type_.as_str());
        assert_eq!(seccomp, Some("RuntimeDefault"), "{name}");
    }
    // Only the ovs container is privileged.
    let privileged: Vec<&str> = all_containers(ds)
        .filter(|c| c.security_context.as_ref().is_some_and(|sc| sc.privileged == Some(true)))
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(privileged, ["ovs"]);
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
    let ds = one!(all, DaemonSet);
    let ovs = container(ds, "ovs").resources.as_ref().expect("ovs resources");
    assert!(ovs.limits.is_none(), "no limit on ovs: a killed or throttled ovs-vswitchd stops the node's pods");
    let c = agent(ds);
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

/// The committed StagedNetworkPolicy CRD, and the variable that rewrites it.
const STAGED_CRD: &str = "staged-network-policy-crd.yaml";
const REGENERATE: &str = "NPAGENT_REGENERATE_CRD";

/// The CRD of [`npagent::k8s::StagedNetworkPolicy`], generated from the type: its identity
/// from its `k8s_openapi::Resource` constants, its `spec` schema from k8s-openapi's schema of
/// `NetworkPolicySpec`, made structural with the settings and transforms kube's
/// `CustomResource` derive uses.
fn staged_crd() -> CustomResourceDefinition {
    use k8s_openapi::Resource;
    use npagent::k8s::StagedNetworkPolicy as S;
    let generator = schemars::generate::SchemaSettings::openapi3()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .with_transform(schemars::transform::AddNullable::default())
        .with_transform(kube_core::schema::StructuralSchemaRewriter)
        .with_transform(kube_core::schema::OptionalEnum)
        .with_transform(kube_core::schema::OptionalIntOrString)
        .into_generator();
    let spec = generator.into_root_schema_for::<k8s_openapi::api::networking::v1::NetworkPolicySpec>();
    let mut spec = serde_json::to_value(spec).expect("a JSON schema");
    if let Some(obj) = spec.as_object_mut() {
        obj.remove("title");
    }
    let schema: apiext::JSONSchemaProps = serde_json::from_value(serde_json::json!({
        "description": format!("{}: a NetworkPolicy that npagent reads and judges but never enforces. \
            Its spec is a networking.k8s.io/v1 NetworkPolicy's; promoting it is changing kind and apiVersion.", S::KIND),
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": spec,
        },
    }))
    .expect("JSONSchemaProps");
    let singular = S::KIND.to_lowercase();
    CustomResourceDefinition {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some(format!("{}.{}", S::URL_PATH_SEGMENT, S::GROUP)),
            labels: Some([("app.kubernetes.io/name".to_string(), "npagent".to_string())].into()),
            ..Default::default()
        },
        spec: apiext::CustomResourceDefinitionSpec {
            group: S::GROUP.into(),
            names: apiext::CustomResourceDefinitionNames {
                kind: S::KIND.into(),
                list_kind: Some(format!("{}List", S::KIND)),
                plural: S::URL_PATH_SEGMENT.into(),
                singular: Some(singular),
                short_names: Some(vec!["snp".into()]),
                ..Default::default()
            },
            scope: "Namespaced".into(),
            versions: vec![apiext::CustomResourceDefinitionVersion {
                name: S::VERSION.into(),
                served: true,
                storage: true,
                schema: Some(apiext::CustomResourceValidation { open_api_v3_schema: Some(schema) }),
                ..Default::default()
            }],
            ..Default::default()
        },
        status: None,
    }
}

/// The generated CRD as the file holds it.
fn staged_crd_yaml() -> String {
    let header = format!(
        "# Generated from npagent::k8s::StagedNetworkPolicy by tests/deploy_manifests.rs: do not edit.\n\
         # Regenerate: {REGENERATE}=1 cargo test --test deploy_manifests staged_crd\n"
    );
    let value = serde_json::to_value(staged_crd()).expect("CRD as JSON");
    header + &serde_saphyr::to_string(&value).expect("CRD as YAML")
}

#[test]
fn the_staged_crd_is_what_the_type_generates() {
    let path = deploy_dir().join(STAGED_CRD);
    let want = staged_crd_yaml();
    if std::env::var_os(REGENERATE).is_some() {
        std::fs::write(&path, &want).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
    let got = read(&path);
    assert!(
        got == want,
        "deploy/{STAGED_CRD} differs from what npagent::k8s::StagedNetworkPolicy generates; regenerate it with\n  \
         {REGENERATE}=1 cargo test --test deploy_manifests staged_crd"
    );
    // The file is one of the kustomization's resources, and reads back typed.
    let all = load();
    let crd = one!(all, CustomResourceDefinition);
    assert_eq!(**crd, staged_crd());
}

#[test]
fn the_staged_crd_schema_accepts_a_network_policy_spec() {
    let crd = staged_crd();
    let version = &crd.spec.versions[0];
    let schema = version.schema.as_ref().and_then(|s| s.open_api_v3_schema.as_ref()).expect("a schema");
    let spec = &schema.properties.as_ref().expect("properties")["spec"];
    let spec_fields: BTreeSet<&str> = spec.properties.iter().flatten().map(|(k, _)| k.as_str()).collect();
    assert_eq!(spec_fields, BTreeSet::from(["podSelector", "policyTypes", "ingress", "egress"]));
    // Structural: no $ref (the API server refuses them), ports may be numbers or names.
    let text = serde_json::to_string(schema).expect("JSON");
    assert!(!text.contains("$ref") && !text.contains("definitions"), "{text}");
    assert!(text.contains("\"x-kubernetes-int-or-string\":true"), "{text}");
    assert_eq!(crd.spec.scope, "Namespaced");
    assert_eq!(
        crd.metadata.name.as_deref(),
        Some("stagednetworkpolicies.policy.npagent.io"),
        "the name the API server requires: <plural>.<group>"
    );
}

/// Upstream's release whose ClusterNetworkPolicy npagent's types follow.
const CLUSTER_POLICY_RELEASE: &str = "v0.2.0";

/// The ClusterNetworkPolicy CRD is upstream's (kubernetes-sigs/network-policy-api): deploy/
/// holds no copy, the README's install command names upstream's standard-channel file for the
/// type's group and resource at the release, and the ClusterRole may watch them.
#[test]
fn the_cluster_policy_crd_is_installed_from_upstream_and_may_be_watched() {
    use k8s_openapi::Resource;
    use npagent::k8s::ClusterNetworkPolicy as C;
    assert_eq!(
        (C::GROUP, C::VERSION, C::URL_PATH_SEGMENT),
        ("policy.networking.k8s.io", "v1alpha2", "clusternetworkpolicies")
    );
    let url = format!(
        "https://raw.githubusercontent.com/kubernetes-sigs/network-policy-api/{CLUSTER_POLICY_RELEASE}/config/crd/standard/{}_{}.yaml",
        C::GROUP,
        C::URL_PATH_SEGMENT
    );
    let readme = read(&Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"));
    assert!(readme.contains(&format!("kubectl apply -f {url}\n")), "README.md does not say `kubectl apply -f {url}`");

    let all = load();
    let crds: Vec<&str> = all
        .iter()
        .filter_map(|m| match m {
            Manifest::CustomResourceDefinition(c) => Some(c.spec.group.as_str()),
            _ => None,
        })
        .collect();
    assert!(!crds.contains(&C::GROUP), "deploy/ holds a copy of upstream's CRD: {crds:?}");
    let role = one!(all, ClusterRole);
    let rule = role
        .rules
        .iter()
        .flatten()
        .find(|r| r.api_groups.iter().flatten().any(|g| g == C::GROUP))
        .unwrap_or_else(|| panic!("the ClusterRole grants nothing in {}", C::GROUP));
    assert_eq!(rule.resources.as_deref(), Some(&[C::URL_PATH_SEGMENT.to_string()][..]));
    assert_eq!(rule.verbs, VERBS.map(String::from));
}
