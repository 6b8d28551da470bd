//! What the end-to-end tests need beside the npagent fixture (`support::agent`): a lock that
//! serialises the timed tests, verdicts beyond the prober: SCTP (the test kernel has none)
//! and quick per-pair checks through `ofproto/trace`, which reads the switch's flow tables,
//! not its datapath cache; `npagent flows` held against the bridge; the agent's manifests
//! directory as a scenario's steps make it ([`ManifestDir`]); and a scenario's step run
//! against the agent until its checks hold ([`run_step`]), on either testbed layout
//! ([`Layout`]).
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::scenario::{
    docs_yaml, obj_key, split_docs, truth_table, wrong_checks, Base, ObjKey, Observed, PodId, PortKey, Probe, Proto,
    Scenario, Step,
};
use crate::support::agent::{npagent_bin, Agent};
use crate::support::testbed::{Pod, Port, Testbed};

/// The repository's scenario directory.
pub fn scenarios_dir() -> PathBuf {
    Layout::Standard.scenarios_dir()
}

/// A testbed layout (`testbed/testbed up --layout`) and the scenarios written for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// The netpol e2e model's nine pods and the outside hosts; `testbed/scenarios`.
    Standard,
    /// The upstream ClusterNetworkPolicy conformance base; `testbed/conformance`, the ported
    /// tests.
    Conformance,
}

impl Layout {
    /// The directory of its scenarios in the repository.
    pub fn scenarios_dir(self) -> PathBuf {
        let dir = match self {
            Layout::Standard => "testbed/scenarios",
            Layout::Conformance => "testbed/conformance",
        };
        Path::new(env!("CARGO_MANIFEST_DIR")).join(dir)
    }

    /// Its Namespace and Pod manifests as committed (what the testbed writes for it).
    pub fn manifests_dir(self) -> PathBuf {
        let dir = match self {
            Layout::Standard => "testbed/manifests",
            Layout::Conformance => "testbed/conformance/manifests",
        };
        Path::new(env!("CARGO_MANIFEST_DIR")).join(dir)
    }

    /// The ports its pods listen on, probed with real packets; other ports of a check are
    /// traced (SCTP).
    pub fn served_ports(self) -> BTreeSet<PortKey> {
        match self {
            Layout::Standard => PortKey::PROBED.into_iter().collect(),
            Layout::Conformance => ["tcp/80", "tcp/8080", "udp/53", "udp/5353"]
                .into_iter()
                .map(|p| PortKey::parse(p).unwrap_or_else(|e| panic!("{e}")))
                .collect(),
        }
    }

    /// A fresh testbed of this layout (the standard one with its outside hosts).
    fn start_testbed(self) -> Testbed {
        match self {
            Layout::Standard => Testbed::start_with_outside(),
            Layout::Conformance => Testbed::start_conformance(),
        }
    }
}

/// The testbed the scenarios run on, with its outside hosts, and the scenarios over it.
pub struct ScenarioBed {
    pub tb: Testbed,
    /// The agent's manifests directory, which each step rewrites.
    pub dir: ManifestDir,
    /// Each outside host's id and address.
    pub outside: Vec<(String, String)>,
    /// The testbed's objects and outside hosts, the scenarios' base.
    pub base: Base,
    /// Every scenario of the layout's directory.
    pub scenarios: Vec<Scenario>,
}

impl ScenarioBed {
    /// Starts the standard testbed with its outside hosts and loads testbed/scenarios over it.
    pub fn start() -> ScenarioBed {
        ScenarioBed::start_layout(Layout::Standard)
    }

    /// Starts a testbed of `layout` and loads its scenarios over it.
    pub fn start_layout(layout: Layout) -> ScenarioBed {
        let tb = layout.start_testbed();
        let dir = ManifestDir::open(&tb.manifests_dir());
        let outside: Vec<(String, String)> = tb.outside_hosts().iter().map(|h| (h.id(), h.ip.clone())).collect();
        let base = dir.base().with_outside(&outside).unwrap_or_else(|e| panic!("{e}"));
        let scenarios = Scenario::load_dir(&layout.scenarios_dir(), &base).unwrap_or_else(|e| panic!("{e}"));
        ScenarioBed { tb, dir, outside, base, scenarios }
    }
}

