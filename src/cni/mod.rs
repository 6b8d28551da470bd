//! npagent as the node's CNI plugin: the `npagent` binary started by a runtime with
//! `CNI_COMMAND` set is a thin client ([`plugin`]) of the agent's unix socket
//! ([`server`]), where the agent attaches pods itself ([`attach`]): the address from the
//! configuration's IPAM plugin ([`ipam`]), a veth pair ([`veth`]) and a bridge port with the
//! pod's `external_ids` ([`port`]), answered only once the pod's flows are installed. The
//! spec's types are in [`spec`].
//!
//! Only [`plugin`], which the binary runs, and [`spec`], the types of its requests and
//! answers, are public; the rest is the agent's own.

pub(crate) mod attach;
pub(crate) mod ipam;
pub mod plugin;
pub(crate) mod port;
pub(crate) mod server;
pub mod spec;
pub(crate) mod veth;
