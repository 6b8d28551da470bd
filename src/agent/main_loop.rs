//! The agent's main loop: an arm per input, each one call, and after every event the same
//! catch-up: the readiness, then the conntrack zone limits and the flows brought to the
//! latest model, then the readiness again and the CNI server's view.

use super::conntrack_quota::ConntrackQuota;
use super::gaps::ShedPolls;
use super::meters::Baseline;
use super::tasks::{Inputs, Running, Tasks};
use super::{cni, first_sync, Reconciler, RunError, Shared, State};
use crate::admin::health::ReadinessChange;
use crate::admin::metrics::AgentMetrics;
use crate::admin::Admin;
use crate::audit::{AuditLogger, AuditSender};
use crate::source::SourceEvent;
use crate::switch::{ConnState, SwitchHandle};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};
use tokio::sync::watch::{self, error::RecvError};
use tokio::time::{Interval, MissedTickBehavior};

/// Why the main loop ends.
enum Stop {
    /// The shutdown signal came.
    Shutdown,
    /// What it listens to ended.
    Failed(RunError),
}

impl From<RunError> for Stop {
    fn from(e: RunError) -> Self {
        Stop::Failed(e)
    }
}

/// The loop's inputs and the parts it drives.
pub(super) struct MainLoop {
    inputs: Inputs,
    /// Whether the CNI server still reports what it takes apart (when it has ended, nothing).
    withdrawals_open: bool,
    /// The switch connection's state.
    connection: watch::Receiver<ConnState>,
    /// The switch's reports of flows changed by someone else.
    drift: watch::Receiver<u64>,
    /// Once a second: expiries and polls.
    tick: Interval,
    /// Whether OVSDB's ports have been read: nothing is sent to the switch before.
    ports_seen: bool,
    reconciler: Reconciler,
    quota: ConntrackQuota,
    sheds: ShedPolls,
    tasks: Tasks,
    admin: Arc<Admin>,
    metrics: Arc<AgentMetrics>,
    state: Arc<RwLock<State>>,
    /// Closed when the audit writer stops.
    audit: AuditSender,
    started: Instant,
}

impl MainLoop {
    /// The loop over the `running` tasks' inputs, driving `switch` and reporting to `audit`.
    pub(super) fn new(shared: &Shared, switch: &SwitchHandle, running: Running, audit: &AuditLogger) -> MainLoop {
        let Shared { cfg, started, state, metrics } = shared;
        let meter_baseline = Baseline::default();
        let reconciler =
            Reconciler::new(cfg, switch.clone(), Arc::clone(state), Arc::clone(metrics), meter_baseline.clone());
        let sheds = ShedPolls::new(
            cfg,
            switch.clone(),
            meter_baseline,
            Arc::clone(state),
            audit.gap_inbox(),
            Arc::clone(metrics),
        );
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        MainLoop {
            inputs: running.inputs,
            withdrawals_open: true,
            connection: switch.subscribe(),
            drift: switch.subscribe_drift(),
            tick,
            ports_seen: false,
            reconciler,
            quota: ConntrackQuota::new(cfg.conntrack.clone(), Arc::clone(metrics)),
            sheds,
            tasks: running.tasks,
            admin: running.admin,
            metrics: Arc::clone(metrics),
            state: Arc::clone(state),
            audit: audit.sender(),
            started: *started,
        }
    }

    /// Runs until `shutdown` resolves or what the loop listens to ends, then stops the tasks;
    /// the audit log is the caller's to flush.
    pub(super) async fn run(mut self, shutdown: impl Future<Output = ()>) -> Result<(), RunError> {
        tokio::pin!(shutdown);
        let stop = loop {
            if let Err(stop) = self.turn(&mut shutdown).await {
                break stop;
            }
        };
        tracing::info!("shutting down: flushing the audit log; flows stay installed");
        self.tasks.abort();
        self.sheds.poll_last().await;
        // A reconcile cut short leaves the bridge with all of its bundle or none (bundles are
        // atomic); the next start dumps the bridge and sends the difference. The switch
        // connection ends with the last handle.
        let MainLoop { reconciler, sheds, tasks, .. } = self;
        drop(reconciler);
        drop(sheds);
        // The packet-ins already received still reach the audit log before it is flushed.
        tasks.drain_packet_ins().await;
        match stop {
            Stop::Shutdown => Ok(()),
            Stop::Failed(e) => Err(e),
        }
    }

    /// One event, then the catch-up.
    async fn turn<S: Future<Output = ()>>(&mut self, shutdown: &mut Pin<&mut S>) -> Result<(), Stop> {
        tokio::select! {
            biased;
            _ = shutdown.as_mut() => Err(Stop::Shutdown),
            _ = self.audit.closed() => Err(RunError::AuditWriterStopped.into()),
            ev = self.inputs.source.recv() => self.source_event(ev),
            changed = self.inputs.ports.changed() => self.ports_changed(changed),
            changed = self.inputs.withdrawn.changed(), if self.withdrawals_open => self.withdrawn_changed(changed),
            changed = self.inputs.node.changed() => self.node_changed(changed),
            changed = self.connection.changed() => self.connection_changed(changed),
            changed = self.drift.changed() => self.drift_reported(changed),
            _ = self.tick.tick() => self.tick(shutdown).await,
        }?;
        self.catch_up(shutdown).await
    }

