//! Framing for tokio-util. IMPLEMENTATION OWNER: proto-msgs helper.
