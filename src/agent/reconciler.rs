//! Keeps the bridge at the compiler's desired flows: diff, one bundle, and a full resync
//! (dump, diff) whenever the switch (re)connects or a bundle fails.
//!
//! Drift: when the switch reports that someone else changed its flows (its flow monitor,
//! see [`crate::switch::SwitchHandle::subscribe_drift`]), the next reconcile dumps the flows
//! and sends the difference to the desired state in one bundle ([`Reconciler::drift_detected`]).
//!
//! Refused flows: when the switch refuses flows of a bundle, those are set aside
//! ([`refused`]), the rest goes out in a new bundle, and they are retried with backoff.

mod phase;
mod refused;

use super::meters::{Baseline, LoggingMeters, MeterShed};
use super::{AgentConfig, State};
use crate::admin::health::Progress;
use crate::admin::metrics::{AgentMetrics, KindLabel, TableLabel};
use crate::audit::changes::ChangeAuditor;
use crate::compiler::{self, tables, Change, Compiler, FlowTable};
use crate::source::ovsdb::db::BridgePorts;
use crate::source::SourceEvent;
use crate::switch::{ConnState, OfpError, SwitchError, SwitchHandle};
use ofp::{FlowMod, FlowModCommand};
use phase::{Phase, Step};
use refused::Refused;
use std::collections::BTreeSet;
use std::sync::{Arc, RwLock, RwLockWriteGuard};
use std::time::{Duration, Instant};

/// Seconds a deleted rule's conjunction id stays reserved (and its rule resolvable).
const ID_GRACE_SECS: u64 = 120;
/// Wait after a failed reconcile before the next try.
const RETRY_AFTER: Duration = Duration::from_secs(2);
/// Bundles tried in one send, each without the flows the previous one was refused for.
const MAX_SPLITS: usize = 16;
/// Refused flows named one per line in the log; the rest are counted.
const REFUSED_SHOWN: usize = 8;

/// The reconciler's state.
pub struct Reconciler {
    switch: SwitchHandle,
    state: Arc<RwLock<State>>,
    metrics: Arc<AgentMetrics>,
    compiler_cfg: compiler::Config,
    /// The logging meters, per local pod.
    meters: LoggingMeters,
    started: Instant,
    /// What the switch holds, as far as we know (dumped at each connection, then kept).
    installed: FlowTable,
    /// Model changes not yet compiled.
    pending: Vec<Change>,
    /// How far the installed view is known to be the desired flows.
    phase: Phase,
    /// The generation of the current connection, if any.
    connected: Option<u64>,
    /// Flows the switch refused, waiting for their retry.
    refused: Refused,
    /// The policy change log (`--audit-changes-log`).
    changes: Option<ChangeAuditor>,
}

impl Reconciler {
    /// A reconciler for `cfg` talking through `switch`, taking the meters' `meter_baseline`.
    pub fn new(
        cfg: &AgentConfig,
        switch: SwitchHandle,
        state: Arc<RwLock<State>>,
        metrics: Arc<AgentMetrics>,
        meter_baseline: Baseline,
    ) -> Self {
        Reconciler {
            switch,
            state,
            metrics,
            compiler_cfg: compiler::Config { controller_id: cfg.controller_id },
            meters: LoggingMeters::new(cfg.meter_rates(), meter_baseline),
            started: Instant::now(),
            installed: FlowTable::new(),
            pending: Vec::new(),
            phase: Phase::default(),
            connected: None,
            refused: Refused::default(),
            changes: cfg.audit.changes_log.as_deref().and_then(|path| {
                ChangeAuditor::open(path)
                    .map_err(|e| {
                        tracing::error!("--audit-changes-log {}: {e}; policy changes are not logged", path.display())
                    })
                    .ok()
            }),
        }
    }

    /// Whether the switch holds the flows of every change applied so far: synced with this
    /// connection, nothing pending, no retry or repair waiting.
    pub fn caught_up(&self) -> bool {
        self.phase.in_step(self.connected) && self.pending.is_empty()
    }

    /// The switch says its flows were changed by someone else: the next reconcile dumps them
    /// and repairs the difference.
    pub fn drift_detected(&mut self) {
        self.phase.drift_detected();
    }

