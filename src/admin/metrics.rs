//! The agent's Prometheus metrics: the instruments the reconciler and the admin server update,
//! and the page `/metrics` serves (Prometheus text format 0.0.4, by `prometheus-client`).
//!
//! Totals kept elsewhere are not counted twice: the audit logger's are read at each scrape,
//! and the switch connection's and the meter's are copied in by the agent's main loop.

use crate::audit::entry::LineDisposition;
use crate::audit::AuditStats;
use crate::compiler::meters::MeterKind;
use crate::compiler::Direction;
use crate::model::cluster_policy::{Action, Tier};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::metrics::info::Info;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// The `Content-Type` of the page.
pub(crate) const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// Label of the flows gauge.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TableLabel {
    pub table: String,
}

/// Label of the flow_mods counter: `add`, `modify` or `delete`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct KindLabel {
    pub kind: &'static str,
}

/// Packets the switch's logging meters dropped, by [`MeterKind`] (totals the switch keeps,
/// copied in by the meter polls).
#[derive(Debug, Default)]
pub(crate) struct ShedByMeter([AtomicU64; MeterKind::ALL.len()]);

impl ShedByMeter {
    /// Sets the totals, by kind of meter.
    pub(crate) fn store(&self, totals: [u64; MeterKind::ALL.len()]) {
        for (c, t) in self.0.iter().zip(totals) {
            c.store(t, Ordering::Relaxed);
        }
    }

    /// The totals, by kind of meter.
    fn read(&self) -> [u64; MeterKind::ALL.len()] {
        std::array::from_fn(|i| self.0.get(i).map_or(0, |c| c.load(Ordering::Relaxed)))
    }
}

/// One series of `npagent_cluster_policy_verdicts_total`: the verdicts of one
/// ClusterNetworkPolicy rule. A rule npagent cannot resolve has policy, rule and action `""`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClusterVerdict {
    /// `Admin` or `Baseline`.
    pub tier: &'static str,
    /// The ClusterNetworkPolicy's name.
    pub policy: String,
    /// The rule's name, or `ingress-<index>` / `egress-<index>` when it has none.
    pub rule: String,
    /// `Accept`, `Deny` or `Pass`.
    pub action: &'static str,
    /// `Ingress` or `Egress`.
    pub direction: &'static str,
}

/// The totals of `npagent_cluster_policy_verdicts_total`, as the task that counts them from
/// the switch's flow counters last stored them.
#[derive(Debug, Default)]
pub struct ClusterVerdicts(Mutex<BTreeMap<ClusterVerdict, u64>>);

impl ClusterVerdicts {
    /// Sets the totals.
    pub(crate) fn store(&self, totals: &BTreeMap<ClusterVerdict, u64>) {
        totals.clone_into(&mut self.0.lock().unwrap_or_else(|p| p.into_inner()));
    }

