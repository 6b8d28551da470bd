//! Conjunction ids: npagent's own, stable across recompiles and restarts.
//!
//! The allocator is explicit state passed to the compiler. A rule keeps its id as long as it
//! exists; a released id stays reserved (and its rule resolvable) for a grace period, so a
//! late packet-in of a deleted rule is never attributed to a new one. At restart the ids are
//! recovered from the installed `conj_id` flows: each carries a cookie derived from its rule's
//! identity ([`super::cookie::rule_cookie`]).

use super::cookie::{self, Kind};
use super::rules::{Direction, Stage};
use crate::model::{ObjectRef, Protocol};
use ofp::{FlowStats, Oxm};
use std::collections::{BTreeMap, BTreeSet};

/// One resolved port range of a rule (a named port resolved for some pods).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PortRange {
    pub protocol: Protocol,
    pub(crate) first: u16,
    pub(crate) last: u16,
}

/// The identity of a compiled rule: the policy, the direction and index of the rule, and
/// the resolved ports of one group (of applied-to pods for ingress, of destination pods for
/// egress; empty = all ports).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RuleKey {
    pub policy: ObjectRef,
    pub direction: Direction,
    pub(crate) rule: u32,
    pub ports: Vec<PortRange>,
    /// ClusterNetworkPolicy rules only: the conjunction of the subject pods whose namespace
    /// asks for logging (a ClusterNetworkPolicy's subjects span namespaces whose switches
    /// differ, so its rules split in two). Always false for a NetworkPolicy's rules, whose
    /// logging is the whole policy's.
    pub(crate) logged: bool,
}

/// Allocates conjunction ids. Time is a caller-supplied monotonic count of seconds (`now`).
#[derive(Debug, Clone)]
pub struct IdAllocator {
    grace: u64,
    next: u32,
    live: BTreeMap<RuleKey, u32>,
    owners: BTreeMap<u32, RuleKey>,
    /// Released ids: id -> (its last rule, reserved until).
    released: BTreeMap<u32, (RuleKey, u64)>,
    released_by_key: BTreeMap<RuleKey, u32>,
    /// From installed flows at restart: rule cookie -> id, until claimed.
    recovered: BTreeMap<u64, u32>,
    recovered_ids: BTreeSet<u32>,
}

impl IdAllocator {
    /// A fresh allocator; released ids stay reserved for `grace` seconds.
    pub fn new(grace: u64) -> Self {
        IdAllocator {
            grace,
            next: 1,
            live: BTreeMap::new(),
            owners: BTreeMap::new(),
            released: BTreeMap::new(),
            released_by_key: BTreeMap::new(),
            recovered: BTreeMap::new(),
            recovered_ids: BTreeSet::new(),
        }
    }

    /// A fresh allocator with this one's grace period.
    pub(crate) fn with_same_grace(&self) -> Self {
        IdAllocator::new(self.grace)
    }

    /// An allocator that hands each enforced rule the id its installed `conj_id` flow
    /// carries. Flows that are not npagent's enforced rule flows are ignored.
    pub fn recover(flows: &[FlowStats], grace: u64) -> Self {
        Self::recover_stage(flows, grace, Stage::Enforced)
    }

    /// [`IdAllocator::recover`] for the staged view's rules.
    pub fn recover_staged(flows: &[FlowStats], grace: u64) -> Self {
        Self::recover_stage(flows, grace, Stage::Staged)
    }

    fn recover_stage(flows: &[FlowStats], grace: u64, stage: Stage) -> Self {
        let mut a = IdAllocator::new(grace);
        for f in flows {
            let rule_table = Direction::BOTH.iter().any(|d| stage.rule_tables(*d).contains(&f.table_id));
            if !rule_table || cookie::kind(f.cookie) != Some(Kind::Rule) {
                continue;
            }
            let Some(id) = f.match_.fields.iter().find_map(|o| match o {
                Oxm::ConjId(id) => Some(*id),
                _ => None,
            }) else {
                continue;
            };
            if a.recovered_ids.insert(id) {
                a.recovered.insert(f.cookie, id);
                a.next = a.next.max(id.saturating_add(1));
            }
        }
        a
    }

