//! The admin server's connection handling: HTTP/1 by hyper, bounded against whatever local
//! clients do, so that the kubelet's probes are answered while other processes hold
//! connections open.
//!
//! At most [`MAX_CONNECTIONS`] are served at once ([`super::slots`]). Each has
//! [`HEADER_READ_TIMEOUT`] to send each request head and [`CONNECTION_TIMEOUT`] in all. When
//! every slot is taken, a new connection takes the slot of the one that has waited longest for
//! a request head (accepted and silent, sending a head a byte at a time, or answered and idle
//! or not reading its answer), which is closed and counted
//! (`npagent_metrics_connections_evicted_total`); only when every slot holds a request being
//! answered right now is the new one refused (`npagent_metrics_connections_refused_total`).
//! Connections ended by a deadline are counted too (`npagent_metrics_connections_timed_out_total`).
//!
//! Why eviction. Any local user (and any hostNetwork pod) reaches the loopback port, from
//! 127.0.0.1 as the kubelet does, so the server can neither tell a probe by its source nor
//! give each client a share. What it can see is progress: a probe or a scrape sends its whole
//! request head as soon as it is connected, so among the connections waiting for a head it is
//! the newest, and the last to go; a client holding a slot by sending nothing, sending slowly
//! or not reading its answer grows older with every newcomer and is evicted first. The other
//! designs fail against a client that reopens what is closed: refusing newcomers when full
//! (as before) gave the slots to whoever took them first, and 300 such connections from an
//! unprivileged process made 176 of 200 probes fail; a shorter head deadline only shortens
//! each hold; a listener of its own for the probes is reached by the same client the same way
//! and would need a second port in every probe.
//!
//! Two things keep a probe from being shed before it is read: the kernel's queue of
//! connections not yet accepted is long ([`ACCEPT_BACKLOG`]), since with the usual 128 the
//! hostile connections in flight fill it and the kernel drops new SYNs, a probe's among them;
//! and the accept loop yields after each connection, so that its head is read before the next
//! accept. What remains is a client opening connections faster than the server accepts and
//! reads them (255 newer connections before a probe's head is read): a flood of CPU work, not
//! a held slot.
//!
//! An accept error (EMFILE, ECONNABORTED) is counted, reported at most once a minute and
//! retried after a short backoff, so the server outlives a file descriptor shortage.

use super::metrics::AgentMetrics;
use super::slots::{Admission, Slots};
use crate::rate_limited::RateLimitedWarning;
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpSocket};

/// Connections served at once; past that a new one evicts the connection that has waited
/// longest for a request head. A client holding more connections than this keeps the rest in
/// the kernel's accept queue, where a probe waits behind them: the more slots, the shorter
/// that wait (at 64, 300 hostile connections kept a probe waiting up to 0.97 s on a loaded
/// machine). Each costs a socket and an 8 KiB read buffer, so 256 of them stay far from a
/// process's usual limit of 1024 open files.
pub const MAX_CONNECTIONS: usize = 256;
/// How long a client has to send a request head.
pub(crate) const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(2);
/// How long one connection may stay open in all, answers included.
pub(crate) const CONNECTION_TIMEOUT: Duration = Duration::from_secs(5);
/// Connections the kernel queues for the accept loop (capped by `net.core.somaxconn`, 4096 by
/// default). Every connection a hostile client has in flight waits there, so a short queue
/// (the usual 128) overflows and the kernel drops SYNs, a probe's among them, before the
/// server ever sees them.
pub(crate) const ACCEPT_BACKLOG: u32 = 4096;
/// First and longest pause after a failed accept (doubling in between).
const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(5);
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// Answers one request (the method and path are all the admin server looks at).
pub(crate) type Respond = dyn Fn(&Request<Incoming>) -> Response<Full<Bytes>> + Send + Sync;

/// How a connection ended.
enum End {
    /// The client closed it, or sent something hyper refused (the client's problem).
    Client,
    /// A deadline: the request head's or the connection's.
    TimedOut,
    /// Its slot went to a newer connection (counted when it was taken).
    Evicted,
}

/// The admin server's listener on `addr`, with a queue of [`ACCEPT_BACKLOG`] connections.
pub(crate) fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() { TcpSocket::new_v4()? } else { TcpSocket::new_v6()? };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(ACCEPT_BACKLOG)
}

/// Serves `listener` with `respond` forever, counting accept errors and the connections
/// refused, evicted and timed out in `metrics`.
pub(crate) async fn serve(listener: TcpListener, respond: Arc<Respond>, metrics: Arc<AgentMetrics>) {
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new()).header_read_timeout(HEADER_READ_TIMEOUT);
    let slots = Slots::new(MAX_CONNECTIONS);
    let mut backoff = ACCEPT_BACKOFF_MIN;
    let mut accept_warning = RateLimitedWarning::default();
    loop {
        let sock = match listener.accept().await {
            Ok((sock, _)) => sock,
            Err(e) => {
                let errors = metrics.admin_accept_errors.inc() + 1;
                accept_warning.total(errors, |n| {
                    tracing::warn!("admin server: accept failed: {e} ({n} failures so far); retrying")
                });
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(ACCEPT_BACKOFF_MAX);
                continue;
            }
        };
        backoff = ACCEPT_BACKOFF_MIN;
        let mut slot = match slots.admit() {
            Admission::Admitted(slot) => slot,
            Admission::Evicting(slot) => {
                metrics.admin_connections_evicted.inc();
                slot
            }
            Admission::Refused => {
                // Closed at once: the client sees the connection end and retries at its next try.
                metrics.admin_connections_refused.inc();
                drop(sock);
                continue;
            }
        };
        let respond = Arc::clone(&respond);
        let requests = slot.requests();
        let conn = http.serve_connection(
            TokioIo::new(sock),
            service_fn(move |req| {
                requests.started();
                let resp = respond(&req);
                requests.answered();
                async move { Ok::<_, Infallible>(resp) }
            }),
        );
        let metrics = Arc::clone(&metrics);
        tokio::spawn(async move {
            let mut conn = std::pin::pin!(conn);
            let end = tokio::select! {
                served = conn.as_mut() => match served {
                    Err(e) if e.is_timeout() => End::TimedOut,
                    _ => End::Client,
                },
                () = tokio::time::sleep(CONNECTION_TIMEOUT) => End::TimedOut,
                () = slot.evicted() => End::Evicted,
            };
            // Counted while the socket is still open (it closes at the end of this block), so
            // a client that sees it closed finds it counted.
            if matches!(end, End::TimedOut) {
                metrics.admin_connections_timed_out.inc();
            }
        });
        // Lets the new connection read its request head before the next accept: under a flood
        // of connections a probe is not evicted before it has been read.
        tokio::task::yield_now().await;
    }
}
