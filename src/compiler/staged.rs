//! The staged view's flows: which local pods a StagedNetworkPolicy touches, and how their
//! connections' first packets are judged by the staged view beside the enforced policies.
//!
//! A touched pod's first packet of a connection enters the staged tables from
//! ConnectionSource (its egress) and ConnectionDestination (its ingress), before any enforced
//! verdict. The staged tables hold the staged view's rules and isolation for the touched pods
//! only, compiled by a second [`super::Compiler`] of [`Stage::Staged`]; they record a verdict
//! per direction in a register and change nothing else. The enforced verdict then meets it:
//! - the enforced tables allowed (the packet reaches L2ForwardingCalc after egress,
//!   ConntrackCommit after ingress) and the staged verdict is Drop: a `WouldDrop` copy, then
//!   the table again with the verdict cleared;
//! - a touched pod's default drop drops and the staged verdict is Allow: a `WouldAllow` copy
//!   beside the drop (and its own copy).
//!
//! Enforcement never changes: every staged flow only sets registers or copies to npagent.
//! A pod no staged policy touches has none of these flows and takes no staged table.

use super::cookie::{self, Kind};
use super::copies::{self, CopyKind};
use super::flow::{self, ct, FlowKey, FlowValue};
use super::rules::{Direction, Stage};
use super::tables::{self, priority};
use crate::model::{Cidr, LocalPort, Model, ObjectRef, Pod, Policy};
use ofp::{Action, Instruction, Masked, Oxm};
use std::collections::BTreeMap;

/// Whether a flow serves only the staged view: one of the staged tables', a touched pod's
/// entry or `WouldAllow` check. Every other flow is the same with or without staged policies.
pub fn is_staged_flow(key: &FlowKey, value: &FlowValue) -> bool {
    let staged_table = Direction::BOTH
        .into_iter()
        .any(|d| Stage::Staged.rule_table(d) == key.table || Stage::Staged.default_table(d) == key.table);
    staged_table || cookie::kind(value.cookie) == Some(Kind::Staged)
}

/// The staged verdict of a connection's first packet, in the direction's verdict register.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// The staged view isolates the pod and none of its rules allows the packet.
    Drop = 1,
    /// A staged view's rule allows it (its id in the rule register), or the pod is not
    /// isolated there (rule register 0).
    Allow = 2,
}

/// The register of `direction`'s staged verdict: `reg8` egress, `reg10` ingress.
fn verdict_reg(direction: Direction) -> u8 {
    match direction {
        Direction::Egress => 8,
        Direction::Ingress => 10,
    }
}

/// The register of the staged rule that allowed, for a `WouldAllow`: `reg9` egress, `reg11`
/// ingress.
pub(crate) fn rule_reg(direction: Direction) -> u8 {
    verdict_reg(direction) + 1
}

/// `reg8=<verdict>` (or `reg10`).
pub(super) fn verdict_match(direction: Direction, verdict: Verdict) -> Oxm {
    Oxm::Reg { index: verdict_reg(direction), value: Masked::exact(verdict as u32) }
}

/// Records `verdict` for `direction`.
fn set_verdict(direction: Direction, verdict: Verdict) -> Action {
    flow::set_reg(verdict_reg(direction), verdict as u32)
}

/// Forgets the staged verdict of `direction` (the enforced verdict was not the
/// NetworkPolicies').
pub(super) fn forget_verdict(direction: Direction) -> Action {
    flow::set_reg(verdict_reg(direction), 0)
}

/// The actions of a staged rule's `conj_id` flow: Allow, by rule `id`.
pub(super) fn allowed_by(direction: Direction, id: u32) -> Vec<Action> {
    vec![set_verdict(direction, Verdict::Allow), flow::set_reg(rule_reg(direction), id)]
}

/// The actions of a pod's staged isolation: Drop (unless a rule allowed, which skipped it).
pub(super) fn isolated(direction: Direction) -> Vec<Action> {
    vec![set_verdict(direction, Verdict::Drop)]
}

