//! Helper of `scripts/bench-scale`: the compiler's synthetic cluster as manifests, and the
//! manifest-change latency loop.
//!
//! - `scale_cluster gen DIR [small] [baseline|egress] [staged=N] [nodes=N] [cnps=N] [json]`
//!   writes `npagent::compiler::synthetic::cluster` (the scale target, or a 10x smaller cluster;
//!   with `baseline` the same cluster without its egress sections, `cluster_without_egress`;
//!   with `staged=N`, N StagedNetworkPolicies from `synthetic::add_staged`) as YAML, one file per
//!   namespace (`DIR/nsI.yaml`: the Namespace, its Pods, its NetworkPolicies and
//!   StagedNetworkPolicies, as YAML documents), or with `json` as JSON (`DIR/nsI.json`: the same
//!   objects, one compact JSON object per line, which the manifest loader reads as concatenated
//!   JSON objects; a `nsI.yaml` left by an earlier `gen` is removed, and the other way round).
//!   With `nodes=N` the pods are scheduled on N nodes (`synthetic::spread_over_nodes`: the
//!   local pods on `node-0`, the others spread over `node-1` to `node-{N-1}`, as their
//!   `spec.nodeName`) and the N Node objects (podCIDR and InternalIP each) go to `DIR/nodes.yaml`
//!   (`.json`); without it the pods keep the generator's node names and no Node is written (a
//!   `nodes.*` left by an earlier `gen` is removed). With `cnps=N` the N ClusterNetworkPolicies
//!   of `synthetic::add_cluster_policies` (both tiers) go to `DIR/cnps.yaml` (`.json`), kind
//!   ClusterNetworkPolicy, apiVersion `policy.networking.k8s.io/v1alpha2`; without it none is
//!   written (a `cnps.*` left by an earlier `gen` is removed).
//!   It then reads the directory back through npagent's own manifest loader and conversion and
//!   checks that it gives the same model (its ClusterNetworkPolicies too), and the same Nodes. The bridge ports of the local
//!   pods go to stdout, one per line: `ofport interface namespace pod ip mac`.
//! - `scale_cluster churn DIR LOG N KIND [OFP]` changes namespace ns0 (ns110 for the egress
//!   kinds) N times by atomically replacing its file, `DIR/ns0.yaml` or `DIR/ns0.json`,
//!   whichever exists, in the same format (write a temporary file, rename), and waits each time
//!   for the agent's debug line `bundle of N flow_mods committed` in LOG (the agent's stderr).
//!   KIND is `policy` (np0's TCP port toggles between 80 and 8080), `pod` (remote pod5
//!   relabelled into and out of np0's peer selector, app5 <-> app1), `egress` (the first egress
//!   rule of ns110/np9, which selects ns110's local pod: TCP 5432 <-> 5433, in ns110's file) or
//!   `egress-pod` (ns110/pod5 relabelled into and out of that rule's `to` selector,
//!   app5 <-> app4), the two of which need the cluster with egress, or `staged` (the staged
//!   edit of ns0/np0, which touches ns0's local pod: its first ingress rule TCP 8443 <-> 8444;
//!   needs `staged=N`), or `cnp` (the first rule of ClusterNetworkPolicy
//!   `admin-deny-remote-admin-0`, an Admin Deny into every pod from team0's namespaces: its
//!   first port TCP 22 <-> 2222, in `DIR/cnps.yaml` or `.json`; needs `cnps=N`). Prints one line
//!   per change: `i rename_to_scan_ms rename_to_commit_ms flow_mods` and checks every 10th
//!   change on the bridge with `ovs-ofctl dump-flows` of the kind's table when OFP is given
//!   (IngressRule, EgressRule, StagedIngressRule or AdminIngressRule: the clause flow with the
//!   changed `ct_tp_dst`, `ct_nw_src` or `ct_nw_dst` and a `conjunction()` is there exactly when
//!   it should be).
//! - `scale_cluster node-events DIR LOG N NETNS` (a cluster of `gen ... nodes=M`): N times
//!   node `node-M` joins (its Node, podCIDR `synthetic::node_pod_cidr(M)`, written to
//!   `DIR/node-M.yaml` (`.json`, the format of `nodes.*`) by an atomic replace) and leaves (the
//!   file removed); each time waits for the agent's info line `routes to other nodes' pods: set
//!   <podCIDR> via <InternalIP>` (`removed ...` when it leaves) in LOG, then checks the routing
//!   table of network namespace NETNS (`ip -n NETNS route show proto 78`: the route there or
//!   gone, and M routes of npagent's in all after a join, M - 1 after a leave). Prints one line
//!   per event: `i join|leave rename_to_route_ms rename_to_scan_ms` (the scan: the manifests
//!   source's last debug line `manifests: ... files looked at` before the route's).
//! - `scale_cluster count DIR` compiles the cluster of DIR (as `gen` wrote it) and prints
//!   `flows staged_flows touched_pods local_pods staged_policies cluster_policies
//!   admin_egress baseline_egress admin_ingress baseline_ingress` (staged flows by
//!   `npagent::compiler::is_staged_flow`; the last four the flows in the tier tables
//!   AdminEgressRule, BaselineEgressRule, AdminIngressRule and BaselineIngressRule, ids 5, 8,
//!   10 and 13; the node's flows are not in the synthetic model).
//!
//! Timestamps: the rename is timed with the wall clock right after `rename(2)` returns; the
//! agent's lines carry tracing-subscriber's UTC timestamps (microseconds), same machine.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

