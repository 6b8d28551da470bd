//! Log line formats.
//!
//! - [`Format::Antrea`]: Antrea's current 14 space-separated fields after the timestamp, `<nil>`
//!   for a missing value, so Antrea's Fluentd parser reads the file unchanged.
//! - [`Format::AntreaV1`]: the 10 fields of Antrea 1.8 (PR #4047): table, policy, disposition,
//!   priority (`-1` for a default drop), source IP and port, destination IP and port, protocol,
//!   length; missing ports are `<nil>`, as Antrea printed them then.
//! - [`Format::Json`]: one JSON object per line, with both ends named, and on a default drop
//!   the policies isolating the pod in that direction (`isolated_by`, sorted); a connection
//!   that came through a Service (judged after the node's DNAT) has `"via_service": true`.
//!
//! A security event (a drop in SpoofGuard or ConntrackState, logged whatever the namespace's
//! switch says) names its event where a policy goes: `SecurityEvent:ForgedSource` in the text
//! formats, `{"kind":"SecurityEvent","namespace":null,"name":"ForgedSource"}` in JSON, with
//! the pod whose port sent it as applied-to.
//!
//! A staged policy's line (disposition `WouldDrop` or `WouldAllow`, from the staged tables,
//! e.g. `StagedIngressDefaultRule` or `StagedIngressRule`) has the kind `StagedNetworkPolicy`:
//! `StagedNetworkPolicy:x/allow` names the staged policy whose rule would allow
//! (`WouldAllow`; by no rule, the staged edit that ends the pod's isolation, with no priority),
//! `StagedNetworkPolicy:x/deny,x/other` the staged policies that would isolate the pod,
//! comma-separated and sorted (`WouldDrop`; names hold no comma). JSON gives them as the
//! policy and as `isolated_by`, as for a default drop.
//!
//! Timestamps are UTC (Antrea's agent writes its container's local time, UTC in its images).
//! Antrea prints ports only for TCP and UDP; npagent also prints SCTP's. A rule name or log
//! label containing whitespace or control characters has them replaced by `_` in text lines,
//! so every line keeps its field count. An aggregate of N > 1
//! packets ends with ` [N packets in D]`, D in Go's `time.Duration` notation.

use super::dedup::Record;
use super::entry::{AuditEntry, PolicyRef};
use super::packet::protocol_name;
use super::timefmt::{push_go_duration, push_go_log_timestamp, push_padded, push_rfc3339_nanos, Fixed};
use crate::model::ObjectRef;
use serde::Serialize;
use std::io::Write;

const NIL: &[u8] = b"<nil>";
/// What Antrea prints for a protocol it has no name for.
const UNKNOWN_PROTOCOL: &str = "UnknownProtocol";

/// Which line layout to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    #[default]
    Antrea,
    AntreaV1,
    Json,
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "antrea" => Ok(Format::Antrea),
            "antrea-v1" => Ok(Format::AntreaV1),
            "json" => Ok(Format::Json),
            other => Err(format!("unknown audit format {other:?} (expected antrea, antrea-v1 or json)")),
        }
    }
}

/// Turns records into lines.
#[derive(Debug, Clone)]
pub struct Formatter {
    pub format: Format,
    /// Node name, written in JSON lines.
    pub node: String,
}

impl Formatter {
    /// A formatter for `format`; `node` appears in JSON lines.
    pub fn new(format: Format, node: impl Into<String>) -> Formatter {
        Formatter { format, node: node.into() }
    }

    /// Appends the line for `r`, newline included, to `out`.
    pub(crate) fn write(&self, r: &Record, out: &mut Vec<u8>) {
        match self.format {
            Format::Antrea => antrea(r, out),
            Format::AntreaV1 => antrea_v1(r, out),
            Format::Json => json(r, &self.node, out),
        }
        out.push(b'\n');
    }

    /// The line for `r` without its newline (for tests and tools).
    pub fn line(&self, r: &Record) -> String {
        let mut out = Vec::new();
        self.write(r, &mut out);
        out.pop();
        String::from_utf8_lossy(&out).into_owned()
    }
}

fn field(out: &mut Vec<u8>, v: &[u8]) {
    out.push(b' ');
    out.extend_from_slice(v);
}

