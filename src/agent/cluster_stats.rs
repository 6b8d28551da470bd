//! The verdicts of ClusterNetworkPolicy rules (`npagent_cluster_policy_verdicts_total`),
//! counted from the switch's own flow counters, whether or not anything is logged: pure, the
//! dumps and the time handed in by [`super::verdict_polls`].
//!
//! In the four tier tables each rule is a conjunction whose `conj_id` flows carry the rule's
//! cookie. An Accept or Pass rule has two: `ct_state=+new+trk`, a connection's first packet,
//! which is what it counts (the connections it decided), and `ct_state=-new+trk`, the rest,
//! which it does not; a Deny rule has one, for every packet, and counts every packet it
//! dropped.
//!
//! The switch counts per flow, and a flow's counter starts again when the flow is deleted and
//! added (when the priorities of a tier shift under a new policy above, say). The totals here
//! are monotonic: each dump adds, per flow (its table, priority and match), what it counted
//! since the dump before, to the rule its `conj_id` names at the time of this dump. A flow
//! was added again since (its counter is all new) when its count went down, or when its age
//! says so (it is younger than it would be had it stayed, and its cookie is the same: an ADD
//! that replaces a flow of another cookie keeps the counters, a MODIFY keeps both). A flow
//! that disappears keeps what it added; one that comes back counts from zero. A flow older
//! than this agent's run, seen for the first time, counts from its count then: what the
//! switch counted before is an earlier run's. A `conj_id` npagent cannot resolve to a
//! ClusterNetworkPolicy rule of that cookie (deleted rules stay resolvable for the
//! compiler's grace period) counts under policy, rule and action `""`, so nothing is lost
//! silently.

use crate::admin::metrics::ClusterVerdict;
use crate::compiler::flow::ct;
use crate::compiler::{tables, Direction, RuleInfo};
use crate::model::cluster_policy::Tier;
use ofp::{FlowStats, Match, Oxm};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

/// The tables of the tiers' rules, whose flows are counted.
pub(crate) const TIER_TABLES: [u8; 4] = [
    tables::ADMIN_EGRESS_RULE,
    tables::BASELINE_EGRESS_RULE,
    tables::ADMIN_INGRESS_RULE,
    tables::BASELINE_INGRESS_RULE,
];

/// How far a flow's age may lag behind the time between two dumps before the flow counts as
/// added again: the dumps' delays on the switch and on the way back differ a little.
const AGE_SLACK: Duration = Duration::from_secs(2);

/// What a flow is, by table, priority and match.
type FlowId = (u8, u16, Match);

/// A counted flow as the last dump had it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    packets: u64,
    cookie: u64,
    /// Time since the switch added it, when the dump said.
    age: Option<Duration>,
}

/// Monotonic totals of the tiers' verdicts from successive dumps of [`TIER_TABLES`].
#[derive(Debug)]
pub(crate) struct VerdictCounter {
    /// When this agent started: flows older than that predate its run.
    started: Instant,
    /// When the last dump was read.
    last: Option<Instant>,
    /// The counted flows of the last dump.
    seen: HashMap<FlowId, Seen>,
    totals: BTreeMap<ClusterVerdict, u64>,
}

impl VerdictCounter {
    /// No totals yet, for an agent that started at `started`.
    pub(crate) fn new(started: Instant) -> VerdictCounter {
        VerdictCounter { started, last: None, seen: HashMap::new(), totals: BTreeMap::new() }
    }

    /// Adds what `flows` (a dump of the tier tables, read at `now`; flows of other tables are
    /// left out) counted since the last dump, each to the rule `rule` gives its `conj_id`.
    pub(crate) fn observe<'r>(
        &mut self,
        now: Instant,
        flows: &[FlowStats],
        rule: impl Fn(u32) -> Option<&'r RuleInfo>,
    ) {
        let since_last = self.last.map(|t| now.saturating_duration_since(t));
        let since_start = now.saturating_duration_since(self.started);
        let mut seen = HashMap::with_capacity(self.seen.len());
        let mut present = BTreeSet::new();
        for flow in flows {
            let Some((tier, direction)) = tier_of(flow.table_id) else { continue };
            let Some(conj_id) = counted_conj_id(&flow.match_) else { continue };
            let now_seen = Seen {
                packets: flow.stats.packet_count.unwrap_or(0),
                cookie: flow.cookie,
                age: flow.stats.duration.map(|(s, ns)| Duration::new(u64::from(s), ns)),
            };
            let id = (flow.table_id, flow.priority, flow.match_.clone());
            let added = match self.seen.get(&id) {
                Some(before) => counted_since(before, &now_seen, since_last),
                None if now_seen.age.is_some_and(|age| age > since_start) => 0,
                None => now_seen.packets,
            };
            let labels = match rule(conj_id).filter(|r| r.cookie == flow.cookie) {
                Some(r) if r.cluster.is_some() => verdict_of(r),
                _ => unresolved(tier, direction),
            };
            // An unresolved rule's series appears once it counted something.
            if added > 0 || !labels.policy.is_empty() {
                let total = self.totals.entry(labels.clone()).or_default();
                *total = total.saturating_add(added);
                present.insert(labels);
            }
            seen.insert(id, now_seen);
        }
        // A rule gone from the switch that never counted anything leaves no series behind.
        self.totals.retain(|labels, total| *total > 0 || present.contains(labels));
        self.seen = seen;
        self.last = Some(now);
    }

    /// The totals so far, by rule.
    pub(crate) fn totals(&self) -> &BTreeMap<ClusterVerdict, u64> {
        &self.totals
    }
}

