//! The agent's side of the CNI server: it is started with the agent, told which pod ports are
//! enforced, and tells the main loop which ports it is taking apart.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use tokio::sync::watch;

use super::{AgentConfig, Reconciler, RunError, State};
use crate::admin::Admin;
use crate::cni::attach::{AgentView, AttachConfig, Attacher, Holder, PodDirectory, PodStatus, Readiness};
use crate::model::node::NodeConfig;
use crate::source::ovsdb::db::BridgePorts;

/// Starts the CNI server when `cfg` asks for one: binds its socket (a failure ends `run`:
/// pods could not be attached), restores the attachments of an earlier run, then serves.
/// Returns the task (one that never ends without CNI) and the ports it withdraws.
pub(super) fn spawn(
    cfg: &AgentConfig,
    node: watch::Receiver<NodeConfig>,
    view: watch::Receiver<AgentView>,
    state: Arc<RwLock<State>>,
) -> Result<(tokio::task::JoinHandle<()>, watch::Receiver<BTreeSet<String>>), RunError> {
    let Some(cni) = &cfg.cni else {
        let (never, withdrawn) = watch::channel(BTreeSet::new());
        return Ok((
            tokio::spawn(async move {
                std::future::pending::<()>().await;
                drop(never)
            }),
            withdrawn,
        ));
    };
    let failed = |error| RunError::CniSocket { path: cni.socket.clone(), error };
    let listener = crate::cni::server::bind(&cni.socket).map_err(failed)?;
    let (connection, handle, _) = rtnetlink::new_connection().map_err(failed)?;
    let attach =
        AttachConfig { ovsdb: cfg.ovsdb.clone(), bridge: cfg.bridge.name.clone(), state_dir: cni.state_dir.clone() };
    let mut attacher = Attacher::new(attach, handle, node, view, Arc::new(StorePods(state)));
    let withdrawn = attacher.withdrawn();
    let task = tokio::spawn(async move {
        let netlink = tokio::spawn(connection);
        let mut backoff = Duration::from_secs(1);
        while let Err(e) = attacher.restore().await {
            tracing::warn!("CNI: {e}; retrying in {backoff:?}");
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(30));
        }
        crate::cni::server::serve(listener, Arc::new(tokio::sync::Mutex::new(attacher))).await;
        netlink.abort();
    });
    tracing::info!("CNI plugin served on {}", cni.socket.display());
    Ok((task, withdrawn))
}

/// The agent's store, as the CNI side asks it about pods.
struct StorePods(Arc<RwLock<State>>);

impl StorePods {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.0.read().unwrap_or_else(|p| p.into_inner())
    }
}

impl PodDirectory for StorePods {
    fn pod(&self, namespace: &str, name: &str) -> PodStatus {
        self.read().store.pod_status(namespace, name)
    }

    fn local_holder(&self, ip: IpAddr) -> Option<Holder> {
        let state = self.read();
        let model = state.store.model();
        model
            .ports
            .values()
            .find(|p| p.ips.contains(&ip) || model.pods.get(&p.pod).is_some_and(|pod| pod.ips.contains(&ip)))
            .map(|p| Holder { pod: p.pod.to_string(), port: p.interface.clone() })
    }
}

/// `ports` without the pod ports the CNI server is taking apart (their flows go first).
pub(super) fn without_withdrawn(ports: &BridgePorts, withdrawn: &BTreeSet<String>) -> BridgePorts {
    let mut ports = ports.clone();
    if !withdrawn.is_empty() {
        ports.pods.retain(|p| !withdrawn.contains(&p.interface));
    }
    ports
}

/// Tells the CNI server whether the agent is ready and, once the reconciler has caught up
/// with every change, which pod ports are enforced (flows installed, Pod known with an
/// address).
pub(super) fn publish_view(
    view: &watch::Sender<AgentView>,
    admin: &Admin,
    reconciler: &Reconciler,
    state: &RwLock<State>,
) {
    let readiness = match admin.health().readiness() {
        Ok(()) => Readiness::Ready,
        Err(why) => Readiness::NotReady(why),
    };
    let enforced = reconciler.caught_up().then(|| {
        let state = state.read().unwrap_or_else(|p| p.into_inner());
        let model = state.store.model();
        model
            .ports
            .values()
            .filter(|p| model.pods.get(&p.pod).is_some_and(|pod| !pod.ips.is_empty()))
            .map(|p| p.interface.clone())
            .collect::<BTreeSet<String>>()
    });
    view.send_if_modified(|v| {
        let mut changed = v.readiness != readiness;
        v.readiness = readiness;
        if let Some(enforced) = enforced.filter(|e| *e != v.enforced) {
            v.enforced = enforced;
            changed = true;
        }
        changed
    });
}
