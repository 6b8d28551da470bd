//! What npagent asks of the node's host, below both the sources that read the bridge and the
//! CNI plugin that writes it: the OVSDB client ([`ovsdb`]: JSON-RPC, transactions, the Antrea
//! port keys) and the kernel's network devices ([`netlink`]: rtnetlink and ethtool). Neither
//! knows what the answers are for; turning them into model events is `source`'s job, making an
//! attachment of them `cni`'s.

pub mod netlink;
pub mod ovsdb;
