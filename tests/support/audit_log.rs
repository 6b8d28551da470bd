//! Reading a JSON audit log (`--audit-format json`) while npagent writes it.

use serde_json::Value;
use std::path::Path;
use std::time::{Duration, Instant};

/// Every line of the log so far, parsed; panics on a line that is not JSON.
pub fn json_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// The first line after the first `skip` that `pred` accepts, waiting up to `within`; panics
/// with the log, saying that no `what` came.
pub fn wait_json_line(path: &Path, skip: usize, within: Duration, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let start = Instant::now();
    loop {
        if let Some(l) = json_lines(path).into_iter().skip(skip).find(&pred) {
            return l;
        }
        assert!(start.elapsed() < within, "no {what} within {within:?}:\n{:#?}", json_lines(path));
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `namespace/pod` of a JSON pod reference (`applied_to`, `pod` of a gap), `None` for null.
pub fn pod_id(v: &Value) -> Option<String> {
    let (ns, name) = (v["namespace"].as_str()?, v.get("pod").or_else(|| v.get("name"))?.as_str()?);
    Some(format!("{ns}/{name}"))
}
