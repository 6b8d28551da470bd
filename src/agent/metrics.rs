//! Counters of the agent's own work, and the Prometheus text endpoint (`--metrics-addr`).
//!
//! The endpoint is a minimal HTTP/1.1 responder: every request gets the page and the
//! connection is closed. It must outlive whatever clients do: at most [`MAX_CONNECTIONS`] are
//! served at once (more are refused at once and counted), each has [`READ_TIMEOUT`] to send its
//! request and [`CONNECTION_TIMEOUT`] in all, and an accept error (EMFILE, ECONNABORTED) is
//! counted, reported at most once a minute and retried after a short backoff.

use super::RateLimitedWarning;
use crate::audit::AuditStats;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

/// Connections served at once; more are refused.
pub const MAX_CONNECTIONS: usize = 64;
/// How long a client has to send its request before it is answered anyway.
pub const READ_TIMEOUT: Duration = Duration::from_secs(2);
/// How long one connection may take in all, the answer included.
pub const CONNECTION_TIMEOUT: Duration = Duration::from_secs(5);
/// First and longest pause after a failed accept (doubling in between).
const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(5);
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// What the reconciler and the switch side count.
#[derive(Debug, Default)]
pub struct AgentMetrics {
    pub flow_mods_add: AtomicU64,
    pub flow_mods_modify: AtomicU64,
    pub flow_mods_delete: AtomicU64,
    pub bundles_committed: AtomicU64,
    pub bundles_failed: AtomicU64,
    /// Flow_mods the switch refused (set aside and retried with backoff).
    pub flow_mods_rejected: AtomicU64,
    /// Sum of bundle commit latencies, microseconds.
    pub bundle_latency_us_sum: AtomicU64,
    pub reconnects: AtomicU64,
    pub packet_in_dropped_by_connection: AtomicU64,
    /// Packet-ins the switch connection's strict parser rejected.
    pub packet_in_malformed: AtomicU64,
    /// Packets the switch's meter dropped on their way to npagent (meter band stats).
    pub shed_by_meter: AtomicU64,
    /// Desired flows per table name.
    pub flows_per_table: Mutex<Vec<(String, u64)>>,
    /// Failed accepts on the metrics endpoint.
    pub metrics_accept_errors: AtomicU64,
    /// Metrics connections refused because [`MAX_CONNECTIONS`] were being served.
    pub metrics_connections_refused: AtomicU64,
}

/// Writes one metric family: help, type, and its samples (what follows the name: a suffix such
/// as `_sum` and/or `{labels}`; value).
fn family(out: &mut String, name: &str, kind: &str, help: &str, samples: &[(String, String)]) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
    for (labels, value) in samples {
        let _ = writeln!(out, "{name}{labels} {value}");
    }
}

/// One unlabelled sample.
fn single(value: u64) -> [(String, String); 1] {
    [(String::new(), value.to_string())]
}

