//! The tasks the agent runs beside its main loop, started in one place: the object source,
//! the OVSDB client, the gateway port and its device's addresses, the node's configuration
//! (the flags' and its Node's, with the gateway device's addresses merged in), the forwarded
//! connections' and the masquerade's rules, the pods' host ends' rules, the routes to other
//! nodes' pods, the packet-in forwarder, the admin server, the CNI server and the counts of
//! the ClusterNetworkPolicy tiers' verdicts. What they tell the main loop arrives on its
//! [`Inputs`]; [`Tasks`] says which of them ended.

use super::{cni, forwarded_snat, host_ends, packet_ins, routes, verdict_polls, RunError, Shared, SourceConfig};
use crate::admin::health::Health;
use crate::admin::metrics;
use crate::admin::Admin;
use crate::audit::AuditLogger;
use crate::cni::attach::AgentView;
use crate::compiler::tables;
use crate::model::node::{ClusterNodes, NodeConfig};
use crate::source::gateway::addrs::{self as gateway_addrs, DeviceAddrs};
use crate::source::gateway::{self, GatewaySpec};
use crate::source::node_config;
use crate::source::ovsdb::db::BridgePorts;
use crate::source::SourceEvent;
use crate::switch::SwitchHandle;
use ofp::packet_in2::PacketIn2;
use std::collections::BTreeSet;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

/// The tasks beside the main loop. They retry what fails, so one that ends is a bug.
pub(super) struct Tasks {
    source: JoinHandle<()>,
    ovsdb: JoinHandle<()>,
    gateway: JoinHandle<()>,
    gateway_addrs: JoinHandle<()>,
    node_config: JoinHandle<()>,
    forwarded_snat: JoinHandle<()>,
    host_ends: JoinHandle<()>,
    routes: JoinHandle<()>,
    packet_ins: JoinHandle<()>,
    /// Tells the packet-in forwarder to hand on what it holds and end.
    stop_packet_ins: oneshot::Sender<()>,
    admin: JoinHandle<()>,
    cni: JoinHandle<()>,
    verdict_polls: JoinHandle<()>,
}

impl Tasks {
    /// Every task with its name as a reason names it ("the OVSDB client").
    fn named(&self) -> [(&'static str, &JoinHandle<()>); 12] {
        [
            ("the object source", &self.source),
            ("the OVSDB client", &self.ovsdb),
            ("the gateway", &self.gateway),
            ("the gateway's addresses", &self.gateway_addrs),
            ("the node's configuration", &self.node_config),
            ("the forwarded connections' and the masquerade's rules", &self.forwarded_snat),
            ("the pods' host ends' rules", &self.host_ends),
            ("the routes to other nodes' pods", &self.routes),
            ("the packet-in forwarder", &self.packet_ins),
            ("the admin server", &self.admin),
            ("the CNI server", &self.cni),
            ("the ClusterNetworkPolicy verdict counts", &self.verdict_polls),
        ]
    }

    /// The names of the tasks that ended.
    pub(super) fn stopped(&self) -> Vec<&'static str> {
        self.named().into_iter().filter(|(_, task)| task.is_finished()).map(|(name, _)| name).collect()
    }

    /// Ends every task but the packet-in forwarder ([`Self::drain_packet_ins`]): what they
    /// were doing, the next start does again.
    pub(super) fn abort(&self) {
        for (_, task) in self.named() {
            if !std::ptr::eq(task, &self.packet_ins) {
                task.abort();
            }
        }
    }

    /// Ends the packet-in forwarder once the packet-ins already received reach the audit log.
    pub(super) async fn drain_packet_ins(self) {
        let _ = self.stop_packet_ins.send(());
        let _ = self.packet_ins.await;
    }
}

/// What the tasks tell the main loop, and what it tells the CNI server.
pub(super) struct Inputs {
    /// Namespaces, Pods and (staged) NetworkPolicies as they change.
    pub(super) source: mpsc::Receiver<SourceEvent>,
    /// The bridge's ports, from OVSDB.
    pub(super) ports: watch::Receiver<BridgePorts>,
    /// The pod ports the CNI server is taking apart (left out of the model first).
    pub(super) withdrawn: watch::Receiver<BTreeSet<String>>,
    /// The node's configuration as the pipeline uses it.
    pub(super) node: watch::Receiver<NodeConfig>,
    /// Whether the agent is ready and which pod ports are enforced, for the CNI server.
    pub(super) view: watch::Sender<AgentView>,
    /// The cluster's Nodes as the source lists them (`None` until listed), for the node's
    /// configuration and the routes.
    pub(super) nodes: watch::Sender<Option<ClusterNodes>>,
}

/// The tasks started, what they tell the main loop, and the admin server's state.
pub(super) struct Running {
    pub(super) tasks: Tasks,
    pub(super) inputs: Inputs,
    pub(super) admin: Arc<Admin>,
}

