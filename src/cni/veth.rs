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

use rtnetlink::{Handle, LinkUnspec, LinkVeth, RouteMessageBuilder};
use tokio::sync::oneshot;

use crate::model::node::InterfaceAddr;
use crate::source::ovsdb::link::{errno, find_link, read_device, LinkError, EEXIST, ENODEV};

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
    #[error(transparent)]
    Link(#[from] LinkError),
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

/// The pod end's name while it is still in the node's namespace.
fn transit_ifname(container_id: &str, ifname: &str) -> String {
    format!("npt{}", &digest_hex(&format!("{container_id}/{ifname}"))[..12])
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

/// Creates the pair: `host` (down) on the node, the other end in `netns` as `ifname` with
/// `addrs` and a default route through each of `gateways` (one per family); returns the pod
/// end's MAC. On failure nothing of the pair is left.
pub async fn create(
    node: &Handle,
    host: &str,
    container_id: &str,
    netns: &Path,
    ifname: &str,
    addrs: &[InterfaceAddr],
    gateways: &[IpAddr],
) -> Result<[u8; 6], VethError> {
    let ns = open_netns(netns)?;
    // A pair a crashed ADD left behind goes first (deleting one end deletes both).
    delete(node, host).await?;
    let transit = transit_ifname(container_id, ifname);
    delete(node, &transit).await?;
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
        let peer = find_link(node, &transit).await?.ok_or_else(|| VethError::NotFound(transit.clone()))?;
        let moved = LinkUnspec::new_with_index(peer.header.index).setns_by_fd(ns.as_raw_fd()).build();
        node.link().set(moved).execute().await.map_err(fail(&transit, "move it into the pod's network namespace"))?;
        let (ifname, addrs, gateways) = (ifname.to_string(), addrs.to_vec(), gateways.to_vec());
        in_netns(ns, move |pod| async move { configure_pod_end(&pod, &transit, &ifname, &addrs, &gateways).await })
            .await
    };
    match made.await {
        Ok(mac) => Ok(mac),
        Err(e) => {
            if let Err(cleanup) = delete(node, host).await {
                tracing::warn!("after a failed veth creation: {cleanup}");
            }
            Err(e)
        }
    }
}

/// In the pod's namespace: renames the moved end, gives it its addresses and routes, and
/// brings it up; returns its MAC.
async fn configure_pod_end(
    pod: &Handle,
    transit: &str,
    ifname: &str,
    addrs: &[InterfaceAddr],
    gateways: &[IpAddr],
) -> Result<[u8; 6], VethError> {
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
            Err(e) if errno(&e) != Some(EEXIST) => return Err(fail(format!("add a default route via {gw}"))(e)),
            _ => {}
        }
    }
    Ok(read_device(pod, ifname).await?.mac.unwrap_or_default())
}

/// Brings the node's end `host` up: the pod's traffic passes from now on.
pub async fn set_up(node: &Handle, host: &str) -> Result<(), VethError> {
    let l = find_link(node, host).await?.ok_or_else(|| VethError::NotFound(host.to_string()))?;
    node.link().set(LinkUnspec::new_with_index(l.header.index).up().build()).execute().await.map_err(|error| {
        VethError::Link(LinkError::Netlink { device: host.to_string(), what: "bring it up".into(), error })
    })
}

/// Deletes the device `name` of the node's namespace (and so its peer); one that does not
/// exist is no error.
pub async fn delete(node: &Handle, name: &str) -> Result<(), VethError> {
    let Some(l) = find_link(node, name).await? else { return Ok(()) };
    match node.link().del(l.header.index).execute().await {
        Err(e) if errno(&e) != Some(ENODEV) => {
            Err(VethError::Link(LinkError::Netlink { device: name.to_string(), what: "delete it".into(), error: e }))
        }
        _ => Ok(()),
    }
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
        assert!(transit_ifname("c", "eth0").len() <= 15);
        assert!(crate::cni::spec::valid_ifname(&host_ifname("a.b/c d", "c")));
    }
}
