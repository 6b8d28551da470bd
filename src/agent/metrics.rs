//! Counters of the agent's own work, and the Prometheus text endpoint (`--metrics-addr`).

use crate::audit::AuditStats;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

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
    /// Packets the switch's meter dropped on their way to npagent (meter band stats).
    pub shed_by_meter: AtomicU64,
    /// Desired flows per table name.
    pub flows_per_table: Mutex<Vec<(String, u64)>>,
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
        ("npagent_packet_ins_received_total", "Packet-ins received from the switch.", snap.packet_ins),
        ("npagent_packet_ins_decoded_total", "Packet-ins decoded into audit entries.", snap.decoded),
        ("npagent_packet_ins_undecodable_total", "Packet-ins that could not be decoded.", snap.undecodable),
        ("npagent_audit_entries_written_total", "Audit log lines written.", snap.entries_written),
        ("npagent_audit_write_errors_total", "Failed writes to the audit log.", snap.write_errors),
        ("npagent_audit_lines_discarded_total", "Audit lines discarded while the log was unwritable.", snap.lines_discarded),
        ("npagent_audit_shed_by_meter_total", "Logging packets the switch's meter dropped.", get(&agent.shed_by_meter)),
        (
            "npagent_audit_shed_by_queue_total",
            "Packet-ins shed because npagent's queues were full.",
            snap.shed_by_queue + get(&agent.packet_in_dropped_by_connection),
        ),
    ];
    for (name, help, value) in counters {
        family(&mut out, name, "counter", help, &single(value));
    }
    out
}

/// Serves the metrics as Prometheus text on every HTTP request to `addr`.
pub async fn serve(addr: SocketAddr, agent: Arc<AgentMetrics>, audit: Arc<AuditStats>) -> std::io::Result<()> {
    let listener = TcpListener::bind(addr).await?;
    tracing::info!("metrics on http://{}/metrics", listener.local_addr()?);
    loop {
        let (mut sock, _) = listener.accept().await?;
        let body = render(&agent, &audit);
        tokio::spawn(async move {
            // Read the request head (bounded); any path answers with the metrics.
            let mut buf = [0u8; 2048];
            let _ = tokio::time::timeout(std::time::Duration::from_secs(2), sock.read(&mut buf)).await;
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = sock.write_all(head.as_bytes()).await;
            let _ = sock.write_all(body.as_bytes()).await;
            let _ = sock.shutdown().await;
        });
    }
}
