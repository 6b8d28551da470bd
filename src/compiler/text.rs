//! Flows in exactly the text of `ovs-ofctl -O OpenFlow15 dump-flows --no-stats --names`
//! (tables by name, ports by name), for `npagent flows` and for comparing with a live bridge.
//! The printer is proto's (`ofp::text`); this names npagent's tables and the bridge's ports.

use super::diff::desired_flow_mod;
use super::flow::FlowTable;
use super::tables;
use std::collections::BTreeMap;

/// One line per flow, sorted. `ports` names ofports (the bridge's interface names).
pub fn flows_text(flows: &FlowTable, ports: &BTreeMap<u32, String>) -> Vec<String> {
    let port_names = |o: u32| ports.get(&o).cloned();
    let table_names = |id: u8| tables::table_name(id).map(str::to_string);
    let names = ofp::text::Names { tables: &table_names, ports: &port_names };
    let mut lines: Vec<String> =
        flows.iter().map(|(k, v)| ofp::text::format_desired_flow(&names, &desired_flow_mod(k, v))).collect();
    lines.sort();
    lines
}
