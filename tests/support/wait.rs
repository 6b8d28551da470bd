//! Polling until something holds, with a deadline, and a panic that says what did not
//! happen in time.

use std::time::{Duration, Instant};

/// Waits until `cond` holds, asking every 100 ms for at most `within`; returns how long that
/// took. Panics with `"{what}: not within {within:?}"` otherwise.
pub fn wait_until(within: Duration, what: &str, cond: impl FnMut() -> bool) -> Duration {
    wait_until_every(within, Duration::from_millis(100), what, cond, String::new)
}

/// Waits until `cond` holds, asking every `every` for at most `within`; returns how long that
/// took (from the call). Panics with `"{what}: not within {within:?}"` and the diagnostics
/// `explain` gives at that moment (the state that did not change, a log tail) otherwise.
pub fn wait_until_every(
    within: Duration,
    every: Duration,
    what: &str,
    mut cond: impl FnMut() -> bool,
    explain: impl FnOnce() -> String,
) -> Duration {
    let started = Instant::now();
    while !cond() {
        if started.elapsed() >= within {
            let details = explain();
            let sep = if details.is_empty() { "" } else { "\n" };
            panic!("{what}: not within {within:?}{sep}{details}");
        }
        std::thread::sleep(every);
    }
    started.elapsed()
}
