//! A pod's veth pair, through rtnetlink (never by running `ip`): one end on the node, named as
//! Antrea names it, the other in the pod's network namespace as `CNI_IFNAME` with the pod's
//! addresses and a default route through the gateway.
//!
//! Work inside the pod's namespace runs on a thread of its own that enters the namespace
//! (`setns`) and ends with its work, so no thread of the agent's runtime ever changes
//! namespace. The node's end stays down until the pod is enforced ([`set_up`]): until then no
//! packet passes either way. No gratuitous ARP is sent: the switch answers every ARP for a
//! pod's address itself (docs/pipeline.md, NeighborForward) and forwards by destination
//! address, writing the holder's MAC (L2ForwardingCalc), so a neighbour whose entry still
//! names an earlier holder of the address reaches the new one all the same.

use std::fs::File;
use std::future::Future;
use std::net::IpAddr;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use futures::TryStreamExt;
use rtnetlink::packet_route::link::{LinkAttribute, LinkMessage};
use rtnetlink::packet_route::route::{RouteAddress, RouteAttribute, RouteMessage};
use rtnetlink::{Handle, LinkUnspec, LinkVeth, RouteMessageBuilder};
use tokio::sync::oneshot;

use crate::host::netlink::ethtool::{self, EthtoolError};
use crate::host::netlink::link::{errno, find_link, read_device, LinkError, EEXIST, ENODEV};
use crate::model::node::InterfaceAddr;

/// Why a veth could not be made, read or removed; names the device or namespace.
#[derive(Debug, thiserror::Error)]
pub enum VethError {
    #[error("network namespace {}: {error}", path.display())]
    Netns { path: PathBuf, error: std::io::Error },
    #[error("{} is not a network namespace: {error}", path.display())]
    NotANetns { path: PathBuf, error: nix::Error },
    #[error("cannot open a netlink socket: {0}")]
    Socket(std::io::Error),
    #[error("network device {0:?} does not exist")]
    NotFound(String),
    #[error("network device {0:?} exists already in the pod's network namespace")]
    Exists(String),
    #[error("network device {device:?} exists already and is not this attachment's ({})", owner.as_deref().map_or("not made by npagent".to_string(), |o| format!("its alias says {o:?}")))]
    NotOurs { device: String, owner: Option<String> },
    #[error("the pod's network namespace has a default route already: {0}")]
    OtherDefaultRoute(String),
    #[error(transparent)]
    Link(#[from] LinkError),
    #[error(transparent)]
    Ethtool(#[from] EthtoolError),
}

impl VethError {
    /// Whether the pod's network namespace itself is at fault (missing, or not one).
    pub fn is_netns(&self) -> bool {
        matches!(self, VethError::Netns { .. } | VethError::NotANetns { .. })
    }
}

/// The node's end's name: the pod name's first 8 characters, `-`, and 6 hex digits of the
/// SHA-1 of the container id (Antrea's scheme, at most 15 bytes).
pub fn host_ifname(pod_name: &str, container_id: &str) -> String {
    let prefix: String = pod_name.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '-').take(8).collect();
    format!("{prefix}-{}", &digest_hex(container_id)[..6])
}

/// The mark npagent leaves on both ends of an attachment's veth (the device's alias,
/// `IFLA_IFALIAS`): a device of the same name that does not carry it is never deleted.
pub fn owner_alias(container_id: &str, ifname: &str) -> String {
    format!("npagent:{container_id}/{ifname}")
}

/// The pod end's name while it is still in the node's namespace.
fn transit_ifname(owner: &str) -> String {
    format!("npt{}", &digest_hex(owner.trim_start_matches("npagent:"))[..12])
}

fn digest_hex(s: &str) -> String {
    hex::encode(ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, s.as_bytes()))
}

/// What the pod's end is: for a result and for CHECK.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodEnd {
    pub mac: [u8; 6],
    pub addrs: Vec<InterfaceAddr>,
    pub up: bool,
}

