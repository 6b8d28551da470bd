//! OFPT_HELLO: version negotiation elements.

use crate::error::{Error, Result};
use crate::wire::{len16, pad8, Reader};
use bytes::{BufMut, Bytes, BytesMut};

/// OFPT_HELLO: the version bitmap element(s) and any unknown elements kept raw.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Hello {
    pub elements: Vec<HelloElement>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum HelloElement {
    /// OFPHET_VERSIONBITMAP: bit v of word 0 = version v.
    VersionBitmap(Vec<u32>),
    /// Unknown element type with its payload.
    Unknown { element_type: u16, payload: Bytes },
    /// Fewer than 4 bytes after the last element (OVS ignores them; kept so they round-trip).
    /// Only valid as the last element.
    Trailing(Bytes),
}

/// OFPHET_VERSIONBITMAP.
pub const HELLO_ELEM_VERSIONBITMAP: u16 = 1;

impl Hello {
    /// A HELLO offering exactly the given versions (e.g. `&[6]` for OpenFlow 1.5 only).
    pub fn with_versions(versions: &[u8]) -> Hello {
        let mut words = Vec::new();
        for &v in versions {
            let word = usize::from(v / 32);
            if words.len() <= word {
                words.resize(word + 1, 0u32);
            }
            words[word] |= 1 << (v % 32);
        }
        Hello { elements: vec![HelloElement::VersionBitmap(words)] }
    }

    /// The first version bitmap element, if any.
    pub fn version_bitmap(&self) -> Option<&[u32]> {
        self.elements.iter().find_map(|e| match e {
            HelloElement::VersionBitmap(w) => Some(w.as_slice()),
            _ => None,
        })
    }

    /// Whether the peer offers `version`: from the bitmap when there is one, otherwise
    /// (OpenFlow 1.0-style HELLO) when `version <= header_version`.
    pub fn offers(&self, header_version: u8, version: u8) -> bool {
        match self.version_bitmap() {
            Some(words) => words.get(usize::from(version / 32)).is_some_and(|w| w & (1 << (version % 32)) != 0),
            None => version <= header_version,
        }
    }

    /// Parses the element list.
    pub fn parse(body: &[u8]) -> Result<Hello> {
        const WHAT: &str = "ofp_hello_elem";
        let mut elements = Vec::new();
        let mut rest = body;
        while !rest.is_empty() {
            if rest.len() < 4 {
                elements.push(HelloElement::Trailing(Bytes::copy_from_slice(rest)));
                break;
            }
            let element_type = u16::from_be_bytes([rest[0], rest[1]]);
            let len = usize::from(u16::from_be_bytes([rest[2], rest[3]]));
            if len < 4 || len > rest.len() {
                return Err(Error::BadLength { what: WHAT, len });
            }
            let padded = pad8(len);
            let mut r = Reader::new(rest, WHAT);
            let whole = r.take(len)?;
            r.zeros(padded - len)?;
            let payload = &whole[4..];
            elements.push(if element_type == HELLO_ELEM_VERSIONBITMAP {
                if payload.len() % 4 != 0 {
                    return Err(Error::BadLength { what: "OFPHET_VERSIONBITMAP", len });
                }
                HelloElement::VersionBitmap(
                    payload.chunks_exact(4).map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]])).collect(),
                )
            } else {
                HelloElement::Unknown { element_type, payload: Bytes::copy_from_slice(payload) }
            });
            rest = &rest[padded..];
        }
        Ok(Hello { elements })
    }

    /// Body length on the wire.
    pub fn buffer_len(&self) -> usize {
        self.elements
            .iter()
            .map(|e| match e {
                HelloElement::VersionBitmap(w) => pad8(4 + 4 * w.len()),
                HelloElement::Unknown { payload, .. } => pad8(4 + payload.len()),
                HelloElement::Trailing(b) => b.len(),
            })
            .sum()
    }

    /// Checks that the value can be emitted and parses back to itself.
    pub(crate) fn check(&self) -> Result<()> {
        let n = self.elements.len();
        for (i, e) in self.elements.iter().enumerate() {
            match e {
                HelloElement::VersionBitmap(w) => {
                    len16("OFPHET_VERSIONBITMAP", 4 + 4 * w.len())?;
                }
                HelloElement::Unknown { element_type, payload } => {
                    if *element_type == HELLO_ELEM_VERSIONBITMAP {
                        return Err(Error::BadValue { what: "ofp_hello_elem type", value: 1 });
                    }
                    len16("ofp_hello_elem", 4 + payload.len())?;
                }
                HelloElement::Trailing(b) => {
                    if b.is_empty() || b.len() >= 4 || i + 1 != n {
                        return Err(Error::BadLength { what: "hello trailing bytes", len: b.len() });
                    }
                }
            }
        }
        Ok(())
    }

    /// Writes the element list ([`crate::Message::emit`] checks it first).
    pub fn emit(&self, out: &mut BytesMut) {
        for e in &self.elements {
            match e {
                HelloElement::VersionBitmap(words) => {
                    let len = 4 + 4 * words.len();
                    out.put_u16(HELLO_ELEM_VERSIONBITMAP);
                    out.put_u16(crate::wire::part_len16(len));
                    for w in words {
                        out.put_u32(*w);
                    }
                    out.put_bytes(0, pad8(len) - len);
                }
                HelloElement::Unknown { element_type, payload } => {
                    crate::prop::put_prop(out, *element_type, payload);
                }
                HelloElement::Trailing(b) => out.put_slice(b),
            }
        }
    }
}
