//! How far the reconciler knows the switch's flows to be the desired ones, and so what its
//! next reconcile does.

use std::time::Instant;

/// The reconciler's phase with the switch's flows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Not dumped yet in this run, or the last reconcile failed (then not tried again before
    /// `retry_at`; a new connection tries at once): the next reconcile is a full resync.
    Unsynced { retry_at: Option<Instant> },
    /// The flows of connection `generation` were dumped and brought to the desired ones;
    /// `drifted`: the switch has reported flows changed by someone else since.
    Synced { generation: u64, drifted: bool },
}

/// What a reconcile does on connection `generation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Waits for the retry after a failure.
    Wait,
    /// Dumps the switch, recompiles everything and sends the difference.
    Resync,
    /// Dumps the switch after foreign changes and sends the difference.
    Repair,
    /// Sends what the pending changes (and the refused flows due again) make different.
    Incremental,
}

impl Default for Phase {
    fn default() -> Self {
        Phase::Unsynced { retry_at: None }
    }
}

impl Phase {
    /// The phase after a failed reconcile: a full resync, not before `retry_at`.
    pub fn failed(retry_at: Instant) -> Phase {
        Phase::Unsynced { retry_at: Some(retry_at) }
    }

    /// Whether no resync has succeeded since the start or the last failure.
    pub fn is_unsynced(self) -> bool {
        matches!(self, Phase::Unsynced { .. })
    }

    /// The generation of connection `connected` when its flows are the desired ones (drift
    /// aside).
    pub fn committed(self, connected: Option<u64>) -> Option<u64> {
        match self {
            Phase::Synced { generation, .. } if Some(generation) == connected => Some(generation),
            _ => None,
        }
    }

    /// Whether the flows of connection `connected` are the desired ones with no repair waiting.
    pub fn in_step(self, connected: Option<u64>) -> bool {
        matches!(self, Phase::Synced { drifted: false, .. }) && self.committed(connected).is_some()
    }

    /// A new connection: a retry after a failure need not wait any longer.
    pub fn connected(&mut self) {
        if let Phase::Unsynced { retry_at } = self {
            *retry_at = None;
        }
    }

    /// The switch reported foreign flow changes: a synced phase repairs them next (a resync
    /// repairs them anyway).
    pub fn drift_detected(&mut self) {
        if let Phase::Synced { drifted, .. } = self {
            *drifted = true;
        }
    }

    /// What a reconcile on connection `generation` does at `now`.
    pub fn step(self, generation: u64, now: Instant) -> Step {
        match self {
            Phase::Unsynced { retry_at: Some(t) } if now < t => Step::Wait,
            Phase::Synced { generation: g, drifted: true } if g == generation => Step::Repair,
            Phase::Synced { generation: g, drifted: false } if g == generation => Step::Incremental,
            _ => Step::Resync,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_start_resyncs_and_a_failure_waits_for_its_retry_unless_the_switch_reconnects() {
        let now = Instant::now();
        assert_eq!(Phase::default().step(1, now), Step::Resync);
        let mut failed = Phase::failed(now + Duration::from_secs(2));
        assert_eq!(failed.step(1, now), Step::Wait);
        assert_eq!(failed.step(1, now + Duration::from_secs(2)), Step::Resync);
        failed.connected();
        assert_eq!(failed, Phase::default());
    }

    #[test]
    fn a_synced_connection_is_kept_in_step_and_a_new_one_resyncs() {
        let now = Instant::now();
        let mut p = Phase::Synced { generation: 3, drifted: false };
        assert_eq!(p.step(3, now), Step::Incremental);
        assert!(p.in_step(Some(3)));
        assert_eq!(p.committed(None), None);
        assert_eq!(p.step(4, now), Step::Resync);
        assert!(!p.in_step(Some(4)));
        p.drift_detected();
        assert_eq!(p.step(3, now), Step::Repair);
        assert_eq!(p.committed(Some(3)), Some(3));
        assert!(!p.in_step(Some(3)));
    }

    #[test]
    fn drift_before_the_first_resync_is_repaired_by_it() {
        let mut p = Phase::default();
        p.drift_detected();
        assert_eq!(p, Phase::default());
    }
}
