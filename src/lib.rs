//! npagent: Kubernetes NetworkPolicy enforcement and audit logging on an Open vSwitch bridge.
//!
//! Layers, each using only the ones below it: [`endpoint`] (where OVS listens), [`model`]
//! (our types), [`source`] (where the model comes from), [`compiler`] (pure: model to desired
//! flows, diff), [`switch`] (the OpenFlow connection), [`audit`] (packet-ins to log lines),
//! and [`agent`] wiring them.

pub mod endpoint;
pub mod model;
pub mod source;
pub mod compiler;
pub mod switch;
pub mod audit;
pub mod agent;
pub mod ofp_tool;
pub mod cli;
