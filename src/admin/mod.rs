//! The admin server (`--admin-addr`): `/livez`, `/readyz` and `/metrics` over HTTP/1.
//!
//! - `/livez`: 200 while the agent's main loop comes round and its tasks run; 503 with the
//!   reason otherwise.
//! - `/readyz`: 200 once the bridge holds the committed resync of the current switch
//!   connection ([`health`]); 503 with a one-line reason otherwise.
//! - `/metrics`: the Prometheus text page ([`metrics`]).
//!
//! Any other path is 404, any other method than GET 405.

pub(crate) mod health;
pub mod metrics;
pub mod server;
mod slots;

use bytes::Bytes;
use health::Health;
use http_body_util::Full;
use hyper::{header, Method, Request, Response, StatusCode};
use prometheus_client::registry::Registry;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

/// What the admin server answers from: the agent's health and its metrics.
#[derive(Debug)]
pub(crate) struct Admin {
    health: Mutex<Health>,
    registry: Registry,
}

impl Admin {
    /// An admin state for `health` and the metrics of `registry`.
    pub(crate) fn new(health: Health, registry: Registry) -> Admin {
        Admin { health: Mutex::new(health), registry }
    }

    /// The health, for the agent to update. A panic while it was held leaves a verdict no
    /// worse than the last one: keep answering with it.
    pub(crate) fn health(&self) -> MutexGuard<'_, Health> {
        self.health.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The answer to a request for `path` with `method`, at `now`.
    pub(crate) fn respond(&self, method: &Method, path: &str, now: Instant) -> Response<Full<Bytes>> {
        let known = matches!(path, "/livez" | "/readyz" | "/metrics");
        if !known {
            // The path is not echoed: the answer's size stays the server's to choose.
            return text(StatusCode::NOT_FOUND, "no such page; there are /livez, /readyz and /metrics\n".to_owned());
        }
        if method != Method::GET {
            let mut resp = text(StatusCode::METHOD_NOT_ALLOWED, "only GET is allowed\n".to_owned());
            resp.headers_mut().insert(header::ALLOW, header::HeaderValue::from_static("GET"));
            return resp;
        }
        match path {
            "/livez" => verdict(self.health().liveness(now)),
            "/readyz" => verdict(self.health().readiness()),
            _ => {
                let mut resp = Response::new(Full::new(Bytes::from(metrics::render(&self.registry))));
                resp.headers_mut()
                    .insert(header::CONTENT_TYPE, header::HeaderValue::from_static(metrics::CONTENT_TYPE));
                resp
            }
        }
    }
}

/// 200 "ok", or 503 with the reason.
fn verdict(v: Result<(), String>) -> Response<Full<Bytes>> {
    match v {
        Ok(()) => text(StatusCode::OK, "ok\n".to_owned()),
        Err(reason) => text(StatusCode::SERVICE_UNAVAILABLE, format!("{reason}\n")),
    }
}

fn text(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = status;
    resp.headers_mut().insert(header::CONTENT_TYPE, header::HeaderValue::from_static("text/plain; charset=utf-8"));
    resp
}

/// Serves `admin` on `listener` forever (see [`server`]).
pub(crate) async fn serve(listener: tokio::net::TcpListener, admin: Arc<Admin>, counters: Arc<metrics::AgentMetrics>) {
    let respond: Arc<server::Respond> = Arc::new(move |req: &Request<hyper::body::Incoming>| {
        admin.respond(req.method(), req.uri().path(), Instant::now())
    });
    server::serve(listener, respond, counters).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use health::Progress;
    use http_body_util::BodyExt;

    fn admin() -> Admin {
        let m = Arc::new(metrics::AgentMetrics::default());
        let registry = metrics::registry(m, Arc::new(crate::audit::AuditStats::default()));
        Admin::new(Health::new("the manifests directory", Instant::now()), registry)
    }

    fn body(resp: Response<Full<Bytes>>) -> String {
        let bytes = futures::executor::block_on(resp.into_body().collect()).expect("full body").to_bytes();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    #[test]
    fn unknown_paths_are_404_and_other_methods_405() {
        let a = admin();
        let now = Instant::now();
        assert_eq!(a.respond(&Method::GET, "/", now).status(), StatusCode::NOT_FOUND);
        assert_eq!(a.respond(&Method::GET, "/metrics/x", now).status(), StatusCode::NOT_FOUND);
        assert_eq!(a.respond(&Method::POST, "/nope", now).status(), StatusCode::NOT_FOUND);
        let post = a.respond(&Method::POST, "/readyz", now);
        assert_eq!(post.status(), StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(post.headers()[header::ALLOW], "GET");
        assert_eq!(a.respond(&Method::HEAD, "/metrics", now).status(), StatusCode::METHOD_NOT_ALLOWED);
    }

    #[test]
    fn readyz_gives_the_reason_and_flips_with_the_progress() {
        let a = admin();
        let now = Instant::now();
        let resp = a.respond(&Method::GET, "/readyz", now);
        assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(body(resp), "waiting for the manifests directory; waiting for OVSDB; switch not connected\n");
        a.health().set_progress(Progress {
            sources_synced: true,
            ovsdb_read: true,
            connection: Some(1),
            committed: Some(1),
        });
        let resp = a.respond(&Method::GET, "/readyz", now);
        assert_eq!(resp.status(), StatusCode::OK);
        assert_eq!(body(resp), "ok\n");
        assert_eq!(a.respond(&Method::GET, "/livez", now).status(), StatusCode::OK);
    }

    #[test]
    fn metrics_are_prometheus_text() {
        let resp = admin().respond(&Method::GET, "/metrics", Instant::now());
        assert_eq!(resp.status(), StatusCode::OK);
        assert_eq!(resp.headers()[header::CONTENT_TYPE], metrics::CONTENT_TYPE);
        assert!(body(resp).contains("# TYPE npagent_bundle_commit_seconds histogram"));
    }
}
