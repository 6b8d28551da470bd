//! Pods' connections to the outside leave the node from the node's address. In routed mode a
//! pod's address is routable inside the cluster only: a connection from a local pod to an
//! address outside every Node's podCIDR and outside the Service ranges is masqueraded to the
//! address of the interface it leaves by, so that pods reach the API server and the internet
//! without another plugin. Between pod subnets nothing is masqueraded: the destination node
//! judges ingress against the real source pod.
//!
//! The rules are in npagent's `nat` POSTROUTING chain ([`super::forwarded_snat::CHAIN`]),
//! after the forwarded connections' rule; they see a connection after the pod's egress policy
//! admitted it on the bridge. One rule a destination that stays unmasqueraded (`RETURN`: on to
//! kube-proxy's rules), then the `MASQUERADE`; the `nat` table sees only a connection's first
//! packet, so their number costs nothing per packet.

use super::iptables::Family;
use crate::model::node::{ClusterNodes, NodeConfig};
use crate::model::Cidr;

/// The masquerade rules of `family` for node `local` among `nodes`, with the Service ranges
/// of `config`, as `iptables -S` prints them in `chain`; none when the local node has no Node
/// or no podCIDR of that family (its pods' addresses are then unknown: nothing is
/// masqueraded, as on a single node that never names itself).
pub fn rules(chain: &str, family: Family, local: &str, nodes: &ClusterNodes, config: &NodeConfig) -> Vec<String> {
    let of_family = |c: &&Cidr| Family::of(&c.addr) == family;
    let Some(sources) = nodes.get(local).map(|n| n.pod_cidrs.iter().filter(of_family).collect::<Vec<_>>()) else {
        return Vec::new();
    };
    let mut kept: Vec<&Cidr> =
        nodes.values().flat_map(|n| &n.pod_cidrs).chain(&config.service_cidrs).filter(of_family).collect();
    kept.sort();
    kept.dedup();
    let mut out = Vec::new();
    for source in sources {
        let source = text(source);
        out.extend(kept.iter().map(|d| format!("-A {chain} -s {source} -d {} -j RETURN", text(d))));
        out.push(format!("-A {chain} -s {source} -j MASQUERADE"));
    }
    out
}

/// A CIDR as `iptables -S` prints it.
fn text(c: &Cidr) -> String {
    format!("{}/{}", c.addr, c.prefix)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::cidr::parse_cidr;
    use crate::model::node::NodeFacts;

    fn node(cidrs: &[&str]) -> NodeFacts {
        NodeFacts { pod_cidrs: cidrs.iter().map(|c| parse_cidr(c).expect("cidr")).collect(), ..Default::default() }
    }

    fn cluster() -> ClusterNodes {
        [
            ("n1".to_string(), node(&["10.10.0.0/24", "fd00:10::/64"])),
            ("n2".to_string(), node(&["10.10.1.0/24"])),
            ("n3".to_string(), node(&[])),
        ]
        .into()
    }

    #[test]
    fn every_pod_subnet_and_service_range_is_kept_and_the_rest_masqueraded() {
        let config =
            NodeConfig { service_cidrs: vec![parse_cidr("10.96.0.0/12").expect("cidr")], ..Default::default() };
        assert_eq!(
            rules("C", Family::V4, "n1", &cluster(), &config),
            [
                "-A C -s 10.10.0.0/24 -d 10.10.0.0/24 -j RETURN",
                "-A C -s 10.10.0.0/24 -d 10.10.1.0/24 -j RETURN",
                "-A C -s 10.10.0.0/24 -d 10.96.0.0/12 -j RETURN",
                "-A C -s 10.10.0.0/24 -j MASQUERADE",
            ]
        );
        assert_eq!(
            rules("C", Family::V6, "n1", &cluster(), &config),
            ["-A C -s fd00:10::/64 -d fd00:10::/64 -j RETURN", "-A C -s fd00:10::/64 -j MASQUERADE"]
        );
    }

    #[test]
    fn nothing_is_masqueraded_for_a_node_without_a_node_object_or_subnet() {
        let config = NodeConfig::default();
        assert!(rules("C", Family::V4, "n9", &cluster(), &config).is_empty());
        assert!(rules("C", Family::V4, "n3", &cluster(), &config).is_empty());
        assert!(rules("C", Family::V6, "n2", &cluster(), &config).is_empty());
    }
}
