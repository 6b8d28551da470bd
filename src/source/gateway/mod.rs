//! The node's gateway port: adopted when the bridge has one, created when it has none.
//!
//! A port marked `external_ids:antrea-type=gateway` ([`super::ovsdb::db`]) is adopted as it
//! is: the addresses its device holds ([`addrs`]) are the gateway's when none are
//! configured; a configured address the device does not hold, or a device address not
//! configured, is a warning naming both (the configured ones are used). npagent never changes
//! or re-creates a gateway it did not create. When the bridge has no gateway, a name to create
//! one under is given (`--gateway`, default `antrea-gw0`) and the gateway has an address
//! (`--gateway-ip`, or in kube mode the first address of the Node's podCIDR), npagent creates
//! it as Antrea does: an OVS internal port (`ofport_request` 32769) marked
//! `antrea-type=gateway`, in one OVSDB transaction that fails when a gateway appeared
//! meanwhile. Once ovs-vswitchd has made its device, npagent adds the addresses and brings it
//! up through netlink ([`crate::host::netlink::link`]). Its MAC is the one the device got, as
//! OVSDB reports it (`mac_in_use`), never chosen. Failures are logged naming the port and retried with backoff;
//! the pipeline serves what is valid meanwhile (a gateway without a MAC gets no flows).

pub mod addrs;

use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::watch;
use tokio::time::Instant;

use super::ovsdb::db::BridgePorts;
use crate::endpoint::Endpoint;
use crate::host::netlink::ethtool;
use crate::host::netlink::link::{LinkError, Netlink};
use crate::host::ovsdb::port_keys::{self, role};
use crate::host::ovsdb::transact::{self, transact};
use crate::host::ovsdb::{bridge, value};
use crate::model::node::{InterfaceAddr, NodeConfig};
use crate::model::NodePort;
use addrs::DeviceAddrs;

/// The ofport Antrea's gateway asks for.
pub const OFPORT_REQUEST: i64 = 32769;
/// How long a created port may take to show up with an ofport before creation is tried again
/// (which then fails naming the port that did not come up).
const SHOW_UP_WITHIN: Duration = Duration::from_secs(10);
const MIN_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// The `transact` parameters that create gateway port `name` on `bridge`: a wait that no
/// port or interface is marked as a gateway yet, the Interface (internal), the Port, and the
/// Bridge's reference to it.
pub fn create_params(bridge: &str, name: &str) -> Value {
    let gateway = json!(["map", [[port_keys::ANTREA_TYPE, role::GATEWAY]]]);
    let none_marked = |table: &str| {
        json!({
            "op": "wait", "table": table, "timeout": 0,
            "where": [["external_ids", "includes", gateway]],
            "columns": ["name"], "until": "==", "rows": [],
        })
    };
    json!([
        "Open_vSwitch",
        none_marked("Port"),
        none_marked("Interface"),
        {
            "op": "insert", "table": "Interface", "uuid-name": "gateway_interface",
            "row": {"name": name, "type": "internal", "ofport_request": OFPORT_REQUEST, "external_ids": gateway},
        },
        {
            "op": "insert", "table": "Port", "uuid-name": "gateway_port",
            "row": {"name": name, "interfaces": ["named-uuid", "gateway_interface"], "external_ids": gateway},
        },
        {
            "op": "mutate", "table": "Bridge",
            "where": [["name", "==", bridge]],
            "mutations": [["ports", "insert", ["set", [["named-uuid", "gateway_port"]]]]],
        },
    ])
}

/// What the reply to [`create_params`] says: done, or why not.
pub fn create_outcome(bridge: &str, result: &Value) -> Result<(), String> {
    let ops = result.as_array().map(Vec::as_slice).unwrap_or_default();
    let waited = |i: usize| ops.get(i).and_then(|op| op.get("error")).is_some_and(|e| e == "timed out");
    if waited(0) || waited(1) {
        return Err(
            "a port or interface marked antrea-type=gateway exists already (it is adopted once OVS gives it an ofport)"
                .into(),
        );
    }
    let errors = transact::errors(result);
    if !errors.is_empty() {
        return Err(errors.join("; "));
    }
    match ops.get(4).and_then(|op| op.get("count")).and_then(Value::as_u64) {
        Some(0) => Err(format!("bridge {bridge} does not exist")),
        _ => Ok(()),
    }
}