/// What the pod's end of a veth is made to be.
#[derive(Debug, Clone)]
pub struct PodEndConfig {
    /// The pod's network namespace (a path).
    pub netns: PathBuf,
    /// The interface's name in it (`CNI_IFNAME`).
    pub ifname: String,
    pub addrs: Vec<InterfaceAddr>,
    /// A default route through each (one per family).
    pub gateways: Vec<IpAddr>,
    /// Turn TX checksum offload off (the bridge runs the userspace datapath).
    pub tx_checksums_off: bool,
}

/// Creates the pair: `host` (down) on the node, the other end in the pod's namespace as
/// `pod` says, both marked with `owner` ([`owner_alias`]); returns the pod end's MAC. A device
/// already named `host` is deleted only when it carries the same mark (a pair a crashed ADD
/// left behind); any other is an error naming it. On failure nothing of the pair is left.
pub async fn create(node: &Handle, host: &str, owner: &str, pod: &PodEndConfig) -> Result<[u8; 6], VethError> {
    let ns = open_netns(&pod.netns)?;
    let transit = transit_ifname(owner);
    // Deleting one end deletes both.
    delete_owned(node, host, owner, Leftover::MustBeMarked).await?;
    delete_owned(node, &transit, owner, Leftover::MustBeMarked).await?;
    let fail = |device: &str, what: &str| {
        let device = device.to_string();
        let what = what.to_string();
        move |error| VethError::Link(LinkError::Netlink { device, what, error })
    };
    node.link()
        .add(LinkVeth::new(host, &transit).build())
        .execute()
        .await
        .map_err(fail(host, &format!("create it with its peer {transit}")))?;
    let made = async {
        // The kernel ignores an alias given at creation: each end is marked by its own set.
        let made = find_link(node, host).await?.ok_or_else(|| VethError::NotFound(host.to_string()))?;
        let marked = LinkUnspec::new_with_index(made.header.index).alias(owner).build();
        node.link().set(marked).execute().await.map_err(fail(host, "mark it"))?;
        let peer = find_link(node, &transit).await?.ok_or_else(|| VethError::NotFound(transit.clone()))?;
        let moved = LinkUnspec::new_with_index(peer.header.index).alias(owner).setns_by_fd(ns.as_raw_fd()).build();
        node.link().set(moved).execute().await.map_err(fail(&transit, "move it into the pod's network namespace"))?;
        let pod = pod.clone();
        in_netns(ns, move |handle| async move { configure_pod_end(&handle, &transit, &pod).await }).await
    };
    match made.await {
        Ok(mac) => Ok(mac),
        Err(e) => {
            if let Err(cleanup) = delete_owned(node, host, owner, Leftover::MustBeMarked).await {
                tracing::warn!("after a failed veth creation: {cleanup}");
            }
            Err(e)
        }
    }
}

/// In the pod's namespace: renames the moved end, turns its TX checksum offload off when
/// asked, gives it its addresses and routes, and brings it up; returns its MAC.
async fn configure_pod_end(pod: &Handle, transit: &str, cfg: &PodEndConfig) -> Result<[u8; 6], VethError> {
    let PodEndConfig { ifname, addrs, gateways, tx_checksums_off, .. } = cfg;
    let ifname = ifname.as_str();
    if find_link(pod, ifname).await?.is_some() {
        return Err(VethError::Exists(ifname.to_string()));
    }
    let end = find_link(pod, transit).await?.ok_or_else(|| VethError::NotFound(transit.to_string()))?;
    let index = end.header.index;
    let fail =
        |what: String| move |error| VethError::Link(LinkError::Netlink { device: ifname.to_string(), what, error });
    pod.link()
        .set(LinkUnspec::new_with_index(index).name(ifname.to_string()).build())
        .execute()
        .await
        .map_err(fail(format!("rename {transit} to it")))?;
    if *tx_checksums_off {
        // This thread is the namespace's own and ends with the work: blocking is fine here.
        ethtool::tx_checksums_off(ifname)?;
    }
    for a in addrs {
        match pod.address().add(index, a.ip, a.prefix).execute().await {
            Err(e) if errno(&e) != Some(EEXIST) => return Err(fail(format!("add address {a}"))(e)),
            _ => {}
        }
    }
    pod.link()
        .set(LinkUnspec::new_with_index(index).up().build())
        .execute()
        .await
        .map_err(fail("bring it up".into()))?;
    for gw in gateways {
        let route = match gw {
            IpAddr::V4(gw) => {
                RouteMessageBuilder::<std::net::Ipv4Addr>::new().gateway(*gw).output_interface(index).build()
            }
            IpAddr::V6(gw) => {
                RouteMessageBuilder::<std::net::Ipv6Addr>::new().gateway(*gw).output_interface(index).build()
            }
        };
        match pod.route().add(route).execute().await {
            Err(e) if errno(&e) == Some(EEXIST) => check_default_route(pod, *gw, index, ifname).await?,
            Err(e) => return Err(fail(format!("add a default route via {gw}"))(e)),
            Ok(()) => {}
        }
    }
    Ok(read_device(pod, ifname).await?.mac.unwrap_or_default())
}

