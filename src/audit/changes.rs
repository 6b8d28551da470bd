//! Policy changes as audit events (`--audit-changes-log FILE`): a NetworkPolicy added,
//! modified or deleted, stamped with the time the bridge held the flows for it, and one
//! rejected as invalid, stamped when it was rejected. One JSON object a line:
//!
//! ```json
//! {"time":"2026-12-01T12:00:00.123456789Z","event":"added","policy":"x/allow-web","hash":"3f…"}
//! {"time":"…","event":"rejected","policy":"x/allow-web","reason":"…; the last good version … stays in force"}
//! ```
//!
//! `hash` is a SHA-256 of the policy as npagent enforces it (its converted spec), so two
//! events with the same hash enforce the same thing. At start every policy present is
//! reported `added` once the first resync committed: the log says what each run enforced.

use crate::compiler::Change;
use crate::model::{ObjectRef, Policy};
use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::Write as _;
use std::path::Path;
use std::time::SystemTime;

/// What happened to a policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ChangeKind {
    Added,
    Modified,
    Deleted,
    Rejected,
}

impl ChangeKind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Added => "added",
            ChangeKind::Modified => "modified",
            ChangeKind::Deleted => "deleted",
            ChangeKind::Rejected => "rejected",
        }
    }
}

/// One event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PolicyChange {
    pub time: SystemTime,
    pub kind: ChangeKind,
    pub policy: ObjectRef,
    /// Content hash of the version now enforced (added, modified).
    pub(crate) hash: Option<String>,
    /// Why the latest version was refused (rejected).
    pub(crate) reason: Option<String>,
}

impl PolicyChange {
    /// The event's JSON line, newline included.
    pub(crate) fn json_line(&self) -> String {
        let mut o = serde_json::Map::new();
        o.insert("time".into(), super::timefmt::rfc3339_nanos(self.time).into());
        o.insert("event".into(), self.kind.as_str().into());
        o.insert("policy".into(), self.policy.to_string().into());
        if let Some(h) = &self.hash {
            o.insert("hash".into(), h.clone().into());
        }
        if let Some(r) = &self.reason {
            o.insert("reason".into(), r.clone().into());
        }
        let mut line = serde_json::Value::Object(o).to_string();
        line.push('\n');
        line
    }
}

/// Content hash of a policy as enforced.
pub(crate) fn policy_hash(policy: &Policy) -> String {
    // The model's Debug text is deterministic (ordered maps) and covers every field.
    let digest = ring::digest::digest(&ring::digest::SHA256, format!("{policy:?}").as_bytes());
    hex::encode(digest.as_ref())
}

/// What the log last said about each policy; turns model states into events. Pure.
#[derive(Debug, Default)]
pub(crate) struct PolicyLedger {
    enforced: BTreeMap<ObjectRef, String>,
    rejected: BTreeMap<ObjectRef, String>,
}

impl PolicyLedger {
    /// Events for the policies the bridge now enforces (`policies`, at `time`): added,
    /// modified (another hash) and deleted since the last call. Only the policies in `only`
    /// can have changed (all of them when `None`).
    pub(crate) fn enforced(
        &mut self,
        policies: &BTreeMap<ObjectRef, Policy>,
        only: Option<&BTreeSet<ObjectRef>>,
        time: SystemTime,
    ) -> Vec<PolicyChange> {
        let mut events = Vec::new();
        let candidates: Vec<ObjectRef> = match only {
            Some(set) => set.iter().cloned().collect(),
            None => self.enforced.keys().chain(policies.keys()).cloned().collect::<BTreeSet<_>>().into_iter().collect(),
        };
        for policy in candidates {
            let Some(p) = policies.get(&policy) else {
                if self.enforced.remove(&policy).is_some() {
                    events.push(PolicyChange { time, kind: ChangeKind::Deleted, policy, hash: None, reason: None });
                }
                continue;
            };
            let hash = policy_hash(p);
            let kind = match self.enforced.get(&policy) {
                None => ChangeKind::Added,
                Some(old) if *old != hash => ChangeKind::Modified,
                Some(_) => continue,
            };
            self.enforced.insert(policy.clone(), hash.clone());
            events.push(PolicyChange { time, kind, policy, hash: Some(hash), reason: None });
        }
        events
    }

    /// Events for policies whose latest version was refused (`invalid`: policy -> reason, at
    /// `time`), once per distinct reason; a policy no longer refused may be refused again.
    pub(crate) fn rejected(&mut self, invalid: &BTreeMap<ObjectRef, String>, time: SystemTime) -> Vec<PolicyChange> {
        self.rejected.retain(|k, _| invalid.contains_key(k));
        let mut events = Vec::new();
        for (policy, reason) in invalid {
            if self.rejected.get(policy) == Some(reason) {
                continue;
            }
            self.rejected.insert(policy.clone(), reason.clone());
            let reason = Some(reason.clone());
            events.push(PolicyChange { time, kind: ChangeKind::Rejected, policy: policy.clone(), hash: None, reason });
        }
        events
    }
}

/// The change log file, appended to and flushed after every batch of events.
#[derive(Debug)]
pub(crate) struct ChangeLog {
    file: File,
}

