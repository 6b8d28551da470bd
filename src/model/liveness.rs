//! Whether a pod is alive enough to be a policy peer and to own its IPs.
//!
//! A finished pod (phase Succeeded or Failed) or one past its deletion deadline holds no IP:
//! its address may already belong to a new pod, which must not inherit the allows the old one
//! had nor be named as the old one in the audit log. Several pods claiming one IP (a stale
//! object next to the pod the address now belongs to) are ranked by [`ClaimRank`].

use std::cmp::Reverse;
use std::time::SystemTime;

/// `status.phase` of a Pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Phase {
    Pending,
    Running,
    Succeeded,
    Failed,
    /// `Unknown`, or a value this version does not know.
    Unknown,
}

/// The facts about a pod's life that decide its IP claims (see
/// [`crate::model::convert::pod_life`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PodLife {
    pub phase: Phase,
    /// `metadata.creationTimestamp`.
    pub created: Option<SystemTime>,
    /// When the pod is gone: `metadata.deletionTimestamp`, which the API server sets to the
    /// time of the delete request plus the grace period (so the grace period is not added
    /// again); the epoch for a forced deletion (grace period 0).
    pub deletion: Option<SystemTime>,
}

/// How strongly a live pod claims its IPs; the smallest rank wins an address.
///
/// The rule: a Running pod that is not being deleted beats a live pod in any other phase
/// (Pending, Unknown) that is not being deleted, which beats a pod within its deletion grace
/// period; among equals the newer `creationTimestamp` wins (an address is reused by the pod
/// created after the one that had it; no timestamp counts as oldest). The pod name order
/// (namespace, then name) breaks the remaining ties, so the outcome never depends on the order
/// events arrived in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClaimRank {
    class: u8,
    /// `creationTimestamp` in nanoseconds from the epoch; none is [`i64::MIN`], the oldest.
    /// An integer, not an `Option<SystemTime>`: the store keeps a rank per live pod and per
    /// claimed address, and this halves it.
    newest_first: Reverse<i64>,
}

impl PodLife {
    /// Whether the pod has finished at `now`: phase Succeeded or Failed, or past its deletion
    /// deadline.
    pub fn is_finished(&self, now: SystemTime) -> bool {
        matches!(self.phase, Phase::Succeeded | Phase::Failed) || self.deletion.is_some_and(|d| d <= now)
    }

    /// The pod's claim on its IPs at `now`; `None` when it has finished and claims none.
    pub fn claim(&self, now: SystemTime) -> Option<ClaimRank> {
        if self.is_finished(now) {
            return None;
        }
        let class = match (self.deletion.is_some(), self.phase) {
            (false, Phase::Running) => 0,
            (false, _) => 1,
            (true, _) => 2,
        };
        Some(ClaimRank { class, newest_first: Reverse(self.created.map_or(i64::MIN, epoch_nanos)) })
    }
}

/// Nanoseconds from the epoch, saturating (above [`i64::MIN`], so no time counts as older than
/// none).
fn epoch_nanos(t: SystemTime) -> i64 {
    let saturate = |d: std::time::Duration| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX);
    match t.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(after) => saturate(after),
        Err(before) => -saturate(before.duration()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    }

    fn life(phase: Phase, created: Option<u64>, deletion: Option<u64>) -> PodLife {
        PodLife { phase, created: created.map(at), deletion: deletion.map(at) }
    }

    #[test]
    fn finished_pods_claim_nothing() {
        let now = at(1000);
        assert_eq!(life(Phase::Succeeded, Some(1), None).claim(now), None);
        assert_eq!(life(Phase::Failed, Some(1), None).claim(now), None);
        assert_eq!(life(Phase::Running, Some(1), Some(1000)).claim(now), None, "deadline reached");
        assert_eq!(life(Phase::Running, Some(1), Some(0)).claim(now), None, "forced deletion");
        assert!(life(Phase::Running, Some(1), Some(1001)).claim(now).is_some(), "within the grace period");
        assert!(life(Phase::Pending, None, None).claim(now).is_some());
        assert!(life(Phase::Unknown, None, None).claim(now).is_some());
    }

    #[test]
    fn the_running_pod_wins_then_the_newer_one() {
        let now = at(1000);
        let rank = |l: PodLife| l.claim(now).expect("live");
        let running_old = rank(life(Phase::Running, Some(10), None));
        let running_new = rank(life(Phase::Running, Some(20), None));
        let running_untimed = rank(life(Phase::Running, None, None));
        let pending_new = rank(life(Phase::Pending, Some(30), None));
        let terminating_new = rank(life(Phase::Running, Some(40), Some(2000)));
        assert!(running_new < running_old);
        assert!(running_old < running_untimed, "no timestamp counts as oldest");
        assert!(running_untimed < pending_new, "running beats any other phase");
        assert!(pending_new < terminating_new, "not being deleted beats being deleted");
    }

    #[test]
    fn creation_times_beyond_the_nanosecond_range_keep_their_order() {
        let now = at(1000);
        let rank =
            |created: Option<SystemTime>| life(Phase::Running, None, None).with(created).claim(now).expect("live");
        let before_epoch = SystemTime::UNIX_EPOCH.checked_sub(Duration::from_secs(5)).expect("before the epoch");
        let beyond_i64_nanos = at(1 << 40);
        assert!(rank(Some(beyond_i64_nanos)) < rank(Some(at(20))));
        assert!(rank(Some(at(20))) < rank(Some(before_epoch)));
        assert!(rank(Some(before_epoch)) < rank(None), "no timestamp counts as oldest");
    }

    impl PodLife {
        fn with(self, created: Option<SystemTime>) -> PodLife {
            PodLife { created, ..self }
        }
    }
}
