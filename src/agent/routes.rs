//! Routes to the other nodes' pods (routed mode): for every other Node with a podCIDR and an
//! InternalIP, `<podCIDR> via <InternalIP>` in the node's main routing table, as npagent's own
//! routes ([`crate::host::netlink::route`], `proto 78`), and IP forwarding on.
//!
//! Level-triggered: every [`CHECK_EVERY`] and whenever the desired set changes, npagent's routes
//! and the other routes' destinations are read back and the difference is applied ([`plan`]):
//! missing routes added, routes of another gateway replaced, routes of npagent's that no Node
//! wants deleted. A route npagent did not make is never touched: a desired destination it
//! holds is left to it and said. Nothing is done before the desired set is known (the Nodes
//! listed), so a restart keeps the routes of the agent before it without a gap; nothing is
//! removed when npagent stops unless asked ([`remove_own_routes`]).

use super::iptables::Reports;
use crate::host::netlink::link::Netlink;
use crate::host::netlink::route::{Route, RouteError};
use crate::model::cidr::Cidr;
use crate::model::node::ClusterNodes;
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::sync::watch;

/// How often the routes are read back and repaired.
pub const CHECK_EVERY: Duration = Duration::from_secs(5);
/// IPv4 forwarding of npagent's network namespace.
pub const IPV4_FORWARDING: &str = "/proc/sys/net/ipv4/ip_forward";
/// IPv6 forwarding of npagent's network namespace, on every interface.
pub const IPV6_FORWARDING: &str = "/proc/sys/net/ipv6/conf/all/forwarding";

/// What holds while a check fails.
const CONSEQUENCE: &str = "pods on other nodes may be unreachable from this node's pods, or reached through a \
                           node that no longer holds them";

/// What turns the routes of npagent's into the desired ones.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Routes to add, or to replace npagent's route to the same destination with.
    pub put: Vec<Route>,
    /// Routes of npagent's to delete: to no desired destination, or through another gateway.
    pub delete: Vec<Route>,
    /// Destinations, desired or of npagent's routes, that a route npagent did not make holds
    /// too: left alone.
    pub foreign: Vec<Cidr>,
}

/// The plan that turns `ours` (npagent's routes) into `desired` (destination to gateway),
/// leaving every destination in `foreign` (held by a route npagent did not make) alone:
/// applied, it gives `desired` on every other destination, and names none of those for a put
/// or a delete. Puts come first when it is applied: a replace leaves no gap.
pub fn plan(desired: &BTreeMap<Cidr, IpAddr>, ours: &[Route], foreign: &BTreeSet<Cidr>) -> Plan {
    let ours: BTreeSet<Route> = ours.iter().copied().collect();
    let wanted = desired.iter().map(|(destination, via)| Route { destination: *destination, via: *via });
    let held: BTreeSet<Cidr> =
        desired.keys().chain(ours.iter().map(|r| &r.destination)).filter(|d| foreign.contains(d)).copied().collect();
    let free = |r: &Route| !foreign.contains(&r.destination);
    Plan {
        put: wanted.filter(|r| free(r) && !ours.contains(r)).collect(),
        delete: ours.iter().filter(|r| free(r) && desired.get(&r.destination) != Some(&r.via)).copied().collect(),
        foreign: held.into_iter().collect(),
    }
}

/// What one check did.
#[derive(Debug, Default)]
pub struct Synced {
    /// Routes added or replaced.
    pub put: Vec<Route>,
    /// Routes of npagent's deleted.
    pub deleted: Vec<Route>,
    /// Destinations left to a route npagent did not make ([`Plan::foreign`]).
    pub foreign: Vec<Cidr>,
    /// What could not be put or deleted.
    pub failures: Vec<RouteError>,
}

/// Reads the main table back and applies the [`plan`] to `desired`; an error when the table
/// cannot be read (nothing is changed then).
pub async fn sync_routes(desired: &BTreeMap<Cidr, IpAddr>) -> Result<Synced, RouteError> {
    let netlink = Netlink::open()?;
    let table = netlink.main_table().await?;
    let plan = plan(desired, &table.ours, &table.foreign);
    let mut synced = Synced { foreign: plan.foreign, ..Synced::default() };
    for route in plan.put {
        match netlink.put_route(&route).await {
            Ok(()) => synced.put.push(route),
            Err(e) => synced.failures.push(e),
        }
    }
    for route in plan.delete {
        match netlink.delete_route(&route).await {
            Ok(true) => synced.deleted.push(route),
            // Replaced by a put already, or gone.
            Ok(false) => {}
            Err(e) => synced.failures.push(e),
        }
    }
    Ok(synced)
}

