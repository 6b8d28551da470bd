//! The scenario format of `testbed/scenarios/*.yaml` and its expectation language.
//!
//! A scenario is a sequence of steps. Each step is the complete scenario state at that point:
//! the NetworkPolicies to drop into the agent's manifests directory, plus JSON-merge-patches
//! (RFC 7386: maps merge, `null` deletes a key, lists replace) of the testbed's own Namespace
//! and Pod objects, and the reachability expected once npagent has converged.
//!
//! ```yaml
//! name: deny-all-x-allow-x-b
//! doc: "which semantic, which upstream test it mirrors"
//! manifests: |            # single step: `manifests` + `expect` at the top level
//!   apiVersion: networking.k8s.io/v1
//!   kind: NetworkPolicy
//!   ...
//! expect:                 # applied in order, the last matching line wins; baseline: allow all
//!   - deny  *->x/*
//!   - allow x/b->x/a:tcp/80
//! ```
//! or `steps: [{doc, manifests, expect}, ...]`; a step without `manifests` keeps the previous
//! step's. A line is `allow|deny FROM->TO[:PORT]`: FROM and TO are `*`, `NS/*`, `*/POD` or
//! `NS/POD`; PORT is `*` (the default), `PROTO/*` or `PROTO/NUMBER` with PROTO one of tcp, udp,
//! sctp. Traffic from a pod to itself is never checked (upstream's netpol suite ignores loopback
//! too: CNIs disagree on it). Manifests may use `{{ip:NS/POD}}` (the pod's IPv4 address) and
//! `{{net:NS/POD/LEN}}` (the /LEN network holding it), filled from the testbed's Pod objects.
//!
//! The testbed's outside hosts (`outside/h1`, `outside/h2`: not pods, behind ports of the
//! node's own) are endpoints like the pods in patterns and templates. A step probes them, to
//! and from every pod, when one of its lines names them with a pattern that matches no pod
//! (`outside/*`, `outside/h1`, `*/h2`); then `*` includes them too.
//!
//! Ported tests (the upstream ClusterNetworkPolicy conformance suite, `testbed/conformance`)
//! check pokes instead of a whole matrix, edit the previous step's state as upstream's
//! subtests patch their objects, and name where they come from:
//!
//! ```yaml
//! name: admin-egress-tcp
//! doc: "..."
//! upstream:               # the ported test
//!   repo: kubernetes-sigs/network-policy-api
//!   commit: 0eec1b0
//!   file: conformance/tests/admin-network-policy-standard-egress-tcp-rules.go
//!   test: CNPAdminTierEgressTCP
//!   manifests: [conformance/base/admin_tier/standard-egress-tcp-rules.yaml]
//! steps:
//! - upstream: "Should support ..."   # the t.Run title the step ports
//!   manifests: |                     # ClusterNetworkPolicies and NetworkPolicies
//!     ...
//!   pokes:                           # exactly upstream's, in its order; nothing else is probed
//!   - allow NS/POD->NS/POD:tcp/80
//!   derived:                         # optional: probes of the same policy beyond upstream's
//!   - deny NS/POD->NS/POD:udp/53
//! - upstream: "Should support ..."
//!   edit:                            # applied to the previous step's state, in order
//!   - swap: {object: ClusterNetworkPolicy egress-tcp, path: spec.egress, at: [0, 1]}
//!   - set: {object: ClusterNetworkPolicy egress-tcp, path: spec.ingress.0.action, value: Pass}
//!   - insert: {object: ClusterNetworkPolicy egress-tcp, path: spec.egress, at: 0, value: {...}}
//!   - merge: {object: Namespace NS, value: {metadata: {labels: {k: v}}}}   # RFC 7386
//!   - delete: {object: NetworkPolicy NS/NAME}
//!   pokes: [...]
//! ```
//! A poke names one pod, one pod and one port (`PROTO/NUMBER`); a step of pokes checks only
//! them, with the verdict each gives. An edit's object is `KIND NAME` or `KIND NS/NAME`: a
//! policy of the state, or (`set`, `merge`) one of the testbed's Namespaces and Pods; its path
//! is dotted, numbers index lists. Templates work in edited values too.
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::Ipv4Addr;
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use crate::support::yaml;

/// A pod of the testbed, `namespace/name`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PodId {
    pub ns: String,
    pub pod: String,
}

impl PodId {
    pub fn new(ns: &str, pod: &str) -> Self {
        PodId { ns: ns.to_string(), pod: pod.to_string() }
    }

    /// Parses `ns/pod`.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s.split_once('/') {
            Some((ns, pod)) if !ns.is_empty() && !pod.is_empty() && !pod.contains('/') => Ok(PodId::new(ns, pod)),
            _ => Err(format!("{s:?} is not NAMESPACE/POD")),
        }
    }
}

impl fmt::Display for PodId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.ns, self.pod)
    }
}

/// Transport protocol of a probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Proto {
    Tcp,
    Udp,
    Sctp,
}

impl Proto {
    fn parse(s: &str) -> Result<Self, String> {
        match s {
            "tcp" => Ok(Proto::Tcp),
            "udp" => Ok(Proto::Udp),
            "sctp" => Ok(Proto::Sctp),
            _ => Err(format!("unknown protocol {s:?} (tcp, udp, sctp)")),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Proto::Tcp => "tcp",
            Proto::Udp => "udp",
            Proto::Sctp => "sctp",
        }
    }
}

/// A destination port of a probe, e.g. tcp/80.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PortKey {
    pub proto: Proto,
    pub port: u16,
}

impl PortKey {
    pub const TCP80: PortKey = PortKey { proto: Proto::Tcp, port: 80 };
    pub const TCP81: PortKey = PortKey { proto: Proto::Tcp, port: 81 };
    pub const UDP80: PortKey = PortKey { proto: Proto::Udp, port: 80 };
    /// The ports every testbed pod listens on, probed with real traffic in every scenario.
    pub const PROBED: [PortKey; 3] = [Self::TCP80, Self::TCP81, Self::UDP80];

    pub fn parse(s: &str) -> Result<Self, String> {
        let (proto, port) = s.split_once('/').ok_or_else(|| format!("{s:?} is not PROTO/PORT"))?;
        let port = port.parse::<u16>().map_err(|_| format!("bad port number in {s:?}"))?;
        Ok(PortKey { proto: Proto::parse(proto)?, port })
    }
}