/// How long after writing a step's manifests a matching probe still has to be confirmed (the
/// agent's convergence bound is 1 s; a match earlier than that may be the previous state).
pub const SETTLE: Duration = Duration::from_millis(1200);
/// Give up on a step this long after writing its manifests.
pub const DEADLINE: Duration = Duration::from_secs(5);

/// Observes every probe of `checks`: real packets on the `served` ports (every source of
/// those probes to every destination, on every one of those ports, at once), traces for the
/// others. Returns the verdicts and the traces' errors.
pub fn observe(tb: &Testbed, served: &BTreeSet<PortKey>, checks: &[(Probe, bool)]) -> (Observed, Vec<String>) {
    tb.sandbox.flush_datapath();
    let (real, traced): (Vec<&Probe>, Vec<&Probe>) =
        checks.iter().map(|(p, _)| p).partition(|p| served.contains(&p.port));
    let mut observed = Observed::new();
    if !real.is_empty() {
        let ids = |pick: fn(&Probe) -> String| -> Vec<String> {
            real.iter().map(|p| pick(p)).collect::<BTreeSet<_>>().into_iter().collect()
        };
        let (from, to) = (ids(|p| p.from.to_string()), ids(|p| p.to.to_string()));
        let ports: Vec<String> =
            real.iter().map(|p| p.port).collect::<BTreeSet<_>>().iter().map(ToString::to_string).collect();
        let from: Vec<&str> = from.iter().map(String::as_str).collect();
        let to: Vec<&str> = to.iter().map(String::as_str).collect();
        let reach = tb.probe_ports(&from, &to, &ports);
        for p in real {
            let key = (p.from.to_string(), p.to.to_string(), p.port.to_string());
            if let Some(v) = reach.get(&key) {
                observed.insert(p.clone(), *v);
            }
        }
    }
    let mut errors = Vec::new();
    if !traced.is_empty() {
        let traced: Vec<Probe> = traced.into_iter().cloned().collect();
        for (p, v) in trace_all(tb, &tb.hosts(), &traced) {
            match v {
                Ok(v) => {
                    observed.insert(p, v);
                }
                Err(e) => errors.push(e),
            }
        }
    }
    (observed, errors)
}

/// Outcome of one step.
pub struct StepResult {
    pub ok: bool,
    /// When the checks first held for good (or, failed, how long it tried).
    pub elapsed: Duration,
    /// What went wrong, to print.
    pub report: String,
}

