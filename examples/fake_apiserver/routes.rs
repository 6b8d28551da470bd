//! Requests to responses: `GET` of a cluster-wide collection is a list (one page of `limit`
//! items from the `continue` token's place) or, with `watch=true` (or `1`), a watch; anything
//! else gets the API server's `Status` object with the matching code. Each request is logged
//! to stderr on one line, after the wall-clock time it was answered at (seconds since the
//! epoch, microseconds), so that a log can be laid next to a client's.

use std::convert::Infallible;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full};
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::json;

use crate::cluster::{Cluster, Collection, Continue};
use crate::query::Query;
use crate::watch;

pub type Body = UnsyncBoxBody<Bytes, Infallible>;

/// The response to `req`, logged.
pub fn respond<B>(cluster: &Cluster, req: &Request<B>) -> Response<Body> {
    let (resp, note) = route(cluster, req);
    let t = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    let (secs, micros) = (t.as_secs(), t.subsec_micros());
    eprintln!("{secs}.{micros:06} {} {} -> {} {note}", req.method(), req.uri(), resp.status().as_u16());
    resp
}

/// The response, and what to say about it in the log.
fn route<B>(cluster: &Cluster, req: &Request<B>) -> (Response<Body>, String) {
    if req.method() != Method::GET {
        let msg = format!("method {} is not served here", req.method());
        return (status(StatusCode::METHOD_NOT_ALLOWED, "MethodNotAllowed", &msg), msg);
    }
    let Some(collection) = cluster.at(req.uri().path()) else {
        let msg = "the server could not find the requested resource";
        return (status(StatusCode::NOT_FOUND, "NotFound", msg), "(not a path this stand-in serves)".into());
    };
    let outcome = Query::parse(req.uri().query()).and_then(|q| match q.get("watch") {
        Some("true" | "1") => watch(cluster, collection, &q),
        None | Some("false" | "0") => list(cluster, collection, &q),
        Some(v) => Err(format!("watch={v:?} is neither true nor false")),
    });
    match outcome {
        Ok(ok) => ok,
        Err(msg) => (status(StatusCode::BAD_REQUEST, "BadRequest", &msg), msg),
    }
}

fn list(cluster: &Cluster, collection: &Collection, q: &Query) -> Result<(Response<Body>, String), String> {
    q.number("resourceVersion")?; // any version is the current one: nothing ever changes
    let limit = q.number("limit")?.filter(|&l| l > 0).map(|l| usize::try_from(l).unwrap_or(usize::MAX));
    let from = match q.get("continue").filter(|c| !c.is_empty()) {
        None => 0,
        Some(token) => {
            let Some(c) = Continue::parse(token) else {
                return Err(format!("continue token {token:?} is not valid"));
            };
            if c.resource_version != cluster.resource_version {
                let msg = "the provided continue parameter is too old; list again";
                return Ok((status(StatusCode::GONE, "Expired", msg), msg.into()));
            }
            c.offset
        }
    };
    let (body, n) = collection.page(from, limit, cluster.resource_version);
    let note = format!("{n} items, {} KiB", body.len() / 1024);
    Ok((json_response(StatusCode::OK, Full::new(body).boxed_unsync()), note))
}

fn watch(cluster: &Cluster, collection: &Collection, q: &Query) -> Result<(Response<Body>, String), String> {
    q.number("resourceVersion")?;
    if q.get("sendInitialEvents") == Some("true") {
        return Err("sendInitialEvents (streaming lists) is not served by this stand-in".into());
    }
    let timeout = q.number("timeoutSeconds")?.map_or(watch::DEFAULT_TIMEOUT, Duration::from_secs);
    let bookmarks = q.get("allowWatchBookmarks") == Some("true");
    let body = watch::body(collection.resource, cluster.resource_version, timeout, bookmarks);
    let note = format!("watching for {}s{}", timeout.as_secs(), if bookmarks { " with bookmarks" } else { "" });
    Ok((json_response(StatusCode::OK, body), note))
}

/// The API server's error object: `{"kind":"Status",...,"status":"Failure",...}`.
fn status(code: StatusCode, reason: &str, message: &str) -> Response<Body> {
    let body = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "message": message, "reason": reason, "code": code.as_u16(),
    });
    json_response(code, Full::new(Bytes::from(body.to_string())).boxed_unsync())
}

fn json_response(code: StatusCode, body: Body) -> Response<Body> {
    let mut resp = Response::new(body);
    *resp.status_mut() = code;
    resp.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}
