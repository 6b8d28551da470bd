//! Property TLVs shared by NXT_PACKET_IN2, NXAST_CONTROLLER2, bundles and async config:
//! type u16, len u16 (4 + payload, unpadded), payload, zero padding to a multiple of 8.
//! OVS's encodings (its lib/ofp-prop.c): u8 len 5; be16 len 8 (value + 2 zero bytes);
//! be32 len 8; be64 len 16 (4 zero bytes, then the value); flag len 4; bytes len 4 + n.

use crate::error::{Error, Result};
use crate::wire::{check_zero, pad8};
use bytes::{BufMut, BytesMut};

/// Size of a property header.
pub const PROP_HEADER_LEN: usize = 4;

/// One raw property: its type and payload (without header or padding).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawProp<'a> {
    pub prop_type: u16,
    pub payload: &'a [u8],
    /// The whole property as on the wire, header included, padding excluded.
    pub whole: &'a [u8],
}

/// Iterates over a property list; yields an error (and then stops) at the first malformed
/// property. The padding of the last property may be missing (OVS tolerates it).
pub struct PropIter<'a> {
    buf: &'a [u8],
    what: &'static str,
    failed: bool,
}

impl<'a> PropIter<'a> {
    /// Iterates over the properties in `buf`; `what` names the container in errors.
    pub fn new(buf: &'a [u8], what: &'static str) -> Self {
        PropIter { buf, what, failed: false }
    }
}

impl<'a> Iterator for PropIter<'a> {
    type Item = Result<RawProp<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.buf.is_empty() {
            return None;
        }
        let item = self.split_one();
        self.failed = item.is_err();
        Some(item)
    }
}

impl<'a> PropIter<'a> {
    fn split_one(&mut self) -> Result<RawProp<'a>> {
        let buf = self.buf;
        if buf.len() < PROP_HEADER_LEN {
            return Err(Error::Truncated { what: self.what, need: PROP_HEADER_LEN, have: buf.len() });
        }
        let prop_type = u16::from_be_bytes([buf[0], buf[1]]);
        let len = usize::from(u16::from_be_bytes([buf[2], buf[3]]));
        if len < PROP_HEADER_LEN || len > buf.len() {
            return Err(Error::BadLength { what: self.what, len });
        }
        let padded = pad8(len).min(buf.len());
        check_zero(&buf[len..padded], len, self.what)?;
        self.buf = &buf[padded..];
        Ok(RawProp { prop_type, payload: &buf[PROP_HEADER_LEN..len], whole: &buf[..len] })
    }
}

/// Wire length (with padding) of a property with `payload_len` payload bytes.
pub const fn prop_len(payload_len: usize) -> usize {
    pad8(PROP_HEADER_LEN + payload_len)
}

/// Writes a property: header, payload, padding. `payload.len()` must fit in the u16 length;
/// callers bound it through `buffer_len()` checks before emitting.
pub fn put_prop(out: &mut BytesMut, prop_type: u16, payload: &[u8]) {
    let len = PROP_HEADER_LEN + payload.len();
    out.put_u16(prop_type);
    out.put_u16(crate::wire::part_len16(len));
    out.put_slice(payload);
    out.put_bytes(0, pad8(len) - len);
}

/// Writes a u8 property (len 5).
pub fn put_prop_u8(out: &mut BytesMut, prop_type: u16, value: u8) {
    put_prop(out, prop_type, &[value]);
}

/// Writes a be16 property as OVS does (len 8: value + 2 zero bytes).
pub fn put_prop_u16(out: &mut BytesMut, prop_type: u16, value: u16) {
    let v = value.to_be_bytes();
    put_prop(out, prop_type, &[v[0], v[1], 0, 0]);
}

/// Writes a be32 property (len 8).
pub fn put_prop_u32(out: &mut BytesMut, prop_type: u16, value: u32) {
    put_prop(out, prop_type, &value.to_be_bytes());
}

/// Writes a be64 property as OVS does (len 16: 4 zero bytes, then the value).
pub fn put_prop_u64(out: &mut BytesMut, prop_type: u16, value: u64) {
    let mut payload = [0u8; 12];
    payload[4..].copy_from_slice(&value.to_be_bytes());
    put_prop(out, prop_type, &payload);
}

/// Reads a u8 property payload (at least 1 byte).
pub fn prop_u8(p: &RawProp<'_>, what: &'static str) -> Result<u8> {
    p.payload.first().copied().ok_or(Error::BadLength { what, len: p.whole.len() })
}

/// Reads a be16 property payload (at least 2 bytes, as OVS accepts).
pub fn prop_u16(p: &RawProp<'_>, what: &'static str) -> Result<u16> {
    match p.payload {
        [a, b, ..] => Ok(u16::from_be_bytes([*a, *b])),
        _ => Err(Error::BadLength { what, len: p.whole.len() }),
    }
}

/// Reads a be32 property payload (exactly 4 bytes).
pub fn prop_u32(p: &RawProp<'_>, what: &'static str) -> Result<u32> {
    <[u8; 4]>::try_from(p.payload).map(u32::from_be_bytes).map_err(|_| Error::BadLength { what, len: p.whole.len() })
}

/// Reads a be64 property payload (4 zero bytes then 8 value bytes, or 8 bytes).
pub fn prop_u64(p: &RawProp<'_>, what: &'static str) -> Result<u64> {
    let value = match p.payload.len() {
        12 => &p.payload[4..],
        8 => p.payload,
        _ => return Err(Error::BadLength { what, len: p.whole.len() }),
    };
    let bytes: [u8; 8] = value.try_into().map_err(|_| Error::BadLength { what, len: p.whole.len() })?;
    Ok(u64::from_be_bytes(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn be16_property_round_trips_in_ovs_form() {
        let mut out = BytesMut::new();
        put_prop_u16(&mut out, 0, 0x1234);
        assert_eq!(&out[..], &[0, 0, 0, 8, 0x12, 0x34, 0, 0]);
        let p = PropIter::new(&out, "t").next().unwrap().unwrap();
        assert_eq!(prop_u16(&p, "t").unwrap(), 0x1234);
    }

    #[test]
    fn length_below_header_is_an_error_and_iteration_stops() {
        let buf = [0u8, 1, 0, 3, 0, 0, 0, 0];
        let mut it = PropIter::new(&buf, "t");
        assert!(matches!(it.next(), Some(Err(Error::BadLength { len: 3, .. }))));
        assert!(it.next().is_none());
    }

    #[test]
    fn length_beyond_buffer_is_an_error() {
        let buf = [0u8, 1, 0, 40, 0, 0, 0, 0];
        assert!(PropIter::new(&buf, "t").next().unwrap().is_err());
    }
}
