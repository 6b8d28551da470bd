//! LogCopy: where the logging copies that are not a default drop's are made, each through the
//! meter of the local pod it belongs to ([`super::meters`]), so that no local pod's flood
//! sheds another local pod's lines.
//!
//! A flow that logs loads the copy's kind into `reg7` and resubmits here ([`request`]); the
//! flows of each local pod's port ([`port_flows`]) make the copy, userdata and meter fixed
//! per pod and kind:
//! - an Allow or staged copy (`WouldDrop`, `WouldAllow`), of either direction, passes the
//!   meter of the connection's original source (`reg2`) when that is a local pod, else the
//!   meter of the pod its ingress was judged for (`reg4`): a pod flooding another pod with
//!   new connections sheds only its own lines, while connections from beyond the node (and
//!   what the node forwards for them) share the meter of the pod they reach;
//! - a security event passes the meter of the pod whose port sent the packet (`in_port`),
//!   and the node's own meter when no pod's port did (the gateway's, an uplink's).
//!
//! The pod the policies judged for is not in the userdata (a copy's meter is its source's):
//! npagent reads it from `reg2` (egress) or `reg4` (ingress), as OVS reports them in the
//! packet-in. A copy whose pod has no flows here (gone since) is not made.

use super::cookie::{self, Kind};
use super::flow::{self, FlowKey, FlowValue};
use super::meters::{self, MeterKind};
use super::rules::{Direction, Stage};
use super::tables::{self, priority};
use super::userdata::{Disposition, LogUserdata, SecurityEvent};
use crate::model::cluster_policy::Action as ClusterAction;
use crate::model::cluster_policy::Tier;
use ofp::{Action, Instruction, Oxm};

/// What a copy LogCopy makes is of (`reg7`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CopyKind {
    /// A logged rule allowed a connection's first packet.
    Allow(Direction),
    /// The enforced tables allowed it, the staged view would drop it.
    WouldDrop(Direction),
    /// A default drop dropped it, the staged view would allow it.
    WouldAllow(Direction),
    /// A packet dropped as a security event.
    Security(SecurityEvent),
    /// A ClusterNetworkPolicy rule's verdict (its rule in `reg6`).
    Cluster(ClusterAction, Direction),
}

impl CopyKind {
    /// Every copy of a connection's verdict, which belongs to its source or judged pod.
    const VERDICTS: [CopyKind; 12] = [
        CopyKind::Allow(Direction::Ingress),
        CopyKind::Allow(Direction::Egress),
        CopyKind::WouldDrop(Direction::Ingress),
        CopyKind::WouldDrop(Direction::Egress),
        CopyKind::WouldAllow(Direction::Ingress),
        CopyKind::WouldAllow(Direction::Egress),
        CopyKind::Cluster(ClusterAction::Accept, Direction::Ingress),
        CopyKind::Cluster(ClusterAction::Accept, Direction::Egress),
        CopyKind::Cluster(ClusterAction::Deny, Direction::Ingress),
        CopyKind::Cluster(ClusterAction::Deny, Direction::Egress),
        CopyKind::Cluster(ClusterAction::Pass, Direction::Ingress),
        CopyKind::Cluster(ClusterAction::Pass, Direction::Egress),
    ];

    /// Its kind in `reg7` (zero is no copy): 1 to 12 a verdict's, `0x10` plus the event's
    /// code a security event's.
    fn mark(self) -> u32 {
        let direction = |d| match d {
            Direction::Ingress => 1,
            Direction::Egress => 2,
        };
        match self {
            CopyKind::Allow(d) => direction(d),
            CopyKind::WouldDrop(d) => 2 + direction(d),
            CopyKind::WouldAllow(d) => 4 + direction(d),
            CopyKind::Cluster(ClusterAction::Accept, d) => 6 + direction(d),
            CopyKind::Cluster(ClusterAction::Deny, d) => 8 + direction(d),
            CopyKind::Cluster(ClusterAction::Pass, d) => 10 + direction(d),
            CopyKind::Security(event) => 0x10 + event as u32,
        }
    }