/// What a flow seen `before` (`since_last` ago, when known) counted since, as it is `now`.
fn counted_since(before: &Seen, now: &Seen, since_last: Option<Duration>) -> u64 {
    let younger = match (before.age, now.age, since_last) {
        (Some(before_age), Some(age), Some(since)) => age.saturating_add(AGE_SLACK) < before_age.saturating_add(since),
        _ => false,
    };
    let added_again = now.packets < before.packets || (younger && now.cookie == before.cookie);
    if added_again {
        now.packets
    } else {
        now.packets - before.packets
    }
}

/// The tier and direction of tier table `table`.
fn tier_of(table: u8) -> Option<(Tier, Direction)> {
    Tier::ALL
        .into_iter()
        .flat_map(|tier| Direction::BOTH.map(|d| (tier, d)))
        .find(|(tier, direction)| direction.tier_table(*tier) == table)
}

/// The `conj_id` of a rule's flow whose packets are verdicts: every packet of a flow without
/// `ct_state` (a Deny's), the first of a connection (`+new`) for one that matches `ct_state`.
/// `None` for the rest of a connection (`-new`) and for flows of no rule (clauses, skips).
fn counted_conj_id(m: &Match) -> Option<u32> {
    let conj_id = m.fields.iter().find_map(|f| match f {
        Oxm::ConjId(id) => Some(*id),
        _ => None,
    })?;
    let later_packets = m.fields.iter().any(|f| match f {
        Oxm::CtState(state) => state.mask.unwrap_or(u32::MAX) & ct::NEW != 0 && state.value & ct::NEW == 0,
        _ => false,
    });
    (!later_packets).then_some(conj_id)
}

/// The series of ClusterNetworkPolicy rule `r`.
fn verdict_of(r: &RuleInfo) -> ClusterVerdict {
    let direction = r.direction.as_str();
    ClusterVerdict {
        tier: r.cluster.map_or("", |c| c.tier.as_str()),
        policy: r.policy.name.to_string(),
        rule: r.name.clone().unwrap_or_else(|| format!("{}-{}", direction.to_lowercase(), r.index)),
        action: r.cluster.map_or("", |c| c.action.as_str()),
        direction,
    }
}

