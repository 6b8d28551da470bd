//! The property the `parse_message` fuzz target checks, shared with the stable test
//! `proto/tests/fuzz_corpus.rs` that replays the corpus.

/// Any input: `Message::parse` must not panic; when it accepts the bytes, `emit` must succeed
/// with exactly `buffer_len()` bytes of the same length as the input, and parsing those bytes
/// again must give the same message.
pub fn check(data: &[u8]) {
    let Ok(msg) = ofp::Message::parse(data) else { return };
    let out = msg.to_bytes().expect("a parsed message must emit");
    assert_eq!(out.len(), msg.buffer_len(), "emit length != buffer_len");
    assert_eq!(out.len(), data.len(), "re-emitted length differs from the input");
    let again = ofp::Message::parse(&out).expect("emitted bytes must parse");
    assert_eq!(again, msg, "parse(emit(parse(b))) != parse(b)");
}