    /// Its userdata, for the pod on port `o` (whose meter it passes).
    fn userdata(self, o: u32) -> LogUserdata {
        let (disposition, table_id, subject) = match self {
            CopyKind::Allow(d) => (Disposition::Allow, d.rule_table(), o),
            CopyKind::WouldDrop(d) => (Disposition::WouldDrop, Stage::Staged.default_table(d), o),
            CopyKind::WouldAllow(d) => (Disposition::WouldAllow, Stage::Staged.rule_table(d), o),
            CopyKind::Security(event) => (Disposition::Drop, event_table(event), event as u32),
            CopyKind::Cluster(action, d) => {
                let disposition = match action {
                    ClusterAction::Accept => Disposition::Allow,
                    ClusterAction::Deny => Disposition::Drop,
                    ClusterAction::Pass => Disposition::Pass,
                };
                (disposition, d.tier_table(Tier::Admin), o)
            }
        };
        LogUserdata { disposition, table_id, subject }
    }

    /// The kind of meter it passes.
    fn meter_kind(self) -> MeterKind {
        match self {
            CopyKind::Allow(_) | CopyKind::Cluster(ClusterAction::Accept | ClusterAction::Pass, _) => MeterKind::Allow,
            CopyKind::Cluster(ClusterAction::Deny, _) => MeterKind::Drop,
            CopyKind::WouldDrop(_) | CopyKind::WouldAllow(_) => MeterKind::Staged,
            CopyKind::Security(_) => MeterKind::Security,
        }
    }

    /// The direction of a verdict's copy.
    fn direction(self) -> Option<Direction> {
        match self {
            CopyKind::Allow(d) | CopyKind::WouldDrop(d) | CopyKind::WouldAllow(d) | CopyKind::Cluster(_, d) => Some(d),
            CopyKind::Security(_) => None,
        }
    }
}

/// The security events copied through LogCopy. `ConntrackLimit` is not: ConntrackQuota copies
/// it itself, through the meter of the pod whose zone refused (see `pipeline`), which LogCopy's
/// `in_port` could not name for a connection into the pod.
const LOG_COPY_EVENTS: [SecurityEvent; 4] = [
    SecurityEvent::ForgedSource,
    SecurityEvent::TaggedFrame,
    SecurityEvent::InvalidConnection,
    SecurityEvent::ForeignIcmpError,
];

/// The table that drops a security event's packets.
fn event_table(event: SecurityEvent) -> u8 {
    match event {
        SecurityEvent::ForgedSource | SecurityEvent::TaggedFrame => tables::SPOOF_GUARD,
        SecurityEvent::InvalidConnection | SecurityEvent::ForeignIcmpError => tables::CONNTRACK_STATE,
        SecurityEvent::ConntrackLimit => tables::CONNTRACK_QUOTA,
    }
}

/// The actions that make copy `copy` of the packet (and come back).
pub(crate) fn request(copy: CopyKind) -> Vec<Action> {
    vec![flow::set_reg(7, copy.mark()), flow::resubmit(tables::LOG_COPY)]
}

/// `controller(…)` with `copy`'s userdata for the pod on port `o`, through `meter`.
fn make(copy: CopyKind, o: u32, meter: u32, controller_id: u16) -> Vec<Instruction> {
    vec![Instruction::ApplyActions(vec![flow::controller(&copy.userdata(o), meter, controller_id)])]
}

/// The copy of security event `event` of the pod on port `o`, through that pod's security
/// meter, to controller `controller_id`.
pub(crate) fn security_event(event: SecurityEvent, o: u32, controller_id: u16) -> Action {
    let copy = CopyKind::Security(event);
    flow::controller(&copy.userdata(o), meters::pod(MeterKind::Security, o), controller_id)
}

