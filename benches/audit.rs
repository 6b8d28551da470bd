//! Packet-in to audit line: decode, resolve, dedup, format and buffered write.
//!
//! `cargo bench --bench audit`. The `*_chained_file` cases write with `--audit-chain` (one
//! SHA-256 and one sidecar record per line); their unchained twins are the baseline. Throughput is in packet-ins (elements) per second of CPU time
//! of the benchmark thread (user + system, from /proc/thread-self/schedstat), i.e. per core:
//! wall time would also count the time other processes take the core from it. Where that
//! file cannot be read, wall time is used.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

#[path = "../tests/audit_support/mod.rs"]
mod audit_support;

use audit_support::{obj, packet_in, FakeResolver};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use npagent::audit::writer::{RotatingWriter, WriterConfig};
use npagent::audit::{AuditConfig, AuditStats, Format, LineSink, Moment, Pipeline, RuleMeta};
use npagent::compiler::tables;
use npagent::compiler::userdata::Disposition;
use ofp::packet_in2::PacketIn2;
use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// CPU time of the calling thread, or wall time where the kernel does not tell.
enum CpuClock {
    Cpu(u64),
    Wall(Instant),
}

fn thread_cpu_ns() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    text.split_whitespace().next()?.parse().ok()
}

impl CpuClock {
    fn start() -> CpuClock {
        match thread_cpu_ns() {
            Some(ns) => CpuClock::Cpu(ns),
            None => CpuClock::Wall(Instant::now()),
        }
    }

    fn elapsed(&self) -> Duration {
        match self {
            CpuClock::Cpu(start) => Duration::from_nanos(thread_cpu_ns().unwrap_or(*start).saturating_sub(*start)),
            CpuClock::Wall(start) => start.elapsed(),
        }
    }
}

/// 1,000 rules, 200 local pods, 5,000 pods in the model.
fn resolver() -> FakeResolver {
    let mut r = FakeResolver::default();
    for id in 0..1_000u32 {
        let policy = obj(&format!("team-{}", id % 50), &format!("allow-frontend-to-backend-{id}"));
        let table = npagent::compiler::tables::INGRESS_RULE;
        r.rules.insert(id, RuleMeta { policy, rule_name: None, priority: 190, log_label: None, table, cluster: None });
    }
    for i in 0..5_000u32 {
        let pod = obj(&format!("team-{}", i % 50), &format!("backend-7d9f8c6b5-{i:05}"));
        r.ips.insert(IpAddr::V4(Ipv4Addr::from(0x0a0a_0000 + i)), pod.clone());
        if i < 200 {
            r.ports.insert(i + 10, pod);
        }
    }
    r
}

/// An Ethernet/IPv4/TCP SYN (with options, 74 bytes on the wire).
fn syn(src: u32, dst: u32, sport: u16, dport: u16) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2, 0x08, 0x00];
    f.extend_from_slice(&[0x45, 0, 0, 60, 0x12, 0x34, 0x40, 0, 64, 6, 0, 0]);
    f.extend_from_slice(&src.to_be_bytes());
    f.extend_from_slice(&dst.to_be_bytes());
    f.extend_from_slice(&sport.to_be_bytes());
    f.extend_from_slice(&dport.to_be_bytes());
    f.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0xa0, 0x02, 0xfa, 0xf0, 0, 0, 0, 0]);
    f.extend_from_slice(&[2, 4, 5, 0xb4, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0, 1, 3, 3, 7]);
    f
}

/// Distinct new connections allowed by many rules: every packet-in becomes a line.
fn allows() -> Vec<PacketIn2> {
    (0..4_096u32)
        .map(|i| {
            let frame = syn(0x0a0a_0000 + 200 + i % 4_000, 0x0a0a_0000 + i % 200, 30_000 + i as u16, 8080);
            packet_in(frame, Disposition::Allow, tables::INGRESS_RULE, i % 1_000)
        })
        .collect()
}

/// A SYN flood retried against isolated pods: 64 distinct default drops, aggregated.
fn drops() -> Vec<PacketIn2> {
    (0..4_096u32)
        .map(|i| {
            let k = i % 64;
            let frame = syn(0x0a0a_1000 + k, 0x0a0a_0000 + k, 40_000 + k as u16, 80);
            packet_in(frame, Disposition::Drop, tables::INGRESS_DEFAULT_RULE, 10 + k)
        })
        .collect()
}

fn file_writer(dir: &std::path::Path, name: &str) -> RotatingWriter {
    RotatingWriter::new(file_config(dir, name))
}

/// The same writer with `--audit-chain`: a SHA-256 and a sidecar record per line.
fn chained_writer(dir: &std::path::Path, name: &str) -> RotatingWriter {
    RotatingWriter::chained(file_config(dir, name))
}

fn file_config(dir: &std::path::Path, name: &str) -> WriterConfig {
    WriterConfig {
        path: dir.join(name),
        // Bounded disk use over a long run; compression off so a background gzip does not
        // share the measured core.
        max_size: 64 * 1024 * 1024,
        max_backups: 1,
        max_age: None,
        compress: false,
        ..WriterConfig::default()
    }
}

fn run<W: LineSink>(c: &mut Criterion, name: &str, format: Format, packet_ins: &[PacketIn2], sink: W) {
    let cfg = AuditConfig { format, node: "node-1".into(), ..AuditConfig::default() };
    let stats = Arc::new(AuditStats::default());
    let mut p = Pipeline::new(&cfg, Arc::new(resolver()), sink, stats);
    let mut group = c.benchmark_group("audit");
    group.throughput(Throughput::Elements(packet_ins.len() as u64));
    group.bench_function(name, |b| {
        b.iter_custom(|iters| {
            let clock = CpuClock::start();
            for _ in 0..iters {
                for pi in packet_ins {
                    let _ = black_box(p.handle(pi, Moment::now()));
                }
                p.tick(Moment::now());
                let _ = p.flush();
            }
            clock.elapsed()
        })
    });
    group.finish();
    let later = Moment::now();
    let _ = p.shutdown(Moment { wall: later.wall + Duration::from_secs(2), mono: later.mono + Duration::from_secs(2) });
}

fn benches(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let allows = allows();
    let drops = drops();
    run(c, "allow_antrea_to_file", Format::Antrea, &allows, file_writer(dir.path(), "antrea.log"));
    run(c, "allow_antrea_to_chained_file", Format::Antrea, &allows, chained_writer(dir.path(), "chained.log"));
    run(c, "allow_json_to_file", Format::Json, &allows, file_writer(dir.path(), "json.log"));
    run(c, "allow_json_to_chained_file", Format::Json, &allows, chained_writer(dir.path(), "chained-json.log"));
    run(c, "allow_antrea_to_sink", Format::Antrea, &allows, std::io::sink());
    run(c, "drop_flood_antrea_to_file", Format::Antrea, &drops, file_writer(dir.path(), "drops.log"));
}

criterion_group! {
    name = audit;
    config = Criterion::default().measurement_time(Duration::from_secs(5)).warm_up_time(Duration::from_secs(1));
    targets = benches
}
criterion_main!(audit);