fn staged_value(o: u32, instructions: Vec<Instruction>) -> FlowValue {
    FlowValue { cookie: cookie::cookie(Kind::Staged, u64::from(o)), instructions }
}

/// The `WouldAllow` check beside the enforced default drop of touched port `o`, which drops
/// with `drop_instructions` (its logging copy, or nothing): the `WouldAllow` copy (LogCopy),
/// then what the drop does. A flow holds at most one instruction of a kind (OVS refuses a
/// second apply-actions with OFPBIC_DUP_INST), so the drop's actions join the copy's.
pub(super) fn would_allow_check(
    direction: Direction,
    o: u32,
    drop_instructions: &[Instruction],
) -> (FlowKey, FlowValue) {
    let key = FlowKey::new(
        direction.default_table(),
        priority::SKIP,
        vec![flow::applied_match(direction, o), verdict_match(direction, Verdict::Allow)],
    );
    let mut actions = copies::request(CopyKind::WouldAllow(direction));
    let mut others = Vec::new();
    for i in drop_instructions {
        match i {
            Instruction::ApplyActions(a) => actions.extend(a.iter().cloned()),
            other => others.push(other.clone()),
        }
    }
    let mut instructions = vec![Instruction::ApplyActions(actions)];
    instructions.extend(others);
    (key, staged_value(o, instructions))
}

/// The fixed flows of the staged tables, and the `WouldDrop` checks after the enforced
/// verdicts (their copies made in LogCopy). They match only the registers the entry flows of
/// touched pods set.
pub(super) fn fixed_flows() -> Vec<(FlowKey, FlowValue)> {
    use tables::*;
    let v = |instructions: Vec<Instruction>| FlowValue { cookie: cookie::cookie(Kind::Pipeline, 0), instructions };
    let apply = Instruction::ApplyActions;
    let mut out = Vec::new();
    for direction in Direction::BOTH {
        let (rules, default) = (Stage::Staged.rule_table(direction), Stage::Staged.default_table(direction));
        out.push((FlowKey::new(rules, priority::MISS, vec![]), v(vec![flow::goto(default)])));
        // Not isolated in the staged view: allowed, by no rule.
        out.push((
            FlowKey::new(default, priority::MISS, vec![]),
            v(vec![apply(vec![set_verdict(direction, Verdict::Allow)])]),
        ));
        // The enforced tables let it through; the staged view would not: a copy, then the
        // table again without the verdict.
        let after = match direction {
            Direction::Egress => L2_FORWARDING_CALC,
            Direction::Ingress => CONNTRACK_COMMIT,
        };
        out.push((
            FlowKey::new(after, priority::STAGED_CHECK, vec![verdict_match(direction, Verdict::Drop)]),
            v(vec![apply(
                copies::request(CopyKind::WouldDrop(direction))
                    .into_iter()
                    .chain([flow::set_reg(verdict_reg(direction), 0), flow::resubmit(after)])
                    .collect(),
            )]),
        ));
    }
    // The node's own connections into its pods are allowed in the staged view too.
    out.push((
        FlowKey::new(STAGED_INGRESS_RULE, priority::SKIP, vec![flow::from_flags(flow::from::NODE)]),
        v(vec![apply(vec![set_verdict(Direction::Ingress, Verdict::Allow)])]),
    ));
    out
}