    /// The id of `key`, allocating one if it has none.
    pub(crate) fn claim(&mut self, key: &RuleKey) -> u32 {
        if let Some(id) = self.live.get(key) {
            return *id;
        }
        let id = if let Some(id) = self.released_by_key.remove(key) {
            self.released.remove(&id);
            id
        } else if let Some(id) = self.recovered.remove(&cookie::rule_cookie(key)) {
            self.recovered_ids.remove(&id);
            id
        } else {
            self.fresh()
        };
        self.live.insert(key.clone(), id);
        self.owners.insert(id, key.clone());
        id
    }

    fn fresh(&mut self) -> u32 {
        loop {
            let id = self.next;
            self.next = if self.next == u32::MAX { 1 } else { self.next + 1 };
            if !self.owners.contains_key(&id) && !self.released.contains_key(&id) && !self.recovered_ids.contains(&id) {
                return id;
            }
        }
    }

    /// Releases the id of `key`: reserved until `now + grace`.
    pub(crate) fn release(&mut self, key: &RuleKey, now: u64) {
        if let Some(id) = self.live.remove(key) {
            self.owners.remove(&id);
            self.released.insert(id, (key.clone(), now.saturating_add(self.grace)));
            self.released_by_key.insert(key.clone(), id);
        }
    }

    /// Ends recovery: recovered ids no rule claimed become released (reserved for the grace
    /// period from `now`).
    pub(crate) fn finish_recovery(&mut self, now: u64) {
        let until = now.saturating_add(self.grace);
        for id in std::mem::take(&mut self.recovered).into_values() {
            self.recovered_ids.remove(&id);
            // The rule is unknown; keep the id reserved under a placeholder identity.
            let key = RuleKey {
                policy: ObjectRef { namespace: "".into(), name: "".into() },
                direction: Direction::Ingress,
                rule: id,
                ports: vec![],
                logged: false,
            };
            self.released.insert(id, (key, until));
        }
        self.recovered_ids.clear();
    }

    /// Forgets released ids whose grace period is over; returns them.
    pub(crate) fn expire(&mut self, now: u64) -> Vec<u32> {
        let gone: Vec<u32> = self.released.iter().filter(|(_, (_, until))| *until <= now).map(|(id, _)| *id).collect();
        for id in &gone {
            if let Some((key, _)) = self.released.remove(id) {
                if self.released_by_key.get(&key) == Some(id) {
                    self.released_by_key.remove(&key);
                }
            }
        }
        gone
    }

    /// The live id of `key`.
    pub fn get(&self, key: &RuleKey) -> Option<u32> {
        self.live.get(key).copied()
    }

    /// Whether `id` is released but still reserved.
    pub fn is_reserved(&self, id: u32) -> bool {
        self.released.contains_key(&id)
    }

    /// Number of live ids.
    pub fn len(&self) -> usize {
        self.live.len()
    }

    /// Whether no id is live.
    pub fn is_empty(&self) -> bool {
        self.live.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str, rule: u32) -> RuleKey {
        RuleKey {
            policy: ObjectRef { namespace: "x".into(), name: name.into() },
            direction: Direction::Ingress,
            rule,
            ports: vec![],
            logged: false,
        }
    }

    #[test]
    fn ids_are_stable_and_not_reused_within_grace() {
        let mut a = IdAllocator::new(60);
        let a0 = a.claim(&key("a", 0));
        let b0 = a.claim(&key("b", 0));
        assert_ne!(a0, b0);
        assert_eq!(a.claim(&key("a", 0)), a0);
        a.release(&key("a", 0), 100);
        assert!(a.is_reserved(a0));
        // Force the counter to wrap onto the released id: still not handed out.
        a.next = a0;
        let c = a.claim(&key("c", 0));
        assert_ne!(c, a0);
        assert_ne!(c, b0);
        // The same rule coming back within grace gets its id back.
        assert_eq!(a.claim(&key("a", 0)), a0);
        a.release(&key("a", 0), 100);
        assert!(a.expire(159).is_empty());
        assert_eq!(a.expire(160), vec![a0]);
        a.next = a0;
        assert_eq!(a.claim(&key("d", 0)), a0);
    }
}
