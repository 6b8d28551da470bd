//! The gateway's addresses as the node's stack holds them: the device of the bridge's gateway
//! port is read through rtnetlink ([`crate::host::netlink::link`]) and read again whenever an address or link
//! of npagent's network namespace changes (and every [`RECHECK`] in case a change notice was
//! lost), so that what is published is always what the device holds now.
//!
//! They are the gateway's addresses when none are configured ([`NodeConfig::with_gateway_device`]):
//! [`merge`] publishes the configuration the pipeline and the CNI server use.

use std::net::IpAddr;
use std::time::Duration;

use tokio::sync::watch;

use crate::host::netlink::link::{Changes, Netlink};
use crate::model::node::{InterfaceAddr, NodeConfig};
use crate::source::ovsdb::db::BridgePorts;

/// How often the device is read again without a change notice.
const RECHECK: Duration = Duration::from_secs(10);
/// How long to wait before opening the netlink socket again after it failed or closed.
const REOPEN_AFTER: Duration = Duration::from_secs(1);

/// What the node's stack says of the gateway port's device.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum DeviceAddrs {
    /// Not read yet, or the bridge has no gateway port.
    #[default]
    Unknown,
    /// Device `name` holds `addrs` (in the kernel's order, IPv6 link-local ones left out: the
    /// node's connections into pods never come from them).
    Held { name: String, addrs: Vec<InterfaceAddr> },
    /// Device `name` could not be read, for the reason given.
    Unreadable { name: String, error: String },
}

impl DeviceAddrs {
    /// The addresses device `name` is known to hold (none when it is not the device read).
    pub fn held_by(&self, name: &str) -> Option<&[InterfaceAddr]> {
        match self {
            DeviceAddrs::Held { name: n, addrs } if n == name => Some(addrs),
            _ => None,
        }
    }

    /// The addresses held, whichever device holds them.
    fn held(&self) -> &[InterfaceAddr] {
        match self {
            DeviceAddrs::Held { addrs, .. } => addrs,
            _ => &[],
        }
    }
}

/// Follows the addresses of the device of the gateway port in `ports`, publishing them on
/// `tx`, until either channel closes.
pub async fn follow_gateway_addrs(mut ports: watch::Receiver<BridgePorts>, tx: watch::Sender<DeviceAddrs>) {
    loop {
        let (netlink, mut changes) = match Netlink::open_watching() {
            Ok(opened) => opened,
            Err(e) => {
                tracing::warn!("the gateway's addresses cannot be followed: {e}; retrying in {REOPEN_AFTER:?}");
                let _ = tx.send_replace(DeviceAddrs::Unknown);
                tokio::select! {
                    _ = tokio::time::sleep(REOPEN_AFTER) => continue,
                    _ = tx.closed() => return,
                }
            }
        };
        match follow(&netlink, &mut changes, &mut ports, &tx).await {
            Ended::Closed => return,
            Ended::SocketGone => {
                tracing::warn!("the netlink socket that follows the gateway's addresses closed; reopening");
                tokio::time::sleep(REOPEN_AFTER).await;
            }
        }
    }
}

enum Ended {
    /// `ports` or `tx` closed.
    Closed,
    /// The netlink socket stopped announcing changes.
    SocketGone,
}

async fn follow(
    netlink: &Netlink,
    changes: &mut Changes,
    ports: &mut watch::Receiver<BridgePorts>,
    tx: &watch::Sender<DeviceAddrs>,
) -> Ended {
    loop {
        let gateway = ports.borrow_and_update().gateway.as_ref().map(|g| g.interface.clone());
        let now = match gateway {
            None => DeviceAddrs::Unknown,
            Some(name) => match netlink.device(&name).await {
                Ok(device) => DeviceAddrs::Held { name, addrs: node_addrs(device.addrs) },
                Err(e) => DeviceAddrs::Unreadable { name, error: e.to_string() },
            },
        };
        tx.send_if_modified(|cur| {
            let changed = *cur != now;
            if changed {
                *cur = now;
            }
            changed
        });
        tokio::select! {
            changed = ports.changed() => if changed.is_err() { return Ended::Closed },
            change = changes.next() => if change.is_none() { return Ended::SocketGone },
            _ = tokio::time::sleep(RECHECK) => {}
            _ = tx.closed() => return Ended::Closed,
        }
    }
}