/// Starts the tasks beside the main loop, among them the admin server (on `admin_listener`,
/// with the `audit` logger's stats), the packet-in forwarder (of `packet_ins` to `audit`) and
/// the ClusterNetworkPolicy verdict counts (from the flows of `switch`). Fails when no
/// Kubernetes client can be made or the CNI socket cannot be served.
pub(super) async fn spawn(
    shared: &Shared,
    audit: &AuditLogger,
    admin_listener: TcpListener,
    packet_ins: mpsc::Receiver<PacketIn2>,
    switch: &SwitchHandle,
) -> Result<Running, RunError> {
    let Shared { cfg, started, state, metrics } = shared;
    let (packet_ins, stop_packet_ins) = packet_ins::spawn(packet_ins, audit.sender());
    let (source_tx, source_rx) = mpsc::channel::<SourceEvent>(1024);
    // The node's configuration: the flags', and in kube mode what the API adds; it lives as
    // long as the source task.
    let (node_tx, configured_rx) = watch::channel(cfg.node_net.clone());
    let (nodes_tx, nodes_rx) = watch::channel(None);
    let source = spawn_source(&cfg.source, &cfg.node, &cfg.node_net, source_tx, nodes_rx.clone(), node_tx).await?;
    // The node's configuration as the pipeline and the CNI server use it: the gateway's
    // addresses are those its device holds when none are configured.
    let (merged_tx, node_rx) = watch::channel(cfg.node_net.clone());
    let (view_tx, view_rx) = watch::channel(AgentView::default());
    let (cni, withdrawn_rx) = cni::spawn(cfg, node_rx.clone(), view_rx, Arc::clone(state))?;
    let (ports_tx, ports_rx) = watch::channel(BridgePorts::default());
    let names = tables::TABLES.iter().map(|(id, name)| (*id, name.to_string())).collect();
    let ovsdb = tokio::spawn(crate::source::ovsdb::run_ovsdb(cfg.ovsdb.clone(), cfg.bridge.clone(), names, ports_tx));
    let (device_tx, device_rx) = watch::channel(DeviceAddrs::Unknown);
    let gateway_addrs = tokio::spawn(gateway_addrs::follow_gateway_addrs(ports_rx.clone(), device_tx));
    let node_config = tokio::spawn(gateway_addrs::merge(configured_rx.clone(), device_rx.clone(), merged_tx));
    let gateway_spec =
        GatewaySpec { ovsdb: cfg.ovsdb.clone(), bridge: cfg.bridge.name.clone(), create: cfg.gateway.clone() };
    let gateway = tokio::spawn(gateway::run_gateway(gateway_spec, ports_rx.clone(), configured_rx, device_rx));
    let forwarded_snat = tokio::spawn(forwarded_snat::run_postrouting(
        cfg.forwarded.clone(),
        cfg.node.clone(),
        ports_rx.clone(),
        node_rx.clone(),
        nodes_rx.clone(),
    ));
    let host_ends = tokio::spawn(host_ends::run_host_ends(ports_rx.clone(), cfg.node.clone(), nodes_rx.clone()));
    let routes = tokio::spawn(routes::run_cluster_routes(cfg.node.clone(), nodes_rx.clone()));
    let source_name = match &cfg.source {
        SourceConfig::Manifests(_) => "the manifests directory",
        SourceConfig::Kube { .. } => "the Kubernetes API",
    };
    let registry = metrics::registry_with(Arc::clone(metrics), audit.stats(), cfg.metrics_policy_labels);
    let admin = Arc::new(Admin::new(Health::new(source_name, *started), registry));
    match admin_listener.local_addr() {
        Ok(addr) => tracing::info!("admin server on http://{addr}/ (livez, readyz, metrics)"),
        Err(e) => tracing::warn!("admin server: cannot read its bound address: {e}"),
    }
    let admin_task = tokio::spawn(crate::admin::serve(admin_listener, Arc::clone(&admin), Arc::clone(metrics)));
    let verdict_polls = tokio::spawn(verdict_polls::run_verdict_polls(
        switch.clone(),
        Arc::clone(state),
        Arc::clone(metrics),
        *started,
    ));
    let tasks = Tasks {
        source,
        ovsdb,
        gateway,
        gateway_addrs,
        node_config,
        forwarded_snat,
        host_ends,
        routes,
        packet_ins,
        stop_packet_ins,
        admin: admin_task,
        cni,
        verdict_polls,
    };
    let inputs = Inputs {
        source: source_rx,
        ports: ports_rx,
        withdrawn: withdrawn_rx,
        node: node_rx,
        view: view_tx,
        nodes: nodes_tx,
    };
    Ok(Running { tasks, inputs, admin })
}

/// Starts the object source `source` (for node `node`, whose flags say `node_net`): its
/// objects go to `objects`, what it says of the node to `node_tx`: the flags' with the
/// Node's (from `nodes`, which the main loop fills from the objects) and, in kube mode, the
/// ServiceCIDRs' on top.
async fn spawn_source(
    source: &SourceConfig,
    node: &str,
    node_net: &NodeConfig,
    objects: mpsc::Sender<SourceEvent>,
    nodes: watch::Receiver<Option<ClusterNodes>>,
    node_tx: watch::Sender<NodeConfig>,
) -> Result<JoinHandle<()>, RunError> {
    let (name, flags) = (node.to_owned(), node_net.clone());
    Ok(match source {
        SourceConfig::Manifests(dir) => {
            let objects = crate::source::manifests::watch_manifests(dir.clone(), objects);
            let node = node_config::follow_node_config(name, flags, nodes, futures::stream::pending(), node_tx);
            tokio::spawn(async move {
                tokio::join!(objects, node);
            })
        }
        SourceConfig::Kube { kubeconfig } => {
            let client = crate::source::kube::client(kubeconfig.as_deref()).await?;
            let service_cidrs = node_config::service_cidr_events(client.clone());
            let node = node_config::follow_node_config(name, flags, nodes, service_cidrs, node_tx);
            let objects = crate::source::kube::watch_kube(client, objects);
            tokio::spawn(async move {
                tokio::join!(objects, node);
            })
        }
    })
}
