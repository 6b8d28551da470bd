//! What `/livez` and `/readyz` answer, as a pure state: the agent reports its progress and
//! heartbeats with the time passed in, the server asks for a verdict.
//!
//! Ready means the bridge holds what npagent wants: the sources have been listed, OVSDB has
//! been read, the switch is connected and the resync on that very connection (dump, diff,
//! bundle) has been committed. A new connection is not ready until its own resync is.

use std::time::{Duration, Instant};

/// How long the agent's main loop may go without a beat before `/livez` fails. It beats
/// while it waits on the switch too (whose requests have timeouts of their own), so only a
/// loop that is blocked (a deadlock, a runaway computation) misses this.
pub(crate) const LIVENESS_WINDOW: Duration = Duration::from_secs(30);

/// What readiness depends on, as the agent last saw it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Progress {
    /// Every kind of object has had its initial list.
    pub(crate) sources_synced: bool,
    /// The bridge's ports have been read from OVSDB.
    pub(crate) ovsdb_read: bool,
    /// The generation of the switch connection, while connected.
    pub(crate) connection: Option<u64>,
    /// The generation of the connection whose resync has been committed.
    pub(crate) committed: Option<u64>,
}

/// A change of the readiness verdict, for the agent to log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ReadinessChange {
    /// Ready for the first time since start: the first sync is complete.
    FirstReady,
    /// Ready again (after a reconnect's resync).
    Ready,
    /// No longer ready, with the reason.
    NotReady(String),
}

/// The health of the agent, fed by its main loop.
#[derive(Debug, Clone)]
pub(crate) struct Health {
    /// Where the objects come from, as said in a reason ("the Kubernetes API").
    source: &'static str,
    progress: Progress,
    was_ready: bool,
    ever_ready: bool,
    last_beat: Instant,
    stopped: Vec<&'static str>,
}

impl Health {
    /// A starting agent reading its objects from `source` (a phrase such as "the Kubernetes
    /// API"); its main loop counts as having run at `now`.
    pub(crate) fn new(source: &'static str, now: Instant) -> Health {
        Health {
            source,
            progress: Progress::default(),
            was_ready: false,
            ever_ready: false,
            last_beat: now,
            stopped: Vec::new(),
        }
    }

    /// Records the agent's progress; returns the change of the verdict, if any.
    pub(crate) fn set_progress(&mut self, progress: Progress) -> Option<ReadinessChange> {
        self.progress = progress;
        let ready = self.readiness();
        let change = match (&ready, self.was_ready) {
            (Ok(()), false) if !self.ever_ready => Some(ReadinessChange::FirstReady),
            (Ok(()), false) => Some(ReadinessChange::Ready),
            (Err(reason), true) => Some(ReadinessChange::NotReady(reason.clone())),
            _ => None,
        };
        self.was_ready = ready.is_ok();
        self.ever_ready |= self.was_ready;
        change
    }

    /// The main loop ran at `now`.
    pub(crate) fn beat(&mut self, now: Instant) {
        self.last_beat = now;
    }

    /// The agent's tasks that have ended (named as in a reason: "the OVSDB client").
    pub(crate) fn tasks_stopped(&mut self, stopped: Vec<&'static str>) {
        self.stopped = stopped;
    }

    /// Ready, or every reason why not, joined on one line.
    pub(crate) fn readiness(&self) -> Result<(), String> {
        let p = &self.progress;
        let mut reasons = Vec::new();
        if !p.sources_synced {
            reasons.push(format!("waiting for {}", self.source));
        }
        if !p.ovsdb_read {
            reasons.push("waiting for OVSDB".to_owned());
        }
        match p.connection {
            None => reasons.push("switch not connected".to_owned()),
            Some(generation) if p.committed != Some(generation) => {
                reasons.push(format!("resync with the switch (connection #{generation}) not committed yet"))
            }
            Some(_) => {}
        }
        if reasons.is_empty() {
            Ok(())
        } else {
            Err(reasons.join("; "))
        }
    }