    /// The totals.
    fn snapshot(&self) -> BTreeMap<ClusterVerdict, u64> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// What the reconciler, the main loop and the admin server count.
#[derive(Debug)]
pub struct AgentMetrics {
    /// Desired flows per table name.
    pub flows: Family<TableLabel, Gauge>,
    /// Flow_mods committed, by kind.
    pub(crate) flow_mods: Family<KindLabel, Counter>,
    pub(crate) bundles_committed: Counter,
    pub(crate) bundles_failed: Counter,
    /// Flow_mods the switch refused (set aside and retried with backoff).
    pub(crate) flow_mods_rejected: Counter,
    /// Time from sending a bundle to its commit reply, seconds.
    pub(crate) bundle_commit_seconds: Histogram,
    /// Time the compiler took for a full or an incremental compile, seconds.
    pub(crate) compile_seconds: Histogram,
    pub(crate) reconnects: Counter,
    /// 1 while the switch is connected.
    pub(crate) switch_connected: Gauge,
    /// 1 while the bridge holds the committed resync of the current connection (ready).
    pub(crate) synced: Gauge,
    /// Failed accepts on the admin server.
    pub(crate) admin_accept_errors: Counter,
    /// Admin connections refused because every slot held a request being answered.
    pub(crate) admin_connections_refused: Counter,
    /// Admin connections closed because a newer one took their slot (see
    /// [`super::server`]).
    pub(crate) admin_connections_evicted: Counter,
    /// Admin connections closed at a deadline (a request head's or the connection's).
    pub(crate) admin_connections_timed_out: Counter,
    /// Packet-ins the switch connection shed (its queue was full); a total kept by the
    /// connection, copied here by the main loop.
    pub packet_in_dropped_by_connection: AtomicU64,
    /// Packet-ins the switch connection's strict parser rejected (a copied total).
    pub(crate) packet_in_malformed: AtomicU64,
    /// Packets the switch's logging meters dropped on their way to npagent (meter band
    /// stats), by kind of meter.
    pub(crate) shed_by_meter: ShedByMeter,
    /// The conntrack zone limit of each local pod (0 while off or not known yet).
    pub(crate) conntrack_pod_limit: Gauge,
    /// Local pods whose conntrack zone limit is wanted but not known to be set.
    pub(crate) conntrack_pods_unbounded: Gauge,
    /// Commands to ovs-vswitchd's control socket that failed (zone limits, flushes).
    pub(crate) conntrack_limit_errors: Counter,
    /// The verdicts of ClusterNetworkPolicy rules, by rule (totals kept by the task that reads
    /// the tiers' flow counters, copied here after each read).
    pub(crate) cluster_verdicts: ClusterVerdicts,
}

/// Bucket bounds of both histograms: 100 µs doubling to about 13 s, which covers an
/// incremental compile (well under 5 ms) and a 100,000-flow bundle (seconds).
fn latency_buckets() -> impl Iterator<Item = f64> {
    exponential_buckets(0.0001, 2.0, 18)
}

impl Default for AgentMetrics {
    fn default() -> Self {
        AgentMetrics {
            flows: Family::default(),
            flow_mods: Family::default(),
            bundles_committed: Counter::default(),
            bundles_failed: Counter::default(),
            flow_mods_rejected: Counter::default(),
            bundle_commit_seconds: Histogram::new(latency_buckets()),
            compile_seconds: Histogram::new(latency_buckets()),
            reconnects: Counter::default(),
            switch_connected: Gauge::default(),
            synced: Gauge::default(),
            admin_accept_errors: Counter::default(),
            admin_connections_refused: Counter::default(),
            admin_connections_evicted: Counter::default(),
            admin_connections_timed_out: Counter::default(),
            packet_in_dropped_by_connection: AtomicU64::default(),
            packet_in_malformed: AtomicU64::default(),
            shed_by_meter: ShedByMeter::default(),
            conntrack_pod_limit: Gauge::default(),
            conntrack_pods_unbounded: Gauge::default(),
            conntrack_limit_errors: Counter::default(),
            cluster_verdicts: ClusterVerdicts::default(),
        }
    }
}

/// Whether `/metrics` names staged policies and ClusterNetworkPolicies
/// (`--metrics-policy-labels`): any local user who reaches the admin port reads the page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyLabels {
    /// `npagent_staged_verdicts_total{policy, disposition}`: one series per staged policy;
    /// `npagent_cluster_policy_verdicts_total{tier, policy, rule, action, direction}`: one
    /// per ClusterNetworkPolicy rule.
    PerPolicy,
    /// `npagent_staged_verdicts_total{disposition}` and
    /// `npagent_cluster_policy_verdicts_total{tier, action, direction}`: sums over the
    /// policies, no name.
    Hidden,
}

impl PolicyLabels {
    /// The labels `--metrics-policy-labels` asks for.
    pub fn from_flag(named: bool) -> PolicyLabels {
        if named {
            PolicyLabels::PerPolicy
        } else {
            PolicyLabels::Hidden
        }
    }
}

/// The registry behind `/metrics` with staged policies named: see [`registry_with`].
pub fn registry(metrics: Arc<AgentMetrics>, audit: Arc<AuditStats>) -> Registry {
    registry_with(metrics, audit, PolicyLabels::PerPolicy)
}

