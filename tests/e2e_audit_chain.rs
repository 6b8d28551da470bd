//! `--audit-chain` end to end: `npagent run` on the testbed (real userspace OVS, real packets
//! between pod namespaces), stopped and started again, then `npagent audit verify` on the
//! log it wrote, before and after an edit.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use support::agent::{npagent_bin, Agent};
use support::{write_atomic, Testbed};

const ANTREA_KEY: &str = "networkpolicy.antrea.io/enable-logging";

/// Namespaces x (logging on), y and z, and the example policy letting x/b reach x/a on TCP 80
/// (so x/a is isolated: anything else to it is a logged default drop).
fn logging_manifests(tb: &Testbed) {
    let mut text = String::new();
    for ns in ["x", "y", "z"] {
        text.push_str(&format!(
            "---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n  labels:\n    ns: {ns}\n"
        ));
        if ns == "x" {
            text.push_str(&format!("  annotations:\n    {ANTREA_KEY}: \"true\"\n"));
        }
    }
    write_atomic(&tb.manifests_dir().join("namespaces.yaml"), &text);
    let policy = std::fs::read_to_string(support::sandbox::repo_path("testbed/examples/allow-xb-to-xa-tcp80.yaml"))
        .expect("read example policy");
    write_atomic(&tb.manifests_dir().join("allow-xb-to-xa-tcp80.yaml"), &policy);
}

/// `count` TCP connections from pod `from` to `ip:80` (each a new source port, so each
/// allowed one is an Allow line of its own); returns how many were set up.
fn connect(tb: &Testbed, from: &str, ip: &str, count: u32) -> u32 {
    let script = format!(
        "import socket\nok = 0\nfor _ in range({count}):\n    s = socket.socket()\n    s.settimeout(1)\n    try:\n        s.connect(('{ip}', 80)); ok += 1\n    except OSError:\n        pass\n    s.close()\nprint(ok)\n"
    );
    let out = tb.pod_exec(from, &["/usr/bin/python3", "-c", &script]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().parse().expect("count")
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path).unwrap_or_default().lines().map(str::to_owned).collect()
}

fn wait_lines(path: &Path, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while lines(path).len() < n {
        assert!(Instant::now() < deadline, "{} lines in {}, expected {n}", lines(path).len(), path.display());
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn verify(files: &[PathBuf]) -> (i32, String) {
    let out = Command::new(npagent_bin()).args(["audit", "verify"]).args(files).output().expect("run verify");
    (
        out.status.code().unwrap_or(-1),
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)),
    )
}

#[test]
fn a_chained_log_over_an_agent_restart_verifies_and_an_edit_is_found() {
    let tb = Testbed::start();
    logging_manifests(&tb);
    let logs = tempfile::Builder::new().prefix("npa-e2e-chain-").tempdir().expect("temp dir");
    let np_log = logs.path().join("np.log");
    let args = ["--audit-chain", "--audit-dedup-window", "0"];
    let xa = tb.pod("x/a");

    let agent = Agent::start(&tb.sandbox, &tb.manifests_dir(), &np_log, &args);
    assert_eq!(connect(&tb, "x/b", &xa.ip, 5), 5);
    assert_eq!(connect(&tb, "y/a", &xa.ip, 2), 0, "y/a is not allowed to x/a");
    wait_lines(&np_log, 5 + 2);
    assert!(agent.stop().success());
    let first_run = lines(&np_log).len();

    let agent = Agent::start(&tb.sandbox, &tb.manifests_dir(), &np_log, &args);
    assert_eq!(connect(&tb, "x/b", &xa.ip, 3), 3);
    wait_lines(&np_log, first_run + 3);
    assert!(agent.stop().success());

    let all = lines(&np_log);
    assert!(all.len() >= first_run + 3);
    // The log itself is still Antrea's: a timestamp and 14 fields, nothing of the chain.
    for l in &all {
        let body = l.rsplit_once(" [").map_or(l.as_str(), |(b, _)| b);
        assert_eq!(body.split(' ').count(), 16, "{l}");
    }
    assert_eq!(all.iter().filter(|l| l.contains(" Allow ")).count(), 8, "{all:#?}");
    let sidecar = logs.path().join("np.log.chain");
    let records = lines(&sidecar);
    assert_eq!(records.len(), all.len() + 1, "a header and one record per line");
    assert!(records[0].starts_with("npagent-chain v1 file=1 prev=0000"), "{}", records[0]);

    let (code, text) = verify(std::slice::from_ref(&np_log));
    assert_eq!(code, 0, "{text}");
    assert!(text.contains(&format!("intact: {} lines in 1 files", all.len())), "{text}");

    // Hide one allowed connection of the second run as a drop.
    let n = all.iter().rposition(|l| l.contains(" Allow ")).expect("an Allow line");
    let mut edited = all.clone();
    edited[n] = edited[n].replace(" Allow ", " Drop ");
    std::fs::write(&np_log, edited.iter().map(|l| format!("{l}\n")).collect::<String>()).unwrap();
    let (code, text) = verify(std::slice::from_ref(&np_log));
    assert_eq!(code, 1, "{text}");
    assert!(text.contains(&format!("np.log line {}: modified", n + 1)), "{text}");
}

