//! The node's own network stack hears nothing a pod sends. On the userspace datapath
//! (`datapath_type=netdev`) ovs-vswitchd reads a pod's veth host end through a packet socket,
//! and the kernel goes on to process the same frames: the node's stack answered a pod's ARP for
//! its gateway with the host end's MAC, then took the pod's IP addressed to that MAC as its own
//! (a host-network service reached past the pod's egress policy, a forged source accepted) or
//! routed it on (the pod's traffic to the world unjudged). npagent keeps, in the node's network
//! namespace, a `raw` rule per local pod port dropping IP that arrives on its host end before
//! the node's stack routes it (ovs-vswitchd's packet socket has had the frame by then), for IPv4
//! and IPv6. On the kernel datapath the bridge takes the frames before the stack sees them and
//! the rules never match.
//!
//! In a cluster (`--node` naming a Node with podCIDRs) the chain also drops IP whose source is
//! in the local node's podCIDR and which arrives by any interface but the gateway (and is not
//! from the node itself): the local pods' packets reach the node's stack by the gateway only,
//! so such a packet forges a local pod's address, sent by a host on the underlay or routed in
//! from outside; forwarded into the bridge by the gateway it would pass as that pod's
//! (Service connections, which the node DNATs back into the bridge with the pod's source, come
//! by the gateway and are kept).
//!
//! The rules live in chain `NPAGENT-PREROUTING`, jumped to from the first rule of the `raw`
//! table's PREROUTING, kept as [`super::iptables`] keeps chains: read back every
//! [`CHECK_EVERY`] and as the bridge's pod ports change, put back when they differ. A port whose
//! device is not in npagent's network namespace is skipped (npagent then says so); with none of
//! them there, nothing is changed (npagent runs apart from the node, whose tables these are not).
//! Nothing is removed when npagent stops.

use super::iptables::{self, Family, NOT_HERE};
use crate::host::netlink::link::{LinkError, Netlink};
use crate::model::node::ClusterNodes;
use crate::model::Cidr;
use crate::source::ovsdb::db::BridgePorts;
use std::time::Duration;
use tokio::sync::watch;

/// The chain npagent owns in the `raw` table, jumped to first from PREROUTING.
pub const CHAIN: iptables::Chain = iptables::Chain { table: "raw", hook: "PREROUTING", name: "NPAGENT-PREROUTING" };
/// How often the rules are read back and repaired.
const CHECK_EVERY: Duration = Duration::from_secs(5);

/// The rule for one host end, as `iptables -S` prints it.
fn drop_rule(interface: &str) -> String {
    format!("-A {} -i {interface} -j DROP", CHAIN.name)
}

/// The rule dropping `subnet`'s addresses arriving by anything but `gateway`, as `iptables -S`
/// prints it.
fn forged_rule(subnet: &Cidr, gateway: &str) -> String {
    format!(
        "-A {} -s {}/{} ! -i {gateway} -m addrtype ! --src-type LOCAL -j DROP",
        CHAIN.name, subnet.addr, subnet.prefix
    )
}

/// Keeps the rules in place for the pod ports and the gateway OVSDB names (`ports`) and the
/// podCIDRs of node `local` among the cluster's `nodes`, until a channel closes.
pub async fn run_host_ends(
    mut ports: watch::Receiver<BridgePorts>,
    local: String,
    mut nodes: watch::Receiver<Option<ClusterNodes>>,
) {
    let mut reports = iptables::Reports::default();
    loop {
        let (interfaces, gateway) = {
            let ports = ports.borrow_and_update();
            let interfaces: Vec<String> = ports.pods.iter().map(|p| p.interface.clone()).collect();
            (interfaces, ports.gateway.as_ref().map(|g| g.interface.clone()))
        };
        let subnets = nodes.borrow_and_update().as_ref().and_then(|n| n.get(&local)).map(|n| n.pod_cidrs.clone());
        let forged: Vec<(Family, String)> = match (&gateway, subnets) {
            (Some(gateway), Some(subnets)) => {
                subnets.iter().map(|s| (Family::of(&s.addr), forged_rule(s, gateway))).collect()
            }
            _ => Vec::new(),
        };
        reports.check(
            step(&interfaces, gateway.as_deref(), &forged).await,
            "on the userspace datapath a pod can reach the node's own services and route through the node past its \
             egress policy until the node's stack is kept from hearing pods' host ends; a host beyond the node can \
             send in a local pod's name",
        );
        tokio::select! {
            changed = ports.changed() => if changed.is_err() { return },
            changed = nodes.changed() => if changed.is_err() { return },
            _ = tokio::time::sleep(CHECK_EVERY) => {}
        }
    }
}

/// One check of both families (the host ends' rules, then `forged`'s of each family, which
/// name `gateway`); what changed, to say once.
async fn step(
    interfaces: &[String],
    gateway: Option<&str>,
    forged: &[(Family, String)],
) -> Result<Option<String>, String> {
    let cannot = |e: &dyn std::fmt::Display| format!("cannot keep the node's stack from hearing pods' host ends ({e})");
    let netlink = Netlink::open().map_err(|e| cannot(&e))?;
    let mut here = Vec::new();
    let mut elsewhere = Vec::new();
    for interface in interfaces {
        match netlink.device(interface).await {
            Ok(_) => here.push(interface.as_str()),
            Err(LinkError::NotFound(_)) => elsewhere.push(interface.as_str()),
            Err(e) => return Err(cannot(&e)),
        }
    }
    let gateway_here = match gateway.filter(|_| !forged.is_empty()) {
        Some(gateway) => netlink.device(gateway).await.is_ok(),
        None => false,
    };
    // With none of the devices here, npagent runs apart from the node: its own namespace's
    // tables are not the node's to change.
    let mut changed = false;
    if !here.is_empty() || gateway_here {
        for family in [Family::V4, Family::V6] {
            let mut rules: Vec<String> = here.iter().map(|i| drop_rule(i)).collect();
            rules.extend(forged.iter().filter(|(f, _)| *f == family).map(|(_, rule)| rule.clone()));
            changed |= CHAIN.ensure(family, &rules).await.map_err(|e| cannot(&e))?;
        }
    }
    if !elsewhere.is_empty() {
        return Ok(Some(format!(
            "{} of {} pod ports' devices are not in npagent's network namespace ({}, ...): the node's stack is not kept \
             from hearing them ({NOT_HERE})",
            elsewhere.len(),
            interfaces.len(),
            elsewhere[0]
        )));
    }
    Ok(changed.then(|| {
        format!(
            "the node's stack drops IP arriving on the host ends of {} pod ports, and {} local podCIDRs' addresses \
             arriving elsewhere than by the gateway (chain {}, first in raw PREROUTING)",
            here.len(),
            forged.len(),
            CHAIN.name
        )
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rule_reads_as_iptables_prints_it() {
        assert_eq!(drop_rule("x-a"), "-A NPAGENT-PREROUTING -i x-a -j DROP");
        let subnet = crate::model::cidr::parse_cidr("10.10.2.0/23").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            forged_rule(&subnet, "antrea-gw0"),
            "-A NPAGENT-PREROUTING -s 10.10.2.0/23 ! -i antrea-gw0 -m addrtype ! --src-type LOCAL -j DROP"
        );
    }
}