    /// How far the reconciler got, for readiness; `ovsdb_read` is the main loop's to say.
    pub fn progress(&self, ovsdb_read: bool) -> Progress {
        Progress {
            sources_synced: self.state.read().unwrap_or_else(|p| p.into_inner()).store.is_synced(),
            ovsdb_read,
            connection: self.connected,
            committed: self.phase.committed(self.connected),
        }
    }

    fn now(&self) -> u64 {
        self.started.elapsed().as_secs()
    }

    fn state(&self) -> RwLockWriteGuard<'_, State> {
        write(&self.state)
    }

    /// Applies a source event to the model.
    pub fn apply_source(&mut self, ev: SourceEvent) {
        tracing::trace!("source event: {}", describe_event(&ev));
        let mut changes = self.state().store.apply(ev);
        if let Some(log) = self.changes.as_mut() {
            log.changed(&changes, &write(&self.state).store.refused_policies());
        }
        if self.phase.is_unsynced() {
            // A full resync comes first: it compiles every pod and clears what is pending, so
            // the pod changes of the initial listing (one per pod) need not be kept until
            // then. Policy and namespace changes are, for the check of their namespaces.
            changes.retain(|c| !matches!(c, Change::Pod(_)));
        }
        self.pending.extend(changes);
    }

    /// Sends the cluster's Nodes on `tx` when they changed since last sent (they change no
    /// flow: the routes and the node's configuration follow them).
    pub fn publish_nodes(&mut self, tx: &tokio::sync::watch::Sender<Option<crate::model::node::ClusterNodes>>) {
        let mut state = self.state();
        if state.store.take_nodes_changed() {
            tx.send_replace(state.store.nodes().cloned());
        }
    }

    /// Replaces the bridge's classified ports.
    pub fn set_ports(&mut self, ports: &BridgePorts) {
        let changes = self.state().store.set_bridge_ports(ports);
        self.pending.extend(changes);
    }

    /// Replaces what the configuration says of the node (its addresses, the Service ranges).
    pub fn set_node_config(&mut self, node: &crate::model::Node) {
        let changes = self.state().store.set_node_config(node);
        self.pending.extend(changes);
    }

    /// Follows the switch connection: a new generation needs a full resync.
    pub fn connection_changed(&mut self, st: &ConnState) {
        match st {
            ConnState::Connected { generation, datapath_id } => {
                tracing::info!("switch connected (datapath {datapath_id:#018x}, connection #{generation})");
                if *generation > 1 {
                    self.metrics.reconnects.inc();
                }
                self.connected = Some(*generation);
                self.phase.connected();
            }
            ConnState::Disconnected { reason } => {
                if self.connected.take().is_some() {
                    tracing::warn!(
                        "switch disconnected{}; reconnecting",
                        reason.as_ref().map(|r| format!(": {r}")).unwrap_or_default()
                    );
                }
            }
        }
    }

    /// Forgets rules whose grace period is over, and ends the IP claims of pods whose
    /// deletion deadline passed (a quiet cluster sends no event at that moment).
    pub fn expire(&mut self) {
        let now = self.now();
        let mut state = self.state();
        if let Some(c) = state.compiler.as_mut() {
            c.expire(now);
        }
        let changes = state.store.expire_pods(std::time::SystemTime::now());
        drop(state);
        self.pending.extend(changes);
    }

    /// Brings the switch to the desired state, if the inputs are complete and it is connected.
    pub async fn reconcile(&mut self) {
        let Some(generation) = self.connected else { return };
        let step = self.phase.step(generation, Instant::now());
        if step == Step::Wait {
            return;
        }
        {
            let mut state = write(&self.state);
            if !state.store.is_synced() {
                return;
            }
            state.store.check_policy_namespaces(&self.pending);
        }
        let result = match step {
            Step::Wait => return,
            Step::Resync => self.resync(generation).await,
            Step::Repair => self.repair(generation).await,
            Step::Incremental if self.pending.is_empty() && self.refused.due(Instant::now()).is_empty() => return,
            Step::Incremental => self.incremental().await,
        };
        match result {
            Ok(()) => {
                if let Some(log) = self.changes.as_mut() {
                    log.enforced(&write(&self.state).store.model().policies);
                }
            }
            Err(e) => {
                tracing::error!("reconcile failed: {e}; retrying with a full resync");
                self.phase = Phase::failed(Instant::now() + RETRY_AFTER);
            }
        }
    }

    /// Dumps the switch, recompiles everything, sends the full diff (which repairs any drift
    /// too).
    async fn resync(&mut self, generation: u64) -> Result<(), SwitchError> {
        self.meters.forget();
        let on_switch = self.meters.read_on_switch(&self.switch).await?;
        let dump = self.switch.dump_flows(None).await?;
        self.installed = compiler::installed_from_stats(&dump);
        let now = self.now();
        self.pending.clear();
        let mods = {
            let mut guard = write(&self.state);
            let state = &mut *guard;
            let compiler = state
                .compiler
                .get_or_insert_with(|| Compiler::recovering(self.compiler_cfg.clone(), &dump, ID_GRACE_SECS));
            let started = Instant::now();
            compiler.full(state.store.model(), now);
            self.metrics.compile_seconds.observe(started.elapsed().as_secs_f64());
            compiler::diff(compiler.flows(), &self.installed)
        };
        let mods = self.without_waiting(mods);
        tracing::info!(
            "resync with the switch (connection #{generation}): {} flows installed, {} flow_mods to send",
            self.installed.len(),
            mods.len()
        );
        self.update_flow_gauges();
        self.send_with_meters(mods, &on_switch).await?;
        self.phase = Phase::Synced { generation, drifted: false };
        Ok(())
    }

    /// Dumps the switch after someone else changed its flows and sends the difference to the
    /// desired flows (brought up to date with the pending changes first).
    async fn repair(&mut self, generation: u64) -> Result<(), SwitchError> {
        // Cleared before the dump: a change reported after it is repaired by the next round.
        self.phase = Phase::Synced { generation, drifted: false };
        // Deleting a meter by hand deletes the flows using it; they are put back with them.
        self.meters.forget();
        let dump = self.switch.dump_flows(None).await?;
        self.installed = compiler::installed_from_stats(&dump);
        let now = self.now();
        let changes = std::mem::take(&mut self.pending);
        let (mods, flows_changed) = {
            let mut guard = write(&self.state);
            let state = &mut *guard;
            let Some(compiler) = state.compiler.as_mut() else { return Ok(()) };
            let touched = timed_update(compiler, state.store.model(), &changes, now, &self.metrics);
            (compiler::diff(compiler.flows(), &self.installed), !touched.is_empty())
        };
        let mods = self.without_waiting(mods);
        if flows_changed {
            self.update_flow_gauges();
        }
        if mods.is_empty() {
            tracing::info!("flows changed on the switch; the dump matches the desired flows, nothing to repair");
        } else {
            tracing::warn!(
                "flows changed on the switch behind npagent's back: repairing with {} flow_mods ({} flows installed)",
                mods.len(),
                self.installed.len()
            );
        }
        self.send_with_meters(mods, &MeterShed::new()).await
    }

    /// Recompiles what the pending changes touch and sends the difference, with the refused
    /// flows whose retry is due.
    async fn incremental(&mut self) -> Result<(), SwitchError> {
        let now = self.now();
        let changes = std::mem::take(&mut self.pending);
        let due = self.refused.due(Instant::now());
        if !changes.is_empty() {
            tracing::debug!("recompiling for {} change(s): {:?}", changes.len(), &changes[..changes.len().min(8)]);
        }
        let (mods, flows_changed) = {
            let mut guard = write(&self.state);
            let state = &mut *guard;
            let Some(compiler) = state.compiler.as_mut() else { return Ok(()) };
            let touched: BTreeSet<_> = if changes.is_empty() {
                BTreeSet::new()
            } else {
                timed_update(compiler, state.store.model(), &changes, now, &self.metrics)
            };
            let flows_changed = !touched.is_empty();
            let keys: BTreeSet<_> = touched.into_iter().chain(due.iter().cloned()).collect();
            (compiler::diff_keys(compiler.flows(), &self.installed, keys.iter()), flows_changed)
        };
        if flows_changed {
            self.update_flow_gauges();
        }
        let mods = self.without_waiting(mods);
        let wanted: BTreeSet<_> = mods.iter().map(refused::key_of).collect();
        for k in due.iter().filter(|k| !wanted.contains(*k)) {
            // Nothing to send for it any more: its policy went, or it is in place.
            self.refused.forget(k);
        }
        if !due.is_empty() && !mods.is_empty() {
            tracing::info!(
                "retrying {} flow_mod(s) the switch refused before",
                due.iter().filter(|k| wanted.contains(*k)).count()
            );
        }
        self.send_with_meters(mods, &MeterShed::new()).await
    }

    /// Sends `mods` between the meters they need: those of new pods added before, those of
    /// pods gone (or left on the switch, `on_switch`) deleted after.
    async fn send_with_meters(&mut self, mods: Vec<FlowMod>, on_switch: &MeterShed) -> Result<(), SwitchError> {
        let ports: BTreeSet<u32> = write(&self.state).store.model().ports.keys().copied().collect();
        self.meters.add_missing(&self.switch, &ports).await?;
        self.send(mods).await?;
        self.meters.remove_unused(&self.switch, &ports, on_switch).await
    }

    /// `mods` without those for refused flows whose retry is not due yet.
    fn without_waiting(&self, mut mods: Vec<FlowMod>) -> Vec<FlowMod> {
        if !self.refused.is_empty() {
            let now = Instant::now();
            mods.retain(|m| !self.refused.is_waiting(&refused::key_of(m), now));
        }
        mods
    }

    /// Sends `mods` in one bundle and records them as installed. When the switch refuses
    /// some of them, those are set aside for a retry with backoff and the rest goes out in a
    /// new bundle (at most [`MAX_SPLITS`] bundles; then the last error is returned).
    async fn send(&mut self, mods: Vec<FlowMod>) -> Result<(), SwitchError> {
        let mut batch = mods;
        let mut refused: Vec<(FlowMod, OfpError)> = Vec::new();
        let mut last_error = None;
        for _ in 0..MAX_SPLITS {
            if batch.is_empty() {
                break;
            }
            let started = Instant::now();
            match self.switch.install(batch.clone()).await {
                Ok(()) => {
                    self.committed(&batch, started);
                    batch.clear();
                    break;
                }
                Err(SwitchError::BundleFailed { index, error, also, .. }) => {
                    self.metrics.bundles_failed.inc();
                    let mut bad = BTreeSet::new();
                    for (i, e) in std::iter::once((index, &error)).chain(also.iter().map(|(i, e)| (*i, e))) {
                        for j in refused::offenders(&batch, i, e) {
                            if bad.insert(j) {
                                // The flow the switch named carries its own error; the others
                                // set aside with it (same full table) share it.
                                refused.extend(batch.get(j).map(|m| (m.clone(), e.clone())));
                            }
                        }
                    }
                    if bad.is_empty() {
                        // An index outside the batch: nothing to set aside, give up.
                        last_error = Some(SwitchError::BundleFailed {
                            index,
                            flow: String::new(),
                            error,
                            commit_error: None,
                            also,
                        });
                        break;
                    }
                    batch = batch.into_iter().enumerate().filter(|(i, _)| !bad.contains(i)).map(|(_, m)| m).collect();
                }
                Err(e) => {
                    self.metrics.bundles_failed.inc();
                    last_error = Some(e);
                    break;
                }
            }
        }
        self.set_aside(refused, last_error.is_none() && batch.is_empty());
        match last_error {
            Some(e) => Err(e),
            None if !batch.is_empty() => Err(SwitchError::Protocol(format!(
                "{} flow_mods still refused after {MAX_SPLITS} bundles",
                batch.len()
            ))),
            None => Ok(()),
        }
    }

    /// Counts and records a committed bundle.
    fn committed(&mut self, mods: &[FlowMod], started: Instant) {
        let m = &self.metrics;
        m.bundles_committed.inc();
        m.bundle_commit_seconds.observe(started.elapsed().as_secs_f64());
        let (mut add, mut modify, mut delete) = (0, 0, 0);
        for f in mods {
            match f.command {
                FlowModCommand::Add => add += 1,
                FlowModCommand::Modify | FlowModCommand::ModifyStrict => modify += 1,
                _ => delete += 1,
            }
        }
        for (kind, n) in [("add", add), ("modify", modify), ("delete", delete)] {
            m.flow_mods.get_or_create(&KindLabel { kind }).inc_by(n);
        }
        tracing::debug!("bundle of {} flow_mods committed in {:?}", mods.len(), started.elapsed());
        for f in mods.iter().take(16) {
            tracing::trace!("sent {}", crate::switch::describe_flow(f));
        }
        compiler::apply(&mut self.installed, mods);
        if !self.refused.is_empty() {
            let landed = mods.iter().filter(|f| self.refused.forget(&refused::key_of(f))).count();
            if landed > 0 {
                tracing::info!(
                    "{landed} flow_mod(s) the switch refused before are installed now; {} still set aside",
                    self.refused.len()
                );
            }
        }
    }

    /// Records flows the switch refused, and says which (with their policy), whether the rest
    /// of their bundle was `applied`, and when they are tried again.
    fn set_aside(&mut self, refused: Vec<(FlowMod, OfpError)>, applied: bool) {
        if refused.is_empty() {
            return;
        }
        self.metrics.flow_mods_rejected.inc_by(refused.len() as u64);
        let now = Instant::now();
        let state = self.state.read().unwrap_or_else(|p| p.into_inner());
        let rules = state.compiler.as_ref().map(|c| c.rules());
        let mut lines = Vec::new();
        let mut next = None;
        for (m, e) in &refused {
            let (attempts, delay) = self.refused.record(refused::key_of(m), now);
            next = Some(next.map_or((attempts, delay), |(a, d): (u32, Duration)| (a.max(attempts), d.min(delay))));
            if lines.len() < REFUSED_SHOWN {
                lines.push(refused::describe(m, e, rules));
            }
        }
        let more = refused.len().saturating_sub(REFUSED_SHOWN);
        let (attempts, delay) = next.unwrap_or((1, refused::BACKOFF_MIN));
        let rest = if applied {
            "the rest of the bundle is applied without them"
        } else {
            "the rest of the bundle failed too"
        };
        tracing::error!(
            "the switch refused {} flow_mod(s); {rest}; retrying them in {delay:?} (refused {attempts} time(s) so far, {} flows set aside):\n  {}{}",
            refused.len(),
            self.refused.len(),
            lines.join("\n  "),
            if more > 0 { format!("\n  ... and {more} more") } else { String::new() }
        );
    }

    /// Sets the flows-per-table gauges from the desired flows (one pass over them).
    fn update_flow_gauges(&self) {
        let mut per_table = [0i64; 256];
        {
            let state = self.state.read().unwrap_or_else(|p| p.into_inner());
            let Some(c) = state.compiler.as_ref() else { return };
            for k in c.flows().keys() {
                per_table[usize::from(k.table)] += 1;
            }
        }
        for (id, name) in tables::TABLES {
            self.metrics.flows.get_or_create(&TableLabel { table: name.to_string() }).set(per_table[usize::from(id)]);
        }
    }
}

