//! npagent's own routes in the main routing table of its network namespace, through rtnetlink
//! (never by running `ip`): `<destination> via <gateway>`, marked by a route protocol number
//! of npagent's own, [`PROTOCOL`] (`ip route` shows them as `proto 78`). A route of any other
//! protocol is not npagent's: it is never replaced nor deleted, and [`Netlink::put_route`]
//! refuses a destination one holds.
//!
//! The kernel has no conditional replace, so ownership is checked where it can be atomically
//! and read back where it cannot: a route is first added exclusively (`NLM_F_EXCL`), and only
//! when that finds a route to the destination is it replaced, after a read showed no foreign
//! route there; a delete names the protocol, which the kernel matches.

use super::link::{errno, Netlink, EEXIST};
use crate::model::cidr::Cidr;
use futures::TryStreamExt;
use rtnetlink::packet_route::route::{
    RouteAddress, RouteAttribute, RouteHeader, RouteMessage, RouteProtocol, RouteType, RouteVia,
};
use rtnetlink::RouteMessageBuilder;
use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The route protocol (`rtm_protocol`) that marks a route as npagent's: unassigned in the
/// kernel's `rtnetlink.h` and iproute2's `rt_protos`.
pub const PROTOCOL: u8 = 78;

/// `ESRCH` (Linux errno value): no such route to delete.
const ESRCH: i32 = 3;

/// A route of npagent's: traffic to `destination` goes to `via`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Route {
    pub destination: Cidr,
    pub via: IpAddr,
}

impl std::fmt::Display for Route {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} via {}", self.destination, self.via)
    }
}

/// What the main table holds that npagent cares about.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MainTable {
    /// npagent's routes (protocol [`PROTOCOL`], with a gateway), both families.
    pub ours: Vec<Route>,
    /// The destinations of every other route: not npagent's to touch.
    pub foreign: BTreeSet<Cidr>,
}

