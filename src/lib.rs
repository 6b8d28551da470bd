//! npagent: Kubernetes NetworkPolicy enforcement and audit logging on an Open vSwitch bridge.
//!
//! Layers, each using only the ones below it: [`endpoint`] (where OVS listens), [`model`]
//! (our types), [`host`] (the OVSDB client and the node's network devices), [`source`] (where
//! the model comes from), [`compiler`] (pure: model to desired flows, diff), [`switch`] (the
//! OpenFlow connection), [`audit`] (packet-ins to log lines), [`admin`] (health and metrics
//! over HTTP), and [`agent`] wiring them.

pub mod admin;
pub mod agent;
pub mod audit;
pub mod cli;
pub mod cni;
pub mod compiler;
pub mod endpoint;
pub mod explain;
pub mod explain_command;
pub mod host;
pub mod install_cni;
pub mod json_stream;
pub mod k8s;
pub mod model;
pub mod ofp_tool;
pub mod rate_limited;
pub mod snapshot;
pub mod source;
pub mod switch;
