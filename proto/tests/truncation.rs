//! Truncation sweep over every whole-message vector (`tests/data/ofp-vectors.jsonl`):
//! for every strict prefix,
//! - as is (the length field still says the full length): `Message::parse` is an error;
//! - with the length field patched to the prefix length: an error or a valid message that
//!   re-emits to exactly those bytes.
//!
//! Never a panic. Every single-byte change of every vector is an error or a message that
//! round-trips.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

mod common;

use common::message_vectors;
use ofp::Message;

fn check_patched(name: &str, buf: &[u8]) -> bool {
    match Message::parse(buf) {
        Err(_) => false,
        Ok(msg) => {
            let out =
                msg.to_bytes().unwrap_or_else(|e| panic!("{name}: parsed {} bytes but emit failed: {e}", buf.len()));
            assert_eq!(
                hex::encode(&out),
                hex::encode(buf),
                "{name}: prefix of {} bytes re-emits differently",
                buf.len()
            );
            true
        }
    }
}

#[test]
fn every_prefix_of_every_vector_is_an_error_or_a_valid_message() {
    let mut prefixes = 0;
    let mut accepted = 0;
    for v in message_vectors() {
        for n in 0..v.bytes.len() {
            let prefix = &v.bytes[..n];
            assert!(Message::parse(prefix).is_err(), "{}: prefix of {n} bytes accepted", v.name);
            prefixes += 1;
            if n >= 4 {
                let mut patched = prefix.to_vec();
                patched[2..4].copy_from_slice(&(n as u16).to_be_bytes());
                accepted += usize::from(check_patched(&v.name, &patched));
            }
        }
    }
    let total: usize = message_vectors().iter().map(|v| v.bytes.len()).sum();
    assert_eq!(prefixes, total);
    eprintln!("{prefixes} prefixes; {accepted} length-patched prefixes are valid messages");
}

#[test]
fn longer_buffer_than_length_field_is_an_error() {
    for v in message_vectors() {
        let mut longer = v.bytes.clone();
        longer.push(0);
        assert!(Message::parse(&longer).is_err(), "{}", v.name);
    }
}

#[test]
fn every_single_byte_change_is_an_error_or_round_trips() {
    for v in message_vectors() {
        for i in 0..v.bytes.len() {
            for flip in [0x01u8, 0x80, 0xff] {
                let mut b = v.bytes.clone();
                b[i] ^= flip;
                if let Ok(msg) = Message::parse(&b) {
                    // Value equality only: a changed property type can move the property to
                    // the end (emit writes NXT_PACKET_IN2 properties in OVS's order).
                    let out = msg.to_bytes().unwrap_or_else(|e| panic!("{}: byte {i}^{flip:#x}: emit {e}", v.name));
                    assert_eq!(out.len(), b.len(), "{}: byte {i}^{flip:#x}: length", v.name);
                    assert_eq!(Message::parse(&out).as_ref(), Ok(&msg), "{}: byte {i}^{flip:#x}", v.name);
                }
            }
        }
    }
}
