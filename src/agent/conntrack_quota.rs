//! Each local pod's share of the datapath's conntrack table: the pipeline tracks every
//! connection a local pod opens in that pod's zone too, the node's own connections into pods
//! in the node's zone and those from beyond the node in the inbound zone (ConntrackCommit and
//! ConntrackQuota), and this module sets each zone's limit through ovs-vswitchd's control
//! socket (`dpctl/ct-set-limits`), before the pod's flows are installed (the node's two zones
//! once the bridge has a gateway or uplink); when the pod goes, its limit is deleted and its
//! zone flushed, after its flows are.
//!
//! The limits live in ovs-vswitchd only (OVS 3.1 keeps none in OVSDB): they are set again
//! after every reconnection to the switch and every [`RESYNC`]. When the socket cannot be
//! reached, policy is enforced as ever (the quota zones then have no limit), a warning says
//! so and `npagent_conntrack_pods_unbounded` counts the pods concerned.

use crate::admin::metrics::AgentMetrics;
use crate::compiler::tables::{quota_zone, INBOUND_ZONE, NODE_ZONE};
use crate::rate_limited::RateLimitedWarning;
use crate::source::ovsdb::db::BridgePorts;
use crate::switch::unixctl::{self, UnixctlError};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often the limits are set again (ovs-vswitchd forgets them when it restarts).
pub const RESYNC: Duration = Duration::from_secs(30);
/// Least time between two attempts after a failure.
const RETRY: Duration = Duration::from_secs(5);
/// How long one command may take.
const TIMEOUT: Duration = Duration::from_secs(2);
/// The per-pod limit when `--conntrack-pod-limit` is not given: this fraction of the
/// datapath's `dpctl/ct-get-maxconns`, so that ten zones at their limit fill the table (each
/// connection takes two entries: one in its owner's zone, one in npagent's)...
pub const AUTO_FRACTION: u32 = 20;
/// Entries of the datapath's table each connection takes: its owner's zone and npagent's.
pub const ENTRIES_PER_CONNECTION: u64 = 2;
/// ...or this many where the datapath does not say (the Linux kernel's).
pub const AUTO_FALLBACK: u32 = 65_536;

/// What `--conntrack-pod-limit` asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodLimit {
    /// No limits: those of the pods' zones are deleted.
    Off,
    /// A twentieth of the datapath's maximum ([`AUTO_FRACTION`], [`AUTO_FALLBACK`]).
    Auto,
    /// This many entries per pod.
    Fixed(u32),
}

impl PodLimit {
    /// The flag's value: none is [`PodLimit::Auto`], 0 is [`PodLimit::Off`].
    pub fn from_flag(flag: Option<u32>) -> PodLimit {
        match flag {
            None => PodLimit::Auto,
            Some(0) => PodLimit::Off,
            Some(n) => PodLimit::Fixed(n),
        }
    }
}

/// Where the control socket is and what limit each pod gets.
#[derive(Debug, Clone)]
pub struct QuotaConfig {
    /// ovs-vswitchd's control socket, or its pidfile ([`unixctl::socket_path`]).
    pub target: PathBuf,
    pub limit: PodLimit,
}

/// The zone limits npagent wants and what it knows ovs-vswitchd holds.
#[derive(Debug)]
pub struct ConntrackQuota {
    cfg: QuotaConfig,
    /// The limit per zone, once known (`Auto` asks the datapath); `Some(0)` when off.
    limit: Option<u32>,
    /// The datapath's table size (`dpctl/ct-get-maxconns`), once asked; `None` where it does
    /// not say.
    maxconns: Option<Option<u32>>,
    /// The most zones a warning told could fill the table together.
    warned_zones: usize,
    /// The zones of the local pods.
    zones: BTreeSet<u16>,
    /// Zones whose limit (or its absence, when off) is set since the last resync.
    applied: BTreeSet<u16>,
    /// Zones of pods that went: their limits to delete and entries to flush.
    released: BTreeSet<u16>,
    next_resync: Instant,
    not_before: Option<Instant>,
    failing: bool,
    warning: RateLimitedWarning,
    metrics: Arc<AgentMetrics>,
}