/// The main routing table's id (`RT_TABLE_MAIN`), where default routes are looked for.
const RT_TABLE_MAIN: u8 = 254;

/// A default route of `gw`'s family exists already: it must be the one wanted (via `gw` on
/// the interface `index`), or the pod's traffic would not go where npagent enforces it.
async fn check_default_route(pod: &Handle, gw: IpAddr, index: u32, ifname: &str) -> Result<(), VethError> {
    let query = match gw {
        IpAddr::V4(_) => RouteMessageBuilder::<std::net::Ipv4Addr>::new().build(),
        IpAddr::V6(_) => RouteMessageBuilder::<std::net::Ipv6Addr>::new().build(),
    };
    let routes: Vec<RouteMessage> = pod.route().get(query).execute().try_collect().await.map_err(|error| {
        VethError::Link(LinkError::Netlink { device: ifname.to_string(), what: "list the routes".into(), error })
    })?;
    let defaults: Vec<(Option<IpAddr>, Option<u32>)> = routes
        .iter()
        .filter(|r| r.header.destination_prefix_length == 0 && r.header.table == RT_TABLE_MAIN)
        .map(|r| {
            let via = r.attributes.iter().find_map(|a| match a {
                RouteAttribute::Gateway(RouteAddress::Inet(ip)) => Some(IpAddr::V4(*ip)),
                RouteAttribute::Gateway(RouteAddress::Inet6(ip)) => Some(IpAddr::V6(*ip)),
                _ => None,
            });
            let dev = r.attributes.iter().find_map(|a| match a {
                RouteAttribute::Oif(i) => Some(*i),
                _ => None,
            });
            (via, dev)
        })
        .collect();
    match defaults.iter().find(|d| **d != (Some(gw), Some(index))) {
        None => Ok(()),
        Some((via, dev)) => Err(VethError::OtherDefaultRoute(format!(
            "via {} dev #{} (npagent's would be via {gw} dev {ifname})",
            via.map_or("none".to_string(), |v| v.to_string()),
            dev.map_or("?".to_string(), |d| d.to_string()),
        ))),
    }
}

/// Brings the node's end `host` up: the pod's traffic passes from now on.
pub async fn set_up(node: &Handle, host: &str) -> Result<(), VethError> {
    let l = find_link(node, host).await?.ok_or_else(|| VethError::NotFound(host.to_string()))?;
    node.link().set(LinkUnspec::new_with_index(l.header.index).up().build()).execute().await.map_err(|error| {
        VethError::Link(LinkError::Netlink { device: host.to_string(), what: "bring it up".into(), error })
    })
}

/// Whether a device without any mark may be deleted as an attachment's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Leftover {
    /// Only a device carrying the attachment's mark (before creating a new pair).
    MustBeMarked,
    /// Also one without any alias: the node's end of an attachment recorded by an npagent
    /// that made its devices before they were marked.
    MayBeUnmarked,
}

