//! `npagent staged report` on np.log text written here in the exact formats the audit log's
//! formatter gives staged lines (tests/audit_format.rs `staged_lines_in_every_format`): per
//! staged policy, the distinct connections with counts and first and last seen, from the live
//! file and a gzipped rotated backup, in human and JSON output; other lines are ignored.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

use std::io::Write;
use std::process::Command;

/// The backup (rotated at 2023-07-04 12:40): Antrea and antrea-v1 lines, staged and not (an
/// antrea-v1 line names no pod: its ends are addresses).
const BACKUP: &str = "\
2023/07/04 12:31:02.801442 IngressDefaultRule StagedNetworkPolicy:default/deny-all,default/web-only <nil> Ingress WouldDrop <nil> default/nettool 10.10.1.13 57050 10.10.1.7 80 TCP 60 <nil>
2023/07/04 12:31:02.801442 IngressRule K8sNetworkPolicy:default/allow-tcp-80 <nil> Ingress Allow 190 default/nettool 10.10.1.13 57050 10.10.1.7 80 TCP 60 <nil>
2023/07/04 12:32:00.000000 IngressDefaultRule StagedNetworkPolicy:default/deny-all <nil> Ingress WouldDrop <nil> default/nettool 10.10.1.13 57051 10.10.1.7 80 TCP 60 <nil> [3 packets in 2s]
2023/07/04 12:33:00.000000 IngressRule StagedNetworkPolicy:default/allow-staged WouldAllow 190 10.10.1.13 57050 10.10.1.7 80 TCP 60
";

/// The live file: a JSON WouldAllow, a WouldDrop of another connection, a gap record, junk.
const LIVE: &str = r#"2023/07/04 12:41:00.000000 IngressRule StagedNetworkPolicy:default/allow-staged from-client Ingress WouldAllow 190 default/nettool 10.10.1.13 57050 10.10.1.7 80 TCP 60 <nil>
{"time":"2023-07-04T12:42:00.000000000Z","node":"n1","table":"IngressRule","direction":"Ingress","disposition":"WouldAllow","policy":{"kind":"StagedNetworkPolicy","namespace":"default","name":"allow-staged"},"rule":"from-client","priority":190,"applied_to":{"namespace":"default","pod":"nettool"},"source":{"ip":"10.10.1.13","port":57050,"namespace":"default","pod":"client"},"destination":{"ip":"10.10.1.7","port":80,"namespace":"default","pod":"nettool"},"protocol":"TCP","length":60,"log_label":null,"count":2,"first_seen":"2023-07-04T12:41:30.000000000Z","last_seen":"2023-07-04T12:42:00.000000000Z"}
2023/07/04 12:43:00.000000 EgressDefaultRule StagedNetworkPolicy:default/deny-all <nil> Egress WouldDrop <nil> default/client 10.10.1.13 40000 10.20.0.5 53 UDP 60 <nil>
2023/07/04 12:44:00.000000 IngressDefaultRule StagedNetworkPolicy:default/deny-all <nil> Ingress WouldDrop <nil> default/nettool 10.10.1.13 57052 10.10.1.7 notaport TCP 60 <nil>
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
    let out = Command::new(env!("CARGO_BIN_EXE_npagent")).arg("staged").arg("report").args(args).output().expect("run");
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
         \x20 WouldAllow 10.10.1.13 -> 10.10.1.7 TCP/80: 1 packets, first 2023-07-04T12:33:00.000000000Z, last 2023-07-04T12:33:00.000000000Z\n\
         \x20 WouldAllow 10.10.1.13 -> default/nettool TCP/80: 1 packets, first 2023-07-04T12:41:00.000000000Z, last 2023-07-04T12:41:00.000000000Z\n\
         \x20 WouldAllow default/client -> default/nettool TCP/80: 2 packets, first 2023-07-04T12:41:30.000000000Z, last 2023-07-04T12:42:00.000000000Z\n\
         StagedNetworkPolicy default/deny-all\n\
         \x20 WouldDrop  10.10.1.13 -> default/nettool TCP/80: 4 packets, first 2023-07-04T12:31:02.801442000Z, last 2023-07-04T12:32:00.000000000Z\n\
         \x20 WouldDrop  default/client -> 10.20.0.5 UDP/53: 1 packets, first 2023-07-04T12:43:00.000000000Z, last 2023-07-04T12:43:00.000000000Z\n\
         StagedNetworkPolicy default/web-only\n\
         \x20 WouldDrop  10.10.1.13 -> default/nettool TCP/80: 1 packets, first 2023-07-04T12:31:02.801442000Z, last 2023-07-04T12:31:02.801442000Z\n"
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