/// The registry behind `/metrics`: `metrics`, the audit logger's `audit` counters (staged
/// verdicts and ClusterNetworkPolicy verdicts labelled as `policy_labels` says), and
/// `npagent_build_info`.
pub fn registry_with(metrics: Arc<AgentMetrics>, audit: Arc<AuditStats>, policy_labels: PolicyLabels) -> Registry {
    let m = &metrics;
    // Present from the first scrape, zero until something is sent.
    for kind in ["add", "modify", "delete"] {
        drop(m.flow_mods.get_or_create(&KindLabel { kind }));
    }
    let mut r = Registry::default();
    r.register("npagent_flows", "Desired flows per table.", m.flows.clone());
    r.register("npagent_flow_mods", "Flow_mods committed, by kind.", m.flow_mods.clone());
    r.register("npagent_bundles_committed", "Bundles committed.", m.bundles_committed.clone());
    r.register("npagent_bundles_failed", "Bundles the switch refused.", m.bundles_failed.clone());
    r.register(
        "npagent_flow_mods_rejected",
        "Flow_mods the switch refused (retried with backoff).",
        m.flow_mods_rejected.clone(),
    );
    r.register(
        "npagent_bundle_commit_seconds",
        "Time from sending a bundle to its commit reply.",
        m.bundle_commit_seconds.clone(),
    );
    r.register(
        "npagent_compile_seconds",
        "Time the compiler took to turn the model into desired flows (full or incremental).",
        m.compile_seconds.clone(),
    );
    r.register("npagent_switch_reconnects", "Connections to the switch after the first.", m.reconnects.clone());
    r.register("npagent_switch_connected", "1 while the switch is connected.", m.switch_connected.clone());
    r.register(
        "npagent_synced",
        "1 while the bridge holds the committed resync of the current connection (/readyz is 200).",
        m.synced.clone(),
    );
    r.register("npagent_metrics_accept_errors", "Failed accepts on the admin server.", m.admin_accept_errors.clone());
    r.register(
        "npagent_metrics_connections_refused",
        "Admin server connections refused because every connection it serves had a request being answered.",
        m.admin_connections_refused.clone(),
    );
    r.register(
        "npagent_metrics_connections_evicted",
        "Admin server connections closed to make room for a newer one: the one that had waited longest for a request head.",
        m.admin_connections_evicted.clone(),
    );
    r.register(
        "npagent_metrics_connections_timed_out",
        "Admin server connections closed at a deadline (2 s for each request head, 5 s in all).",
        m.admin_connections_timed_out.clone(),
    );
    r.register(
        "npagent_conntrack_pod_limit",
        "Conntrack entries each local pod's zone may hold (--conntrack-pod-limit; 0: off or not known yet).",
        m.conntrack_pod_limit.clone(),
    );
    r.register(
        "npagent_conntrack_pods_unbounded",
        "Local pods whose conntrack zone limit could not be set (ovs-vswitchd's control socket failed).",
        m.conntrack_pods_unbounded.clone(),
    );
    r.register(
        "npagent_conntrack_limit_errors",
        "Failed commands to ovs-vswitchd's control socket (conntrack zone limits and flushes).",
        m.conntrack_limit_errors.clone(),
    );
    r.register(
        "npagent_build",
        "The running npagent's version (and git commit when known).",
        Info::new(build_labels()),
    );
    r.register_collector(Box::new(Scraped { metrics, audit, policy_labels }));
    r
}

/// Labels of `npagent_build_info`.
fn build_labels() -> Vec<(&'static str, &'static str)> {
    let mut labels = vec![("version", env!("CARGO_PKG_VERSION"))];
    if let Some(commit) = option_env!("NPAGENT_GIT_COMMIT") {
        labels.push(("commit", commit));
    }
    labels
}

/// Renders the page.
pub fn render(registry: &Registry) -> String {
    let mut out = String::new();
    // Writing into a String fails only if an encoder reports an error; none of ours do.
    if let Err(e) = prometheus_client::encoding::prometheus_text::encode(&mut out, registry) {
        tracing::error!("cannot render the metrics: {e}");
    }
    out
}

/// Counters read at each scrape from where they are kept.
#[derive(Debug)]
struct Scraped {
    metrics: Arc<AgentMetrics>,
    audit: Arc<AuditStats>,
    policy_labels: PolicyLabels,
}

