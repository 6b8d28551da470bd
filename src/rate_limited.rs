//! A warning about a counter that keeps growing (shed packet-ins, failed accepts), given at
//! most once a minute so that a flood of failures does not flood the log too.

use std::time::{Duration, Instant};

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