/// What the gateway task is told.
#[derive(Debug, Clone)]
pub struct GatewaySpec {
    pub ovsdb: Endpoint,
    pub bridge: String,
    /// The port to create when the bridge has no gateway (`--gateway`); `None`: create none.
    pub create: Option<String>,
}

/// Adopts or creates the gateway of `spec.bridge` as `ports` (OVSDB's classified ports),
/// `config` (the gateway's configured addresses) and `device` (the addresses the gateway's
/// device holds) change, until one of the channels closes.
pub async fn run_gateway(
    spec: GatewaySpec,
    mut ports: watch::Receiver<BridgePorts>,
    mut config: watch::Receiver<NodeConfig>,
    mut device: watch::Receiver<DeviceAddrs>,
) {
    // Nothing is known of the bridge before OVSDB's first answer.
    if ports.changed().await.is_err() {
        return;
    }
    let mut gateway = Gateway::new(spec);
    loop {
        let port = ports.borrow_and_update().gateway.clone();
        let addrs = config.borrow_and_update().gateway_addrs.clone();
        let held = device.borrow_and_update().clone();
        let retry = gateway.step(port.as_ref(), &addrs, &held).await;
        tokio::select! {
            changed = ports.changed() => if changed.is_err() { return },
            changed = config.changed() => if changed.is_err() { return },
            changed = device.changed() => if changed.is_err() { return },
            _ = tokio::time::sleep_until(retry.unwrap_or_else(Instant::now)), if retry.is_some() => {}
        }
    }
}

/// The gateway task's state.
struct Gateway {
    spec: GatewaySpec,
    /// The device this run created: npagent keeps its addresses.
    created: Option<String>,
    /// The gateway, its configured addresses and its device's, as last acted on.
    settled: Option<(NodePort, Vec<InterfaceAddr>, DeviceAddrs)>,
    /// No creation before this (a created port showing up, or backoff after a failure).
    not_before: Option<Instant>,
    backoff: Duration,
    /// The last thing said, so that a state is described once, not at every change.
    said: Option<String>,
}

impl Gateway {
    fn new(spec: GatewaySpec) -> Gateway {
        Gateway { spec, created: None, settled: None, not_before: None, backoff: MIN_BACKOFF, said: None }
    }

    /// Acts on the current gateway port, its configured addresses and its device's (`held`);
    /// returns when to look again without a change (a retry).
    async fn step(&mut self, port: Option<&NodePort>, addrs: &[InterfaceAddr], held: &DeviceAddrs) -> Option<Instant> {
        match port {
            Some(port) => {
                self.not_before = None;
                self.backoff = MIN_BACKOFF;
                if self.settled.as_ref().is_some_and(|(p, a, h)| p == port && a == addrs && h == held) {
                    return None;
                }
                if self.created.as_deref() == Some(port.interface.as_str()) {
                    self.configure(port, addrs, held).await
                } else {
                    self.adopt(port, addrs, held);
                    None
                }
            }
            None => {
                self.settled = None;
                self.create(addrs).await
            }
        }
    }

