//! This node's configuration from the Kubernetes API, beside the flags: its Node object
//! (`spec.podCIDRs`: the gateway's default addresses; `status.addresses`: the node's own
//! InternalIP and ExternalIP addresses) and the cluster's ServiceCIDR objects
//! (networking.k8s.io/v1, Kubernetes 1.33 and later: their `spec.cidrs` are Service ranges).
//!
//! What they say is merged with the flags ([`merge`]) into one [`NodeConfig`], published on a
//! watch channel whenever it changes, so that the flows follow. The flags win for the gateway's
//! addresses (`--gateway-ip`); addresses and Service ranges add to theirs. An API server that
//! serves no ServiceCIDRs (404) leaves the flags' ranges alone, said once. A podCIDR, address
//! or CIDR that does not parse is skipped with a warning naming its object; the rest is used.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::networking::v1::ServiceCIDR;
use kube::runtime::watcher::{self, watcher, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Client};
use tokio::sync::watch;

use crate::model::cidr::parse_cidr;
use crate::model::node::{InterfaceAddr, NodeConfig};
use crate::model::Cidr;

/// The Node's address types that are the node's own.
const OWN_ADDRESS_TYPES: [&str; 2] = ["InternalIP", "ExternalIP"];

/// What this node's Node object says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeFacts {
    /// `spec.podCIDRs` (or the older `spec.podCIDR`), in order.
    pub pod_cidrs: Vec<Cidr>,
    /// Its InternalIP and ExternalIP `status.addresses`.
    pub addresses: BTreeSet<IpAddr>,
}

/// What the Node object `node` says, and what in it could not be read.
pub fn node_facts(node: &Node) -> (NodeFacts, Vec<String>) {
    let name = node.metadata.name.as_deref().unwrap_or("");
    let mut problems = Vec::new();
    let mut facts = NodeFacts::default();
    let spec = node.spec.as_ref();
    let cidrs = spec.and_then(|s| s.pod_cidrs.clone()).filter(|c| !c.is_empty());
    for text in cidrs.or_else(|| spec.and_then(|s| s.pod_cidr.clone()).map(|c| vec![c])).unwrap_or_default() {
        match parse_cidr(&text) {
            Ok(cidr) => facts.pod_cidrs.push(cidr),
            Err(e) => problems.push(format!("Node {name}: podCIDR {text:?}: {e}; skipped")),
        }
    }
    let addresses = node.status.as_ref().and_then(|s| s.addresses.as_ref());
    for a in addresses.into_iter().flatten().filter(|a| OWN_ADDRESS_TYPES.contains(&a.type_.as_str())) {
        match a.address.parse() {
            Ok(ip) => {
                facts.addresses.insert(ip);
            }
            Err(_) => problems.push(format!("Node {name}: {} {:?} is not an IP address; skipped", a.type_, a.address)),
        }
    }
    (facts, problems)
}

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
        config.node_ips.extend(&node.addresses);
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

/// The node's configuration as the API's events build it.
#[derive(Debug)]
pub struct NodeConfigState {
    flags: NodeConfig,
    /// This node's name.
    name: String,
    node: Listed<NodeFacts>,
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
            node: Listed::default(),
            service_cidrs: Listed::default(),
            warned: BTreeSet::new(),
        }
    }

    /// Applies an event of this node's Node watcher.
    pub fn node_event(&mut self, event: Event<Node>) {
        let listed = matches!(event, Event::InitDone);
        let mut problems = Vec::new();
        self.node.apply(event, |n| {
            let (facts, p) = node_facts(n);
            problems.extend(p);
            facts
        });
        if listed && self.node.objects.is_empty() {
            problems.push(format!(
                "the API has no Node {:?} (--node, NODE_NAME): its podCIDR and addresses are not read until it appears",
                self.name
            ));
        }
        self.warn(problems);
    }

    /// Applies an event of the ServiceCIDR watcher.
    pub fn service_cidr_event(&mut self, event: Event<ServiceCIDR>) {
        let mut problems = Vec::new();
        self.service_cidrs.apply(event, |o| {
            let (cidrs, p) = service_cidrs(o);
            problems.extend(p);
            cidrs
        });
        self.warn(problems);
    }

    /// The configuration now.
    pub fn config(&self) -> NodeConfig {
        merge(&self.flags, self.node.objects.values().next(), self.service_cidrs.objects.values().flatten())
    }

    fn warn(&mut self, problems: Vec<String>) {
        for p in problems {
            if self.warned.insert(p.clone()) {
                tracing::warn!("{p}");
            }
        }
    }
}

