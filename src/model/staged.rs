//! The staged view of a cluster: its NetworkPolicies with every StagedNetworkPolicy applied on
//! top. A staged policy whose namespace and name are an enforced policy's replaces it (an edit
//! staged); any other is added. Pure: what a verdict would be, never what is enforced.

use super::{Model, ObjectRef, Policy};
use std::collections::BTreeMap;

/// Policy `r` of the staged view: the staged policy of that name, else the enforced one.
pub fn staged_policy<'a>(model: &'a Model, r: &ObjectRef) -> Option<&'a Policy> {
    model.staged_policies.get(r).or_else(|| model.policies.get(r))
}

/// Every policy of the staged view: the enforced policies no staged policy replaces, then the
/// staged ones.
pub fn staged_policies(model: &Model) -> impl Iterator<Item = (&ObjectRef, &Policy)> {
    let enforced = model.policies.iter().filter(|(r, _)| !model.staged_policies.contains_key(*r));
    enforced.chain(&model.staged_policies)
}

/// `model` as it would be with every staged policy promoted: the same pods, namespaces, ports
/// and node, the policies of the staged view, and nothing staged.
pub fn staged_view(model: &Model) -> Model {
    let policies = staged_policies(model).map(|(r, p)| (r.clone(), p.clone())).collect();
    Model { policies, staged_policies: BTreeMap::new(), ..model.clone() }
}

/// The staged policies a `WouldDrop` names, sorted, each once: the staged ones among
/// `isolating` (the policies isolating the pod in the staged view); when none of those is
/// staged, the staged ones among `allowing_today` (the policies whose rules let the connection
/// through today: a staged edit of one takes that rule away). The audit log and
/// `npagent explain` both name a `WouldDrop`'s policies by this rule.
pub fn would_drop_culprits<T: Ord>(
    isolating: impl IntoIterator<Item = T>,
    allowing_today: impl IntoIterator<Item = T>,
    is_staged: impl Fn(&T) -> bool,
) -> Vec<T> {
    let isolating = staged_only(isolating, &is_staged);
    if isolating.is_empty() {
        staged_only(allowing_today, &is_staged)
    } else {
        isolating
    }
}

/// The staged ones of `refs`, sorted, each once.
fn staged_only<T: Ord>(refs: impl IntoIterator<Item = T>, is_staged: &impl Fn(&T) -> bool) -> Vec<T> {
    let mut out: Vec<T> = refs.into_iter().filter(|r| is_staged(r)).collect();
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::LabelSelector;

    fn policy(ns: &str, name: &str, egress: bool) -> (ObjectRef, Policy) {
        let r = ObjectRef { namespace: ns.into(), name: name.into() };
        let p = Policy {
            namespace: ns.into(),
            name: name.into(),
            pod_selector: LabelSelector::everything(),
            affects_ingress: true,
            affects_egress: egress,
            ingress: Vec::new(),
            egress: Vec::new(),
            annotations: Default::default(),
        };
        (r, p)
    }

    #[test]
    fn a_staged_policy_replaces_its_namesake_and_adds_the_others() {
        let mut model = Model::default();
        model.policies.extend([policy("x", "a", false), policy("x", "b", false)]);
        model.staged_policies.extend([policy("x", "b", true), policy("y", "c", false)]);
        let view = staged_view(&model);
        let names: Vec<String> = view.policies.keys().map(ToString::to_string).collect();
        assert_eq!(names, ["x/a", "x/b", "y/c"]);
        assert!(view.policies[&policy("x", "b", true).0].affects_egress, "the staged x/b replaced the enforced one");
        assert!(!view.policies[&policy("x", "a", false).0].affects_egress);
        assert!(view.staged_policies.is_empty());
        // The model itself is untouched: enforcement never changes.
        assert!(!model.policies[&policy("x", "b", true).0].affects_egress);
    }

    #[test]
    fn a_would_drop_names_the_staged_isolating_policies_else_the_staged_edits_of_todays_allow() {
        let staged = |p: &&str| p.starts_with("staged");
        assert_eq!(would_drop_culprits(["staged-b", "x", "staged-a"], ["staged-c"], staged), ["staged-a", "staged-b"]);
        assert_eq!(would_drop_culprits(["x"], ["staged-c", "y", "staged-c"], staged), ["staged-c"]);
        assert!(would_drop_culprits(["x"], ["y"], staged).is_empty());
    }
}
