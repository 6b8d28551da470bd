//! Connections the node forwards, told apart from those it starts. kube-proxy masquerades
//! what it marks for it (NodePorts with `externalTrafficPolicy: Cluster`, hairpin, traffic
//! from outside the cluster to a ClusterIP) to the address of the interface the packet
//! leaves by: through the gateway, that is the gateway's own address, which the pipeline
//! takes for the node's own traffic (kubelet's probes), always allowed. So npagent keeps, in
//! the node's network namespace, a `nat` rule ahead of kube-proxy's masquerade that gives
//! such a connection, when the node only forwards it (its source is none of the node's
//! addresses) and it leaves by the gateway, a source address of its own
//! (`--forwarded-source`: 169.254.0.253, fc01::aabb:ccdd:eeff for IPv6, the addresses Antrea's
//! proxy uses), which no policy takes for the node: the destination's ingress
//! policy judges it as a non-pod peer, and logs it.
//!
//! The rule lives in chain `NPAGENT-POSTROUTING`, jumped to from the first rule of the `nat`
//! table's POSTROUTING, through the node's own `iptables` (the table and backend
//! kube-proxy's rules are in, where the order of rules is the order of NAT decisions), with
//! the masquerade of pods' connections to the outside after it in a cluster
//! ([`super::masquerade`]): one keeper for the chain ([`run_postrouting`]). Level-triggered: every [`CHECK_EVERY`] (and when the gateway changes) the chain and the
//! jump's place are read back and, when they differ, put back in one `iptables-restore`
//! transaction (kube-proxy prepends its own jump when it finds it missing). Nothing is removed
//! when npagent stops, so forwarded connections keep their address while it restarts.
//!
//! It holds on both datapaths: the address is in the packet (and its conntrack tuple), where
//! a kernel mark would not cross the userspace datapath's tap. The node never needs to hold
//! the address: its replies are un-NATed by the node's conntrack before they are routed.

use super::iptables::{self, Family, NOT_HERE};
use super::masquerade;
use crate::host::netlink::link::{LinkError, Netlink};
use crate::model::node::{ClusterNodes, NodeConfig};
use crate::source::ovsdb::db::BridgePorts;
use std::net::IpAddr;
use std::time::Duration;
use tokio::sync::watch;

/// The chain npagent owns in the `nat` table, jumped to first from POSTROUTING.
pub const CHAIN: iptables::Chain = iptables::Chain { table: "nat", hook: "POSTROUTING", name: "NPAGENT-POSTROUTING" };
/// How often the rules are read back and repaired.
pub const CHECK_EVERY: Duration = Duration::from_secs(5);

/// What the rules say (`--forwarded-source`, `--masquerade-mark`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForwardedSnatConfig {
    /// The source address of forwarded connections, at most one per IP family.
    pub sources: Vec<IpAddr>,
    /// The mark (bits) kube-proxy sets on connections it masquerades (0x4000 unless its
    /// `--iptables-masquerade-bit` says otherwise).
    pub masquerade_mark: u32,
}

/// The rule of one family: connections leaving by `gateway` that kube-proxy marked for
/// masquerading and whose source is no address of the node get `source`.
fn snat_rule(gateway: &str, mark: u32, source: IpAddr) -> String {
    format!(
        "-A {} -o {gateway} -m mark --mark {mark:#x}/{mark:#x} -m addrtype ! --src-type LOCAL -j SNAT --to-source {source}",
        CHAIN.name
    )
}