    /// Says which addresses an adopted gateway has: the configured ones (`addrs`), or when
    /// there are none, those its device holds; warns when the two disagree. Changes nothing.
    fn adopt(&mut self, port: &NodePort, addrs: &[InterfaceAddr], held: &DeviceAddrs) {
        let name = &port.interface;
        let what = format!("gateway {name} (ofport {}) adopted", port.ofport);
        let configured = "--gateway-ip, or in kube mode the Node's podCIDR";
        let (level, message) = match (held, addrs.is_empty()) {
            (DeviceAddrs::Unreadable { name: n, error }, no_config) if n == name => {
                let using = match no_config {
                    true => format!("the gateway has no address ({configured})"),
                    false => format!("its configured addresses {} are used", list(addrs)),
                };
                (tracing::Level::WARN, format!("{what}; its addresses cannot be read: {error}; {using}"))
            }
            _ => match held.held_by(name) {
                // Not read yet: said once the device is.
                None => return,
                Some([]) if addrs.is_empty() => (
                    tracing::Level::INFO,
                    format!("{what}; its device holds no address and none is configured ({configured}): the gateway has none"),
                ),
                Some(device) if addrs.is_empty() => (
                    tracing::Level::INFO,
                    format!("{what}, holding {}: the gateway's addresses, read from its device ({configured} configures none)", list(device)),
                ),
                Some(device) if same_ips(addrs, device) => {
                    (tracing::Level::INFO, format!("{what}, holding {}", list(addrs)))
                }
                Some(device) => (
                    tracing::Level::WARN,
                    format!(
                        "{what}, but its device holds {}, not the configured gateway address {} ({configured}): the configured one is used; npagent changes no gateway it did not create, so connections from a configured address through it fail until the node's stack holds it",
                        list(device),
                        list(addrs)
                    ),
                ),
            },
        };
        self.say(level, message);
        self.settled = Some((port.clone(), addrs.to_vec(), held.clone()));
    }

    /// Gives a gateway this run created its addresses (and, on the userspace datapath, its
    /// own checksums) and brings it up.
    async fn configure(&mut self, port: &NodePort, addrs: &[InterfaceAddr], held: &DeviceAddrs) -> Option<Instant> {
        let name = &port.interface;
        let configured = async {
            let datapath =
                bridge::datapath_type(&self.spec.ovsdb, &self.spec.bridge).await.map_err(|e| e.to_string())?;
            if datapath == bridge::USERSPACE_DATAPATH {
                let device = name.clone();
                tokio::task::spawn_blocking(move || ethtool::tx_checksums_off(&device))
                    .await
                    .map_err(|e| e.to_string())?
                    .map_err(|e| e.to_string())?;
            }
            configure_device(name, addrs).await.map_err(|e| e.to_string())
        };
        match configured.await {
            Ok(()) => {
                let mac = port.mac.map(|m| format!(", MAC {}", value::format_mac(m))).unwrap_or_default();
                self.say(
                    tracing::Level::INFO,
                    format!("gateway {name} created (ofport {}{mac}) with {}, up", port.ofport, list(addrs)),
                );
                self.settled = Some((port.clone(), addrs.to_vec(), held.clone()));
                self.backoff = MIN_BACKOFF;
                None
            }
            Err(e) => {
                self.say(tracing::Level::ERROR, format!("gateway {name} created, but not configured: {e}; retrying"));
                Some(self.back_off())
            }
        }
    }

    /// Creates the gateway port when there is none and it may be.
    async fn create(&mut self, addrs: &[InterfaceAddr]) -> Option<Instant> {
        let bridge = self.spec.bridge.clone();
        let Some(name) = self.spec.create.clone() else {
            self.say(
                tracing::Level::INFO,
                format!("bridge {bridge} has no gateway port and --gateway is empty: creating none"),
            );
            return None;
        };
        if addrs.is_empty() {
            self.say(
                tracing::Level::INFO,
                format!("bridge {bridge} has no gateway port and the gateway no address (--gateway-ip, or in kube mode the Node's podCIDR): creating none"),
            );
            return None;
        }
        if let Some(t) = self.not_before.filter(|t| *t > Instant::now()) {
            return Some(t);
        }
        let outcome = match transact(&self.spec.ovsdb, create_params(&bridge, &name), "OVSDB transaction").await {
            Err(e) => Err(e.to_string()),
            Ok(result) => create_outcome(&bridge, &result),
        };
        match outcome {
            Ok(()) => {
                tracing::info!("bridge {bridge} has no gateway port: created {name} (internal) for {}", list(addrs));
                self.created = Some(name);
                self.said = None;
                self.not_before = Some(Instant::now() + SHOW_UP_WITHIN);
                self.not_before
            }
            Err(e) => {
                self.say(
                    tracing::Level::ERROR,
                    format!("cannot create gateway port {name} on bridge {bridge}: {e}; retrying"),
                );
                Some(self.back_off())
            }
        }
    }

