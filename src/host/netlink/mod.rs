//! The node's network devices through netlink, never by running `ip` or `ethtool`: reading
//! and configuring a device and following its changes ([`link`], rtnetlink), and turning a
//! device's TX checksum offload off ([`ethtool`], ethtool's generic netlink family). Each has
//! its own error naming the device.
//! npagent's own routes in the main routing table ([`route`], rtnetlink), its error naming the route.

pub mod ethtool;
pub mod link;
pub mod route;
