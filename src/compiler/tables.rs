//! The pipeline's tables: ids and the names npagent gives them through OVSDB (`Flow_Table`),
//! which `ovs-ofctl dump-flows --names` prints.

/// Sorts packets by the class of the port they came in on: a pod's port to [`SPOOF_GUARD`],
/// the gateway's and uplinks' IP into conntrack and their ARP and neighbour discovery to
/// [`NEIGHBOR_FORWARD`]; any other port (LOCAL, one without external_ids) is dropped.
pub const CLASSIFIER: u8 = 0;
/// From a pod's port, only that pod's own MAC and addresses pass (IP, ARP, ND), untagged;
/// else drop.
pub(crate) const SPOOF_GUARD: u8 = 1;
/// Drops invalid connections and ICMP errors a pod sends about connections it is no end of;
/// marks the node's own traffic; sends pods' connections to Service ranges to the gateway
/// without a policy verdict (and their replies on without one).
pub(crate) const CONNTRACK_STATE: u8 = 2;
/// The local pod that is the source of the packet's connection (its original direction,
/// `ct_nw_src`) into `reg2`: the pod whose egress policy judges every packet of it.
pub(crate) const CONNECTION_SOURCE: u8 = 3;
/// The local pod that is the destination of the packet's connection (`ct_nw_dst`) into
/// `reg4`: the pod whose ingress policy judges every packet of it.
pub(crate) const CONNECTION_DESTINATION: u8 = 4;
/// The Admin tier's egress rules (ClusterNetworkPolicy, [`super::cluster`]): Accept on to
/// L2ForwardingCalc, Deny drops, Pass (and a miss) on to [`EGRESS_RULE`].
pub const ADMIN_EGRESS_RULE: u8 = 5;
/// Kubernetes NetworkPolicy egress rules (conjunctive matches on the connection's source pod
/// and its original destination and port), for every packet of a connection.
pub const EGRESS_RULE: u8 = 6;
/// Default drop of egress-isolated local pods.
pub const EGRESS_DEFAULT_RULE: u8 = 7;
/// The Baseline tier's egress rules, for the connections of pods no NetworkPolicy isolates
/// for egress: Accept and Pass (and a miss) on to L2ForwardingCalc, Deny drops.
pub const BASELINE_EGRESS_RULE: u8 = 8;
/// The destination port into `reg1`: replies of connections that entered by a node's port go
/// back out there; IP to a local pod's address goes to that pod (its MAC as destination);
/// other IP from a pod is routed to the gateway; anything else is dropped.
pub(crate) const L2_FORWARDING_CALC: u8 = 9;
/// The Admin tier's ingress rules: Accept on to ConntrackCommit, Deny drops, Pass (and a
/// miss) on to [`INGRESS_RULE`]; the node's own connections pass.
pub const ADMIN_INGRESS_RULE: u8 = 10;
/// Kubernetes NetworkPolicy ingress rules (conjunctive matches), for every packet of a
/// connection; the node's own connections pass.
pub const INGRESS_RULE: u8 = 11;
/// Default drop of isolated local pods.
pub const INGRESS_DEFAULT_RULE: u8 = 12;
/// The Baseline tier's ingress rules, for the connections into pods no NetworkPolicy
/// isolates for ingress.
pub const BASELINE_INGRESS_RULE: u8 = 13;
/// Every packet that got this far is also tracked in the conntrack zone of the local pod that
/// owns its connection (its original source, else its original destination; the zone is the
/// pod's ofport), so that a pod's zone limit bounds the connections it holds; a new
/// connection is committed there and recirculated to [`CONNTRACK_QUOTA`].
pub(crate) const CONNTRACK_COMMIT: u8 = 14;
/// Output to the port in `reg1`; nothing else leaves.
pub const OUTPUT: u8 = 15;
/// ARP and neighbour discovery, forwarded by the address they ask about or answer to (the
/// owner's port only, never flooded).
pub(crate) const NEIGHBOR_FORWARD: u8 = 16;
/// The logging copies other than the default drops' (Allow, staged verdicts, security
/// events), each through the meter of the pod it belongs to (`reg7` the kind of copy;
/// `reg2`, `reg4` or `in_port` the pod; see [`super::copies`]); the flows that log resubmit
/// here.
pub const LOG_COPY: u8 = 17;
/// A new connection whose commit into its owner's zone succeeded (`ct_mark=1` there) is
/// committed into [`CT_ZONE`] (with the ofport of the node's port it entered by) and
/// resubmitted to [`OUTPUT`]; one that its owner's full zone refused is dropped.
pub(crate) const CONNTRACK_QUOTA: u8 = 18;

