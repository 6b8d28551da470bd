//! The packet-in forwarder: hands the switch's packet-ins to the audit logger.
//!
//! The switch's queue and the audit logger's stay two on purpose: the logger counts what it
//! sheds by direction and disposition (its `queue` gap records), which the switch, a layer
//! below audit, cannot do; one queue would turn those records into `connection` ones.

use crate::audit::AuditSender;
use ofp::packet_in2::PacketIn2;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

/// Starts forwarding `packet_ins` to `audit`; the sender ends it (see [`forward`]).
pub(super) fn spawn(
    packet_ins: mpsc::Receiver<PacketIn2>,
    audit: AuditSender,
) -> (JoinHandle<()>, oneshot::Sender<()>) {
    let (stop, stopped) = oneshot::channel();
    (tokio::spawn(forward(packet_ins, audit, stopped)), stop)
}

/// Hands the switch's packet-ins to the audit logger until `stop`; then takes those already
/// queued and ends, whatever the connection task is doing.
async fn forward(mut packet_ins: mpsc::Receiver<PacketIn2>, audit: AuditSender, mut stop: oneshot::Receiver<()>) {
    loop {
        tokio::select! {
            biased;
            _ = &mut stop => break,
            pi = packet_ins.recv() => match pi {
                Some(pi) => {
                    audit.submit(pi);
                }
                None => return,
            },
        }
    }
    packet_ins.close();
    while let Ok(pi) = packet_ins.try_recv() {
        audit.submit(pi);
    }
}