use npagent::audit::timefmt::Civil;
use npagent::compiler::synthetic::{
    add_cluster_policies, add_staged, cluster, cluster_without_egress, node_facts, node_name, ns_name, oref, pod_name,
    spread_over_nodes, tcp, touched_ports, ClusterSpec, MAX_NODES,
};
use npagent::compiler::tables::{
    ADMIN_EGRESS_RULE, ADMIN_INGRESS_RULE, BASELINE_EGRESS_RULE, BASELINE_INGRESS_RULE, EGRESS_RULE, INGRESS_RULE,
    STAGED_INGRESS_RULE,
};
use npagent::compiler::{compile, is_staged_flow, Config, IdAllocator};
use npagent::model::cluster_policy::{ClusterPeer, ClusterPolicy, ClusterProtocol, ClusterRule, PodSet};
use npagent::model::node::{ClusterNodes, NodeFacts};
use npagent::model::{convert, LabelSelector, Model, ObjectRef, Peer, Policy, PortRef, PortSpec, Protocol, SelectorOp};
use npagent::source::manifests::load_dir;
use npagent::source::KubeObject;
use serde_json::{json, Value};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["gen", dir, opts @ ..] if opts.iter().all(|o| ["small", "baseline", "egress", "json"].contains(o) || staged_opt(o).is_some() || nodes_opt(o).is_some() || cnps_opt(o).is_some()) => {
            let staged = opts.iter().find_map(|o| staged_opt(o)).unwrap_or(0);
            let nodes = opts.iter().find_map(|o| nodes_opt(o)).unwrap_or(0);
            let cnps = opts.iter().find_map(|o| cnps_opt(o)).unwrap_or(0);
            let spec = Spec { small: opts.contains(&"small"), egress: !opts.contains(&"baseline"), staged, nodes, cnps };
            let format = if opts.contains(&"json") { Format::Json } else { Format::Yaml };
            gen(Path::new(dir), spec, format)
        }
        ["churn", dir, log, n, kind, rest @ ..] => churn(Path::new(dir), Path::new(log), n, kind, rest.first().copied()),
        ["node-events", dir, log, n, netns] => node_events(Path::new(dir), Path::new(log), n, netns),
        ["count", dir] => count(Path::new(dir)),
        _ => Err("usage: scale_cluster gen DIR [small] [baseline|egress] [staged=N] [nodes=N] [cnps=N] [json] | churn DIR LOG N policy|pod|egress|egress-pod|staged|cnp [OFP] | node-events DIR LOG N NETNS | count DIR".into()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("scale_cluster: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `staged=N`: N StagedNetworkPolicies.
fn staged_opt(o: &str) -> Option<usize> {
    o.strip_prefix("staged=")?.parse().ok()
}

/// `nodes=N`: the pods on N nodes, with their Node objects (1 to `MAX_NODES`).
fn nodes_opt(o: &str) -> Option<usize> {
    o.strip_prefix("nodes=")?.parse().ok().filter(|n| (1..=MAX_NODES).contains(n))
}

/// `cnps=N`: N ClusterNetworkPolicies.
fn cnps_opt(o: &str) -> Option<usize> {
    o.strip_prefix("cnps=")?.parse().ok()
}

/// Which cluster: the scale target or 10x smaller, with or without egress sections, with
/// `staged` StagedNetworkPolicies (`synthetic::add_staged`), on `nodes` Nodes
/// (`synthetic::spread_over_nodes`; 0: the generator's node names, no Node objects), with
/// `cnps` ClusterNetworkPolicies (`synthetic::add_cluster_policies`).
#[derive(Clone, Copy)]
struct Spec {
    small: bool,
    egress: bool,
    staged: usize,
    nodes: usize,
    cnps: usize,
}

impl Spec {
    fn model(self) -> Model {
        self.cluster().0
    }

    /// The model, and the Nodes (none without `nodes`).
    fn cluster(self) -> (Model, ClusterNodes) {
        let size = if self.small {
            ClusterSpec { namespaces: 100, pods_per_ns: 100, policies_per_ns: 10, local_pods: 10 }
        } else {
            ClusterSpec::TARGET
        };
        let mut m = if self.egress { cluster(size) } else { cluster_without_egress(size) };
        add_staged(&mut m, size, self.staged);
        add_cluster_policies(&mut m, self.cnps);
        let nodes = if self.nodes > 0 { spread_over_nodes(&mut m, self.nodes) } else { ClusterNodes::new() };
        (m, nodes)
    }

    fn marker(self) -> String {
        format!(
            "{}{}{}{}{}\n",
            if self.small { "small" } else { "target" },
            if self.egress { "" } else { " baseline" },
            if self.staged > 0 { format!(" staged={}", self.staged) } else { String::new() },
            if self.nodes > 0 { format!(" nodes={}", self.nodes) } else { String::new() },
            if self.cnps > 0 { format!(" cnps={}", self.cnps) } else { String::new() }
        )
    }
}

/// How the namespace files are written: YAML documents or concatenated JSON objects.
#[derive(Clone, Copy)]
enum Format {
    Yaml,
    Json,
}

impl Format {
    /// The file name extension, which also tells the manifest loader how to read the file.
    fn ext(self) -> &'static str {
        match self {
            Format::Yaml => "yaml",
            Format::Json => "json",
        }
    }

    fn other(self) -> Format {
        match self {
            Format::Yaml => Format::Json,
            Format::Json => Format::Yaml,
        }
    }

    /// The format of namespace `ns`'s file in `dir`: the one that exists.
    fn of(dir: &Path, ns: &str) -> Result<Format, String> {
        let exists = |f: Format| dir.join(format!("{ns}.{}", f.ext())).exists();
        match (exists(Format::Yaml), exists(Format::Json)) {
            (true, false) => Ok(Format::Yaml),
            (false, true) => Ok(Format::Json),
            (true, true) => Err(format!("{}: both {ns}.yaml and {ns}.json exist", dir.display())),
            (false, false) => Err(format!("{}: neither {ns}.yaml nor {ns}.json exists", dir.display())),
        }
    }
}

fn spec_for(dir: &Path) -> Spec {
    // `gen` leaves a marker so `churn` rebuilds the same model.
    let marker = std::fs::read_to_string(dir.join(".spec")).unwrap_or_default();
    let staged = marker.split_whitespace().find_map(staged_opt).unwrap_or(0);
    let nodes = marker.split_whitespace().find_map(nodes_opt).unwrap_or(0);
    let cnps = marker.split_whitespace().find_map(cnps_opt).unwrap_or(0);
    Spec { small: marker.starts_with("small"), egress: !marker.contains("baseline"), staged, nodes, cnps }
}

/// The file of the Nodes, `nodes.yaml` or `nodes.json`.
const NODES_FILE: &str = "nodes";
/// The file of the ClusterNetworkPolicies, `cnps.yaml` or `cnps.json`.
const CNPS_FILE: &str = "cnps";
/// The ClusterNetworkPolicy the `cnp` change kind edits (`synthetic::add_cluster_policies`'
/// first: an Admin Deny into every pod from team0's namespaces on TCP 22 and 3389).
const CHURNED_CNP: &str = "admin-deny-remote-admin-0";

/// Removes `path` if it is there.
fn remove_if_there(path: &Path) -> Result<(), String> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(format!("{}: {e}", path.display())),
        _ => Ok(()),
    }
}

