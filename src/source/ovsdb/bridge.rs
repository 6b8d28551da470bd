//! What npagent asks OVSDB of the bridge itself, outside the monitor: its datapath type.

use std::time::Duration;

use serde_json::{json, Value};

use super::rpc;
use crate::endpoint::Endpoint;

/// Bound on the transaction.
const ASK_WITHIN: Duration = Duration::from_secs(10);

/// The datapath type of OVS's userspace datapath.
pub const USERSPACE_DATAPATH: &str = "netdev";

/// `bridge`'s `datapath_type`: `netdev` for the userspace datapath; empty or `system` for the
/// kernel's. An error names the bridge.
pub async fn datapath_type(ovsdb: &Endpoint, bridge: &str) -> Result<String, String> {
    let params = json!(["Open_vSwitch",
        {"op": "select", "table": "Bridge", "where": [["name", "==", bridge]], "columns": ["datapath_type"]}]);
    let result = match tokio::time::timeout(ASK_WITHIN, rpc::call(ovsdb, "transact", params)).await {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => return Err(format!("read bridge {bridge}: {e}")),
        Err(_) => return Err(format!("read bridge {bridge}: no answer from {ovsdb} within {ASK_WITHIN:?}")),
    };
    let row = result
        .get(0)
        .and_then(|op| op.get("rows"))
        .and_then(Value::as_array)
        .and_then(|rows| rows.first())
        .ok_or_else(|| format!("bridge {bridge} does not exist"))?;
    Ok(row.get("datapath_type").and_then(Value::as_str).unwrap_or_default().to_string())
}
