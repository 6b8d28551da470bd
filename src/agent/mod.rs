//! The agent: sources feed a model, the compiler turns it into desired flows, the reconciler
//! keeps the bridge at exactly those flows, and packet-ins become audit log lines.
//!
//! Level-triggered: every change recomputes from the latest model and the diff against what
//! the switch holds decides what is sent, in one bundle. Nothing is sent before the sources
//! and OVSDB have been read once and the switch's flows have been dumped, so a restart with
//! unchanged inputs sends nothing, and a switch restart is repaired by the same diff.

mod claims;
mod cni;
mod conntrack_quota;
mod first_sync;
mod forwarded_snat;
mod gaps;
mod meters;
mod reconciler;
mod resolver;
mod store;

pub use crate::rate_limited::RateLimitedWarning;
pub use conntrack_quota::{PodLimit, QuotaConfig};
pub use forwarded_snat::ForwardedSnatConfig;
pub use reconciler::Reconciler;
pub use resolver::StateResolver;
pub use store::Store;

use crate::admin::health::{Health, ReadinessChange};
use crate::admin::metrics::{self, AgentMetrics};
use crate::admin::Admin;
use crate::audit::writer::WriteError;
use crate::audit::{AuditConfig, AuditLogger, AuditSender};
use crate::cni::attach::AgentView;
use crate::compiler::{tables, Compiler};
use crate::endpoint::Endpoint;
use crate::model::node::NodeConfig;
use crate::source::gateway::addrs::{self as gateway_addrs, DeviceAddrs};
use crate::source::gateway::{self, GatewaySpec};
use crate::source::ovsdb::db::BridgePorts;
use crate::source::ovsdb::BridgeSpec;
use crate::source::SourceEvent;
use crate::switch::{self, ConnectionConfig};
use ofp::packet_in2::PacketIn2;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot, watch};

/// Where Namespaces, Pods and NetworkPolicies come from.
#[derive(Debug, Clone)]
pub enum SourceConfig {
    /// A directory of manifests, watched.
    Manifests(PathBuf),
    /// The Kubernetes API.
    Kube { kubeconfig: Option<PathBuf> },
}

/// Everything `npagent run` needs.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    pub ofp: Endpoint,
    pub ovsdb: Endpoint,
    pub bridge: BridgeSpec,
    /// What the flags say of the node: its addresses and Service ranges (OVSDB adds its ports;
    /// in kube mode the Node and the ServiceCIDRs add to them).
    pub node_net: NodeConfig,
    /// The gateway port to create when the bridge has none (`--gateway`).
    pub gateway: Option<String>,
    pub source: SourceConfig,
    pub node: String,
    /// Allow copies per second each pod's Allow meter lets through to npagent (burst: twice
    /// that).
    pub allow_rate: u32,
    /// Drop copies per second each pod's Drop meter lets through, and each security events'
    /// meter (a pod's, the node's) (burst: twice that).
    pub drop_rate: u32,
    /// Staged verdict copies (`WouldDrop`, `WouldAllow`) per second each pod's staged meter
    /// lets through (burst: twice that).
    pub staged_rate: u32,
    pub controller_id: u16,
    pub audit: AuditConfig,
    /// Where the admin server (`/livez`, `/readyz`, `/metrics`) listens (`--admin-addr`).
    pub admin_addr: SocketAddr,
    /// Whether `/metrics` names staged policies (`--metrics-policy-labels`).
    pub metrics_policy_labels: metrics::PolicyLabels,
    /// Each local pod's conntrack zone limit and how to set it (`--conntrack-pod-limit`).
    pub conntrack: QuotaConfig,
    /// The source address of connections the node forwards and masquerades to the gateway.
    pub forwarded: ForwardedSnatConfig,
    /// The CNI plugin's socket, when the agent attaches pods itself (`--cni-socket`).
    pub cni: Option<CniConfig>,
}

impl AgentConfig {
    /// The logging meters' rates (each at least one packet per second).
    fn meter_rates(&self) -> meters::MeterRates {
        meters::MeterRates::new(self.allow_rate, self.drop_rate, self.staged_rate)
    }
}

/// The CNI plugin's socket and the attachments' records (`--cni-socket`, `--cni-state-dir`).
#[derive(Debug, Clone)]
pub struct CniConfig {
    pub socket: PathBuf,
    pub state_dir: PathBuf,
}

