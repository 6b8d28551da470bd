//! The logging meters' ids. Every local pod has two meters of its own, one for the Allow
//! copies of the connections its policies judge and one for the Drop copies of its default
//! drops, so that a pod that floods the log sheds only its own lines; security events
//! (SpoofGuard and conntrack drops) pass one meter of their own, and so do the staged
//! verdicts (`WouldDrop`, `WouldAllow`).
//!
//! The ids are derived from the pod's ofport (below 0xff00, so the ranges never overlap), which
//! lets every flow name its meter without a table of allocations, and a meter's statistics
//! name the pod whose copies it shed.

use super::userdata::Disposition;

/// The meter of the security events' copies.
pub(crate) const SECURITY: u32 = 3;
/// The meter of the staged verdicts' copies.
pub(crate) const STAGED: u32 = 4;
const ALLOW_BASE: u32 = 0x1_0000;
const DROP_BASE: u32 = 0x2_0000;
/// Ofports are below this (OpenFlow's reserved ports start at 0xff00).
const MAX_PORT: u32 = 0xff00;

/// The meter of the Allow copies of the pod on port `ofport`.
pub(crate) fn allow(ofport: u32) -> u32 {
    ALLOW_BASE + ofport
}

/// The meter of the Drop copies of the pod on port `ofport`.
pub(crate) fn drop(ofport: u32) -> u32 {
    DROP_BASE + ofport
}

/// Whose copies a meter carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum MeterOwner {
    /// The copies of one disposition for the pod on an ofport.
    Pod { disposition: Disposition, ofport: u32 },
    /// The security events.
    Security,
    /// The staged verdicts.
    Staged,
}

impl MeterOwner {
    /// The kind of meter this owner's is.
    pub(crate) fn kind(self) -> MeterKind {
        match self {
            MeterOwner::Pod { disposition: Disposition::Allow, .. } => MeterKind::Allow,
            MeterOwner::Pod { .. } => MeterKind::Drop,
            MeterOwner::Security => MeterKind::Security,
            MeterOwner::Staged => MeterKind::Staged,
        }
    }
}

/// What a meter carries, whoever's it is: the label of a meter's counts in the metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum MeterKind {
    /// A pod's Allow copies.
    Allow,
    /// A pod's Drop copies (its default drops).
    Drop,
    /// The security events.
    Security,
    /// The staged verdicts (`WouldDrop`, `WouldAllow`).
    Staged,
}

impl MeterKind {
    /// Every kind, in the order of [`MeterKind::index`].
    pub(crate) const ALL: [MeterKind; 4] = [MeterKind::Allow, MeterKind::Drop, MeterKind::Security, MeterKind::Staged];

    /// The kind's place in [`MeterKind::ALL`].
    pub(crate) fn index(self) -> usize {
        self as usize
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

/// The owner of meter `id`, if it is one of npagent's.
pub(crate) fn owner(id: u32) -> Option<MeterOwner> {
    let pod = |disposition, base: u32| {
        let ofport = id.checked_sub(base).filter(|o| *o < MAX_PORT)?;
        Some(MeterOwner::Pod { disposition, ofport })
    };
    match id {
        SECURITY => Some(MeterOwner::Security),
        STAGED => Some(MeterOwner::Staged),
        _ => pod(Disposition::Allow, ALLOW_BASE).or_else(|| pod(Disposition::Drop, DROP_BASE)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_meter_names_its_owner_and_no_two_owners_share_a_meter() {
        for ofport in [1, 2, 0xfeff] {
            assert_eq!(owner(allow(ofport)), Some(MeterOwner::Pod { disposition: Disposition::Allow, ofport }));
            assert_eq!(owner(drop(ofport)), Some(MeterOwner::Pod { disposition: Disposition::Drop, ofport }));
            assert_ne!(allow(ofport), drop(ofport));
            assert_ne!(allow(ofport), SECURITY);
        }
        assert_eq!(owner(SECURITY), Some(MeterOwner::Security));
        assert_eq!(owner(STAGED), Some(MeterOwner::Staged));
        let kinds: Vec<MeterKind> =
            [allow(1), drop(1), SECURITY, STAGED].into_iter().filter_map(owner).map(MeterOwner::kind).collect();
        assert_eq!(kinds, MeterKind::ALL);
        assert!(MeterKind::ALL.iter().enumerate().all(|(i, k)| k.index() == i));
        for foreign in [0, 1, 2, 5, ALLOW_BASE - 1, ALLOW_BASE + MAX_PORT, DROP_BASE + MAX_PORT, u32::MAX] {
            assert_eq!(owner(foreign), None, "meter {foreign:#x}");
        }
    }
}
