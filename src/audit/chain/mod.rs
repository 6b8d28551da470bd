//! The hash chain of `--audit-chain`: a sidecar file next to every log file, holding one
//! record per log line, each committing to the one before it.
//!
//! ```text
//! np.log.chain                   np.log
//! npagent-chain v1 file=3 prev=<hex of the last hash of file 2>
//! 1 <hex of h1>                  <line 1>
//! 2 <hex of h2>                  <line 2>
//! ```
//!
//! `h0 = SHA-256("npagent-chain v1" || file index (u64, big endian) || prev)` and
//! `hN = SHA-256(hN-1 || line N, newline included)`. The first file ever has `prev` all zeros
//! (genesis); every later file's `prev` is the last hash of the file before it (its `h0` if it
//! has no lines), so the chain runs across rotations and restarts, and the file index tells a
//! file missing in the middle from one pruned at the start.
//!
//! The sidecar keeps the log itself byte for byte what Antrea's Fluentd regex (or a JSON
//! reader) expects. The price: the lines and their records are two files, written one after
//! the other, so a crash between the two writes shows up as a break at that line.
//!
//! This file holds the format and the hashes; [`sidecar`] keeps a log's sidecar as the writer
//! writes, [`verify`] checks files against theirs (`npagent audit verify`).

pub(crate) mod sidecar;
pub mod verify;

pub use sidecar::ChainError;

use ring::digest::{Context, SHA256};
use std::io::Write;

/// Bytes of one chain hash.
pub(crate) const HASH_LEN: usize = 32;
/// One chain hash.
pub(crate) type Hash = [u8; HASH_LEN];
/// `prev` of the very first file.
pub(crate) const GENESIS: Hash = [0; HASH_LEN];
/// First word of a sidecar, naming the layout.
pub(crate) const MAGIC: &str = "npagent-chain v1";
/// The hash a file's chain starts from: its header, committed to by its first record.
pub(crate) fn start_hash(file_index: u64, prev: &Hash) -> Hash {
    let mut c = Context::new(&SHA256);
    c.update(MAGIC.as_bytes());
    c.update(&file_index.to_be_bytes());
    c.update(prev);
    finish(c)
}

/// `SHA-256(prev || line)`.
pub(crate) fn next_hash(prev: &Hash, line: &[u8]) -> Hash {
    let mut c = Context::new(&SHA256);
    c.update(prev);
    c.update(line);
    finish(c)
}

fn finish(c: Context) -> Hash {
    let mut h = GENESIS;
    h.copy_from_slice(c.finish().as_ref());
    h
}

/// The first line of a sidecar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Header {
    /// 1 for the first file of a chain, one more for each file after it.
    pub file_index: u64,
    /// Last hash of the file before (GENESIS for the first).
    pub(crate) prev: Hash,
}

impl Header {
    /// The header line, newline included.
    pub fn line(&self) -> String {
        format!("{MAGIC} file={} prev={}\n", self.file_index, hex::encode(self.prev))
    }

    /// Parses a header line (without its newline).
    pub(crate) fn parse(line: &str) -> Result<Header, String> {
        let rest = line
            .strip_prefix(MAGIC)
            .and_then(|r| r.strip_prefix(' '))
            .ok_or_else(|| format!("header does not start with {MAGIC:?}"))?;
        let (index, prev) = rest.split_once(' ').ok_or("header has no prev= field")?;
        let file_index = index
            .strip_prefix("file=")
            .and_then(|i| i.parse::<u64>().ok())
            .filter(|&i| i > 0)
            .ok_or_else(|| format!("header field {index:?} is not file=<index from 1>"))?;
        let prev = prev.strip_prefix("prev=").ok_or_else(|| format!("header field {prev:?} is not prev=<hash>"))?;
        Ok(Header { file_index, prev: parse_hash(prev)? })
    }
}

/// Parses 64 hex digits.
pub(crate) fn parse_hash(s: &str) -> Result<Hash, String> {
    let mut h = GENESIS;
    hex::decode_to_slice(s, &mut h).map_err(|_| format!("{s:?} is not a hash of {} hex digits", 2 * HASH_LEN))?;
    Ok(h)
}

/// A parsed sidecar: its header and the recorded hash of every line, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sidecar {
    pub(crate) header: Header,
    /// `records[i]` is the hash after line `i + 1`.
    pub(crate) records: Vec<Hash>,
}

impl Sidecar {
    /// Parses a sidecar's text; the error names the sidecar line at fault.
    pub(crate) fn parse(text: &[u8]) -> Result<Sidecar, String> {
        let text = std::str::from_utf8(text).map_err(|e| format!("not UTF-8 at byte {}", e.valid_up_to()))?;
        let mut lines = text.split_inclusive('\n');
        let first = lines.next().ok_or("empty (no header)")?;
        let header = Header::parse(first.strip_suffix('\n').ok_or("header line is cut short")?)
            .map_err(|e| format!("line 1: {e}"))?;
        let mut records = Vec::new();
        for (i, raw) in lines.enumerate() {
            let n = i + 2;
            let line = raw.strip_suffix('\n').ok_or_else(|| format!("line {n} is cut short"))?;
            let (seq, hash) = line.split_once(' ').ok_or_else(|| format!("line {n} is not `<seq> <hash>`"))?;
            let want = records.len() as u64 + 1;
            if seq.parse::<u64>().ok() != Some(want) {
                return Err(format!("line {n} has sequence number {seq:?}, expected {want}"));
            }
            records.push(parse_hash(hash).map_err(|e| format!("line {n}: {e}"))?);
        }
        Ok(Sidecar { header, records })
    }

