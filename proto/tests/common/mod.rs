//! Shared helpers of the integration tests: the vector file, small text extractors, a FLOW_MOD
//! builder and the ARP responder's actions.
#![allow(dead_code)]

use ofp::action::Action;
use ofp::flow_mod::FlowMod;
use ofp::instruction::Instruction;
use ofp::oxm::headers::*;
use ofp::oxm::{Masked, Match, Oxm};
use serde_json::Value;
use std::net::Ipv4Addr;

/// One line of `tests/data/ofp-vectors.jsonl`.
pub struct Vector {
    pub name: String,
    pub kind: String,
    pub hex: String,
    pub bytes: Vec<u8>,
    pub expected: String,
    pub cmd: String,
}

/// Vector kinds whose `hex` is a fragment (actions, instructions, OXM), not a whole message.
pub const FRAGMENT_KINDS: &[&str] = &["parse-actions", "parse-instructions", "parse-oxm"];

/// Every vector of the file.
pub fn vectors() -> Vec<Vector> {
    let text = include_str!("../data/ofp-vectors.jsonl");
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: Value = serde_json::from_str(l).expect("vector line is JSON");
            let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
            let hex = s("hex");
            Vector {
                name: s("name"),
                kind: s("kind"),
                bytes: hex::decode(&hex).expect("vector hex"),
                hex,
                expected: s("expected"),
                cmd: s("cmd"),
            }
        })
        .collect()
}

/// Vectors whose `hex` is one whole OpenFlow message (every kind but the fragment kinds).
pub fn message_vectors() -> Vec<Vector> {
    vectors().into_iter().filter(|v| !FRAGMENT_KINDS.contains(&v.kind.as_str())).collect()
}

/// The token after `key` in `text` (up to a space, comma, newline or closing parenthesis).
pub fn field<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    let start = text.find(key)? + key.len();
    let rest = &text[start..];
    let end = rest.find([' ', ',', '\n', ')']).unwrap_or(rest.len());
    Some(&rest[..end])
}

/// Parses `0x1f`, `31`.
pub fn num(s: &str) -> u64 {
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).unwrap_or_else(|_| panic!("hex number {s:?}")),
        None => s.parse().unwrap_or_else(|_| panic!("number {s:?}")),
    }
}

/// The bytes of an `ovs-ofctl` hex dump (`00000000  01 02 ...-... |ascii|` lines).
pub fn hexdump_bytes(dump: &str) -> Vec<u8> {
    let mut out = Vec::new();
    for line in dump.lines() {
        let Some(rest) = line.get(10..) else { continue };
        let hexpart = rest.split('|').next().unwrap_or("");
        for tok in hexpart.split([' ', '-']).filter(|t| !t.is_empty()) {
            out.push(u8::from_str_radix(tok, 16).unwrap_or_else(|_| panic!("dump byte {tok:?} in {line:?}")));
        }
    }
    out
}

/// Dot-separated hex bytes as OVS prints userdata (`01.02.03`).
pub fn dotted(s: &str) -> Vec<u8> {
    s.split('.').map(|b| u8::from_str_radix(b, 16).expect("dotted byte")).collect()
}

/// A FLOW_MOD (add, other fields default) of `fields` and `instructions` at `priority` in
/// table `table_id`.
pub fn flow_mod(table_id: u8, priority: u16, fields: Vec<Oxm>, instructions: Vec<Instruction>) -> FlowMod {
    FlowMod { table_id, priority, match_: Match::new(fields), instructions, ..FlowMod::default() }
}

/// The actions of an ARP responder (npagent's gateway answers so): the request for `ip` becomes
/// the reply from `mac`, sent back out the port it came in on. OF1.5's `move` is
/// OFPAT_COPY_FIELD (OVS refuses NXAST_REG_MOVE there).
pub fn arp_responder(mac: [u8; 6], ip: Ipv4Addr) -> Vec<Action> {
    vec![
        Action::copy_field(OXM_OF_ETH_SRC, OXM_OF_ETH_DST, 48),
        Action::SetField(Oxm::EthSrc(Masked::exact(mac))),
        Action::SetField(Oxm::ArpOp(2)),
        Action::copy_field(OXM_OF_ARP_SHA, OXM_OF_ARP_THA, 48),
        Action::copy_field(OXM_OF_ARP_SPA, OXM_OF_ARP_TPA, 32),
        Action::SetField(Oxm::ArpSha(Masked::exact(mac))),
        Action::SetField(Oxm::ArpSpa(Masked::exact(ip))),
        Action::Output { port: ofp::port::IN_PORT, max_len: 0 },
    ]
}