/// Makes `dir` hold `step`'s state and observes the step's checks (see [`Step::checks`]) until
/// they hold and keep holding after [`SETTLE`], or [`DEADLINE`] passes; then `npagent flows`
/// has to print exactly the bridge's flows. A failure's report names every wrong check (a
/// truth table per port for a matrix step, every poke of a step of pokes), the flows and the
/// agent's log.
pub fn run_step(
    tb: &Testbed,
    agent: &Agent,
    base: &Base,
    served: &BTreeSet<PortKey>,
    dir: &mut ManifestDir,
    step: &Step,
) -> StepResult {
    let checks = step.checks(base);
    let start = Instant::now();
    dir.apply(step);
    let mut first_match: Option<Duration> = None;
    loop {
        let (observed, errors) = observe(tb, served, &checks);
        let wrong = wrong_checks(&checks, &observed);
        let elapsed = start.elapsed();
        if wrong.is_empty() && errors.is_empty() {
            let at = *first_match.get_or_insert(elapsed);
            if elapsed >= SETTLE {
                let differ = flows_command_diff(tb, &dir.dir);
                let report = if differ.is_empty() {
                    String::new()
                } else {
                    format!("`npagent flows` and the bridge differ:\n  {}\n", differ.join("\n  "))
                };
                return StepResult { ok: differ.is_empty(), elapsed: at, report };
            }
            std::thread::sleep(SETTLE.saturating_sub(elapsed));
            continue;
        }
        first_match = None;
        if elapsed >= DEADLINE {
            let v = |b: bool| if b { "allow" } else { "deny" };
            let mut report =
                format!("{} of {} probes wrong after {:.1} s:\n", wrong.len(), checks.len(), elapsed.as_secs_f64());
            for (p, want, got) in &wrong {
                report.push_str(&format!("  {p}: expected {}, observed {}\n", v(*want), got.map_or("nothing", v)));
            }
            for e in &errors {
                report.push_str(&format!("  error: {e}\n"));
            }
            if step.pokes.is_empty() {
                let mut ports: BTreeSet<PortKey> = PortKey::PROBED.into_iter().collect();
                ports.extend(step.expect.extra_ports());
                let endpoints = step.expect.endpoints(&base.pods(), &base.outside_hosts());
                report.push_str("truth tables (. allowed, x denied, as expected; X denied but expected allowed; A allowed but expected denied):\n");
                report.push_str(&truth_table(&step.expect, &endpoints, &ports, &observed));
            } else {
                report.push_str("pokes (ok, or WRONG):\n");
                for poke in &step.pokes {
                    let got = observed.get(&poke.probe).copied();
                    let mark = if got == Some(poke.allow) { "ok   " } else { "WRONG" };
                    report.push_str(&format!("  {mark} {poke}: observed {}\n", got.map_or("nothing", v)));
                }
            }
            report.push_str("flows:\n");
            for f in tb.sandbox.dump_flows() {
                report.push_str(&format!("  {f}\n"));
            }
            report.push_str(&format!("agent log (tail):\n{}\n", agent.log_tail(30)));
            return StepResult { ok: false, elapsed, report };
        }
    }
}

/// An exclusive lock shared by every end-to-end test that measures convergence, across test
/// processes (cargo-nextest runs each test in a process of its own): on two cores, a second
/// testbed probing at the same time would make the timings meaningless. A directory created
/// atomically, holding the owner's pid; a lock whose owner is gone is taken over. Released on
/// drop.
pub struct TimingLock(PathBuf);

