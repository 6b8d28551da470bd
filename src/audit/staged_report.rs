//! `npagent staged report`: what each staged policy would change, read back from np.log (and
//! its rotated backups, gzipped or not). Every line whose disposition is `WouldDrop` or
//! `WouldAllow`, in any of the three formats ([`super::format`]), counts for each staged
//! policy it names; the report gives, per staged policy and disposition, the distinct
//! connections (source pod or address, destination pod or address, protocol, destination
//! port) with their packet counts and first and last seen.
//!
//! Times: JSON lines carry `first_seen` and `last_seen`; a text line carries the time it was
//! written, so its first seen is that time less the aggregate's span (` [N packets in D]`)
//! and its last seen is the time it was written. Antrea's 14-field lines name the pod the
//! policy applies to (the destination for ingress, the source for egress); the 10-field
//! `antrea-v1` lines name no pod, so their ends are addresses.
//!
//! Pure but for reading the files ([`read_logs`]): [`Report::add_line`] parses one line.

use super::entry::LineDisposition;
use super::entry::PolicyRef;
use super::timefmt::{parse_go_log_timestamp, parse_rfc3339, rfc3339_nanos};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// One connection a staged policy would change.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Connection {
    /// `namespace/pod`, or the address.
    pub source: String,
    /// `namespace/pod`, or the address.
    pub destination: String,
    pub protocol: String,
    /// The destination port (TCP, UDP and SCTP only).
    pub port: Option<u16>,
}

/// How often, and when, a connection was seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seen {
    pub packets: u64,
    pub first: SystemTime,
    pub last: SystemTime,
}

/// The key of a report's row: the staged policy (`namespace/name`), the disposition, the
/// connection.
type Row = (String, LineDisposition, Connection);

/// The staged lines read so far.
#[derive(Debug, Default)]
pub struct Report {
    rows: BTreeMap<Row, Seen>,
    /// Staged lines that could not be read, with the first one's place and why.
    pub unreadable: u64,
    pub first_unreadable: Option<String>,
}

/// Why a staged line could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct LineError(String);

impl Report {
    /// Counts `line` (found at `place`, e.g. `np.log:12`) when it is a staged line last seen
    /// at or after `since`; other lines are ignored, an unreadable staged line is counted as
    /// such.
    pub fn add_line(&mut self, place: &str, line: &str, since: Option<SystemTime>) {
        match parse_line(line) {
            Ok(None) => {}
            Ok(Some(staged)) => {
                if since.is_some_and(|s| staged.seen.last < s) {
                    return;
                }
                for policy in staged.policies {
                    let row = (policy, staged.disposition, staged.connection.clone());
                    let seen = self.rows.entry(row).or_insert(staged.seen);
                    if *seen != staged.seen {
                        seen.packets += staged.seen.packets;
                        seen.first = seen.first.min(staged.seen.first);
                        seen.last = seen.last.max(staged.seen.last);
                    }
                }
            }
            Err(e) => {
                self.unreadable += 1;
                self.first_unreadable.get_or_insert_with(|| format!("{place}: {e}"));
            }
        }
    }

    /// The rows, by policy, disposition and connection.
    pub fn rows(&self) -> impl Iterator<Item = (&Row, &Seen)> {
        self.rows.iter()
    }

    /// The report for people: one block per staged policy.
    pub fn text(&self) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        if self.rows.is_empty() {
            out.push_str("no staged verdicts (WouldDrop, WouldAllow) in the log\n");
        }
        let mut current: Option<&str> = None;
        for ((policy, disposition, c), seen) in &self.rows {
            if current != Some(policy.as_str()) {
                let _ = writeln!(out, "{} {policy}", PolicyRef::STAGED_KIND);
                current = Some(policy);
            }
            let port = c.port.map(|p| format!("/{p}")).unwrap_or_default();
            let _ = writeln!(
                out,
                "  {:<10} {} -> {} {}{port}: {} packet{}, first {}, last {}",
                disposition.as_str(),
                c.source,
                c.destination,
                c.protocol,
                seen.packets,
                if seen.packets == 1 { "" } else { "s" },
                rfc3339_nanos(seen.first),
                rfc3339_nanos(seen.last)
            );
        }
        out
    }

    /// The report as one JSON array of rows.
    pub fn json(&self) -> serde_json::Value {
        let rows: Vec<serde_json::Value> = self
            .rows
            .iter()
            .map(|((policy, disposition, c), seen)| {
                serde_json::json!({
                    "policy": policy,
                    "disposition": disposition.as_str(),
                    "source": c.source,
                    "destination": c.destination,
                    "protocol": c.protocol,
                    "port": c.port,
                    "packets": seen.packets,
                    "first_seen": rfc3339_nanos(seen.first),
                    "last_seen": rfc3339_nanos(seen.last),
                })
            })
            .collect();
        serde_json::Value::Array(rows)
    }
}