impl ChangeLog {
    /// Opens (creating its directory 0755 and the file if missing) `path` for appending.
    pub(crate) fn open(path: &Path) -> Result<ChangeLog, super::writer::WriteError> {
        super::writer::open_for_append(path).map(|file| ChangeLog { file })
    }

    /// Appends the events.
    pub(crate) fn write(&mut self, events: &[PolicyChange]) -> std::io::Result<()> {
        if events.is_empty() {
            return Ok(());
        }
        let text: String = events.iter().map(PolicyChange::json_line).collect();
        self.file.write_all(text.as_bytes())?;
        self.file.flush()
    }
}

/// The ledger and its file: what the agent calls.
#[derive(Debug)]
pub(crate) struct ChangeAuditor {
    ledger: PolicyLedger,
    log: ChangeLog,
    path: std::path::PathBuf,
    /// Policies changed since the last report; `None` before the first (which reports all).
    touched: Option<BTreeSet<ObjectRef>>,
}

impl ChangeAuditor {
    /// Opens the change log at `path`.
    pub(crate) fn open(path: &Path) -> Result<ChangeAuditor, super::writer::WriteError> {
        Ok(ChangeAuditor {
            ledger: PolicyLedger::default(),
            log: ChangeLog::open(path)?,
            path: path.to_owned(),
            touched: None,
        })
    }

    /// After the sources changed: the model's `changes`, and the policies now refused
    /// (policy -> reason).
    pub(crate) fn changed(&mut self, changes: &[Change], invalid: &BTreeMap<ObjectRef, String>) {
        if let Some(touched) = self.touched.as_mut() {
            touched.extend(changes.iter().filter_map(|c| match c {
                Change::Policy(p) => Some(p.clone()),
                _ => None,
            }));
        }
        let events = self.ledger.rejected(invalid, SystemTime::now());
        self.write(&events);
    }

    /// After the bridge committed the flows of `policies`.
    pub(crate) fn enforced(&mut self, policies: &BTreeMap<ObjectRef, Policy>) {
        let touched = self.touched.replace(BTreeSet::new());
        let events = self.ledger.enforced(policies, touched.as_ref(), SystemTime::now());
        self.write(&events);
    }

    fn write(&mut self, events: &[PolicyChange]) {
        if let Err(e) = self.log.write(events) {
            tracing::warn!("policy change log {}: {e}; {} event(s) not written", self.path.display(), events.len());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn oref(ns: &str, name: &str) -> ObjectRef {
        ObjectRef { namespace: ns.into(), name: name.into() }
    }

    fn policy(ns: &str, name: &str, ingress_rules: usize) -> Policy {
        let rule = crate::model::IngressRule { from: Vec::new(), ports: Vec::new() };
        crate::compiler::synthetic::policy(ns, name, Default::default(), vec![rule; ingress_rules])
    }

    #[test]
    fn enforced_states_become_added_modified_and_deleted_events() {
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        let mut ledger = PolicyLedger::default();
        let mut model = BTreeMap::from([(oref("x", "a"), policy("x", "a", 1)), (oref("x", "b"), policy("x", "b", 1))]);
        let kinds = |ev: Vec<PolicyChange>| ev.into_iter().map(|e| (e.kind, e.policy.name)).collect::<Vec<_>>();
        assert_eq!(
            kinds(ledger.enforced(&model, None, t)),
            [(ChangeKind::Added, "a".into()), (ChangeKind::Added, "b".into())]
        );
        assert!(ledger.enforced(&model, None, t).is_empty(), "nothing changed, nothing logged");
        model.insert(oref("x", "a"), policy("x", "a", 2));
        model.remove(&oref("x", "b"));
        let ev = ledger.enforced(&model, None, t);
        assert_eq!(kinds(ev.clone()), [(ChangeKind::Modified, "a".into()), (ChangeKind::Deleted, "b".into())]);
        assert_eq!(ev[0].hash.as_deref(), Some(policy_hash(&model[&oref("x", "a")]).as_str()));
        let line: serde_json::Value = serde_json::from_str(&ev[0].json_line()).unwrap();
        assert_eq!(line["event"], "modified");
        assert_eq!(line["policy"], "x/a");
        assert_eq!(line["time"], "1970-01-01T00:16:40.000000000Z");
    }

    #[test]
    fn a_rejection_is_logged_once_per_reason() {
        let t = SystemTime::UNIX_EPOCH;
        let mut ledger = PolicyLedger::default();
        let mut invalid = BTreeMap::from([(oref("x", "a"), "bad cidr".to_string())]);
        assert_eq!(ledger.rejected(&invalid, t).len(), 1);
        assert!(ledger.rejected(&invalid, t).is_empty());
        invalid.insert(oref("x", "a"), "bad port".into());
        let ev = ledger.rejected(&invalid, t);
        assert_eq!((ev[0].kind, ev[0].reason.as_deref()), (ChangeKind::Rejected, Some("bad port")));
        assert!(ledger.rejected(&BTreeMap::new(), t).is_empty());
        invalid.insert(oref("x", "a"), "bad port".into());
        assert_eq!(ledger.rejected(&invalid, t).len(), 1, "refused again after it was fixed");
    }
}
