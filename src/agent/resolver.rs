//! The audit log's view of the compiler and the model: names for conjunction ids, ports and
//! IPs. It reads the state the reconciler keeps; deleted rules stay resolvable for the
//! compiler's id grace period.

use super::State;
use crate::audit::{RuleMeta, RuleResolver};
use crate::compiler::userdata::Disposition;
use crate::compiler::Direction;
use crate::model::staged::would_drop_culprits;
use crate::model::ObjectRef;
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
        let is_staged = |r: &&ObjectRef| staged.contains_key(*r);
        // An allowing rule's policy isolates the pod too: the enforced policies isolating it
        // hold those whose rules let the connection through today.
        let isolating_today = compiler.isolating(direction, ofport);
        let named = match disposition {
            Disposition::WouldDrop => {
                let isolating_staged = compiler.staged().into_iter().flat_map(|s| s.isolating(direction, ofport));
                would_drop_culprits(isolating_staged, isolating_today, is_staged)
            }
            // A WouldAllow by no rule: the staged edits that end the pod's isolation.
            _ => isolating_today.filter(is_staged).collect(),
        };
        named.into_iter().cloned().collect()
    }
}

fn rule_meta(rule: &crate::compiler::RuleInfo) -> RuleMeta {
    RuleMeta {
        policy: rule.policy.clone(),
        rule_name: rule.name.clone(),
        priority: rule.priority,
        log_label: rule.log_label.clone(),
        table: rule.table(),
        cluster: rule.cluster,
    }
}