impl Collector for Scraped {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let m = &self.metrics;
        let snap = self.audit.snapshot();
        let counters = [
            (
                "npagent_packet_ins_received",
                "Packet-ins received from the switch: decoded, undecodable, unresolved or shed.",
                snap.packet_ins + get(&m.packet_in_dropped_by_connection) + get(&m.packet_in_malformed),
            ),
            ("npagent_packet_ins_decoded", "Packet-ins decoded into audit entries.", snap.decoded),
            (
                "npagent_packet_ins_undecodable",
                "Packet-ins that could not be decoded (the message, its userdata or its frame).",
                snap.undecodable + get(&m.packet_in_malformed),
            ),
            (
                "npagent_packet_ins_unresolved",
                "Packet-ins of an Allow rule or a staged rule npagent no longer knows (deleted beyond the grace period).",
                snap.unresolved,
            ),
            ("npagent_audit_entries_written", "Audit log lines written.", snap.entries_written),
            ("npagent_audit_write_errors", "Failed writes to the audit log.", snap.write_errors),
            (
                "npagent_audit_lines_discarded",
                "Audit lines discarded while the log was unwritable.",
                snap.lines_discarded,
            ),
            (
                "npagent_audit_shed_by_queue",
                "Packet-ins shed because npagent's queues were full (or the audit logger had stopped).",
                snap.shed_by_queue + get(&m.packet_in_dropped_by_connection),
            ),
        ];
        for (name, help, value) in counters {
            let counter = ConstCounter::new(value);
            let family = encoder.encode_descriptor(name, help, None, counter.metric_type())?;
            counter.encode(family)?;
        }
        let shed = MeterKind::ALL.into_iter().zip(m.shed_by_meter.read()).map(|(k, n)| ([("meter", k.as_str())], n));
        labelled_counters(
            &mut encoder,
            "npagent_audit_shed_by_meter",
            "Logging packets the switch's meters dropped, by kind of meter (summed over the pods): Allow, Drop, security events (the node's meter included) or staged verdicts.",
            shed,
        )?;
        let verdicts = self.audit.staged_verdicts.snapshot();
        match self.policy_labels {
            PolicyLabels::PerPolicy => labelled_counters(
                &mut encoder,
                "npagent_staged_verdicts",
                "Staged verdicts (WouldDrop, WouldAllow) in audit entries, by staged policy (namespace/name; \"\" when none is known) and disposition: one series per staged policy with a verdict since npagent started, not per connection.",
                verdicts.iter().map(|(policy, d, n)| ([("policy", policy.as_str()), ("disposition", d.as_str())], *n)),
            ),
            PolicyLabels::Hidden => labelled_counters(
                &mut encoder,
                "npagent_staged_verdicts",
                "Staged verdicts (WouldDrop, WouldAllow) in audit entries, by disposition: the sum over the staged policies, whose names --metrics-policy-labels=false keeps off this page.",
                STAGED_DISPOSITIONS.map(|d| {
                    let total = verdicts.iter().filter(|(_, v, _)| *v == d).map(|(_, _, n)| n).sum::<u64>();
                    ([("disposition", d.as_str())], total)
                }),
            ),
        }?;
        cluster_verdicts(&mut encoder, self.policy_labels, &m.cluster_verdicts.snapshot())
    }
}

/// `npagent_cluster_policy_verdicts_total`: each rule's `totals` when `policy_labels` names
/// them, else their sums by tier, action and direction (every combination from the first
/// scrape).
fn cluster_verdicts(
    encoder: &mut DescriptorEncoder,
    policy_labels: PolicyLabels,
    totals: &BTreeMap<ClusterVerdict, u64>,
) -> Result<(), std::fmt::Error> {
    const NAME: &str = "npagent_cluster_policy_verdicts";
    match policy_labels {
        PolicyLabels::PerPolicy => labelled_counters(
            encoder,
            NAME,
            "Verdicts of ClusterNetworkPolicy rules, from the switch's flow counters (read every 10 s): connections whose first packet an Accept or Pass rule decided, packets a Deny rule dropped; by tier, policy, rule (its name, else ingress-N or egress-N), action and direction (\"\" for a rule npagent could not resolve). One series per rule on the switch or that counted since npagent started.",
            totals.iter().map(|(v, n)| {
                let labels = [
                    ("tier", v.tier),
                    ("policy", v.policy.as_str()),
                    ("rule", v.rule.as_str()),
                    ("action", v.action),
                    ("direction", v.direction),
                ];
                (labels, *n)
            }),
        ),
        PolicyLabels::Hidden => {
            let mut sums: BTreeMap<(&str, &str, &str), u64> = BTreeMap::new();
            for tier in Tier::ALL {
                for action in [Action::Accept, Action::Deny, Action::Pass] {
                    for direction in Direction::BOTH {
                        sums.insert((tier.as_str(), action.as_str(), direction.as_str()), 0);
                    }
                }
            }
            for (v, n) in totals {
                let sum = sums.entry((v.tier, v.action, v.direction)).or_default();
                *sum = sum.saturating_add(*n);
            }
            labelled_counters(
                encoder,
                NAME,
                "Verdicts of ClusterNetworkPolicy rules, from the switch's flow counters (read every 10 s): connections whose first packet an Accept or Pass rule decided, packets a Deny rule dropped; by tier, action and direction: the sum over the rules, whose policies' names --metrics-policy-labels=false keeps off this page.",
                sums.into_iter().map(|((tier, action, direction), n)| {
                    ([("tier", tier), ("action", action), ("direction", direction)], n)
                }),
            )
        }
    }
}

