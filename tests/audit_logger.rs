//! The audit logger task end to end: packet-ins in, np.log lines out, counters, shutdown.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

mod audit_support;

use audit_support::*;
use npagent::admin::metrics::{registry, render, AgentMetrics};
use npagent::audit::writer::WriterConfig;
use npagent::audit::{AuditConfig, AuditLogger, AuditStats, Format, Pipeline};
use npagent::compiler::tables;
use npagent::compiler::userdata::Disposition;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

fn config(path: &std::path::Path, window: Duration) -> AuditConfig {
    AuditConfig {
        dedup_window: window,
        node: "node-1".into(),
        writer: WriterConfig { path: path.to_path_buf(), ..WriterConfig::default() },
        tick: Duration::from_millis(20),
        ..AuditConfig::default()
    }
}

async fn wait_for(mut cond: impl FnMut() -> bool) {
    for _ in 0..500 {
        if cond() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("condition not met in 5 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lines_are_written_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("networkpolicy/np.log");
    let logger = AuditLogger::spawn(config(&path, Duration::from_millis(200)), Arc::new(resolver()));
    let tx = logger.sender();
    let stats = logger.stats();
    assert!(tx.submit(allow_tcp_80()));
    for _ in 0..5 {
        assert!(tx.submit(drop_icmp()));
    }
    let mut garbage = allow_tcp_80();
    garbage.packet = garbage.packet.slice(..20);
    assert!(tx.submit(garbage));
    let mut foreign = allow_tcp_80();
    foreign.userdata = None;
    assert!(tx.submit(foreign));
    assert!(tx.submit(packet_in(
        ipv4("10.10.1.13", "10.10.1.7", TCP, &tcp(1, 80, false)),
        Disposition::Allow,
        tables::INGRESS_RULE,
        999
    )));

    // The Allow line appears at once; the drops after their window, aggregated.
    wait_for(|| std::fs::read_to_string(&path).is_ok_and(|t| t.lines().count() == 2)).await;
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].contains(" IngressRule K8sNetworkPolicy:default/allow-tcp-80 <nil> Ingress Allow 190 "),
        "{}",
        lines[0]
    );
    assert!(
        lines[1].contains(" IngressDefaultRule K8sNetworkPolicy <nil> Ingress Drop <nil> default/nettool "),
        "{}",
        lines[1]
    );
    assert!(lines[1].contains(" ICMP 84 <nil> [5 packets in "), "{}", lines[1]);

    let s = stats.snapshot();
    assert_eq!((s.packet_ins, s.decoded, s.undecodable, s.unresolved), (9, 6, 2, 1));
    assert_eq!((s.entries_written, s.write_errors, s.shed_by_queue), (2, 0, 0));
    logger.shutdown().await.unwrap();
}

