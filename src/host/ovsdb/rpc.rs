//! RFC 7047 JSON-RPC transport: sending and framing messages.
//!
//! OVSDB sends JSON objects back to back with no delimiter: [`JsonStream`] cuts them out.

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::Error;
use crate::endpoint::Endpoint;
use crate::json_stream::JsonStream;

/// Bytes buffered for one incomplete message before the connection is given up.
pub const MAX_MESSAGE: usize = 64 << 20;

/// Writes one JSON-RPC message.
pub async fn send<W: AsyncWrite + Unpin + ?Sized>(w: &mut W, msg: &Value) -> Result<(), Error> {
    let bytes = serde_json::to_vec(msg).map_err(Error::Json)?;
    w.write_all(&bytes).await?;
    Ok(())
}

/// Sends one request (`method` with `params`) on a connection of its own and returns its
/// `result`, answering the server's echoes meanwhile. An `error` reply is an
/// [`Error::Protocol`] naming the method.
pub async fn call(ep: &Endpoint, method: &str, params: Value) -> Result<Value, Error> {
    const ID: u64 = 1;
    let mut conn = ep.connect().await?;
    send(&mut conn, &json!({"method": method, "params": params, "id": ID})).await?;
    let mut framer = JsonStream::new(MAX_MESSAGE);
    let mut chunk = vec![0u8; 16 * 1024];
    loop {
        let n = conn.read(&mut chunk).await?;
        if n == 0 {
            return Err(Error::Closed);
        }
        framer.push(chunk.get(..n).unwrap_or_default())?;
        while let Some(msg) = framer.next_value()? {
            if msg.get("method").and_then(Value::as_str) == Some("echo") {
                let params = msg.get("params").cloned().unwrap_or(json!([]));
                send(&mut conn, &json!({"id": msg.get("id"), "result": params, "error": null})).await?;
            } else if msg.get("id").and_then(Value::as_u64) == Some(ID) {
                return match msg.get("error").filter(|e| !e.is_null()) {
                    Some(e) => Err(Error::Protocol(format!("{method} refused: {e}"))),
                    None => Ok(msg.get("result").cloned().unwrap_or(Value::Null)),
                };
            }
        }
    }
}
