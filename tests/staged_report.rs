//! `npagent staged report` on np.log text written here in the exact formats the audit log's
//! formatter gives staged lines (tests/audit_format.rs `staged_lines_in_every_format`): per
//! staged policy, the distinct connections with counts and first and last seen, from the live
//! file and a gzipped rotated backup, in human and JSON output; other lines are ignored. And
//! the report on a log the audit pipeline itself wrote from staged packet-ins, in every format.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

mod audit_support;

use audit_support::*;
use npagent::audit::staged_report::read_logs;
use npagent::audit::{AuditConfig, AuditStats, Direction, Format, LineDisposition, Pipeline};
use npagent::compiler::userdata::Disposition;
use std::io::Write;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// The backup (rotated at 2023-07-04 12:40): Antrea and antrea-v1 lines, staged and not (an
/// antrea-v1 line names no pod: its ends are addresses).
const BACKUP: &str = "\
2023/07/04 12:31:02.801442 StagedIngressDefaultRule StagedNetworkPolicy:default/deny-all,default/web-only <nil> Ingress WouldDrop <nil> default/nettool 10.10.1.13 57050 10.10.1.7 80 TCP 60 <nil>
2023/07/04 12:31:02.801442 IngressRule K8sNetworkPolicy:default/allow-tcp-80 <nil> Ingress Allow 190 default/nettool 10.10.1.13 57050 10.10.1.7 80 TCP 60 <nil>
2023/07/04 12:32:00.000000 StagedIngressDefaultRule StagedNetworkPolicy:default/deny-all <nil> Ingress WouldDrop <nil> default/nettool 10.10.1.13 57051 10.10.1.7 80 TCP 60 <nil> [3 packets in 2s]
2023/07/04 12:33:00.000000 StagedIngressRule StagedNetworkPolicy:default/allow-staged WouldAllow 190 10.10.1.13 57050 10.10.1.7 80 TCP 60
";

/// The live file: a JSON WouldAllow, a WouldDrop of another connection, a gap record, junk.
const LIVE: &str = r#"2023/07/04 12:41:00.000000 StagedIngressRule StagedNetworkPolicy:default/allow-staged from-client Ingress WouldAllow 190 default/nettool 10.10.1.13 57050 10.10.1.7 80 TCP 60 <nil>
{"time":"2023-07-04T12:42:00.000000000Z","node":"n1","table":"StagedIngressRule","direction":"Ingress","disposition":"WouldAllow","policy":{"kind":"StagedNetworkPolicy","namespace":"default","name":"allow-staged"},"rule":"from-client","priority":190,"applied_to":{"namespace":"default","pod":"nettool"},"source":{"ip":"10.10.1.13","port":57050,"namespace":"default","pod":"client"},"destination":{"ip":"10.10.1.7","port":80,"namespace":"default","pod":"nettool"},"protocol":"TCP","length":60,"log_label":null,"count":2,"first_seen":"2023-07-04T12:41:30.000000000Z","last_seen":"2023-07-04T12:42:00.000000000Z"}
2023/07/04 12:43:00.000000 StagedEgressDefaultRule StagedNetworkPolicy:default/deny-all <nil> Egress WouldDrop <nil> default/client 10.10.1.13 40000 10.20.0.5 53 UDP 60 <nil>
2023/07/04 12:44:00.000000 StagedIngressDefaultRule StagedNetworkPolicy:default/deny-all <nil> Ingress WouldDrop <nil> default/nettool 10.10.1.13 57052 10.10.1.7 notaport TCP 60 <nil>
"#;

fn log_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("np.log"), LIVE).expect("write np.log");
    let gz = std::fs::File::create(dir.path().join("np-2023-07-04T12-40-00.000.log.gz")).expect("backup");
    let mut enc = flate2::write::GzEncoder::new(gz, flate2::Compression::default());
    enc.write_all(BACKUP.as_bytes()).expect("gzip");
    enc.finish().expect("gzip");
    dir
}