/// Keeps npagent's routes at the desired set (`None`: not known yet, nothing is touched) until
/// the channel closes.
pub async fn run_routes(mut desired: watch::Receiver<Option<BTreeMap<Cidr, IpAddr>>>) {
    let mut reports = Reports::default();
    let mut said_foreign = Vec::new();
    loop {
        let wanted = desired.borrow_and_update().clone();
        if let Some(wanted) = wanted {
            let outcome = match sync_routes(&wanted).await {
                Ok(synced) => synced.say(&mut said_foreign),
                Err(e) => Err(e.to_string()),
            };
            reports.check(outcome, CONSEQUENCE);
        }
        tokio::select! {
            changed = desired.changed() => if changed.is_err() { return },
            _ = tokio::time::sleep(CHECK_EVERY) => {}
        }
    }
}

impl Synced {
    /// Says what changed, and the destinations left to others when they are not those said
    /// last (`said`); the failures, for a rate-limited warning.
    fn say(self, said: &mut Vec<Cidr>) -> Result<Option<String>, String> {
        let list = |routes: &[Route]| routes.iter().map(Route::to_string).collect::<Vec<_>>().join(", ");
        let mut changed = Vec::new();
        if !self.put.is_empty() {
            changed.push(format!("set {}", list(&self.put)));
        }
        if !self.deleted.is_empty() {
            changed.push(format!("removed {}", list(&self.deleted)));
        }
        if !changed.is_empty() {
            tracing::info!("routes to other nodes' pods: {}", changed.join("; "));
        }
        if self.foreign != *said {
            if !self.foreign.is_empty() {
                let destinations = self.foreign.iter().map(Cidr::to_string).collect::<Vec<_>>().join(", ");
                tracing::warn!(
                    "routes npagent did not make hold {destinations} in the main routing table: npagent leaves \
                     those destinations alone"
                );
            }
            *said = self.foreign;
        }
        if self.failures.is_empty() {
            Ok(None)
        } else {
            Err(self.failures.iter().map(RouteError::to_string).collect::<Vec<_>>().join("; "))
        }
    }
}

/// Deletes every route of npagent's (when it stops and is asked to; the keeper must have
/// stopped); how many there were. Every one is tried; the first failure is returned.
pub async fn remove_own_routes() -> Result<usize, RouteError> {
    let netlink = Netlink::open()?;
    let mut removed = 0;
    let mut first_failure = None;
    for route in netlink.main_table().await?.ours {
        match netlink.delete_route(&route).await {
            Ok(gone) => removed += usize::from(gone),
            Err(e) => {
                first_failure.get_or_insert(e);
            }
        }
    }
    first_failure.map_or(Ok(removed), Err)
}

/// A forwarding switch that could not be turned on, named.
#[derive(Debug, thiserror::Error)]
#[error("cannot turn IP forwarding on in {}: {error}", path.display())]
pub struct ForwardingError {
    pub path: PathBuf,
    pub error: std::io::Error,
}

/// The routes node `local` wants: one to every other Node's pods of each IP family
/// ([`crate::model::node::NodeFacts::route`]); none when no Node is `local` (the node is none of the cluster's).
pub fn desired(local: &str, nodes: &ClusterNodes) -> BTreeMap<Cidr, IpAddr> {
    if !nodes.contains_key(local) {
        return BTreeMap::new();
    }
    nodes
        .iter()
        .filter(|(name, _)| *name != local)
        .flat_map(|(_, node)| [node.route(true), node.route(false)])
        .flatten()
        .collect()
}

