//! The audit log's view of the compiler and the model: names for conjunction ids, ports and
//! IPs. It reads the state the reconciler keeps; deleted rules stay resolvable for the
//! compiler's id grace period.

use super::State;
use crate::audit::{RuleMeta, RuleResolver};
use crate::compiler::userdata::Disposition;
use crate::compiler::Direction;
use crate::model::{ObjectRef, Policy};
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::{Arc, RwLock};

/// Resolves packet-ins against the agent's shared state.
#[derive(Debug, Clone)]
pub struct StateResolver {
    state: Arc<RwLock<State>>,
}

impl StateResolver {
    /// A resolver reading `state`.
    pub fn new(state: Arc<RwLock<State>>) -> Self {
        StateResolver { state }
    }
}

impl RuleResolver for StateResolver {
    fn allow_rule(&self, conj_id: u32) -> Option<RuleMeta> {
        let state = self.state.read().ok()?;
        Some(rule_meta(state.compiler.as_ref()?.rules().rule(conj_id)?))
    }

    fn pod_by_ofport(&self, ofport: u32) -> Option<ObjectRef> {
        let state = self.state.read().ok()?;
        if let Some(pod) = state.compiler.as_ref().and_then(|c| c.rules().pod(ofport)) {
            return Some(pod.clone());
        }
        state.store.model().ports.get(&ofport).map(|p| p.pod.clone())
    }

    fn pod_by_ip(&self, ip: IpAddr) -> Option<ObjectRef> {
        self.state.read().ok()?.store.pod_by_ip(&ip).cloned()
    }

    fn isolating_policies(&self, direction: Direction, ofport: u32) -> Vec<ObjectRef> {
        let Ok(state) = self.state.read() else { return Vec::new() };
        state.compiler.as_ref().map(|c| c.isolating(direction, ofport).cloned().collect()).unwrap_or_default()
    }

    fn staged_rule(&self, conj_id: u32) -> Option<RuleMeta> {
        let state = self.state.read().ok()?;
        Some(rule_meta(state.compiler.as_ref()?.staged()?.rules().rule(conj_id)?))
    }

    fn staged_isolating(&self, direction: Direction, ofport: u32, disposition: Disposition) -> Vec<ObjectRef> {
        let Ok(state) = self.state.read() else { return Vec::new() };
        let Some(compiler) = state.compiler.as_ref() else { return Vec::new() };
        let staged = &state.store.model().staged_policies;
        // The staged edits of the enforced policies isolating the pod: for a WouldAllow by no
        // rule, those that end its isolation; for a WouldDrop no staged policy isolates, those
        // that edit away the rule allowing it today (an allowing rule's policy isolates the
        // pod too), as `npagent explain` names them.
        let edited = || staged_only(compiler.isolating(direction, ofport), staged);
        match disposition {
            Disposition::WouldDrop => {
                let isolating =
                    compiler.staged().map(|s| staged_only(s.isolating(direction, ofport), staged)).unwrap_or_default();
                if isolating.is_empty() {
                    edited()
                } else {
                    isolating
                }
            }
            _ => edited(),
        }
    }
}

/// The policies of `refs` that are staged ones (or staged edits), in their order: an enforced
/// policy is never named as a staged one.
fn staged_only<'a>(refs: impl Iterator<Item = &'a ObjectRef>, staged: &BTreeMap<ObjectRef, Policy>) -> Vec<ObjectRef> {
    refs.filter(|r| staged.contains_key(*r)).cloned().collect()
}

fn rule_meta(rule: &crate::compiler::RuleInfo) -> RuleMeta {
    RuleMeta {
        policy: rule.policy.clone(),
        rule_name: rule.name.clone(),
        priority: rule.priority,
        log_label: rule.log_label.clone(),
    }
}