/// Keeps the chain in place: the forwarded connections' rule for the gateway OVSDB names
/// (`ports`) and the IP families the node has addresses in (`config`: only traffic from those
/// is taken for the node's own), then the masquerade of node `local`'s pods
/// ([`super::masquerade`], from the cluster's `nodes`), until a channel closes.
pub async fn run_postrouting(
    cfg: ForwardedSnatConfig,
    local: String,
    mut ports: watch::Receiver<BridgePorts>,
    mut config: watch::Receiver<NodeConfig>,
    mut nodes: watch::Receiver<Option<ClusterNodes>>,
) {
    let mut reports = iptables::Reports::default();
    loop {
        let gateway = ports.borrow_and_update().gateway.as_ref().map(|g| g.interface.clone());
        let node = config.borrow_and_update().clone();
        let cluster = nodes.borrow_and_update().clone().unwrap_or_default();
        if let Some(gateway) = gateway {
            reports.check(
                step(&cfg, &gateway, &node, &local, &cluster).await,
                "connections the node masquerades to the gateway (NodePorts, hairpin) pass as the node's own into \
                 every pod until the node's forwarded connections are kept apart; pods' connections to the outside \
                 leave unmasqueraded",
            );
        }
        tokio::select! {
            changed = ports.changed() => if changed.is_err() { return },
            changed = config.changed() => if changed.is_err() { return },
            changed = nodes.changed() => if changed.is_err() { return },
            _ = tokio::time::sleep(CHECK_EVERY) => {}
        }
    }
}

/// One check of every family; what changed, to say once.
async fn step(
    cfg: &ForwardedSnatConfig,
    gateway: &str,
    node: &NodeConfig,
    local: &str,
    cluster: &ClusterNodes,
) -> Result<Option<String>, String> {
    let cannot = |e: &dyn std::fmt::Display| format!("cannot keep chain {} in nat POSTROUTING ({e})", CHAIN.name);
    match Netlink::open().map_err(|e| cannot(&e))?.device(gateway).await {
        Ok(_) => {}
        Err(LinkError::NotFound(_)) => {
            return Ok(Some(format!(
                "the gateway's device {gateway} is not in npagent's network namespace: connections the node \
                 forwards are not told apart from its own, pods' connections are not masqueraded ({NOT_HERE})"
            )))
        }
        Err(e) => return Err(cannot(&e)),
    }
    let own: Vec<IpAddr> = node.gateway_addrs.iter().map(|a| a.ip).chain(node.node_ips.iter().copied()).collect();
    let mut installed = Vec::new();
    for family in [Family::V4, Family::V6] {
        let mut rules = Vec::new();
        // Without a node address of that family nothing of it passes as the node's own.
        let forwarded = cfg.sources.iter().find(|s| Family::of(s) == family);
        if let Some(source) = forwarded.filter(|_| own.iter().any(|ip| Family::of(ip) == family)) {
            rules.push(snat_rule(gateway, cfg.masquerade_mark, *source));
        }
        let masquerade = masquerade::rules(CHAIN.name, family, local, cluster, node);
        let masquerades = !masquerade.is_empty();
        rules.extend(masquerade);
        if rules.is_empty() {
            continue;
        }
        if CHAIN.ensure(family, &rules).await.map_err(|e| cannot(&e))? {
            installed.push(match (forwarded, masquerades) {
                (Some(source), true) => format!("{source} for forwarded connections, pods' masquerade"),
                (Some(source), false) => source.to_string(),
                (None, _) => format!("{family:?} pods' masquerade"),
            });
        }
    }
    Ok((!installed.is_empty()).then(|| {
        format!(
            "connections the node forwards through {gateway} and masquerades (mark {:#x}) leave it from {} (chain \
             {}, first in nat POSTROUTING): pods' ingress policy judges them as non-pod peers",
            cfg.masquerade_mark,
            installed.join(", "),
            CHAIN.name
        )
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    const RULE: &str = "-A NPAGENT-POSTROUTING -o gw0 -m mark --mark 0x4000/0x4000 -m addrtype ! --src-type LOCAL -j SNAT --to-source 169.254.0.253";

    #[test]
    fn the_rule_reads_as_iptables_prints_it() {
        assert_eq!(snat_rule("gw0", 0x4000, "169.254.0.253".parse().unwrap()), RULE);
    }
}