/// The meter of `pod`'s Allow copies (see `compiler::meters`).
fn allow_meter(pod: &support::Pod) -> u32 {
    0x1_0000 + pod.ofport
}

/// The meter of `pod`'s Drop copies.
fn drop_meter(pod: &support::Pod) -> u32 {
    0x2_0000 + pod.ofport
}

/// Packets that entered logging meter `id`, and those its band dropped.
fn meter_stats(tb: &Testbed, id: u32) -> (u64, u64) {
    let text = tb.sandbox.ofctl(&["meter-stats", &format!("meter={id}")]);
    let num = |key: &str| -> u64 {
        text.split_whitespace()
            .find_map(|w| w.strip_prefix(key))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {key} in {text}"))
    };
    (num("packet_in_count:"), num("packet_count:"))
}

/// `count` UDP datagrams from pod `from` to `ip:80` at `pps`, each from a new source port.
fn udp_flood(tb: &Testbed, from: &str, ip: &str, count: u32, pps: u32) -> std::process::Child {
    let script = format!(
        "import socket, time\nstart = time.monotonic()\nfor i in range({count}):\n    d = start + i / {pps} - time.monotonic()\n    if d > 0: time.sleep(d)\n    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n    s.sendto(b'x', ('{ip}', 80))\n    s.close()\n"
    );
    let pod = tb.pod(from);
    Command::new("ip")
        .args(["netns", "exec", &pod.netns, "/usr/bin/python3", "-c", &script])
        .spawn()
        .expect("start flood")
}

#[test]
fn a_flood_over_the_meter_leaves_gap_records_that_account_for_every_shed_packet() {
    let tb = Testbed::start();
    logging_manifests(&tb);
    let logs = tempfile::Builder::new().prefix("npa-e2e-gap-").tempdir().expect("temp dir");
    let np_log = logs.path().join("np.log");
    let started = std::time::SystemTime::now();
    let agent = Agent::start(&tb.sandbox, &tb.manifests_dir(), &np_log, &["--audit-chain", "--packet-in-rate", "50"]);
    let xa = tb.pod("x/a");
    // ~3 s of 3 x 500 dropped datagrams/s to the isolated x/a: far above 50/s.
    let floods: Vec<_> = ["x/c", "y/a", "z/a"].iter().map(|from| udp_flood(&tb, from, &xa.ip, 1_500, 500)).collect();
    for mut f in floods {
        assert!(f.wait().expect("flood").success());
    }
    let (_, meter_dropped) = meter_stats(&tb, drop_meter(&xa));
    assert_eq!(meter_stats(&tb, allow_meter(&xa)).1, 0, "nothing shed by the Allow meter");
    assert!(meter_dropped > 1_000, "the meter dropped only {meter_dropped}");
    assert!(agent.stop().success());
    let stopped = std::time::SystemTime::now();

    let all = lines(&np_log);
    let (gaps, packets): (Vec<&String>, Vec<&String>) = all.iter().partition(|l| l.contains(" AuditGap "));
    assert!(!packets.is_empty());
    for l in &packets {
        let body = l.rsplit_once(" [").map_or(l.as_str(), |(b, _)| b);
        assert_eq!(body.split(' ').count(), 16, "{l}");
    }
    let mut shed = 0;
    for g in &gaps {
        let f: Vec<&str> = g.split(' ').collect();
        assert_eq!(f.len(), 10, "{g}");
        assert_eq!(&f[2..7], ["AuditGap", "meter", "<nil>", "Drop", "x/a"], "only x/a's Drop meter shed: {g}");
        shed += f[7].strip_prefix("shed=").and_then(|n| n.parse::<u64>().ok()).expect("shed=N");
        let from = f[8].strip_prefix("from=").expect("from=");
        let to = f[9].strip_prefix("to=").expect("to=");
        assert!(from < to, "{g}");
        let rfc = |t: std::time::SystemTime| npagent::audit::timefmt::rfc3339_nanos(t);
        assert!(from >= rfc(started).as_str() && to <= rfc(stopped).as_str(), "{g} outside the run");
    }
    assert_eq!(shed, meter_dropped, "the gap records account for every packet the meter shed: {gaps:#?}");
    let (code, text) = verify(std::slice::from_ref(&np_log));
    assert_eq!(code, 0, "gap records are chained like any line: {text}");
}