/// The series of the rules of `tier` and `direction` that npagent could not resolve.
fn unresolved(tier: Tier, direction: Direction) -> ClusterVerdict {
    ClusterVerdict {
        tier: tier.as_str(),
        policy: String::new(),
        rule: String::new(),
        action: "",
        direction: direction.as_str(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compiler::flow::ct_state;
    use crate::compiler::ClusterRuleInfo;
    use crate::model::cluster_policy::Action;
    use crate::model::ObjectRef;
    use ofp::multipart::OxsStats;

    const COOKIE: u64 = 0x4e50_0200_0000_0001;

    /// Rule `id` of ClusterNetworkPolicy `policy` (its `egress-1` when `name` is `None`).
    fn rule(id: u32, policy: &str, name: Option<&str>, tier: Tier, action: Action, direction: Direction) -> RuleInfo {
        RuleInfo {
            id,
            policy: ObjectRef { namespace: "".into(), name: policy.into() },
            name: name.map(str::to_owned),
            index: 1,
            direction,
            priority: 60000,
            ports: Vec::new(),
            cookie: COOKIE + u64::from(id),
            log_label: None,
            deleted: false,
            cluster: Some(ClusterRuleInfo { tier, action, policy_priority: 10 }),
        }
    }

    /// The rules of the tests: 1 an Admin ingress Accept, 2 an Admin ingress Pass, 3 a
    /// Baseline ingress Deny, 4 an unnamed Admin egress Deny.
    fn rules() -> BTreeMap<u32, RuleInfo> {
        use Action::*;
        use Direction::*;
        [
            rule(1, "admin", Some("monitoring"), Tier::Admin, Accept, Ingress),
            rule(2, "admin", Some("to-np"), Tier::Admin, Pass, Ingress),
            rule(3, "baseline", Some("others"), Tier::Baseline, Deny, Ingress),
            rule(4, "admin", None, Tier::Admin, Deny, Egress),
        ]
        .into_iter()
        .map(|r| (r.id, r))
        .collect()
    }

    /// Which of a rule's flows.
    #[derive(Clone, Copy)]
    enum Shape {
        First,
        Later,
        Every,
    }

    /// The flow of rule `id` of `shape` in `table` at `priority`, with `packets` and `age`.
    fn flow(table: u8, priority: u16, id: u32, shape: Shape, packets: u64, age_s: u32) -> FlowStats {
        let mut fields = vec![Oxm::ConjId(id)];
        match shape {
            Shape::First => fields.push(ct_state(ct::NEW | ct::TRK, 0)),
            Shape::Later => fields.push(ct_state(ct::TRK, ct::NEW)),
            Shape::Every => {}
        }
        FlowStats {
            table_id: table,
            priority,
            idle_timeout: 0,
            hard_timeout: 0,
            flags: 0,
            importance: 0,
            cookie: COOKIE + u64::from(id),
            match_: Match { fields },
            stats: OxsStats {
                duration: Some((age_s, 0)),
                packet_count: Some(packets),
                byte_count: Some(packets * 60),
                ..OxsStats::default()
            },
            instructions: Vec::new(),
        }
    }

    const AI: u8 = tables::ADMIN_INGRESS_RULE;
    const BI: u8 = tables::BASELINE_INGRESS_RULE;

    fn key(
        tier: &'static str,
        policy: &str,
        rule: &str,
        action: &'static str,
        direction: &'static str,
    ) -> ClusterVerdict {
        ClusterVerdict { tier, policy: policy.into(), rule: rule.into(), action, direction }
    }

    fn monitoring() -> ClusterVerdict {
        key("Admin", "admin", "monitoring", "Accept", "Ingress")
    }

    /// A counter of an agent that started 100 s before `t0`, and `t0`.
    fn counter() -> (VerdictCounter, Instant) {
        let t0 = Instant::now() + Duration::from_secs(100);
        (VerdictCounter::new(t0 - Duration::from_secs(100)), t0)
    }

    fn observe(c: &mut VerdictCounter, at: Instant, flows: &[FlowStats]) {
        let rules = rules();
        c.observe(at, flows, |id| rules.get(&id));
    }

    fn total(c: &VerdictCounter, k: &ClusterVerdict) -> Option<u64> {
        c.totals().get(k).copied()
    }

    #[test]
    fn accept_and_pass_count_first_packets_deny_every_packet() {
        let (mut c, t0) = counter();
        let flows = [
            flow(AI, 60000, 1, Shape::First, 3, 5),
            flow(AI, 60000, 1, Shape::Later, 50, 5),
            flow(AI, 59999, 2, Shape::First, 4, 5),
            flow(AI, 59999, 2, Shape::Later, 70, 5),
            flow(BI, 60000, 3, Shape::Every, 9, 5),
            flow(tables::ADMIN_EGRESS_RULE, 60000, 4, Shape::Every, 2, 5),
            // Flows of other tables, and the clause flows (no conj_id), are no verdicts.
            flow(tables::INGRESS_RULE, 190, 1, Shape::First, 1000, 5),
            FlowStats { match_: Match { fields: vec![] }, ..flow(AI, 60000, 1, Shape::Every, 1000, 5) },
        ];
        observe(&mut c, t0, &flows);
        let want = BTreeMap::from([
            (monitoring(), 3),
            (key("Admin", "admin", "to-np", "Pass", "Ingress"), 4),
            (key("Baseline", "baseline", "others", "Deny", "Ingress"), 9),
            (key("Admin", "admin", "egress-1", "Deny", "Egress"), 2),
        ]);
        assert_eq!(c.totals(), &want);
        // Ten seconds later: what each flow counted since.
        let later = [flow(AI, 60000, 1, Shape::First, 10, 15), flow(BI, 60000, 3, Shape::Every, 9, 15)];
        observe(&mut c, t0 + Duration::from_secs(10), &later);
        assert_eq!(total(&c, &monitoring()), Some(10));
        assert_eq!(total(&c, &key("Baseline", "baseline", "others", "Deny", "Ingress")), Some(9));
    }

    #[test]
    fn a_flow_whose_count_went_down_was_added_again() {
        let (mut c, t0) = counter();
        observe(&mut c, t0, &[flow(AI, 60000, 1, Shape::First, 7, 5)]);
        // A policy above: the rule's flow deleted and added again (same priority here, in
        // the worst case), its counter from zero.
        observe(&mut c, t0 + Duration::from_secs(10), &[flow(AI, 60000, 1, Shape::First, 2, 15)]);
        assert_eq!(total(&c, &monitoring()), Some(9));
        observe(&mut c, t0 + Duration::from_secs(20), &[flow(AI, 60000, 1, Shape::First, 5, 25)]);
        assert_eq!(total(&c, &monitoring()), Some(12));
    }

    #[test]
    fn a_flow_added_again_counts_from_zero_even_past_its_old_count() {
        let (mut c, t0) = counter();
        observe(&mut c, t0, &[flow(AI, 60000, 1, Shape::First, 3, 30)]);
        // Added again 4 s after the dump: 6 s old now, not 40 s; 5 packets since.
        observe(&mut c, t0 + Duration::from_secs(10), &[flow(AI, 60000, 1, Shape::First, 5, 6)]);
        assert_eq!(total(&c, &monitoring()), Some(8));
        // A flow whose age lags a little (the dumps' delays) stayed.
        observe(&mut c, t0 + Duration::from_secs(20), &[flow(AI, 60000, 1, Shape::First, 6, 15)]);
        assert_eq!(total(&c, &monitoring()), Some(9));
        // An ADD of another cookie replaces a flow with its counters kept, its age not.
        let replaced = FlowStats { cookie: COOKIE, ..flow(AI, 60000, 1, Shape::First, 8, 1) };
        observe(&mut c, t0 + Duration::from_secs(30), &[replaced]);
        assert_eq!(c.totals().values().sum::<u64>(), 11, "{:?}", c.totals());
    }

    #[test]
    fn a_flow_that_disappears_keeps_what_it_added_and_one_that_comes_back_starts_from_zero() {
        let (mut c, t0) = counter();
        let moved = |priority, packets, age| flow(AI, priority, 1, Shape::First, packets, age);
        observe(&mut c, t0, &[moved(60000, 4, 5)]);
        // A policy above: the rule's flow one priority lower, its counter from zero.
        observe(&mut c, t0 + Duration::from_secs(10), &[moved(59999, 3, 8)]);
        assert_eq!(total(&c, &monitoring()), Some(7));
        // The policy above gone, in the same ten seconds.
        observe(&mut c, t0 + Duration::from_secs(20), &[moved(60000, 1, 1)]);
        assert_eq!(total(&c, &monitoring()), Some(8));
        // The rule deleted: its total stays.
        observe(&mut c, t0 + Duration::from_secs(30), &[]);
        assert_eq!(total(&c, &monitoring()), Some(8));
    }

    #[test]
    fn flows_older_than_the_run_count_from_their_first_dump() {
        let (mut c, t0) = counter();
        // 100 s into the run: a flow of 500 s is an earlier run's, one of 50 s this run's.
        let flows = [flow(AI, 60000, 1, Shape::First, 40, 500), flow(BI, 60000, 3, Shape::Every, 6, 50)];
        observe(&mut c, t0, &flows);
        assert_eq!(total(&c, &monitoring()), Some(0), "a series from the first dump");
        assert_eq!(total(&c, &key("Baseline", "baseline", "others", "Deny", "Ingress")), Some(6));
        observe(&mut c, t0 + Duration::from_secs(10), &[flow(AI, 60000, 1, Shape::First, 42, 510)]);
        assert_eq!(total(&c, &monitoring()), Some(2));
    }

    #[test]
    fn an_unknown_rule_counts_under_empty_names_and_only_once_it_counted() {
        let (mut c, t0) = counter();
        let unknown = key("Baseline", "", "", "", "Ingress");
        observe(&mut c, t0, &[flow(BI, 60000, 9, Shape::Every, 0, 5)]);
        assert!(c.totals().is_empty(), "{:?}", c.totals());
        observe(&mut c, t0 + Duration::from_secs(10), &[flow(BI, 60000, 9, Shape::Every, 4, 15)]);
        assert_eq!(total(&c, &unknown), Some(4));
        // A conj_id now another rule's (its cookie differs) is not that rule's.
        let reused = FlowStats { cookie: COOKIE + 9, ..flow(AI, 60000, 1, Shape::First, 2, 5) };
        observe(&mut c, t0 + Duration::from_secs(20), &[reused]);
        assert_eq!(total(&c, &key("Admin", "", "", "", "Ingress")), Some(2));
        assert_eq!(total(&c, &monitoring()), None);
        assert_eq!(total(&c, &unknown), Some(4), "kept after its flow went");
    }

    #[test]
    fn a_rule_gone_without_a_verdict_leaves_no_series() {
        let (mut c, t0) = counter();
        observe(&mut c, t0, &[flow(AI, 60000, 1, Shape::First, 0, 5), flow(BI, 60000, 3, Shape::Every, 1, 5)]);
        assert_eq!(c.totals().len(), 2);
        observe(&mut c, t0 + Duration::from_secs(10), &[]);
        assert_eq!(c.totals().keys().collect::<Vec<_>>(), [&key("Baseline", "baseline", "others", "Deny", "Ingress")]);
    }
}
