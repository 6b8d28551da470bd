//! Names of OpenFlow tables through OVSDB: `Flow_Table` rows referenced from
//! `Bridge.flow_tables`, so that `ovs-ofctl dump-flows --names` prints `table=IngressRule`.
//!
//! Idempotent and conservative: a table id that already has a Flow_Table row gets its `name`
//! updated in place (its other columns, e.g. a flow limit someone set, stay); a table id
//! without one gets a new row. Entries for table ids npagent does not name are left alone, and
//! nothing is ever removed (a name of a table npagent stopped using stays until an operator
//! clears it).

use serde_json::{json, Value};

use super::db::Db;

/// The `transact` operations that make the names of `bridge` match `names`, or `None` when
/// they already do (or the bridge does not exist yet).
pub fn name_ops(db: &Db, bridge: &str, names: &[(u8, String)]) -> Option<Vec<Value>> {
    let (bridge_uuid, br) = db.bridge(bridge)?;
    let mut ops = Vec::new();
    let mut new_entries = Vec::new();
    for (id, name) in names {
        match br.flow_tables.get(&i64::from(*id)) {
            Some(row) => {
                let current = db.flow_tables.get(row).cloned().flatten();
                if current.as_deref() != Some(name.as_str()) {
                    ops.push(json!({
                        "op": "update", "table": "Flow_Table",
                        "where": [["_uuid", "==", ["uuid", row]]],
                        "row": {"name": name},
                    }));
                }
            }
            None => {
                let row_name = format!("npagent_table{id}");
                ops.push(json!({
                    "op": "insert", "table": "Flow_Table",
                    "row": {"name": name}, "uuid-name": row_name,
                }));
                new_entries.push(json!([id, ["named-uuid", row_name]]));
            }
        }
    }
    if !new_entries.is_empty() {
        // `insert` into a map ignores keys already present, so a concurrent writer cannot
        // be overwritten; an unreferenced new row is garbage-collected by ovsdb-server.
        ops.push(json!({
            "op": "mutate", "table": "Bridge",
            "where": [["_uuid", "==", ["uuid", bridge_uuid]]],
            "mutations": [["flow_tables", "insert", ["map", new_entries]]],
        }));
    }
    (!ops.is_empty()).then_some(ops)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db(flow_tables: Value, rows: Value) -> Db {
        let mut db = Db::default();
        let problems = db.apply(&json!({
            "Bridge": {"b": {"new": {"name": "br-int", "ports": ["set", []], "flow_tables": flow_tables}}},
            "Flow_Table": rows,
        }));
        assert!(problems.is_empty(), "{problems:?}");
        db
    }

    #[test]
    fn inserts_missing_updates_renamed_and_stops_when_done() {
        let names = vec![(0, "Classifier".to_string()), (3, "IngressRule".to_string())];
        let d = db(json!(["map", []]), json!({}));
        let ops = name_ops(&d, "br-int", &names).expect("ops");
        assert_eq!(ops.len(), 3);
        assert_eq!(
            ops[2]["mutations"][0][2],
            json!(["map", [[0, ["named-uuid", "npagent_table0"]], [3, ["named-uuid", "npagent_table3"]]]])
        );

        let d = db(
            json!(["map", [[0, ["uuid", "f0"]], [3, ["uuid", "f3"]], [7, ["uuid", "f7"]]]]),
            json!({"f0": {"new": {"name": "Classifier"}}, "f3": {"new": {"name": ["set", []]}}, "f7": {"new": {"name": "theirs"}}}),
        );
        let ops = name_ops(&d, "br-int", &names).expect("ops");
        assert_eq!(
            ops,
            vec![
                json!({"op": "update", "table": "Flow_Table", "where": [["_uuid", "==", ["uuid", "f3"]]], "row": {"name": "IngressRule"}})
            ]
        );

        let d = db(
            json!(["map", [[0, ["uuid", "f0"]], [3, ["uuid", "f3"]]]]),
            json!({"f0": {"new": {"name": "Classifier"}}, "f3": {"new": {"name": "IngressRule"}}}),
        );
        assert_eq!(name_ops(&d, "br-int", &names), None);
        assert_eq!(name_ops(&d, "br-other", &names), None);
    }
}
