//! The gateway's network device in npagent's own network namespace, through rtnetlink (never
//! by running `ip`): its state and addresses are read, and for a gateway npagent created,
//! addresses are added and the device is brought up. An OVS internal port's device lives in
//! the network namespace of ovs-vswitchd, which on a node is the host's: npagent has to run
//! there too (`hostNetwork`), and says so when the device is not found. A socket opened with
//! [`Netlink::open_watching`] also hears of every address and link change in the namespace.

use futures::channel::mpsc::UnboundedReceiver;
use futures::{StreamExt, TryStreamExt};
use rtnetlink::packet_core::NetlinkMessage;
use rtnetlink::packet_route::address::AddressAttribute;
use rtnetlink::packet_route::link::{LinkAttribute, LinkFlags, LinkMessage};
use rtnetlink::packet_route::RouteNetlinkMessage;
use rtnetlink::Handle;

use crate::model::node::InterfaceAddr;

/// `ENODEV`, `EEXIST` (Linux errno values, negated in netlink error messages).
pub const ENODEV: i32 = 19;
pub const EEXIST: i32 = 17;

/// Why a device could not be read or configured; names the device and what was asked.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    #[error("cannot open a netlink socket: {0}")]
    Socket(std::io::Error),
    #[error(
        "no network device {0:?} in npagent's network namespace (npagent runs in the node's, beside ovs-vswitchd?)"
    )]
    NotFound(String),
    #[error("network device {device:?}: cannot {what}: {error}")]
    Netlink {
        device: String,
        what: String,
        #[source]
        error: rtnetlink::Error,
    },
}

/// A network device as netlink describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    pub name: String,
    pub index: u32,
    /// Administratively up.
    pub up: bool,
    /// Its hardware address, when it has one of six bytes.
    pub mac: Option<[u8; 6]>,
    /// Its addresses with their prefix lengths, in the kernel's order.
    pub addrs: Vec<InterfaceAddr>,
}

/// A route netlink socket of npagent's network namespace.
pub struct Netlink {
    pub(super) handle: Handle,
    connection: tokio::task::JoinHandle<()>,
}

impl Netlink {
    /// Opens the socket (its reader runs as a task until this is dropped).
    pub fn open() -> Result<Netlink, LinkError> {
        let (connection, handle, _) = rtnetlink::new_connection().map_err(LinkError::Socket)?;
        Ok(Netlink { handle, connection: tokio::spawn(connection) })
    }

    /// Opens the socket subscribed to the namespace's address and link changes, which the
    /// returned [`Changes`] announces.
    pub fn open_watching() -> Result<(Netlink, Changes), LinkError> {
        use rtnetlink::MulticastGroup;
        let groups = [MulticastGroup::Link, MulticastGroup::Ipv4Ifaddr, MulticastGroup::Ipv6Ifaddr];
        let (connection, handle, messages) = rtnetlink::new_multicast_connection(&groups).map_err(LinkError::Socket)?;
        Ok((Netlink { handle, connection: tokio::spawn(connection) }, Changes(messages)))
    }

    /// The device named `name`, with its addresses.
    pub async fn device(&self, name: &str) -> Result<Device, LinkError> {
        read_device(&self.handle, name).await
    }

    /// Adds `addr` to `device`; an address it already has is no error.
    pub async fn add_address(&self, device: &Device, addr: InterfaceAddr) -> Result<(), LinkError> {
        match self.handle.address().add(device.index, addr.ip, addr.prefix).execute().await {
            Err(e) if errno(&e) != Some(EEXIST) => {
                Err(LinkError::Netlink { device: device.name.clone(), what: format!("add address {addr}"), error: e })
            }
            _ => Ok(()),
        }
    }

    /// Brings `device` up.
    pub async fn set_up(&self, device: &Device) -> Result<(), LinkError> {
        let msg = rtnetlink::LinkUnspec::new_with_index(device.index).up().build();
        self.handle.link().set(msg).execute().await.map_err(|error| LinkError::Netlink {
            device: device.name.clone(),
            what: "bring it up".into(),
            error,
        })
    }
}

/// The address and link changes a [`Netlink::open_watching`] socket hears of.
pub struct Changes(UnboundedReceiver<(NetlinkMessage<RouteNetlinkMessage>, rtnetlink::sys::SocketAddr)>);

impl Changes {
    /// Waits for a change and takes every other one already heard of with it (what changed is
    /// for the caller to read again); `None` once the socket is gone.
    pub async fn next(&mut self) -> Option<()> {
        self.0.next().await?;
        while self.0.try_recv().is_ok() {}
        Some(())
    }
}

impl Drop for Netlink {
    fn drop(&mut self) {
        self.connection.abort();
    }
}

/// The device named `name` in the network namespace of `handle`'s socket, with its addresses.
pub async fn read_device(handle: &Handle, name: &str) -> Result<Device, LinkError> {
    let fail = |what: &str, error| LinkError::Netlink { device: name.to_string(), what: what.to_string(), error };
    let link = find_link(handle, name).await?.ok_or_else(|| LinkError::NotFound(name.to_string()))?;
    let index = link.header.index;
    let mut addrs = Vec::new();
    let mut stream = handle.address().get().set_link_index_filter(index).execute();
    while let Some(msg) = stream.try_next().await.map_err(|e| fail("read its addresses", e))? {
        // IFA_LOCAL is the address itself (IFA_ADDRESS the peer's on point-to-point
        // links); IPv6 sends IFA_ADDRESS alone.
        let local = msg.attributes.iter().find_map(|a| match a {
            AddressAttribute::Local(ip) => Some(*ip),
            _ => None,
        });
        let address = msg.attributes.iter().find_map(|a| match a {
            AddressAttribute::Address(ip) => Some(*ip),
            _ => None,
        });
        if let Some(ip) = local.or(address) {
            addrs.push(InterfaceAddr { ip, prefix: msg.header.prefix_len });
        }
    }
    let mac = link.attributes.iter().find_map(|a| match a {
        LinkAttribute::Address(bytes) => bytes.as_slice().try_into().ok(),
        _ => None,
    });
    Ok(Device { name: name.to_string(), index, up: link.header.flags.contains(LinkFlags::Up), mac, addrs })
}

/// The link named `name` in the network namespace of `handle`'s socket, if there is one.
pub async fn find_link(handle: &Handle, name: &str) -> Result<Option<LinkMessage>, LinkError> {
    match handle.link().get().match_name(name.to_string()).execute().try_next().await {
        Ok(link) => Ok(link),
        Err(e) if errno(&e) == Some(ENODEV) => Ok(None),
        Err(error) => Err(LinkError::Netlink { device: name.to_string(), what: "read it".into(), error }),
    }
}

/// The errno of a netlink error message.
pub fn errno(e: &rtnetlink::Error) -> Option<i32> {
    match e {
        rtnetlink::Error::NetlinkError(msg) => Some(msg.raw_code().saturating_abs()),
        _ => None,
    }
}
