//! Desired versus installed flows: the minimal flow_mods.
//!
//! - a key only desired: ADD;
//! - a key on both sides with other instructions: MODIFY_STRICT (counters kept);
//! - a key on both sides with another cookie: ADD, which replaces the flow (OVS never changes
//!   a cookie on MODIFY);
//! - a key only installed: DELETE_STRICT (stale flows of an earlier run, or anyone's);
//! - equal flows: nothing.

use super::flow::{FlowKey, FlowTable, FlowValue};
use super::normalize::{normalize_instructions, normalize_match};
use ofp::{FlowMod, FlowModCommand, FlowStats};

/// The installed flow set from a flow dump, normalised like desired flows.
pub fn installed_from_stats(stats: &[FlowStats]) -> FlowTable {
    stats
        .iter()
        .map(|s| {
            (
                FlowKey { table: s.table_id, priority: s.priority, match_: normalize_match(&s.match_) },
                FlowValue { cookie: s.cookie, instructions: normalize_instructions(&s.instructions) },
            )
        })
        .collect()
}

/// All flow_mods that turn `installed` into `desired`: deletes, then modifies, then adds.
pub fn diff(desired: &FlowTable, installed: &FlowTable) -> Vec<FlowMod> {
    let keys = desired.keys().chain(installed.keys().filter(|k| !desired.contains_key(*k)));
    diff_keys(desired, installed, keys)
}

/// The flow_mods for `keys` only (those an incremental recompile reported).
pub fn diff_keys<'a>(
    desired: &FlowTable,
    installed: &FlowTable,
    keys: impl IntoIterator<Item = &'a FlowKey>,
) -> Vec<FlowMod> {
    let (mut deletes, mut modifies, mut adds) = (Vec::new(), Vec::new(), Vec::new());
    for k in keys {
        match (desired.get(k), installed.get(k)) {
            (Some(d), None) => adds.push(flow_mod(k, d, FlowModCommand::Add)),
            (Some(d), Some(i)) if d.cookie != i.cookie => adds.push(flow_mod(k, d, FlowModCommand::Add)),
            (Some(d), Some(i)) if normalize_instructions(&d.instructions) != i.instructions => {
                modifies.push(flow_mod(k, d, FlowModCommand::ModifyStrict))
            }
            (Some(_), Some(_)) | (None, None) => {}
            (None, Some(i)) => deletes.push(flow_mod(
                k,
                &FlowValue { cookie: i.cookie, instructions: vec![] },
                FlowModCommand::DeleteStrict,
            )),
        }
    }
    deletes.extend(modifies);
    deletes.extend(adds);
    deletes
}

/// The ADD that installs flow `k` with `v`.
pub(crate) fn desired_flow_mod(k: &FlowKey, v: &FlowValue) -> FlowMod {
    flow_mod(k, v, FlowModCommand::Add)
}

fn flow_mod(k: &FlowKey, v: &FlowValue, command: FlowModCommand) -> FlowMod {
    FlowMod {
        cookie: if command == FlowModCommand::Add { v.cookie } else { 0 },
        table_id: k.table,
        command,
        priority: k.priority,
        match_: k.match_.clone(),
        instructions: v.instructions.clone(),
        ..FlowMod::default()
    }
}

/// What the switch holds after it applied `mods` (OVS semantics for the strict commands and
/// ADD). The reconciler applies the mods of a committed bundle to its view of the switch.
pub fn apply(installed: &mut FlowTable, mods: &[FlowMod]) {
    for m in mods {
        let key = FlowKey { table: m.table_id, priority: m.priority, match_: normalize_match(&m.match_) };
        let instructions = normalize_instructions(&m.instructions);
        match m.command {
            FlowModCommand::Add => {
                installed.insert(key, FlowValue { cookie: m.cookie, instructions });
            }
            FlowModCommand::ModifyStrict => {
                if let Some(v) = installed.get_mut(&key) {
                    v.instructions = instructions;
                }
            }
            FlowModCommand::DeleteStrict => {
                installed.remove(&key);
            }
            _ => {}
        }
    }
}
