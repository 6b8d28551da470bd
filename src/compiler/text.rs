//! Flows in exactly the text of `ovs-ofctl -O OpenFlow15 dump-flows --no-stats --names`
//! (tables by name, ports by name), for `npagent flows` and for comparing with a live bridge.
//! Covers the fields and actions npagent's pipeline uses.

use super::flow::FlowTable;
use super::tables;
use ofp::{Action, Instruction};
use std::collections::BTreeMap;
use std::fmt::Write;

/// One line per flow, sorted. `ports` names ofports (the bridge's interface names). Matches
/// and actions are printed by `ofp::text` (OVS's field order and syntax), ports by name as
/// `--names` does.
pub fn flows_text(flows: &FlowTable, ports: &BTreeMap<u32, String>) -> Vec<String> {
    let port_names = |o: u32| ports.get(&o).map(|n| port_name(n));
    let names = ofp::text::Names { tables: &names, ports: &port_names };
    let mut lines: Vec<String> = flows
        .iter()
        .map(|(k, v)| {
            let mut s = String::new();
            if v.cookie != 0 {
                let _ = write!(s, " cookie={:#x},", v.cookie);
            }
            let _ = write!(s, " table={}, ", table(k.table));
            s.push_str(&ofp::text::format_match_with(&k.match_, Some(k.priority), &names));
            s.push_str(" actions=");
            s.push_str(&format_instructions(&v.instructions, ports));
            s
        })
        .collect();
    lines.sort();
    lines
}

fn table(id: u8) -> String {
    tables::table_name(id).map(str::to_string).unwrap_or_else(|| id.to_string())
}

fn names(id: u8) -> Option<String> {
    tables::table_name(id).map(str::to_string)
}

/// Instructions as OVS prints them after `actions=`, output ports by name.
pub fn format_instructions(ins: &[Instruction], ports: &BTreeMap<u32, String>) -> String {
    let mut parts = Vec::new();
    for i in ins {
        match i {
            Instruction::ApplyActions(a) => parts.extend(a.iter().map(|a| format_action(a, ports))),
            other => parts.push(ofp::text::format_instructions(std::slice::from_ref(other), &names)),
        }
    }
    if parts.is_empty() { "drop".into() } else { parts.join(",") }
}

/// OVS prints a port name bare when it is a letter followed by letters and digits, else
/// quoted (checked against ovs-ofctl 3.1: `Pq`, `eth0` bare; `p_1`, `1a`, `a-x` quoted).
fn port_name(name: &str) -> String {
    let bare = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic()) && name.chars().all(|c| c.is_ascii_alphanumeric());
    if bare {
        name.to_string()
    } else {
        let mut s = String::from('"');
        for c in name.chars() {
            if c == '"' || c == '\\' {
                s.push('\\');
            }
            s.push(c);
        }
        s.push('"');
        s
    }
}

fn format_action(a: &Action, ports: &BTreeMap<u32, String>) -> String {
    match a {
        Action::Output { port, .. } => match ports.get(port) {
            Some(name) => format!("output:{}", port_name(name)),
            None => ofp::text::format_actions_with(std::slice::from_ref(a), &names),
        },
        other => ofp::text::format_actions_with(std::slice::from_ref(other), &names),
    }
}