    /// Applies a source event, and everything already queued behind it (a burst is
    /// coalesced before recomputing).
    fn source_event(&mut self, ev: Option<SourceEvent>) -> Result<(), Stop> {
        let ev = ev.ok_or(RunError::SourceStopped)?;
        self.reconciler.apply_source(ev);
        while let Ok(ev) = self.inputs.source.try_recv() {
            self.reconciler.apply_source(ev);
        }
        self.reconciler.publish_nodes(&self.inputs.nodes);
        Ok(())
    }

    /// OVSDB listed the bridge's ports.
    fn ports_changed(&mut self, changed: Result<(), RecvError>) -> Result<(), Stop> {
        changed.map_err(|_| RunError::OvsdbStopped)?;
        self.ports_seen = true;
        let ports = cni::without_withdrawn(&self.inputs.ports.borrow_and_update(), &self.inputs.withdrawn.borrow());
        self.reconciler.set_ports(&ports);
        self.quota.set_ports(&ports);
        Ok(())
    }

    /// The CNI server takes other ports apart. When it ended, it is reported as a stopped
    /// task, and nothing is withdrawn any more.
    fn withdrawn_changed(&mut self, changed: Result<(), RecvError>) -> Result<(), Stop> {
        self.withdrawals_open = changed.is_ok();
        let ports = cni::without_withdrawn(&self.inputs.ports.borrow(), &self.inputs.withdrawn.borrow_and_update());
        self.reconciler.set_ports(&ports);
        self.quota.set_ports(&ports);
        Ok(())
    }

    /// The node's configuration changed.
    fn node_changed(&mut self, changed: Result<(), RecvError>) -> Result<(), Stop> {
        changed.map_err(|_| RunError::SourceStopped)?;
        let node = self.inputs.node.borrow_and_update().node();
        self.reconciler.set_node_config(&node);
        Ok(())
    }

    /// The switch connected or disconnected.
    fn connection_changed(&mut self, changed: Result<(), RecvError>) -> Result<(), Stop> {
        changed.map_err(|_| RunError::SwitchStopped)?;
        let st = self.connection.borrow_and_update().clone();
        self.reconciler.connection_changed(&st);
        self.quota.resync();
        Ok(())
    }

    /// The switch reports flows changed by someone else.
    fn drift_reported(&mut self, changed: Result<(), RecvError>) -> Result<(), Stop> {
        changed.map_err(|_| RunError::SwitchStopped)?;
        self.drift.borrow_and_update();
        self.reconciler.drift_detected();
        Ok(())
    }

    /// Once a second: expiries, the tasks that ended, the shed counts.
    async fn tick<S: Future<Output = ()>>(&mut self, shutdown: &mut Pin<&mut S>) -> Result<(), Stop> {
        self.reconciler.expire();
        self.admin.health().tasks_stopped(self.tasks.stopped());
        unless_shutdown(shutdown, &self.admin, self.sheds.poll()).await
    }

    /// After every event: the readiness, then (once OVSDB was read) a new pod's zone limit
    /// before its flows, the flows, a gone pod's zone released after them; then the
    /// readiness again and the CNI server's view.
    async fn catch_up<S: Future<Output = ()>>(&mut self, shutdown: &mut Pin<&mut S>) -> Result<(), Stop> {
        // Before the reconcile too: it may wait long on the switch, and the verdict must not
        // be that of before this event meanwhile.
        self.report_progress();
        if self.ports_seen {
            unless_shutdown(shutdown, &self.admin, self.quota.apply()).await?;
            unless_shutdown(shutdown, &self.admin, self.reconciler.reconcile()).await?;
            unless_shutdown(shutdown, &self.admin, self.quota.release()).await?;
        }
        self.admin.health().beat(Instant::now());
        self.report_progress();
        cni::publish_view(&self.inputs.view, &self.admin, &self.reconciler, &self.state);
        Ok(())
    }

    /// Tells the health (and the connected and synced gauges) how far the reconciler got;
    /// logs the first sync and readiness changes.
    fn report_progress(&self) {
        let progress = self.reconciler.progress(self.ports_seen);
        let change = self.admin.health().set_progress(progress);
        self.metrics.switch_connected.set(i64::from(progress.connection.is_some()));
        self.metrics.synced.set(i64::from(self.admin.health().readiness().is_ok()));
        match change {
            Some(ReadinessChange::FirstReady) => {
                let status = std::fs::read_to_string("/proc/self/status").ok();
                let state = self.state.read().unwrap_or_else(|p| p.into_inner());
                tracing::info!("{}", first_sync::summary(&state, self.started.elapsed(), status.as_deref()));
            }
            Some(ReadinessChange::Ready) => tracing::info!("ready again: the resync with the switch is committed"),
            Some(ReadinessChange::NotReady(reason)) => tracing::info!("not ready: {reason}"),
            None => {}
        }
    }
}

/// Runs `work` unless `shutdown` resolves first: a reconcile or a request to a switch that
/// does not answer must not delay a SIGTERM. Beats the health while it waits: a wait on the
/// switch is bounded by the switch's own timeouts and is no stuck loop.
async fn unless_shutdown<S, W>(shutdown: &mut Pin<&mut S>, admin: &Admin, work: W) -> Result<(), Stop>
where
    S: Future<Output = ()>,
    W: Future<Output = ()>,
{
    tokio::pin!(work);
    let mut beat = tokio::time::interval(Duration::from_secs(1));
    loop {
        tokio::select! {
            biased;
            _ = shutdown.as_mut() => return Err(Stop::Shutdown),
            () = &mut work => return Ok(()),
            _ = beat.tick() => admin.health().beat(Instant::now()),
        }
    }
}