/// A free-form value (rule name, log label) as one field: whitespace and control characters
/// would split the line's fields or the line itself, so they become `_`.
fn opt_str(out: &mut Vec<u8>, v: Option<&str>) {
    match v {
        Some(s) if !s.is_empty() => {
            out.push(b' ');
            for c in s.chars() {
                if c.is_whitespace() || c.is_control() {
                    out.push(b'_');
                } else {
                    let mut buf = [0u8; 4];
                    out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                }
            }
        }
        _ => field(out, NIL),
    }
}

fn opt_num(out: &mut Vec<u8>, v: Option<u16>, missing: &[u8]) {
    out.push(b' ');
    match v {
        Some(n) => push_padded(out, n.into(), 1),
        None => out.extend_from_slice(missing),
    }
}

fn opt_ref(out: &mut Vec<u8>, v: Option<&ObjectRef>) {
    match v {
        Some(r) => {
            field(out, r.namespace.as_bytes());
            out.push(b'/');
            out.extend_from_slice(r.name.as_bytes());
        }
        None => field(out, NIL),
    }
}

fn ip(out: &mut Vec<u8>, a: std::net::IpAddr) {
    out.push(b' ');
    // Writing to a Vec cannot fail.
    let _ = write!(out, "{a}");
}

fn policy(out: &mut Vec<u8>, r: &Record) {
    let p = &r.entry.policy;
    field(out, p.kind().as_bytes());
    let name = |out: &mut Vec<u8>, p: &ObjectRef| {
        out.extend_from_slice(p.namespace.as_bytes());
        out.push(b'/');
        out.extend_from_slice(p.name.as_bytes());
    };
    match p {
        PolicyRef::Policy(p) | PolicyRef::Staged(p) => {
            out.push(b':');
            name(out, p);
        }
        PolicyRef::DefaultDrop => {}
        PolicyRef::Security(event) => {
            out.push(b':');
            out.extend_from_slice(event.as_str().as_bytes());
        }
        PolicyRef::StagedDrop => {
            for (i, p) in r.entry.isolated_by.iter().enumerate() {
                out.push(if i == 0 { b':' } else { b',' });
                name(out, p);
            }
        }
        PolicyRef::Cluster(n) => {
            out.push(b':');
            out.extend_from_slice(n.as_bytes());
        }
    }
}

fn suffix(out: &mut Vec<u8>, r: &Record) {
    if r.count > 1 {
        out.extend_from_slice(b" [");
        push_padded(out, r.count, 1);
        out.extend_from_slice(b" packets in ");
        push_go_duration(out, r.span);
        out.push(b']');
    }
}

fn protocol(p: u8) -> &'static str {
    protocol_name(p).unwrap_or(UNKNOWN_PROTOCOL)
}

fn antrea(r: &Record, out: &mut Vec<u8>) {
    let e = &r.entry;
    push_go_log_timestamp(out, r.written_at);
    field(out, e.table.as_bytes());
    policy(out, r);
    opt_str(out, e.rule_name.as_deref());
    field(out, e.direction.as_str().as_bytes());
    field(out, e.disposition.as_str().as_bytes());
    opt_num(out, e.priority, NIL);
    opt_ref(out, e.applied_to.as_ref());
    connection(out, e);
    opt_str(out, e.log_label.as_deref());
    suffix(out, r);
}

fn antrea_v1(r: &Record, out: &mut Vec<u8>) {
    let e = &r.entry;
    push_go_log_timestamp(out, r.written_at);
    field(out, e.table.as_bytes());
    policy(out, r);
    field(out, e.disposition.as_str().as_bytes());
    opt_num(out, e.priority, b"-1");
    connection(out, e);
    suffix(out, r);
}

/// The packet's fields both Antrea formats share: `srcIP srcPort dstIP dstPort proto length`.
fn connection(out: &mut Vec<u8>, e: &AuditEntry) {
    ip(out, e.src_ip);
    opt_num(out, e.src_port, NIL);
    ip(out, e.dst_ip);
    opt_num(out, e.dst_port, NIL);
    field(out, protocol(e.protocol).as_bytes());
    out.push(b' ');
    push_padded(out, e.ip_len.into(), 1);
}

/// An RFC 3339 timestamp formatted without allocating.
struct Rfc3339(Fixed);

impl Rfc3339 {
    fn new(t: std::time::SystemTime) -> Rfc3339 {
        let mut f = Fixed::default();
        push_rfc3339_nanos(&mut f, t);
        Rfc3339(f)
    }
}