/// The staged view's egress rules ([`crate::model::staged`]), for the first packet of a
/// connection whose source pod a staged policy touches: a `conj_id` flow records the verdict
/// Allow and the rule in `reg8`/`reg9`; its miss goes on to [`STAGED_EGRESS_DEFAULT_RULE`].
pub const STAGED_EGRESS_RULE: u8 = 19;
/// The staged view's egress isolation: an isolated pod's verdict is Drop (`reg8=1`), any
/// other pod's Allow (`reg8=2`).
pub const STAGED_EGRESS_DEFAULT_RULE: u8 = 20;
/// The staged view's ingress rules (verdict and rule in `reg10`/`reg11`); the node's own
/// connections are allowed, as in [`INGRESS_RULE`].
pub const STAGED_INGRESS_RULE: u8 = 21;
/// The staged view's ingress isolation (`reg10`).
pub const STAGED_INGRESS_DEFAULT_RULE: u8 = 22;

/// Every table, in pipeline order: (id, name).
pub const TABLES: [(u8, &str); 23] = [
    (CLASSIFIER, "Classifier"),
    (SPOOF_GUARD, "SpoofGuard"),
    (CONNTRACK_STATE, "ConntrackState"),
    (CONNECTION_SOURCE, "ConnectionSource"),
    (CONNECTION_DESTINATION, "ConnectionDestination"),
    (ADMIN_EGRESS_RULE, "AdminEgressRule"),
    (EGRESS_RULE, "EgressRule"),
    (EGRESS_DEFAULT_RULE, "EgressDefaultRule"),
    (BASELINE_EGRESS_RULE, "BaselineEgressRule"),
    (L2_FORWARDING_CALC, "L2ForwardingCalc"),
    (ADMIN_INGRESS_RULE, "AdminIngressRule"),
    (INGRESS_RULE, "IngressRule"),
    (INGRESS_DEFAULT_RULE, "IngressDefaultRule"),
    (BASELINE_INGRESS_RULE, "BaselineIngressRule"),
    (CONNTRACK_COMMIT, "ConntrackCommit"),
    (OUTPUT, "Output"),
    (NEIGHBOR_FORWARD, "NeighborForward"),
    (LOG_COPY, "LogCopy"),
    (CONNTRACK_QUOTA, "ConntrackQuota"),
    (STAGED_EGRESS_RULE, "StagedEgressRule"),
    (STAGED_EGRESS_DEFAULT_RULE, "StagedEgressDefaultRule"),
    (STAGED_INGRESS_RULE, "StagedIngressRule"),
    (STAGED_INGRESS_DEFAULT_RULE, "StagedIngressDefaultRule"),
];

/// The name of table `id`, if it is one of npagent's.
pub(crate) fn table_name(id: u8) -> Option<&'static str> {
    TABLES.iter().find(|(t, _)| *t == id).map(|(_, n)| *n)
}

/// The id of the table called `name`.
pub fn table_id(name: &str) -> Option<u8> {
    TABLES.iter().find(|(_, n)| *n == name).map(|(t, _)| *t)
}