fn gen(dir: &Path, spec: Spec, format: Format) -> Result<(), String> {
    let (model, nodes) = spec.cluster();
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let started = Instant::now();
    for ns in model.namespaces.keys() {
        let text = namespace_file(&model, ns, format)?;
        std::fs::write(dir.join(format!("{ns}.{}", format.ext())), text).map_err(|e| format!("{ns}: {e}"))?;
        // The same objects in the other format would be read too, as duplicates.
        remove_if_there(&dir.join(format!("{ns}.{}", format.other().ext())))?;
    }
    // The Nodes, in one file; none left by an earlier `gen` in either format, nor the node
    // `node-events` adds.
    for f in [format, format.other()] {
        remove_if_there(&dir.join(format!("{NODES_FILE}.{}", f.ext())))?;
        remove_if_there(&dir.join(format!("{}.{}", node_name(spec.nodes), f.ext())))?;
    }
    if !nodes.is_empty() {
        let docs: Vec<Value> = nodes.iter().map(|(name, facts)| node_doc(name, facts)).collect();
        let path = dir.join(format!("{NODES_FILE}.{}", format.ext()));
        std::fs::write(&path, documents(docs, format)?).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    // The ClusterNetworkPolicies, in one file; none left by an earlier `gen` in either format.
    for f in [format, format.other()] {
        remove_if_there(&dir.join(format!("{CNPS_FILE}.{}", f.ext())))?;
    }
    if !model.cluster_policies.is_empty() {
        let path = dir.join(format!("{CNPS_FILE}.{}", format.ext()));
        std::fs::write(&path, cnps_file(&model, format)?).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    std::fs::write(dir.join(".spec"), spec.marker()).map_err(|e| e.to_string())?;
    eprintln!(
        "wrote {} namespaces, {} pods, {} policies, {} staged policies, {} nodes, {} cluster policies in {:?}",
        model.namespaces.len(),
        model.pods.len(),
        model.policies.len(),
        model.staged_policies.len(),
        nodes.len(),
        model.cluster_policies.len(),
        started.elapsed()
    );

    // Read back through the agent's loader: the manifests must mean exactly the model.
    let (objects, invalid) = load_dir(dir);
    if let Some(i) = invalid.first() {
        return Err(format!("{} problem(s) reading back, first: {}: {}", invalid.len(), i.origin, i.error));
    }
    let mut back = Model::default();
    let mut back_nodes = ClusterNodes::new();
    let mut strings = npagent::model::Interner::default();
    for o in &objects {
        match &o.object {
            KubeObject::Namespace(n) => {
                let n = convert::namespace(n, &mut strings).map_err(|e| e.to_string())?;
                back.namespaces.insert(n.name.clone(), n);
            }
            KubeObject::Pod(p) => {
                let p = convert::pod(p, &mut strings).map_err(|e| e.to_string())?;
                back.pods.insert(oref(&p.namespace, &p.name), Box::new(p));
            }
            KubeObject::NetworkPolicy(p) => {
                let p = convert::policy(p, &mut npagent::model::Interner::default()).map_err(|e| e.to_string())?;
                back.policies.insert(oref(&p.namespace, &p.name), p);
            }
            KubeObject::StagedNetworkPolicy(p) => {
                let p = convert::staged_policy(p, &mut strings).map_err(|e| e.to_string())?;
                back.staged_policies.insert(oref(&p.namespace, &p.name), p);
            }
            KubeObject::Node(n) => {
                let (name, facts) = convert::node(n).map_err(|e| e.to_string())?;
                back_nodes.insert(name, facts);
            }
            KubeObject::ClusterNetworkPolicy(p) => {
                let p = npagent::model::cluster_policy::convert(p, &mut strings).map_err(|e| e.to_string())?;
                back.cluster_policies.insert(p.name.clone(), p);
            }
        }
    }
    if back.namespaces != model.namespaces
        || back.pods != model.pods
        || back.policies != model.policies
        || back.staged_policies != model.staged_policies
        || back.cluster_policies != model.cluster_policies
    {
        return Err("the manifests read back differ from the synthetic model".into());
    }
    if back_nodes != nodes {
        return Err(format!(
            "the Nodes read back differ from the generated ones ({} read, {} generated)",
            back_nodes.len(),
            nodes.len()
        ));
    }
    eprintln!(
        "read back and checked: identical model ({} ClusterNetworkPolicies), {} identical Nodes",
        back.cluster_policies.len(),
        nodes.len()
    );

    let mut out = std::io::stdout().lock();
    for p in model.ports.values() {
        let ip = p.ips.first().map(|ip| ip.to_string()).unwrap_or_default();
        let mac = p.mac.map(|m| m.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")).unwrap_or_default();
        writeln!(out, "{} {} {} {} {ip} {mac}", p.ofport, p.interface, p.pod.namespace, p.pod.name)
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// The file of one namespace: the Namespace, its Pods, its NetworkPolicies, as YAML documents
/// or as JSON objects, one per line.
fn namespace_file(model: &Model, ns: &str, format: Format) -> Result<String, String> {
    let mut docs = Vec::new();
    let n = model.namespaces.get(ns).ok_or("no such namespace")?;
    docs.push(json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": n.name, "labels": n.labels, "annotations": n.annotations},
    }));
    for p in model.pods.range(oref(ns, "")..).take_while(|(r, _)| &*r.namespace == ns).map(|(_, p)| p) {
        let ports: Vec<Value> = p
            .ports
            .iter()
            .map(|c| json!({"name": c.name.as_deref(), "containerPort": c.port, "protocol": protocol(c.protocol)}))
            .collect();
        let ips: Vec<Value> = p.ips.iter().map(|ip| json!({"ip": ip.to_string()})).collect();
        docs.push(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"namespace": &*p.namespace, "name": &*p.name, "labels": p.labels},
            "spec": {"nodeName": p.node.as_deref(), "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.9", "ports": ports}]},
            "status": {"phase": "Running", "podIP": p.ips.first().map(|ip| ip.to_string()), "podIPs": ips},
        }));
    }
    let in_ns = |m: &'_ std::collections::BTreeMap<ObjectRef, Policy>| {
        m.range(oref(ns, "")..).take_while(|(r, _)| &*r.namespace == ns).map(|(_, p)| p).cloned().collect::<Vec<_>>()
    };
    for p in in_ns(&model.policies) {
        docs.push(policy_doc(&p, "networking.k8s.io/v1", "NetworkPolicy"));
    }
    for p in in_ns(&model.staged_policies) {
        docs.push(policy_doc(&p, "policy.npagent.io/v1alpha1", "StagedNetworkPolicy"));
    }
    documents(docs, format)
}

