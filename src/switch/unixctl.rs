//! A client of ovs-vswitchd's control socket (unixctl, what `ovs-appctl` speaks): JSON-RPC
//! 1.0 over a Unix socket, one request `{"method","params","id"}` answered by one
//! `{"id","result","error"}`, with no framing but the JSON values themselves.
//!
//! Sans-IO at its core ([`encode_request`], [`ReplyDecoder`] on [`JsonStream`]); [`call`] is the one function
//! that does I/O: it connects, sends one request and reads its reply, within a timeout.

use crate::json_stream::{JsonStream, StreamError};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The largest reply npagent takes (OVS's own answers to the commands npagent sends are far
/// smaller; `dpctl/ct-get-limits` for every zone of a full node is some kilobytes).
pub(crate) const MAX_REPLY: usize = 1 << 20;

/// What can go wrong talking to the control socket.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum UnixctlError {
    #[error("cannot read the pidfile {path}: {error}")]
    Pidfile {
        path: PathBuf,
        #[source]
        error: std::io::Error,
    },
    #[error("the pidfile {path} holds no process id: {text:?}")]
    BadPidfile { path: PathBuf, text: String },
    #[error("cannot reach ovs-vswitchd's control socket {path}: {error}")]
    Connect {
        path: PathBuf,
        #[source]
        error: std::io::Error,
    },
    #[error("ovs-vswitchd's control socket {path}: {error}")]
    Io {
        path: PathBuf,
        #[source]
        error: std::io::Error,
    },
    #[error("ovs-vswitchd's control socket {path} did not answer {method} within {timeout:?}")]
    Timeout { path: PathBuf, method: String, timeout: Duration },
    #[error("ovs-vswitchd closed its control socket before answering")]
    Closed,
    #[error("ovs-vswitchd's reply is over {MAX_REPLY} bytes")]
    TooLong,
    #[error("ovs-vswitchd's reply is not JSON-RPC: {0}")]
    Malformed(String),
    #[error("ovs-vswitchd's reply has id {got}, not {want}")]
    WrongId { got: String, want: u64 },
    /// The command ran and failed: OVS's own message.
    #[error("ovs-vswitchd refused {method}: {message}")]
    Refused { method: String, message: String },
}

/// The bytes of one request. Every parameter is a string, as unixctl wants them.
pub(crate) fn encode_request(id: u64, method: &str, params: &[String]) -> Vec<u8> {
    serde_json::json!({ "method": method, "params": params, "id": id }).to_string().into_bytes()
}

/// A reply: the command's output, or its error message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub id: u64,
    pub(crate) outcome: Result<String, String>,
}

#[derive(Deserialize)]
struct Wire {
    id: serde_json::Value,
    #[serde(default)]
    result: serde_json::Value,
    #[serde(default)]
    error: serde_json::Value,
}

/// Splits the byte stream from the socket into replies (JSON objects, back to back).
#[derive(Debug)]
pub(crate) struct ReplyDecoder {
    stream: JsonStream,
}

impl Default for ReplyDecoder {
    fn default() -> Self {
        ReplyDecoder { stream: JsonStream::new(MAX_REPLY) }
    }
}

impl ReplyDecoder {
    /// Takes bytes read from the socket.
    pub(crate) fn push(&mut self, bytes: &[u8]) -> Result<(), UnixctlError> {
        self.stream.push(bytes).map_err(stream_error)
    }