impl fmt::Display for PortKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.proto.name(), self.port)
    }
}

/// One probe: a connection attempt from one pod to another on one port.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Probe {
    pub from: PodId,
    pub to: PodId,
    pub port: PortKey,
}

impl fmt::Display for Probe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}->{}:{}", self.from, self.to, self.port)
    }
}

/// `*`, `ns/*`, `*/pod` or `ns/pod`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodPat {
    ns: Option<String>,
    pod: Option<String>,
}

impl PodPat {
    fn parse(s: &str, universe: &BTreeSet<PodId>) -> Result<Self, String> {
        let pat = if s == "*" {
            PodPat { ns: None, pod: None }
        } else {
            let (ns, pod) = s.split_once('/').ok_or_else(|| format!("{s:?} is not *, NS/*, */POD or NS/POD"))?;
            let part = |p: &str| if p == "*" { None } else { Some(p.to_string()) };
            PodPat { ns: part(ns), pod: part(pod) }
        };
        if !universe.iter().any(|p| pat.matches(p)) {
            return Err(format!("pattern {s:?} matches no pod of the testbed"));
        }
        Ok(pat)
    }

    pub fn matches(&self, p: &PodId) -> bool {
        self.ns.as_deref().is_none_or(|ns| ns == p.ns) && self.pod.as_deref().is_none_or(|n| n == p.pod)
    }

    /// Does the pattern name some of `hosts` and none of `pods`?
    fn names_only(&self, hosts: &BTreeSet<PodId>, pods: &BTreeSet<PodId>) -> bool {
        hosts.iter().any(|h| self.matches(h)) && !pods.iter().any(|p| self.matches(p))
    }
}

/// `*`, `proto/*` or `proto/port`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortPat {
    proto: Option<Proto>,
    port: Option<u16>,
}

impl PortPat {
    fn parse(s: &str) -> Result<Self, String> {
        if s == "*" {
            return Ok(PortPat { proto: None, port: None });
        }
        let (proto, port) = s.split_once('/').ok_or_else(|| format!("port {s:?} is not *, PROTO/* or PROTO/PORT"))?;
        let proto = Some(Proto::parse(proto)?);
        if port == "*" {
            return Ok(PortPat { proto, port: None });
        }
        let port = port.parse::<u16>().map_err(|_| format!("bad port number in {s:?}"))?;
        Ok(PortPat { proto, port: Some(port) })
    }

    pub fn matches(&self, k: PortKey) -> bool {
        self.proto.is_none_or(|p| p == k.proto) && self.port.is_none_or(|p| p == k.port)
    }

    /// The explicit port this pattern names, if it names one.
    fn exact(&self) -> Option<PortKey> {
        Some(PortKey { proto: self.proto?, port: self.port? })
    }
}

/// One expectation line: `allow|deny FROM->TO[:PORT]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub allow: bool,
    pub from: PodPat,
    pub to: PodPat,
    pub port: PortPat,
    pub text: String,
}

impl Line {
    pub fn parse(s: &str, universe: &BTreeSet<PodId>) -> Result<Self, String> {
        let err = |m: String| format!("expectation {s:?}: {m}");
        let mut words = s.split_whitespace();
        let verdict = words.next().ok_or_else(|| err("empty".into()))?;
        let allow = match verdict {
            "allow" => true,
            "deny" => false,
            v => return Err(err(format!("verdict {v:?} is neither allow nor deny"))),
        };
        let pattern = words.next().ok_or_else(|| err("no FROM->TO pattern".into()))?;
        if let Some(extra) = words.next() {
            return Err(err(format!("unexpected {extra:?}")));
        }
        let (from, rest) = pattern.split_once("->").ok_or_else(|| err("no `->`".into()))?;
        let (to, port) = match rest.split_once(':') {
            Some((to, port)) => (to, port),
            None => (rest, "*"),
        };
        Ok(Line {
            allow,
            from: PodPat::parse(from, universe).map_err(err)?,
            to: PodPat::parse(to, universe).map_err(err)?,
            port: PortPat::parse(port).map_err(err)?,
            text: s.to_string(),
        })
    }

    pub fn matches(&self, p: &Probe) -> bool {
        self.from.matches(&p.from) && self.to.matches(&p.to) && self.port.matches(p.port)
    }
}

/// The expected reachability of one step.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Expectation {
    pub lines: Vec<Line>,
}

impl Expectation {
    /// Allowed or not: the last matching line decides; no line matching means allowed (a pod
    /// that no policy selects accepts everything).
    pub fn allows(&self, p: &Probe) -> bool {
        self.lines.iter().rev().find(|l| l.matches(p)).is_none_or(|l| l.allow)
    }

    /// The endpoints a step probes: the pods, and the outside hosts when a line names them
    /// with a pattern that matches no pod.
    pub fn endpoints(&self, pods: &BTreeSet<PodId>, outside: &BTreeSet<PodId>) -> BTreeSet<PodId> {
        let named = self.lines.iter().any(|l| l.from.names_only(outside, pods) || l.to.names_only(outside, pods));
        let mut all = pods.clone();
        if named {
            all.extend(outside.iter().cloned());
        }
        all
    }

    /// Ports checked beyond [`PortKey::PROBED`]: those an expectation names explicitly (SCTP).
    pub fn extra_ports(&self) -> BTreeSet<PortKey> {
        self.lines.iter().filter_map(|l| l.port.exact()).filter(|k| !PortKey::PROBED.contains(k)).collect()
    }
}

/// All probes of a step: every ordered pair of distinct endpoints on every port.
pub fn all_probes(pods: &BTreeSet<PodId>, ports: &BTreeSet<PortKey>) -> Vec<Probe> {
    let mut out = Vec::new();
    for port in ports {
        for from in pods {
            for to in pods {
                if from != to {
                    out.push(Probe { from: from.clone(), to: to.clone(), port: *port });
                }
            }
        }
    }
    out
}

/// Kind, namespace and name of a manifest object.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjKey {
    pub kind: String,
    pub namespace: String,
    pub name: String,
}

impl fmt::Display for ObjKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.namespace.is_empty() {
            write!(f, "{} {}", self.kind, self.name)
        } else {
            write!(f, "{} {}/{}", self.kind, self.namespace, self.name)
        }
    }
}