/// Documents as a file's text: YAML documents, or JSON objects one per line.
fn documents(docs: Vec<Value>, format: Format) -> Result<String, String> {
    let mut text = String::new();
    for d in docs {
        match format {
            Format::Yaml => {
                text.push_str("---\n");
                text.push_str(&serde_saphyr::to_string(&d).map_err(|e| e.to_string())?);
            }
            Format::Json => {
                text.push_str(&serde_json::to_string(&d).map_err(|e| e.to_string())?);
                text.push('\n');
            }
        }
    }
    Ok(text)
}

/// The file of the ClusterNetworkPolicies: every one of `model`, by name.
fn cnps_file(model: &Model, format: Format) -> Result<String, String> {
    documents(model.cluster_policies.values().map(cluster_policy_doc).collect(), format)
}

/// A ClusterNetworkPolicy as the API writes it (`npagent::model::cluster_policy::convert`
/// read backwards).
fn cluster_policy_doc(p: &ClusterPolicy) -> Value {
    let rules = |rules: &[ClusterRule], peers: &str| -> Vec<Value> {
        rules
            .iter()
            .map(|r| {
                let mut v = json!({"action": r.action.as_str()});
                if let Some(name) = &r.name {
                    v["name"] = json!(name);
                }
                v[peers] = r.peers.iter().map(cluster_peer).collect();
                if !r.protocols.is_empty() {
                    v["protocols"] = r.protocols.iter().map(cluster_protocol).collect();
                }
                v
            })
            .collect()
    };
    let subject = match &p.subject.pods {
        None => json!({"namespaces": selector(&p.subject.namespaces)}),
        Some(_) => json!({"pods": pod_set(&p.subject)}),
    };
    let mut spec = json!({"tier": p.tier.as_str(), "priority": p.priority, "subject": subject});
    if !p.ingress.is_empty() {
        spec["ingress"] = json!(rules(&p.ingress, "from"));
    }
    if !p.egress.is_empty() {
        spec["egress"] = json!(rules(&p.egress, "to"));
    }
    json!({
        "apiVersion": "policy.networking.k8s.io/v1alpha2", "kind": "ClusterNetworkPolicy",
        "metadata": {"name": p.name},
        "spec": spec,
    })
}

