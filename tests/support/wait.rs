//! Polling until something holds, with a deadline, and a panic that says what did not
//! happen in time.

use std::process::{Child, ExitStatus};
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

/// Waits at most `within` for `child` to exit: its exit status, or None when it did not exit in
/// time, and then it is killed (SIGKILL) and reaped.
pub fn exit_within(child: &mut Child, within: Duration) -> Option<ExitStatus> {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return Some(status);
        }
        if started.elapsed() > within {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