fn report(args: &[&str]) -> (Option<i32>, String, String) {
    // `$NPA_AGENT_BIN` when set (a private copy when checkouts share one target directory).
    let bin = std::env::var_os("NPA_AGENT_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_npagent").into());
    let out = Command::new(bin).arg("staged").arg("report").args(args).output().expect("run");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_report_names_each_staged_policys_connections() {
    let dir = log_dir();
    let log = dir.path().join("np.log");
    let (code, out, err) = report(&["--audit-log", log.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert_eq!(
        out,
        "StagedNetworkPolicy default/allow-staged\n\
         \x20 WouldAllow 10.10.1.13 -> 10.10.1.7 TCP/80: 1 packet, first 2023-07-04T12:33:00.000000000Z, last 2023-07-04T12:33:00.000000000Z\n\
         \x20 WouldAllow 10.10.1.13 -> default/nettool TCP/80: 1 packet, first 2023-07-04T12:41:00.000000000Z, last 2023-07-04T12:41:00.000000000Z\n\
         \x20 WouldAllow default/client -> default/nettool TCP/80: 2 packets, first 2023-07-04T12:41:30.000000000Z, last 2023-07-04T12:42:00.000000000Z\n\
         StagedNetworkPolicy default/deny-all\n\
         \x20 WouldDrop  10.10.1.13 -> default/nettool TCP/80: 4 packets, first 2023-07-04T12:31:02.801442000Z, last 2023-07-04T12:32:00.000000000Z\n\
         \x20 WouldDrop  default/client -> 10.20.0.5 UDP/53: 1 packet, first 2023-07-04T12:43:00.000000000Z, last 2023-07-04T12:43:00.000000000Z\n\
         StagedNetworkPolicy default/web-only\n\
         \x20 WouldDrop  10.10.1.13 -> default/nettool TCP/80: 1 packet, first 2023-07-04T12:31:02.801442000Z, last 2023-07-04T12:31:02.801442000Z\n"
    );
    // The unreadable staged line is named, not fatal.
    assert!(err.contains("1 staged line(s) could not be read") && err.contains("np.log:4: port \"notaport\""), "{err}");

    let (code, out, _) = report(&["--audit-log", log.to_str().unwrap(), "-o", "json"]);
    assert_eq!(code, Some(0));
    let v: serde_json::Value = serde_json::from_str(out.trim()).expect("JSON");
    let rows = v.as_array().expect("rows");
    assert_eq!(rows.len(), 6);
    assert_eq!(
        rows[3],
        serde_json::json!({"policy": "default/deny-all", "disposition": "WouldDrop", "source": "10.10.1.13",
            "destination": "default/nettool", "protocol": "TCP", "port": 80, "packets": 4,
            "first_seen": "2023-07-04T12:31:02.801442000Z", "last_seen": "2023-07-04T12:32:00.000000000Z"})
    );
}

#[test]
fn since_keeps_recent_connections_and_errors_name_the_culprit() {
    let dir = log_dir();
    let log = dir.path().join("np.log");
    // 2023 is long ago: nothing is recent.
    let (code, out, _) = report(&["--audit-log", log.to_str().unwrap(), "--since", "24h"]);
    assert_eq!(code, Some(0));
    assert_eq!(out, "no staged verdicts (WouldDrop, WouldAllow) in the log\n");
    let missing = dir.path().join("missing/np.log");
    let (code, _, err) = report(&["--audit-log", missing.to_str().unwrap()]);
    assert_eq!(code, Some(2));
    assert!(err.contains(missing.parent().unwrap().to_str().unwrap()) || err.contains("missing"), "{err}");
    let (code, _, err) = report(&["--audit-log", log.to_str().unwrap(), "--since", "yesterday"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("--since"), "{err}");
}

/// The resolver of the audit format examples, with default/client on ofport 6 and the staged
/// default/deny-egress isolating its egress.
fn staged_resolver() -> FakeResolver {
    let mut r = resolver();
    r.ports.insert(6, obj("default", "client"));
    r.staged_isolating.insert((Direction::Egress, 6, Disposition::WouldDrop), vec![obj("default", "deny-egress")]);
    r
}

/// Staged packet-ins, and an Allow and a Drop, through the audit pipeline (its dedup, its
/// formatter) into `format`'s lines, the windows closed at `t0 + 2 s`.
fn written_log(format: Format, t0: SystemTime) -> String {
    let ms = Duration::from_millis;
    let cfg = AuditConfig { format, node: "n1".into(), ..AuditConfig::default() };
    let mut p = Pipeline::new(&cfg, Arc::new(staged_resolver()), Vec::<u8>::new(), Arc::new(AuditStats::default()));
    let syn = || ipv4("10.10.1.13", "10.10.1.7", TCP, &tcp(57050, 80, true));
    let packet_ins = [
        (0, would_drop_tcp_80()),
        (100, would_drop_tcp_80()),
        (200, would_drop_tcp_80()),
        (300, would_allow_tcp_80()),
        // By no rule: the staged edit of default/allow-tcp-80 ends nettool's isolation.
        (400, staged_packet_in(syn(), Disposition::WouldAllow, Direction::Ingress, 5, 0)),
        (
            500,
            staged_packet_in(
                ipv4("10.10.1.13", "10.20.0.5", UDP, &udp(40000, 53, 32)),
                Disposition::WouldDrop,
                Direction::Egress,
                6,
                0,
            ),
        ),
        (600, allow_tcp_80()),
        (700, drop_icmp()),
    ];
    for (after, pi) in &packet_ins {
        p.handle(pi, clocks(t0 + ms(*after))).expect("resolved");
    }
    p.tick(clocks(t0 + ms(2_000)));
    assert_eq!(p.pending(), 0);
    String::from_utf8(p.sink().clone()).expect("UTF-8")
}

/// Every staged line the audit log writes, in each format, is read back by the report: each
/// staged policy named, the connection (pods where the format names them), the packets, and
/// first and last seen (a text line's last seen is when it was written).
#[test]
fn the_report_reads_what_the_audit_pipeline_writes_in_every_format() {
    let t0 = t_allow();
    let at = |ms: u64| npagent::audit::timefmt::rfc3339_nanos(t0 + Duration::from_millis(ms));
    let written = at(2_000);
    for format in [Format::Antrea, Format::AntreaV1, Format::Json] {
        let text = written_log(format, t0);
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("np.log");
        std::fs::write(&log, &text).expect("write np.log");
        let report = read_logs(&[log], None).expect("read");
        assert_eq!((report.unreadable, report.first_unreadable.as_deref()), (0, None), "{format:?}:\n{text}");
        // (source, destination) of the ingress and of the egress connection.
        let (ingress, egress) = match format {
            Format::Antrea => (("10.10.1.13", "default/nettool"), ("default/client", "10.20.0.5")),
            Format::AntreaV1 => (("10.10.1.13", "10.10.1.7"), ("10.10.1.13", "10.20.0.5")),
            Format::Json => (("default/client", "default/nettool"), ("default/client", "10.20.0.5")),
        };
        // JSON keeps the first and last packets' times. A text line's last seen is its write,
        // and so is the first seen of a line of one packet (written at its window's end, with
        // no ` [N packets in D]` to go back by).
        let json = format == Format::Json;
        let last = |ms: u64| if json { at(ms) } else { written.clone() };
        let single = |ms: u64| (if json { at(ms) } else { written.clone() }, last(ms));
        let (tcp, udp) = (("TCP", Some(80)), ("UDP", Some(53)));
        let row = |policy, disposition, conn, proto, packets, (first, last)| {
            (policy, disposition, conn, proto, packets, first, last)
        };
        let want = vec![
            row("default/allow-staged", LineDisposition::WouldAllow, ingress, tcp, 1, single(300)),
            row("default/allow-tcp-80", LineDisposition::WouldAllow, ingress, tcp, 1, single(400)),
            row("default/deny-all", LineDisposition::WouldDrop, ingress, tcp, 3, (at(0), last(200))),
            row("default/deny-egress", LineDisposition::WouldDrop, egress, udp, 1, single(500)),
            row("default/web-only", LineDisposition::WouldDrop, ingress, tcp, 3, (at(0), last(200))),
        ];
        let got: Vec<_> = report
            .rows()
            .map(|((policy, disposition, c), seen)| {
                (
                    policy.as_str(),
                    *disposition,
                    (c.source.as_str(), c.destination.as_str()),
                    (c.protocol.as_str(), c.port),
                    seen.packets,
                    npagent::audit::timefmt::rfc3339_nanos(seen.first),
                    npagent::audit::timefmt::rfc3339_nanos(seen.last),
                )
            })
            .collect();
        assert_eq!(got, want, "{format:?}:\n{text}");
    }
}
