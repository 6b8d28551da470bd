//! Keeps the bridge at the compiler's desired flows: diff, one bundle, and a full resync
//! (dump, diff) whenever the switch (re)connects or a bundle fails.

use super::metrics::AgentMetrics;
use super::{AgentConfig, State};
use crate::compiler::{self, tables, Change, Compiler, FlowTable, IdAllocator};
use crate::model::LocalPort;
use crate::source::SourceEvent;
use crate::switch::{ConnState, SwitchError, SwitchHandle};
use ofp::{FlowMod, FlowModCommand, MeterBand, MeterMod};
use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::sync::{Arc, RwLock, RwLockWriteGuard};
use std::time::{Duration, Instant};

/// Seconds a deleted rule's conjunction id stays reserved (and its rule resolvable).
const ID_GRACE_SECS: u64 = 120;
/// Wait after a failed reconcile before the next try.
const RETRY_AFTER: Duration = Duration::from_secs(2);

const METER_ADD: u16 = 0;
const METER_MODIFY: u16 = 1;
/// OFPMF_PKTPS | OFPMF_BURST | OFPMF_STATS.
const METER_FLAGS: u16 = 2 | 4 | 8;

/// The reconciler's state.
pub struct Reconciler {
    switch: SwitchHandle,
    state: Arc<RwLock<State>>,
    metrics: Arc<AgentMetrics>,
    compiler_cfg: compiler::Config,
    meter: MeterMod,
    started: Instant,
    /// What the switch holds, as far as we know (dumped at each connection, then kept).
    installed: FlowTable,
    /// Model changes not yet compiled.
    pending: Vec<Change>,
    /// Generation of the connection the installed view belongs to; `None` = not dumped yet.
    synced_generation: Option<u64>,
    /// The current connection, if any.
    connected: Option<u64>,
    retry_at: Option<Instant>,
}

