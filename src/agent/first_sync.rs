//! The line the agent logs when its first sync completes (the first resync committed): what
//! it enforces, how long it took from the start, and the process's peak memory.

use super::State;
use std::time::Duration;

/// "first sync complete in 1.234s: 3 namespaces, 9 pods, 2 policies, 9 local ports, 57
/// flows; peak memory (VmHWM) 21.3 MiB", from `state`, the time since the start and
/// `/proc/self/status`'s text (`None` when it cannot be read).
pub fn summary(state: &State, since_start: Duration, proc_status: Option<&str>) -> String {
    let model = state.store.model();
    let flows = state.compiler.as_ref().map_or(0, |c| c.flows().len());
    let memory = match proc_status.and_then(vm_hwm_kib) {
        Some(kib) => format!("{:.1} MiB", kib as f64 / 1024.0),
        None => "unknown".to_owned(),
    };
    format!(
        "first sync complete in {:.3}s: {} namespaces, {} pods, {} policies, {} local ports, {flows} flows; peak memory (VmHWM) {memory}",
        since_start.as_secs_f64(),
        model.namespaces.len(),
        model.pods.len(),
        model.policies.len(),
        model.ports.len(),
    )
}

/// The `VmHWM` (peak resident set) of a `/proc/<pid>/status` text, in KiB.
fn vm_hwm_kib(status: &str) -> Option<u64> {
    let line = status.lines().find_map(|l| l.strip_prefix("VmHWM:"))?;
    line.trim().strip_suffix("kB")?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_peak_resident_set() {
        let status = "Name:\tnpagent\nVmPeak:\t  300000 kB\nVmHWM:\t   21812 kB\nVmRSS:\t   20000 kB\n";
        assert_eq!(vm_hwm_kib(status), Some(21812));
        assert_eq!(vm_hwm_kib("VmRSS:\t 1 kB\n"), None);
        assert_eq!(vm_hwm_kib("VmHWM:\t lots\n"), None);
    }

    #[test]
    fn the_summary_says_counts_time_and_memory() {
        let line = summary(&State::default(), Duration::from_millis(1500), Some("VmHWM:\t 2048 kB\n"));
        assert_eq!(
            line,
            "first sync complete in 1.500s: 0 namespaces, 0 pods, 0 policies, 0 local ports, 0 flows; peak memory (VmHWM) 2.0 MiB"
        );
        assert!(summary(&State::default(), Duration::ZERO, None).ends_with("peak memory (VmHWM) unknown"));
    }
}