impl ConntrackQuota {
    /// Nothing is sent before [`apply`](Self::apply).
    pub fn new(cfg: QuotaConfig, metrics: Arc<AgentMetrics>) -> ConntrackQuota {
        let limit = match cfg.limit {
            PodLimit::Off => Some(0),
            PodLimit::Fixed(n) => Some(n),
            PodLimit::Auto => None,
        };
        ConntrackQuota {
            cfg,
            limit,
            maxconns: None,
            warned_zones: 0,
            zones: BTreeSet::new(),
            applied: BTreeSet::new(),
            released: BTreeSet::new(),
            next_resync: Instant::now() + RESYNC,
            not_before: None,
            failing: false,
            warning: RateLimitedWarning::default(),
            metrics,
        }
    }

    /// The bridge's pods now: new ones get a limit at the next [`apply`](Self::apply), the
    /// zones of those that went are released at the next [`release`](Self::release).
    pub fn set_ports(&mut self, ports: &BridgePorts) {
        let mut zones: BTreeSet<u16> = ports.pods.iter().filter_map(|p| quota_zone(p.ofport)).collect();
        // Connections into pods from the node and from beyond it have zones of their own.
        if ports.gateway.is_some() || !ports.uplinks.is_empty() {
            zones.extend([NODE_ZONE, INBOUND_ZONE]);
        }
        for gone in self.zones.difference(&zones) {
            self.released.insert(*gone);
            self.applied.remove(gone);
        }
        for back in &zones {
            self.released.remove(back);
        }
        self.zones = zones;
        self.report();
    }

    /// Sets every limit again at the next [`apply`](Self::apply) (a new connection to the
    /// switch may be a restarted ovs-vswitchd, which forgot them).
    pub fn resync(&mut self) {
        self.applied.clear();
        self.not_before = None;
        self.report();
    }

    /// Sets the limits of the zones that have none yet (call before the flows are sent).
    pub async fn apply(&mut self) {
        let now = Instant::now();
        if now >= self.next_resync {
            self.next_resync = now + RESYNC;
            self.applied.clear();
        }
        if self.applied.len() == self.zones.len() || self.not_before.is_some_and(|t| now < t) {
            return;
        }
        let outcome = self.try_apply().await;
        self.outcome(outcome);
    }

    async fn try_apply(&mut self) -> Result<(), UnixctlError> {
        let maxconns = match self.maxconns {
            Some(known) => known,
            // Off: nothing to size.
            None if self.limit == Some(0) => None,
            None => {
                let asked = self.ask_maxconns().await?;
                self.maxconns = Some(asked);
                asked
            }
        };
        let limit = match self.limit {
            Some(l) => l,
            None => {
                let l = maxconns.map_or(AUTO_FALLBACK, |max| (max / AUTO_FRACTION).max(1));
                tracing::info!("conntrack: each pod's zone holds at most {l} connections (--conntrack-pod-limit)");
                self.limit = Some(l);
                l
            }
        };
        let todo: Vec<u16> = self.zones.difference(&self.applied).copied().collect();
        if todo.is_empty() {
            return Ok(());
        }
        if limit == 0 {
            // A zone without a limit entry is unbounded (a limit of 0 would refuse every
            // connection in the userspace datapath).
            self.call("dpctl/ct-del-limits", vec![zone_list(&todo)]).await?;
        } else {
            let params = todo.iter().map(|z| format!("zone={z},limit={limit}")).collect();
            self.call("dpctl/ct-set-limits", params).await?;
        }
        self.applied.extend(todo);
        self.warn_if_overcommitted();
        Ok(())
    }

