//! Flow_mods the switch refused: which, why, and when to try them again.
//!
//! One bad flow must not hold back the rest of a bundle, nor be resent in a hot loop: a
//! refused flow is set aside here, the rest is committed without it, and it is retried after
//! an exponential backoff (1 s, 2 s, 4 s, ... capped at [`BACKOFF_MAX`]) until the switch
//! takes it or the compiler stops wanting it. Entries are keyed by flow (table, priority,
//! match), not by flow_mod: a retry sends whatever the desired state is by then.

use crate::compiler::{cookie, FlowKey, RuleTable};
use crate::switch::{describe_flow, OfpError};
use ofp::{Action, FlowMod, Instruction};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// First retry delay.
pub const BACKOFF_MIN: Duration = Duration::from_secs(1);
/// Longest retry delay.
pub const BACKOFF_MAX: Duration = Duration::from_secs(30);

/// The delay before retry number `attempts` (1 = the first retry).
pub fn backoff(attempts: u32) -> Duration {
    let doublings = attempts.saturating_sub(1).min(16);
    BACKOFF_MIN.saturating_mul(1 << doublings).min(BACKOFF_MAX)
}

/// The key of the flow a flow_mod made by the diff is about (its match is already normalised).
pub fn key_of(m: &FlowMod) -> FlowKey {
    FlowKey { table: m.table_id, priority: m.priority, match_: m.match_.clone() }
}

#[derive(Debug, Clone)]
struct Entry {
    /// Refusals so far.
    attempts: u32,
    retry_at: Instant,
}

/// Flows set aside after the switch refused them.
#[derive(Debug, Default)]
pub struct Refused {
    entries: BTreeMap<FlowKey, Entry>,
}

impl Refused {
    /// Records another refusal of `key`; returns the attempt count and the delay until the
    /// next try.
    pub fn record(&mut self, key: FlowKey, now: Instant) -> (u32, Duration) {
        let e = self.entries.entry(key).or_insert(Entry { attempts: 0, retry_at: now });
        e.attempts = e.attempts.saturating_add(1);
        let delay = backoff(e.attempts);
        e.retry_at = now + delay;
        (e.attempts, delay)
    }

    /// Forgets `key` (the switch took it, or it is no longer wanted); true if it was set aside.
    pub fn forget(&mut self, key: &FlowKey) -> bool {
        self.entries.remove(key).is_some()
    }

    /// Whether `key` is set aside and not yet due for a retry.
    pub fn is_waiting(&self, key: &FlowKey, now: Instant) -> bool {
        self.entries.get(key).is_some_and(|e| e.retry_at > now)
    }

    /// Keys whose retry is due.
    pub fn due(&self, now: Instant) -> BTreeSet<FlowKey> {
        self.entries.iter().filter(|(_, e)| e.retry_at <= now).map(|(k, _)| k.clone()).collect()
    }