/// Deletes the attachment `owner`'s device `name` of the node's namespace (and so its peer);
/// one that does not exist is no error, one that is not the attachment's is
/// [`VethError::NotOurs`] and stays.
pub async fn delete_owned(node: &Handle, name: &str, owner: &str, leftover: Leftover) -> Result<(), VethError> {
    let Some(l) = find_link(node, name).await? else { return Ok(()) };
    match alias(&l) {
        Some(a) if a == owner => {}
        None if leftover == Leftover::MayBeUnmarked => {}
        other => return Err(VethError::NotOurs { device: name.to_string(), owner: other.map(str::to_string) }),
    }
    match node.link().del(l.header.index).execute().await {
        Err(e) if errno(&e) != Some(ENODEV) => {
            Err(VethError::Link(LinkError::Netlink { device: name.to_string(), what: "delete it".into(), error: e }))
        }
        _ => Ok(()),
    }
}

fn alias(link: &LinkMessage) -> Option<&str> {
    link.attributes.iter().find_map(|a| match a {
        LinkAttribute::IfAlias(s) => Some(s.as_str()),
        _ => None,
    })
}

/// The pod's end `ifname` in `netns`, if it is there.
pub async fn pod_end(netns: &Path, ifname: &str) -> Result<Option<PodEnd>, VethError> {
    let ns = open_netns(netns)?;
    let ifname = ifname.to_string();
    in_netns(ns, move |pod| async move {
        match read_device(&pod, &ifname).await {
            Ok(d) => Ok(Some(PodEnd {
                mac: d.mac.unwrap_or_default(),
                addrs: d.addrs.into_iter().filter(|a| !is_link_local(&a.ip)).collect(),
                up: d.up,
            })),
            Err(LinkError::NotFound(_)) => Ok(None),
            Err(e) => Err(VethError::Link(e)),
        }
    })
    .await
}

fn is_link_local(ip: &IpAddr) -> bool {
    match ip {
        IpAddr::V4(a) => a.is_link_local(),
        IpAddr::V6(a) => (a.segments()[0] & 0xffc0) == 0xfe80,
    }
}

fn open_netns(path: &Path) -> Result<File, VethError> {
    File::open(path).map_err(|error| VethError::Netns { path: path.to_path_buf(), error })
}

/// Runs `work` with a netlink handle of the network namespace `ns`, on a thread that entered
/// it and ends with the work.
async fn in_netns<T, F, Fut>(ns: File, work: F) -> Result<T, VethError>
where
    T: Send + 'static,
    F: FnOnce(Handle) -> Fut + Send + 'static,
    Fut: Future<Output = Result<T, VethError>>,
{
    let (tx, rx) = oneshot::channel();
    let path = PathBuf::from(format!("/proc/self/fd/{}", ns.as_raw_fd()));
    let spawned = std::thread::Builder::new().name("npagent-netns".into()).spawn(move || {
        let result = (|| {
            nix::sched::setns(&ns, nix::sched::CloneFlags::CLONE_NEWNET)
                .map_err(|error| VethError::NotANetns { path, error })?;
            let runtime =
                tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(VethError::Socket)?;
            runtime.block_on(async move {
                let (connection, handle, _) = rtnetlink::new_connection().map_err(VethError::Socket)?;
                let reader = tokio::spawn(connection);
                let out = work(handle).await;
                reader.abort();
                out
            })
        })();
        let _ = tx.send(result);
    });
    spawned.map_err(VethError::Socket)?;
    rx.await.unwrap_or_else(|_| Err(VethError::Socket(std::io::Error::other("the namespace thread ended early"))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_names_follow_antreas_scheme_and_fit_linux() {
        let name = host_ifname("frontend-7d9f-abcde", "0123456789abcdef");
        assert!(name.starts_with("frontend-"), "{name}");
        assert_eq!(name.len(), 15);
        assert_ne!(name, host_ifname("frontend-7d9f-abcde", "0123456789abcdeg"));
        assert!(transit_ifname(&owner_alias("c", "eth0")).len() <= 15);
        // The mark tells attachments apart however their names split.
        assert_ne!(owner_alias("a-b", "eth0"), owner_alias("a", "b-eth0"));
        assert!(crate::cni::spec::valid_ifname(&host_ifname("a.b/c d", "c")));
    }
}