/// Keeps the routes node `local` wants among the cluster's `nodes` ([`desired`], through
/// [`run_routes`]) and, once its Node is listed, IP forwarding on (IPv6 too when it has an
/// IPv6 podCIDR), until `nodes` closes. A node that does not name itself (`local`
/// empty) is alone: nothing is routed.
pub async fn run_cluster_routes(local: String, mut nodes: watch::Receiver<Option<ClusterNodes>>) {
    if local.is_empty() {
        while nodes.changed().await.is_ok() {}
        return;
    }
    let (tx, rx) = watch::channel(None);
    let follow = async move {
        let mut forwarding = false;
        loop {
            if let Some(listed) = nodes.borrow_and_update().as_ref() {
                // Only a node that is one of the cluster's: a `--node` no Node names changes
                // nothing of its host.
                if let Some(node) = listed.get(&local).filter(|_| !forwarding) {
                    let v6 = node.pod_cidrs.iter().any(|c| c.addr.is_ipv6());
                    match enable_forwarding(true, v6) {
                        Ok(()) => tracing::info!("IP forwarding is on (routed mode)"),
                        Err(e) => tracing::warn!("{e}: pods cannot reach other nodes' pods or the outside"),
                    }
                    forwarding = true;
                }
                let wanted = desired(&local, listed);
                tx.send_if_modified(|held| {
                    let changed = held.as_ref() != Some(&wanted);
                    *held = Some(wanted);
                    changed
                });
            }
            if nodes.changed().await.is_err() {
                return;
            }
        }
    };
    tokio::join!(follow, run_routes(rx));
}

/// Turns IP forwarding on in npagent's network namespace (that of the calling thread) for
/// IPv4 ([`IPV4_FORWARDING`]) and IPv6 ([`IPV6_FORWARDING`]), as asked; a switch already on
/// is only read. IPv6 forwarding makes every interface a router's: one that takes its default
/// route from router advertisements needs `accept_ra` 2 to keep doing so.
pub fn enable_forwarding(v4: bool, v6: bool) -> Result<(), ForwardingError> {
    for (wanted, path) in [(v4, IPV4_FORWARDING), (v6, IPV6_FORWARDING)] {
        if wanted {
            switch_on(Path::new(path))?;
        }
    }
    Ok(())
}

