//! The rule table the audit log reads: what a conjunction id or an ofport stands for.

use super::ids::PortRange;
use crate::model::cluster_policy::{Action, Tier};
use crate::model::ObjectRef;
use std::collections::BTreeMap;

/// Direction of a rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Direction {
    Ingress,
    Egress,
}

impl Direction {
    /// Both directions, ingress first.
    pub(crate) const BOTH: [Direction; 2] = [Direction::Ingress, Direction::Egress];

    /// The table of the direction's rules (conjunctions and their `conj_id` flows).
    pub fn rule_table(self) -> u8 {
        match self {
            Direction::Ingress => super::tables::INGRESS_RULE,
            Direction::Egress => super::tables::EGRESS_RULE,
        }
    }

    /// The table of the direction's default drops.
    pub fn default_table(self) -> u8 {
        match self {
            Direction::Ingress => super::tables::INGRESS_DEFAULT_RULE,
            Direction::Egress => super::tables::EGRESS_DEFAULT_RULE,
        }
    }

    /// The table of the direction's rules of ClusterNetworkPolicy tier `tier`.
    pub fn tier_table(self, tier: Tier) -> u8 {
        use super::tables::*;
        match (tier, self) {
            (Tier::Admin, Direction::Ingress) => ADMIN_INGRESS_RULE,
            (Tier::Admin, Direction::Egress) => ADMIN_EGRESS_RULE,
            (Tier::Baseline, Direction::Ingress) => BASELINE_INGRESS_RULE,
            (Tier::Baseline, Direction::Egress) => BASELINE_EGRESS_RULE,
        }
    }

    /// The direction whose rules (of a tier, enforced or staged) or default drops live in
    /// table `id`.
    pub(crate) fn of_table(id: u8) -> Option<Direction> {
        Direction::BOTH
            .into_iter()
            .find(|d| Stage::BOTH.into_iter().any(|s| s.rule_tables(*d).contains(&id) || s.default_table(*d) == id))
    }

    /// `Ingress` or `Egress`, as np.log prints it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Direction::Ingress => "Ingress",
            Direction::Egress => "Egress",
        }
    }
}

/// Which policies a compiler's flows carry out: the enforced ones, or the staged view's
/// (every StagedNetworkPolicy over them), whose flows only record a verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Stage {
    Enforced,
    Staged,
}

impl Stage {
    pub(crate) const BOTH: [Stage; 2] = [Stage::Enforced, Stage::Staged];

    /// The table of `direction`'s rules.
    pub fn rule_table(self, direction: Direction) -> u8 {
        match self {
            Stage::Enforced => direction.rule_table(),
            Stage::Staged => match direction {
                Direction::Ingress => super::tables::STAGED_INGRESS_RULE,
                Direction::Egress => super::tables::STAGED_EGRESS_RULE,
            },
        }
    }

    /// Every table of `direction`'s rules with conjunction ids: the enforced NetworkPolicy
    /// rules' and the tiers' (ClusterNetworkPolicy), or the staged view's.
    pub(crate) fn rule_tables(self, direction: Direction) -> Vec<u8> {
        match self {
            Stage::Enforced => {
                vec![direction.tier_table(Tier::Admin), direction.rule_table(), direction.tier_table(Tier::Baseline)]
            }
            Stage::Staged => vec![self.rule_table(direction)],
        }
    }

    /// The table of `direction`'s isolation (default drops, or the staged Drop verdicts).
    pub fn default_table(self, direction: Direction) -> u8 {
        match self {
            Stage::Enforced => direction.default_table(),
            Stage::Staged => match direction {
                Direction::Ingress => super::tables::STAGED_INGRESS_DEFAULT_RULE,
                Direction::Egress => super::tables::STAGED_EGRESS_DEFAULT_RULE,
            },
        }
    }
}

/// One compiled rule, as the audit log names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleInfo {
    /// Its conjunction id.
    pub id: u32,
    pub policy: ObjectRef,
    /// Kubernetes NetworkPolicy rules have no names: `None` (Antrea prints `<nil>`); formats
    /// that want a name can use [`RuleInfo::index`] (e.g. `ingress-0`).
    pub name: Option<String>,
    /// Index of the rule in the policy's `spec.ingress` or `spec.egress`.
    pub index: u32,
    pub direction: Direction,
    /// OpenFlow priority of the flow that logs it.
    pub priority: u16,
    /// Resolved ports of this group (empty = all).
    pub ports: Vec<PortRange>,
    /// Cookie of its `conj_id` flow.
    pub cookie: u64,
    /// The policy's log label (its `networkpolicy.antrea.io/log-label` annotation).
    pub log_label: Option<String>,
    /// The rule was deleted; it stays resolvable for the id grace period.
    pub deleted: bool,
    /// A ClusterNetworkPolicy's rule (its [`RuleInfo::policy`] has no namespace): its tier,
    /// action and policy priority. `None` for a NetworkPolicy's.
    pub cluster: Option<ClusterRuleInfo>,
}

/// What a ClusterNetworkPolicy rule is, beside what every rule has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClusterRuleInfo {
    pub tier: Tier,
    pub action: Action,
    /// The policy's `spec.priority` (0 to 1000, lower first in its tier).
    pub policy_priority: u16,
}

impl RuleInfo {
    /// The table of its `conj_id` flow (enforced rules).
    pub fn table(&self) -> u8 {
        match self.cluster {
            Some(c) => self.direction.tier_table(c.tier),
            None => self.direction.rule_table(),
        }
    }
}

/// Conjunction id -> rule, and ofport -> local pod.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RuleTable {
    pub(crate) rules: BTreeMap<u32, RuleInfo>,
    pub(crate) ports: BTreeMap<u32, ObjectRef>,
}

impl RuleTable {
    /// The rule with conjunction id `id` (live, or deleted within the grace period).
    pub fn rule(&self, id: u32) -> Option<&RuleInfo> {
        self.rules.get(&id)
    }

    /// The local pod on `ofport`.
    pub(crate) fn pod(&self, ofport: u32) -> Option<&ObjectRef> {
        self.ports.get(&ofport)
    }

    /// All rules by id.
    pub fn rules(&self) -> &BTreeMap<u32, RuleInfo> {
        &self.rules
    }
}