    /// The next complete reply, if the bytes so far hold one.
    pub(crate) fn next_reply(&mut self) -> Result<Option<Reply>, UnixctlError> {
        match self.stream.peek() {
            None | Some(b'{') => {}
            Some(b) => return Err(UnixctlError::Malformed(format!("byte {:?} outside an object", char::from(b)))),
        }
        let Some(value) = self.stream.next_value().map_err(stream_error)? else { return Ok(None) };
        let wire: Wire = serde_json::from_value(value).map_err(|e| UnixctlError::Malformed(e.to_string()))?;
        let id = wire.id.as_u64().ok_or_else(|| UnixctlError::Malformed(format!("id {} is no number", wire.id)))?;
        let text = |v: &serde_json::Value| match v {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let outcome = if wire.error.is_null() { Ok(text(&wire.result)) } else { Err(text(&wire.error)) };
        Ok(Some(Reply { id, outcome }))
    }
}

fn stream_error(e: StreamError) -> UnixctlError {
    match e {
        StreamError::TooLarge(_) => UnixctlError::TooLong,
        StreamError::Json(e) => UnixctlError::Malformed(e.to_string()),
    }
}

/// The socket a target names: a pidfile (`…/ovs-vswitchd.pid`, as `ovs-appctl -t` takes it)
/// stands for `…/ovs-vswitchd.<pid>.ctl` beside it, read anew at each call (the pid changes
/// when ovs-vswitchd restarts); any other path is the socket itself.
pub(crate) fn socket_path(target: &Path) -> Result<PathBuf, UnixctlError> {
    if target.extension().is_none_or(|e| e != "pid") {
        return Ok(target.to_path_buf());
    }
    let text =
        std::fs::read_to_string(target).map_err(|error| UnixctlError::Pidfile { path: target.to_path_buf(), error })?;
    let pid: u32 = text
        .trim()
        .parse()
        .map_err(|_| UnixctlError::BadPidfile { path: target.to_path_buf(), text: text.chars().take(40).collect() })?;
    let stem = target.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    Ok(target.with_file_name(format!("{stem}.{pid}.ctl")))
}

/// Runs one command on the daemon at `target` (a socket or a pidfile, [`socket_path`]):
/// its output, or why not.
pub(crate) async fn call(
    target: &Path,
    method: &str,
    params: &[String],
    timeout: Duration,
) -> Result<String, UnixctlError> {
    let path = socket_path(target)?;
    let io = |error| UnixctlError::Io { path: path.clone(), error };
    let exchange = async {
        let mut stream = tokio::net::UnixStream::connect(&path)
            .await
            .map_err(|error| UnixctlError::Connect { path: path.clone(), error })?;
        const ID: u64 = 0;
        stream.write_all(&encode_request(ID, method, params)).await.map_err(io)?;
        let mut decoder = ReplyDecoder::default();
        let mut chunk = [0u8; 4096];
        loop {
            let n = stream.read(&mut chunk).await.map_err(io)?;
            if n == 0 {
                return Err(UnixctlError::Closed);
            }
            decoder.push(&chunk[..n])?;
            if let Some(reply) = decoder.next_reply()? {
                if reply.id != ID {
                    return Err(UnixctlError::WrongId { got: reply.id.to_string(), want: ID });
                }
                return reply.outcome.map_err(|message| UnixctlError::Refused {
                    method: method.to_string(),
                    message: message.trim_end().to_string(),
                });
            }
        }
    };
    tokio::time::timeout(timeout, exchange)
        .await
        .unwrap_or_else(|_| Err(UnixctlError::Timeout { path: path.clone(), method: method.to_string(), timeout }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(bytes: &[u8]) -> Result<Option<Reply>, UnixctlError> {
        let mut d = ReplyDecoder::default();
        d.push(bytes)?;
        d.next_reply()
    }

    #[test]
    fn requests_are_json_rpc_with_string_params() {
        let req = encode_request(3, "dpctl/ct-set-limits", &["zone=7,limit=100".into()]);
        let v: serde_json::Value = serde_json::from_slice(&req).unwrap();
        assert_eq!(v, serde_json::json!({"method": "dpctl/ct-set-limits", "params": ["zone=7,limit=100"], "id": 3}));
    }

    #[test]
    fn replies_are_found_in_pieces_and_strings_may_hold_braces() {
        let wire = br#" {"id":0,"result":"zone=7,limit=5,count=0 {\"}","error":null}{"id":1"#;
        let mut d = ReplyDecoder::default();
        for piece in wire.chunks(5) {
            d.push(piece).unwrap();
        }
        let r = d.next_reply().unwrap().unwrap();
        assert_eq!(r, Reply { id: 0, outcome: Ok("zone=7,limit=5,count=0 {\"}".into()) });
        assert_eq!(d.next_reply().unwrap(), None, "the second reply is not complete");
    }

    #[test]
    fn an_error_reply_carries_ovs_message() {
        let r = decode(br#"{"error":"invalid zone\n","id":0,"result":null}"#).unwrap().unwrap();
        assert_eq!(r.outcome, Err("invalid zone\n".into()));
    }

    #[test]
    fn garbage_is_an_error_naming_it_never_a_panic() {
        for (bad, culprit) in [
            (&b"[1,2]"[..], "'['"),
            (b"{\"id\":\"x\",\"result\":1}", "id \"x\""),
            (b"{\"id\":0,}", "trailing comma"),
            (b"}", "'}'"),
        ] {
            let err = decode(bad).expect_err(&String::from_utf8_lossy(bad)).to_string();
            assert!(err.contains(culprit), "{err}");
        }
        let mut d = ReplyDecoder::default();
        assert!(matches!(d.push(&vec![b'{'; MAX_REPLY + 1]), Err(UnixctlError::TooLong)));
    }

    #[test]
    fn a_pidfile_names_the_socket_beside_it() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("ovs-vswitchd.pid");
        std::fs::write(&pidfile, "4242\n").unwrap();
        assert_eq!(socket_path(&pidfile).unwrap(), dir.path().join("ovs-vswitchd.4242.ctl"));
        let socket = dir.path().join("vswitchd.ctl");
        assert_eq!(socket_path(&socket).unwrap(), socket);
        std::fs::write(&pidfile, "not a pid").unwrap();
        let err = socket_path(&pidfile).unwrap_err().to_string();
        assert!(err.contains("ovs-vswitchd.pid") && err.contains("not a pid"), "{err}");
        let err = socket_path(&dir.path().join("gone.pid")).unwrap_err().to_string();
        assert!(err.contains("gone.pid"), "{err}");
    }

    #[tokio::test]
    async fn a_call_sends_one_request_and_returns_the_result() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ctl");
        let listener = tokio::net::UnixListener::bind(&path).unwrap();
        let server = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut buf = vec![0u8; 4096];
            let n = s.read(&mut buf).await.unwrap();
            let req: serde_json::Value = serde_json::from_slice(&buf[..n]).unwrap();
            s.write_all(br#"{"id":0,"result":"ok\n","error":null}"#).await.unwrap();
            req
        });
        let out = call(&path, "dpctl/ct-get-maxconns", &[], Duration::from_secs(5)).await.unwrap();
        assert_eq!(out, "ok\n");
        assert_eq!(server.await.unwrap()["method"], "dpctl/ct-get-maxconns");
        let err = call(&dir.path().join("none"), "x", &[], Duration::from_secs(5)).await.unwrap_err();
        assert!(matches!(err, UnixctlError::Connect { .. }), "{err}");
    }
}
