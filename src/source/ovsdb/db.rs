//! The monitored part of the Open_vSwitch database, kept up to date from `update`
//! notifications, and the pod ports it describes.

use std::collections::{BTreeMap, HashMap};

use serde_json::{json, Value};

use crate::host::ovsdb::port_keys::{self, role};
use crate::host::ovsdb::value::{
    map_pairs, optional_string, parse_ip, parse_mac, set_items, string_map, uuid, uuid_set,
};
use crate::model::{LocalPort, NodePort, ObjectRef};

/// Columns npagent monitors, per table (the `monitor` request's third parameter).
pub fn monitor_requests() -> Value {
    json!({
        "Bridge": {"columns": ["name", "ports", "flow_tables", "fail_mode"]},
        "Port": {"columns": ["name", "interfaces", "external_ids"]},
        "Interface": {"columns": ["name", "ofport", "external_ids", "mac_in_use"]},
        "Flow_Table": {"columns": ["name"]},
    })
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Bridge {
    pub name: String,
    pub ports: Vec<String>,
    /// OpenFlow table id -> Flow_Table row uuid.
    pub flow_tables: BTreeMap<i64, String>,
    /// `secure` or `standalone`; `None` when unset (OVS then behaves as standalone).
    pub fail_mode: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Port {
    pub name: String,
    pub interfaces: Vec<String>,
    pub external_ids: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Interface {
    pub name: String,
    /// `None` while unassigned (empty set) or failed (-1 is kept as is).
    pub ofport: Option<i64>,
    pub external_ids: BTreeMap<String, String>,
    /// The MAC its network device uses, as OVS reads it from the device.
    pub mac_in_use: Option<String>,
}

/// The ports of a bridge by class: pods', the node's gateway, uplinks and tunnels. Every other
/// port (LOCAL, a port whose external_ids are not written yet, a stray veth) is in none and
/// gets no flows: it sends and receives nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BridgePorts {
    /// Sorted.
    pub pods: Vec<LocalPort>,
    /// The first gateway port by ofport, when there is one.
    pub gateway: Option<NodePort>,
    /// Sorted.
    pub uplinks: Vec<NodePort>,
}

/// Rows by uuid.
#[derive(Debug, Default)]
pub struct Db {
    pub bridges: HashMap<String, Bridge>,
    pub ports: HashMap<String, Port>,
    pub interfaces: HashMap<String, Interface>,
    /// Flow_Table uuid -> name.
    pub flow_tables: HashMap<String, Option<String>>,
}

impl Db {
    /// Applies a `<table-updates>` object (a monitor reply or an `update` notification).
    /// Rows that do not parse are dropped; the returned strings say which and why.
    pub fn apply(&mut self, updates: &Value) -> Vec<String> {
        let mut problems = Vec::new();
        let Some(tables) = updates.as_object() else {
            problems.push("table-updates is not an object".to_string());
            return problems;
        };
        for (table, rows) in tables {
            let Some(rows) = rows.as_object() else { continue };
            for (uuid, update) in rows {
                let new = update.get("new").filter(|v| v.is_object());
                let uuid = uuid.clone();
                match table.as_str() {
                    "Bridge" => upsert(&mut self.bridges, uuid, new.map(bridge), &mut problems),
                    "Port" => upsert(&mut self.ports, uuid, new.map(port), &mut problems),
                    "Interface" => upsert(&mut self.interfaces, uuid, new.map(interface), &mut problems),
                    "Flow_Table" => {
                        let name = new.map(|n| Ok(n.get("name").and_then(optional_string)));
                        upsert(&mut self.flow_tables, uuid, name, &mut problems)
                    }
                    _ => {}
                }
            }
        }
        problems
    }

    /// The bridge row named `name` and its uuid.
    pub fn bridge(&self, name: &str) -> Option<(&String, &Bridge)> {
        // Bridge names are unique (schema index), so the first match is the one.
        self.bridges.iter().find(|(_, b)| b.name == name)
    }

    /// The classified ports of bridge `bridge`, plus problems with their external_ids. A port
    /// is an uplink when its `antrea-type` says `uplink` or `tunnel`, or its interface is named
    /// in `uplink_names`.
    pub fn bridge_ports(&self, bridge: &str, uplink_names: &[String]) -> (BridgePorts, Vec<String>) {
        let mut out = BridgePorts::default();
        let mut gateways = Vec::new();
        let mut problems = Vec::new();
        let Some((_, br)) = self.bridge(bridge) else { return (out, problems) };
        for port in br.ports.iter().filter_map(|u| self.ports.get(u)) {
            for iface in port.interfaces.iter().filter_map(|u| self.interfaces.get(u)) {
                let get = |k: &str| iface.external_ids.get(k).or_else(|| port.external_ids.get(k)).map(String::as_str);
                match get(port_keys::ANTREA_TYPE) {
                    Some(role::GATEWAY) => gateways.extend(node_port(iface, &mut problems)),
                    Some(role::UPLINK | role::TUNNEL) => out.uplinks.extend(node_port(iface, &mut problems)),
                    _ if uplink_names.contains(&iface.name) => out.uplinks.extend(node_port(iface, &mut problems)),
                    _ => out.pods.extend(local_port(port, iface, &mut problems)),
                }
            }
        }
        out.pods.sort();
        out.pods.dedup();
        out.uplinks.sort();
        out.uplinks.dedup();
        gateways.sort();
        if gateways.len() > 1 {
            let names: Vec<&str> = gateways.iter().map(|g| g.interface.as_str()).collect();
            problems.push(format!(
                "{} ports are marked antrea-type=gateway ({}): using {}, the others get no flows",
                gateways.len(),
                names.join(", "),
                names[0]
            ));
        }
        out.gateway = gateways.into_iter().next();
        (out, problems)
    }
}

fn upsert<T>(map: &mut HashMap<String, T>, uuid: String, new: Option<Result<T, String>>, problems: &mut Vec<String>) {
    match new {
        None => {
            map.remove(&uuid);
        }
        Some(Ok(row)) => {
            map.insert(uuid, row);
        }
        Some(Err(e)) => {
            problems.push(format!("row {uuid}: {e}"));
            map.remove(&uuid);
        }
    }
}

/// Highest ofport of a physical/virtual port (OFPP_MAX - 1): above it are reserved ports.
const MAX_OFPORT: i64 = 0xfeff;

fn valid_ofport(iface: &Interface) -> Option<u32> {
    iface.ofport.filter(|p| (1..=MAX_OFPORT).contains(p)).and_then(|p| u32::try_from(p).ok())
}

fn node_port(iface: &Interface, problems: &mut Vec<String>) -> Option<NodePort> {
    let ofport = valid_ofport(iface)?;
    let mac = match iface.mac_in_use.as_deref().filter(|s| !s.is_empty()) {
        None => None,
        Some(s) => {
            let mac = parse_mac(s);
            if mac.is_none() {
                problems.push(format!("interface {}: mac_in_use {s:?} is not a MAC address", iface.name));
            }
            mac
        }
    };
    Some(NodePort { ofport, interface: iface.name.clone(), mac })
}

fn local_port(port: &Port, iface: &Interface, problems: &mut Vec<String>) -> Option<LocalPort> {
    // Interface keys take precedence; Port keys are the fallback.
    let get = |k: &str| iface.external_ids.get(k).or_else(|| port.external_ids.get(k)).map(String::as_str);
    let name = get(port_keys::POD_NAME).filter(|s| !s.is_empty())?;
    let namespace = get(port_keys::POD_NAMESPACE).filter(|s| !s.is_empty())?;
    let ofport = valid_ofport(iface)?;
    let who = format!("interface {} (pod {namespace}/{name})", iface.name);
    let mut ips = Vec::new();
    for token in get(port_keys::IP_ADDRESS).unwrap_or("").split(',').map(str::trim).filter(|t| !t.is_empty()) {
        match parse_ip(token) {
            Some(ip) => ips.push(ip),
            None => problems.push(format!("{who}: ip-address {token:?} is not an IP address")),
        }
    }
    ips.sort();
    ips.dedup();
    let mac = match get(port_keys::ATTACHED_MAC).filter(|s| !s.is_empty()) {
        None => None,
        Some(s) => {
            let mac = parse_mac(s);
            if mac.is_none() {
                problems.push(format!("{who}: attached-mac {s:?} is not a MAC address"));
            }
            mac
        }
    };
    Some(LocalPort {
        ofport,
        interface: iface.name.clone(),
        pod: ObjectRef { namespace: namespace.into(), name: name.into() },
        ips,
        mac,
    })
}

fn name(row: &Value) -> String {
    row.get("name").and_then(Value::as_str).unwrap_or("").to_string()
}

fn bridge(row: &Value) -> Result<Bridge, String> {
    let mut flow_tables = BTreeMap::new();
    if let Some(ft) = row.get("flow_tables") {
        for (k, v) in map_pairs(ft)? {
            let id = k.as_i64().ok_or_else(|| format!("flow_tables key {k}"))?;
            flow_tables.insert(id, uuid(v).ok_or_else(|| format!("flow_tables value {v}"))?);
        }
    }
    let fail_mode = row.get("fail_mode").and_then(optional_string);
    Ok(Bridge { name: name(row), ports: uuid_set(row.get("ports"))?, flow_tables, fail_mode })
}

fn port(row: &Value) -> Result<Port, String> {
    Ok(Port {
        name: name(row),
        interfaces: uuid_set(row.get("interfaces"))?,
        external_ids: string_map(row.get("external_ids"))?,
    })
}

fn interface(row: &Value) -> Result<Interface, String> {
    let ofport = row.get("ofport").and_then(|v| set_items(v).first().and_then(|p| p.as_i64()));
    let mac_in_use = row.get("mac_in_use").and_then(optional_string);
    Ok(Interface { name: name(row), ofport, external_ids: string_map(row.get("external_ids"))?, mac_in_use })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::IpAddr;

    fn ids(pairs: &[(&str, &str)]) -> Value {
        json!(["map", pairs.iter().map(|(k, v)| json!([k, v])).collect::<Vec<_>>()])
    }

    #[test]
    fn pod_ports_from_updates() {
        let mut db = Db::default();
        let initial = json!({
            "Bridge": {
                "b1": {"new": {"name": "br-int", "ports": ["set", [["uuid", "p1"], ["uuid", "p2"], ["uuid", "p3"]]], "flow_tables": ["map", []]}},
                "b2": {"new": {"name": "br-ex", "ports": ["uuid", "p4"], "flow_tables": ["map", []]}}
            },
            "Port": {
                "p1": {"new": {"name": "a", "interfaces": ["uuid", "i1"], "external_ids": ["map", []]}},
                "p2": {"new": {"name": "b", "interfaces": ["uuid", "i2"], "external_ids": ids(&[("pod-name", "b"), ("pod-namespace", "x")])}},
                "p3": {"new": {"name": "c", "interfaces": ["uuid", "i3"], "external_ids": ["map", []]}},
                "p4": {"new": {"name": "d", "interfaces": ["uuid", "i4"], "external_ids": ["map", []]}}
            },
            "Interface": {
                "i1": {"new": {"name": "a", "ofport": 5, "external_ids": ids(&[
                    ("pod-name", "a"), ("pod-namespace", "x"),
                    ("ip-address", "10.10.0.7/24, fd00::7/64,bogus"), ("attached-mac", "0A:00:00:00:00:07")])}},
                "i2": {"new": {"name": "b", "ofport": ["set", []], "external_ids": ["map", []]}},
                "i3": {"new": {"name": "c", "ofport": 3, "external_ids": ["map", []]}},
                "i4": {"new": {"name": "d", "ofport": 9, "external_ids": ids(&[("pod-name", "d"), ("pod-namespace", "x")])}}
            }
        });
        assert!(db.apply(&initial).is_empty());
        let (ports, problems) = db.bridge_ports("br-int", &[]);
        let ports = ports.pods;
        assert_eq!(ports.len(), 1, "{ports:?}"); // b has no ofport yet, c is no pod, d is elsewhere
        let a = &ports[0];
        assert_eq!((a.ofport, a.interface.as_str(), a.pod.to_string()), (5, "a", "x/a".to_string()));
        assert_eq!(a.ips, vec!["10.10.0.7".parse::<IpAddr>().unwrap(), "fd00::7".parse().unwrap()]);
        assert_eq!(a.mac, Some([0x0a, 0, 0, 0, 0, 7]));
        assert_eq!(problems.len(), 1);
        assert!(problems[0].contains("bogus"), "{problems:?}");

        // b gets its ofport (keys on the Port row), a goes away, then -1 (failed) is skipped.
        db.apply(&json!({"Interface": {
            "i2": {"new": {"name": "b", "ofport": 6, "external_ids": ["map", []]}, "old": {"ofport": ["set", []]}},
            "i1": {"old": {"name": "a"}}
        }}));
        let ports = db.bridge_ports("br-int", &[]).0.pods;
        let got: Vec<(u32, String)> = ports.iter().map(|p| (p.ofport, p.pod.to_string())).collect();
        assert_eq!(got, vec![(6, "x/b".to_string())]);
        db.apply(&json!({"Interface": {"i2": {"new": {"name": "b", "ofport": -1, "external_ids": ["map", []]}}}}));
        assert!(db.bridge_ports("br-int", &[]).0.pods.is_empty());
    }

    #[test]
    fn ports_are_classified_by_their_external_ids_or_the_uplink_flag() {
        let mut db = Db::default();
        let iface = |name: &str, ofport: i64, mac: &str, ids: Value| json!({"new": {"name": name, "ofport": ofport, "external_ids": ids, "mac_in_use": mac}});
        let port = |name: &str, iface: &str, ids: Value| json!({"new": {"name": name, "interfaces": ["uuid", iface], "external_ids": ids}});
        let none = || json!(["map", []]);
        let update = json!({
            "Bridge": {"b": {"new": {"name": "br-int", "flow_tables": ["map", []], "ports": ["set", [
                ["uuid", "p1"], ["uuid", "p2"], ["uuid", "p3"], ["uuid", "p4"], ["uuid", "p5"], ["uuid", "p6"]]]}}},
            "Port": {
                "p1": port("gw0", "i1", ids(&[("antrea-type", "gateway")])),
                "p2": port("eth1", "i2", none()),
                "p3": port("tun0", "i3", none()),
                "p4": port("a", "i4", none()),
                "p5": port("stray", "i5", none()),
                "p6": port("gw1", "i6", none()),
            },
            "Interface": {
                "i1": iface("gw0", 32769, "0a:00:00:00:00:fe", none()),
                "i2": iface("eth1", 7, "0a:00:00:00:00:07", none()),
                "i3": iface("tun0", 8, "", ids(&[("antrea-type", "tunnel")])),
                "i4": iface("a", 1, "", ids(&[("pod-name", "a"), ("pod-namespace", "x"), ("ip-address", "10.0.0.1")])),
                "i5": iface("stray", 9, "0a:00:00:00:00:09", none()),
                "i6": iface("gw1", 40000, "bad", ids(&[("antrea-type", "gateway")])),
            }
        });
        assert!(db.apply(&update).is_empty());
        let (ports, problems) = db.bridge_ports("br-int", &["eth1".to_string()]);
        // The gateway with the lowest ofport; the second one is named in a problem.
        let gw = ports.gateway.expect("a gateway");
        assert_eq!((gw.ofport, gw.interface.as_str(), gw.mac), (32769, "gw0", Some([0x0a, 0, 0, 0, 0, 0xfe])));
        assert!(
            problems.iter().any(|p| p.contains("2 ports are marked antrea-type=gateway") && p.contains("gw1")),
            "{problems:?}"
        );
        assert!(problems.iter().any(|p| p.contains("mac_in_use \"bad\"")), "{problems:?}");
        // An uplink by flag, a tunnel by its external_ids; the stray is in no class.
        let uplinks: Vec<(u32, &str)> = ports.uplinks.iter().map(|u| (u.ofport, u.interface.as_str())).collect();
        assert_eq!(uplinks, vec![(7, "eth1"), (8, "tun0")]);
        let pods: Vec<u32> = ports.pods.iter().map(|p| p.ofport).collect();
        assert_eq!(pods, vec![1]);
    }

    #[test]
    fn malformed_rows_are_reported_and_dropped() {
        let mut db = Db::default();
        let problems = db.apply(&json!({"Port": {"p": {"new": {"name": "p", "interfaces": ["uuid", 7]}}}}));
        assert_eq!(problems.len(), 1);
        assert!(db.ports.is_empty());
        assert!(!db.apply(&json!([1, 2])).is_empty());
    }
}