/// Renders all counters as Prometheus text.
pub fn render(agent: &AgentMetrics, audit: &AuditStats) -> String {
    let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
    let mut out = String::new();
    let tables: Vec<(String, String)> = agent
        .flows_per_table
        .lock()
        .map(|t| t.iter().map(|(name, n)| (format!("{{table=\"{name}\"}}"), n.to_string())).collect())
        .unwrap_or_default();
    family(&mut out, "npagent_flows", "gauge", "Desired flows per table.", &tables);
    let mods: Vec<(String, String)> =
        [("add", &agent.flow_mods_add), ("modify", &agent.flow_mods_modify), ("delete", &agent.flow_mods_delete)]
            .iter()
            .map(|(kind, c)| (format!("{{kind=\"{kind}\"}}"), get(c).to_string()))
            .collect();
    family(&mut out, "npagent_flow_mods_total", "counter", "Flow_mods sent, by kind.", &mods);
    family(&mut out, "npagent_bundles_committed_total", "counter", "Bundles committed.", &single(get(&agent.bundles_committed)));
    family(&mut out, "npagent_bundles_failed_total", "counter", "Bundles the switch refused.", &single(get(&agent.bundles_failed)));
    family(&mut out, "npagent_flow_mods_rejected_total", "counter", "Flow_mods the switch refused (retried with backoff).", &single(get(&agent.flow_mods_rejected)));
    let us = get(&agent.bundle_latency_us_sum);
    family(
        &mut out,
        "npagent_bundle_commit_seconds",
        "summary",
        "Time from sending a bundle to its commit reply.",
        &[
            ("_sum".into(), format!("{}.{:06}", us / 1_000_000, us % 1_000_000)),
            ("_count".into(), get(&agent.bundles_committed).to_string()),
        ],
    );
    let snap = audit.snapshot();
    let counters = [
        ("npagent_switch_reconnects_total", "Connections to the switch after the first.", get(&agent.reconnects)),
        (
            "npagent_packet_ins_received_total",
            "Packet-ins received from the switch: decoded, undecodable, unresolved or shed.",
            snap.packet_ins + get(&agent.packet_in_dropped_by_connection) + get(&agent.packet_in_malformed),
        ),
        ("npagent_packet_ins_decoded_total", "Packet-ins decoded into audit entries.", snap.decoded),
        (
            "npagent_packet_ins_undecodable_total",
            "Packet-ins that could not be decoded (the message, its userdata or its frame).",
            snap.undecodable + get(&agent.packet_in_malformed),
        ),
        (
            "npagent_packet_ins_unresolved_total",
            "Packet-ins of an Allow rule npagent no longer knows (deleted beyond the grace period).",
            snap.unresolved,
        ),
        ("npagent_audit_entries_written_total", "Audit log lines written.", snap.entries_written),
        ("npagent_audit_write_errors_total", "Failed writes to the audit log.", snap.write_errors),
        ("npagent_audit_lines_discarded_total", "Audit lines discarded while the log was unwritable.", snap.lines_discarded),
        ("npagent_audit_shed_by_meter_total", "Logging packets the switch's meter dropped.", get(&agent.shed_by_meter)),
        (
            "npagent_audit_shed_by_queue_total",
            "Packet-ins shed because npagent's queues were full (or the audit logger had stopped).",
            snap.shed_by_queue + get(&agent.packet_in_dropped_by_connection),
        ),
        (
            "npagent_metrics_accept_errors_total",
            "Failed accepts on the metrics endpoint.",
            get(&agent.metrics_accept_errors),
        ),
        (
            "npagent_metrics_connections_refused_total",
            "Metrics connections refused because the endpoint was serving its maximum.",
            get(&agent.metrics_connections_refused),
        ),
    ];
    for (name, help, value) in counters {
        family(&mut out, name, "counter", help, &single(value));
    }
    out
}

/// Serves the metrics as Prometheus text on every HTTP request to `addr`. Returns only when
/// `addr` cannot be bound.
pub async fn serve(addr: SocketAddr, agent: Arc<AgentMetrics>, audit: Arc<AuditStats>) -> std::io::Result<()> {
    let listener = TcpListener::bind(addr).await?;
    tracing::info!("metrics on http://{}/metrics", listener.local_addr()?);
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let mut backoff = ACCEPT_BACKOFF_MIN;
    let mut accept_warning = RateLimitedWarning::default();
    loop {
        let sock = match listener.accept().await {
            Ok((sock, _)) => sock,
            Err(e) => {
                let errors = agent.metrics_accept_errors.fetch_add(1, Ordering::Relaxed) + 1;
                accept_warning.total(errors, |n| {
                    tracing::warn!("metrics endpoint: accept failed: {e} ({n} failures so far); retrying")
                });
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(ACCEPT_BACKOFF_MAX);
                continue;
            }
        };
        backoff = ACCEPT_BACKOFF_MIN;
        match Arc::clone(&slots).try_acquire_owned() {
            Ok(slot) => {
                let body = render(&agent, &audit);
                tokio::spawn(async move {
                    let _ = tokio::time::timeout(CONNECTION_TIMEOUT, answer(sock, &body)).await;
                    drop(slot);
                });
            }
            Err(_) => {
                // Closed at once: the client sees a reset and retries at its next scrape.
                agent.metrics_connections_refused.fetch_add(1, Ordering::Relaxed);
                drop(sock);
            }
        }
    }
}

/// Reads the request head (one read, bounded) and answers with `body`; any path gets it.
async fn answer(mut sock: TcpStream, body: &str) {
    let mut buf = [0u8; 2048];
    let _ = tokio::time::timeout(READ_TIMEOUT, sock.read(&mut buf)).await;
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = sock.write_all(head.as_bytes()).await;
    let _ = sock.write_all(body.as_bytes()).await;
    let _ = sock.shutdown().await;
}
