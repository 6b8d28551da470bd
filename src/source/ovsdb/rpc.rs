//! RFC 7047 JSON-RPC transport: sending and framing messages.
//!
//! OVSDB sends JSON objects back to back with no delimiter, so messages are cut out of a
//! byte buffer with serde_json's streaming deserializer; an incomplete message stays buffered
//! until more bytes arrive.

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::endpoint::Endpoint;
use crate::source::Error;

/// Bytes buffered for one incomplete message before the connection is given up.
const MAX_MESSAGE: usize = 64 << 20;

/// Writes one JSON-RPC message.
pub async fn send<W: AsyncWrite + Unpin + ?Sized>(w: &mut W, msg: &Value) -> Result<(), Error> {
    let bytes = serde_json::to_vec(msg).map_err(Error::OvsdbJson)?;
    w.write_all(&bytes).await?;
    Ok(())
}

/// Sends one request (`method` with `params`) on a connection of its own and returns its
/// `result`, answering the server's echoes meanwhile. An `error` reply is an
/// [`Error::OvsdbProtocol`] naming the method.
pub async fn call(ep: &Endpoint, method: &str, params: Value) -> Result<Value, Error> {
    const ID: u64 = 1;
    let mut conn = ep.connect().await?;
    send(&mut conn, &json!({"method": method, "params": params, "id": ID})).await?;
    let mut framer = Framer::default();
    let mut chunk = vec![0u8; 16 * 1024];
    loop {
        let n = conn.read(&mut chunk).await?;
        if n == 0 {
            return Err(Error::OvsdbClosed);
        }
        framer.push(chunk.get(..n).unwrap_or_default())?;
        while let Some(msg) = framer.next_message()? {
            if msg.get("method").and_then(Value::as_str) == Some("echo") {
                let params = msg.get("params").cloned().unwrap_or(json!([]));
                send(&mut conn, &json!({"id": msg.get("id"), "result": params, "error": null})).await?;
            } else if msg.get("id").and_then(Value::as_u64) == Some(ID) {
                return match msg.get("error").filter(|e| !e.is_null()) {
                    Some(e) => Err(Error::OvsdbProtocol(format!("{method} refused: {e}"))),
                    None => Ok(msg.get("result").cloned().unwrap_or(Value::Null)),
                };
            }
        }
    }
}

/// Cuts complete JSON values out of a byte stream.
#[derive(Debug, Default)]
pub struct Framer {
    buf: Vec<u8>,
}

impl Framer {
    /// Appends received bytes.
    pub fn push(&mut self, data: &[u8]) -> Result<(), Error> {
        if self.buf.len().saturating_add(data.len()) > MAX_MESSAGE {
            return Err(Error::OvsdbTooLarge(self.buf.len().saturating_add(data.len())));
        }
        self.buf.extend_from_slice(data);
        Ok(())
    }

    /// The next complete message, `None` if more bytes are needed. A syntax error is final:
    /// the stream cannot be resynchronised.
    pub fn next_message(&mut self) -> Result<Option<Value>, Error> {
        let start = self.buf.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(self.buf.len());
        self.buf.drain(..start);
        if self.buf.is_empty() {
            return Ok(None);
        }
        let mut it = serde_json::Deserializer::from_slice(&self.buf).into_iter::<Value>();
        match it.next() {
            Some(Ok(v)) => {
                let used = it.byte_offset();
                self.buf.drain(..used.min(self.buf.len()));
                Ok(Some(v))
            }
            Some(Err(e)) if e.is_eof() => Ok(None),
            Some(Err(e)) => Err(Error::OvsdbJson(e)),
            None => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn messages_split_anywhere_are_reassembled() {
        let msgs = [
            json!({"id": 1, "result": {"Bridge": {}}, "error": null}),
            json!({"method": "echo", "params": [], "id": "echo"}),
            json!({"method": "update", "params": [null, {"Port": {"u": {"new": {"name": "p{}\"1"}}}}], "id": null}),
        ];
        let wire: Vec<u8> = msgs.iter().flat_map(|m| serde_json::to_vec(m).unwrap_or_default()).collect();
        for cut in 0..=wire.len() {
            let mut f = Framer::default();
            let mut got = Vec::new();
            for part in [&wire[..cut], &wire[cut..]] {
                f.push(part).expect("push");
                while let Some(m) = f.next_message().expect("valid") {
                    got.push(m);
                }
            }
            assert_eq!(got, msgs, "cut at {cut}");
        }
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(chunks in proptest::collection::vec(proptest::collection::vec(proptest::num::u8::ANY, 0..64), 0..8)) {
            let mut f = Framer::default();
            'outer: for c in chunks {
                f.push(&c).expect("small");
                loop {
                    match f.next_message() {
                        Ok(Some(_)) => {}
                        Ok(None) => break,
                        Err(_) => break 'outer,
                    }
                }
            }
        }
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        let mut f = Framer::default();
        f.push(b"{\"id\": 1} }{").expect("push");
        assert!(f.next_message().expect("first is fine").is_some());
        assert!(f.next_message().is_err());
    }
}