/// The key of an object document.
pub fn obj_key(doc: &Value) -> Result<ObjKey, String> {
    let s = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_string);
    let kind = s(doc.get("kind")).ok_or("document without kind")?;
    let meta = doc.get("metadata");
    let name = s(meta.and_then(|m| m.get("name"))).ok_or_else(|| format!("{kind} without metadata.name"))?;
    let namespace = s(meta.and_then(|m| m.get("namespace"))).unwrap_or_default();
    Ok(ObjKey { kind, namespace, name })
}

/// Splits multi-document YAML into its non-empty documents.
pub fn split_docs(text: &str) -> Result<Vec<Value>, String> {
    // Empty and `null` documents are skipped by the parser itself.
    yaml::documents(text).map_err(|e| e.to_string())
}

/// RFC 7386 JSON merge patch.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(pm) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Default::default());
    }
    if let Value::Object(tm) = target {
        for (k, pv) in pm {
            if pv.is_null() {
                tm.remove(k);
            } else {
                merge_patch(tm.entry(k.clone()).or_insert(Value::Null), pv);
            }
        }
    }
}

/// The testbed's own objects (Namespaces and Pods), one document per object, and its outside
/// hosts.
#[derive(Debug, Clone, Default)]
pub struct Base {
    pub objects: BTreeMap<ObjKey, Value>,
    /// The outside hosts (`outside/h1`) and their IPv4 addresses.
    pub outside: BTreeMap<PodId, Ipv4Addr>,
}

impl Base {
    /// Reads every `*.yaml`/`*.yml` of a directory (the testbed's manifests).
    pub fn load(dir: &Path) -> Result<Self, String> {
        let mut base = Base::default();
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .map_err(|e| format!("{}: {e}", dir.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
            .collect();
        entries.sort();
        for path in entries {
            let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            for doc in split_docs(&text).map_err(|e| format!("{}: {e}", path.display()))? {
                let key = obj_key(&doc).map_err(|e| format!("{}: {e}", path.display()))?;
                base.objects.insert(key, doc);
            }
        }
        Ok(base)
    }

    /// Adds the outside hosts: (`outside/NAME`, IPv4 address) each.
    pub fn with_outside(mut self, hosts: &[(String, String)]) -> Result<Self, String> {
        for (id, ip) in hosts {
            let ip = ip.parse().map_err(|_| format!("outside host {id}: bad IPv4 address {ip:?}"))?;
            self.outside.insert(PodId::parse(id)?, ip);
        }
        Ok(self)
    }

    /// The outside hosts.
    pub fn outside_hosts(&self) -> BTreeSet<PodId> {
        self.outside.keys().cloned().collect()
    }

    /// The testbed's pods.
    pub fn pods(&self) -> BTreeSet<PodId> {
        self.objects.keys().filter(|k| k.kind == "Pod").map(|k| PodId::new(&k.namespace, &k.name)).collect()
    }

    /// IPv4 address of each pod (`status.podIP`).
    pub fn ips(&self) -> BTreeMap<PodId, Ipv4Addr> {
        let mut out = BTreeMap::new();
        for (k, v) in &self.objects {
            if k.kind != "Pod" {
                continue;
            }
            let ip = v.get("status").and_then(|s| s.get("podIP")).and_then(Value::as_str);
            if let Some(ip) = ip.and_then(|ip| ip.parse().ok()) {
                out.insert(PodId::new(&k.namespace, &k.name), ip);
            }
        }
        out
    }
}

/// Fills `{{ip:NS/POD}}` and `{{net:NS/POD/LEN}}`.
pub fn render(text: &str, ips: &BTreeMap<PodId, Ipv4Addr>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after.find("}}").ok_or("unterminated {{")?;
        let inner = after[..end].trim();
        let ip_of = |p: &str| -> Result<Ipv4Addr, String> {
            let id = PodId::parse(p)?;
            ips.get(&id).copied().ok_or_else(|| format!("no IP known for pod {id}"))
        };
        if let Some(p) = inner.strip_prefix("ip:") {
            out.push_str(&ip_of(p)?.to_string());
        } else if let Some(arg) = inner.strip_prefix("net:") {
            let (p, len) = arg.rsplit_once('/').ok_or_else(|| format!("{inner:?}: no /LEN"))?;
            let len: u32 = len.parse().map_err(|_| format!("{inner:?}: bad length"))?;
            if len > 32 {
                return Err(format!("{inner:?}: length over 32"));
            }
            let mask = u32::MAX.checked_shl(32 - len).unwrap_or(0);
            let net = Ipv4Addr::from(u32::from(ip_of(p)?) & mask);
            out.push_str(&format!("{net}/{len}"));
        } else {
            return Err(format!("unknown template {inner:?}"));
        }
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

/// One poke of a ported test: a probe and the verdict expected of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Poke {
    pub probe: Probe,
    pub allow: bool,
    /// Not one of upstream's pokes: a probe of the same policy the scenario adds (`derived:`).
    pub derived: bool,
}

impl fmt::Display for Poke {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let verdict = if self.allow { "allow" } else { "deny" };
        write!(f, "{verdict} {}{}", self.probe, if self.derived { " (derived)" } else { "" })
    }
}

/// One step, resolved: policies (rendered documents), patched objects, expectation.
#[derive(Debug, Clone, Default)]
pub struct Step {
    pub doc: String,
    /// The upstream subtest (its `t.Run` title) the step ports, if it ports one.
    pub upstream: Option<String>,
    /// NetworkPolicy and ClusterNetworkPolicy documents, rendered.
    pub policies: Vec<Value>,
    /// Namespace and Pod objects of the testbed after this step's merge patches.
    pub patched: BTreeMap<ObjKey, Value>,
    /// The expected reachability of every pair (empty, allowing all, in a step of pokes).
    pub expect: Expectation,
    /// A ported test's pokes: when there are any, the step checks exactly these.
    pub pokes: Vec<Poke>,
}

impl Step {
    /// The policies as one multi-document YAML file.
    pub fn policies_yaml(&self) -> String {
        docs_yaml(&self.policies)
    }

