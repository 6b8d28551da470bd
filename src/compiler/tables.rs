//! The pipeline's tables: ids and the names npagent gives them through OVSDB (`Flow_Table`),
//! which `ovs-ofctl dump-flows --names` prints.

/// Sorts packets by the port they came in on: a pod's port to [`SPOOF_GUARD`]; any other
/// port (the node's own: uplink, gateway, LOCAL) IP into conntrack, the rest to NORMAL.
pub const CLASSIFIER: u8 = 0;
/// From a pod's port, only that pod's own MAC and addresses pass (IP, ARP, ND); else drop.
pub const SPOOF_GUARD: u8 = 1;
/// Drops invalid connections.
pub const CONNTRACK_STATE: u8 = 2;
/// Kubernetes NetworkPolicy egress rules (conjunctive matches on the source pod's port and
/// the destination).
pub const EGRESS_RULE: u8 = 3;
/// Default drop of egress-isolated local pods (by the port they send from).
pub const EGRESS_DEFAULT_RULE: u8 = 4;
/// The local destination into `reg1 = ofport`: by IP address first, then by MAC; IP sent to
/// a broadcast or multicast MAC without a local IP destination is dropped.
pub const L2_FORWARDING_CALC: u8 = 5;
/// Kubernetes NetworkPolicy ingress rules (conjunctive matches).
pub const INGRESS_RULE: u8 = 6;
/// Default drop of isolated local pods.
pub const INGRESS_DEFAULT_RULE: u8 = 7;
/// Commits new connections that got this far.
pub const CONNTRACK_COMMIT: u8 = 8;
/// Output to the local pod in `reg1`, else NORMAL (destinations beyond the node's pods).
pub const OUTPUT: u8 = 9;

/// Every table, in pipeline order: (id, name).
pub const TABLES: [(u8, &str); 10] = [
    (CLASSIFIER, "Classifier"),
    (SPOOF_GUARD, "SpoofGuard"),
    (CONNTRACK_STATE, "ConntrackState"),
    (EGRESS_RULE, "EgressRule"),
    (EGRESS_DEFAULT_RULE, "EgressDefaultRule"),
    (L2_FORWARDING_CALC, "L2ForwardingCalc"),
    (INGRESS_RULE, "IngressRule"),
    (INGRESS_DEFAULT_RULE, "IngressDefaultRule"),
    (CONNTRACK_COMMIT, "ConntrackCommit"),
    (OUTPUT, "Output"),
];

/// The name of table `id`, if it is one of npagent's.
pub fn table_name(id: u8) -> Option<&'static str> {
    TABLES.iter().find(|(t, _)| *t == id).map(|(_, n)| *n)
}

/// The id of the table called `name`.
pub fn table_id(name: &str) -> Option<u8> {
    TABLES.iter().find(|(_, n)| *n == name).map(|(t, _)| *t)
}

/// Priorities npagent uses (Antrea's values where it has them).
pub mod priority {
    /// Established/related connections skip the policy tables; a pod's neighbour discovery
    /// in SpoofGuard.
    pub const SKIP: u16 = 210;
    /// Clause flows, default drops, per-port flows (classification, spoof guard, forwarding
    /// by IP address, output).
    pub const NORMAL: u16 = 200;
    /// `conj_id` flows: the priority printed on Allow log lines.
    pub const CONJ: u16 = 190;
    /// Forwarding to a local pod by MAC (below forwarding by IP address).
    pub const BY_MAC: u16 = 190;
    /// IP to a broadcast or multicast MAC with no local IP destination: dropped.
    pub const NON_UNICAST: u16 = 180;
    /// Neighbour discovery from the node's own ports, outside conntrack.
    pub const ND: u16 = 110;
    /// IP into conntrack.
    pub const IP: u16 = 100;
    /// Table-miss flows.
    pub const MISS: u16 = 0;
}

/// The conntrack zone of npagent's connections.
pub const CT_ZONE: u16 = 65520;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for (id, name) in TABLES {
            assert_eq!(table_name(id), Some(name));
            assert_eq!(table_id(name), Some(id));
        }
        assert_eq!(table_name(10), None);
        assert_eq!(table_id("Nope"), None);
    }
}
