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
}
