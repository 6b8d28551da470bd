//! The bridge's `fail_mode`. With `standalone` (or unset, which OVS treats the same) the
//! bridge falls back to NORMAL switching whenever its controller is away, which forwards
//! around every policy; `secure` keeps the installed flows and nothing else. npagent
//! needs `secure`: it sets it once per OVSDB connection when the bridge shows up otherwise,
//! and says so (an operator who switches back later is not fought).

use serde_json::{json, Value};

use super::db::Db;

/// The mode npagent wants.
pub const SECURE: &str = "secure";

/// The bridge's current mode (`None`: unset) and the `transact` operations that make it
/// `secure`, when it is not; `None` when it already is or the bridge does not exist yet.
pub fn secure_ops(db: &Db, bridge: &str) -> Option<(Option<String>, Vec<Value>)> {
    let (uuid, br) = db.bridge(bridge)?;
    if br.fail_mode.as_deref() == Some(SECURE) {
        return None;
    }
    let op = json!({
        "op": "update", "table": "Bridge",
        "where": [["_uuid", "==", ["uuid", uuid]]],
        "row": {"fail_mode": SECURE},
    });
    Some((br.fail_mode.clone(), vec![op]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db(fail_mode: Value) -> Db {
        let mut db = Db::default();
        let problems = db.apply(&json!({
            "Bridge": {"b": {"new": {"name": "br-int", "ports": ["set", []], "flow_tables": ["map", []], "fail_mode": fail_mode}}},
        }));
        assert!(problems.is_empty(), "{problems:?}");
        db
    }

    #[test]
    fn standalone_and_unset_become_secure_and_secure_stays() {
        let (current, ops) = secure_ops(&db(json!("standalone")), "br-int").expect("ops");
        assert_eq!(current.as_deref(), Some("standalone"));
        assert_eq!(
            ops,
            vec![
                json!({"op": "update", "table": "Bridge", "where": [["_uuid", "==", ["uuid", "b"]]], "row": {"fail_mode": "secure"}})
            ]
        );
        let (current, _) = secure_ops(&db(json!(["set", []])), "br-int").expect("ops");
        assert_eq!(current, None);
        assert_eq!(secure_ops(&db(json!("secure")), "br-int"), None);
        assert_eq!(secure_ops(&db(json!("secure")), "br-other"), None);
    }
}