    /// The policies of one kind (`NetworkPolicy`, `ClusterNetworkPolicy`).
    pub fn policies_of<'a>(&'a self, kind: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
        self.policies.iter().filter(move |p| p.get("kind").and_then(Value::as_str) == Some(kind))
    }

    /// What the step checks, each probe with the verdict expected: its pokes, or else every
    /// ordered pair of its endpoints (of `base`) on the probed ports and those its lines name.
    pub fn checks(&self, base: &Base) -> Vec<(Probe, bool)> {
        if !self.pokes.is_empty() {
            return self.pokes.iter().map(|p| (p.probe.clone(), p.allow)).collect();
        }
        let mut ports: BTreeSet<PortKey> = PortKey::PROBED.into_iter().collect();
        ports.extend(self.expect.extra_ports());
        let endpoints = self.expect.endpoints(&base.pods(), &base.outside_hosts());
        all_probes(&endpoints, &ports)
            .into_iter()
            .map(|p| {
                let allow = self.expect.allows(&p);
                (p, allow)
            })
            .collect()
    }

    /// How the step is named in reports: its upstream subtest, else its doc.
    pub fn title(&self) -> &str {
        self.upstream.as_deref().unwrap_or(&self.doc)
    }
}

/// A poke line: `allow|deny NS/POD->NS/POD:PROTO/NUMBER`, one pod each side, one port.
fn parse_poke(text: &str, universe: &BTreeSet<PodId>, derived: bool) -> Result<Poke, String> {
    let line = Line::parse(text, universe)?;
    let pod = |p: &PodPat| match (&p.ns, &p.pod) {
        (Some(ns), Some(pod)) => Ok(PodId::new(ns, pod)),
        _ => Err(format!("poke {text:?}: name one pod on each side (NS/POD)")),
    };
    let port = line.port.exact().ok_or_else(|| format!("poke {text:?}: name one port (PROTO/NUMBER)"))?;
    let probe = Probe { from: pod(&line.from)?, to: pod(&line.to)?, port };
    if probe.from == probe.to {
        return Err(format!("poke {text:?}: a pod to itself is never checked"));
    }
    Ok(Poke { probe, allow: line.allow, derived })
}

/// The test a scenario ports (`upstream:`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Upstream {
    /// `owner/name` on GitHub.
    pub repo: String,
    /// The commit the scenario was ported from.
    pub commit: String,
    /// The Go file of the test.
    pub file: String,
    /// Its `ShortName`.
    pub test: String,
    /// Its `Manifests`, the files its policies are transcribed from.
    #[serde(default)]
    pub manifests: Vec<String>,
}

/// An edit of a step's state (see the module's doc).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "lowercase", deny_unknown_fields)]
enum Edit {
    /// Swaps two items of a list (upstream's rule swaps).
    Swap { object: String, path: String, at: [usize; 2] },
    /// Sets a field.
    Set { object: String, path: String, value: Value },
    /// Inserts an item into a list before index `at`.
    Insert { object: String, path: String, at: usize, value: Value },
    /// JSON merge patch (RFC 7386) of the whole object.
    Merge { object: String, value: Value },
    /// Removes a policy.
    Delete { object: String },
}

/// `KIND NAME` or `KIND NS/NAME`.
fn parse_object(s: &str) -> Result<ObjKey, String> {
    let (kind, name) =
        s.trim().split_once(' ').ok_or_else(|| format!("object {s:?} is not KIND NAME or KIND NS/NAME"))?;
    let (namespace, name) = name.trim().split_once('/').unwrap_or(("", name.trim()));
    if kind.is_empty() || name.is_empty() || name.contains('/') {
        return Err(format!("object {s:?} is not KIND NAME or KIND NS/NAME"));
    }
    Ok(ObjKey { kind: kind.to_string(), namespace: namespace.to_string(), name: name.to_string() })
}

/// The value at a dotted path (`spec.egress.0.action`), numbers indexing lists.
fn at_path<'a>(mut v: &'a mut Value, path: &str) -> Result<&'a mut Value, String> {
    for part in path.split('.') {
        v = match v {
            Value::Object(m) => m.get_mut(part).ok_or_else(|| format!("path {path:?}: no field {part:?}"))?,
            Value::Array(items) => {
                let len = items.len();
                let i: usize = part.parse().map_err(|_| format!("path {path:?}: {part:?} does not index a list"))?;
                items.get_mut(i).ok_or_else(|| format!("path {path:?}: index {i} of a list of {len}"))?
            }
            _ => return Err(format!("path {path:?}: {part:?} inside a scalar")),
        };
    }
    Ok(v)
}

/// Fills the templates of every string in `v`.
fn render_value(v: &mut Value, ips: &BTreeMap<PodId, Ipv4Addr>) -> Result<(), String> {
    match v {
        Value::String(s) => *s = render(s, ips)?,
        Value::Array(items) => items.iter_mut().try_for_each(|i| render_value(i, ips))?,
        Value::Object(m) => m.values_mut().try_for_each(|i| render_value(i, ips))?,
        _ => {}
    }
    Ok(())
}

/// The state a step leaves: its policies and the testbed objects it patched.
#[derive(Debug, Clone, Default)]
struct State {
    policies: Vec<Value>,
    patched: BTreeMap<ObjKey, Value>,
}

impl State {
    /// The state a step's `manifests` describe: policies, and merge patches of `base`'s objects.
    fn from_manifests(rendered: &str, base: &Base) -> Result<State, String> {
        let mut state = State::default();
        for doc in split_docs(rendered)? {
            let key = obj_key(&doc)?;
            match key.kind.as_str() {
                "NetworkPolicy" | "ClusterNetworkPolicy" => state.policies.push(doc),
                "Namespace" | "Pod" => {
                    let mut obj =
                        base.objects.get(&key).cloned().ok_or_else(|| format!("{key} is not a testbed object"))?;
                    merge_patch(&mut obj, &doc);
                    if state.patched.insert(key.clone(), obj).is_some() {
                        return Err(format!("{key} patched twice"));
                    }
                }
                k => return Err(format!("unexpected kind {k}")),
            }
        }
        Ok(state)
    }