/// Why [`run`] ended other than by its shutdown signal.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("cannot serve the CNI plugin on --cni-socket {}", path.display())]
    CniSocket {
        path: PathBuf,
        #[source]
        error: std::io::Error,
    },
    #[error("cannot serve the admin server on --admin-addr {addr}")]
    AdminAddr {
        addr: SocketAddr,
        #[source]
        error: std::io::Error,
    },
    /// No Kubernetes client could be made from the kubeconfig.
    #[error(transparent)]
    KubeClient(#[from] crate::source::Error),
    #[error("the audit writer stopped")]
    AuditWriterStopped,
    #[error("the object source stopped")]
    SourceStopped,
    #[error("the OVSDB client stopped")]
    OvsdbStopped,
    #[error("the switch connection stopped")]
    SwitchStopped,
    /// Not a `#[source]`: a [`WriteError`]'s text already ends with its cause, which a chain
    /// printer would then repeat.
    #[error("audit log not flushed: {0}")]
    AuditNotFlushed(WriteError),
}

/// State shared between the reconciler (writer) and the audit resolver (reader).
#[derive(Debug, Default)]
pub struct State {
    pub store: Store,
    /// `None` until the first compile (which needs the switch's flows for id recovery).
    pub compiler: Option<Compiler>,
}

