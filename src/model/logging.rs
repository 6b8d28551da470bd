//! The audit-logging annotations of Namespaces and NetworkPolicies (Antrea's keys): whether
//! logging is on, and a policy's log label. A value that is not valid is a warning and means
//! off (or no label), never a reason not to enforce.

use super::{Annotations, Namespace, Policy};
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;

/// Antrea's annotation that turns on audit logging for a Namespace.
pub const LOGGING_ANNOTATION: &str = "networkpolicy.antrea.io/enable-logging";
/// Alias of [`LOGGING_ANNOTATION`] (the name used in Antrea PR #4047's description).
pub const LOGGING_ANNOTATION_ALIAS: &str = "policy.antrea.io/enable-np-logging";
/// The label a NetworkPolicy's audit lines carry (Antrea's `logLabel` field).
pub const LOG_LABEL_ANNOTATION: &str = "networkpolicy.antrea.io/log-label";
/// The longest log label.
pub const LOG_LABEL_MAX: usize = 64;

/// Go's `strconv.ParseBool`.
pub fn parse_go_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

impl Namespace {
    /// Whether audit logging is on for this Namespace. `Err` carries a warning (the value is
    /// not a Go bool) and means off. When both annotations are set, logging is on if either
    /// says so.
    pub fn logging_enabled(&self) -> Result<bool, String> {
        logging_annotation(&self.annotations, &format!("namespace {}", self.name))
    }
}

impl Policy {
    /// Whether the policy asks for audit logging itself (the Namespace's annotation keys, on
    /// the NetworkPolicy): its rules log what they allow, and the pods it isolates log their
    /// default drops, whatever the Namespace says. `Err` carries a warning and means off.
    pub fn logging_enabled(&self) -> Result<bool, String> {
        logging_annotation(&self.annotations, &format!("NetworkPolicy {}/{}", self.namespace, self.name))
    }

    /// The label of the policy's audit lines ([`LOG_LABEL_ANNOTATION`]): 1 to
    /// [`LOG_LABEL_MAX`] ASCII letters, digits, `.`, `_` or `-`, so that it stays one field of
    /// Antrea's format. `Err` carries a warning and means no label.
    pub fn log_label(&self) -> Result<Option<&str>, String> {
        let Some(v) = self.annotations.get(LOG_LABEL_ANNOTATION) else { return Ok(None) };
        let ok = (1..=LOG_LABEL_MAX).contains(&v.len())
            && v.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
        if ok {
            Ok(Some(v))
        } else {
            Err(format!(
                "NetworkPolicy {}/{}: annotation {LOG_LABEL_ANNOTATION}={v:?} is not 1 to {LOG_LABEL_MAX} letters, digits, '.', '_' or '-'; its lines carry no label",
                self.namespace, self.name
            ))
        }
    }
}

/// The annotations of a NetworkPolicy the model keeps: those about audit logging (not, say,
/// `kubectl.kubernetes.io/last-applied-configuration`, a copy of the whole object).
pub(super) fn logging_annotations(meta: &meta::ObjectMeta) -> Annotations {
    let keys = [LOGGING_ANNOTATION, LOGGING_ANNOTATION_ALIAS, LOG_LABEL_ANNOTATION];
    meta.annotations
        .iter()
        .flatten()
        .filter(|(k, _)| keys.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// The logging annotations of `what` (a Namespace or a NetworkPolicy). When both keys are
/// set, logging is on if either says so; a value that is not a Go bool is a warning (off).
fn logging_annotation(annotations: &Annotations, what: &str) -> Result<bool, String> {
    let mut enabled = false;
    let mut warning = None;
    for key in [LOGGING_ANNOTATION, LOGGING_ANNOTATION_ALIAS] {
        if let Some(v) = annotations.get(key) {
            match parse_go_bool(v) {
                Some(b) => enabled |= b,
                None => {
                    warning.get_or_insert_with(|| {
                        format!(
                            "{what}: annotation {key}={v:?} is not a boolean (1, t, T, TRUE, true, True, 0, f, F, FALSE, false, False); audit logging is off"
                        )
                    });
                }
            }
        }
    }
    match warning {
        Some(w) if !enabled => Err(w),
        _ => Ok(enabled),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Labels;

    #[test]
    fn go_bools_and_logging_flag() {
        for t in ["1", "t", "T", "TRUE", "true", "True"] {
            assert_eq!(parse_go_bool(t), Some(true));
        }
        for f in ["0", "f", "F", "FALSE", "false", "False"] {
            assert_eq!(parse_go_bool(f), Some(false));
        }
        for x in ["yes", "tRUE", "", " true", "2"] {
            assert_eq!(parse_go_bool(x), None);
        }
        let ns = |anns: &[(&str, &str)]| Namespace {
            name: "x".into(),
            labels: Labels::new(),
            annotations: anns.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        };
        assert_eq!(ns(&[]).logging_enabled(), Ok(false));
        assert_eq!(ns(&[(LOGGING_ANNOTATION, "true")]).logging_enabled(), Ok(true));
        assert_eq!(ns(&[(LOGGING_ANNOTATION_ALIAS, "T")]).logging_enabled(), Ok(true));
        assert_eq!(ns(&[(LOGGING_ANNOTATION, "0")]).logging_enabled(), Ok(false));
        let warn = ns(&[(LOGGING_ANNOTATION, "yes")]).logging_enabled().unwrap_err();
        assert!(warn.contains("namespace x") && warn.contains("\"yes\""), "{warn}");
    }
}
