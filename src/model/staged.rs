//! The staged view of a cluster: its NetworkPolicies with every StagedNetworkPolicy applied on
//! top. A staged policy whose namespace and name are an enforced policy's replaces it (an edit
//! staged); any other is added. Pure: what a verdict would be, never what is enforced.

use super::{Model, ObjectRef, Policy};
use std::collections::BTreeMap;

/// The policies of the staged view: `model.policies` with `model.staged_policies` on top.
pub fn staged_policies(model: &Model) -> BTreeMap<ObjectRef, Policy> {
    let mut policies = model.policies.clone();
    for (r, p) in &model.staged_policies {
        policies.insert(r.clone(), p.clone());
    }
    policies
}

/// `model` as it would be with every staged policy promoted: the same pods, namespaces, ports
/// and node, the policies of the staged view, and nothing staged.
pub fn staged_view(model: &Model) -> Model {
    Model { policies: staged_policies(model), staged_policies: BTreeMap::new(), ..model.clone() }
}

/// Whether the policy `r` of the staged view is a staged one (new, or replacing an enforced
/// policy of the same name).
pub fn is_staged(model: &Model, r: &ObjectRef) -> bool {
    model.staged_policies.contains_key(r)
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
        assert!(is_staged(&model, &policy("x", "b", true).0) && !is_staged(&model, &policy("x", "a", true).0));
        // The model itself is untouched: enforcement never changes.
        assert!(!model.policies[&policy("x", "b", true).0].affects_egress);
    }
}
