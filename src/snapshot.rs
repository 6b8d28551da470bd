//! The agent's inputs read once, for the commands that look without enforcing (`flows`,
//! `explain`): the model from its source, the bridge's pod ports from OVSDB, the bridge's
//! flows (whose conjunction ids a compile recovers, so its output matches the bridge).

use crate::agent::{SourceConfig, Store};
use crate::endpoint::Endpoint;
use crate::model::LocalPort;
use crate::source::{self, SourceEvent};
use crate::switch::{self, ConnectionConfig};
use anyhow::{bail, Context};
use std::path::Path;
use std::time::Duration;
use tokio::sync::{mpsc, watch};

/// How long each read waits for its input.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// The model as the source holds it now. With `strict`, a manifest that cannot be used is an
/// error (naming the file and the problem) rather than an object left out.
pub async fn load_store(source: &SourceConfig, strict: bool) -> anyhow::Result<Store> {
    match source {
        SourceConfig::Manifests(dir) => load_manifests(dir, strict),
        SourceConfig::Kube { kubeconfig } => {
            let mut store = Store::default();
            let client = source::kube::client(kubeconfig.as_deref()).await?;
            let (tx, mut rx) = mpsc::channel(64);
            let watcher = tokio::spawn(source::kube::watch_kube(client, tx));
            let listed = tokio::time::timeout(TIMEOUT, async {
                while !store.is_synced() {
                    match rx.recv().await {
                        Some(ev) => {
                            store.apply(ev);
                        }
                        None => break,
                    }
                }
            })
            .await;
            watcher.abort();
            if listed.is_err() || !store.is_synced() {
                bail!("the Kubernetes API did not list Namespaces, Pods and NetworkPolicies within {TIMEOUT:?}");
            }
            Ok(store)
        }
    }
}

/// The model a manifests directory holds. With `strict`, a missing directory or a manifest
/// that cannot be used is an error naming it and the problem.
pub fn load_manifests(dir: &Path, strict: bool) -> anyhow::Result<Store> {
    if strict && !dir.is_dir() {
        bail!("--manifests {}: not a readable directory", dir.display());
    }
    let (objects, invalid) = source::manifests::load_dir(dir);
    if strict {
        if let Some(i) = invalid.first() {
            bail!("{}: {} ({} unusable manifest(s) in all)", i.origin, i.error, invalid.len());
        }
    }
    let mut store = Store::default();
    for i in invalid {
        store.apply(SourceEvent::from(i));
    }
    store.apply(SourceEvent::Reset { kinds: source::Kind::ALL.to_vec(), objects });
    Ok(store)
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
