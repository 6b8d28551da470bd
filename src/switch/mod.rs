//! The OpenFlow connection to Open vSwitch: a sans-IO [`session`] core, the tokio
//! [`connection`] task around it, and the [`SwitchHandle`] the rest of the agent uses; and
//! [`unixctl`], ovs-vswitchd's control socket (for what OpenFlow cannot set: conntrack zone
//! limits).
//!
//! ```no_run
//! # async fn demo() -> Result<(), npagent::switch::SwitchError> {
//! use npagent::switch::{spawn, ConnectionConfig};
//! let (switch, mut packet_ins) = spawn(ConnectionConfig::default());
//! switch.wait_connected(std::time::Duration::from_secs(5)).await?;
//! switch.install(vec![/* flow_mods */]).await?;
//! let flows = switch.dump_flows(None).await?;
//! # Ok(()) }
//! ```

mod bundle;
pub(crate) mod connection;
pub(crate) mod error;
mod handle;
pub mod session;
pub(crate) mod unixctl;

pub use crate::endpoint::{Endpoint, EndpointError};
pub use bundle::describe_flow;
pub use connection::{spawn, ConnectionConfig};
pub use error::{OfpError, SwitchError};
pub use handle::{ConnState, SwitchHandle};
pub use session::{CookieFilter, Event, Reply, RequestId, Session, SessionConfig};