    /// The hash the next file commits to.
    pub(crate) fn last(&self) -> Hash {
        self.records.last().copied().unwrap_or_else(|| start_hash(self.header.file_index, &self.header.prev))
    }
}

/// The chain as the writer carries it: which file, how many lines in it, the last hash, and
/// the hash of a line being written in pieces.
#[derive(Clone)]
pub struct ChainState {
    pub file_index: u64,
    /// `prev` of the current file's header.
    pub(crate) prev: Hash,
    /// Lines chained in the current file.
    pub(crate) seq: u64,
    pub(crate) head: Hash,
    partial: Option<Context>,
}

impl std::fmt::Debug for ChainState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChainState")
            .field("file_index", &self.file_index)
            .field("seq", &self.seq)
            .field("head", &hex::encode(self.head))
            .field("partial", &self.partial.is_some())
            .finish()
    }
}

impl ChainState {
    /// The state at the start of file `header.file_index`.
    pub(crate) fn start(header: Header) -> ChainState {
        let head = start_hash(header.file_index, &header.prev);
        ChainState { file_index: header.file_index, prev: header.prev, seq: 0, head, partial: None }
    }

    /// The state after the lines of `sidecar`.
    pub(crate) fn resume(sidecar: &Sidecar) -> ChainState {
        let Header { file_index, prev } = sidecar.header;
        ChainState { file_index, prev, seq: sidecar.records.len() as u64, head: sidecar.last(), partial: None }
    }

    /// The header of the current file.
    pub(crate) fn header(&self) -> Header {
        Header { file_index: self.file_index, prev: self.prev }
    }

    /// The header of the file after this one.
    pub(crate) fn next_header(&self) -> Header {
        // A sidecar read back may claim any index: never overflow on it.
        Header { file_index: self.file_index.saturating_add(1), prev: self.head }
    }

    /// Chains `bytes` as written to the log (whole lines or pieces of them), appending one
    /// `<seq> <hash>` record to `records` for every line completed.
    pub(crate) fn append(&mut self, mut bytes: &[u8], records: &mut Vec<u8>) {
        while !bytes.is_empty() {
            let end = bytes.iter().position(|&b| b == b'\n').map(|i| i + 1);
            let (piece, rest) = bytes.split_at(end.unwrap_or(bytes.len()));
            let head = self.head;
            let ctx = self.partial.get_or_insert_with(|| {
                let mut c = Context::new(&SHA256);
                c.update(&head);
                c
            });
            ctx.update(piece);
            if end.is_some() {
                if let Some(c) = self.partial.take() {
                    self.head = finish(c);
                }
                self.seq += 1;
                let _ = write!(records, "{} ", self.seq);
                let mut hex = [0u8; 2 * HASH_LEN];
                let _ = hex::encode_to_slice(self.head, &mut hex);
                records.extend_from_slice(&hex);
                records.push(b'\n');
            }
            bytes = rest;
        }
    }

    /// Whether a line has been chained only in part.
    pub fn mid_line(&self) -> bool {
        self.partial.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_chain_like_whole_lines() {
        let header = Header { file_index: 2, prev: [7; HASH_LEN] };
        let mut whole = ChainState::start(header);
        let mut a = Vec::new();
        whole.append(b"one\ntwo\n", &mut a);
        let mut pieces = ChainState::start(header);
        let mut b = Vec::new();
        for piece in [&b"o"[..], b"ne\nt", b"wo", b"\n"] {
            pieces.append(piece, &mut b);
        }
        assert_eq!(a, b);
        assert_eq!((whole.seq, whole.head), (pieces.seq, pieces.head));
        let h1 = next_hash(&start_hash(2, &[7; HASH_LEN]), b"one\n");
        assert_eq!(whole.head, next_hash(&h1, b"two\n"));
        let text = [header.line().into_bytes(), a].concat();
        let sidecar = Sidecar::parse(&text).unwrap();
        assert_eq!(sidecar.records, vec![h1, whole.head]);
        assert_eq!(ChainState::resume(&sidecar).head, whole.head);
    }

    #[test]
    fn malformed_sidecars_name_the_line() {
        let h = Header { file_index: 1, prev: GENESIS }.line();
        let good = format!("1 {}\n", hex::encode([1u8; 32]));
        assert!(Sidecar::parse(format!("{h}{good}").as_bytes()).is_ok());
        for (text, needle) in [
            (String::new(), "empty"),
            ("npagent-chain v2 file=1 prev=00\n".to_string(), "line 1"),
            (h.replace("file=1", "file=0"), "line 1"),
            (format!("{h}2 {}\n", hex::encode([1u8; 32])), "line 2 has sequence number \"2\""),
            (format!("{h}{good}2 zz\n"), "line 3"),
            (format!("{h}{}", good.trim_end()), "line 2 is cut short"),
        ] {
            let err = Sidecar::parse(text.as_bytes()).unwrap_err();
            assert!(err.contains(needle), "{text:?}: {err}");
        }
    }
}
