//! A pod's port on the bridge, in OVSDB: created with every `external_ids` key the agent reads
//! (Antrea's: `antrea-type=container`, `container-id`, `pod-name`, `pod-namespace`,
//! `ip-address`, `attached-mac`, `if-dev`, `net-ns`) on both the Port and the Interface, in
//! the one transaction that creates it, so that no moment exists in which the port is on the
//! bridge without saying whose it is. Removed by name; listed by the `antrea-type` mark.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::spec::AttachmentId;
use crate::endpoint::Endpoint;
use crate::host::ovsdb::port_keys::{self, role};
use crate::host::ovsdb::transact::{self, rows, transact};
use crate::host::ovsdb::{value, Error};

/// A pod port of the bridge as OVSDB has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortRecord {
    /// The Port's (and its Interface's) name: the node's end of the veth.
    pub name: String,
    pub external_ids: BTreeMap<String, String>,
}

impl PortRecord {
    /// The value of `key`, or "".
    pub fn get(&self, key: &str) -> &str {
        self.external_ids.get(key).map(String::as_str).unwrap_or_default()
    }

    /// The attachment the port says it was made for (`container-id`, `if-dev`).
    pub fn attachment(&self) -> AttachmentId {
        AttachmentId::new(self.get(port_keys::CONTAINER_ID), self.get(port_keys::IF_DEV))
    }

    /// Whether this is the port `host` that attachment `id` made: named so, and made for its
    /// container.
    pub fn is_of(&self, host: &str, id: &AttachmentId) -> bool {
        self.name == host && self.get(port_keys::CONTAINER_ID) == id.container_id
    }
}

/// The `transact` parameters that put port `name` on `bridge` with `ids` on its Port and
/// Interface.
pub fn add_params(bridge: &str, name: &str, ids: &BTreeMap<String, String>) -> Value {
    let ids = json!(["map", ids.iter().map(|(k, v)| json!([k, v])).collect::<Vec<_>>()]);
    json!([
        "Open_vSwitch",
        {"op": "insert", "table": "Interface", "uuid-name": "pod_interface", "row": {"name": name, "external_ids": ids}},
        {"op": "insert", "table": "Port", "uuid-name": "pod_port",
         "row": {"name": name, "interfaces": ["named-uuid", "pod_interface"], "external_ids": ids}},
        {"op": "mutate", "table": "Bridge", "where": [["name", "==", bridge]],
         "mutations": [["ports", "insert", ["set", [["named-uuid", "pod_port"]]]]]},
    ])
}

/// Creates port `name` on `bridge` with `ids`.
pub async fn add(ovsdb: &Endpoint, bridge: &str, name: &str, ids: &BTreeMap<String, String>) -> Result<(), Error> {
    let what = format!("add port {name}");
    let result = transact(ovsdb, add_params(bridge, name, ids), &what).await?;
    let errors = transact::errors(&result);
    if !errors.is_empty() {
        return Err(Error::Refused { what: format!("{what} to bridge {bridge}"), errors });
    }
    match result.get(2).and_then(|op| op.get("count")).and_then(Value::as_u64) {
        Some(0) => Err(Error::NoBridge(bridge.to_string()).during(what)),
        _ => Ok(()),
    }
}

/// Removes port `name` from `bridge` (OVSDB then drops the Port and its Interface); a port
/// that is not there is no error.
pub async fn remove(ovsdb: &Endpoint, bridge: &str, name: &str) -> Result<(), Error> {
    let select = json!(["Open_vSwitch", {"op": "select", "table": "Port", "where": [["name", "==", name]], "columns": ["_uuid"]}]);
    let found = transact(ovsdb, select, &format!("find port {name}")).await?;
    let uuids: Vec<Value> = rows(&found, 0).iter().filter_map(|r| r.get("_uuid").cloned()).collect();
    if uuids.is_empty() {
        return Ok(());
    }
    let params = json!(["Open_vSwitch", {"op": "mutate", "table": "Bridge", "where": [["name", "==", bridge]],
        "mutations": [["ports", "delete", ["set", uuids]]]}]);
    let what = format!("remove port {name}");
    let result = transact(ovsdb, params, &what).await?;
    let errors = transact::errors(&result);
    match errors.is_empty() {
        true => Ok(()),
        false => Err(Error::Refused { what: format!("{what} from bridge {bridge}"), errors }),
    }
}

/// The pod ports of `bridge` (ports marked `antrea-type=container`).
pub async fn list(ovsdb: &Endpoint, bridge: &str) -> Result<Vec<PortRecord>, Error> {
    let params = json!([
        "Open_vSwitch",
        {"op": "select", "table": "Bridge", "where": [["name", "==", bridge]], "columns": ["ports"]},
        {"op": "select", "table": "Port",
         "where": [["external_ids", "includes", ["map", [[port_keys::ANTREA_TYPE, role::CONTAINER]]]]],
         "columns": ["_uuid", "name", "external_ids"]},
    ]);
    let result = transact(ovsdb, params, "list pod ports").await?;
    let on_bridge: Vec<String> =
        rows(&result, 0).iter().flat_map(|b| value::uuid_set(b.get("ports")).unwrap_or_default()).collect();
    let mut out = Vec::new();
    for row in rows(&result, 1) {
        let Some(uuid) = row.get("_uuid").and_then(value::uuid) else { continue };
        if !on_bridge.contains(&uuid) {
            continue;
        }
        let name = row.get("name").and_then(Value::as_str).unwrap_or_default().to_string();
        let external_ids = value::string_map(row.get("external_ids"))
            .map_err(|error| Error::Malformed { row: format!("port {name}"), error })?;
        out.push(PortRecord { name, external_ids });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_port_and_its_interface_carry_the_ids_in_one_transaction() {
        let ids: BTreeMap<String, String> =
            [("pod-name", "a"), ("container-id", "c1")].iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let p = add_params("br-int", "a-123456", &ids);
        let want = json!(["map", [["container-id", "c1"], ["pod-name", "a"]]]);
        assert_eq!(p[1]["row"]["external_ids"], want);
        assert_eq!(p[2]["row"]["external_ids"], want);
        assert_eq!(p[3]["where"], json!([["name", "==", "br-int"]]));
    }
}
