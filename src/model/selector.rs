//! Kubernetes label selectors (validated in [`super::convert`]).

use super::Labels;
use std::collections::BTreeSet;

/// A label selector: all `match_labels` and all `match_expressions` must hold. The empty
/// selector matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LabelSelector {
    pub match_labels: Labels,
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

impl LabelSelector {
    /// The selector that matches every object.
    pub fn everything() -> Self {
        LabelSelector::default()
    }

    /// True when the selector has no requirement at all (matches everything).
    pub fn is_empty(&self) -> bool {
        self.match_labels.is_empty() && self.match_expressions.is_empty()
    }

    /// Whether `labels` satisfy every `match_labels` pair and every requirement.
    pub fn matches(&self, labels: &Labels) -> bool {
        self.match_labels.iter().all(|(k, v)| labels.get(k) == Some(v))
            && self.match_expressions.iter().all(|r| r.matches(labels))
    }
}

impl Requirement {
    /// Kubernetes semantics: `NotIn` and `DoesNotExist` hold for objects without the key.
    pub fn matches(&self, labels: &Labels) -> bool {
        let value = labels.get(&self.key);
        match self.op {
            SelectorOp::In => value.is_some_and(|v| self.values.contains(v)),
            SelectorOp::NotIn => value.is_none_or(|v| !self.values.contains(v)),
            SelectorOp::Exists => value.is_some(),
            SelectorOp::DoesNotExist => value.is_none(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs.iter().copied().collect()
    }

    fn req(key: &str, op: SelectorOp, values: &[&str]) -> Requirement {
        Requirement { key: key.into(), op, values: values.iter().map(|v| v.to_string()).collect() }
    }

    #[test]
    fn selector_table() {
        use SelectorOp::*;
        let pod: Labels = [("app", "web"), ("tier", "front")].into_iter().collect();
        let cases: Vec<(LabelSelector, bool)> = vec![
            (LabelSelector::everything(), true),
            (LabelSelector { match_labels: labels(&[("app", "web")]), ..Default::default() }, true),
            (LabelSelector { match_labels: labels(&[("app", "db")]), ..Default::default() }, false),
            (LabelSelector { match_labels: labels(&[("app", "web"), ("x", "y")]), ..Default::default() }, false),
            (LabelSelector { match_expressions: vec![req("app", In, &["db", "web"])], ..Default::default() }, true),
            (LabelSelector { match_expressions: vec![req("app", In, &["db"])], ..Default::default() }, false),
            (LabelSelector { match_expressions: vec![req("missing", In, &["x"])], ..Default::default() }, false),
            (LabelSelector { match_expressions: vec![req("app", NotIn, &["web"])], ..Default::default() }, false),
            (LabelSelector { match_expressions: vec![req("app", NotIn, &["db"])], ..Default::default() }, true),
            (LabelSelector { match_expressions: vec![req("missing", NotIn, &["x"])], ..Default::default() }, true),
            (LabelSelector { match_expressions: vec![req("tier", Exists, &[])], ..Default::default() }, true),
            (LabelSelector { match_expressions: vec![req("missing", Exists, &[])], ..Default::default() }, false),
            (LabelSelector { match_expressions: vec![req("tier", DoesNotExist, &[])], ..Default::default() }, false),
            (LabelSelector { match_expressions: vec![req("missing", DoesNotExist, &[])], ..Default::default() }, true),
            (
                LabelSelector {
                    match_labels: labels(&[("app", "web")]),
                    match_expressions: vec![req("tier", In, &["back"])],
                },
                false,
            ),
        ];
        for (i, (sel, want)) in cases.iter().enumerate() {
            assert_eq!(sel.matches(&pod), *want, "case {i}: {sel:?}");
        }
    }
}