#[test]
fn allowed_connections_made_during_a_drop_flood_are_all_logged() {
    let tb = Testbed::start();
    logging_manifests(&tb);
    let logs = tempfile::Builder::new().prefix("npa-e2e-meters-").tempdir().expect("temp dir");
    let np_log = logs.path().join("np.log");
    // One rate for both meters: a single shared meter at 200/s would let through about one
    // Allow copy in ten under this flood.
    let agent = Agent::start(&tb.sandbox, &tb.manifests_dir(), &np_log, &["--packet-in-rate", "200"]);
    let xa = tb.pod("x/a");
    let floods: Vec<_> = ["x/c", "y/a", "z/a"].iter().map(|from| udp_flood(&tb, from, &xa.ip, 2_100, 700)).collect();
    std::thread::sleep(Duration::from_millis(300));
    let allowed = connect(&tb, "x/b", &xa.ip, 150);
    for mut f in floods {
        assert!(f.wait().expect("flood").success());
    }
    assert_eq!(allowed, 150);
    // An Allow copy passes the meter of its connection's source, a local pod here.
    let xb = tb.pod("x/b");
    let (allow_stats, drop_stats) = (meter_stats(&tb, allow_meter(&xb)), meter_stats(&tb, drop_meter(&xa)));
    assert!(agent.stop().success());
    let all = lines(&np_log);
    let allow_lines = all.iter().filter(|l| l.contains(" Allow ")).count();
    assert_eq!(allow_lines, 150, "every allowed connection is in the log despite the flood");
    assert!(all.iter().any(|l| l.contains(" Drop ")));
    let (drop_in, drop_shed) = drop_stats;
    assert!(
        drop_in >= 3 * 2_100 && drop_shed > 3_000,
        "the drop flood did not exceed its meter: {drop_in} in, {drop_shed} shed"
    );
    assert_eq!(allow_stats, (150, 0), "x/b's Allow meter saw only its connections and shed none");
}

/// The log files in `dir` (backups and the live file), sidecars left out.
fn log_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("read log dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| {
            let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            name.starts_with("np") && !name.ends_with(".chain") && !name.ends_with(".agent.log")
        })
        .collect();
    files.sort();
    files
}

/// Lines of a log file, gunzipped if need be.
fn count_lines(p: &Path) -> usize {
    let bytes = std::fs::read(p).expect("read log");
    let text = if p.extension().is_some_and(|e| e == "gz") {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&bytes[..]), &mut s).expect("gunzip");
        s
    } else {
        String::from_utf8(bytes).expect("utf-8")
    };
    text.lines().count()
}

#[test]
fn a_long_chained_run_with_rotation_and_a_restart_verifies() {
    let tb = Testbed::start();
    logging_manifests(&tb);
    let logs = tempfile::Builder::new().prefix("npa-e2e-rotate-").tempdir().expect("temp dir");
    let np_log = logs.path().join("np.log");
    // Every dropped datagram a line of its own (new source ports, no aggregation), ~150
    // bytes each: two runs of 4,500 make more than the 1 MB at which the file rotates.
    let args = ["--audit-chain", "--audit-dedup-window", "0", "--audit-max-size", "1", "--audit-max-backups", "0"];
    let xa = tb.pod("x/a");
    for run in 0..2 {
        let agent = Agent::start(&tb.sandbox, &tb.manifests_dir(), &np_log, &args);
        let floods: Vec<_> =
            ["x/c", "y/a", "z/a"].iter().map(|from| udp_flood(&tb, from, &xa.ip, 1_500, 500)).collect();
        for mut f in floods {
            assert!(f.wait().expect("flood").success());
        }
        assert_eq!(connect(&tb, "x/b", &xa.ip, 3), 3, "run {run}");
        std::thread::sleep(Duration::from_millis(500));
        assert!(agent.stop().success());
    }
    let files = log_files(logs.path());
    assert!(
        files.len() >= 2 && files.iter().any(|f| f.extension().is_some_and(|e| e == "gz")),
        "no rotation: {files:?}"
    );
    let total: usize = files.iter().map(|f| count_lines(f)).sum();
    // A loaded machine may lose a few datagrams before they reach the bridge (no packet, no
    // line); the claim is that every line that was written verifies, across the rotation.
    assert!(total >= 2 * 4_000, "{total} lines");
    let (code, text) = verify(&files);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains(&format!("intact: {total} lines in {} files", files.len())), "{text}");
    // Dropping the oldest file is pruning; editing the newest is not.
    let (code, text) = verify(&files[1..]);
    assert_eq!(code, 0, "{text}");
    let live = files.last().expect("live file");
    let mut body = std::fs::read_to_string(live).expect("read");
    body = body.replacen("Drop", "Allow", 1);
    std::fs::write(live, body).expect("write");
    let (code, text) = verify(&files);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("np.log line 1: modified"), "{text}");
}
