//! The body of a watch response: one JSON event per line, streamed (chunked) until the
//! request's timeout. The objects never change, so the only events are BOOKMARKs (when the
//! client allows them), every [`BOOKMARK_EVERY`], carrying the cluster's resourceVersion.

use std::convert::Infallible;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use serde_json::json;
use tokio::time::{sleep_until, Instant};

use crate::cluster::Resource;

/// How often a watch sends a bookmark. The API server sends them about once a minute; more
/// often here so that a short benchmark sees the watches work.
pub const BOOKMARK_EVERY: Duration = Duration::from_secs(3);

/// The timeout of a watch that names none (the API server picks 30 to 60 minutes).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1800);

/// The event stream of a watch of `resource` at resourceVersion `rv`: bookmarks (if
/// `bookmarks`) until `timeout` has passed, then the end of the body.
pub fn body(
    resource: &'static Resource,
    rv: u64,
    timeout: Duration,
    bookmarks: bool,
) -> UnsyncBoxBody<Bytes, Infallible> {
    let event = json!({
        "type": "BOOKMARK",
        "object": {"kind": resource.kind, "apiVersion": resource.api_version, "metadata": {"resourceVersion": rv.to_string()}},
    });
    let line = Bytes::from(format!("{event}\n"));
    let start = Instant::now();
    let deadline = start + timeout;
    let events = futures::stream::unfold(start + BOOKMARK_EVERY, move |next| {
        let line = line.clone();
        async move {
            if !bookmarks || next >= deadline {
                sleep_until(deadline).await;
                return None;
            }
            sleep_until(next).await;
            Some((Ok::<_, Infallible>(Frame::data(line)), next + BOOKMARK_EVERY))
        }
    });
    StreamBody::new(events).boxed_unsync()
}