    /// The datapath's table size, or `None` where it has none to say (the Linux kernel's).
    async fn ask_maxconns(&self) -> Result<Option<u32>, UnixctlError> {
        match self.call("dpctl/ct-get-maxconns", vec![]).await {
            Ok(text) => match text.trim().parse::<u32>() {
                Ok(max) => Ok(Some(max)),
                Err(_) => Err(UnixctlError::Malformed(format!("dpctl/ct-get-maxconns answered {:?}", text.trim()))),
            },
            Err(UnixctlError::Refused { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Warns when the zones at their limit could fill the datapath's table together: at
    /// start, and again each time zones are added past the last warning.
    fn warn_if_overcommitted(&mut self) {
        let (Some(limit), Some(Some(max))) = (self.limit, self.maxconns) else { return };
        let zones = self.zones.len();
        let entries =
            u64::try_from(zones).unwrap_or(u64::MAX).saturating_mul(u64::from(limit)) * ENTRIES_PER_CONNECTION;
        if limit == 0 || entries <= u64::from(max) || zones <= self.warned_zones {
            return;
        }
        self.warned_zones = zones;
        tracing::warn!(
            "conntrack: {zones} zones × {limit} connections × {ENTRIES_PER_CONNECTION} entries = {entries} exceed the \
             datapath's table of {max} (dpctl/ct-get-maxconns): pods at their limit together can fill it, and then \
             no pod opens a connection; lower --conntrack-pod-limit or raise dpctl/ct-set-maxconns"
        );
    }

    /// Deletes the limits of the zones of pods that went and flushes them (call after their
    /// flows are gone), so that a new pod on the same port starts empty.
    pub async fn release(&mut self) {
        if self.released.is_empty() || self.not_before.is_some_and(|t| Instant::now() < t) {
            return;
        }
        let outcome = self.try_release().await;
        self.outcome(outcome);
    }

    async fn try_release(&mut self) -> Result<(), UnixctlError> {
        let zones: Vec<u16> = self.released.iter().copied().collect();
        match self.call("dpctl/ct-del-limits", vec![zone_list(&zones)]).await {
            Ok(_) | Err(UnixctlError::Refused { .. }) => {}
            Err(e) => return Err(e),
        }
        for z in zones {
            self.call("dpctl/flush-conntrack", vec![format!("zone={z}")]).await?;
            self.released.remove(&z);
        }
        Ok(())
    }

    async fn call(&self, method: &str, params: Vec<String>) -> Result<String, UnixctlError> {
        unixctl::call(&self.cfg.target, method, &params, TIMEOUT).await
    }

    fn outcome(&mut self, outcome: Result<(), UnixctlError>) {
        match outcome {
            Ok(()) => {
                if std::mem::take(&mut self.failing) {
                    tracing::info!("conntrack: the pods' zone limits are set again");
                }
                self.not_before = None;
            }
            Err(e) => {
                self.failing = true;
                self.not_before = Some(Instant::now() + RETRY);
                self.metrics.conntrack_limit_errors.inc();
                let total = self.metrics.conntrack_limit_errors.get();
                let unbounded = self.unbounded();
                self.warning.total(total, |_| {
                    tracing::warn!(
                        "conntrack: cannot set the pods' zone limits ({unbounded} pods unbounded): {e}; policy is \
                         enforced as ever, but one pod can fill the conntrack table (retrying; see --vswitchd-ctl)"
                    )
                });
            }
        }
        self.report();
    }

    fn unbounded(&self) -> usize {
        if self.limit == Some(0) {
            0
        } else {
            // The pods' zones (the node's two are no pod's).
            self.zones.difference(&self.applied).filter(|z| quota_zone(u32::from(**z)).is_some()).count()
        }
    }

    fn report(&self) {
        self.metrics.conntrack_pod_limit.set(i64::from(self.limit.unwrap_or(0)));
        self.metrics.conntrack_pods_unbounded.set(i64::try_from(self.unbounded()).unwrap_or(i64::MAX));
    }
}

/// `zone=1,2,3`, as `dpctl/ct-del-limits` takes zones.
fn zone_list(zones: &[u16]) -> String {
    let list: Vec<String> = zones.iter().map(u16::to_string).collect();
    format!("zone={}", list.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{LocalPort, ObjectRef};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn ports(ofports: &[u32]) -> BridgePorts {
        let pods = ofports
            .iter()
            .map(|&ofport| LocalPort {
                ofport,
                interface: format!("p{ofport}"),
                pod: ObjectRef { namespace: "x".into(), name: format!("p{ofport}").as_str().into() },
                ips: vec![],
                mac: None,
            })
            .collect();
        BridgePorts { pods, ..Default::default() }
    }

    /// A fake ovs-vswitchd: answers each command with `answer(method, params)`, records them.
    fn fake_vswitchd(
        dir: &std::path::Path,
        answer: fn(&str) -> Result<&'static str, &'static str>,
    ) -> (PathBuf, Arc<std::sync::Mutex<Vec<String>>>) {
        let path = dir.join("ctl");
        let listener = tokio::net::UnixListener::bind(&path).unwrap();
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = Arc::clone(&seen);
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                let mut buf = vec![0u8; 65536];
                let n = s.read(&mut buf).await.unwrap();
                let req: serde_json::Value = serde_json::from_slice(&buf[..n]).unwrap();
                let method = req["method"].as_str().unwrap().to_string();
                let params: Vec<String> =
                    req["params"].as_array().unwrap().iter().map(|p| p.as_str().unwrap().to_string()).collect();
                log.lock().unwrap().push(format!("{method} {}", params.join(" ")).trim_end().to_string());
                let reply = match answer(&method) {
                    Ok(r) => serde_json::json!({"id": req["id"], "result": r, "error": null}),
                    Err(e) => serde_json::json!({"id": req["id"], "result": null, "error": e}),
                };
                s.write_all(reply.to_string().as_bytes()).await.unwrap();
            }
        });
        (path, seen)
    }

    #[tokio::test]
    async fn new_pods_get_limits_and_gone_pods_are_released_and_flushed() {
        let dir = tempfile::tempdir().unwrap();
        let (target, seen) =
            fake_vswitchd(dir.path(), |m| if m == "dpctl/ct-get-maxconns" { Ok("3000000\n") } else { Ok("") });
        let metrics = Arc::new(AgentMetrics::default());
        let mut q = ConntrackQuota::new(QuotaConfig { target, limit: PodLimit::Auto }, Arc::clone(&metrics));
        q.set_ports(&ports(&[1, 2]));
        assert_eq!(metrics.conntrack_pods_unbounded.get(), 2);
        q.apply().await;
        q.apply().await; // nothing new: nothing sent
        q.set_ports(&ports(&[2, 3]));
        q.apply().await;
        q.release().await;
        q.release().await;
        assert_eq!(
            *seen.lock().unwrap(),
            [
                "dpctl/ct-get-maxconns",
                "dpctl/ct-set-limits zone=1,limit=150000 zone=2,limit=150000",
                "dpctl/ct-set-limits zone=3,limit=150000",
                "dpctl/ct-del-limits zone=1",
                "dpctl/flush-conntrack zone=1",
            ]
        );
        assert_eq!(metrics.conntrack_pod_limit.get(), 150_000);
        assert_eq!(metrics.conntrack_pods_unbounded.get(), 0);
        q.resync();
        q.apply().await;
        assert_eq!(seen.lock().unwrap().last().unwrap(), "dpctl/ct-set-limits zone=2,limit=150000 zone=3,limit=150000");
    }

    #[tokio::test]
    async fn off_deletes_limits_and_a_refusing_datapath_gets_the_fallback() {
        let dir = tempfile::tempdir().unwrap();
        let (target, seen) = fake_vswitchd(dir.path(), |m| {
            if m == "dpctl/ct-get-maxconns" {
                Err("ct-get-maxconns: Operation not supported")
            } else {
                Ok("")
            }
        });
        let metrics = Arc::new(AgentMetrics::default());
        let mut off =
            ConntrackQuota::new(QuotaConfig { target: target.clone(), limit: PodLimit::Off }, Arc::clone(&metrics));
        off.set_ports(&ports(&[4, 5]));
        off.apply().await;
        let mut auto = ConntrackQuota::new(QuotaConfig { target, limit: PodLimit::Auto }, Arc::clone(&metrics));
        auto.set_ports(&ports(&[6]));
        auto.apply().await;
        assert_eq!(
            *seen.lock().unwrap(),
            ["dpctl/ct-del-limits zone=4,5", "dpctl/ct-get-maxconns", "dpctl/ct-set-limits zone=6,limit=65536"]
        );
    }

    #[tokio::test]
    async fn an_unreachable_socket_is_counted_and_retried_later() {
        let dir = tempfile::tempdir().unwrap();
        let metrics = Arc::new(AgentMetrics::default());
        let cfg = QuotaConfig { target: dir.path().join("absent.ctl"), limit: PodLimit::Fixed(100) };
        let mut q = ConntrackQuota::new(cfg, Arc::clone(&metrics));
        q.set_ports(&ports(&[1, 2, 3]));
        q.apply().await;
        q.apply().await; // within the retry delay: not tried again
        assert_eq!(metrics.conntrack_limit_errors.get(), 1);
        assert_eq!(metrics.conntrack_pods_unbounded.get(), 3);
        assert_eq!(metrics.conntrack_pod_limit.get(), 100);
    }

    #[test]
    fn the_flag_reads_none_as_auto_and_zero_as_off() {
        assert_eq!(PodLimit::from_flag(None), PodLimit::Auto);
        assert_eq!(PodLimit::from_flag(Some(0)), PodLimit::Off);
        assert_eq!(PodLimit::from_flag(Some(7)), PodLimit::Fixed(7));
    }
}
