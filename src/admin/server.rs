//! The admin server's connection handling: HTTP/1 by hyper, bounded against whatever clients
//! do. At most [`MAX_CONNECTIONS`] are served at once (more are closed at once and counted),
//! each has [`HEADER_READ_TIMEOUT`] to send a request head and [`CONNECTION_TIMEOUT`] in all,
//! and an accept error (EMFILE, ECONNABORTED) is counted, reported at most once a minute and
//! retried after a short backoff, so the server outlives a file descriptor shortage.

use super::metrics::AgentMetrics;
use crate::rate_limited::RateLimitedWarning;
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// Connections served at once; more are refused.
pub const MAX_CONNECTIONS: usize = 64;
/// How long a client has to send a request head.
pub(crate) const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(2);
/// How long one connection may stay open in all, answers included.
pub(crate) const CONNECTION_TIMEOUT: Duration = Duration::from_secs(5);
/// First and longest pause after a failed accept (doubling in between).
const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(5);
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// Answers one request (the method and path are all the admin server looks at).
pub(crate) type Respond = dyn Fn(&Request<Incoming>) -> Response<Full<Bytes>> + Send + Sync;

/// Serves `listener` with `respond` forever, counting accept errors and refused connections
/// in `metrics`.
pub(crate) async fn serve(listener: TcpListener, respond: Arc<Respond>, metrics: Arc<AgentMetrics>) {
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new()).header_read_timeout(HEADER_READ_TIMEOUT);
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
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
        let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
            // Closed at once: the client sees the connection end and retries at its next try.
            metrics.admin_connections_refused.inc();
            drop(sock);
            continue;
        };
        let respond = Arc::clone(&respond);
        let conn = http.serve_connection(
            TokioIo::new(sock),
            service_fn(move |req| {
                let resp = respond(&req);
                async move { Ok::<_, Infallible>(resp) }
            }),
        );
        tokio::spawn(async move {
            // A protocol error or a client gone is that client's problem; the deadline ends
            // a connection kept open too long.
            let _ = tokio::time::timeout(CONNECTION_TIMEOUT, conn).await;
            drop(slot);
        });
    }
}