/// `{namespaceSelector, podSelector}` of a pod set with a pod selector.
fn pod_set(s: &PodSet) -> Value {
    json!({"namespaceSelector": selector(&s.namespaces), "podSelector": s.pods.as_ref().map(selector)})
}

fn cluster_peer(p: &ClusterPeer) -> Value {
    match p {
        ClusterPeer::Pods(s) if s.pods.is_none() => json!({"namespaces": selector(&s.namespaces)}),
        ClusterPeer::Pods(s) => json!({"pods": pod_set(s)}),
        ClusterPeer::Networks(cidrs) => {
            json!({"networks": cidrs.iter().map(|c| format!("{}/{}", c.addr, c.prefix)).collect::<Vec<_>>()})
        }
        ClusterPeer::Unrecognised => json!({}),
    }
}

fn cluster_protocol(p: &ClusterProtocol) -> Value {
    match p {
        ClusterProtocol::NamedPort(name) => json!({"destinationNamedPort": name}),
        ClusterProtocol::Port(s) => {
            let first = match &s.port {
                Some(PortRef::Number(n)) => *n,
                _ => 0, // convert gives every port spec of a ClusterNetworkPolicy a number
            };
            let port = match s.end_port {
                Some(end) => json!({"range": {"start": first, "end": end}}),
                None => json!({"number": first}),
            };
            let field = match s.protocol {
                Protocol::Tcp => "tcp",
                Protocol::Udp => "udp",
                Protocol::Sctp => "sctp",
            };
            let mut v = json!({});
            v[field] = json!({"destinationPort": port});
            v
        }
    }
}

/// A Node: its podCIDRs (`spec.podCIDR` the first) and its InternalIPs and ExternalIPs (and
/// its name as Hostname, which npagent does not read).
fn node_doc(name: &str, facts: &NodeFacts) -> Value {
    let cidrs: Vec<String> = facts.pod_cidrs.iter().map(ToString::to_string).collect();
    let mut addresses: Vec<Value> = facts
        .internal_ips
        .iter()
        .map(|ip| json!({"type": "InternalIP", "address": ip.to_string()}))
        .chain(facts.external_ips.iter().map(|ip| json!({"type": "ExternalIP", "address": ip.to_string()})))
        .collect();
    addresses.push(json!({"type": "Hostname", "address": name}));
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name},
        "spec": {"podCIDR": cidrs.first(), "podCIDRs": cidrs},
        "status": {"addresses": addresses},
    })
}

/// A NetworkPolicy, or with `kind` StagedNetworkPolicy its staged twin (the same spec).
fn policy_doc(p: &Policy, api_version: &str, kind: &str) -> Value {
    let mut types = Vec::new();
    if p.affects_ingress {
        types.push("Ingress");
    }
    if p.affects_egress {
        types.push("Egress");
    }
    let ingress: Vec<Value> = p
        .ingress
        .iter()
        .map(|r| json!({"from": r.from.iter().map(peer).collect::<Vec<_>>(), "ports": ports(&r.ports)}))
        .collect();
    let egress: Vec<Value> = p
        .egress
        .iter()
        .map(|r| json!({"to": r.to.iter().map(peer).collect::<Vec<_>>(), "ports": ports(&r.ports)}))
        .collect();
    let mut spec = json!({"podSelector": selector(&p.pod_selector), "policyTypes": types, "ingress": ingress});
    if p.affects_egress {
        spec["egress"] = json!(egress);
    }
    json!({
        "apiVersion": api_version, "kind": kind,
        "metadata": {"namespace": p.namespace, "name": p.name},
        "spec": spec,
    })
}

