//! This node's configuration beside the flags: its Node object among the cluster's Nodes (as
//! the object source lists them: `spec.podCIDRs`, the gateway's default addresses;
//! `status.addresses`, the node's own InternalIP and ExternalIP addresses) and, in kube mode,
//! the cluster's ServiceCIDR objects (networking.k8s.io/v1, Kubernetes 1.33 and later: their
//! `spec.cidrs` are Service ranges).
//!
//! What they say is merged with the flags ([`merge`]) into one [`NodeConfig`], published on a
//! watch channel whenever it changes, so that the flows follow. The flags win for the gateway's
//! addresses (`--gateway-ip`); addresses and Service ranges add to theirs. An API server that
//! serves no ServiceCIDRs (404) leaves the flags' ranges alone, said once. A CIDR of a
//! ServiceCIDR that does not parse is skipped with a warning naming its object; the rest is
//! used.

use std::collections::{BTreeMap, BTreeSet};

use futures::{Stream, StreamExt};
use k8s_openapi::api::networking::v1::ServiceCIDR;
use kube::runtime::watcher::{self, watcher, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Client};
use tokio::sync::watch;

use crate::model::cidr::parse_cidr;
use crate::model::node::{ClusterNodes, InterfaceAddr, NodeConfig, NodeFacts};
use crate::model::Cidr;

/// The Service ranges of a ServiceCIDR object, and what in it could not be read.
pub fn service_cidrs(object: &ServiceCIDR) -> (Vec<Cidr>, Vec<String>) {
    let name = object.metadata.name.as_deref().unwrap_or("");
    let mut problems = Vec::new();
    let mut cidrs = Vec::new();
    for text in object.spec.as_ref().and_then(|s| s.cidrs.as_ref()).into_iter().flatten() {
        match parse_cidr(text) {
            Ok(cidr) => cidrs.push(cidr),
            Err(e) => problems.push(format!("ServiceCIDR {name}: {text:?}: {e}; skipped")),
        }
    }
    (cidrs, problems)
}

/// The node's configuration: the flags, the Node's facts and the ServiceCIDRs' ranges. The
/// gateway's addresses are the flags' when they give any, else the first address of each
/// podCIDR (one per IP family, the first podCIDR of a family winning).
pub fn merge<'a>(
    flags: &NodeConfig,
    node: Option<&NodeFacts>,
    service_cidrs: impl IntoIterator<Item = &'a Cidr>,
) -> NodeConfig {
    let mut config = flags.clone();
    if let Some(node) = node {
        if config.gateway_addrs.is_empty() {
            for addr in node.pod_cidrs.iter().filter_map(|c| InterfaceAddr::first_of(*c)) {
                if !config.gateway_addrs.iter().any(|a| a.ip.is_ipv4() == addr.ip.is_ipv4()) {
                    config.gateway_addrs.push(addr);
                }
            }
        }
        config.node_ips.extend(node.addresses());
    }
    config.service_cidrs.extend(service_cidrs);
    config.service_cidrs.sort();
    config.service_cidrs.dedup();
    config
}

/// The objects of one kind as a watcher's events leave them, by name, each reduced to what
/// npagent reads of it.
#[derive(Debug)]
struct Listed<T> {
    objects: BTreeMap<String, T>,
    /// A (re)list under way.
    listing: Option<BTreeMap<String, T>>,
}

impl<T> Default for Listed<T> {
    fn default() -> Self {
        Listed { objects: BTreeMap::new(), listing: None }
    }
}

impl<T> Listed<T> {
    /// Applies one event, reading objects with `read`.
    fn apply<K: kube::Resource>(&mut self, event: Event<K>, mut read: impl FnMut(&K) -> T) {
        let name = |o: &K| o.meta().name.clone().unwrap_or_default();
        match event {
            Event::Init => self.listing = Some(BTreeMap::new()),
            Event::InitApply(o) => {
                self.listing.get_or_insert_with(BTreeMap::new).insert(name(&o), read(&o));
            }
            Event::InitDone => self.objects = self.listing.take().unwrap_or_default(),
            Event::Apply(o) => {
                self.objects.insert(name(&o), read(&o));
            }
            Event::Delete(o) => {
                self.objects.remove(&name(&o));
            }
        }
    }
}

/// The node's configuration as the Nodes and the ServiceCIDRs' events build it.
#[derive(Debug)]
pub struct NodeConfigState {
    flags: NodeConfig,
    /// This node's name ("" when not given).
    name: String,
    /// This node's Node, once listed.
    node: Option<NodeFacts>,
    /// Whether it was said that the Nodes have none named `name`.
    missing_said: bool,
    service_cidrs: Listed<Vec<Cidr>>,
    /// Problems already warned about.
    warned: BTreeSet<String>,
}

