//! The logging meters on the switch: an Allow and a Drop meter for every local pod and the
//! security events' meter (their ids: [`crate::compiler::meters`]), kept in step with the
//! pods, and their shed counts read for the gap records and the metrics.
//!
//! A meter is added before the flows that name it and deleted after them (deleting a meter
//! deletes the flows that use it).

use crate::compiler::meters;
use crate::switch::{SwitchError, SwitchHandle};
use ofp::{meter, MeterBand, MeterMod};
use std::collections::{BTreeMap, BTreeSet};

/// The logging meters count packets, with a burst, and keep statistics (their shed counts).
const METER_FLAGS: u16 = meter::FLAG_PKTPS | meter::FLAG_BURST | meter::FLAG_STATS;

/// Packets each of npagent's meters dropped, by meter id, as the switch counts them.
pub type MeterShed = BTreeMap<u32, u64>;

/// The meters npagent keeps on the switch.
pub struct LoggingMeters {
    /// Allow copies per second per pod.
    allow_rate: u32,
    /// Drop copies (and security events) per second per meter.
    drop_rate: u32,
    /// The meters on the switch as far as this connection knows.
    installed: BTreeSet<u32>,
}

impl LoggingMeters {
    /// Meters of `allow_rate` and `drop_rate` packets per second (burst: twice that).
    pub fn new(allow_rate: u32, drop_rate: u32) -> LoggingMeters {
        let (allow_rate, drop_rate) = rates(allow_rate, drop_rate);
        LoggingMeters { allow_rate, drop_rate, installed: BTreeSet::new() }
    }

    /// The meters the pods on `ports` need, with their rates.
    fn desired(&self, ports: &BTreeSet<u32>) -> BTreeMap<u32, u32> {
        let mut out = BTreeMap::from([(meters::SECURITY, self.drop_rate), (meters::STAGED, self.drop_rate)]);
        for &o in ports {
            out.insert(meters::allow(o), self.allow_rate);
            out.insert(meters::drop(o), self.drop_rate);
        }
        out
    }

    /// Forgets what the switch holds: the next [`Self::add_missing`] sets every meter again
    /// (a new connection, or someone deleted meters behind npagent's back).
    pub fn forget(&mut self) {
        self.installed.clear();
    }

    /// Adds the meters the pods on `ports` need that this connection has not set yet (an
    /// existing one is modified to the configured rate). The requests go out together, not one
    /// round trip after another: a start with many local pods waits for one.
    pub async fn add_missing(&mut self, switch: &SwitchHandle, ports: &BTreeSet<u32>) -> Result<(), SwitchError> {
        let missing: Vec<(u32, u32)> =
            self.desired(ports).into_iter().filter(|(id, _)| !self.installed.contains(id)).collect();
        let sent = futures::future::join_all(missing.iter().map(|&(id, rate)| add_or_modify(switch, id, rate))).await;
        self.settle(missing.iter().map(|(id, _)| *id).zip(sent), |installed, id| {
            installed.insert(id);
        })
    }

    /// Deletes npagent's meters on the switch that no pod on `ports` needs (after their flows
    /// are gone): those of removed pods, and those an earlier run left.
    pub async fn remove_unused(
        &mut self,
        switch: &SwitchHandle,
        ports: &BTreeSet<u32>,
        on_switch: &MeterShed,
    ) -> Result<(), SwitchError> {
        let desired = self.desired(ports);
        let unused: BTreeSet<u32> = on_switch
            .keys()
            .chain(&self.installed)
            .copied()
            .filter(|id| meters::owner(*id).is_some() && !desired.contains_key(id))
            .collect();
        let delete = |id| MeterMod { command: meter::DELETE, flags: 0, meter_id: id, bands: Vec::new() };
        let sent = futures::future::join_all(unused.iter().map(|&id| switch.meter_mod(delete(id)))).await;
        self.settle(unused.iter().copied().zip(sent), |installed, id| {
            installed.remove(&id);
        })
    }

    /// Records the meters whose request succeeded (`done`); the first failure, if any, is the
    /// outcome (the others stay as they were, for the next round to retry).
    fn settle(
        &mut self,
        outcomes: impl Iterator<Item = (u32, Result<(), SwitchError>)>,
        done: impl Fn(&mut BTreeSet<u32>, u32),
    ) -> Result<(), SwitchError> {
        let mut first_error = None;
        for (id, outcome) in outcomes {
            match outcome {
                Ok(()) => done(&mut self.installed, id),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

/// Adds meter `id` at `rate` (burst twice that), or modifies it to that when it exists.
async fn add_or_modify(switch: &SwitchHandle, id: u32, rate: u32) -> Result<(), SwitchError> {
    let add = MeterMod {
        command: meter::ADD,
        flags: METER_FLAGS,
        meter_id: id,
        bands: vec![MeterBand::Drop { rate, burst_size: rate.saturating_mul(2) }],
    };
    match switch.meter_mod(add.clone()).await {
        Err(SwitchError::Rejected { error, .. }) if error.is("OFPMMFC_METER_EXISTS") => {
            switch.meter_mod(MeterMod { command: meter::MODIFY, ..add }).await
        }
        outcome => outcome,
    }
}

/// The rates the meters are set to from the configured ones (`--audit-allow-rate`,
/// `--audit-drop-rate`): Allow and Drop packets per second per pod, at least one each.
pub fn rates(allow_rate: u32, drop_rate: u32) -> (u32, u32) {
    (allow_rate.max(1), drop_rate.max(1))
}

/// How many packets each of npagent's meters on the switch dropped.
pub async fn read_shed(switch: &SwitchHandle) -> Result<MeterShed, SwitchError> {
    let stats = switch.meter_stats(meter::ALL).await?;
    Ok(stats
        .iter()
        .filter(|s| meters::owner(s.meter_id).is_some())
        .map(|s| (s.meter_id, s.bands.iter().map(|(packets, _)| packets).sum()))
        .collect())
}
