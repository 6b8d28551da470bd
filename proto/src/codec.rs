//! Framing of whole OpenFlow messages for `tokio_util::codec` (feature `codec`).
//!
//! The decoder only frames: it waits for the 8-byte header, then for `length` bytes, and
//! yields the raw message as a [`Frame`]. Decoding the body is a separate step
//! ([`Frame::parse`]) so that a bad body can be answered with an OFPT_ERROR while the
//! connection stays up; only a length field below 8 (the stream cannot be re-synchronised)
//! is a [`FrameError`], after which the connection must be closed.
//!
//! A length field below 8 is rejected at once instead of being treated as "wait for more",
//! so a bad header can never make the decoder spin (tokio-util's `LengthDelimitedCodec`
//! loops on a zero length).

use crate::error::Error;
use crate::header::Header;
use crate::message::Message;
use bytes::{Buf, Bytes, BytesMut};
use tokio_util::codec::{Decoder, Encoder};

/// One whole message as received: header plus body, not yet decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    bytes: Bytes,
    header: Header,
}

impl Frame {
    /// Wraps the bytes of exactly one whole message (checks the header and its length).
    pub fn new(bytes: Bytes) -> Result<Frame, Error> {
        let header = Header::parse(&bytes)?;
        if usize::from(header.length) != bytes.len() {
            return Err(Error::BadLength { what: "ofp_header length", len: header.length.into() });
        }
        Ok(Frame { bytes, header })
    }

    /// The message's header (version, type, length, xid), valid even when the body is not.
    pub fn header(&self) -> Header {
        self.header
    }

    /// The whole message as received.
    pub fn bytes(&self) -> &Bytes {
        &self.bytes
    }

    /// Takes the whole message bytes.
    pub fn into_bytes(self) -> Bytes {
        self.bytes
    }

    /// Decodes the message.
    pub fn parse(&self) -> Result<Message, Error> {
        Message::parse(&self.bytes)
    }
}

/// Why a stream of OpenFlow messages cannot be framed (the connection must close) or a
/// message cannot be encoded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// The header's length field is below the 8-byte header itself.
    #[error("OpenFlow framing: length field {len} below the 8-byte header (xid {xid:#x})")]
    BadLength { len: u16, xid: u32 },
    /// A message to send could not be encoded.
    #[error("OpenFlow encode: {0}")]
    Encode(#[from] Error),
    /// The underlying transport failed.
    #[error("OpenFlow transport: {0}")]
    Io(#[from] std::io::Error),
}

/// Frames OpenFlow messages on a byte stream: decodes [`Frame`]s, encodes [`Message`]s
/// (by value or reference) and raw [`Frame`]s.
#[derive(Debug, Clone, Copy, Default)]
pub struct OfpCodec;

impl OfpCodec {
    /// A new codec (it has no state: every frame carries its own length).
    pub fn new() -> Self {
        OfpCodec
    }
}

impl Decoder for OfpCodec {
    type Item = Frame;
    type Error = FrameError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Frame>, FrameError> {
        let Some(header) = Header::peek(src) else {
            src.reserve(Header::LEN - src.len());
            return Ok(None);
        };
        let need = usize::from(header.length);
        if need < Header::LEN {
            return Err(FrameError::BadLength { len: header.length, xid: header.xid });
        }
        if src.len() < need {
            src.reserve(need - src.len());
            return Ok(None);
        }
        let bytes = src.split_to(need).freeze();
        Ok(Some(Frame { bytes, header }))
    }

    fn decode_eof(&mut self, buf: &mut BytesMut) -> Result<Option<Frame>, FrameError> {
        match self.decode(buf)? {
            Some(frame) => Ok(Some(frame)),
            None if buf.is_empty() => Ok(None),
            None => {
                let have = buf.remaining();
                buf.clear();
                Err(FrameError::Io(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    format!("connection closed inside an OpenFlow message ({have} bytes pending)"),
                )))
            }
        }
    }
}

impl Encoder<&Message> for OfpCodec {
    type Error = FrameError;

    fn encode(&mut self, item: &Message, dst: &mut BytesMut) -> Result<(), FrameError> {
        item.emit(dst).map_err(FrameError::Encode)
    }
}

impl Encoder<Message> for OfpCodec {
    type Error = FrameError;