/// `addrs` without IPv6 link-local ones.
fn node_addrs(addrs: Vec<InterfaceAddr>) -> Vec<InterfaceAddr> {
    addrs.into_iter().filter(|a| !is_ipv6_link_local(a.ip)).collect()
}

fn is_ipv6_link_local(ip: IpAddr) -> bool {
    matches!(ip, IpAddr::V6(v6) if v6.segments()[0] & 0xffc0 == 0xfe80)
}

/// Publishes on `tx` the node's configuration as `configured` (the flags, and in kube mode
/// the API) gives it, with the gateway's addresses read from its device (`device`) when it
/// configures none. Ends when `configured` or `tx` closes; a closed `device` leaves its last
/// addresses.
pub async fn merge(
    mut configured: watch::Receiver<NodeConfig>,
    mut device: watch::Receiver<DeviceAddrs>,
    tx: watch::Sender<NodeConfig>,
) {
    let mut device_open = true;
    loop {
        let now = configured.borrow_and_update().with_gateway_device(device.borrow_and_update().held());
        tx.send_if_modified(|cur| {
            let changed = *cur != now;
            if changed {
                *cur = now;
            }
            changed
        });
        tokio::select! {
            changed = configured.changed() => if changed.is_err() { return },
            changed = device.changed(), if device_open => device_open = changed.is_ok(),
            _ = tx.closed() => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> InterfaceAddr {
        InterfaceAddr::parse(s).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn ipv6_link_local_addresses_are_not_the_nodes() {
        let held = ["fe80::1/64", "10.10.0.254/16", "febf::1/64", "fec0::1/64", "fd00::1/64"].map(addr).to_vec();
        let kept: Vec<String> = node_addrs(held).iter().map(ToString::to_string).collect();
        assert_eq!(kept, ["10.10.0.254/16", "fec0::1/64", "fd00::1/64"]);
    }

    #[test]
    fn addresses_are_the_devices_only_when_it_is_the_one_read() {
        let held = DeviceAddrs::Held { name: "gw0".into(), addrs: vec![addr("10.10.0.254/16")] };
        assert_eq!(held.held_by("gw0"), Some(&[addr("10.10.0.254/16")][..]));
        assert_eq!(held.held_by("antrea-gw0"), None);
        let unreadable = DeviceAddrs::Unreadable { name: "gw0".into(), error: "gone".into() };
        assert_eq!(unreadable.held_by("gw0"), None);
        assert_eq!(unreadable.held(), &[]);
    }

    async fn next(rx: &mut watch::Receiver<NodeConfig>) -> NodeConfig {
        rx.changed().await.unwrap_or_else(|e| panic!("{e}"));
        rx.borrow_and_update().clone()
    }

    #[tokio::test]
    async fn the_merged_configuration_follows_the_device_and_the_configuration() {
        let services = crate::model::cidr::parse_cidr("10.96.0.0/12").unwrap_or_else(|e| panic!("{e}"));
        let flags = NodeConfig { service_cidrs: vec![services], ..Default::default() };
        let (configured_tx, configured) = watch::channel(flags.clone());
        let (device_tx, device) = watch::channel(DeviceAddrs::Unknown);
        let (tx, mut merged) = watch::channel(NodeConfig::default());
        let task = tokio::spawn(merge(configured, device, tx));
        assert_eq!(next(&mut merged).await, flags);

        device_tx.send_replace(DeviceAddrs::Held { name: "gw0".into(), addrs: vec![addr("10.10.0.254/16")] });
        assert_eq!(next(&mut merged).await.gateway_addrs, [addr("10.10.0.254/16")]);

        // A configured address wins over the device's.
        let mut configured = flags.clone();
        configured.gateway_addrs = vec![addr("10.10.0.1/16")];
        configured_tx.send_replace(configured.clone());
        assert_eq!(next(&mut merged).await, configured);

        configured_tx.send_replace(flags.clone());
        assert_eq!(next(&mut merged).await.gateway_addrs, [addr("10.10.0.254/16")]);
        device_tx.send_replace(DeviceAddrs::Unknown);
        assert_eq!(next(&mut merged).await, flags);

        drop(configured_tx);
        task.await.unwrap_or_else(|e| panic!("{e}"));
    }
}
