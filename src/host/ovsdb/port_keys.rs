//! The `external_ids` keys Antrea's CNI writes on a pod's Port and Interface rows, which
//! npagent's CNI writes the same way and its OVSDB source reads, and the roles `antrea-type`
//! gives a port.

/// A port's role: one of [`role`].
pub const ANTREA_TYPE: &str = "antrea-type";
/// The container the port was made for (`CNI_CONTAINERID`).
pub const CONTAINER_ID: &str = "container-id";
pub const POD_NAME: &str = "pod-name";
pub const POD_NAMESPACE: &str = "pod-namespace";
/// The pod's addresses, comma-separated (Antrea writes CIDR-style values too).
pub const IP_ADDRESS: &str = "ip-address";
/// The MAC of the pod's end of its veth.
pub const ATTACHED_MAC: &str = "attached-mac";
/// The interface's name inside the pod (`CNI_IFNAME`).
pub const IF_DEV: &str = "if-dev";
/// The pod's network namespace (`CNI_NETNS`).
pub const NET_NS: &str = "net-ns";

/// The values of [`ANTREA_TYPE`] npagent reads or writes.
pub mod role {
    /// A pod's port, made by a CNI.
    pub const CONTAINER: &str = "container";
    /// The node's gateway port.
    pub const GATEWAY: &str = "gateway";
    pub const UPLINK: &str = "uplink";
    pub const TUNNEL: &str = "tunnel";
}