    /// Number of flows set aside.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is set aside.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// Which flows of `batch` to set aside after the switch refused `index` with `error`:
/// that one, and when the table is full every other ADD into the same table (each would be
/// refused the same way, one commit at a time).
pub fn offenders(batch: &[FlowMod], index: usize, error: &OfpError) -> BTreeSet<usize> {
    let mut out = BTreeSet::new();
    let Some(bad) = batch.get(index) else { return out };
    out.insert(index);
    if error.is("OFPFMFC_TABLE_FULL") {
        out.extend(
            batch
                .iter()
                .enumerate()
                .filter(|(_, m)| m.table_id == bad.table_id && m.command == ofp::FlowModCommand::Add)
                .map(|(i, _)| i),
        );
    }
    out
}

/// What a refused flow_mod is for, from its cookie: the policy of a rule's flow, the
/// policies whose conjunctions a clause flow carries, the pod of a default drop.
pub fn owner(m: &FlowMod, rules: Option<&RuleTable>) -> String {
    let policies = |ids: &mut dyn Iterator<Item = u32>| -> String {
        let Some(rules) = rules else { return String::new() };
        let names: BTreeSet<String> = ids.filter_map(|id| rules.rule(id)).map(|r| r.policy.to_string()).collect();
        names.into_iter().collect::<Vec<_>>().join(", ")
    };
    let named = |what: &str, who: String| if who.is_empty() { what.to_string() } else { format!("{what} of {who}") };
    match cookie::kind(m.cookie) {
        Some(cookie::Kind::Rule) => {
            let mut ids =
                rules.into_iter().flat_map(|r| r.rules().values()).filter(|r| r.cookie == m.cookie).map(|r| r.id);
            named("rule flow", policies(&mut ids))
        }
        Some(cookie::Kind::Clause) => {
            let mut ids = conjunction_ids(m).into_iter();
            named("clause flow", policies(&mut ids))
        }
        Some(cookie::Kind::DefaultDrop) => {
            let port = u32::try_from(cookie::payload(m.cookie)).unwrap_or(u32::MAX);
            let pod =
                rules.and_then(|r| r.pod(port)).map(ToString::to_string).unwrap_or_else(|| format!("ofport {port}"));
            format!("default drop of pod {pod}")
        }
        Some(cookie::Kind::Port) => format!("forwarding of ofport {}", cookie::payload(m.cookie)),
        Some(cookie::Kind::Node) => format!("the node's flows of ofport {}", cookie::payload(m.cookie)),
        Some(cookie::Kind::Pipeline) => "pipeline flow".to_string(),
        Some(cookie::Kind::Staged) => format!("staged flow of ofport {}", cookie::payload(m.cookie)),
        None => "flow of someone else".to_string(),
    }
}

/// One line about a refused flow_mod: cookie, table, what it is for, the error, the flow.
pub fn describe(m: &FlowMod, error: &OfpError, rules: Option<&RuleTable>) -> String {
    format!(
        "cookie={:#x} table={} ({}): {error}: {}",
        m.cookie,
        crate::compiler::tables::table_name(m.table_id).unwrap_or("?"),
        owner(m, rules),
        describe_flow(m)
    )
}

fn conjunction_ids(m: &FlowMod) -> Vec<u32> {
    m.instructions
        .iter()
        .filter_map(|i| match i {
            Instruction::ApplyActions(a) => Some(a),
            _ => None,
        })
        .flatten()
        .filter_map(|a| match a {
            Action::Conjunction { id, .. } => Some(*id),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ofp::{FlowModCommand, Match};

    fn fm(table_id: u8, command: FlowModCommand) -> FlowMod {
        FlowMod { table_id, command, priority: 200, match_: Match::default(), ..FlowMod::default() }
    }

    fn err(name: &'static str) -> OfpError {
        OfpError { name: Some(name), error_type: 5, code: 1, experimenter: None }
    }

    #[test]
    fn backoff_doubles_and_is_capped() {
        let got: Vec<u64> = (1..=8).map(|n| backoff(n).as_secs()).collect();
        assert_eq!(got, vec![1, 2, 4, 8, 16, 30, 30, 30]);
        assert_eq!(backoff(u32::MAX), BACKOFF_MAX);
    }

    #[test]
    fn records_wait_until_due_then_forget() {
        let now = Instant::now();
        let mut r = Refused::default();
        let k = key_of(&fm(3, FlowModCommand::Add));
        assert_eq!(r.record(k.clone(), now), (1, Duration::from_secs(1)));
        assert!(r.is_waiting(&k, now));
        assert!(r.due(now).is_empty());
        assert_eq!(r.due(now + Duration::from_secs(1)).len(), 1);
        assert_eq!(r.record(k.clone(), now), (2, Duration::from_secs(2)));
        assert!(r.forget(&k));
        assert!(!r.forget(&k));
        assert!(r.is_empty());
    }

    #[test]
    fn a_full_table_sets_aside_every_add_into_it_and_nothing_else() {
        let batch = vec![
            fm(3, FlowModCommand::DeleteStrict),
            fm(3, FlowModCommand::Add),
            fm(4, FlowModCommand::Add),
            fm(3, FlowModCommand::Add),
            fm(3, FlowModCommand::ModifyStrict),
        ];
        assert_eq!(offenders(&batch, 3, &err("OFPFMFC_TABLE_FULL")).into_iter().collect::<Vec<_>>(), vec![1, 3]);
        assert_eq!(offenders(&batch, 2, &err("OFPBAC_BAD_OUT_PORT")).into_iter().collect::<Vec<_>>(), vec![2]);
        assert!(offenders(&batch, 9, &err("OFPFMFC_TABLE_FULL")).is_empty(), "an index out of range names nothing");
    }

    #[test]
    fn owners_from_cookies() {
        let mut m = fm(4, FlowModCommand::Add);
        m.cookie = cookie::cookie(cookie::Kind::DefaultDrop, 7);
        assert_eq!(owner(&m, None), "default drop of pod ofport 7");
        m.cookie = 0x1234;
        assert_eq!(owner(&m, None), "flow of someone else");
        m.cookie = cookie::cookie(cookie::Kind::Clause, 0);
        assert_eq!(owner(&m, None), "clause flow");
        let line = describe(&m, &err("OFPFMFC_TABLE_FULL"), None);
        assert!(line.starts_with("cookie=0x4e50010000000000 table="), "{line}");
        assert!(line.contains("OFPFMFC_TABLE_FULL"), "{line}");
    }
}