/// LogCopy's flows of the local pod on port `o`: the copies of the connections it opened
/// (either direction, priority 200), those of the connections to it from no local pod
/// (ingress, 190, below), and the security events of the packets its port sent; each
/// through the pod's meter of the copy's kind, to controller `controller_id`.
pub(crate) fn port_flows(o: u32, controller_id: u16) -> Vec<(FlowKey, FlowValue)> {
    let v = |instructions| FlowValue { cookie: cookie::cookie(Kind::Port, u64::from(o)), instructions };
    let key =
        |prio, owner: Oxm, copy: CopyKind| FlowKey::new(tables::LOG_COPY, prio, vec![flow::reg7(copy.mark()), owner]);
    let mut out = Vec::new();
    for copy in CopyKind::VERDICTS {
        let meter = meters::pod(copy.meter_kind(), o);
        out.push((key(priority::NORMAL, flow::reg2(o), copy), v(make(copy, o, meter, controller_id))));
        if copy.direction() == Some(Direction::Ingress) {
            out.push((key(priority::BY_DESTINATION, flow::reg4(o), copy), v(make(copy, o, meter, controller_id))));
        }
    }
    for event in LOG_COPY_EVENTS {
        let copy = v(vec![Instruction::ApplyActions(vec![security_event(event, o, controller_id)])]);
        out.push((key(priority::NORMAL, Oxm::InPort(o), CopyKind::Security(event)), copy));
    }
    out
}

/// LogCopy's fixed flows: the security events of packets no pod's port sent, through the
/// node's meter; nothing for any other copy no pod's flow took.
pub(crate) fn fixed_flows(controller_id: u16) -> Vec<(FlowKey, FlowValue)> {
    let v = |instructions| FlowValue { cookie: cookie::cookie(Kind::Pipeline, 0), instructions };
    let mut out = vec![(FlowKey::new(tables::LOG_COPY, priority::MISS, vec![]), v(vec![]))];
    for event in LOG_COPY_EVENTS {
        let copy = CopyKind::Security(event);
        out.push((
            FlowKey::new(tables::LOG_COPY, priority::UNOWNED, vec![flow::reg7(copy.mark())]),
            v(make(copy, 0, meters::NODE_SECURITY, controller_id)),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn every_copy() -> Vec<CopyKind> {
        CopyKind::VERDICTS.into_iter().chain(SecurityEvent::ALL.map(CopyKind::Security)).collect()
    }

    #[test]
    fn every_copy_has_a_mark_of_its_own() {
        let marks: BTreeSet<u32> = every_copy().into_iter().map(CopyKind::mark).collect();
        assert_eq!(marks.len(), every_copy().len());
        assert!(!marks.contains(&0), "zero is no copy");
        // The Allow copies keep the marks of earlier versions.
        assert_eq!((CopyKind::Allow(Direction::Ingress).mark(), CopyKind::Allow(Direction::Egress).mark()), (1, 2));
    }

    #[test]
    fn a_pod_has_one_flow_per_copy_and_owner_each_through_its_own_meter_of_the_kind() {
        let flows = port_flows(7, 9);
        // 12 verdicts by source, 6 ingress ones by destination, 4 security events by port.
        assert_eq!(flows.len(), 12 + 6 + LOG_COPY_EVENTS.len());
        let keys: BTreeSet<&FlowKey> = flows.iter().map(|(k, _)| k).collect();
        assert_eq!(keys.len(), flows.len());
        for (key, value) in &flows {
            assert_eq!(key.table, tables::LOG_COPY);
            let [Instruction::ApplyActions(actions)] = value.instructions.as_slice() else { panic!("{value:?}") };
            let [Action::Controller2(c)] = actions.as_slice() else { panic!("{actions:?}") };
            let meter = c.meter_id.unwrap();
            assert_eq!(
                meters::owner(meter).map(|o| matches!(o, meters::MeterOwner::Pod { ofport: 7, .. })),
                Some(true)
            );
        }
        let other = port_flows(8, 9);
        assert!(other.iter().all(|(k, _)| !keys.contains(k)), "no two pods share a flow");
    }

    #[test]
    fn a_node_ports_security_events_pass_the_nodes_meter() {
        let flows = fixed_flows(9);
        assert_eq!(flows.len(), 1 + LOG_COPY_EVENTS.len());
        let meters: BTreeSet<Option<u32>> = flows
            .iter()
            .filter_map(|(_, v)| match v.instructions.as_slice() {
                [Instruction::ApplyActions(a)] => match a.as_slice() {
                    [Action::Controller2(c)] => Some(c.meter_id),
                    _ => None,
                },
                _ => None,
            })
            .collect();
        assert_eq!(meters, BTreeSet::from([Some(meters::NODE_SECURITY)]));
    }
}