impl NodeConfigState {
    /// The flags alone, for Node `name`.
    pub fn new(flags: NodeConfig, name: String) -> NodeConfigState {
        NodeConfigState {
            flags,
            name,
            node: None,
            missing_said: false,
            service_cidrs: Listed::default(),
            warned: BTreeSet::new(),
        }
    }

    /// Takes this node's Node from the cluster's (`None`: not listed yet).
    pub fn nodes(&mut self, nodes: Option<&ClusterNodes>) {
        let Some(nodes) = nodes else { return };
        self.node = nodes.get(&self.name).cloned();
        if self.node.is_none() && !self.name.is_empty() && !self.missing_said {
            tracing::warn!(
                "there is no Node {:?} (--node, NODE_NAME): its podCIDR and addresses are not read until it appears",
                self.name
            );
        }
        self.missing_said = self.node.is_none();
    }

    /// Applies an event of the ServiceCIDR watcher.
    pub fn service_cidr_event(&mut self, event: Event<ServiceCIDR>) {
        let mut problems = Vec::new();
        self.service_cidrs.apply(event, |o| {
            let (cidrs, p) = service_cidrs(o);
            problems.extend(p);
            cidrs
        });
        for p in problems {
            if self.warned.insert(p.clone()) {
                tracing::warn!("{p}");
            }
        }
    }

    /// The configuration now.
    pub fn config(&self) -> NodeConfig {
        merge(&self.flags, self.node.as_ref(), self.service_cidrs.objects.values().flatten())
    }
}

/// The ServiceCIDR watcher's events, ending at a 404 (the API serves none, said once).
pub fn service_cidr_events(client: Client) -> impl Stream<Item = Result<Event<ServiceCIDR>, watcher::Error>> + Send {
    watcher(Api::<ServiceCIDR>::all(client), watcher::Config::default()).default_backoff().take_while(|item| {
        let served = !matches!(item, Err(e) if super::kube::is_not_found(e));
        if !served {
            tracing::info!(
                "the Kubernetes API serves no networking.k8s.io/v1 ServiceCIDRs (before 1.33?): the Service ranges are --service-cidr's alone"
            );
        }
        std::future::ready(served)
    })
}

/// Follows Node `name` among the cluster's `nodes` (none when the name is empty) and the
/// ServiceCIDRs' `service_cidrs` events, and publishes their merge with `flags` on `tx`
/// whenever it changes, until every receiver is gone or `nodes` closes. Never fails: watch
/// errors are logged (the watcher retries with backoff).
pub async fn follow_node_config(
    name: String,
    flags: NodeConfig,
    mut nodes: watch::Receiver<Option<ClusterNodes>>,
    service_cidrs: impl Stream<Item = Result<Event<ServiceCIDR>, watcher::Error>>,
    tx: watch::Sender<NodeConfig>,
) {
    if name.is_empty() {
        tracing::warn!(
            "no node name (--node or NODE_NAME): the Node's podCIDR and addresses are not read, the flags alone describe the node"
        );
    }
    let mut service_cidrs = std::pin::pin!(service_cidrs.fuse());
    let mut state = NodeConfigState::new(flags, name);
    loop {
        state.nodes(nodes.borrow_and_update().as_ref());
        let config = state.config();
        tx.send_if_modified(|current| {
            if *current == config {
                return false;
            }
            tracing::info!("{}", describe(&config));
            *current = config;
            true
        });
        tokio::select! {
            changed = nodes.changed() => if changed.is_err() { return },
            Some(event) = service_cidrs.next() => match event {
                Ok(ev) => state.service_cidr_event(ev),
                Err(e) => tracing::warn!("Kubernetes watch of ServiceCIDRs failed, retrying with backoff: {e}"),
            },
            _ = tx.closed() => return,
        }
    }
}

fn describe(config: &NodeConfig) -> String {
    let join = |items: Vec<String>| if items.is_empty() { "none".to_string() } else { items.join(", ") };
    format!(
        "the node: gateway {}, own addresses {}, Service ranges {}",
        join(config.gateway_addrs.iter().map(ToString::to_string).collect()),
        join(config.node_ips.iter().map(ToString::to_string).collect()),
        join(config.service_cidrs.iter().map(|c| format!("{}/{}", c.addr, c.prefix)).collect()),
    )
}