fn ports(specs: &[PortSpec]) -> Vec<Value> {
    specs
        .iter()
        .map(|s| {
            let mut v = json!({"protocol": protocol(s.protocol)});
            match &s.port {
                Some(PortRef::Number(n)) => v["port"] = json!(n),
                Some(PortRef::Name(name)) => v["port"] = json!(name),
                None => {}
            }
            if let Some(e) = s.end_port {
                v["endPort"] = json!(e);
            }
            v
        })
        .collect()
}

fn protocol(p: Protocol) -> &'static str {
    match p {
        Protocol::Tcp => "TCP",
        Protocol::Udp => "UDP",
        Protocol::Sctp => "SCTP",
    }
}

fn selector(s: &LabelSelector) -> Value {
    let exprs: Vec<Value> = s
        .match_expressions
        .iter()
        .map(|r| {
            let op = match r.op {
                SelectorOp::In => "In",
                SelectorOp::NotIn => "NotIn",
                SelectorOp::Exists => "Exists",
                SelectorOp::DoesNotExist => "DoesNotExist",
            };
            let mut v = json!({"key": r.key, "operator": op});
            if !r.values.is_empty() {
                v["values"] = json!(r.values);
            }
            v
        })
        .collect();
    let mut v = json!({});
    if !s.match_labels.is_empty() {
        v["matchLabels"] = json!(s.match_labels);
    }
    if !exprs.is_empty() {
        v["matchExpressions"] = json!(exprs);
    }
    v
}

fn peer(p: &Peer) -> Value {
    match p {
        Peer::Pods { pod_selector, namespace_selector } => {
            let mut v = json!({});
            if let Some(s) = pod_selector {
                v["podSelector"] = selector(s);
            }
            if let Some(s) = namespace_selector {
                v["namespaceSelector"] = selector(s);
            }
            v
        }
        Peer::IpBlock { cidr, except } => {
            let except: Vec<String> = except.iter().map(|c| format!("{}/{}", c.addr, c.prefix)).collect();
            json!({"ipBlock": {"cidr": format!("{}/{}", cidr.addr, cidr.prefix), "except": except}})
        }
    }
}

/// Follows the agent's log from its current end.
struct LogTail {
    file: std::fs::File,
    buf: String,
}

impl LogTail {
    fn open(path: &Path) -> Result<LogTail, String> {
        let mut file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
        file.seek(SeekFrom::End(0)).map_err(|e| e.to_string())?;
        Ok(LogTail { file, buf: String::new() })
    }

    /// The next complete line containing `needle`, waiting up to `timeout`.
    fn wait_for(&mut self, needles: &[&str], timeout: Duration) -> Option<String> {
        let deadline = Instant::now() + timeout;
        loop {
            while let Some(nl) = self.buf.find('\n') {
                let line: String = self.buf.drain(..=nl).collect();
                if needles.iter().any(|n| line.contains(n)) {
                    return Some(line);
                }
            }
            let mut chunk = String::new();
            if self.file.read_to_string(&mut chunk).unwrap_or(0) > 0 {
                self.buf.push_str(&chunk);
                continue;
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_micros(500));
        }
    }
}

/// Seconds since the epoch of a line starting with tracing-subscriber's
/// `2026-11-29T12:34:56.123456Z` (ANSI colour codes before it are skipped).
fn line_time(line: &str) -> Option<f64> {
    let start = line.char_indices().map(|(i, _)| i).find(|&i| {
        let b = line.as_bytes().get(i..i.saturating_add(5));
        b.is_some_and(|b| b[..4].iter().all(u8::is_ascii_digit) && b[4] == b'-')
    })?;
    let ts = line.get(start..)?.split(|c: char| c == 'Z' || c.is_whitespace()).next()?;
    let (date, time) = ts.split_once('T')?;
    let mut d = date.split('-').map(|s| s.parse::<u32>().ok());
    let (year, month, day) = (d.next()??, d.next()??, d.next()??);
    let mut t = time.split(':');
    let (hour, minute) = (t.next()?.parse().ok()?, t.next()?.parse().ok()?);
    let sec = t.next()?.parse::<f64>().ok()?;
    let civil = Civil { year: year.into(), month, day, hour, minute, second: 0, nanos: 0 };
    Some(civil.to_system_time()?.duration_since(UNIX_EPOCH).ok()?.as_secs_f64() + sec)
}

fn now_secs() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

