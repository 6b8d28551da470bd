//! The staged verdict beside the enforced one: the same question answered against the staged
//! view ([`crate::model::staged::staged_view`], compiled by the caller like the model), and
//! how the two differ. Pure: no I/O.
//!
//! When the verdicts differ, the difference is `WouldDrop` (enforced allows, the staged view
//! drops) naming, per direction that would drop, the staged policies that would isolate the
//! pod (when none would, those that edit away the rule that allows it today:
//! [`would_drop_culprits`], the audit log's rule too), or `WouldAllow` (enforced drops, the
//! staged view allows) naming the staged rules that would allow it (or the staged edits that
//! would stop isolating the pod).

use super::{AllowingRule, DirectionAnswer, Explanation, Verdict};
use crate::model::staged::would_drop_culprits;
use crate::model::Model;
use serde::Serialize;
use std::collections::BTreeSet;

/// The staged view's answer, compared with the enforced one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StagedExplanation {
    /// The staged policies of the model, `namespace/name`, sorted.
    pub staged_policies: Vec<String>,
    /// Both directions of the staged view allow the connection.
    pub allowed: bool,
    pub egress: DirectionAnswer,
    pub ingress: DirectionAnswer,
    /// How the staged verdict differs from the enforced one; `None` when it does not.
    pub difference: Option<StagedDifference>,
}

/// A staged verdict that differs from the enforced one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "disposition", content = "causes")]
pub enum StagedDifference {
    /// Enforced allows, the staged view drops: per direction that would drop, why.
    WouldDrop(Vec<StagedCause>),
    /// Enforced drops, the staged view allows: per direction that would allow, why.
    WouldAllow(Vec<StagedCause>),
}

impl StagedDifference {
    /// `WouldDrop` or `WouldAllow`, as the audit log names it.
    pub fn as_str(&self) -> &'static str {
        match self {
            StagedDifference::WouldDrop(_) => "WouldDrop",
            StagedDifference::WouldAllow(_) => "WouldAllow",
        }
    }
}

/// Why one direction's verdict changes in the staged view.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StagedCause {
    pub direction: &'static str,
    /// The staged policies responsible, `namespace/name`, sorted: for a drop those that would
    /// isolate the pod or, when none would, replace the policy whose rule allows it today; for an allow those
    /// whose rules would allow it or that would stop isolating the pod.
    pub policies: Vec<String>,
    /// For an allow, the staged rules that would allow the connection.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<AllowingRule>,
}

/// Compares `enforced` (the explanation against `model`) with `staged` (the same question
/// against the staged view of `model`).
pub fn compare(model: &Model, enforced: &Explanation, staged: Explanation) -> StagedExplanation {
    let names: BTreeSet<String> = model.staged_policies.keys().map(ToString::to_string).collect();
    let directions = [(&enforced.egress, &staged.egress), (&enforced.ingress, &staged.ingress)];
    let difference = match (enforced.allowed, staged.allowed) {
        (true, false) => {
            Some(StagedDifference::WouldDrop(directions.iter().filter_map(|(e, s)| would_drop(&names, e, s)).collect()))
        }
        (false, true) => Some(StagedDifference::WouldAllow(
            directions.iter().filter_map(|(e, s)| would_allow(&names, e, s)).collect(),
        )),
        _ => None,
    };
    StagedExplanation {
        staged_policies: names.into_iter().collect(),
        allowed: staged.allowed,
        egress: staged.egress,
        ingress: staged.ingress,
        difference,
    }
}

/// The direction allows today and would drop.
fn would_drop(staged: &BTreeSet<String>, e: &DirectionAnswer, s: &DirectionAnswer) -> Option<StagedCause> {
    let Verdict::Dropped { isolated_by } = &s.verdict else { return None };
    if !e.verdict.allows() {
        return None;
    }
    let allowing_today = allowing(&e.verdict).iter().map(|r| &r.policy);
    let policies = would_drop_culprits(isolated_by, allowing_today, |p| staged.contains(*p));
    Some(StagedCause { direction: s.direction, policies: policies.into_iter().cloned().collect(), rules: Vec::new() })
}

/// The direction drops today and would allow.
fn would_allow(staged: &BTreeSet<String>, e: &DirectionAnswer, s: &DirectionAnswer) -> Option<StagedCause> {
    let Verdict::Dropped { isolated_by } = &e.verdict else { return None };
    if !s.verdict.allows() {
        return None;
    }
    let rules: Vec<AllowingRule> =
        allowing(&s.verdict).iter().filter(|r| staged.contains(&r.policy)).cloned().collect();
    let policies =
        rules.iter().map(|r| &r.policy).chain(isolated_by).filter(|p| staged.contains(*p)).cloned().collect();
    Some(StagedCause { direction: s.direction, policies: sorted(policies), rules })
}

fn allowing(v: &Verdict) -> &[AllowingRule] {
    match v {
        Verdict::Allowed { rules, .. } => rules,
        _ => &[],
    }
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v.dedup();
    v
}