impl Reconciler {
    /// A reconciler for `cfg` talking through `switch`.
    pub fn new(cfg: &AgentConfig, switch: SwitchHandle, state: Arc<RwLock<State>>, metrics: Arc<AgentMetrics>) -> Self {
        let rate = cfg.packet_in_rate.max(1);
        Reconciler {
            switch,
            state,
            metrics,
            compiler_cfg: compiler::Config { meter_id: cfg.meter_id, controller_id: cfg.controller_id },
            meter: MeterMod {
                command: METER_ADD,
                flags: METER_FLAGS,
                meter_id: cfg.meter_id,
                bands: vec![MeterBand::Drop { rate, burst_size: rate.saturating_mul(2) }],
            },
            started: Instant::now(),
            installed: FlowTable::new(),
            pending: Vec::new(),
            synced_generation: None,
            connected: None,
            retry_at: None,
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
        let changes = self.state().store.apply(ev);
        self.pending.extend(changes);
    }

    /// Replaces the bridge's pod ports.
    pub fn set_ports(&mut self, ports: &[LocalPort]) {
        let changes = self.state().store.set_ports(ports);
        self.pending.extend(changes);
    }

    /// Follows the switch connection: a new generation needs a full resync.
    pub fn connection_changed(&mut self, st: &ConnState) {
        match st {
            ConnState::Connected { generation, datapath_id } => {
                tracing::info!("switch connected (datapath {datapath_id:#018x}, connection #{generation})");
                if *generation > 1 {
                    self.metrics.reconnects.fetch_add(1, Ordering::Relaxed);
                }
                self.connected = Some(*generation);
                self.retry_at = None;
            }
            ConnState::Disconnected { reason } => {
                if self.connected.take().is_some() {
                    tracing::warn!("switch disconnected{}; reconnecting", reason.as_ref().map(|r| format!(": {r}")).unwrap_or_default());
                }
            }
        }
    }

    /// Forgets rules whose grace period is over.
    pub fn expire(&mut self) {
        let now = self.now();
        if let Some(c) = self.state().compiler.as_mut() {
            c.expire(now);
        }
    }

    /// Brings the switch to the desired state, if the inputs are complete and it is connected.
    pub async fn reconcile(&mut self) {
        let Some(generation) = self.connected else { return };
        if self.retry_at.is_some_and(|t| Instant::now() < t) {
            return;
        }
        {
            let mut state = write(&self.state);
            if !state.store.is_synced() {
                return;
            }
            state.store.check_policy_namespaces(&self.pending);
        }
        let result = if self.synced_generation != Some(generation) {
            self.resync(generation).await
        } else if self.pending.is_empty() {
            return;
        } else {
            self.incremental().await
        };
        match result {
            Ok(()) => self.retry_at = None,
            Err(e) => {
                tracing::error!("reconcile failed: {e}; retrying with a full resync");
                self.synced_generation = None;
                self.retry_at = Some(Instant::now() + RETRY_AFTER);
            }
        }
    }

    /// Dumps the switch, recompiles everything, sends the full diff.
    async fn resync(&mut self, generation: u64) -> Result<(), SwitchError> {
        self.ensure_meter().await?;
        let dump = self.switch.dump_flows(None).await?;
        self.installed = compiler::installed_from_stats(&dump);
        let now = self.now();
        self.pending.clear();
        let mods = {
            let mut guard = write(&self.state);
            let state = &mut *guard;
            let compiler = state.compiler.get_or_insert_with(|| {
                Compiler::new(self.compiler_cfg.clone(), IdAllocator::recover(&dump, ID_GRACE_SECS))
            });
            compiler.full(state.store.model(), now);
            compiler::diff(compiler.flows(), &self.installed)
        };
        tracing::info!(
            "resync with the switch (connection #{generation}): {} flows installed, {} flow_mods to send",
            self.installed.len(),
            mods.len()
        );
        self.update_flow_gauges();
        self.send(mods).await?;
        self.synced_generation = Some(generation);
        Ok(())
    }

    /// Recompiles what the pending changes touch and sends the difference.
    async fn incremental(&mut self) -> Result<(), SwitchError> {
        let now = self.now();
        let changes = std::mem::take(&mut self.pending);
        tracing::debug!("recompiling for {} change(s): {:?}", changes.len(), &changes[..changes.len().min(8)]);
        let (mods, flows_changed) = {
            let mut guard = write(&self.state);
            let state = &mut *guard;
            let Some(compiler) = state.compiler.as_mut() else { return Ok(()) };
            let touched: BTreeSet<_> = compiler.update(state.store.model(), &changes, now);
            (compiler::diff_keys(compiler.flows(), &self.installed, touched.iter()), !touched.is_empty())
        };
        if flows_changed {
            self.update_flow_gauges();
        }
        self.send(mods).await
    }

    /// Sends `mods` in one bundle and records them as installed.
    async fn send(&mut self, mods: Vec<FlowMod>) -> Result<(), SwitchError> {
        if mods.is_empty() {
            return Ok(());
        }
        let started = Instant::now();
        let result = self.switch.install(mods.clone()).await;
        match &result {
            Ok(()) => {
                let m = &self.metrics;
                m.bundles_committed.fetch_add(1, Ordering::Relaxed);
                m.bundle_latency_us_sum.fetch_add(started.elapsed().as_micros() as u64, Ordering::Relaxed);
                for f in &mods {
                    let counter = match f.command {
                        FlowModCommand::Add => &m.flow_mods_add,
                        FlowModCommand::Modify | FlowModCommand::ModifyStrict => &m.flow_mods_modify,
                        _ => &m.flow_mods_delete,
                    };
                    counter.fetch_add(1, Ordering::Relaxed);
                }
                tracing::debug!("bundle of {} flow_mods committed in {:?}", mods.len(), started.elapsed());
                for f in mods.iter().take(16) {
                    tracing::trace!("sent {}", crate::switch::describe_flow(f));
                }
                compiler::apply(&mut self.installed, &mods);
            }
            Err(_) => {
                self.metrics.bundles_failed.fetch_add(1, Ordering::Relaxed);
            }
        }
        result
    }

    /// Sets the flows-per-table gauges from the desired flows (one pass over them).
    fn update_flow_gauges(&self) {
        let counts: Vec<(String, u64)> = {
            let state = self.state.read().unwrap_or_else(|p| p.into_inner());
            let Some(c) = state.compiler.as_ref() else { return };
            let mut per_table = [0u64; 256];
            for k in c.flows().keys() {
                per_table[usize::from(k.table)] += 1;
            }
            tables::TABLES.iter().map(|(id, name)| (name.to_string(), per_table[usize::from(*id)])).collect()
        };
        if let Ok(mut t) = self.metrics.flows_per_table.lock() {
            *t = counts;
        }
    }

    /// Installs the logging meter, or updates it if it exists.
    async fn ensure_meter(&self) -> Result<(), SwitchError> {
        match self.switch.meter_mod(self.meter.clone()).await {
            Ok(()) => Ok(()),
            Err(SwitchError::Rejected { error, .. }) if error.is("OFPMMFC_METER_EXISTS") => {
                self.switch.meter_mod(MeterMod { command: METER_MODIFY, ..self.meter.clone() }).await
            }
            Err(e) => Err(e),
        }
    }

    /// Reads how many logging packets the meter dropped; warns at most once a minute.
    pub async fn poll_meter(&self, warning: &mut super::RateLimitedWarning) {
        if self.connected.is_none() {
            return;
        }
        let Ok(stats) = self.switch.meter_stats(self.meter.meter_id).await else { return };
        let dropped: u64 = stats.iter().flat_map(|s| s.bands.iter()).map(|(packets, _)| packets).sum();
        self.metrics.shed_by_meter.store(dropped, Ordering::Relaxed);
        let rate = match self.meter.bands.first() {
            Some(MeterBand::Drop { rate, .. }) => *rate,
            _ => 0,
        };
        warning.total(dropped, |n| {
            tracing::warn!(
                "the logging meter ({rate} packets/s) dropped {n} packet-ins so far: audit entries were shed (see npagent_audit_shed_by_meter_total)"
            )
        });
    }
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