/// A staged line, read.
struct StagedLine {
    policies: Vec<String>,
    disposition: LineDisposition,
    connection: Connection,
    seen: Seen,
}

/// Reads one log line: `Ok(None)` when it is not a staged line.
fn parse_line(line: &str) -> Result<Option<StagedLine>, LineError> {
    let line = line.trim_end();
    if line.starts_with('{') {
        return parse_json(line);
    }
    if !line.contains(" WouldDrop ") && !line.contains(" WouldAllow ") {
        return Ok(None);
    }
    parse_text(line).map(Some)
}

fn err(s: impl Into<String>) -> LineError {
    LineError(s.into())
}

/// Antrea's 14 fields or antrea-v1's 10, after the two of the timestamp, and an aggregate's
/// suffix.
fn parse_text(line: &str) -> Result<StagedLine, LineError> {
    let (body, packets, span) = match line.strip_suffix(']').and_then(|l| l.rsplit_once(" [")) {
        Some((body, suffix)) => {
            let (n, d) = suffix.split_once(" packets in ").ok_or_else(|| err("malformed aggregate suffix"))?;
            let n: u64 = n.parse().map_err(|_| err(format!("packet count {n:?}")))?;
            (body, n, super::args::parse_go_duration(d).map_err(err)?)
        }
        None => (line, 1, Duration::ZERO),
    };
    let f: Vec<&str> = body.split(' ').collect();
    // (policy, disposition, direction, applied-to, src ip, dst ip, dst port, protocol)
    let (policy, disposition, direction, applied_to, src, dst, dport, proto) = match f.len() {
        16 => (f[3], f[6], Some(f[5]), Some(f[8]), f[9], f[11], f[12], f[13]),
        12 => (f[3], f[4], None, None, f[6], f[8], f[9], f[10]),
        n => return Err(err(format!("{n} fields, expected 16 (antrea) or 12 (antrea-v1)"))),
    };
    let written = parse_go_log_timestamp(f[0], f[1]).ok_or_else(|| err(format!("timestamp {:?}", f[..2].join(" "))))?;
    let disposition = staged_disposition(disposition)?;
    let names = policy
        .strip_prefix(PolicyRef::STAGED_KIND)
        .and_then(|p| p.strip_prefix(':'))
        .ok_or_else(|| err(format!("policy {policy:?} is not a {}", PolicyRef::STAGED_KIND)))?;
    let policies: Vec<String> = names.split(',').map(str::to_string).collect();
    if policies.iter().any(|p| p.split_once('/').is_none_or(|(ns, n)| ns.is_empty() || n.is_empty())) {
        return Err(err(format!("policy {policy:?}: expected namespace/name")));
    }
    let pod = applied_to.filter(|p| *p != "<nil>");
    let (source, destination) = match (direction, pod) {
        (Some("Ingress"), Some(pod)) => (src.to_string(), pod.to_string()),
        (Some("Egress"), Some(pod)) => (pod.to_string(), dst.to_string()),
        (Some("Ingress" | "Egress") | None, _) => (src.to_string(), dst.to_string()),
        (Some(other), _) => return Err(err(format!("direction {other:?}"))),
    };
    let port = match dport {
        "<nil>" => None,
        p => Some(p.parse().map_err(|_| err(format!("port {p:?}")))?),
    };
    Ok(StagedLine {
        policies,
        disposition,
        connection: Connection { source, destination, protocol: proto.to_string(), port },
        seen: Seen { packets, first: written.checked_sub(span).unwrap_or(written), last: written },
    })
}

fn staged_disposition(s: &str) -> Result<LineDisposition, LineError> {
    LineDisposition::parse(s).filter(|d| d.is_staged()).ok_or_else(|| err(format!("disposition {s:?}")))
}