/// One event of either watcher (boxed: a Node is large).
enum Update {
    Node(Box<Result<Event<Node>, watcher::Error>>),
    ServiceCidr(Box<Result<Event<ServiceCIDR>, watcher::Error>>),
}

/// Follows Node `node` (none when the name is empty) and the ServiceCIDRs, and publishes
/// their merge with `flags` on `tx` whenever it changes, until every receiver is gone. Never
/// fails: API errors are retried with backoff; a 404 for ServiceCIDRs ends their watch.
pub async fn watch_node_config(client: Client, node: String, flags: NodeConfig, tx: watch::Sender<NodeConfig>) {
    let nodes = if node.is_empty() {
        tracing::warn!(
            "no node name (--node or NODE_NAME): the Node's podCIDR and addresses are not read, the flags alone describe the node"
        );
        futures::stream::pending().boxed()
    } else {
        let config = watcher::Config::default().fields(&format!("metadata.name={node}"));
        watcher(Api::<Node>::all(client.clone()), config).default_backoff().map(|u| Update::Node(Box::new(u))).boxed()
    };
    let cidrs = watcher(Api::<ServiceCIDR>::all(client), watcher::Config::default())
        .default_backoff()
        .take_while(|item| {
            let served = !matches!(item, Err(e) if is_not_found(e));
            if !served {
                tracing::info!(
                    "the Kubernetes API serves no networking.k8s.io/v1 ServiceCIDRs (before 1.33?): the Service ranges are --service-cidr's alone"
                );
            }
            std::future::ready(served)
        })
        .map(|u| Update::ServiceCidr(Box::new(u)))
        .boxed();
    follow(futures::stream::select(nodes, cidrs), NodeConfigState::new(flags, node), tx).await
}

/// Applies `updates` to `state` and publishes the configuration on `tx` when it changes.
async fn follow(
    mut updates: impl Stream<Item = Update> + Unpin,
    mut state: NodeConfigState,
    tx: watch::Sender<NodeConfig>,
) {
    loop {
        let update = tokio::select! {
            u = updates.next() => match u {
                Some(u) => u,
                None => return tx.closed().await,
            },
            _ = tx.closed() => return,
        };
        match update {
            Update::Node(u) => match *u {
                Ok(ev) => state.node_event(ev),
                Err(e) => tracing::warn!("Kubernetes watch of this Node failed, retrying with backoff: {e}"),
            },
            Update::ServiceCidr(u) => match *u {
                Ok(ev) => state.service_cidr_event(ev),
                Err(e) => tracing::warn!("Kubernetes watch of ServiceCIDRs failed, retrying with backoff: {e}"),
            },
        }
        let config = state.config();
        tx.send_if_modified(|current| {
            if *current == config {
                return false;
            }
            tracing::info!("{}", describe(&config));
            *current = config;
            true
        });
    }
}

/// Whether a watcher error is the API server's 404: the resource is not served.
pub(super) fn is_not_found(e: &watcher::Error) -> bool {
    match e {
        watcher::Error::InitialListFailed(kube::Error::Api(status))
        | watcher::Error::WatchStartFailed(kube::Error::Api(status))
        | watcher::Error::WatchFailed(kube::Error::Api(status)) => status.is_not_found(),
        watcher::Error::WatchError(status) => status.is_not_found(),
        _ => false,
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
