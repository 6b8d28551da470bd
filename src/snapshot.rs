//! The agent's inputs read once, for the commands that look without enforcing (`flows`,
//! `explain`): the model from its source, the bridge's pod ports from OVSDB, the bridge's
//! flows (whose conjunction ids a compile recovers, so its output matches the bridge).

use crate::agent::{SourceConfig, Store};
use crate::endpoint::Endpoint;
use crate::model::LocalPort;
use crate::source::{self, SourceEvent};
use crate::switch::{self, ConnectionConfig};
use anyhow::{bail, Context};
use std::time::Duration;
use tokio::sync::{mpsc, watch};

/// How long each read waits for its input.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// The model as the source holds it now, read the way `run` reads it (the same watchers, their
/// listings applied as they come). With `strict`, a manifest that cannot be used is an error
/// (naming the file and the problem) rather than an object left out, and so is a missing
/// manifests directory.
pub async fn load_store(source: &SourceConfig, strict: bool) -> anyhow::Result<Store> {
    let (tx, rx) = mpsc::channel(64);
    match source {
        SourceConfig::Manifests(dir) => {
            if strict && !dir.is_dir() {
                bail!("--manifests {}: not a readable directory", dir.display());
            }
            let watcher = tokio::spawn(source::manifests::watch_manifests(dir.clone(), tx));
            let listed = until_synced(rx, strict).await;
            watcher.abort();
            listed?.ok_or_else(|| anyhow::anyhow!("the manifests reader of {} stopped", dir.display()))
        }
        SourceConfig::Kube { kubeconfig } => {
            let client = source::kube::client(kubeconfig.as_deref()).await?;
            let watcher = tokio::spawn(source::kube::watch_kube(client, tx));
            let listed = tokio::time::timeout(TIMEOUT, until_synced(rx, strict)).await;
            watcher.abort();
            match listed {
                Ok(listed) => listed?.ok_or_else(|| anyhow::anyhow!("the Kubernetes watchers stopped")),
                Err(_) => {
                    bail!("the Kubernetes API did not list Namespaces, Pods and NetworkPolicies within {TIMEOUT:?}")
                }
            }
        }
    }
}

/// Applies the events of `rx` to a new store until every kind is listed; `None` when the
/// source stops first. With `strict`, the first unusable input is an error, with the number
/// of them the listing brought.
async fn until_synced(mut rx: mpsc::Receiver<SourceEvent>, strict: bool) -> anyhow::Result<Option<Store>> {
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
    if let Some((origin, error)) = invalid.first() {
        bail!("{origin}: {error} ({} unusable manifest(s) in all)", invalid.len());
    }
    Ok(Some(store))
}

/// Reads the bridge's pod ports from OVSDB once.
pub async fn read_ports(ovsdb: &Endpoint, bridge: &str) -> anyhow::Result<Vec<LocalPort>> {
    let (tx, mut rx) = watch::channel(Vec::new());
    let client = tokio::spawn(source::ovsdb::run_ovsdb(ovsdb.clone(), bridge.to_string(), Vec::new(), tx));
    let read = tokio::time::timeout(TIMEOUT, rx.changed()).await;
    client.abort();
    match read {
        Ok(Ok(())) => Ok(rx.borrow().clone()),
        _ => bail!("could not read the ports of {bridge} from OVSDB at {ovsdb} within {TIMEOUT:?}"),
    }
}

/// Dumps the bridge's flows.
pub async fn installed_flows(ofp: &Endpoint) -> anyhow::Result<Vec<ofp::FlowStats>> {
    let (switch, _packet_ins) = switch::spawn(ConnectionConfig { endpoint: ofp.clone(), ..Default::default() });
    switch.wait_connected(Duration::from_secs(3)).await.with_context(|| format!("switch at {ofp} not reachable"))?;
    Ok(switch.dump_flows(None).await?)
}