    fn encode(&mut self, item: Message, dst: &mut BytesMut) -> Result<(), FrameError> {
        item.emit(dst).map_err(FrameError::Encode)
    }
}

impl Encoder<Frame> for OfpCodec {
    type Error = FrameError;

    fn encode(&mut self, item: Frame, dst: &mut BytesMut) -> Result<(), FrameError> {
        dst.extend_from_slice(&item.bytes);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Payload;

    #[test]
    fn waits_for_header_then_body_and_splits_one_message() {
        let mut c = OfpCodec::new();
        let mut buf = BytesMut::from(&[6u8, 2, 0, 12][..]);
        assert!(c.decode(&mut buf).unwrap().is_none());
        buf.extend_from_slice(&[0, 0, 0, 7, 0xaa]);
        assert!(c.decode(&mut buf).unwrap().is_none(), "9 of 12 bytes");
        buf.extend_from_slice(&[0xbb, 0xcc, 0xdd, 6, 3]);
        let f = c.decode(&mut buf).unwrap().unwrap();
        assert_eq!(f.header().xid, 7);
        assert_eq!(f.parse().unwrap().payload, Payload::EchoRequest(Bytes::from_static(&[0xaa, 0xbb, 0xcc, 0xdd])));
        assert_eq!(&buf[..], &[6, 3], "the next message's bytes stay");
    }

    #[test]
    fn length_below_eight_is_an_error_every_time() {
        for len in 0u8..8 {
            let mut c = OfpCodec::new();
            let mut buf = BytesMut::from(&[6u8, 0, 0, len, 0, 0, 0, 1][..]);
            assert!(matches!(c.decode(&mut buf), Err(FrameError::BadLength { .. })), "len {len}");
            assert!(matches!(c.decode(&mut buf), Err(FrameError::BadLength { .. })), "len {len} again");
        }
    }

    #[test]
    fn framed_read_yields_one_error_then_ends_instead_of_looping() {
        use futures::StreamExt;
        use tokio_util::codec::FramedRead;
        // A barrier, then a header with length 0 followed by more bytes.
        let mut input = vec![6u8, 20, 0, 8, 0, 0, 0, 1, 6, 0, 0, 0, 0, 0, 0, 2];
        input.extend(std::iter::repeat_n(0u8, 1000));
        let mut framed = FramedRead::new(&input[..], OfpCodec::new());
        futures::executor::block_on(async {
            assert_eq!(framed.next().await.unwrap().unwrap().header().kind, crate::MsgKind::BarrierRequest);
            assert!(matches!(framed.next().await, Some(Err(FrameError::BadLength { len: 0, xid: 2 }))));
            assert!(framed.next().await.is_none(), "the stream ends after a framing error");
        });
    }

    #[test]
    fn bad_body_is_still_a_frame() {
        let mut c = OfpCodec::new();
        // A FEATURES_REPLY with a 1-byte body: framing is fine, parsing fails.
        let mut buf = BytesMut::from(&[6u8, 6, 0, 9, 0, 0, 0, 5, 0][..]);
        let f = c.decode(&mut buf).unwrap().unwrap();
        assert_eq!(f.header().xid, 5);
        assert!(f.parse().is_err());
        assert!(buf.is_empty());
    }

    #[test]
    fn eof_inside_a_message_is_an_error() {
        let mut c = OfpCodec::new();
        let mut buf = BytesMut::from(&[6u8, 0, 0, 16, 0][..]);
        assert!(c.decode_eof(&mut buf).is_err());
        let mut empty = BytesMut::new();
        assert!(c.decode_eof(&mut empty).unwrap().is_none());
    }

    #[test]
    fn encoder_writes_the_message_and_refuses_unemittable_ones() {
        let mut c = OfpCodec::new();
        let mut out = BytesMut::new();
        c.encode(&Message::new(9, Payload::BarrierRequest), &mut out).unwrap();
        assert_eq!(&out[..], &[6, 20, 0, 8, 0, 0, 0, 9]);
        let huge = Message::new(1, Payload::EchoRequest(Bytes::from(vec![0u8; 70_000])));
        assert!(matches!(c.encode(huge, &mut out), Err(FrameError::Encode(Error::TooLong { .. }))));
        assert_eq!(out.len(), 8, "nothing written on error");
    }
}