    /// The object `key` of the state: a policy, or a testbed object (patched from here on).
    fn object(&mut self, key: &ObjKey, base: &Base) -> Result<&mut Value, String> {
        if let Some(at) = self.policies.iter().position(|p| obj_key(p).as_ref() == Ok(key)) {
            return Ok(&mut self.policies[at]);
        }
        if !self.patched.contains_key(key) {
            let obj = base.objects.get(key).cloned().ok_or_else(|| format!("no object {key} in the state"))?;
            self.patched.insert(key.clone(), obj);
        }
        self.patched.get_mut(key).ok_or_else(|| format!("no object {key}"))
    }

    fn apply(&mut self, edit: &Edit, base: &Base, ips: &BTreeMap<PodId, Ipv4Addr>) -> Result<(), String> {
        let rendered = |v: &Value| -> Result<Value, String> {
            let mut v = v.clone();
            render_value(&mut v, ips)?;
            Ok(v)
        };
        match edit {
            Edit::Swap { object, path, at: [i, j] } => {
                let key = parse_object(object)?;
                let list = at_path(self.object(&key, base)?, path)?;
                let items = list.as_array_mut().ok_or_else(|| format!("{key} {path}: not a list"))?;
                if *i >= items.len() || *j >= items.len() || i == j {
                    return Err(format!("{key} {path}: cannot swap {i} and {j} of {} items", items.len()));
                }
                items.swap(*i, *j);
            }
            Edit::Set { object, path, value } => {
                let key = parse_object(object)?;
                let (parent, field) =
                    path.rsplit_once('.').ok_or_else(|| format!("{key}: path {path:?} has no parent"))?;
                let value = rendered(value)?;
                match at_path(self.object(&key, base)?, parent)? {
                    Value::Object(m) => {
                        m.insert(field.to_string(), value);
                    }
                    Value::Array(items) => {
                        let len = items.len();
                        let i: usize =
                            field.parse().map_err(|_| format!("{key} {path}: {field:?} does not index a list"))?;
                        *items.get_mut(i).ok_or_else(|| format!("{key} {path}: index {i} of a list of {len}"))? = value;
                    }
                    _ => return Err(format!("{key} {path}: {parent} is a scalar")),
                }
            }
            Edit::Insert { object, path, at, value } => {
                let key = parse_object(object)?;
                let value = rendered(value)?;
                let list = at_path(self.object(&key, base)?, path)?;
                let items = list.as_array_mut().ok_or_else(|| format!("{key} {path}: not a list"))?;
                if *at > items.len() {
                    return Err(format!("{key} {path}: cannot insert at {at} of {} items", items.len()));
                }
                items.insert(*at, value);
            }
            Edit::Merge { object, value } => {
                let key = parse_object(object)?;
                let value = rendered(value)?;
                merge_patch(self.object(&key, base)?, &value);
            }
            Edit::Delete { object } => {
                let key = parse_object(object)?;
                let at = self
                    .policies
                    .iter()
                    .position(|p| obj_key(p).as_ref() == Ok(&key))
                    .ok_or_else(|| format!("no policy {key} to delete"))?;
                self.policies.remove(at);
            }
        }
        Ok(())
    }
}

/// Serialises documents as multi-document YAML.
pub fn docs_yaml(docs: &[Value]) -> String {
    let mut out = String::new();
    for d in docs {
        out.push_str("---\n");
        out.push_str(&serde_saphyr::to_string(d).unwrap_or_default());
    }
    out
}

/// A scenario, resolved against the testbed's base objects.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub file: String,
    pub name: String,
    pub doc: String,
    /// The upstream test it ports, if it ports one.
    pub upstream: Option<Upstream>,
    pub steps: Vec<Step>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStep {
    #[serde(default)]
    doc: Option<String>,
    #[serde(default)]
    upstream: Option<String>,
    #[serde(default)]
    manifests: Option<String>,
    #[serde(default)]
    edit: Option<Vec<Edit>>,
    #[serde(default)]
    expect: Option<Vec<String>>,
    #[serde(default)]
    pokes: Option<Vec<String>>,
    #[serde(default)]
    derived: Option<Vec<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    name: String,
    doc: String,
    #[serde(default)]
    upstream: Option<Upstream>,
    #[serde(default)]
    manifests: Option<String>,
    #[serde(default)]
    expect: Option<Vec<String>>,
    #[serde(default)]
    steps: Option<Vec<RawStep>>,
}

impl Scenario {
    /// Parses a scenario file's text; `base` supplies pods, IPs and the objects to patch.
    pub fn parse(file: &str, text: &str, base: &Base) -> Result<Self, String> {
        let raw: RawScenario = yaml::from_str(text).map_err(|e| format!("{file}: {e}"))?;
        let raw_steps = match (raw.steps, raw.manifests, raw.expect) {
            (Some(steps), None, None) if !steps.is_empty() => steps,
            (None, manifests, Some(expect)) => vec![RawStep {
                doc: None,
                upstream: None,
                manifests,
                edit: None,
                expect: Some(expect),
                pokes: None,
                derived: None,
            }],
            _ => return Err(format!("{file}: give either `steps` (non-empty) or `manifests` + `expect`")),
        };
        let mut universe = base.pods();
        universe.extend(base.outside_hosts());
        let mut ips = base.ips();
        ips.extend(base.outside.iter().map(|(id, ip)| (id.clone(), *ip)));
        let mut steps = Vec::new();
        let mut state = State::default();
        for (i, rs) in raw_steps.into_iter().enumerate() {
            let ctx = |e: String| format!("{file}: step {}: {e}", i + 1);
            match (rs.manifests, rs.edit) {
                (Some(_), Some(_)) => return Err(ctx("give `manifests` or `edit`, not both".into())),
                (Some(m), None) => state = State::from_manifests(&render(&m, &ips).map_err(ctx)?, base).map_err(ctx)?,
                (None, Some(edits)) => {
                    for e in &edits {
                        state.apply(e, base, &ips).map_err(ctx)?;
                    }
                }
                (None, None) => {}
            }
            let (lines, pokes) = match (rs.expect, rs.pokes, rs.derived) {
                (Some(expect), None, None) => {
                    let lines = expect.iter().map(|l| Line::parse(l, &universe)).collect::<Result<Vec<_>, _>>();
                    (lines.map_err(ctx)?, Vec::new())
                }
                (None, Some(pokes), derived) if !pokes.is_empty() => {
                    let ours = derived.unwrap_or_default();
                    let all = pokes.iter().map(|l| (l, false)).chain(ours.iter().map(|l| (l, true)));
                    let pokes =
                        all.map(|(l, d)| parse_poke(l, &universe, d)).collect::<Result<Vec<_>, _>>().map_err(ctx)?;
                    let mut seen = BTreeMap::new();
                    for p in &pokes {
                        if seen.insert(p.probe.clone(), p.allow).is_some_and(|before| before != p.allow) {
                            return Err(ctx(format!("{} is poked with both verdicts", p.probe)));
                        }
                    }
                    (Vec::new(), pokes)
                }
                _ => return Err(ctx("give `expect`, or `pokes` (non-empty) and maybe `derived`".into())),
            };
            steps.push(Step {
                doc: rs.doc.unwrap_or_default(),
                upstream: rs.upstream,
                policies: state.policies.clone(),
                patched: state.patched.clone(),
                expect: Expectation { lines },
                pokes,
            });
        }
        Ok(Scenario { file: file.to_string(), name: raw.name, doc: raw.doc, upstream: raw.upstream, steps })
    }

