//! `npagent ofp decode HEX` / `npagent ofp encode`, run as the built binary over the OpenFlow
//! vectors (`proto/tests/data/ofp-vectors.jsonl`): decode then encode gives back the bytes of
//! every message vector the codec accepts; malformed input exits 2 with one line saying why.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

use std::io::Write;
use std::process::{Command, Output, Stdio};

fn npagent(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_npagent"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run npagent");
    let mut input = child.stdin.take().expect("stdin");
    if let Some(s) = stdin {
        input.write_all(s.as_bytes()).expect("write stdin");
    }
    drop(input);
    child.wait_with_output().expect("npagent output")
}

/// (name, hex) of every whole-message vector OVS decodes without error.
fn message_vectors() -> Vec<(String, String)> {
    let text = include_str!("../proto/tests/data/ofp-vectors.jsonl");
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("vector JSON"))
        .filter(|v| {
            let kind = v["kind"].as_str().unwrap_or_default();
            !["parse-actions", "parse-instructions", "parse-oxm"].contains(&kind)
                && !v["expected"].as_str().unwrap_or_default().contains("decode error")
        })
        .map(|v| (v["name"].as_str().unwrap().to_string(), v["hex"].as_str().unwrap().to_string()))
        .collect()
}

#[test]
fn decode_then_encode_reproduces_every_message_vector() {
    let vectors = message_vectors();
    assert!(vectors.len() >= 60, "{} vectors", vectors.len());
    for (name, hex) in &vectors {
        let decoded = npagent(&["ofp", "decode", hex], None);
        let stderr = String::from_utf8_lossy(&decoded.stderr);
        assert!(decoded.status.success(), "{name}: decode failed: {stderr}");
        let json = String::from_utf8(decoded.stdout).expect("utf-8 JSON");
        let value: serde_json::Value = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{name}: not JSON: {e}"));
        assert!(value.get("xid").is_some() && value.get("payload").is_some(), "{name}: {json}");
        let encoded = npagent(&["ofp", "encode"], Some(&json));
        assert!(encoded.status.success(), "{name}: encode failed: {}", String::from_utf8_lossy(&encoded.stderr));
        assert_eq!(String::from_utf8_lossy(&encoded.stdout).trim(), hex.as_str(), "{name}");
    }
}

#[test]
fn truncated_hex_exits_2_with_one_line() {
    let (name, hex) = message_vectors().into_iter().find(|(n, _)| n == "nxt_packet_in2_of15").expect("vector");
    let cut = &hex[..hex.len() - 8];
    let out = npagent(&["ofp", "decode", cut], None);
    assert_eq!(out.status.code(), Some(2), "{name}");
    assert!(out.stdout.is_empty());
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("truncated") && err.contains("need 152") && err.contains("have 148"), "{err}");
}

#[test]
fn malformed_inputs_exit_2_with_one_line() {
    for (args, stdin, needle) in [
        (vec!["ofp", "decode", "06zz"], None, "invalid hex"),
        (vec!["ofp", "decode", "0614000400000001"], None, "bad length 4"),
        (vec!["ofp", "encode"], Some("{\"version\": 6}"), "invalid message JSON"),
        (
            vec!["ofp", "encode"],
            Some("{\"version\": 4, \"xid\": 1, \"payload\": {\"BundleControl\": {\"bundle_id\": 1, \"ctrl_type\": 0, \"flags\": 1, \"properties\": []}}}"),
            "cannot encode",
        ),
    ] {
        let out = npagent(&args, stdin);
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}