impl Serialize for Rfc3339 {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(std::str::from_utf8(self.0.as_bytes()).unwrap_or_default())
    }
}

#[derive(Serialize)]
struct JsonLine<'a> {
    time: Rfc3339,
    node: &'a str,
    table: &'a str,
    direction: &'static str,
    disposition: &'static str,
    policy: JsonPolicy<'a>,
    rule: Option<&'a str>,
    priority: Option<u16>,
    applied_to: Option<JsonPod<'a>>,
    source: JsonEnd<'a>,
    destination: JsonEnd<'a>,
    protocol: &'static str,
    length: u32,
    log_label: Option<&'a str>,
    /// Default drops and `WouldDrop`s only: the policies (staged ones for a `WouldDrop`)
    /// isolating the pod in this direction.
    #[serde(skip_serializing_if = "Option::is_none")]
    isolated_by: Option<Vec<JsonPolicyName<'a>>>,
    /// A connection to a Service, judged (and logged) against its backend.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    via_service: bool,
    /// A ClusterNetworkPolicy's line: its tier (`Admin`, `Baseline`).
    #[serde(skip_serializing_if = "Option::is_none")]
    tier: Option<&'static str>,
    /// A ClusterNetworkPolicy's line: the policy's priority in its tier.
    #[serde(skip_serializing_if = "Option::is_none")]
    tier_priority: Option<u16>,
    /// The connection's decision chain in this direction, where a tier spoke.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    chain: &'a [String],
    count: u64,
    first_seen: Rfc3339,
    last_seen: Rfc3339,
}

#[derive(Serialize)]
struct JsonPolicy<'a> {
    kind: &'static str,
    namespace: Option<&'a str>,
    name: Option<&'a str>,
}

#[derive(Serialize)]
struct JsonPolicyName<'a> {
    namespace: &'a str,
    name: &'a str,
}

#[derive(Serialize)]
struct JsonPod<'a> {
    namespace: &'a str,
    pod: &'a str,
}

#[derive(Serialize)]
struct JsonEnd<'a> {
    ip: std::net::IpAddr,
    port: Option<u16>,
    namespace: Option<&'a str>,
    pod: Option<&'a str>,
}

fn end(ip: std::net::IpAddr, port: Option<u16>, pod: Option<&ObjectRef>) -> JsonEnd<'_> {
    JsonEnd { ip, port, namespace: pod.map(|p| &*p.namespace), pod: pod.map(|p| &*p.name) }
}

fn json(r: &Record, node: &str, out: &mut Vec<u8>) {
    let e = &r.entry;
    let line = JsonLine {
        time: Rfc3339::new(r.written_at),
        node,
        table: &e.table,
        direction: e.direction.as_str(),
        disposition: e.disposition.as_str(),
        policy: JsonPolicy {
            kind: e.policy.kind(),
            namespace: e.policy.policy().map(|p| &*p.namespace),
            name: match &e.policy {
                PolicyRef::Policy(p) | PolicyRef::Staged(p) => Some(&*p.name),
                PolicyRef::DefaultDrop | PolicyRef::StagedDrop => None,
                PolicyRef::Security(event) => Some(event.as_str()),
                PolicyRef::Cluster(n) => Some(n),
            },
        },
        rule: e.rule_name.as_deref(),
        priority: e.priority,
        applied_to: e.applied_to.as_ref().map(|p| JsonPod { namespace: &p.namespace, pod: &p.name }),
        source: end(e.src_ip, e.src_port, e.src_pod.as_ref()),
        destination: end(e.dst_ip, e.dst_port, e.dst_pod.as_ref()),
        protocol: protocol(e.protocol),
        length: e.ip_len,
        log_label: e.log_label.as_deref(),
        isolated_by: matches!(e.policy, PolicyRef::DefaultDrop | PolicyRef::StagedDrop)
            .then(|| e.isolated_by.iter().map(|p| JsonPolicyName { namespace: &p.namespace, name: &p.name }).collect()),
        via_service: e.via_service,
        tier: e.tier.map(|(t, _)| t.as_str()),
        tier_priority: e.tier.map(|(_, p)| p),
        chain: &e.chain,
        count: r.count,
        first_seen: Rfc3339::new(r.first_seen),
        last_seen: Rfc3339::new(r.last_seen),
    };
    // Serializing plain strings, numbers and addresses into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, &line);
}