/// Writes 1 to the sysctl file `path` unless it reads 1.
fn switch_on(path: &Path) -> Result<(), ForwardingError> {
    let failed = |error| ForwardingError { path: path.to_path_buf(), error };
    if std::fs::read_to_string(path).map_err(failed)?.trim() == "1" {
        return Ok(());
    }
    std::fs::write(path, "1").map_err(failed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn cidr(s: &str) -> Cidr {
        crate::model::cidr::parse_cidr(s).unwrap()
    }

    #[test]
    fn a_node_routes_every_other_nodes_pods_and_nothing_when_it_is_none_of_them() {
        use crate::model::node::NodeFacts;
        let node = |cidrs: &[&str], ips: &[&str]| NodeFacts {
            pod_cidrs: cidrs.iter().map(|c| cidr(c)).collect(),
            internal_ips: ips.iter().map(|i| i.parse().unwrap()).collect(),
            ..Default::default()
        };
        let nodes: ClusterNodes = [
            ("n1".to_string(), node(&["10.10.0.0/24"], &["192.168.77.11"])),
            ("n2".to_string(), node(&["10.10.1.0/24", "fd00:1::/64"], &["192.168.77.12", "fd77::12"])),
            ("n3".to_string(), node(&["10.10.2.0/24"], &[])),
        ]
        .into();
        let want: BTreeMap<Cidr, IpAddr> = [
            (cidr("10.10.1.0/24"), "192.168.77.12".parse().unwrap()),
            (cidr("fd00:1::/64"), "fd77::12".parse().unwrap()),
        ]
        .into();
        assert_eq!(desired("n1", &nodes), want, "n3 has no InternalIP: no route");
        assert!(desired("n9", &nodes).is_empty(), "a node no Node names routes nothing");
    }

    fn route(destination: &str, via: &str) -> Route {
        Route { destination: cidr(destination), via: via.parse().unwrap() }
    }

    /// `ours` after `plan`: deletes gone, then puts in, each replacing ours to its destination
    /// (the kernel's replace).
    fn apply(ours: &[Route], plan: &Plan) -> BTreeSet<Route> {
        let mut table: BTreeSet<Route> = ours.iter().filter(|r| !plan.delete.contains(r)).copied().collect();
        for put in &plan.put {
            table.retain(|r| r.destination != put.destination);
            table.insert(*put);
        }
        table
    }

    #[test]
    fn missing_routes_are_added_others_replaced_stale_ones_deleted_and_foreign_ones_left() {
        let desired: BTreeMap<Cidr, IpAddr> = [
            ("10.10.1.0/24", "192.168.77.1"),
            ("10.10.2.0/24", "192.168.77.2"),
            ("10.10.3.0/24", "192.168.77.3"),
            ("10.99.0.0/24", "192.168.77.9"),
        ]
        .into_iter()
        .map(|(d, v)| (cidr(d), v.parse().unwrap()))
        .collect();
        let ours = [
            route("10.10.2.0/24", "192.168.77.2"),
            route("10.10.3.0/24", "192.168.77.4"),
            route("10.10.4.0/24", "192.168.77.4"),
            route("10.98.0.0/24", "192.168.77.8"),
        ];
        let foreign = [cidr("10.99.0.0/24"), cidr("10.98.0.0/24"), cidr("10.97.0.0/24")].into();
        assert_eq!(
            plan(&desired, &ours, &foreign),
            Plan {
                put: vec![route("10.10.1.0/24", "192.168.77.1"), route("10.10.3.0/24", "192.168.77.3")],
                delete: vec![route("10.10.3.0/24", "192.168.77.4"), route("10.10.4.0/24", "192.168.77.4")],
                foreign: vec![cidr("10.98.0.0/24"), cidr("10.99.0.0/24")],
            }
        );
    }

    fn destination() -> impl Strategy<Value = Cidr> {
        prop_oneof![
            (0u8..6).prop_map(|i| Cidr::new(IpAddr::from([10, 10, i, 0]), 24)),
            (0u16..3).prop_map(|i| Cidr::new(IpAddr::from([0xfd00, 10, i, 0, 0, 0, 0, 0]), 64)),
        ]
    }

    fn via() -> impl Strategy<Value = IpAddr> {
        (1u8..4).prop_map(|i| IpAddr::from([192, 168, 77, i]))
    }

    proptest! {
        #[test]
        fn the_plan_applied_gives_the_desired_routes_and_leaves_foreign_destinations_alone(
            desired in proptest::collection::btree_map(destination(), via(), 0..8),
            ours in proptest::collection::vec((destination(), via()).prop_map(|(destination, via)| Route { destination, via }), 0..10),
            foreign in proptest::collection::btree_set(destination(), 0..4),
        ) {
            let p = plan(&desired, &ours, &foreign);
            let after = apply(&ours, &p);
            let free = |d: &Cidr| !foreign.contains(d);
            let want: BTreeSet<Route> =
                desired.iter().filter(|(d, _)| free(d)).map(|(d, v)| Route { destination: *d, via: *v }).collect();
            prop_assert_eq!(after.iter().filter(|r| free(&r.destination)).copied().collect::<BTreeSet<_>>(), want);
            prop_assert_eq!(
                after.iter().filter(|r| !free(&r.destination)).collect::<BTreeSet<_>>(),
                ours.iter().filter(|r| !free(&r.destination)).collect::<BTreeSet<_>>(),
                "routes of ours at a foreign destination are left as they are"
            );
            prop_assert!(p.put.iter().chain(&p.delete).all(|r| free(&r.destination)), "{:?}", p);
            prop_assert!(p.put.iter().all(|r| !ours.contains(r)), "nothing already there is put");
            prop_assert!(p.delete.iter().all(|r| ours.contains(r)), "only routes of ours are deleted");
            let held: BTreeSet<Cidr> =
                desired.keys().chain(ours.iter().map(|r| &r.destination)).filter(|d| !free(d)).copied().collect();
            prop_assert_eq!(p.foreign.iter().copied().collect::<BTreeSet<_>>(), held);
            let after: Vec<Route> = after.into_iter().collect();
            let again = plan(&desired, &after, &foreign);
            prop_assert!(again.put.is_empty() && again.delete.is_empty(), "applied, the plan is done: {:?}", again);
        }
    }

    #[test]
    fn forwarding_is_switched_on_and_a_failure_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("forwarding");
        std::fs::write(&path, "0\n").unwrap();
        switch_on(&path).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "1");
        let missing = dir.path().join("missing");
        let err = switch_on(&missing).unwrap_err().to_string();
        assert!(err.starts_with(&format!("cannot turn IP forwarding on in {}: ", missing.display())), "{err}");
    }
}