pub fn timing_lock() -> TimingLock {
    let dir = std::env::temp_dir().join("npagent-e2e-timing.lock");
    loop {
        match fs::create_dir(&dir) {
            Ok(()) => {
                let _ = fs::write(dir.join("pid"), std::process::id().to_string());
                return TimingLock(dir);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                let owner = fs::read_to_string(dir.join("pid")).unwrap_or_default();
                let owner = owner.trim();
                // A lock without pid may be a second old (its owner is writing it); one whose
                // owner has exited is stale.
                let stale = if owner.is_empty() {
                    fs::metadata(&dir)
                        .and_then(|m| m.modified())
                        .is_ok_and(|t| t.elapsed().unwrap_or_default() > Duration::from_secs(5))
                } else {
                    !Path::new("/proc").join(owner).exists()
                };
                if stale {
                    let _ = fs::remove_dir_all(&dir);
                } else {
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
            Err(e) => panic!("create {}: {e}", dir.display()),
        }
    }
}

impl Drop for TimingLock {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Whether `$NPA_SCENARIOS` (words, comma-separated) selects scenario `s`: its file name
/// contains one of the words, or the variable is unset or empty.
pub fn selected(s: &Scenario) -> bool {
    match std::env::var("NPA_SCENARIOS") {
        Ok(words) if !words.trim().is_empty() => words.split(',').any(|w| s.file.contains(w.trim())),
        _ => true,
    }
}

/// The prober's port for a scenario's port, if the prober probes it (TCP 80 and 81, UDP 80).
pub fn probed_port(k: PortKey) -> Option<Port> {
    match (k.proto, k.port) {
        (Proto::Tcp, 80) => Some(Port::Tcp80),
        (Proto::Tcp, 81) => Some(Port::Tcp81),
        (Proto::Udp, 80) => Some(Port::Udp80),
        _ => None,
    }
}

/// The verdict of the switch's flow tables for the first packet of a new connection
/// (`ofproto/trace` with conntrack answering "new"): true when the packet is output to a
/// port, false when it is dropped (or only sent to the controller).
pub fn trace_verdict(tb: &Testbed, from: &Pod, to: &Pod, proto: Proto, port: u16) -> Result<bool, String> {
    use npagent::explain::trace::{flow, TracePacket};
    let protocol = match proto {
        Proto::Tcp => npagent::model::Protocol::Tcp,
        Proto::Udp => npagent::model::Protocol::Udp,
        Proto::Sctp => npagent::model::Protocol::Sctp,
    };
    let mac = |m: &str| -> Result<[u8; 6], String> {
        npagent::host::ovsdb::value::parse_mac(m).ok_or_else(|| format!("bad MAC {m}"))
    };
    let ip = |a: &str| -> Result<std::net::IpAddr, String> { a.parse().map_err(|_| format!("bad address {a}")) };
    // The same packet `npagent explain --trace` traces, with its new connection's tuple.
    let flow = flow(&TracePacket {
        in_port: from.ofport,
        src_mac: mac(&from.mac)?,
        dst_mac: mac(&to.mac)?,
        src: ip(&from.ip)?,
        dst: ip(&to.ip)?,
        transport: Some((protocol, port)),
    });
    let out = Command::new("ovs-appctl")
        .arg("-t")
        .arg(tb.sandbox.dir.join("vswitchd.ctl"))
        .args(["ofproto/trace", "br-int", &flow, "--ct-next", "trk,new"])
        .output()
        .map_err(|e| format!("ovs-appctl: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!("ofproto/trace {flow}: {}", String::from_utf8_lossy(&out.stderr)));
    }
    let actions = npagent::explain::trace::datapath_actions(&text)
        .ok_or_else(|| format!("ofproto/trace {flow}: no datapath actions in\n{text}"))?;
    Ok(npagent::explain::trace::outputs(actions))
}

/// Trace verdicts of many probes, a few threads at a time.
pub fn trace_all(tb: &Testbed, pods: &[Pod], probes: &[Probe]) -> Vec<(Probe, Result<bool, String>)> {
    let find = |id: &PodId| pods.iter().find(|p| p.namespace == id.ns && p.name == id.pod);
    let chunks: Vec<&[Probe]> = probes.chunks(probes.len().div_ceil(8).max(1)).collect();
    std::thread::scope(|s| {
        let handles: Vec<_> = chunks
            .into_iter()
            .map(|chunk| {
                s.spawn(move || {
                    chunk
                        .iter()
                        .map(|p| {
                            let v = match (find(&p.from), find(&p.to)) {
                                (Some(f), Some(t)) => trace_verdict(tb, f, t, p.port.proto, p.port.port),
                                _ => Err(format!("{p}: pod not in the testbed")),
                            };
                            (p.clone(), v)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().expect("trace thread")).collect()
    })
}

/// One expected verdict of a running agent: (from, to, protocol, port, reachable?).
pub type Check<'a> = (&'a str, &'a str, Proto, u16, bool);

/// The checks whose trace verdict differs from what they expect, described.
pub fn wrong_verdicts(tb: &Testbed, checks: &[Check]) -> Vec<String> {
    let mut wrong = Vec::new();
    for (from, to, proto, port, want) in checks {
        match trace_verdict(tb, &tb.pod(from), &tb.pod(to), *proto, *port) {
            Ok(got) if got == *want => {}
            Ok(got) => wrong.push(format!("{from} -> {to} {}/{port}: expected {want}, traced {got}", proto.name())),
            Err(e) => wrong.push(e),
        }
    }
    wrong
}

/// Polls trace verdicts until every check holds; returns how long it took. Panics, with the
/// flows and the agent's log, after `limit` or when the agent has died.
pub fn wait_verdicts(tb: &Testbed, agent: &mut Agent, what: &str, checks: &[Check], limit: Duration) -> Duration {
    let start = Instant::now();
    loop {
        let wrong = wrong_verdicts(tb, checks);
        let elapsed = start.elapsed();
        if wrong.is_empty() {
            return elapsed;
        }
        if elapsed > limit || !agent.alive() {
            panic!(
                "{what}: not converged after {:.2} s (agent alive: {}):\n  {}\nflows:\n{}\nagent log:\n{}",
                elapsed.as_secs_f64(),
                agent.alive(),
                wrong.join("\n  "),
                tb.sandbox.dump_flows().join("\n"),
                agent.log_tail(30)
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The same checks with real packets (the prober's TCP 80/81 and UDP 80; others are skipped).
pub fn confirm(tb: &Testbed, what: &str, checks: &[Check]) {
    tb.sandbox.flush_datapath();
    let from: Vec<&str> = checks.iter().map(|c| c.0).collect();
    let to: Vec<&str> = checks.iter().map(|c| c.1).collect();
    let r = tb.probe(&from, &to);
    for (f, t, proto, port, want) in checks {
        let p = match (proto, port) {
            (Proto::Tcp, 80) => Port::Tcp80,
            (Proto::Tcp, 81) => Port::Tcp81,
            (Proto::Udp, 80) => Port::Udp80,
            _ => continue,
        };
        assert_eq!(r.get(f, t, p), *want, "{what}: real packets {f} -> {t} {p} disagree with the trace\n{r}");
    }
}

/// How `npagent flows` (on the testbed's switch and OVSDB, with the manifests in `manifests`)
/// differs from `ovs-ofctl dump-flows --no-stats --names`: one line per flow only one of them
/// has; empty when they agree. The bridge is read again a few times over a second, in case
/// the agent was still committing a bundle.
pub fn flows_command_diff(tb: &Testbed, manifests: &Path) -> Vec<String> {
    let sb = &tb.sandbox;
    let mut differ = Vec::new();
    for _ in 0..5 {
        let out = crate::support::node_env(&mut Command::new(npagent_bin()))
            .args(["flows", "--ofp", &sb.ofp, "--ovsdb", &sb.ovsdb, "--manifests"])
            .arg(manifests)
            .env("NO_COLOR", "1")
            .output()
            .expect("run npagent flows");
        if !out.status.success() {
            return vec![format!("npagent flows failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr))];
        }
        let mut printed: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect();
        printed.sort();
        let bridge = sb.dump_flows();
        differ = printed
            .iter()
            .filter(|f| bridge.binary_search(f).is_err())
            .map(|f| format!("only in `npagent flows`: {f}"))
            .chain(
                bridge.iter().filter(|f| printed.binary_search(f).is_err()).map(|f| format!("only on the bridge: {f}")),
            )
            .collect();
        if differ.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    differ
}

/// npagent enforcing the manifests directory of a testbed of its own, and the verdict checks
/// the end-to-end tests make of it. A test file gives it methods of its own through an alias
/// (`type Live = harness::Enforcing;`).
pub struct Enforcing {
    /// The pods and their switch.
    pub tb: Testbed,
    /// npagent, on the testbed's manifests directory.
    pub agent: Agent,
    /// Taken before the testbed started, released after it and the agent are gone.
    timing: Option<TimingLock>,
}

impl Enforcing {
    /// A fresh testbed with `manifests` (file name, text) written into its manifests
    /// directory, and npagent started on it by `start_agent` ([`spawn_agent`], or
    /// `Agent::start` with an audit log). With `timed`, the [`timing_lock`] is taken first and
    /// held until drop. Waits for nothing: [`Enforcing::enforces`] does.
    pub fn launch(timed: bool, manifests: &[(&str, &str)], start_agent: impl FnOnce(&Testbed) -> Agent) -> Enforcing {
        let timing = timed.then(timing_lock);
        let tb = Testbed::start();
        for (file, text) in manifests {
            crate::support::write_atomic(&tb.manifests_dir().join(file), text);
        }
        let agent = start_agent(&tb);
        Enforcing { tb, agent, timing }
    }

    /// An agent already running on `tb`.
    pub fn with(tb: Testbed, agent: Agent) -> Enforcing {
        Enforcing { tb, agent, timing: None }
    }

    /// Waits for the trace verdicts (see [`wait_verdicts`]); returns how long that took.
    pub fn wait_verdicts(&mut self, what: &str, checks: &[Check], limit: Duration) -> Duration {
        wait_verdicts(&self.tb, &mut self.agent, what, checks, limit)
    }

    /// Waits for the trace verdicts, at most `limit`, then confirms them with real packets;
    /// returns how long the verdicts took.
    pub fn enforces(&mut self, what: &str, checks: &[Check], limit: Duration) -> Duration {
        let took = self.wait_verdicts(what, checks, limit);
        self.confirm(what, checks);
        took
    }

    /// The checks with real packets (see [`confirm`]).
    pub fn confirm(&self, what: &str, checks: &[Check]) {
        confirm(&self.tb, what, checks);
    }

    /// The checks whose trace verdict is wrong now (see [`wrong_verdicts`]).
    pub fn wrong_verdicts(&self, checks: &[Check]) -> Vec<String> {
        wrong_verdicts(&self.tb, checks)
    }

    /// Writes (or replaces) `file` in the manifests directory, atomically.
    pub fn write_manifest(&self, file: &str, text: &str) {
        crate::support::write_atomic(&self.tb.manifests_dir().join(file), text);
    }

    /// Removes `file` from the manifests directory.
    pub fn remove_manifest(&self, file: &str) {
        let path = self.tb.manifests_dir().join(file);
        fs::remove_file(&path).unwrap_or_else(|e| panic!("remove {}: {e}", path.display()));
    }
}

/// `npagent run` on the testbed's manifests with `extra` arguments, its log `npagent.log` in
/// the sandbox's directory; returns at once.
pub fn spawn_agent(tb: &Testbed, extra: &[&str]) -> Agent {
    Agent::spawn(&tb.sandbox, &tb.manifests_dir(), &tb.sandbox.dir.join("npagent.log"), extra)
}

/// The agent's manifests directory: the testbed's own Namespace and Pod files, the scenario's
/// policies in one extra file, and patched copies of the testbed's files while a step
/// patches their objects.
pub struct ManifestDir {
    /// The directory.
    pub dir: PathBuf,
    /// Original text and documents of every testbed file.
    files: BTreeMap<PathBuf, (String, Vec<(ObjKey, Value)>)>,
    /// What each file holds now, where it differs from the original.
    changed: BTreeMap<PathBuf, String>,
    policies: PathBuf,
}

impl ManifestDir {
    pub fn open(dir: &Path) -> ManifestDir {
        let mut files = BTreeMap::new();
        for entry in std::fs::read_dir(dir).expect("read manifests dir") {
            let path = entry.expect("dir entry").path();
            if !path.extension().is_some_and(|x| x == "yaml" || x == "yml") {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("read manifest");
            let docs = split_docs(&text)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
                .into_iter()
                .map(|d| (obj_key(&d).unwrap_or_else(|e| panic!("{}: {e}", path.display())), d))
                .collect();
            files.insert(path, (text, docs));
        }
        ManifestDir { dir: dir.to_path_buf(), files, changed: BTreeMap::new(), policies: dir.join("zz-scenario.yaml") }
    }

    /// The testbed's objects, as the scenarios' base.
    pub fn base(&self) -> Base {
        let mut base = Base::default();
        for (_, docs) in self.files.values() {
            for (k, v) in docs {
                base.objects.insert(k.clone(), v.clone());
            }
        }
        base
    }

    /// Makes the directory hold `step`'s state (only files that change are written).
    pub fn apply(&mut self, step: &Step) {
        for (path, (text, docs)) in &self.files {
            let patched = docs.iter().any(|(k, _)| step.patched.contains_key(k));
            let want = if patched {
                let objs: Vec<Value> = docs.iter().map(|(k, v)| step.patched.get(k).unwrap_or(v).clone()).collect();
                docs_yaml(&objs)
            } else {
                text.clone()
            };
            let now = self.changed.get(path).unwrap_or(text);
            if *now != want {
                crate::support::write_atomic(path, &want);
            }
            if patched {
                self.changed.insert(path.clone(), want);
            } else {
                self.changed.remove(path);
            }
        }
        if step.policies.is_empty() {
            let _ = std::fs::remove_file(&self.policies);
        } else {
            let want = step.policies_yaml();
            if std::fs::read_to_string(&self.policies).ok().as_deref() != Some(want.as_str()) {
                crate::support::write_atomic(&self.policies, &want);
            }
        }
    }

    /// Back to the testbed's own files and no policies.
    pub fn reset(&mut self) {
        for path in std::mem::take(&mut self.changed).into_keys() {
            if let Some((text, _)) = self.files.get(&path) {
                crate::support::write_atomic(&path, text);
            }
        }
        let _ = std::fs::remove_file(&self.policies);
    }
}

/// Waits, at most `limit`, until every one of `probes` is allowed (no policy yet: npagent's
/// pipeline is in place, and every pod's listeners answer on every port probed); returns how
/// long that took. Panics, naming what is still unreachable, with the flows and the agent's
/// log, after `limit` or when the agent has died.
pub fn wait_all_allowed(
    tb: &Testbed,
    agent: &mut Agent,
    served: &BTreeSet<PortKey>,
    probes: &[Probe],
    limit: Duration,
) -> Duration {
    let checks: Vec<(Probe, bool)> = probes.iter().map(|p| (p.clone(), true)).collect();
    let started = Instant::now();
    loop {
        let (observed, errors) = observe(tb, served, &checks);
        let wrong = wrong_checks(&checks, &observed);
        if wrong.is_empty() && errors.is_empty() {
            return started.elapsed();
        }
        if started.elapsed() > limit || !agent.alive() {
            let wrong: Vec<String> = wrong.iter().map(|(p, _, got)| format!("{p}: observed {got:?}")).collect();
            panic!(
                "npagent did not make the testbed reachable within {limit:?} (alive: {}): {} of {} probes not allowed:\n  {}\n  {}\n{}\nflows:\n{}",
                agent.alive(),
                wrong.len(),
                checks.len(),
                wrong.join("\n  "),
                errors.join("\n  "),
                agent.log_tail(40),
                tb.sandbox.dump_flows().join("\n")
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Runs the scenarios `$NPA_SCENARIOS` selects ([`selected`]), one after the other, each step
/// with [`run_step`], printing `ok` or `FAIL` per step (a failure with the scenario's doc, the
/// upstream test it ports and the step's report); a scenario stops at its first failing step
/// and the directory is reset after each. Returns the failed steps' labels (`FILE step N
/// (TITLE)`); stops early when the agent has exited.
pub fn run_scenarios(
    tb: &Testbed,
    agent: &mut Agent,
    base: &Base,
    served: &BTreeSet<PortKey>,
    dir: &mut ManifestDir,
    scenarios: &[Scenario],
) -> Vec<String> {
    let mut failed = Vec::new();
    let mut passed = 0;
    let mut slowest = (Duration::ZERO, String::new());
    for s in scenarios.iter().filter(|s| selected(s)) {
        let mut ok = true;
        for (i, step) in s.steps.iter().enumerate() {
            let r = run_step(tb, agent, base, served, dir, step);
            let label = if s.steps.len() > 1 {
                format!("{} step {} ({})", s.file, i + 1, step.title())
            } else {
                s.file.clone()
            };
            if r.ok && r.elapsed > slowest.0 {
                slowest = (r.elapsed, label.clone());
            }
            if r.ok {
                eprintln!(
                    "ok    {label} (matched {:.2} s after the write, probe rounds included)",
                    r.elapsed.as_secs_f64()
                );
            } else {
                let upstream = s.upstream.as_ref().map_or(String::new(), |u| {
                    format!("\n  upstream: {} ({}@{}, {})", u.test, u.repo, u.commit, u.file)
                });
                eprintln!("FAIL  {label}\n  {}{upstream}\n{}", s.doc.trim(), r.report);
                failed.push(label);
                ok = false;
                break;
            }
            if !agent.alive() {
                eprintln!("npagent exited:\n{}", agent.log_tail(40));
                failed.push(format!("{label}: npagent exited"));
                ok = false;
                break;
            }
        }
        if ok {
            passed += 1;
        }
        dir.reset();
        if !agent.alive() {
            break;
        }
    }
    eprintln!(
        "{passed} scenarios passed, {} failed; slowest match {:.2} s ({})",
        failed.len(),
        slowest.0.as_secs_f64(),
        slowest.1
    );
    failed
}
