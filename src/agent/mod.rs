//! The agent: sources feed a model, the compiler turns it into desired flows, the reconciler
//! keeps the bridge at exactly those flows, and packet-ins become audit log lines.
//!
//! Level-triggered: every change recomputes from the latest model and the diff against what
//! the switch holds decides what is sent, in one bundle. Nothing is sent before the sources
//! and OVSDB have been read once and the switch's flows have been dumped, so a restart with
//! unchanged inputs sends nothing, and a switch restart is repaired by the same diff.

mod claims;
mod cluster_stats;
mod cni;
mod conntrack_quota;
mod first_sync;
mod forwarded_snat;
mod gaps;
mod host_ends;
mod iptables;
mod main_loop;
mod masquerade;
mod meters;
mod packet_ins;
mod reconciler;
mod resolver;
pub mod routes;
mod store;
mod tasks;
mod verdict_polls;

pub use crate::rate_limited::RateLimitedWarning;
pub use conntrack_quota::{PodLimit, QuotaConfig};
pub use forwarded_snat::ForwardedSnatConfig;
pub use reconciler::Reconciler;
pub use resolver::StateResolver;
pub use store::Store;

use crate::admin::metrics::{self, AgentMetrics};
use crate::audit::writer::WriteError;
use crate::audit::{AuditConfig, AuditLogger};
use crate::compiler::Compiler;
use crate::endpoint::Endpoint;
use crate::model::node::NodeConfig;
use crate::source::ovsdb::BridgeSpec;
use crate::switch::{self, ConnectionConfig};
use main_loop::MainLoop;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Instant;

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
    /// Whether `/metrics` names staged policies and ClusterNetworkPolicies
    /// (`--metrics-policy-labels`).
    pub metrics_policy_labels: metrics::PolicyLabels,
    /// Each local pod's conntrack zone limit and how to set it (`--conntrack-pod-limit`).
    pub conntrack: QuotaConfig,
    /// The source address of connections the node forwards and masquerades to the gateway.
    pub forwarded: ForwardedSnatConfig,
    /// Remove npagent's routes to other nodes' pods at a clean shutdown.
    pub remove_routes_at_exit: bool,
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

/// What the agent's parts are made with: the configuration, when the agent started, the
/// state the reconciler writes and the others read, the metrics.
struct Shared {
    cfg: AgentConfig,
    started: Instant,
    state: Arc<RwLock<State>>,
    metrics: Arc<AgentMetrics>,
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
        st.store.set_local_node(&cfg.node);
    }
    let shared = Shared { cfg, started, state, metrics: Arc::new(AgentMetrics::default()) };
    let audit = AuditLogger::spawn(shared.cfg.audit.clone(), Arc::new(StateResolver::new(Arc::clone(&shared.state))));
    let conn = ConnectionConfig {
        endpoint: shared.cfg.ofp.clone(),
        session: switch::SessionConfig { controller_id: shared.cfg.controller_id, ..Default::default() },
        ..Default::default()
    };
    let (switch, packet_ins) = switch::spawn(conn);
    let running = tasks::spawn(&shared, &audit, admin_listener, packet_ins, &switch).await?;
    let main_loop = MainLoop::new(&shared, &switch, running, &audit);
    // The loop holds the switch's other handles (and the verdict counts, which it ends with
    // the other tasks): the connection ends with the loop.
    drop(switch);
    let outcome = main_loop.run(shutdown).await;
    if outcome.is_ok() && shared.cfg.remove_routes_at_exit {
        match routes::remove_own_routes().await {
            Ok(n) => tracing::info!("removed npagent's {n} routes to other nodes' pods (--remove-routes-at-exit)"),
            Err(e) => tracing::warn!("cannot remove npagent's routes to other nodes' pods: {e}"),
        }
    }
    let flushed = audit.shutdown().await.map_err(RunError::AuditNotFlushed);
    outcome.and(flushed)
}
