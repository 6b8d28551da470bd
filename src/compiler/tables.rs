//! The pipeline's tables: ids and the names npagent gives them through OVSDB (`Flow_Table`),
//! which `ovs-ofctl dump-flows --names` prints.

/// ARP, ND and non-IP to NORMAL; IP into conntrack.
pub const CLASSIFIER: u8 = 0;
/// Drops invalid connections.
pub const CONNTRACK_STATE: u8 = 1;
/// Destination MAC of a local pod to `reg1 = ofport`.
pub const L2_FORWARDING_CALC: u8 = 2;
/// Kubernetes NetworkPolicy ingress rules (conjunctive matches).
pub const INGRESS_RULE: u8 = 3;
/// Default drop of isolated local pods.
pub const INGRESS_DEFAULT_RULE: u8 = 4;
/// Commits new connections that got this far.
pub const CONNTRACK_COMMIT: u8 = 5;
/// Output to the local pod's port, else NORMAL.
pub const OUTPUT: u8 = 6;

/// Every table, in pipeline order: (id, name).
pub const TABLES: [(u8, &str); 7] = [
    (CLASSIFIER, "Classifier"),
    (CONNTRACK_STATE, "ConntrackState"),
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
    /// Established/related connections skip the policy tables; ND in the classifier.
    pub const SKIP: u16 = 210;
    /// Clause flows, default drops, per-port forwarding flows.
    pub const NORMAL: u16 = 200;
    /// `conj_id` flows: the priority printed on Allow log lines.
    pub const CONJ: u16 = 190;
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
        assert_eq!(table_name(7), None);
        assert_eq!(table_id("Nope"), None);
    }
}