    /// Alive at `now`, or why not: the main loop has not come round within
    /// [`LIVENESS_WINDOW`], or a task has ended.
    pub(crate) fn liveness(&self, now: Instant) -> Result<(), String> {
        let silent = now.saturating_duration_since(self.last_beat);
        let mut reasons = Vec::new();
        if silent > LIVENESS_WINDOW {
            reasons.push(format!("the main loop has not run for {}s", silent.as_secs()));
        }
        for task in &self.stopped {
            reasons.push(format!("{task} stopped"));
        }
        if reasons.is_empty() {
            Ok(())
        } else {
            Err(reasons.join("; "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL_IN: Progress =
        Progress { sources_synced: true, ovsdb_read: true, connection: Some(1), committed: Some(1) };

    fn health() -> (Health, Instant) {
        let t0 = Instant::now();
        (Health::new("the Kubernetes API", t0), t0)
    }

    #[test]
    fn a_starting_agent_is_not_ready_and_says_everything_it_waits_for() {
        let (h, _) = health();
        assert_eq!(
            h.readiness(),
            Err("waiting for the Kubernetes API; waiting for OVSDB; switch not connected".to_owned())
        );
    }

    #[test]
    fn each_input_alone_keeps_it_not_ready() {
        let cases = [
            (Progress { sources_synced: false, ..ALL_IN }, "waiting for the Kubernetes API"),
            (Progress { ovsdb_read: false, ..ALL_IN }, "waiting for OVSDB"),
            (Progress { connection: None, ..ALL_IN }, "switch not connected"),
            (Progress { committed: None, ..ALL_IN }, "resync with the switch (connection #1) not committed yet"),
        ];
        for (progress, reason) in cases {
            let (mut h, _) = health();
            assert_eq!(h.set_progress(progress), None, "{progress:?}");
            assert_eq!(h.readiness(), Err(reason.to_owned()), "{progress:?}");
        }
    }

    #[test]
    fn ready_only_once_the_resync_of_the_current_connection_is_committed() {
        let (mut h, _) = health();
        let connected = Progress { committed: None, ..ALL_IN };
        assert_eq!(h.set_progress(connected), None);
        assert_eq!(h.set_progress(ALL_IN), Some(ReadinessChange::FirstReady));
        assert_eq!(h.readiness(), Ok(()));
        assert_eq!(h.set_progress(ALL_IN), None, "no change, nothing to report");

        // The switch goes away: not ready; it comes back on a new connection: the old
        // connection's resync does not count.
        let gone = Progress { connection: None, ..ALL_IN };
        assert_eq!(h.set_progress(gone), Some(ReadinessChange::NotReady("switch not connected".into())));
        let back = Progress { connection: Some(2), ..ALL_IN };
        assert_eq!(h.set_progress(back), None);
        assert!(h.readiness().unwrap_err().contains("connection #2"));
        assert_eq!(h.set_progress(Progress { committed: Some(2), ..back }), Some(ReadinessChange::Ready));
    }

    #[test]
    fn a_failed_reconcile_makes_it_not_ready_until_the_next_resync() {
        let (mut h, _) = health();
        h.set_progress(ALL_IN);
        let failed = Progress { committed: None, ..ALL_IN };
        assert!(matches!(h.set_progress(failed), Some(ReadinessChange::NotReady(_))));
        assert_eq!(h.set_progress(ALL_IN), Some(ReadinessChange::Ready), "first ready is said once");
    }

    #[test]
    fn alive_while_the_main_loop_beats_and_no_task_stopped() {
        let (mut h, t0) = health();
        assert_eq!(h.liveness(t0 + LIVENESS_WINDOW), Ok(()));
        let late = t0 + LIVENESS_WINDOW + Duration::from_secs(1);
        assert_eq!(h.liveness(late), Err("the main loop has not run for 31s".to_owned()));
        h.beat(late);
        assert_eq!(h.liveness(late + Duration::from_secs(5)), Ok(()));
        h.tasks_stopped(vec!["the OVSDB client"]);
        assert_eq!(h.liveness(late), Err("the OVSDB client stopped".to_owned()));
        h.tasks_stopped(Vec::new());
        assert_eq!(h.liveness(late), Ok(()));
    }

    #[test]
    fn a_clock_reading_before_the_last_beat_is_no_silence() {
        let (mut h, t0) = health();
        h.beat(t0 + Duration::from_secs(100));
        assert_eq!(h.liveness(t0), Ok(()));
    }
}