/// Runs the agent until `shutdown` resolves, even in the middle of a reconcile or a request
/// to the switch; then flushes the audit log. The flows stay on the bridge, so the datapath
/// keeps enforcing while the agent is away. An error names the task that stopped (they
/// retry what fails, so that is a bug) or says that the audit log could not be flushed.
pub async fn run(cfg: AgentConfig, shutdown: impl Future<Output = ()>) -> Result<(), RunError> {
    let started = Instant::now();
    // First: an agent nobody can observe must not run.
    let admin_listener = crate::admin::server::bind(cfg.admin_addr)
        .map_err(|error| RunError::AdminAddr { addr: cfg.admin_addr, error })?;
    let state = Arc::new(RwLock::new(State::default()));
    if let Ok(mut st) = state.write() {
        st.store.set_node_config(&cfg.node_net.node());
    }
    let metrics = Arc::new(AgentMetrics::default());

    let audit = AuditLogger::spawn(cfg.audit.clone(), Arc::new(StateResolver::new(Arc::clone(&state))));

    let conn = ConnectionConfig {
        endpoint: cfg.ofp.clone(),
        session: switch::SessionConfig { controller_id: cfg.controller_id, ..Default::default() },
        ..Default::default()
    };
    let (switch, packet_ins) = switch::spawn(conn);
    let (stop_forward, forward_stopped) = oneshot::channel();
    let forward = tokio::spawn(forward_packet_ins(packet_ins, audit.sender(), forward_stopped));

    let (source_tx, mut source_rx) = mpsc::channel::<SourceEvent>(1024);
    // The node's configuration: the flags', and in kube mode what the API adds; it lives as
    // long as the source task.
    let (node_tx, configured_rx) = watch::channel(cfg.node_net.clone());
    let source_task = match &cfg.source {
        SourceConfig::Manifests(dir) => {
            let objects = crate::source::manifests::watch_manifests(dir.clone(), source_tx);
            tokio::spawn(async move {
                let _flags_only = node_tx;
                objects.await
            })
        }
        SourceConfig::Kube { kubeconfig } => {
            let client = crate::source::kube::client(kubeconfig.as_deref()).await?;
            let node = crate::source::kube::node::watch_node_config(
                client.clone(),
                cfg.node.clone(),
                cfg.node_net.clone(),
                node_tx,
            );
            let objects = crate::source::kube::watch_kube(client, source_tx);
            tokio::spawn(async move {
                tokio::join!(objects, node);
            })
        }
    };
    // The node's configuration as the pipeline and the CNI server use it: the gateway's
    // addresses are those its device holds when none are configured.
    let (merged_tx, mut node_rx) = watch::channel(cfg.node_net.clone());
    let (view_tx, view_rx) = watch::channel(AgentView::default());
    let (cni_task, mut withdrawn_rx) = cni::spawn(&cfg, node_rx.clone(), view_rx, Arc::clone(&state))?;
    let mut withdrawals_open = true;
    let (ports_tx, mut ports_rx) = watch::channel(BridgePorts::default());
    let names = tables::TABLES.iter().map(|(id, name)| (*id, name.to_string())).collect();
    let ovsdb_task =
        tokio::spawn(crate::source::ovsdb::run_ovsdb(cfg.ovsdb.clone(), cfg.bridge.clone(), names, ports_tx));
    let (device_tx, device_rx) = watch::channel(DeviceAddrs::Unknown);
    let device_task = tokio::spawn(gateway_addrs::follow_gateway_addrs(ports_rx.clone(), device_tx));
    let merge_task = tokio::spawn(gateway_addrs::merge(configured_rx.clone(), device_rx.clone(), merged_tx));
    let gateway_spec =
        GatewaySpec { ovsdb: cfg.ovsdb.clone(), bridge: cfg.bridge.name.clone(), create: cfg.gateway.clone() };
    let gateway_task = tokio::spawn(gateway::run_gateway(gateway_spec, ports_rx.clone(), configured_rx, device_rx));
    let forwarded_task =
        tokio::spawn(forwarded_snat::run_forwarded_snat(cfg.forwarded.clone(), ports_rx.clone(), node_rx.clone()));
    let source_name = match &cfg.source {
        SourceConfig::Manifests(_) => "the manifests directory",
        SourceConfig::Kube { .. } => "the Kubernetes API",
    };
    let registry = metrics::registry_with(Arc::clone(&metrics), audit.stats(), cfg.metrics_policy_labels);
    let admin = Arc::new(Admin::new(Health::new(source_name, started), registry));
    match admin_listener.local_addr() {
        Ok(addr) => tracing::info!("admin server on http://{addr}/ (livez, readyz, metrics)"),
        Err(e) => tracing::warn!("admin server: cannot read its bound address: {e}"),
    }
    let admin_task = tokio::spawn(crate::admin::serve(admin_listener, Arc::clone(&admin), Arc::clone(&metrics)));

    let mut reconciler = Reconciler::new(&cfg, switch.clone(), Arc::clone(&state), Arc::clone(&metrics));
    let mut quota = conntrack_quota::ConntrackQuota::new(cfg.conntrack.clone(), Arc::clone(&metrics));
    let mut conn_state = switch.subscribe();
    let mut drift = switch.subscribe_drift();
    let mut ports_seen = false;
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut sheds = gaps::ShedPolls::new(&cfg, switch.clone(), audit.stats(), Arc::clone(&metrics));
    let tasks = [
        ("the object source", &source_task),
        ("the OVSDB client", &ovsdb_task),
        ("the gateway", &gateway_task),
        ("the gateway's addresses", &device_task),
        ("the node's configuration", &merge_task),
        ("the forwarded connections' rule", &forwarded_task),
        ("the packet-in forwarder", &forward),
        ("the admin server", &admin_task),
        ("the CNI server", &cni_task),
    ];
    let audit_alive = audit.sender();
    tokio::pin!(shutdown);
    let outcome = loop {
        tokio::select! {
            biased;
            _ = &mut shutdown => break Ok(()),
            _ = audit_alive.closed() => break Err(RunError::AuditWriterStopped),
            ev = source_rx.recv() => match ev {
                Some(ev) => {
                    reconciler.apply_source(ev);
                    // Coalesce a burst: take everything already queued before recomputing.
                    while let Ok(ev) = source_rx.try_recv() {
                        reconciler.apply_source(ev);
                    }
                }
                None => break Err(RunError::SourceStopped),
            },
            changed = ports_rx.changed() => {
                if changed.is_err() {
                    break Err(RunError::OvsdbStopped);
                }
                ports_seen = true;
                let ports = cni::without_withdrawn(&ports_rx.borrow_and_update(), &withdrawn_rx.borrow());
                reconciler.set_ports(&ports);
                quota.set_ports(&ports);
            }
            changed = withdrawn_rx.changed(), if withdrawals_open => {
                // The CNI server ended (it is reported as a stopped task); nothing is withdrawn.
                withdrawals_open = changed.is_ok();
                let ports = cni::without_withdrawn(&ports_rx.borrow(), &withdrawn_rx.borrow_and_update());
                reconciler.set_ports(&ports);
                quota.set_ports(&ports);
            }
            changed = node_rx.changed() => {
                if changed.is_err() {
                    break Err(RunError::SourceStopped);
                }
                let node = node_rx.borrow_and_update().node();
                reconciler.set_node_config(&node);
            }
            changed = conn_state.changed() => {
                if changed.is_err() {
                    break Err(RunError::SwitchStopped);
                }
                let st = conn_state.borrow_and_update().clone();
                reconciler.connection_changed(&st);
                quota.resync();
            }
            changed = drift.changed() => {
                if changed.is_err() {
                    break Err(RunError::SwitchStopped);
                }
                drift.borrow_and_update();
                reconciler.drift_detected();
            }
            _ = tick.tick() => {
                reconciler.expire();
                admin.health().tasks_stopped(tasks.iter().filter(|(_, t)| t.is_finished()).map(|(name, _)| *name).collect());
                if unless_shutdown(&mut shutdown, &admin, sheds.poll(&reconciler)).await.is_none() {
                    break Ok(());
                }
            }
        }
        // Before the reconcile too: it may wait long on the switch, and the verdict must not
        // be that of before this event meanwhile.
        report_progress(&admin, &metrics, &reconciler, ports_seen, &state, started);
        // A new pod's zone limit before its flows; a gone pod's zone released after them.
        if ports_seen && unless_shutdown(&mut shutdown, &admin, quota.apply()).await.is_none() {
            break Ok(());
        }
        if ports_seen && unless_shutdown(&mut shutdown, &admin, reconciler.reconcile()).await.is_none() {
            break Ok(());
        }
        if ports_seen && unless_shutdown(&mut shutdown, &admin, quota.release()).await.is_none() {
            break Ok(());
        }
        admin.health().beat(Instant::now());
        report_progress(&admin, &metrics, &reconciler, ports_seen, &state, started);
        cni::publish_view(&view_tx, &admin, &reconciler, &state);
    };

    tracing::info!("shutting down: flushing the audit log; flows stay installed");
    source_task.abort();
    ovsdb_task.abort();
    gateway_task.abort();
    device_task.abort();
    merge_task.abort();
    forwarded_task.abort();
    admin_task.abort();
    cni_task.abort();
    sheds.poll_last(&reconciler).await;
    // A reconcile cut short leaves the bridge with all of its bundle or none (bundles are
    // atomic); the next start dumps the bridge and sends the difference.
    drop(reconciler);
    drop(sheds);
    drop(switch);
    // The packet-ins already received still reach the audit log before it is flushed.
    let _ = stop_forward.send(());
    let _ = forward.await;
    drop(audit_alive);
    let flushed = audit.shutdown().await.map_err(RunError::AuditNotFlushed);
    outcome.and(flushed)
}