/// The samples of a metrics page, by name.
fn samples(page: &str) -> BTreeMap<&str, u64> {
    page.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once(' '))
        .filter_map(|(k, v)| Some((k, v.parse().ok()?)))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_packet_in_not_audited_is_counted_on_the_metrics_page() {
    let dir = tempfile::tempdir().unwrap();
    let logger = AuditLogger::spawn(config(&dir.path().join("np.log"), Duration::ZERO), Arc::new(resolver()));
    let tx = logger.sender();
    let stats = logger.stats();
    tx.submit(allow_tcp_80());
    let mut cut = allow_tcp_80();
    cut.packet = cut.packet.slice(..30);
    let mut foreign = allow_tcp_80();
    foreign.userdata = None;
    let mut bad_userdata = allow_tcp_80();
    bad_userdata.userdata = Some(bytes::Bytes::from_static(&[1, 1]));
    for pi in [cut, foreign, bad_userdata] {
        tx.submit(pi);
    }
    tx.submit(packet_in(
        ipv4("10.10.1.13", "10.10.1.7", TCP, &tcp(1, 80, false)),
        Disposition::Allow,
        tables::INGRESS_RULE,
        999,
    ));
    logger.shutdown().await.unwrap();
    assert!(!tx.submit(allow_tcp_80()), "the logger has stopped");
    let agent = Arc::new(AgentMetrics::default());
    agent.packet_in_dropped_by_connection.store(2, std::sync::atomic::Ordering::Relaxed);

    let page = render(&registry(agent, stats));
    let m = samples(&page);
    let get = |k: &str| *m.get(k).unwrap_or_else(|| panic!("no {k} in {page}"));
    assert_eq!(get("npagent_packet_ins_decoded_total"), 1);
    assert_eq!(get("npagent_packet_ins_undecodable_total"), 3);
    assert_eq!(get("npagent_packet_ins_unresolved_total"), 1);
    assert_eq!(get("npagent_audit_shed_by_queue_total"), 3, "one after the stop, two by the connection");
    let accounted: u64 = ["npagent_packet_ins_decoded_total", "npagent_packet_ins_undecodable_total"]
        .into_iter()
        .chain(["npagent_packet_ins_unresolved_total", "npagent_audit_shed_by_queue_total"])
        .map(get)
        .sum();
    assert_eq!(get("npagent_packet_ins_received_total"), accounted, "every packet-in received is accounted for");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_writes_pending_aggregates_and_queued_packet_ins() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("np.log");
    let mut cfg = config(&path, Duration::from_secs(3600));
    cfg.format = Format::Json;
    let logger = AuditLogger::spawn(cfg, Arc::new(resolver()));
    let tx = logger.sender();
    for _ in 0..1000 {
        tx.submit(drop_icmp());
    }
    tx.submit(allow_tcp_80());
    logger.shutdown().await.unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let objs: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(objs.len(), 2, "{text}");
    let drop = objs.iter().find(|o| o["disposition"] == "Drop").unwrap();
    assert_eq!(drop["count"], 1000);
    assert_eq!(drop["node"], "node-1");
    assert!(!tx.submit(drop_icmp()), "the logger is gone");
}

#[test]
fn a_full_queue_sheds_and_counts() {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("np.log");
        let mut cfg = config(&path, Duration::from_secs(1));
        cfg.queue_capacity = 4;
        let logger = AuditLogger::spawn(cfg, Arc::new(resolver()));
        let tx = logger.sender();
        // On a current-thread runtime the task does not run until this one yields.
        let accepted = (0..10).filter(|_| tx.submit(allow_tcp_80())).count();
        assert_eq!(accepted, 4);
        let stats = logger.stats();
        logger.shutdown().await.unwrap();
        let s = stats.snapshot();
        // The four identical Allow copies: the first line at once, the three repeats in one
        // aggregate line at shutdown.
        assert_eq!((s.packet_ins, s.shed_by_queue, s.decoded, s.entries_written), (10, 6, 4, 2));
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 2, "{text}");
        assert!(
            text.lines().nth(1).is_some_and(|l| l.ends_with("[3 packets in 0s]") || l.contains("[3 packets in")),
            "{text}"
        );
    });
}

#[test]
fn write_errors_are_counted_and_writing_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let blocker = dir.path().join("networkpolicy");
    std::fs::write(&blocker, b"").unwrap();
    let path = blocker.join("np.log");
    let stats = Arc::new(AuditStats::default());
    let cfg = config(&path, Duration::from_secs(1));
    let sink = npagent::audit::RotatingWriter::new(cfg.writer.clone());
    let mut p = Pipeline::new(&cfg, Arc::new(resolver()), sink, Arc::clone(&stats));
    p.handle(&allow_tcp_80(), clocks(t_allow())).unwrap();
    assert!(p.flush().is_err());
    p.handle(&allow_tcp_80(), clocks(t_allow())).unwrap();
    assert!(p.flush().is_err());
    assert_eq!(stats.snapshot().write_errors, 2);
    std::fs::remove_file(&blocker).unwrap();
    p.handle(&drop_icmp(), clocks(t_drop())).unwrap();
    p.shutdown(clocks(t_drop() + Duration::from_millis(10))).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(text.lines().count(), 3, "{text}");
    assert_eq!(stats.snapshot().entries_written, 3);
    assert_eq!(stats.snapshot().lines_discarded, 0);
}
