//! The task that counts the verdicts of ClusterNetworkPolicy rules: every [`DUMP_PERIOD`]
//! while the switch is connected (and at once when it connects) it dumps the four tier
//! tables, resolves their rules in the compiler's rule table and copies the totals
//! ([`VerdictCounter`]) to `npagent_cluster_policy_verdicts_total`.

use super::cluster_stats::{VerdictCounter, TIER_TABLES};
use super::{RateLimitedWarning, State};
use crate::admin::metrics::AgentMetrics;
use crate::compiler::cookie::{self, Kind};
use crate::switch::{CookieFilter, SwitchError, SwitchHandle};
use ofp::FlowStats;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

/// Time between two dumps of the tier tables.
pub(crate) const DUMP_PERIOD: Duration = Duration::from_secs(10);

/// Dumps the tier tables of `switch` every [`DUMP_PERIOD`] and keeps `metrics`' ClusterNetworkPolicy
/// verdicts, for an agent that started at `started`, resolving the rules in `state`. Runs
/// until aborted: a failed dump is warned about (at most once a minute) and tried again.
pub(super) async fn run_verdict_polls(
    switch: SwitchHandle,
    state: Arc<RwLock<State>>,
    metrics: Arc<AgentMetrics>,
    started: Instant,
) {
    let mut counter = VerdictCounter::new(started);
    let (mut failures, mut warning) = (0u64, RateLimitedWarning::default());
    loop {
        match switch.wait_connected(DUMP_PERIOD).await {
            Ok(_) => {}
            // Not connected yet: waiting on.
            Err(SwitchError::Timeout { .. }) => continue,
            // The connection ended (the agent stops).
            Err(_) => {
                tokio::time::sleep(DUMP_PERIOD).await;
                continue;
            }
        }
        match dump_tiers(&switch).await {
            Ok(flows) => {
                let now = Instant::now();
                {
                    let state = state.read().unwrap_or_else(|p| p.into_inner());
                    let rules = state.compiler.as_ref().map(|c| c.rules());
                    counter.observe(now, &flows, |id| rules.and_then(|r| r.rule(id)));
                }
                metrics.cluster_verdicts.store(counter.totals());
            }
            Err(e) => {
                failures += 1;
                warning.total(failures, |n| {
                    tracing::warn!("cannot read the ClusterNetworkPolicy tiers' flow counters ({n} failed reads): {e}")
                });
            }
        }
        tokio::time::sleep(DUMP_PERIOD).await;
    }
}

/// The rules' `conj_id` flows of the four tier tables (their cookie's kind says so): the
/// switch leaves out the clause flows, hundreds of thousands at scale, whose counters say
/// nothing of a verdict.
async fn dump_tiers(switch: &SwitchHandle) -> Result<Vec<FlowStats>, SwitchError> {
    let rules = CookieFilter { cookie: cookie::cookie(Kind::Rule, 0), mask: !cookie::payload_mask() };
    let dumps =
        futures::future::try_join_all(TIER_TABLES.map(|t| switch.dump_flows_with_cookie(Some(t), rules))).await?;
    Ok(dumps.into_iter().flatten().collect())
}