/// Priorities npagent uses (Antrea's values where it has them).
pub mod priority {
    /// Replies of connections that entered by a node's port, back out there.
    pub(crate) const REPLY: u16 = 220;
    /// A pod's neighbour discovery in SpoofGuard; the node's own traffic skips the ingress
    /// rules; a node port's ARP, ND and IP in the Classifier; invalid connections dropped.
    pub(crate) const SKIP: u16 = 210;
    /// Clause flows, default drops, per-port flows (classification, spoof guard, forwarding
    /// by IP address, output, a pod's copies in LogCopy).
    pub(crate) const NORMAL: u16 = 200;
    /// `conj_id` flows: the priority printed on Allow log lines.
    pub(crate) const CONJ: u16 = 190;
    /// ICMP errors from a pod about connections it is no end of.
    pub(crate) const FOREIGN_ERROR: u16 = 195;
    /// The gateway's and the node's addresses (above any pod's: a pod cannot claim them);
    /// a source pod behind the gateway.
    pub(crate) const NODE: u16 = 205;
    /// Pods' new connections to Service ranges.
    pub(crate) const SERVICE: u16 = 185;
    /// Routing to the gateway (below any local destination); the rest of Service connections.
    pub(crate) const ROUTE: u16 = 180;
    /// Tagged frames in SpoofGuard, a security event.
    pub(crate) const TAGGED_DROP: u16 = 3;
    /// Packets SpoofGuard drops without a security event (IPv6 from a link-local or the
    /// unspecified address: multicast listener reports and the like).
    pub(crate) const QUIET_DROP: u16 = 2;
    /// IP SpoofGuard drops as a security event (a forged source address or MAC).
    pub(crate) const LOGGED_DROP: u16 = 1;
    /// In LogCopy, the copies of a connection owned by the local pod that is its original
    /// destination (below those of the one owned by its original source).
    pub(crate) const BY_DESTINATION: u16 = 190;
    /// A connection the node started into a local pod, counted in [`super::NODE_ZONE`]
    /// (below one a local pod opened).
    pub(crate) const BY_NODE: u16 = 195;
    /// A connection that entered by a node's port, counted in [`super::INBOUND_ZONE`] (below
    /// the node's own).
    pub(crate) const INBOUND: u16 = 190;
    /// A local pod's new connection that its full zone refused: a security event.
    pub(crate) const REFUSED: u16 = 20;
    /// A new connection into a local pod that the node's or the inbound zone refused.
    pub(crate) const REFUSED_INBOUND: u16 = 10;
    /// New connections with no local pod at either end; the security events of packets no
    /// pod's port sent.
    pub(crate) const UNOWNED: u16 = 100;
    /// A connection's first packet that the staged view judges differently from the
    /// enforced verdict (a `WouldDrop` copy, then the table again), above every other flow.
    pub(crate) const STAGED_CHECK: u16 = 230;
    /// A connection's first packet whose pod a staged policy touches: judged by the staged
    /// tables, then as by the flows below.
    pub(crate) const STAGED_ENTRY: u16 = 201;
    /// Table-miss flows.
    pub(crate) const MISS: u16 = 0;
    /// In the tiers' tables ([`super::super::cluster`]), the node's own connections, above
    /// every rule.
    pub(crate) const TIER_SKIP: u16 = 65000;
    /// In the tiers' tables, the priority of a tier's first rule; each later rule of the
    /// tier's order is one lower (at most 1,001 policies of 25 rules each: never down to
    /// [`SKIP`]).
    pub(crate) const TIER_TOP: u16 = 60000;
}

/// The conntrack zone of npagent's connections.
pub(crate) const CT_ZONE: u16 = 65520;

/// The `ct_mark` a new connection gets in its owner's zone when it is committed there: the
/// recirculated packet carries it only when the commit succeeded.
pub(crate) const QUOTA_MARK: u32 = 1;

/// The `ct_mark` a later packet of a connection sets in its owner's zone: carried back only
/// when the zone holds the connection (still, or again when the commit re-created an entry
/// that had gone), so a commit the zone's limit refused drops the packet.
pub(crate) const QUOTA_LATER_MARK: u32 = 2;

/// The conntrack zone that counts the connections the node itself starts into local pods
/// (from the gateway, from one of the node's addresses: kubelet's probes, host processes).
pub(crate) const NODE_ZONE: u16 = 65521;

/// The conntrack zone that counts the connections from beyond the node into local pods
/// (entered by the gateway from any other source, or by an uplink): no pod's zone fills
/// through connections it did not open.
pub(crate) const INBOUND_ZONE: u16 = 65522;

/// The conntrack zone that counts the connections the local pod on port `ofport` opens: the
/// ofport itself, when it fits a zone and is none of npagent's own zones (OVS gives ports
/// numbers below 0xff00, so every real one does).
pub(crate) fn quota_zone(ofport: u32) -> Option<u16> {
    u16::try_from(ofport).ok().filter(|z| *z != 0 && *z < 0xff00)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for (i, (id, name)) in TABLES.into_iter().enumerate() {
            assert_eq!(usize::from(id), i, "ids in pipeline order, none skipped");
            assert_eq!(table_name(id), Some(name));
            assert_eq!(table_id(name), Some(id));
        }
        assert_eq!(table_name(TABLES.len() as u8), None);
        assert_eq!(table_id("Nope"), None);
    }

    #[test]
    fn quota_zones_are_ofports_apart_from_the_main_zone() {
        assert_eq!(quota_zone(7), Some(7));
        assert_eq!(quota_zone(32769), Some(32769));
        assert_eq!(quota_zone(0), None);
        assert_eq!(quota_zone(u32::from(CT_ZONE)), None);
        assert_eq!(quota_zone(u32::from(NODE_ZONE)), None);
        assert_eq!(quota_zone(u32::from(INBOUND_ZONE)), None);
        assert_eq!(quota_zone(0x1_0000), None);
    }
}
