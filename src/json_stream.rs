//! JSON values cut out of a byte stream, as the JSON-RPC peers npagent talks to send them
//! (OVSDB, ovs-vswitchd's control socket): back to back, with no delimiter. An incomplete
//! value stays buffered until more bytes arrive.

use serde_json::Value;

/// Why the stream cannot go on.
#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    /// More than the stream's limit is buffered for one value.
    #[error("{0} bytes buffered for one message")]
    TooLarge(usize),
    /// A syntax error: final, the stream cannot be resynchronised.
    #[error("{0}")]
    Json(serde_json::Error),
}

/// Cuts complete JSON values out of a byte stream.
#[derive(Debug)]
pub struct JsonStream {
    buf: Vec<u8>,
    /// Bytes buffered for one incomplete value before the stream is given up.
    max: usize,
}

impl JsonStream {
    /// A stream that buffers at most `max` bytes for one value.
    pub fn new(max: usize) -> JsonStream {
        JsonStream { buf: Vec::new(), max }
    }

    /// Appends received bytes.
    pub fn push(&mut self, data: &[u8]) -> Result<(), StreamError> {
        let len = self.buf.len().saturating_add(data.len());
        if len > self.max {
            return Err(StreamError::TooLarge(len));
        }
        self.buf.extend_from_slice(data);
        Ok(())
    }

    /// The first byte of the next value, leading whitespace dropped; `None` while none came.
    pub fn peek(&mut self) -> Option<u8> {
        let start = self.buf.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(self.buf.len());
        self.buf.drain(..start);
        self.buf.first().copied()
    }

    /// The next complete value, `None` if more bytes are needed.
    pub fn next_value(&mut self) -> Result<Option<Value>, StreamError> {
        if self.peek().is_none() {
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
            Some(Err(e)) => Err(StreamError::Json(e)),
            None => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const MAX: usize = 1 << 20;

    #[test]
    fn messages_split_anywhere_are_reassembled() {
        let msgs = [
            json!({"id": 1, "result": {"Bridge": {}}, "error": null}),
            json!({"method": "echo", "params": [], "id": "echo"}),
            json!({"method": "update", "params": [null, {"Port": {"u": {"new": {"name": "p{}\"1"}}}}], "id": null}),
        ];
        let wire: Vec<u8> = msgs.iter().flat_map(|m| serde_json::to_vec(m).unwrap_or_default()).collect();
        for cut in 0..=wire.len() {
            let mut f = JsonStream::new(MAX);
            let mut got = Vec::new();
            for part in [&wire[..cut], &wire[cut..]] {
                f.push(part).expect("push");
                while let Some(m) = f.next_value().expect("valid") {
                    got.push(m);
                }
            }
            assert_eq!(got, msgs, "cut at {cut}");
        }
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(chunks in proptest::collection::vec(proptest::collection::vec(proptest::num::u8::ANY, 0..64), 0..8)) {
            let mut f = JsonStream::new(MAX);
            'outer: for c in chunks {
                f.push(&c).expect("small");
                loop {
                    match f.next_value() {
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
        let mut f = JsonStream::new(MAX);
        f.push(b"{\"id\": 1} }{").expect("push");
        assert!(f.next_value().expect("first is fine").is_some());
        assert!(f.next_value().is_err());
        assert!(matches!(JsonStream::new(4).push(b"{\"id\""), Err(StreamError::TooLarge(5))));
    }
}
