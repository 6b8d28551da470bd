//! Kubernetes label selectors.
//!
//! IMPLEMENTATION OWNER: model/compiler helper (add `matches`, parsing/validation in convert).

use std::collections::{BTreeMap, BTreeSet};

/// A label selector: all `match_labels` and all `match_expressions` must hold. The empty
/// selector matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LabelSelector {
    pub match_labels: BTreeMap<String, String>,
    pub match_expressions: Vec<Requirement>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Requirement {
    pub key: String,
    pub op: SelectorOp,
    pub values: BTreeSet<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SelectorOp {
    In,
    NotIn,
    Exists,
    DoesNotExist,
}
