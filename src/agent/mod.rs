//! The agent: sources feed a model, the compiler turns it into desired flows, the reconciler
//! keeps the bridge at exactly those flows, and packet-ins become audit log lines.
//!
//! Level-triggered: every change recomputes from the latest model and the diff against what
//! the switch holds decides what is sent, in one bundle. Nothing is sent before the sources
//! and OVSDB have been read once and the switch's flows have been dumped, so a restart with
//! unchanged inputs sends nothing, and a switch restart is repaired by the same diff.

mod gaps;
pub mod metrics;
mod reconciler;
mod resolver;
mod store;

pub use reconciler::Reconciler;
pub use resolver::StateResolver;
pub use store::Store;

use crate::audit::{AuditConfig, AuditLogger, AuditSender};
use crate::compiler::{tables, Compiler};
use crate::model::LocalPort;
use crate::source::SourceEvent;
use crate::endpoint::Endpoint;
use crate::switch::{self, ConnectionConfig};
use metrics::AgentMetrics;
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
    pub bridge: String,
    pub source: SourceConfig,
    pub node: String,
    /// Allow copies per second the Allow logging meter lets through to npagent (burst: twice that).
    pub allow_rate: u32,
    /// Drop copies per second the Drop logging meter lets through (burst: twice that).
    pub drop_rate: u32,
    pub controller_id: u16,
    /// Meter of the Allow logging copies.
    pub allow_meter_id: u32,
    /// Meter of the Drop logging copies: its own, so a flood of drops cannot crowd out Allows.
    pub drop_meter_id: u32,
    pub audit: AuditConfig,
    pub metrics_addr: Option<SocketAddr>,
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
pub async fn run(cfg: AgentConfig, shutdown: impl Future<Output = ()>) -> anyhow::Result<()> {
    let state = Arc::new(RwLock::new(State::default()));
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
    let source_task = match &cfg.source {
        SourceConfig::Manifests(dir) => tokio::spawn(crate::source::manifests::watch_manifests(dir.clone(), source_tx)),
        SourceConfig::Kube { kubeconfig } => {
            let client = crate::source::kube::client(kubeconfig.as_deref()).await?;
            tokio::spawn(crate::source::kube::watch_kube(client, source_tx))
        }
    };
    let (ports_tx, mut ports_rx) = watch::channel::<Vec<LocalPort>>(Vec::new());
    let names = tables::TABLES.iter().map(|(id, name)| (*id, name.to_string())).collect();
    let ovsdb_task = tokio::spawn(crate::source::ovsdb::run_ovsdb(cfg.ovsdb.clone(), cfg.bridge.clone(), names, ports_tx));
    let metrics_task = cfg.metrics_addr.map(|addr| {
        let (m, a) = (Arc::clone(&metrics), audit.stats());
        tokio::spawn(async move {
            if let Err(e) = metrics::serve(addr, m, a).await {
                tracing::error!("metrics endpoint {addr}: {e}");
            }
        })
    });

    let mut reconciler = Reconciler::new(&cfg, switch.clone(), Arc::clone(&state), Arc::clone(&metrics));
    let mut conn_state = switch.subscribe();
    let mut drift = switch.subscribe_drift();
    let mut ports_seen = false;
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut gaps = gaps::ShedPolls::new(audit.stats());
    let mut meter_shed_warning = RateLimitedWarning::default();
    let mut queue_shed_warning = RateLimitedWarning::default();
    let audit_alive = audit.sender();
    tokio::pin!(shutdown);
    let outcome = loop {
        tokio::select! {
            biased;
            _ = &mut shutdown => break Ok(()),
            _ = audit_alive.closed() => break Err(anyhow::anyhow!("the audit writer stopped")),
            ev = source_rx.recv() => match ev {
                Some(ev) => {
                    reconciler.apply_source(ev);
                    // Coalesce a burst: take everything already queued before recomputing.
                    while let Ok(ev) = source_rx.try_recv() {
                        reconciler.apply_source(ev);
                    }
                }
                None => break Err(anyhow::anyhow!("the object source stopped")),
            },
            changed = ports_rx.changed() => {
                if changed.is_err() {
                    break Err(anyhow::anyhow!("the OVSDB client stopped"));
                }
                ports_seen = true;
                let ports = ports_rx.borrow_and_update().clone();
                reconciler.set_ports(&ports);
            }
            changed = conn_state.changed() => {
                if changed.is_err() {
                    break Err(anyhow::anyhow!("the switch connection stopped"));
                }
                let st = conn_state.borrow_and_update().clone();
                reconciler.connection_changed(&st);
            }
            changed = drift.changed() => {
                if changed.is_err() {
                    break Err(anyhow::anyhow!("the switch connection stopped"));
                }
                drift.borrow_and_update();
                reconciler.drift_detected();
            }
            _ = tick.tick() => {
                reconciler.expire();
                gaps.meter_baseline(reconciler.meter_baseline());
                if gaps.meter_due() {
                    match unless_shutdown(&mut shutdown, reconciler.poll_meter(&mut meter_shed_warning)).await {
                        None => break Ok(()),
                        Some(total) => gaps.meter_polled(total),
                    }
                }
                let dropped = switch.packet_in_dropped();
                gaps.connection_polled(dropped);
                metrics.packet_in_dropped_by_connection.store(dropped, std::sync::atomic::Ordering::Relaxed);
                metrics.packet_in_malformed.store(switch.packet_in_malformed(), std::sync::atomic::Ordering::Relaxed);
                queue_shed_warning.total(dropped, |n| {
                    tracing::warn!("{n} packet-ins shed so far: npagent's packet-in queue was full (see npagent_audit_shed_by_queue_total)")
                });
            }
        }
        if ports_seen && unless_shutdown(&mut shutdown, reconciler.reconcile()).await.is_none() {
            break Ok(());
        }
    };

    tracing::info!("shutting down: flushing the audit log; flows stay installed");
    source_task.abort();
    ovsdb_task.abort();
    if let Some(t) = metrics_task {
        t.abort();
    }
    // The sheds since the last polls still become gap records (briefly: the switch may be gone).
    gaps.meter_baseline(reconciler.meter_baseline());
    if let Ok(total) = tokio::time::timeout(Duration::from_millis(250), reconciler.poll_meter(&mut meter_shed_warning)).await {
        gaps.meter_polled(total);
    }
    gaps.connection_polled(switch.packet_in_dropped());
    // A reconcile cut short leaves the bridge with all of its bundle or none (bundles are
    // atomic); the next start dumps the bridge and sends the difference.
    drop(reconciler);
    drop(switch);
    // The packet-ins already received still reach the audit log before it is flushed.
    let _ = stop_forward.send(());
    let _ = forward.await;
    drop(audit_alive);
    let flushed = audit.shutdown().await.map_err(|e| anyhow::anyhow!("audit log not flushed: {e}"));
    outcome.and(flushed)
}