/// The dispositions of staged verdicts, each a series from the first scrape when the
/// policies are not named.
const STAGED_DISPOSITIONS: [LineDisposition; 2] = [LineDisposition::WouldDrop, LineDisposition::WouldAllow];

/// A counter family of constant values, one per label set.
fn labelled_counters<L: EncodeLabelSet>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    values: impl IntoIterator<Item = (L, u64)>,
) -> Result<(), std::fmt::Error> {
    let mut family = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (labels, value) in values {
        ConstCounter::new(value).encode(family.encode_family(&labels)?)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(m: Arc<AgentMetrics>) -> String {
        render(&registry(m, Arc::new(AuditStats::default())))
    }

    #[test]
    fn histograms_have_buckets_sum_and_count() {
        let m = Arc::new(AgentMetrics::default());
        m.bundle_commit_seconds.observe(0.003);
        m.bundle_commit_seconds.observe(0.5);
        let text = page(m);
        assert!(text.contains("# TYPE npagent_bundle_commit_seconds histogram"), "{text}");
        assert!(text.contains("npagent_bundle_commit_seconds_bucket{le=\"0.0032\"} 1\n"), "{text}");
        assert!(text.contains("npagent_bundle_commit_seconds_bucket{le=\"+Inf\"} 2\n"), "{text}");
        assert!(text.contains("npagent_bundle_commit_seconds_count 2\n"), "{text}");
        assert!(text.contains("npagent_compile_seconds_count 0\n"), "{text}");
    }

    #[test]
    fn counters_get_total_and_every_flow_mod_kind_is_there_from_the_start() {
        let m = Arc::new(AgentMetrics::default());
        m.flow_mods.get_or_create(&KindLabel { kind: "add" }).inc();
        m.shed_by_meter.store([7, 0, 0, 3]);
        let text = page(m);
        assert!(text.contains("npagent_flow_mods_total{kind=\"add\"} 1\n"), "{text}");
        assert!(text.contains("npagent_flow_mods_total{kind=\"delete\"} 0\n"), "{text}");
        assert!(text.contains("# TYPE npagent_audit_shed_by_meter_total counter"), "{text}");
        for (meter, n) in [("allow", 7), ("drop", 0), ("security", 0), ("staged", 3)] {
            let sample = format!("npagent_audit_shed_by_meter_total{{meter=\"{meter}\"}} {n}\n");
            assert!(text.contains(&sample), "{sample} in {text}");
        }
    }

    /// A staged verdict of `disposition` whose pod `isolated_by` would isolate.
    fn staged(disposition: LineDisposition, isolated_by: &[&str]) -> crate::audit::AuditEntry {
        let obj = |name: &&str| crate::model::ObjectRef { namespace: "x".into(), name: (*name).into() };
        let isolated_by = isolated_by.iter().map(obj).collect();
        crate::audit::verdicts::staged_entry(disposition, crate::audit::PolicyRef::StagedDrop, isolated_by)
    }

    /// The page's `npagent_staged_verdicts_total` samples.
    fn staged_samples(policy_labels: PolicyLabels, audit: &Arc<AuditStats>) -> Vec<String> {
        let page = render(&registry_with(Arc::new(AgentMetrics::default()), Arc::clone(audit), policy_labels));
        page.lines().filter(|l| l.starts_with("npagent_staged_verdicts_total")).map(str::to_owned).collect()
    }

    #[test]
    fn hidden_policy_labels_keep_the_counts_by_disposition_and_no_name() {
        let audit = Arc::new(AuditStats::default());
        assert_eq!(
            staged_samples(PolicyLabels::Hidden, &audit),
            [
                "npagent_staged_verdicts_total{disposition=\"WouldDrop\"} 0",
                "npagent_staged_verdicts_total{disposition=\"WouldAllow\"} 0"
            ],
            "both from the first scrape"
        );
        audit.staged_verdicts.count(&staged(LineDisposition::WouldDrop, &["deny", "web"]));
        audit.staged_verdicts.count(&staged(LineDisposition::WouldDrop, &["deny"]));
        audit.staged_verdicts.count(&staged(LineDisposition::WouldAllow, &[]));
        let named = staged_samples(PolicyLabels::PerPolicy, &audit);
        assert_eq!(named.len(), 6, "{named:?}");
        assert!(named.contains(&"npagent_staged_verdicts_total{policy=\"x/deny\",disposition=\"WouldDrop\"} 2".into()));
        // The sum of the named series, without the names.
        assert_eq!(
            staged_samples(PolicyLabels::Hidden, &audit),
            [
                "npagent_staged_verdicts_total{disposition=\"WouldDrop\"} 3",
                "npagent_staged_verdicts_total{disposition=\"WouldAllow\"} 1"
            ]
        );
        assert_eq!(
            (PolicyLabels::from_flag(true), PolicyLabels::from_flag(false)),
            (PolicyLabels::PerPolicy, PolicyLabels::Hidden)
        );
    }

    /// The page's `npagent_cluster_policy_verdicts_total` samples.
    fn cluster_samples(policy_labels: PolicyLabels, totals: &BTreeMap<ClusterVerdict, u64>) -> Vec<String> {
        let m = Arc::new(AgentMetrics::default());
        m.cluster_verdicts.store(totals);
        let page = render(&registry_with(m, Arc::new(AuditStats::default()), policy_labels));
        page.lines().filter(|l| l.starts_with("npagent_cluster_policy_verdicts_total")).map(str::to_owned).collect()
    }

    #[test]
    fn cluster_verdicts_are_named_per_rule_or_summed_by_tier_action_and_direction() {
        let verdict = |tier, policy: &str, rule: &str, action, direction| ClusterVerdict {
            tier,
            policy: policy.into(),
            rule: rule.into(),
            action,
            direction,
        };
        let totals = BTreeMap::from([
            (verdict("Admin", "admin-override", "monitoring", "Accept", "Ingress"), 3),
            (verdict("Admin", "other", "ingress-0", "Accept", "Ingress"), 2),
            (verdict("Baseline", "tenant", "others", "Deny", "Ingress"), 5),
            (verdict("Baseline", "", "", "", "Egress"), 1),
        ]);
        let named = cluster_samples(PolicyLabels::PerPolicy, &totals);
        assert_eq!(named.len(), 4, "{named:?}");
        assert!(named.contains(
            &"npagent_cluster_policy_verdicts_total{tier=\"Admin\",policy=\"admin-override\",rule=\"monitoring\",action=\"Accept\",direction=\"Ingress\"} 3".into()
        ), "{named:?}");
        let hidden = cluster_samples(PolicyLabels::Hidden, &totals);
        assert!(hidden.iter().all(|l| !l.contains("policy=") && !l.contains("rule=")), "{hidden:?}");
        assert_eq!(hidden.len(), 13, "every tier, action and direction, and the unresolved: {hidden:?}");
        for sample in [
            "npagent_cluster_policy_verdicts_total{tier=\"Admin\",action=\"Accept\",direction=\"Ingress\"} 5",
            "npagent_cluster_policy_verdicts_total{tier=\"Baseline\",action=\"Deny\",direction=\"Ingress\"} 5",
            "npagent_cluster_policy_verdicts_total{tier=\"Admin\",action=\"Pass\",direction=\"Egress\"} 0",
            "npagent_cluster_policy_verdicts_total{tier=\"Baseline\",action=\"\",direction=\"Egress\"} 1",
        ] {
            assert!(hidden.contains(&sample.to_owned()), "{sample} in {hidden:?}");
        }
        assert_eq!(cluster_samples(PolicyLabels::PerPolicy, &BTreeMap::new()), Vec::<String>::new());
        assert_eq!(cluster_samples(PolicyLabels::Hidden, &BTreeMap::new()).len(), 12, "from the first scrape");
    }

    #[test]
    fn build_info_carries_the_version() {
        let text = page(Arc::new(AgentMetrics::default()));
        let line = text.lines().find(|l| l.starts_with("npagent_build_info{")).expect(&text);
        assert!(line.contains(&format!("version=\"{}\"", env!("CARGO_PKG_VERSION"))), "{line}");
        assert!(line.ends_with(" 1"), "{line}");
    }
}
