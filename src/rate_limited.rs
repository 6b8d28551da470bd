//! A warning about a counter that keeps growing (shed packet-ins, failed accepts, undecodable
//! messages), given at most once a minute so that a flood of failures does not flood the log
//! too.

use std::time::{Duration, Instant};

/// Least time between two warnings.
const INTERVAL: Duration = Duration::from_secs(60);

/// A warning about a growing counter, given at most once a minute. Growth within the minute
/// after a warning is not lost: the next report after that minute warns about it.
#[derive(Debug, Default)]
pub struct RateLimitedWarning {
    /// The total of the previous report.
    last_total: u64,
    /// Growth no warning told of yet.
    unwarned: u64,
    warned_at: Option<Instant>,
}

impl RateLimitedWarning {
    /// Reports the counter's `total`; calls `warn` with it if the counter grew since the
    /// last warning and that was a minute ago or more.
    pub fn total(&mut self, total: u64, warn: impl FnOnce(u64)) {
        self.report(total, Instant::now(), |total, _| warn(total));
    }

    /// [`total`](Self::total), with `warn` also given the growth since the last warning.
    pub fn total_and_growth(&mut self, total: u64, warn: impl FnOnce(u64, u64)) {
        self.report(total, Instant::now(), warn);
    }

    fn report(&mut self, total: u64, now: Instant, warn: impl FnOnce(u64, u64)) {
        // A total below the last one is a counter that started again from zero (a switch's
        // meter after a restart).
        let grew = total.checked_sub(self.last_total).unwrap_or(total);
        self.last_total = total;
        self.unwarned = self.unwarned.saturating_add(grew);
        if self.unwarned > 0 && self.warned_at.is_none_or(|t| now.saturating_duration_since(t) >= INTERVAL) {
            self.warned_at = Some(now);
            warn(total, std::mem::take(&mut self.unwarned));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{RateLimitedWarning, INTERVAL};
    use std::time::{Duration, Instant};

    #[test]
    fn warns_when_the_counter_grows_at_most_once_a_minute() {
        let mut w = RateLimitedWarning::default();
        let mut warned = Vec::new();
        w.total(0, |n| warned.push(n));
        w.total(5, |n| warned.push(n));
        w.total(9, |n| warned.push(n));
        assert_eq!(warned, vec![5], "no warning for zero, then one within the minute");
    }

    #[test]
    fn growth_within_the_minute_is_warned_about_after_it() {
        let (mut w, t0) = (RateLimitedWarning::default(), Instant::now());
        let mut warned = Vec::new();
        w.report(5, t0, |n, grew| warned.push((n, grew)));
        w.report(9, t0 + Duration::from_secs(30), |n, grew| warned.push((n, grew)));
        w.report(9, t0 + INTERVAL, |n, grew| warned.push((n, grew)));
        w.report(9, t0 + INTERVAL * 3, |n, grew| warned.push((n, grew)));
        assert_eq!(warned, vec![(5, 5), (9, 4)], "the 4 of the quiet minute, once");
    }

    #[test]
    fn a_counter_started_again_counts_from_zero() {
        let (mut w, t0) = (RateLimitedWarning::default(), Instant::now());
        let mut warned = Vec::new();
        w.report(500, t0, |n, grew| warned.push((n, grew)));
        w.report(0, t0 + INTERVAL, |n, grew| warned.push((n, grew)));
        w.report(3, t0 + INTERVAL * 2, |n, grew| warned.push((n, grew)));
        assert_eq!(warned, vec![(500, 500), (3, 3)]);
    }
}
