//! `npagent ofp decode HEX` / `npagent ofp encode`: a debugging aid in the spirit of
//! `ovs-ofctl ofp-print`. A message is shown as the JSON of [`ofp::Message`] (serde), which
//! `encode` turns back into the same bytes.

/// Decodes one whole OpenFlow message given as hex (whitespace ignored) into pretty JSON.
/// The error is one line naming what is wrong.
pub fn decode_hex(hex: &str) -> Result<String, String> {
    let compact: String = hex.split_whitespace().collect();
    if compact.is_empty() {
        return Err("no hex given".into());
    }
    let bytes = hex::decode(&compact).map_err(|e| format!("invalid hex: {e}"))?;
    let msg = ofp::Message::parse(&bytes).map_err(|e| format!("cannot decode {} bytes: {e}", bytes.len()))?;
    serde_json::to_string_pretty(&msg).map_err(|e| format!("cannot show as JSON: {e}"))
}

/// Encodes the JSON of one message (as `decode_hex` prints it) into lower-case hex.
/// The error is one line naming what is wrong.
pub fn encode_json(json: &str) -> Result<String, String> {
    let msg: ofp::Message = serde_json::from_str(json).map_err(|e| format!("invalid message JSON: {e}"))?;
    let bytes = msg.to_bytes().map_err(|e| format!("cannot encode: {e}"))?;
    Ok(hex::encode(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn barrier_round_trips_through_json() {
        let json = decode_hex("0614 0008 0000 0001").unwrap();
        assert!(json.contains("BarrierRequest"), "{json}");
        assert_eq!(encode_json(&json).unwrap(), "0614000800000001");
    }

    #[test]
    fn errors_are_one_line_and_name_the_problem() {
        for (input, needle) in [("zz", "invalid hex"), ("", "no hex"), ("06140010000000", "ofp_header")] {
            let e = decode_hex(input).unwrap_err();
            assert!(e.contains(needle) && !e.contains('\n'), "{input}: {e}");
        }
        let e = decode_hex("061400100000000100").unwrap_err();
        assert!(e.contains("truncated") && e.contains("need 16"), "{e}");
        assert!(encode_json("{").unwrap_err().starts_with("invalid message JSON"));
    }
}