fn churn(dir: &Path, log: &Path, n: &str, kind: &str, ofp: Option<&str>) -> Result<(), String> {
    let n: usize = n.parse().map_err(|_| format!("bad count {n:?}"))?;
    if !["policy", "pod", "egress", "egress-pod", "staged", "cnp"].contains(&kind) {
        return Err(format!("unknown change kind {kind:?}"));
    }
    let mut model = spec_for(dir).model();
    if kind == "staged" && !model.staged_policies.contains_key(&oref(&ns_name(0), "np0")) {
        return Err("staged: the cluster has no staged edit of ns0/np0 (gen ... staged=N)".into());
    }
    if kind == "cnp" && !model.cluster_policies.contains_key(CHURNED_CNP) {
        return Err(format!("cnp: the cluster has no ClusterNetworkPolicy {CHURNED_CNP} (gen ... cnps=N)"));
    }
    let ns = ns_name(if kind.starts_with("egress") { 110 } else { 0 });
    if kind.starts_with("egress") && model.policies.get(&oref(&ns, "np9")).is_none_or(|p| p.egress.is_empty()) {
        return Err(format!("{kind}: {ns}/np9 has no egress rule in this cluster"));
    }
    // The file the change is written to: the namespace's, or the ClusterNetworkPolicies'.
    let file = if kind == "cnp" { CNPS_FILE.to_string() } else { ns.clone() };
    let format = Format::of(dir, &file)?;
    let target: PathBuf = dir.join(format!("{file}.{}", format.ext()));
    let tmp: PathBuf = dir.join(format!(".{file}.{}.tmp", format.ext()));
    let mut tail = LogTail::open(log)?;
    let mut out = std::io::stdout().lock();
    for i in 1..=n {
        // Odd changes move away from the generated state, even ones back to it.
        let away = i % 2 == 1;
        // What the bridge shows when the change is away, and the table it shows it in.
        let (marker, table) = match kind {
            "policy" => {
                let p = model.policies.get_mut(&oref(&ns, "np0")).ok_or("np0")?;
                p.ingress[0].ports = vec![tcp(if away { 8080 } else { 80 })];
                ("ct_tp_dst=8080,", INGRESS_RULE)
            }
            "staged" => {
                let p = model.staged_policies.get_mut(&oref(&ns, "np0")).ok_or("staged np0")?;
                p.ingress[0].ports = vec![tcp(if away { 8444 } else { 8443 })];
                ("ct_tp_dst=8444,", STAGED_INGRESS_RULE)
            }
            "egress" => {
                let p = model.policies.get_mut(&oref(&ns, "np9")).ok_or("np9")?;
                p.egress[0].ports = vec![tcp(if away { 5433 } else { 5432 })];
                ("ct_tp_dst=5433,", EGRESS_RULE)
            }
            "pod" | "egress-pod" => {
                let p = model.pods.get_mut(&oref(&ns, &pod_name(5))).ok_or("pod5")?;
                let into = if kind == "pod" { "app1" } else { "app4" };
                p.labels.insert("app", if away { into } else { "app5" });
                if kind == "pod" {
                    ("ct_nw_src=10.0.0.5,", INGRESS_RULE)
                } else {
                    ("ct_nw_dst=10.0.110.5,", EGRESS_RULE)
                }
            }
            "cnp" => {
                let p = model.cluster_policies.get_mut(CHURNED_CNP).ok_or(CHURNED_CNP)?;
                let first = p.ingress.first_mut().and_then(|r| r.protocols.first_mut()).ok_or("its first port")?;
                *first = ClusterProtocol::Port(tcp(if away { 2222 } else { 22 }));
                ("ct_tp_dst=2222,", ADMIN_INGRESS_RULE)
            }
            _ => unreachable!("checked above"),
        };
        let text = if kind == "cnp" { cnps_file(&model, format)? } else { namespace_file(&model, &ns, format)? };
        std::fs::write(&tmp, text).map_err(|e| format!("{}: {e}", tmp.display()))?;
        std::fs::rename(&tmp, &target).map_err(|e| format!("rename: {e}"))?;
        let renamed = now_secs();

        let scan = tail.wait_for(&["recompiling for"], Duration::from_secs(5));
        let commit = tail.wait_for(&["flow_mods committed"], Duration::from_secs(5));
        let (Some(scan), Some(commit)) = (scan, commit) else {
            return Err(format!("change {i}: no bundle committed within 5 s"));
        };
        let ms = |line: &str| line_time(line).map(|t| (t - renamed) * 1000.0);
        let (Some(scan_ms), Some(commit_ms)) = (ms(&scan), ms(&commit)) else {
            return Err(format!("change {i}: cannot read the timestamp of {commit:?}"));
        };
        let mods = commit.split("bundle of ").nth(1).and_then(|s| s.split_whitespace().next()).unwrap_or("?");
        writeln!(out, "{i} {scan_ms:.3} {commit_ms:.3} {mods}").map_err(|e| e.to_string())?;
        out.flush().map_err(|e| e.to_string())?;

        if let Some(ofp) = ofp.filter(|_| i % 10 == 0 || i == 1) {
            let dump = std::process::Command::new("ovs-ofctl")
                .args(["-O", "OpenFlow15", "--no-stats", "dump-flows", ofp, &format!("table={table}")])
                .output()
                .map_err(|e| format!("ovs-ofctl: {e}"))?;
            let text = String::from_utf8_lossy(&dump.stdout);
            let present = text.lines().any(|l| l.contains(marker) && l.contains("conjunction("));
            if present != away {
                let lines: Vec<&str> = text.lines().filter(|l| l.contains(marker)).collect();
                return Err(format!(
                    "change {i}: table {table} of the bridge does not show it ({marker} with conjunction() present: \
                     {present}):\n{}",
                    lines.join("\n")
                ));
            }
        }
        // Let the next change be a change of its own (not coalesced with this one).
        std::thread::sleep(Duration::from_millis(30 + (i as u64 * 7) % 40));
    }
    Ok(())
}

