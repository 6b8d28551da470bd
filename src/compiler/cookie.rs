//! Flow cookies. Every npagent flow carries [`MARKER`] in its top 16 bits, so flows of an
//! earlier run (or of anyone else) are recognisable; the next 8 bits say what kind of flow it
//! is, and the low 40 bits identify a rule (`conj_id` flows) or a port.

use super::ids::RuleKey;
use super::rules::Direction;

/// Top 16 bits of every npagent cookie ("NP").
pub(crate) const MARKER: u16 = 0x4e50;

/// What a flow is, in bits 40..48 of its cookie.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// Fixed pipeline flows.
    Pipeline = 0,
    /// Clause flows, shared between rules.
    Clause = 1,
    /// A rule's `conj_id` flow; low 40 bits = hash of the rule's identity.
    Rule = 2,
    /// A pod's default drop; low bits = ofport.
    DefaultDrop = 3,
    /// A local pod's forwarding flows; low bits = ofport.
    Port = 4,
    /// The node's flows (gateway, uplinks, Services); low bits = ofport of the node's port.
    Node = 5,
    /// The staged view's flows outside its rules' `conj_id` flows (which are [`Kind::Rule`]):
    /// a touched pod's entry into the staged tables, its staged isolation and its `WouldAllow`
    /// check; low bits = ofport.
    Staged = 6,
}

const LOW_BITS: u64 = (1 << 40) - 1;

/// The cookie of a flow of `kind` with payload `low` (truncated to 40 bits).
pub fn cookie(kind: Kind, low: u64) -> u64 {
    (u64::from(MARKER) << 48) | ((kind as u64) << 40) | (low & LOW_BITS)
}

/// Whether `cookie` carries npagent's marker.
pub(crate) fn is_ours(cookie: u64) -> bool {
    (cookie >> 48) as u16 == MARKER
}

/// The kind of one of npagent's cookies.
pub fn kind(cookie: u64) -> Option<Kind> {
    if !is_ours(cookie) {
        return None;
    }
    Some(match (cookie >> 40) as u8 {
        0 => Kind::Pipeline,
        1 => Kind::Clause,
        2 => Kind::Rule,
        3 => Kind::DefaultDrop,
        4 => Kind::Port,
        5 => Kind::Node,
        6 => Kind::Staged,
        _ => return None,
    })
}

/// The mask of a cookie's payload bits (its complement selects the marker and the kind).
pub(crate) fn payload_mask() -> u64 {
    LOW_BITS
}

/// The 40-bit payload of a cookie.
pub(crate) fn payload(cookie: u64) -> u64 {
    cookie & LOW_BITS
}

/// The cookie of a rule's `conj_id` flow: a stable hash (FNV-1a, same in every build and run)
/// of the rule's identity.
pub(crate) fn rule_cookie(key: &RuleKey) -> u64 {
    let mut h = Fnv::new();
    h.bytes(key.policy.namespace.as_bytes());
    h.bytes(&[0]);
    h.bytes(key.policy.name.as_bytes());
    h.bytes(&[0]);
    // Ingress rules hash as they did before egress existed, so their cookies stay.
    if key.direction == Direction::Egress {
        h.bytes(b"egress\0");
    }
    h.bytes(&key.rule.to_be_bytes());
    for p in &key.ports {
        h.bytes(&[p.protocol.number()]);
        h.bytes(&p.first.to_be_bytes());
        h.bytes(&p.last.to_be_bytes());
    }
    if key.logged {
        h.bytes(b"\0logged");
    }
    cookie(Kind::Rule, h.0)
}

struct Fnv(u64);

impl Fnv {
    fn new() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
    fn bytes(&mut self, b: &[u8]) {
        for byte in b {
            self.0 ^= u64::from(*byte);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compiler::ids::PortRange;
    use crate::model::{ObjectRef, Protocol};

    #[test]
    fn layout() {
        let c = cookie(Kind::DefaultDrop, 7);
        assert_eq!(c, 0x4e50_0300_0000_0007);
        assert!(is_ours(c));
        assert_eq!(kind(c), Some(Kind::DefaultDrop));
        assert_eq!(payload(c), 7);
        assert!(!is_ours(0x1234_0000_0000_0000));
        assert_eq!(kind(0), None);
    }

    #[test]
    fn rule_cookies_are_stable_and_distinct() {
        let key = |name: &str, rule, ports: Vec<PortRange>| RuleKey {
            policy: ObjectRef { namespace: "x".into(), name: name.into() },
            direction: Direction::Ingress,
            rule,
            ports,
            logged: false,
        };
        let a = rule_cookie(&key("a", 0, vec![]));
        // Fixed value: the hash must never change between builds, or restarts would churn.
        assert_eq!(a, 0x4e50_02e0_63d6_5564);
        assert_ne!(a, rule_cookie(&key("a", 1, vec![])));
        assert_ne!(a, rule_cookie(&key("b", 0, vec![])));
        assert_ne!(a, rule_cookie(&RuleKey { direction: Direction::Egress, ..key("a", 0, vec![]) }));
        let p = PortRange { protocol: Protocol::Tcp, first: 80, last: 80 };
        assert_ne!(a, rule_cookie(&key("a", 0, vec![p])));
        assert_ne!(a, rule_cookie(&RuleKey { logged: true, ..key("a", 0, vec![]) }));
        assert_eq!(kind(a), Some(Kind::Rule));
    }
}
