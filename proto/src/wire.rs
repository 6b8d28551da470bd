//! The crate's one set of wire helpers: a bounds-checked big-endian [`Reader`], the padding
//! rule (see the crate documentation), length fields, and the checks every TLV shares.

use crate::error::{Error, Result};

/// A bounds-checked big-endian reader over a byte slice; every error names `what`.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    what: &'static str,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8], what: &'static str) -> Self {
        Reader { buf, pos: 0, what }
    }

    /// The next `n` bytes.
    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len()).ok_or(Error::Truncated {
            what: self.what,
            need: self.pos.saturating_add(n),
            have: self.buf.len(),
        })?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let s = self.take(N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    pub(crate) fn u8(&mut self) -> Result<u8> {
        Ok(self.array::<1>()?[0])
    }
    pub(crate) fn u16(&mut self) -> Result<u16> {
        self.array().map(u16::from_be_bytes)
    }
    pub(crate) fn u32(&mut self) -> Result<u32> {
        self.array().map(u32::from_be_bytes)
    }
    pub(crate) fn u64(&mut self) -> Result<u64> {
        self.array().map(u64::from_be_bytes)
    }

    /// Skips `n` padding bytes, which must be zero.
    pub(crate) fn zeros(&mut self, n: usize) -> Result<()> {
        let offset = self.pos;
        check_zero(self.take(n)?, offset, self.what)
    }

    /// The unread bytes, consumed.
    pub(crate) fn rest(&mut self) -> &'a [u8] {
        let s = self.peek_rest();
        self.pos = self.buf.len();
        s
    }

    /// The unread bytes, left unread.
    pub(crate) fn peek_rest(&self) -> &'a [u8] {
        self.buf.get(self.pos..).unwrap_or(&[])
    }

    /// Bytes read so far.
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    /// Bytes not read yet.
    pub(crate) fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    /// Errors unless every byte was read.
    pub(crate) fn finish(&self) -> Result<()> {
        if self.remaining() == 0 {
            Ok(())
        } else {
            Err(Error::BadLength { what: self.what, len: self.buf.len() })
        }
    }
}

/// Declares an enum of wire numbers, each listed once, with an `Unknown` case that keeps any
/// number without a name, so that every number converts to the enum and back unchanged:
/// `From<number>`, `From<enum> for number`, and `KNOWN`, every named case in order.
macro_rules! numbered_enum {
    (
        $(#[$attr:meta])*
        pub enum $name:ident: $repr:ty {
            $( $(#[$case_attr:meta])* $case:ident = $number:literal, )+
        }
    ) => {
        $(#[$attr])*
        pub enum $name {
            $( $(#[$case_attr])* $case, )+
            /// A number without a name here, kept as it is.
            Unknown($repr),
        }

        impl $name {
            /// Every named case, in the order of its number.
            pub const KNOWN: &'static [$name] = &[$($name::$case),+];
        }

        impl From<$repr> for $name {
            fn from(number: $repr) -> $name {
                match number {
                    $( $number => $name::$case, )+
                    other => $name::Unknown(other),
                }
            }
        }

        impl From<$name> for $repr {
            fn from(value: $name) -> $repr {
                match value {
                    $( $name::$case => $number, )+
                    $name::Unknown(number) => number,
                }
            }
        }
    };
}
pub(crate) use numbered_enum;

/// Rounds `n` up to a multiple of 8.
pub const fn pad8(n: usize) -> usize {
    (n + 7) & !7
}

/// Checks that padding `bytes`, found at `offset` of `what`, are all zero.
pub(crate) fn check_zero(bytes: &[u8], offset: usize, what: &'static str) -> Result<()> {
    match bytes.iter().position(|&b| b != 0) {
        Some(i) => Err(Error::BadPadding { what, offset: offset + i }),
        None => Ok(()),
    }
}

/// Converts a length to the u16 of a length field, or `TooLong`.
pub(crate) fn len16(what: &'static str, len: usize) -> Result<u16> {
    u16::try_from(len).map_err(|_| Error::TooLong { what, len })
}

/// The 16-bit length field of `len` bytes of a message: the message's own length or that of a
/// part of it (a body's list, an action, a property). It fits, because a whole message is
/// checked against [`crate::MAX_MESSAGE_LEN`] before any of it is written, and a part is no
/// longer than its message; debug builds assert it, for the `emit` of a part called on its own
/// with more than a message can hold.
pub(crate) fn part_len16(len: usize) -> u16 {
    debug_assert!(len <= crate::MAX_MESSAGE_LEN, "a length of {len} bytes does not fit a message");
    len as u16
}

/// Checks that `buf` holds `len` bytes of a TLV whose minimum is `min` and, when `align8`, that
/// `len` is a multiple of 8. Returns the TLV's bytes.
pub(crate) fn tlv<'a>(buf: &'a [u8], len: usize, min: usize, align8: bool, what: &'static str) -> Result<&'a [u8]> {
    if len < min || (align8 && len % 8 != 0) {
        return Err(Error::BadLength { what, len });
    }
    buf.get(..len).ok_or(Error::Truncated { what, need: len, have: buf.len() })
}

/// Parses a list of elements filling `buf` exactly; `parse` reads one element from the start
/// of its input and returns it with the bytes it took (at least one, or the list is refused).
pub(crate) fn parse_list<T>(mut buf: &[u8], mut parse: impl FnMut(&[u8]) -> Result<(T, usize)>) -> Result<Vec<T>> {
    let mut v = Vec::new();
    while !buf.is_empty() {
        let (item, used) = parse(buf)?;
        if used == 0 || used > buf.len() {
            return Err(Error::BadLength { what: "list element", len: used });
        }
        v.push(item);
        buf = &buf[used..];
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_big_endian_and_names_the_structure_when_short() {
        let mut r = Reader::new(&[0, 1, 0, 0, 0, 2, 9], "thing");
        assert_eq!(r.u16(), Ok(1));
        assert_eq!(r.u32(), Ok(2));
        assert_eq!(r.remaining(), 1);
        assert_eq!(r.u16(), Err(Error::Truncated { what: "thing", need: 8, have: 7 }));
    }

    #[test]
    fn non_zero_padding_names_its_offset() {
        let mut r = Reader::new(&[7, 0, 0, 5], "thing");
        r.u8().unwrap();
        assert_eq!(r.zeros(3), Err(Error::BadPadding { what: "thing", offset: 3 }));
    }

    #[test]
    fn tlv_lengths_are_checked_against_minimum_alignment_and_buffer() {
        let buf = [0u8; 16];
        assert!(tlv(&buf, 16, 8, true, "t").is_ok());
        assert_eq!(tlv(&buf, 12, 8, true, "t"), Err(Error::BadLength { what: "t", len: 12 }));
        assert_eq!(tlv(&buf, 4, 8, false, "t"), Err(Error::BadLength { what: "t", len: 4 }));
        assert_eq!(tlv(&buf, 24, 8, true, "t"), Err(Error::Truncated { what: "t", need: 24, have: 16 }));
    }
}