/// Runs `work` unless `shutdown` resolves first (then `None`): a reconcile or a request to a
/// switch that does not answer must not delay a SIGTERM. Beats the health while it waits: a
/// wait on the switch is bounded by the switch's own timeouts and is no stuck loop.
async fn unless_shutdown<S, W>(shutdown: &mut Pin<&mut S>, admin: &Admin, work: W) -> Option<W::Output>
where
    S: Future<Output = ()>,
    W: Future,
{
    tokio::pin!(work);
    let mut beat = tokio::time::interval(Duration::from_secs(1));
    loop {
        tokio::select! {
            biased;
            _ = shutdown.as_mut() => return None,
            out = &mut work => return Some(out),
            _ = beat.tick() => admin.health().beat(Instant::now()),
        }
    }
}

/// Tells the health (and the connected and synced gauges) how far the reconciler got; logs
/// the first sync and readiness changes.
fn report_progress(
    admin: &Admin,
    metrics: &AgentMetrics,
    reconciler: &Reconciler,
    ports_seen: bool,
    state: &RwLock<State>,
    started: Instant,
) {
    let progress = reconciler.progress(ports_seen);
    let change = admin.health().set_progress(progress);
    metrics.switch_connected.set(i64::from(progress.connection.is_some()));
    metrics.synced.set(i64::from(admin.health().readiness().is_ok()));
    match change {
        Some(ReadinessChange::FirstReady) => {
            let status = std::fs::read_to_string("/proc/self/status").ok();
            let state = state.read().unwrap_or_else(|p| p.into_inner());
            tracing::info!("{}", first_sync::summary(&state, started.elapsed(), status.as_deref()));
        }
        Some(ReadinessChange::Ready) => tracing::info!("ready again: the resync with the switch is committed"),
        Some(ReadinessChange::NotReady(reason)) => tracing::info!("not ready: {reason}"),
        None => {}
    }
}

/// Hands the switch's packet-ins to the audit logger until `stop`; then takes those already
/// queued and ends, whatever the connection task is doing.
///
/// The switch's queue and the audit logger's stay two on purpose: the logger counts what it
/// sheds by direction and disposition (its `queue` gap records), which the switch, a layer
/// below audit, cannot do; one queue would turn those records into `connection` ones.
async fn forward_packet_ins(
    mut packet_ins: mpsc::Receiver<PacketIn2>,
    audit: AuditSender,
    mut stop: oneshot::Receiver<()>,
) {
    loop {
        tokio::select! {
            biased;
            _ = &mut stop => break,
            pi = packet_ins.recv() => match pi {
                Some(pi) => {
                    audit.submit(pi);
                }
                None => return,
            },
        }
    }
    packet_ins.close();
    while let Ok(pi) = packet_ins.try_recv() {
        audit.submit(pi);
    }
}
