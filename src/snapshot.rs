//! The agent's inputs read once, for the commands that look without enforcing (`flows`,
//! `explain`): the model from its source, the bridge's pod ports from OVSDB, the bridge's
//! flows (whose conjunction ids a compile recovers, so its output matches the bridge).

use crate::agent::{SourceConfig, Store};
use crate::endpoint::Endpoint;
use crate::source::ovsdb::db::BridgePorts;
use crate::source::ovsdb::BridgeSpec;
use crate::source::{self, SourceEvent};
use crate::switch::{self, ConnectionConfig, SwitchError};
use std::path::PathBuf;
use std::time::Duration;
use tokio::sync::{mpsc, watch};

/// How long each read waits for its input.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// Why an input could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("--manifests {}: not a readable directory", .0.display())]
    NoManifestsDirectory(PathBuf),
    #[error("the manifests reader of {} stopped", .0.display())]
    ManifestsReaderStopped(PathBuf),
    /// No Kubernetes client could be made from the kubeconfig.
    #[error(transparent)]
    KubeClient(#[from] source::Error),
    #[error("the Kubernetes watchers stopped")]
    KubeWatchersStopped,
    #[error("the Kubernetes API did not list Namespaces, Pods and NetworkPolicies within {:?}", TIMEOUT)]
    KubeListingTimedOut,
    /// `strict`: the first manifest that cannot be used, and how many the listing brought.
    #[error("{origin}: {error} ({count} unusable manifest(s) in all)")]
    UnusableManifest { origin: String, error: String, count: usize },
    #[error("could not read the ports of {bridge} from OVSDB at {ovsdb} within {:?}", TIMEOUT)]
    PortsNotRead { bridge: String, ovsdb: Endpoint },
    #[error("switch at {ofp} not reachable")]
    SwitchUnreachable {
        ofp: Endpoint,
        #[source]
        error: Box<SwitchError>,
    },
    /// The flow dump failed.
    #[error(transparent)]
    Dump(Box<SwitchError>),
}

/// The model as the source holds it now, read the way `run` reads it (the same watchers, their
/// listings applied as they come). With `strict`, a manifest that cannot be used is an error
/// (naming the file and the problem) rather than an object left out, and so is a missing
/// manifests directory.
pub async fn load_store(source: &SourceConfig, strict: bool) -> Result<Store, SnapshotError> {
    let (tx, rx) = mpsc::channel(64);
    match source {
        SourceConfig::Manifests(dir) => {
            if strict && !dir.is_dir() {
                return Err(SnapshotError::NoManifestsDirectory(dir.clone()));
            }
            let watcher = tokio::spawn(source::manifests::watch_manifests(dir.clone(), tx));
            let listed = until_synced(rx, strict).await;
            watcher.abort();
            listed?.ok_or_else(|| SnapshotError::ManifestsReaderStopped(dir.clone()))
        }
        SourceConfig::Kube { kubeconfig } => {
            let client = source::kube::client(kubeconfig.as_deref()).await?;
            let watcher = tokio::spawn(source::kube::watch_kube(client, tx));
            let listed = tokio::time::timeout(TIMEOUT, until_synced(rx, strict)).await;
            watcher.abort();
            match listed {
                Ok(listed) => listed?.ok_or(SnapshotError::KubeWatchersStopped),
                Err(_) => Err(SnapshotError::KubeListingTimedOut),
            }
        }
    }
}

/// Applies the events of `rx` to a new store until every kind is listed; `None` when the
/// source stops first. With `strict`, the first unusable input is an error, with the number
/// of them the listing brought.
async fn until_synced(mut rx: mpsc::Receiver<SourceEvent>, strict: bool) -> Result<Option<Store>, SnapshotError> {
    let mut store = Store::default();
    let mut invalid: Vec<(String, String)> = Vec::new();
    while !store.is_synced() {
        match rx.recv().await {
            Some(SourceEvent::Invalid { origin, error }) if strict => invalid.push((origin, error)),
            Some(ev) => {
                store.apply(ev);
            }
            None => return Ok(None),
        }
    }
    let count = invalid.len();
    if let Some((origin, error)) = invalid.into_iter().next() {
        return Err(SnapshotError::UnusableManifest { origin, error, count });
    }
    Ok(Some(store))
}

/// Reads the bridge's classified ports from OVSDB once.
pub async fn read_ports(ovsdb: &Endpoint, bridge: &BridgeSpec) -> Result<BridgePorts, SnapshotError> {
    let (tx, mut rx) = watch::channel(BridgePorts::default());
    let client = tokio::spawn(source::ovsdb::run_ovsdb(ovsdb.clone(), bridge.clone(), Vec::new(), tx));
    let read = tokio::time::timeout(TIMEOUT, rx.changed()).await;
    client.abort();
    match read {
        Ok(Ok(())) => Ok(rx.borrow().clone()),
        _ => Err(SnapshotError::PortsNotRead { bridge: bridge.name.clone(), ovsdb: ovsdb.clone() }),
    }
}

/// Dumps the bridge's flows.
pub async fn installed_flows(ofp: &Endpoint) -> Result<Vec<ofp::FlowStats>, SnapshotError> {
    let (switch, _packet_ins) = switch::spawn(ConnectionConfig { endpoint: ofp.clone(), ..Default::default() });
    switch
        .wait_connected(Duration::from_secs(3))
        .await
        .map_err(|error| SnapshotError::SwitchUnreachable { ofp: ofp.clone(), error: Box::new(error) })?;
    switch.dump_flows(None).await.map_err(|e| SnapshotError::Dump(Box::new(e)))
}