/// Why a route could not be read, added or deleted; names the route.
#[derive(Debug, thiserror::Error)]
pub enum RouteError {
    #[error(transparent)]
    Open(#[from] super::link::LinkError),
    #[error("cannot read the main routing table: {0}")]
    Read(std::io::Error),
    /// Not a `#[source]`: the message ends with it already.
    #[error("route {route}: cannot {what}: {error}")]
    Netlink { route: Route, what: &'static str, error: std::io::Error },
    #[error("route {route}: cannot add: the main table holds a route to {} that npagent did not make (proto {protocol})", route.destination)]
    Foreign { route: Route, protocol: RouteProtocol },
    #[error("route {route}: {error}")]
    Invalid { route: Route, error: String },
}

impl Netlink {
    /// npagent's routes in the main table and the destinations of the others there.
    pub async fn main_table(&self) -> Result<MainTable, RouteError> {
        let mut table = MainTable::default();
        for ipv6 in [false, true] {
            for entry in self.main_routes(ipv6).await? {
                match entry {
                    Entry { protocol, destination, via: Some(via) } if protocol == PROTOCOL => {
                        table.ours.push(Route { destination, via })
                    }
                    Entry { protocol, destination, .. } if protocol != PROTOCOL => {
                        table.foreign.insert(destination);
                    }
                    // npagent makes none without a gateway: a replace would take it.
                    _ => {}
                }
            }
        }
        Ok(table)
    }

    /// The protocol of a route to exactly `destination` in the main table that is not
    /// npagent's, if there is one.
    pub async fn foreign_route(&self, destination: Cidr) -> Result<Option<RouteProtocol>, RouteError> {
        let routes = self.main_routes(destination.addr.is_ipv6()).await?;
        Ok(routes
            .into_iter()
            .find(|e| e.destination == destination && e.protocol != PROTOCOL)
            .map(|e| RouteProtocol::from(e.protocol)))
    }

    /// Adds `route`, or replaces npagent's route to its destination with it; a route to that
    /// destination that is not npagent's is left alone ([`RouteError::Foreign`]).
    pub async fn put_route(&self, route: &Route) -> Result<(), RouteError> {
        let message = message(route)?;
        match self.handle.route().add(message.clone()).execute().await {
            Ok(()) => Ok(()),
            Err(e) if errno(&e) == Some(EEXIST) => {
                if let Some(protocol) = self.foreign_route(route.destination).await? {
                    return Err(RouteError::Foreign { route: *route, protocol });
                }
                let replaced = self.handle.route().add(message).replace().execute().await;
                replaced.map_err(|e| failed(route, "replace", e))
            }
            Err(e) => Err(failed(route, "add", e)),
        }
    }

    /// Deletes npagent's `route` (the kernel matches the protocol: a route that is not
    /// npagent's is never deleted); says whether there was one.
    pub async fn delete_route(&self, route: &Route) -> Result<bool, RouteError> {
        match self.handle.route().del(message(route)?).execute().await {
            Ok(()) => Ok(true),
            Err(e) if errno(&e) == Some(ESRCH) => Ok(false),
            Err(e) => Err(failed(route, "delete", e)),
        }
    }

    /// The main table's routes of one family.
    async fn main_routes(&self, ipv6: bool) -> Result<Vec<Entry>, RouteError> {
        let request = if ipv6 {
            RouteMessageBuilder::<Ipv6Addr>::new().build()
        } else {
            RouteMessageBuilder::<Ipv4Addr>::new().build()
        };
        let mut dump = self.handle.route().get(request).execute();
        let mut entries = Vec::new();
        while let Some(msg) = dump.try_next().await.map_err(|e| RouteError::Read(io(e)))? {
            entries.extend(entry(&msg));
        }
        Ok(entries)
    }
}

/// A route of the main table, as far as npagent tells routes apart.
struct Entry {
    destination: Cidr,
    protocol: u8,
    /// Its gateway, when it has one.
    via: Option<IpAddr>,
}

/// `msg` as an [`Entry`], if it is a route of the main table.
fn entry(msg: &RouteMessage) -> Option<Entry> {
    let table = msg.attributes.iter().find_map(|a| match a {
        RouteAttribute::Table(t) => Some(*t),
        _ => None,
    });
    if table.unwrap_or(u32::from(msg.header.table)) != u32::from(RouteHeader::RT_TABLE_MAIN) {
        return None;
    }
    let unspecified = match msg.header.address_family {
        rtnetlink::packet_route::AddressFamily::Inet => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        rtnetlink::packet_route::AddressFamily::Inet6 => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        _ => return None,
    };
    let mut destination = unspecified;
    let mut via = None;
    for attribute in &msg.attributes {
        match attribute {
            RouteAttribute::Destination(address) => destination = ip(address)?,
            RouteAttribute::Gateway(address) => via = ip(address),
            RouteAttribute::Via(RouteVia::Inet(a)) => via = Some(IpAddr::V4(*a)),
            RouteAttribute::Via(RouteVia::Inet6(a)) => via = Some(IpAddr::V6(*a)),
            _ => {}
        }
    }
    let destination = Cidr::new(destination, msg.header.destination_prefix_length);
    Some(Entry { destination, protocol: msg.header.protocol.into(), via })
}

fn ip(address: &RouteAddress) -> Option<IpAddr> {
    match address {
        RouteAddress::Inet(a) => Some(IpAddr::V4(*a)),
        RouteAddress::Inet6(a) => Some(IpAddr::V6(*a)),
        _ => None,
    }
}

/// The message that adds or deletes npagent's `route`: main table, unicast, universe scope,
/// protocol [`PROTOCOL`].
fn message(route: &Route) -> Result<RouteMessage, RouteError> {
    let Route { destination, via } = *route;
    RouteMessageBuilder::<IpAddr>::new()
        .protocol(RouteProtocol::from(PROTOCOL))
        .kind(RouteType::Unicast)
        .destination_prefix(destination.addr, destination.prefix)
        .and_then(|b| b.gateway(via))
        .map(RouteMessageBuilder::build)
        .map_err(|e| RouteError::Invalid { route: *route, error: e.to_string() })
}

fn failed(route: &Route, what: &'static str, error: rtnetlink::Error) -> RouteError {
    RouteError::Netlink { route: *route, what, error: io(error) }
}

/// A netlink error as the errno it carries (`Network is unreachable (os error 101)`).
fn io(error: rtnetlink::Error) -> std::io::Error {
    match error {
        rtnetlink::Error::NetlinkError(msg) => msg.to_io(),
        other => std::io::Error::other(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::cidr::parse_cidr;

    fn route(destination: &str, via: &str) -> Route {
        Route { destination: parse_cidr(destination).unwrap(), via: via.parse().unwrap() }
    }

    #[test]
    fn a_route_reads_back_from_the_message_that_makes_it() {
        for r in [route("10.10.2.0/24", "192.168.77.2"), route("fd00:10:2::/64", "fd00:77::2")] {
            let msg = message(&r).unwrap();
            let e = entry(&msg).unwrap();
            assert_eq!((e.destination, e.via, e.protocol), (r.destination, Some(r.via), PROTOCOL));
        }
    }

    #[test]
    fn routes_of_other_tables_are_not_read() {
        let mut msg = message(&route("10.10.2.0/24", "192.168.77.2")).unwrap();
        msg.header.table = 252; // RT_TABLE_COMPAT: the table id is in RTA_TABLE
        msg.attributes.push(RouteAttribute::Table(1000));
        assert!(entry(&msg).is_none());
    }

    #[test]
    fn a_destination_of_the_other_family_than_its_gateway_is_refused_naming_the_route() {
        let r = Route { destination: parse_cidr("10.10.2.0/24").unwrap(), via: "fd00::2".parse().unwrap() };
        assert!(message(&r).is_ok(), "an IPv4 destination via IPv6 is RFC 5549's RTA_VIA");
        let r = Route { destination: parse_cidr("fd00:10::/64").unwrap(), via: "10.0.0.2".parse().unwrap() };
        let err = message(&r).unwrap_err().to_string();
        assert!(err.starts_with("route fd00:10::/64 via 10.0.0.2: "), "{err}");
    }
}