/// Runs `work` unless `shutdown` resolves first (then `None`): a reconcile or a request to a
/// switch that does not answer must not delay a SIGTERM.
async fn unless_shutdown<S, W>(shutdown: &mut Pin<&mut S>, work: W) -> Option<W::Output>
where
    S: Future<Output = ()>,
    W: Future,
{
    tokio::select! {
        biased;
        _ = shutdown.as_mut() => None,
        out = work => Some(out),
    }
}

/// Hands the switch's packet-ins to the audit logger until `stop`; then takes those already
/// queued and ends, whatever the connection task is doing.
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

/// A warning about a growing counter, given at most once a minute.
#[derive(Debug, Default)]
pub struct RateLimitedWarning {
    last_total: u64,
    warned_at: Option<Instant>,
}

impl RateLimitedWarning {
    /// Reports the counter's `total`; calls `warn` with it if it grew and no warning was given
    /// in the last minute.
    pub fn total(&mut self, total: u64, warn: impl FnOnce(u64)) {
        let grew = total > self.last_total;
        self.last_total = total;
        if grew && self.warned_at.is_none_or(|t| t.elapsed() >= Duration::from_secs(60)) {
            self.warned_at = Some(Instant::now());
            warn(total);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::RateLimitedWarning;

    #[test]
    fn warns_when_the_counter_grows_at_most_once_a_minute() {
        let mut w = RateLimitedWarning::default();
        let mut warned = Vec::new();
        w.total(0, |n| warned.push(n));
        w.total(5, |n| warned.push(n));
        w.total(9, |n| warned.push(n));
        assert_eq!(warned, vec![5], "no warning for zero, then one within the minute");
    }
}