    /// When to retry after a failure; doubles the next wait.
    fn back_off(&mut self) -> Instant {
        let at = Instant::now() + self.backoff;
        self.not_before = Some(at);
        self.backoff = self.backoff.saturating_mul(2).min(MAX_BACKOFF);
        at
    }

    /// Logs `message` at `level` unless it is what was said last.
    fn say(&mut self, level: tracing::Level, message: String) {
        if self.said.as_deref() == Some(message.as_str()) {
            return;
        }
        match level {
            tracing::Level::ERROR => tracing::error!("{message}"),
            tracing::Level::WARN => tracing::warn!("{message}"),
            _ => tracing::info!("{message}"),
        }
        self.said = Some(message);
    }
}

/// Adds the addresses device `name` lacks and brings it up.
async fn configure_device(name: &str, addrs: &[InterfaceAddr]) -> Result<(), LinkError> {
    let nl = Netlink::open()?;
    let device = nl.device(name).await?;
    for addr in addrs.iter().filter(|a| !device.addrs.contains(a)) {
        nl.add_address(&device, *addr).await?;
    }
    if !device.up {
        nl.set_up(&device).await?;
    }
    Ok(())
}

/// Whether `a` and `b` name the same addresses, whatever their prefix lengths (a bare
/// `--gateway-ip` is a host address) and order.
fn same_ips(a: &[InterfaceAddr], b: &[InterfaceAddr]) -> bool {
    a.iter().all(|x| b.iter().any(|y| y.ip == x.ip)) && b.iter().all(|y| a.iter().any(|x| x.ip == y.ip))
}

fn list(addrs: &[InterfaceAddr]) -> String {
    if addrs.is_empty() {
        return "no address".into();
    }
    addrs.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creation_is_one_transaction_that_yields_to_an_existing_gateway() {
        let params = create_params("br-int", "antrea-gw0");
        let ops = params.as_array().expect("array");
        assert_eq!(ops[0], "Open_vSwitch");
        let ops: Vec<&str> = ops[1..].iter().map(|op| op["op"].as_str().expect("op")).collect();
        assert_eq!(ops, ["wait", "wait", "insert", "insert", "mutate"]);
        assert_eq!(params[3]["row"]["type"], "internal");
        assert_eq!(params[3]["row"]["ofport_request"], 32769);
        assert_eq!(params[4]["row"]["external_ids"], json!(["map", [["antrea-type", "gateway"]]]));
        assert_eq!(params[5]["where"], json!([["name", "==", "br-int"]]));

        let ok = json!([{}, {}, {"uuid": ["uuid", "i"]}, {"uuid": ["uuid", "p"]}, {"count": 1}]);
        assert_eq!(create_outcome("br-int", &ok), Ok(()));
        let no_bridge = json!([{}, {}, {"uuid": ["uuid", "i"]}, {"uuid": ["uuid", "p"]}, {"count": 0}]);
        assert_eq!(create_outcome("br-int", &no_bridge), Err("bridge br-int does not exist".into()));
        let gateway_exists = json!([{"error": "timed out"}]);
        assert!(create_outcome("br-int", &gateway_exists).is_err_and(|e| e.contains("antrea-type=gateway exists")));
        let duplicate = json!([{}, {}, {}, {}, {"count": 1}, {"error": "constraint violation", "details": "Transaction causes multiple rows in \"Port\" table to have identical values (\"antrea-gw0\") for index on column \"name\"."}]);
        assert!(create_outcome("br-int", &duplicate)
            .is_err_and(|e| e.contains("constraint violation") && e.contains("antrea-gw0")));
    }
}
