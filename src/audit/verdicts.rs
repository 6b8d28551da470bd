//! The staged verdicts the audit log resolved, counted by staged policy and disposition: the
//! metric `npagent_staged_verdicts_total{policy, disposition}`. A `WouldDrop` counts once for
//! each staged policy that would isolate its pod (under policy `""` when none is known), a
//! `WouldAllow` for the staged policy that would allow it (or whose isolation the staged view
//! ends). One series per staged policy named since npagent started and disposition: bounded by
//! the staged policies, not by the connections.

use super::entry::{AuditEntry, LineDisposition, PolicyRef};
use crate::model::ObjectRef;
use std::collections::BTreeMap;
use std::sync::Mutex;

/// The two staged dispositions, in the order of the counts kept per policy.
const STAGED: [LineDisposition; 2] = [LineDisposition::WouldDrop, LineDisposition::WouldAllow];

/// Staged verdicts by policy (`namespace/name`, or `""`), each `[WouldDrop, WouldAllow]`.
#[derive(Debug, Default)]
pub struct StagedVerdicts(Mutex<BTreeMap<String, [u64; 2]>>);

impl StagedVerdicts {
    /// Counts `entry` if it is a staged verdict; other entries are not counted.
    pub fn count(&self, entry: &AuditEntry) {
        let Some(slot) = STAGED.iter().position(|d| *d == entry.disposition) else { return };
        let mut counts = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let mut bump = |policy: Option<&ObjectRef>| {
            let name = policy.map(ToString::to_string).unwrap_or_default();
            if let Some(c) = counts.entry(name).or_default().get_mut(slot) {
                *c += 1;
            }
        };
        match (&entry.policy, entry.disposition) {
            (PolicyRef::StagedDrop, LineDisposition::WouldDrop) if !entry.isolated_by.is_empty() => {
                entry.isolated_by.iter().for_each(|p| bump(Some(p)))
            }
            (policy, _) => bump(policy.policy()),
        }
    }

    /// Every count so far: (policy, disposition, count), sorted by policy then disposition;
    /// a policy's other disposition is there too, at zero once the policy has a verdict.
    pub fn snapshot(&self) -> Vec<(String, LineDisposition, u64)> {
        let counts = self.0.lock().unwrap_or_else(|p| p.into_inner());
        counts.iter().flat_map(|(p, c)| STAGED.into_iter().zip(*c).map(move |(d, n)| (p.clone(), d, n))).collect()
    }
}

/// A staged verdict's entry (10.0.0.1 to itself, TCP, StagedIngressDefaultRule) for tests.
#[cfg(test)]
pub(crate) fn staged_entry(disposition: LineDisposition, policy: PolicyRef, isolated_by: Vec<ObjectRef>) -> AuditEntry {
    let ip = std::net::IpAddr::from([10, 0, 0, 1]);
    AuditEntry {
        time: std::time::SystemTime::UNIX_EPOCH,
        table: "StagedIngressDefaultRule".into(),
        policy,
        rule_name: None,
        direction: crate::audit::Direction::Ingress,
        disposition,
        priority: None,
        applied_to: None,
        src_ip: ip,
        dst_ip: ip,
        src_port: None,
        dst_port: None,
        protocol: ofp::numbers::ip_proto::TCP,
        ip_len: 60,
        log_label: None,
        isolated_by,
        src_pod: None,
        dst_pod: None,
        via_service: false,
        tier: None,
        chain: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(ns: &str, name: &str) -> ObjectRef {
        ObjectRef { namespace: ns.into(), name: name.into() }
    }

    #[test]
    fn each_staged_policy_named_counts_once_per_entry() {
        use LineDisposition::*;
        let v = StagedVerdicts::default();
        let (deny, web, allow) = (obj("x", "deny"), obj("x", "web"), obj("y", "allow"));
        // A WouldDrop counts for every staged policy isolating the pod, twice here.
        for _ in 0..2 {
            v.count(&staged_entry(WouldDrop, PolicyRef::StagedDrop, vec![deny.clone(), web.clone()]));
        }
        v.count(&staged_entry(WouldAllow, PolicyRef::Staged(allow.clone()), Vec::new()));
        // By no rule: the policy whose isolation the staged view ends.
        v.count(&staged_entry(WouldAllow, PolicyRef::Staged(deny.clone()), vec![deny.clone()]));
        // Nothing known: counted, under "".
        v.count(&staged_entry(WouldDrop, PolicyRef::StagedDrop, Vec::new()));
        v.count(&staged_entry(WouldAllow, PolicyRef::StagedDrop, Vec::new()));
        // Enforced lines are no staged verdicts.
        v.count(&staged_entry(Drop, PolicyRef::DefaultDrop, vec![deny.clone()]));
        v.count(&staged_entry(Allow, PolicyRef::Policy(allow.clone()), Vec::new()));
        let s = |p: &str, d, n| (p.to_string(), d, n);
        assert_eq!(
            v.snapshot(),
            vec![
                s("", WouldDrop, 1),
                s("", WouldAllow, 1),
                s("x/deny", WouldDrop, 2),
                s("x/deny", WouldAllow, 1),
                s("x/web", WouldDrop, 2),
                s("x/web", WouldAllow, 0),
                s("y/allow", WouldDrop, 0),
                s("y/allow", WouldAllow, 1),
            ]
        );
    }
}
