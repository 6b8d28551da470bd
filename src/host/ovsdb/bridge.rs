//! What npagent asks OVSDB of the bridge itself, outside the monitor: its datapath type.

use serde_json::{json, Value};

use super::transact::{rows, transact};
use super::Error;
use crate::endpoint::Endpoint;

/// The datapath type of OVS's userspace datapath.
pub const USERSPACE_DATAPATH: &str = "netdev";

/// `bridge`'s `datapath_type`: `netdev` for the userspace datapath; empty or `system` for the
/// kernel's. An error names the bridge.
pub async fn datapath_type(ovsdb: &Endpoint, bridge: &str) -> Result<String, Error> {
    let params = json!(["Open_vSwitch",
        {"op": "select", "table": "Bridge", "where": [["name", "==", bridge]], "columns": ["datapath_type"]}]);
    let result = transact(ovsdb, params, &format!("read bridge {bridge}")).await?;
    let row = rows(&result, 0).first().ok_or_else(|| Error::NoBridge(bridge.to_string()))?;
    Ok(row.get("datapath_type").and_then(Value::as_str).unwrap_or_default().to_string())
}
