//! The logging meters' ids. Every local pod has a meter of its own for each kind of copy:
//! its Allow copies, its Drop copies (its default drops), its security events and its staged
//! verdicts (`WouldDrop`, `WouldAllow`). A copy passes the meter of the pod it belongs to
//! (see [`super::copies`]: a connection's Allow and staged copies belong to its source when
//! that is a local pod), so a pod that floods the log sheds only its own lines, and a
//! meter's statistics name the pod whose lines it shed. The node has one meter of its own,
//! for the security events of packets no pod's port sent (the gateway's, an uplink's).
//!
//! One meter per pod and kind, not one per pod with a band per kind: an OpenFlow meter's
//! bands are picked by the rate the whole meter measures, not by what passes it, so one
//! meter cannot keep a pod's Drop flood from shedding its Allow lines. Four meters a pod
//! keeps the kinds apart at a bounded cost: at most four per ofport, and one for the node.
//!
//! The ids are derived from the pod's ofport (below 0xff00, so the ranges never overlap),
//! which lets every flow name its meter without a table of allocations and keeps a pod's
//! ids across restarts of npagent.

/// The meter of the security events of packets no local pod's port sent.
pub(crate) const NODE_SECURITY: u32 = 3;
/// Meters earlier versions of npagent installed that no flow uses now (4: the node's one
/// staged verdicts' meter); npagent deletes them.
const RETIRED: [u32; 1] = [4];
/// Ofports are below this (OpenFlow's reserved ports start at 0xff00).
const MAX_PORT: u32 = 0xff00;

/// What a meter carries: the label of a meter's counts in the metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum MeterKind {
    /// A pod's Allow copies.
    Allow,
    /// A pod's Drop copies (its default drops).
    Drop,
    /// A pod's security events (and the node's, on [`NODE_SECURITY`]).
    Security,
    /// A pod's staged verdicts (`WouldDrop`, `WouldAllow`).
    Staged,
}

impl MeterKind {
    /// Every kind, in the order of [`MeterKind::index`].
    pub(crate) const ALL: [MeterKind; 4] = [MeterKind::Allow, MeterKind::Drop, MeterKind::Security, MeterKind::Staged];

    /// The kind's place in [`MeterKind::ALL`].
    pub(crate) fn index(self) -> usize {
        self as usize
    }

    /// The first id of the kind's range; a pod's meter is this plus its ofport.
    fn base(self) -> u32 {
        match self {
            MeterKind::Allow => 0x1_0000,
            MeterKind::Drop => 0x2_0000,
            MeterKind::Security => 0x3_0000,
            MeterKind::Staged => 0x4_0000,
        }
    }

    /// The lower-case name the metrics and the warnings give it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            MeterKind::Allow => "allow",
            MeterKind::Drop => "drop",
            MeterKind::Security => "security",
            MeterKind::Staged => "staged",
        }
    }
}

/// The meter of the `kind` copies of the pod on port `ofport`.
pub(crate) fn pod(kind: MeterKind, ofport: u32) -> u32 {
    kind.base() + ofport
}

/// Whose copies a meter carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum MeterOwner {
    /// The copies of one kind of the pod on an ofport.
    Pod { kind: MeterKind, ofport: u32 },
    /// The security events of packets no local pod's port sent.
    Node,
}

impl MeterOwner {
    /// The kind of meter this owner's is.
    pub(crate) fn kind(self) -> MeterKind {
        match self {
            MeterOwner::Pod { kind, .. } => kind,
            MeterOwner::Node => MeterKind::Security,
        }
    }
}

/// The owner of meter `id`, if it is one of the meters npagent keeps.
pub(crate) fn owner(id: u32) -> Option<MeterOwner> {
    if id == NODE_SECURITY {
        return Some(MeterOwner::Node);
    }
    MeterKind::ALL.into_iter().find_map(|kind| {
        let ofport = id.checked_sub(kind.base()).filter(|o| *o < MAX_PORT)?;
        Some(MeterOwner::Pod { kind, ofport })
    })
}

/// Whether meter `id` is npagent's: one it keeps, or one an earlier version left.
pub(crate) fn is_npagents(id: u32) -> bool {
    owner(id).is_some() || RETIRED.contains(&id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_meter_names_its_owner_and_no_two_owners_share_a_meter() {
        let mut seen = std::collections::BTreeSet::from([NODE_SECURITY]);
        for ofport in [1, 2, 0xfeff] {
            for kind in MeterKind::ALL {
                let id = pod(kind, ofport);
                assert_eq!(owner(id), Some(MeterOwner::Pod { kind, ofport }), "meter {id:#x}");
                assert!(seen.insert(id), "meter {id:#x} twice");
            }
        }
        assert_eq!(owner(NODE_SECURITY), Some(MeterOwner::Node));
        let kinds: Vec<MeterKind> = MeterKind::ALL.iter().map(|&k| owner(pod(k, 1)).unwrap().kind()).collect();
        assert_eq!(kinds, MeterKind::ALL);
        assert_eq!(MeterOwner::Node.kind(), MeterKind::Security);
        assert!(MeterKind::ALL.iter().enumerate().all(|(i, k)| k.index() == i));
        let last = pod(MeterKind::Staged, MAX_PORT);
        for foreign in [0, 1, 2, 5, pod(MeterKind::Allow, 0) - 1, last, u32::MAX] {
            assert_eq!(owner(foreign), None, "meter {foreign:#x}");
            assert!(!is_npagents(foreign), "meter {foreign:#x}");
        }
        // Past a range's last ofport and before the next range: no one's.
        assert_eq!(owner(pod(MeterKind::Allow, MAX_PORT)), None);
    }

    #[test]
    fn a_retired_meter_is_npagents_to_delete_but_has_no_owner() {
        assert_eq!(owner(4), None);
        assert!(is_npagents(4));
        assert!(is_npagents(NODE_SECURITY) && is_npagents(pod(MeterKind::Staged, 7)));
    }
}