/// `node-events DIR LOG N NETNS`: node `node-M` (M the cluster's node count) joins and leaves
/// N times each; the time from the rename (or the removal) of its file to the agent's line
/// saying its route was set (or removed), checked in the routing table of NETNS.
fn node_events(dir: &Path, log: &Path, n: &str, netns: &str) -> Result<(), String> {
    let n: usize = n.parse().map_err(|_| format!("bad count {n:?}"))?;
    let nodes = spec_for(dir).nodes;
    if nodes == 0 || nodes >= MAX_NODES {
        return Err(format!("{}: no cluster of Nodes there (gen ... nodes=N, N < {MAX_NODES})", dir.display()));
    }
    let format = Format::of(dir, NODES_FILE)?;
    let name = node_name(nodes);
    let facts = node_facts(nodes);
    let (cidr, via) = facts.route(true).ok_or("the new node has no IPv4 route")?;
    let route = format!("{cidr} via {via}");
    let text = documents(vec![node_doc(&name, &facts)], format)?;
    let target: PathBuf = dir.join(format!("{name}.{}", format.ext()));
    let tmp: PathBuf = dir.join(format!(".{name}.{}.tmp", format.ext()));
    let mut tail = LogTail::open(log)?;
    let mut out = std::io::stdout().lock();
    for i in 1..=n {
        for join in [true, false] {
            if join {
                std::fs::write(&tmp, &text).map_err(|e| format!("{}: {e}", tmp.display()))?;
                std::fs::rename(&tmp, &target).map_err(|e| format!("rename: {e}"))?;
            } else {
                std::fs::remove_file(&target).map_err(|e| format!("{}: {e}", target.display()))?;
            }
            let done = now_secs();
            let needle = format!("{} {route}", if join { "set" } else { "removed" });
            // The route's line, and the last scan before it.
            let mut scan = None;
            let line = loop {
                let Some(line) = tail.wait_for(&[&needle, "files looked at"], Duration::from_secs(10)) else {
                    return Err(format!("event {i}: no \"{needle}\" in the agent's log within 10 s"));
                };
                if line.contains(&needle) {
                    break line;
                }
                scan = Some(line);
            };
            let ms =
                |line: &str| line_time(line).map(|t| (t - done) * 1000.0).ok_or(format!("no timestamp in {line:?}"));
            let (route_ms, scan_ms) = (ms(&line)?, ms(scan.as_deref().ok_or("no scan line before the route's")?)?);
            let event = if join { "join" } else { "leave" };
            writeln!(out, "{i} {event} {route_ms:.3} {scan_ms:.3}").map_err(|e| e.to_string())?;
            out.flush().map_err(|e| e.to_string())?;

            let shown = std::process::Command::new("ip")
                .args(["-n", netns, "route", "show", "proto", "78"])
                .output()
                .map_err(|e| format!("ip route: {e}"))?;
            let table = String::from_utf8_lossy(&shown.stdout);
            let held = table.lines().any(|l| l.starts_with(&format!("{cidr} via {via} ")) || l.trim() == route);
            let count = table.lines().count();
            let want = if join { nodes } else { nodes - 1 };
            if !shown.status.success() || held != join || count != want {
                return Err(format!(
                    "event {i} ({event}): the routing table of {netns} holds {count} routes of npagent's (not \
                     {want}), {route} {}",
                    if held { "among them" } else { "not among them" }
                ));
            }
            // Let the next event be one of its own.
            std::thread::sleep(Duration::from_millis(30 + (i as u64 * 7) % 40));
        }
    }
    Ok(())
}

/// `count DIR`: the flows of the cluster of DIR as the compiler gives them (without the node's
/// flows, which the synthetic model has none of), how many are the staged view's
/// (`is_staged_flow`), how many local pods a staged policy touches, and how many flows are in
/// each tier table: `flows staged_flows touched_pods local_pods staged_policies
/// cluster_policies admin_egress baseline_egress admin_ingress baseline_ingress`.
fn count(dir: &Path) -> Result<(), String> {
    let model = spec_for(dir).model();
    let c = compile(&model, Config::default(), IdAllocator::new(60), 0);
    let staged = c.flows().iter().filter(|(k, v)| is_staged_flow(k, v)).count();
    let in_table = |t: u8| c.flows().iter().filter(|(k, _)| k.table == t).count();
    println!(
        "{} {staged} {} {} {} {} {} {} {} {}",
        c.flows().len(),
        touched_ports(&model).len(),
        model.ports.len(),
        model.staged_policies.len(),
        model.cluster_policies.len(),
        in_table(ADMIN_EGRESS_RULE),
        in_table(BASELINE_EGRESS_RULE),
        in_table(ADMIN_INGRESS_RULE),
        in_table(BASELINE_INGRESS_RULE)
    );
    Ok(())
}