/// The entry of touched port `p`'s connections into the staged tables: for the first packet
/// of a connection one of its addresses opened (egress) or receives (ingress), the staged
/// tables first, then what the enforced flow of the same match does.
pub(super) fn entry_flows(p: &LocalPort) -> Vec<(FlowKey, FlowValue)> {
    let o = p.ofport;
    let mut out = Vec::new();
    for ip in &p.ips {
        let host = Cidr::host(*ip);
        let first = |fields: Vec<Oxm>| flow::with_ct_state(fields, ct::NEW | ct::TRK, ct::INV);
        let entry = |table: u8, fields: Vec<Oxm>, reg: u8, staged: u8, next: u8| {
            (
                FlowKey::new(table, priority::STAGED_ENTRY, first(fields)),
                staged_value(
                    o,
                    vec![
                        Instruction::ApplyActions(vec![flow::set_reg(reg, o), flow::resubmit(staged)]),
                        flow::goto(next),
                    ],
                ),
            )
        };
        out.push(entry(
            tables::CONNECTION_SOURCE,
            flow::ct_src_prefix(&host),
            2,
            tables::STAGED_EGRESS_RULE,
            tables::CONNECTION_DESTINATION,
        ));
        out.push(entry(
            tables::CONNECTION_DESTINATION,
            flow::ct_dst_prefix(&host),
            4,
            tables::STAGED_INGRESS_RULE,
            tables::ADMIN_EGRESS_RULE,
        ));
    }
    out
}

/// Whether a staged policy touches local pod `pod`: one selects it, or one replaces an
/// enforced policy that selects it.
pub(super) fn touches(model: &Model, pod: &Pod) -> bool {
    let selects = |p: &Policy| (p.affects_ingress || p.affects_egress) && p.pod_selector.matches(&pod.labels);
    staged_in(model, &pod.namespace).any(|(r, p)| selects(p) || model.policies.get(r).is_some_and(selects))
}

/// The staged policies of `namespace`.
fn staged_in<'a>(model: &'a Model, namespace: &'a str) -> impl Iterator<Item = (&'a ObjectRef, &'a Policy)> + 'a {
    let first = ObjectRef { namespace: namespace.into(), name: "".into() };
    model.staged_policies.range(first..).take_while(move |(r, _)| &*r.namespace == namespace)
}

/// The local ports a staged policy touches, as the staged compiler sees them.
#[derive(Debug, Default)]
pub(super) struct Touched {
    pub(super) ports: BTreeMap<u32, LocalPort>,
}

impl Touched {
    /// Re-reads whether ports `ofports` are touched; returns those whose entry changed.
    pub(super) fn recheck(&mut self, model: &Model, ofports: impl IntoIterator<Item = u32>) -> Vec<u32> {
        let mut changed = Vec::new();
        for o in ofports {
            let now = model.ports.get(&o).filter(|p| model.pods.get(&p.pod).is_some_and(|pod| touches(model, pod)));
            if self.ports.get(&o) != now {
                match now {
                    Some(p) => self.ports.insert(o, p.clone()),
                    None => self.ports.remove(&o),
                };
                changed.push(o);
            }
        }
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compiler::meters::{self, MeterKind};
    use crate::compiler::userdata::{Disposition, LogUserdata};

    #[test]
    fn a_would_allow_check_beside_a_logging_drop_is_one_apply_actions() {
        let drop_copy =
            LogUserdata { disposition: Disposition::Drop, table_id: tables::INGRESS_DEFAULT_RULE, subject: 7 };
        let drop_copy = flow::controller(&drop_copy, meters::pod(MeterKind::Drop, 7), 9);
        for drop in [vec![], vec![drop_copy]] {
            let instructions = if drop.is_empty() { vec![] } else { vec![Instruction::ApplyActions(drop.clone())] };
            let (key, value) = would_allow_check(Direction::Ingress, 7, &instructions);
            assert_eq!(key.table, tables::INGRESS_DEFAULT_RULE);
            // One instruction of each kind at most: OVS refuses a flow with two apply-actions.
            let [Instruction::ApplyActions(actions)] = value.instructions.as_slice() else {
                panic!("not a single apply-actions: {:?}", value.instructions);
            };
            let mut want = copies::request(CopyKind::WouldAllow(Direction::Ingress));
            want.extend(drop);
            assert_eq!(actions, &want, "the WouldAllow copy (LogCopy), then the drop's own");
        }
    }
}