    /// Loads every `*.yaml` of a directory, sorted by file name.
    pub fn load_dir(dir: &Path, base: &Base) -> Result<Vec<Self>, String> {
        let mut files: Vec<_> = std::fs::read_dir(dir)
            .map_err(|e| format!("{}: {e}", dir.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
            .collect();
        files.sort();
        let mut out = Vec::new();
        let mut errors = Vec::new();
        for path in files {
            let file = path.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
            match std::fs::read_to_string(&path) {
                Ok(text) => match Scenario::parse(&file, &text, base) {
                    Ok(s) => out.push(s),
                    Err(e) => errors.push(e),
                },
                Err(e) => errors.push(format!("{file}: {e}")),
            }
        }
        if errors.is_empty() {
            Ok(out)
        } else {
            Err(errors.join("\n"))
        }
    }
}

/// Observed results of one round of probes.
pub type Observed = BTreeMap<Probe, bool>;

/// Checks (probe, expected verdict) whose observed verdict differs (or was not observed):
/// (probe, expected, observed).
pub fn wrong_checks(checks: &[(Probe, bool)], observed: &Observed) -> Vec<(Probe, bool, Option<bool>)> {
    checks
        .iter()
        .filter_map(|(p, want)| {
            let got = observed.get(p).copied();
            (got != Some(*want)).then(|| (p.clone(), *want, got))
        })
        .collect()
}

/// Probes whose observed verdict differs from the expectation (or that were not observed).
pub fn mismatches(expect: &Expectation, probes: &[Probe], observed: &Observed) -> Vec<(Probe, bool, Option<bool>)> {
    probes
        .iter()
        .filter_map(|p| {
            let want = expect.allows(p);
            let got = observed.get(p).copied();
            (got != Some(want)).then(|| (p.clone(), want, got))
        })
        .collect()
}

/// A truth table per port, like upstream's: rows are sources, columns destinations. A cell is
/// `.` (allowed, as expected), `x` (denied, as expected), `X` (expected allowed, denied),
/// `A` (expected denied, allowed), `?` (not observed), `-` (self, not probed).
pub fn truth_table(
    expect: &Expectation,
    pods: &BTreeSet<PodId>,
    ports: &BTreeSet<PortKey>,
    observed: &Observed,
) -> String {
    let mut out = String::new();
    let w = pods.iter().map(|p| p.to_string().len()).max().unwrap_or(3) + 2;
    for port in ports {
        out.push_str(&format!("{port}  (rows: from, columns: to)\n{:w$} ", ""));
        for to in pods {
            out.push_str(&format!("{:>w$}", to.to_string()));
        }
        out.push('\n');
        for from in pods {
            out.push_str(&format!("{:>w$} ", from.to_string()));
            for to in pods {
                let cell = if from == to {
                    '-'
                } else {
                    let p = Probe { from: from.clone(), to: to.clone(), port: *port };
                    match (expect.allows(&p), observed.get(&p).copied()) {
                        (true, Some(true)) => '.',
                        (false, Some(false)) => 'x',
                        (true, Some(false)) => 'X',
                        (false, Some(true)) => 'A',
                        (_, None) => '?',
                    }
                };
                out.push_str(&format!("{cell:>w$}"));
            }
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn universe() -> BTreeSet<PodId> {
        ["x", "y", "z"].iter().flat_map(|n| ["a", "b", "c"].iter().map(move |p| PodId::new(n, p))).collect()
    }

    fn base() -> Base {
        let mut b = Base::default();
        for id in universe() {
            let ip = format!("10.10.{}.{}", (id.ns.as_bytes()[0] - b'x') + 1, (id.pod.as_bytes()[0] - b'a') + 11);
            let doc: Value = yaml::from_str(&format!(
                "{{apiVersion: v1, kind: Pod, metadata: {{namespace: {}, name: {}, labels: {{pod: {}}}}}, status: {{podIP: {ip}}}}}",
                id.ns, id.pod, id.pod
            ))
            .unwrap();
            b.objects.insert(obj_key(&doc).unwrap(), doc);
        }
        let ns: Value =
            yaml::from_str("{apiVersion: v1, kind: Namespace, metadata: {name: y, labels: {ns: y}}}").unwrap();
        b.objects.insert(obj_key(&ns).unwrap(), ns);
        b
    }

    fn probe(from: &str, to: &str, port: &str) -> Probe {
        Probe { from: PodId::parse(from).unwrap(), to: PodId::parse(to).unwrap(), port: PortKey::parse(port).unwrap() }
    }

    #[test]
    fn last_matching_line_wins_and_baseline_allows() {
        let u = universe();
        let e = Expectation {
            lines: ["deny *->x/*", "allow x/b->x/a:tcp/80", "deny */b->*/c:udp/*"]
                .iter()
                .map(|l| Line::parse(l, &u).unwrap())
                .collect(),
        };
        assert!(e.allows(&probe("y/a", "y/b", "tcp/80")));
        assert!(!e.allows(&probe("y/a", "x/a", "tcp/80")));
        assert!(e.allows(&probe("x/b", "x/a", "tcp/80")));
        assert!(!e.allows(&probe("x/b", "x/a", "tcp/81")));
        assert!(!e.allows(&probe("x/b", "x/a", "udp/80")));
        assert!(!e.allows(&probe("z/b", "y/c", "udp/80")));
        assert!(e.allows(&probe("z/b", "y/c", "tcp/80")));
        assert!(e.extra_ports().is_empty());
        let s = Expectation { lines: vec![Line::parse("allow *->x/a:sctp/81", &u).unwrap()] };
        assert_eq!(s.extra_ports().into_iter().collect::<Vec<_>>(), vec![PortKey { proto: Proto::Sctp, port: 81 }]);
    }

    #[test]
    fn bad_lines_are_rejected() {
        let u = universe();
        for bad in [
            "",
            "permit *->*",
            "allow *",
            "allow x/a->q/a",
            "allow x->x/a",
            "allow *->*:tcp",
            "allow *->*:icmp/1",
            "allow *->*:tcp/70000",
            "allow *->* extra",
            "deny x/d->*",
        ] {
            assert!(Line::parse(bad, &u).is_err(), "{bad:?} accepted");
        }
        assert!(Line::parse("deny *->x/a", &u).is_ok());
        assert!(Line::parse("allow */a->z/*:udp/*", &u).is_ok());
    }

    #[test]
    fn all_probes_skip_self() {
        let ports: BTreeSet<PortKey> = PortKey::PROBED.into_iter().collect();
        let probes = all_probes(&universe(), &ports);
        assert_eq!(probes.len(), 9 * 8 * 3);
        assert!(probes.iter().all(|p| p.from != p.to));
    }

    #[test]
    fn merge_patch_follows_rfc7386() {
        let mut t: Value = yaml::from_str("{a: {b: 1, c: 2}, l: [1, 2], k: v}").unwrap();
        let p: Value = yaml::from_str("{a: {b: null, d: 3}, l: [3], n: {m: 1}}").unwrap();
        merge_patch(&mut t, &p);
        let want: Value = yaml::from_str("{a: {c: 2, d: 3}, l: [3], k: v, n: {m: 1}}").unwrap();
        assert_eq!(t, want);
    }

    #[test]
    fn templates_render_pod_addresses() {
        let ips = base().ips();
        assert_eq!(render("{{ip:y/b}}/32", &ips).unwrap(), "10.10.2.12/32");
        assert_eq!(render("c: {{net:z/c/16}} e: {{ net:y/b/4 }}", &ips).unwrap(), "c: 10.10.0.0/16 e: 0.0.0.0/4");
        assert_eq!(render("{{net:y/b/32}}", &ips).unwrap(), "10.10.2.12/32");
        assert_eq!(render("{{net:y/b/0}}", &ips).unwrap(), "0.0.0.0/0");
        for bad in ["{{ip:q/b}}", "{{net:y/b/33}}", "{{net:y/b}}", "{{foo}}", "{{ip:y/b"] {
            assert!(render(bad, &ips).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn outside_hosts_are_probed_where_a_line_names_only_them() {
        let b = base().with_outside(&[("outside/h1".into(), "10.10.200.10".into())]).unwrap();
        let (pods, outside) = (b.pods(), b.outside_hosts());
        let endpoints = |lines: &str| {
            let s = Scenario::parse("t.yaml", &format!("name: t\ndoc: d\nexpect: [{lines}]\n"), &b).unwrap();
            s.steps[0].expect.endpoints(&pods, &outside).len()
        };
        assert_eq!(endpoints(""), 9);
        assert_eq!(endpoints("deny *->*, deny */a->x/*"), 9, "patterns that match pods do not name outside hosts");
        assert_eq!(endpoints("deny x/a->outside/h1"), 10);
        assert_eq!(endpoints("deny */h1->x/*"), 10);
        assert_eq!(endpoints("deny outside/*->x/*"), 10);
        let s = Scenario::parse("t.yaml", "name: t\ndoc: d\nexpect: [deny *->*]\n", &b).unwrap();
        let all = s.steps[0].expect.endpoints(&pods, &outside);
        let probes = all_probes(&all, &PortKey::PROBED.into_iter().collect());
        assert_eq!(probes.len(), 9 * 8 * 3, "{all:?}");
        let ips = {
            let mut ips = b.ips();
            ips.extend(b.outside.clone());
            ips
        };
        assert_eq!(render("{{net:outside/h1/24}}", &ips).unwrap(), "10.10.200.0/24");
        assert!(Scenario::parse("t.yaml", "name: t\ndoc: d\nexpect: [deny outside/h9->*]\n", &b).is_err());
    }

    #[test]
    fn steps_inherit_manifests_and_patch_objects() {
        let text = r#"
name: t
doc: d
steps:
- manifests: |
    apiVersion: v1
    kind: Namespace
    metadata: {name: y, labels: {team: blue, ns: null}}
    ---
    apiVersion: networking.k8s.io/v1
    kind: NetworkPolicy
    metadata: {namespace: x, name: p}
    spec: {podSelector: {}, ingress: [{from: [{ipBlock: {cidr: "{{ip:x/a}}/32"}}]}]}
  expect: [deny *->x/*]
- expect: []
- manifests: ""
  expect: []
"#;
        let s = Scenario::parse("t.yaml", text, &base()).unwrap();
        assert_eq!(s.steps.len(), 3);
        assert_eq!(s.steps[0].policies, s.steps[1].policies);
        assert!(s.steps[0].policies_yaml().contains("10.10.1.11/32"));
        let ns = &s.steps[1].patched[&ObjKey { kind: "Namespace".into(), namespace: String::new(), name: "y".into() }];
        let labels = ns.get("metadata").and_then(|m| m.get("labels")).unwrap();
        assert_eq!(labels.get("team").and_then(Value::as_str), Some("blue"));
        assert!(labels.get("ns").is_none());
        assert!(s.steps[2].policies.is_empty() && s.steps[2].patched.is_empty());
    }

    #[test]
    fn pokes_and_edits_port_upstream_subtests() {
        let text = r#"
name: t
doc: d
upstream: {repo: r, commit: c, file: f.go, test: T, manifests: [m.yaml]}
steps:
- upstream: first
  manifests: |
    apiVersion: policy.networking.k8s.io/v1alpha2
    kind: ClusterNetworkPolicy
    metadata: {name: p}
    spec:
      tier: Admin
      priority: 5
      subject: {namespaces: {}}
      egress:
      - {name: a, action: Accept, to: [{namespaces: {}}]}
      - {name: b, action: Deny, to: [{namespaces: {}}]}
    ---
    apiVersion: networking.k8s.io/v1
    kind: NetworkPolicy
    metadata: {namespace: x, name: np}
    spec: {podSelector: {}}
  pokes: [allow x/a->y/b:tcp/80, deny x/b->y/a:udp/53]
  derived: [deny x/c->y/c:sctp/9003]
- upstream: second
  edit:
  - swap: {object: ClusterNetworkPolicy p, path: spec.egress, at: [0, 1]}
  - set: {object: ClusterNetworkPolicy p, path: spec.egress.0.action, value: Pass}
  - insert: {object: ClusterNetworkPolicy p, path: spec.egress, at: 0, value: {name: c, action: Accept, to: [{networks: ["{{ip:y/b}}/32"]}]}}
  - merge: {object: Namespace y, value: {metadata: {labels: {team: blue}}}}
  - delete: {object: NetworkPolicy x/np}
  pokes: [deny x/a->y/b:tcp/80]
- pokes: [deny x/a->y/b:tcp/81]
"#;
        let b = base();
        let s = Scenario::parse("t.yaml", text, &b).unwrap();
        assert_eq!(s.upstream.as_ref().map(|u| u.test.as_str()), Some("T"));
        let [first, second, third] = &s.steps[..] else { panic!("{} steps", s.steps.len()) };
        assert_eq!(first.title(), "first");
        assert_eq!(first.policies.len(), 2);
        assert_eq!(first.policies_of("ClusterNetworkPolicy").count(), 1);
        let checks = first.checks(&b);
        assert_eq!(
            checks,
            vec![
                (probe("x/a", "y/b", "tcp/80"), true),
                (probe("x/b", "y/a", "udp/53"), false),
                (probe("x/c", "y/c", "sctp/9003"), false)
            ]
        );
        assert_eq!(first.pokes.iter().map(|p| p.derived).collect::<Vec<_>>(), [false, false, true]);
        assert!(first.expect.lines.is_empty());

        assert_eq!(second.policies.len(), 1, "the NetworkPolicy was deleted");
        let egress = &second.policies[0]["spec"]["egress"];
        let names: Vec<&str> = egress.as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["c", "b", "a"]);
        assert_eq!(egress[1]["action"], "Pass");
        assert_eq!(egress[0]["to"][0]["networks"][0], "10.10.2.12/32");
        let y = ObjKey { kind: "Namespace".into(), namespace: String::new(), name: "y".into() };
        assert_eq!(second.patched[&y]["metadata"]["labels"]["team"], "blue");
        assert_eq!(second.patched[&y]["metadata"]["labels"]["ns"], "y", "a merge keeps the other labels");
        assert_eq!((third.policies.clone(), third.patched.clone()), (second.policies.clone(), second.patched.clone()));
        assert_eq!(third.title(), "", "no upstream, no doc");

        let head = "name: t\ndoc: d\nsteps:\n- manifests: |\n    apiVersion: networking.k8s.io/v1\n    kind: NetworkPolicy\n    metadata: {namespace: x, name: np}\n    spec: {podSelector: {}}\n  pokes: [deny x/a->y/b:tcp/80]\n";
        Scenario::parse("t.yaml", head, &b).unwrap();
        for bad in [
            "- pokes: [deny x/*->y/b:tcp/80]",
            "- pokes: [deny x/a->y/b]",
            "- pokes: [deny x/a->x/a:tcp/80]",
            "- pokes: [deny x/a->y/b:tcp/80, allow x/a->y/b:tcp/80]",
            "- pokes: []",
            "- {pokes: [deny x/a->y/b:tcp/80], expect: []}",
            "- {derived: [deny x/a->y/b:tcp/80]}",
            "- {manifests: \"\", edit: [], pokes: [deny x/a->y/b:tcp/80]}",
            "- {edit: [{swap: {object: NetworkPolicy x/nope, path: spec, at: [0, 1]}}], pokes: [deny x/a->y/b:tcp/80]}",
            "- {edit: [{swap: {object: NetworkPolicy x/np, path: spec.ingress, at: [0, 1]}}], pokes: [deny x/a->y/b:tcp/80]}",
            "- {edit: [{delete: {object: Namespace y}}], pokes: [deny x/a->y/b:tcp/80]}",
            "- {edit: [{set: {object: NetworkPolicy np, path: spec.x, value: 1}}], pokes: [deny x/a->y/b:tcp/80]}",
            "- {edit: [{rename: {object: NetworkPolicy x/np}}], pokes: [deny x/a->y/b:tcp/80]}",
        ] {
            let text = format!("{head}{bad}\n");
            assert!(Scenario::parse("t.yaml", &text, &b).is_err(), "accepted:\n{text}");
        }
    }

    #[test]
    fn bad_scenarios_are_rejected() {
        let b = base();
        let policy = "apiVersion: networking.k8s.io/v1\n  kind: NetworkPolicy\n  metadata: {namespace: x, name: p}\n  spec: {podSelector: {}}";
        for bad in [
            "name: t\ndoc: d\n".to_string(),
            "name: t\ndoc: d\nexpect: []\nsteps: [{expect: []}]\n".to_string(),
            "name: t\ndoc: d\nsteps: []\n".to_string(),
            "name: t\ndoc: d\nexpect: []\nbogus: 1\n".to_string(),
            "name: t\ndoc: d\nmanifests: |\n  apiVersion: v1\n  kind: Pod\n  metadata: {namespace: x, name: zz}\nexpect: []\n".to_string(),
            "name: t\ndoc: d\nmanifests: |\n  apiVersion: v1\n  kind: Service\n  metadata: {namespace: x, name: s}\nexpect: []\n".to_string(),
            format!("name: t\ndoc: d\nmanifests: |\n  {policy}\nexpect: [deny x/a]\n"),
        ] {
            assert!(Scenario::parse("t.yaml", &bad, &b).is_err(), "accepted:\n{bad}");
        }
        let good = format!("name: t\ndoc: d\nmanifests: |\n  {policy}\nexpect: [deny *->x/a]\n");
        Scenario::parse("t.yaml", &good, &b).unwrap();
    }
}