/// `compiler.update` for `changes`, its time observed in `metrics`.
fn timed_update(
    compiler: &mut Compiler,
    model: &crate::model::Model,
    changes: &[Change],
    now: u64,
    metrics: &AgentMetrics,
) -> BTreeSet<compiler::FlowKey> {
    let started = Instant::now();
    let touched = compiler.update(model, changes, now);
    metrics.compile_seconds.observe(started.elapsed().as_secs_f64());
    touched
}

/// Locks the shared state for writing. A panic elsewhere while holding the lock leaves the
/// model as consistent as the last completed step: keep serving with it rather than stop.
fn write(state: &RwLock<State>) -> RwLockWriteGuard<'_, State> {
    state.write().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// One line about a source event, for tracing.
fn describe_event(ev: &SourceEvent) -> String {
    match ev {
        SourceEvent::Reset { kinds, objects } => format!("reset of {kinds:?} with {} objects", objects.len()),
        SourceEvent::ResetChunk { kinds, objects } => {
            format!("part of a listing of {kinds:?} with {} objects", objects.len())
        }
        SourceEvent::Applied(o) => format!("applied {}", o.origin),
        SourceEvent::Deleted { kind, object } => format!("deleted {kind:?} {object}"),
        SourceEvent::Invalid { origin, .. } => format!("invalid {origin}"),
    }
}
