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

/// An address on an interface with the prefix length of its subnet (`10.10.0.1/24`): what the
/// gateway's interface gets, so that the node's stack routes that subnet (its pods) to the
/// bridge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct InterfaceAddr {
    pub ip: IpAddr,
    /// At most 32 (IPv4) or 128 (IPv6).
    pub prefix: u8,
}

impl InterfaceAddr {
    /// `10.10.0.1/24`, or a bare `10.10.0.1` (a host address: /32, /128).
    pub fn parse(s: &str) -> Result<InterfaceAddr, String> {
        match s.split_once('/') {
            None => s.parse().map(InterfaceAddr::host).map_err(|_| format!("{s:?} is not an IP address")),
            Some((addr, _)) => {
                let ip = addr.parse().map_err(|_| format!("{s:?}: {addr:?} is not an IP address"))?;
                let cidr = super::cidr::parse_cidr(s).map_err(|e| format!("{s:?}: {e}"))?;
                Ok(InterfaceAddr { ip, prefix: cidr.prefix })
            }
        }
    }

    /// The address alone, as a host address (/32, /128).
    pub fn host(ip: IpAddr) -> InterfaceAddr {
        InterfaceAddr { ip, prefix: if ip.is_ipv4() { 32 } else { 128 } }
    }

    /// The first address of `subnet` with its prefix length (`10.10.0.0/24` gives
    /// `10.10.0.1/24`), as Antrea gives the gateway the first address of the Node's podCIDR;
    /// `None` for a subnet of one address.
    pub fn first_of(subnet: Cidr) -> Option<InterfaceAddr> {
        let ip = match subnet.addr {
            IpAddr::V4(a) if subnet.prefix < 32 => IpAddr::V4(u32::from(a).checked_add(1)?.into()),
            IpAddr::V6(a) if subnet.prefix < 128 => IpAddr::V6(u128::from(a).checked_add(1)?.into()),
            _ => return None,
        };
        Some(InterfaceAddr { ip, prefix: subnet.prefix })
    }
}

impl std::fmt::Display for InterfaceAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.ip, self.prefix)
    }
}

/// What a Node object says of its node: where its pods live and how it is reached.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeFacts {
    /// `spec.podCIDRs` (or the older `spec.podCIDR`), in order.
    pub pod_cidrs: Vec<Cidr>,
    /// Its `InternalIP` addresses (`status.addresses`): where the other nodes route its pods.
    pub internal_ips: Vec<IpAddr>,
    /// Its `ExternalIP` addresses.
    pub external_ips: Vec<IpAddr>,
}

impl NodeFacts {
    /// Its own addresses, internal and external: traffic from them is the node's own.
    pub fn addresses(&self) -> impl Iterator<Item = IpAddr> + '_ {
        self.internal_ips.iter().chain(&self.external_ips).copied()
    }

    /// The route to its pods of one IP family: its first podCIDR of that family, through its
    /// first InternalIP of that family; `None` when it has either not.
    pub fn route(&self, v4: bool) -> Option<(Cidr, IpAddr)> {
        let cidr = self.pod_cidrs.iter().find(|c| c.addr.is_ipv4() == v4)?;
        let via = self.internal_ips.iter().find(|ip| ip.is_ipv4() == v4)?;
        Some((*cidr, *via))
    }
}

/// The cluster's nodes by name, as their Node objects say.
pub type ClusterNodes = std::collections::BTreeMap<String, NodeFacts>;

/// What the node's configuration says of it, beyond its bridge: the flags, and in kube mode
/// also its Node object (podCIDRs, addresses) and the cluster's ServiceCIDR objects.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeConfig {
    /// The gateway's addresses with their subnets (`--gateway-ip`, else the first address of
    /// each of the Node's podCIDRs, else those its device holds: [`NodeConfig::with_gateway_device`]):
    /// the switch answers ARP for them, traffic from them is the node's own, and a gateway
    /// npagent creates gets them.
    pub gateway_addrs: Vec<InterfaceAddr>,
    /// The node's other addresses (`--node-ip`, and the Node's InternalIP and ExternalIP).
    pub node_ips: BTreeSet<IpAddr>,
    /// The Service ranges (`--service-cidr`, and the ServiceCIDR objects' `spec.cidrs`).
    pub service_cidrs: Vec<Cidr>,
}

impl NodeConfig {
    /// This configuration with the addresses the gateway's device holds (`held`) as the
    /// gateway's when it configures none; a configured address wins over the device's.
    pub fn with_gateway_device(&self, held: &[InterfaceAddr]) -> NodeConfig {
        let mut config = self.clone();
        if config.gateway_addrs.is_empty() {
            config.gateway_addrs = held.to_vec();
        }
        config
    }

    /// The node as the pipeline sees it, before OVSDB names its ports.
    pub fn node(&self) -> Node {
        Node {
            gateway_ips: self.gateway_addrs.iter().map(|a| a.ip).collect(),
            node_ips: self.node_ips.clone(),
            service_cidrs: self.service_cidrs.clone(),
            ..Default::default()
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
    fn interface_addresses_parse_with_or_without_a_prefix() {
        assert_eq!(addr("10.10.0.1/24").to_string(), "10.10.0.1/24");
        assert_eq!(addr("10.10.0.1").to_string(), "10.10.0.1/32");
        assert_eq!(addr("fd00::1/64").to_string(), "fd00::1/64");
        assert_eq!(addr("fd00::1").to_string(), "fd00::1/128");
        for (bad, culprit) in
            [("10.10.0.1/33", "exceeds 32"), ("10.10.0/24", "\"10.10.0\""), ("x", "\"x\""), ("1.2.3.4/", "")]
        {
            let err = InterfaceAddr::parse(bad).expect_err(bad);
            assert!(err.contains(bad) && err.contains(culprit), "{bad}: {err}");
        }
    }

    #[test]
    fn the_first_address_of_a_subnet() {
        let first = |s: &str| {
            let cidr = crate::model::cidr::parse_cidr(s).unwrap_or_else(|e| panic!("{e}"));
            InterfaceAddr::first_of(cidr).map(|a| a.to_string())
        };
        assert_eq!(first("10.10.0.0/24").as_deref(), Some("10.10.0.1/24"));
        assert_eq!(first("10.10.0.77/24").as_deref(), Some("10.10.0.1/24"), "host bits are cleared first");
        assert_eq!(first("fd00:10::/64").as_deref(), Some("fd00:10::1/64"));
        assert_eq!(first("10.10.0.5/32"), None);
        assert_eq!(first("::1/128"), None);
    }
}