#[derive(Deserialize)]
struct JsonLine {
    disposition: String,
    policy: JsonPolicy,
    #[serde(default)]
    isolated_by: Vec<JsonName>,
    source: JsonEnd,
    destination: JsonEnd,
    protocol: String,
    count: u64,
    first_seen: String,
    last_seen: String,
}

#[derive(Deserialize)]
struct JsonPolicy {
    kind: String,
    namespace: Option<String>,
    name: Option<String>,
}

#[derive(Deserialize)]
struct JsonName {
    namespace: String,
    name: String,
}

#[derive(Deserialize)]
struct JsonEnd {
    ip: String,
    port: Option<u16>,
    namespace: Option<String>,
    pod: Option<String>,
}

impl JsonEnd {
    fn name(&self) -> String {
        match (&self.namespace, &self.pod) {
            (Some(ns), Some(pod)) => format!("{ns}/{pod}"),
            _ => self.ip.clone(),
        }
    }
}

fn parse_json(line: &str) -> Result<Option<StagedLine>, LineError> {
    #[derive(Deserialize)]
    struct Peek {
        disposition: Option<String>,
    }
    let peek: Peek = serde_json::from_str(line).map_err(|e| err(format!("JSON: {e}")))?;
    if !peek.disposition.as_deref().and_then(LineDisposition::parse).is_some_and(LineDisposition::is_staged) {
        return Ok(None);
    }
    let l: JsonLine = serde_json::from_str(line).map_err(|e| err(format!("JSON: {e}")))?;
    let disposition = staged_disposition(&l.disposition)?;
    if l.policy.kind != PolicyRef::STAGED_KIND {
        return Err(err(format!("policy kind {:?} is not {}", l.policy.kind, PolicyRef::STAGED_KIND)));
    }
    let policies: Vec<String> = match disposition {
        LineDisposition::WouldAllow => match (l.policy.namespace, l.policy.name) {
            (Some(ns), Some(name)) => vec![format!("{ns}/{name}")],
            _ => return Err(err("a WouldAllow line without its policy's namespace and name")),
        },
        _ => l.isolated_by.iter().map(|p| format!("{}/{}", p.namespace, p.name)).collect(),
    };
    if policies.is_empty() {
        return Err(err("a WouldDrop line without isolated_by"));
    }
    let time = |s: &str| parse_rfc3339(s).ok_or_else(|| err(format!("time {s:?}")));
    Ok(Some(StagedLine {
        policies,
        disposition,
        connection: Connection {
            source: l.source.name(),
            destination: l.destination.name(),
            protocol: l.protocol,
            port: l.destination.port,
        },
        seen: Seen { packets: l.count.max(1), first: time(&l.first_seen)?, last: time(&l.last_seen)? },
    }))
}

/// Why the log could not be read.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {source}")]
pub struct ReadError {
    pub path: PathBuf,
    pub source: std::io::Error,
}

/// The log at `path` and its rotated backups (oldest first, then the live file).
pub fn log_files(path: &Path) -> Result<Vec<PathBuf>, ReadError> {
    let mut files: Vec<PathBuf> = match super::log_files::list_backups(path) {
        Ok(backups) => backups.into_iter().rev().map(|b| b.path).collect(),
        Err(e) => return Err(ReadError { path: path.to_path_buf(), source: e }),
    };
    files.push(path.to_path_buf());
    Ok(files)
}

/// Reads `files` (plain or gzipped) into a report, keeping lines last seen at or after
/// `since`.
pub fn read_logs(files: &[PathBuf], since: Option<SystemTime>) -> Result<Report, ReadError> {
    let mut report = Report::default();
    for path in files {
        let read_err = |source| ReadError { path: path.clone(), source };
        let mut reader = super::log_files::open_log(path).map_err(read_err)?;
        let mut buf = Vec::new();
        let mut n = 0u64;
        loop {
            buf.clear();
            if reader.read_until(b'\n', &mut buf).map_err(read_err)? == 0 {
                break;
            }
            n += 1;
            let place = format!("{}:{n}", path.display());
            report.add_line(&place, &String::from_utf8_lossy(&buf), since);
        }
    }
    Ok(report)
}
