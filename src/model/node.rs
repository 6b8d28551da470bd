//! The node's side of the bridge: its gateway and uplink ports (from OVSDB) and what the
//! node is (its own addresses, the Service ranges kube-proxy handles). Pod ports are
//! [`super::LocalPort`]s; any other port of the bridge is of no class and sends and receives
//! nothing.

use super::Cidr;
use std::collections::BTreeSet;
use std::net::IpAddr;

/// A port of the bridge that belongs to the node rather than a pod: the gateway (an internal
/// port the node's stack holds) or an uplink or tunnel.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodePort {
    pub ofport: u32,
    pub interface: String,
    /// The MAC the port's network device uses (OVSDB `Interface.mac_in_use`), once known.
    pub mac: Option<[u8; 6]>,
}

/// The node as the pipeline sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Node {
    /// The gateway port (`external_ids:antrea-type=gateway`): the node's own stack, through
    /// which Services, routed traffic and the node's own connections pass.
    pub gateway: Option<NodePort>,
    /// Uplink and tunnel ports (`antrea-type=uplink` / `tunnel`): traffic from beyond the node.
    pub uplinks: Vec<NodePort>,
    /// The gateway's addresses on the node's stack (`--gateway-ip`): the node answers ARP and
    /// neighbour solicitations for them, and traffic from them is the node's own.
    pub gateway_ips: Vec<IpAddr>,
    /// The node's other addresses (`--node-ip`; in kube mode the Node's `status.addresses`):
    /// traffic from the gateway with one of these, or a gateway address, as its source is the
    /// node's own (kubelet's probes) and always reaches the node's pods.
    pub node_ips: BTreeSet<IpAddr>,
    /// The Service ranges (`--service-cidr`): new connections from a pod to these go to the
    /// gateway without an egress verdict; their egress is judged after the node's DNAT.
    pub service_cidrs: Vec<Cidr>,
}

impl Node {
    /// Every address the node's own traffic comes from: the gateway's and the node's others.
    pub fn own_addresses(&self) -> BTreeSet<IpAddr> {
        self.gateway_ips.iter().chain(&self.node_ips).copied().collect()
    }
}
