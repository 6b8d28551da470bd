//! The bodies of the smaller messages: parse (the body after the 8-byte header), `buffer_len`
//! and emit (the body only). [`crate::message`] is the whole message: it adds the header and
//! dispatches on the type to these bodies and to the larger ones (`flow_mod`, `multipart`,
//! `packet_in2`, `flow_monitor`).
//!
//! Padding follows the crate's rule (see the crate documentation): between fixed fields it
//! must be zero. One file per message family.

mod bundle;
mod error_msg;
mod group_mod;
mod hello;
mod meter_mod;
mod packet;
mod switch;

pub use bundle::*;
pub use error_msg::*;
pub use group_mod::*;
pub use hello::*;
pub use meter_mod::*;
pub use packet::*;
pub use switch::*;
