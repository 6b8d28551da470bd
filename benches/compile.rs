//! Compiler benchmarks at the scale target: 10,000 NetworkPolicies, 100,000 pods, 1,000
//! namespaces, 100 local pods (synthetic cluster of `npagent::compiler::synthetic`).
//! `BENCH_CLUSTER=egress` (default) is `synthetic::cluster`, an egress section in a third of the
//! policies; `BENCH_CLUSTER=baseline` is `synthetic::cluster_without_egress`, the same cluster
//! Ingress-only. Benchmark ids carry the cluster's name (`compiler/full_compile/egress`).
//!
//! - `full_compile`: a fresh compiler over the whole cluster.
//! - `policy_change`: one policy changed (ingress ports toggled), recompute + diff of the
//!   touched keys.
//! - `pod_relabel`: one pod relabelled in and out of a peer selector, recompute + diff.
//! - `pod_relabel_broad`: the same against a policy whose peer selects the front tier of every
//!   namespace (~33,000 source pods, as many clause flows).
//! - egress cluster only: `egress_change` (ns110/np9, which selects ns110's local pod: its first
//!   egress rule toggles TCP 5432 <-> 5433), `egress_pod_relabel` (remote pod ns110/pod5 in and
//!   out of that rule's `to`), `named_egress_change` (ns110/np0, whose egress rule's named port
//!   resolves on ~130 destination pods: a numeric port added and removed) and
//!   `named_egress_pod_relabel` (ns111/pod4, a destination of that rule, relabelled out of and
//!   back into its `to`: the policy is recompiled, not patched).
//!
//! - `BENCH_STAGED=N` (N > 0): every case above also runs on the same cluster with N
//!   StagedNetworkPolicies (`synthetic::add_staged`; ids `.../egress+staged1000`), in the same
//!   process, one after the other, and one more case runs there: `staged_change` (the staged
//!   edit of ns0/np0, which touches ns0's local pod, toggles its first ingress port 8443 <-> 8444).
//!
//! After the criterion groups, a plain loop prints p50/p99/max of the incremental paths and
//! the process's peak RSS (VmHWM), which criterion does not report.
//! `BENCH_SCALE=small` runs a 10x smaller cluster.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

use criterion::{BenchmarkId, Criterion};
use npagent::compiler::synthetic::{
    add_staged, cluster, cluster_without_egress, ns_name, oref, pod_name, tcp, touched_ports, ClusterSpec,
};
use npagent::compiler::{compile, diff_keys, is_staged_flow, Change, Compiler, Config, FlowTable, IdAllocator};
use npagent::model::Model;
use std::hint::black_box;
use std::time::{Duration, Instant};

fn spec() -> ClusterSpec {
    match std::env::var("BENCH_SCALE").as_deref() {
        Ok("small") => ClusterSpec { namespaces: 100, pods_per_ns: 100, policies_per_ns: 10, local_pods: 10 },
        _ => ClusterSpec::TARGET,
    }
}

/// `BENCH_CLUSTER`: `egress` (default) or `baseline`.
fn egress() -> bool {
    match std::env::var("BENCH_CLUSTER").as_deref() {
        Ok("baseline") => false,
        Ok("egress") | Err(_) => true,
        Ok(other) => panic!("BENCH_CLUSTER={other:?}: egress or baseline"),
    }
}

/// `BENCH_STAGED`: how many StagedNetworkPolicies the second cluster gets (0: no second cluster).
fn staged() -> usize {
    std::env::var("BENCH_STAGED").ok().map(|s| s.parse().expect("BENCH_STAGED=N")).unwrap_or(0)
}

type Case = (&'static str, fn(&mut Toggle) -> usize);

struct Toggle {
    model: Model,
    compiler: Compiler,
    installed: FlowTable,
    n: u64,
}

impl Toggle {
    fn new(model: Model) -> Self {
        let compiler = compile(&model, Config::default(), IdAllocator::new(60), 0);
        let installed = compiler.flows().clone();
        Toggle { model, compiler, installed, n: 0 }
    }

    /// Toggles the ports of a policy that selects a local pod; returns the flow_mod count.
    fn policy_change(&mut self) -> usize {
        self.n += 1;
        let r = oref(&ns_name(0), "np0");
        let p = self.model.policies.get_mut(&r).expect("np0");
        p.ingress[0].ports = vec![tcp(if self.n % 2 == 0 { 80 } else { 8080 })];
        self.apply(&[Change::Policy(r)])
    }

    /// Relabels a remote pod in ns0 into and out of np0's peer selector (app=app1).
    fn pod_relabel(&mut self) -> usize {
        self.n += 1;
        let r = oref(&ns_name(0), &pod_name(5));
        let app = if self.n % 2 == 0 { "app5" } else { "app1" };
        self.model.pods.get_mut(&r).expect("pod5").labels.insert("app", app);
        self.apply(&[Change::Pod(r)])
    }

    /// Relabels a remote front-tier pod of ns500 out of and back into the broad peer.
    fn pod_relabel_broad(&mut self) -> usize {
        self.n += 1;
        let r = oref(&ns_name(500), &pod_name(3));
        let tier = if self.n % 2 == 0 { "front" } else { "back" };
        self.model.pods.get_mut(&r).expect("pod3").labels.insert("tier", tier);
        self.apply(&[Change::Pod(r)])
    }

    /// Toggles the first ingress port of the staged edit of ns0/np0 between TCP 8443 and 8444.
    fn staged_change(&mut self) -> usize {
        self.n += 1;
        let r = oref(&ns_name(0), "np0");
        let p = self.model.staged_policies.get_mut(&r).expect("staged ns0/np0");
        p.ingress[0].ports = vec![tcp(if self.n % 2 == 0 { 8443 } else { 8444 })];
        self.apply(&[Change::StagedPolicy(r)])
    }

    /// Toggles the first egress rule of ns110/np9 (to app4 pods) between TCP 5432 and 5433.
    fn egress_change(&mut self) -> usize {
        self.n += 1;
        let r = oref(&ns_name(110), "np9");
        let p = self.model.policies.get_mut(&r).expect("ns110/np9");
        p.egress[0].ports = vec![tcp(if self.n % 2 == 0 { 5432 } else { 5433 })];
        self.apply(&[Change::Policy(r)])
    }

    /// Relabels remote pod ns110/pod5 into and out of ns110/np9's egress `to` (app=app4).
    fn egress_pod_relabel(&mut self) -> usize {
        self.n += 1;
        let r = oref(&ns_name(110), &pod_name(5));
        let app = if self.n % 2 == 0 { "app5" } else { "app4" };
        self.model.pods.get_mut(&r).expect("ns110/pod5").labels.insert("app", app);
        self.apply(&[Change::Pod(r)])
    }

    /// Adds and removes TCP 9000 next to the named port of ns110/np0's egress rule.
    fn named_egress_change(&mut self) -> usize {
        self.n += 1;
        let r = oref(&ns_name(110), "np0");
        let p = self.model.policies.get_mut(&r).expect("ns110/np0");
        let named = p.egress[0].ports[0].clone();
        p.egress[0].ports = if self.n % 2 == 0 { vec![named] } else { vec![named, tcp(9000)] };
        self.apply(&[Change::Policy(r)])
    }

    /// Relabels ns111/pod4 (tier=back, a destination of ns110/np0's named-port egress rule) out
    /// of and back into that rule's `to`.
    fn named_egress_pod_relabel(&mut self) -> usize {
        self.n += 1;
        let r = oref(&ns_name(111), &pod_name(4));
        let tier = if self.n % 2 == 0 { "back" } else { "front" };
        self.model.pods.get_mut(&r).expect("ns111/pod4").labels.insert("tier", tier);
        self.apply(&[Change::Pod(r)])
    }

    fn apply(&mut self, changes: &[Change]) -> usize {
        let touched = self.compiler.update(&self.model, changes, self.n);
        let mods = diff_keys(self.compiler.flows(), &self.installed, &touched);
        npagent::compiler::apply(&mut self.installed, &mods);
        mods.len()
    }
}

fn percentiles(mut v: Vec<Duration>) -> (Duration, Duration, Duration) {
    v.sort();
    let at = |q: f64| v[((v.len() as f64 - 1.0) * q).round() as usize];
    (at(0.5), at(0.99), *v.last().unwrap())
}

fn vm_hwm_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn main() {
    let spec = spec();
    let egress = egress();
    let staged = staged();
    let name = if egress { "egress" } else { "baseline" };
    let staged_name = format!("{name}+staged{staged}");
    let t = Instant::now();
    let model = if egress { cluster(spec) } else { cluster_without_egress(spec) };
    let gen = t.elapsed();
    let rss_model = vm_hwm_kib();
    let t = Instant::now();
    let first = compile(&model, Config::default(), IdAllocator::new(60), 0);
    let first_compile = t.elapsed();
    let rss_compiled = vm_hwm_kib();
    let with_egress = model.policies.values().filter(|p| p.affects_egress).count();
    println!(
        "cluster {name} {spec:?} ({with_egress} policies with Egress): generated in {gen:?} (peak RSS {} MiB); first full compile {first_compile:?}: {} flows, {} rules; peak RSS {} MiB",
        rss_model / 1024,
        first.flows().len(),
        first.rules().rules().len(),
        rss_compiled / 1024
    );
    drop(first);
    // The same cluster with staged policies.
    let staged_model = (staged > 0).then(|| {
        let mut m = model.clone();
        add_staged(&mut m, spec, staged);
        let t = Instant::now();
        let c = compile(&m, Config::default(), IdAllocator::new(60), 0);
        let first_compile = t.elapsed();
        let staged_flows = c.flows().iter().filter(|(k, v)| is_staged_flow(k, v)).count();
        println!(
            "cluster {staged_name}: {} staged policies touching {} of {} local pods; first full compile {first_compile:?}: {} flows ({staged_flows} staged), {} rules + {} staged rules; peak RSS {} MiB",
            m.staged_policies.len(),
            touched_ports(&m).len(),
            m.ports.len(),
            c.flows().len(),
            c.rules().rules().len(),
            c.staged().map_or(0, |s| s.rules().rules().len()),
            vm_hwm_kib() / 1024
        );
        m
    });

    let mut c = Criterion::default().configure_from_args();
    {
        let mut g = c.benchmark_group("compiler");
        g.sample_size(10).measurement_time(Duration::from_secs(20));
        g.bench_with_input(BenchmarkId::new("full_compile", name), &model, |b, m| {
            b.iter(|| black_box(compile(m, Config::default(), IdAllocator::new(60), 0)))
        });
        if let Some(m) = &staged_model {
            g.bench_with_input(BenchmarkId::new("full_compile", &staged_name), m, |b, m| {
                b.iter(|| black_box(compile(m, Config::default(), IdAllocator::new(60), 0)))
            });
        }
        g.finish();
    }
    // A policy in ns0 allowing the front tier of every namespace into every pod.
    let broad = npagent::compiler::synthetic::policy(
        &ns_name(0),
        "broad",
        npagent::model::LabelSelector::everything(),
        vec![npagent::model::IngressRule {
            from: vec![npagent::model::Peer::Pods {
                pod_selector: Some(npagent::compiler::synthetic::sel(&[("tier", "front")])),
                namespace_selector: Some(npagent::model::LabelSelector::everything()),
            }],
            ports: vec![tcp(80)],
        }],
    );
    let mut toggles = Vec::new();
    for (label, m) in [(name.to_string(), Some(model)), (staged_name.clone(), staged_model)] {
        let Some(mut m) = m else { continue };
        m.policies.insert(oref(&ns_name(0), "broad"), broad.clone());
        let tog = Toggle::new(m);
        println!("{label} with the broad policy: {} flows", tog.compiler.flows().len());
        toggles.push((label, tog));
    }

    let mut cases: Vec<Case> = vec![
        ("policy_change", Toggle::policy_change),
        ("pod_relabel", Toggle::pod_relabel),
        ("pod_relabel_broad", Toggle::pod_relabel_broad),
    ];
    // The egress cases name namespaces of the target cluster.
    if egress && spec.namespaces == ClusterSpec::TARGET.namespaces {
        cases.extend([
            ("egress_change", Toggle::egress_change as fn(&mut Toggle) -> usize),
            ("egress_pod_relabel", Toggle::egress_pod_relabel),
            ("named_egress_change", Toggle::named_egress_change),
            ("named_egress_pod_relabel", Toggle::named_egress_pod_relabel),
        ]);
    }
    if staged > 0 {
        cases.push(("staged_change", Toggle::staged_change));
    }
    // The staged case only where there are staged policies.
    let runs = |case: &str, label: &str| case != "staged_change" || label != name;
    {
        let mut g = c.benchmark_group("compiler");
        g.sample_size(100);
        for (case, f) in &cases {
            for (label, tog) in toggles.iter_mut().filter(|(label, _)| runs(case, label)) {
                g.bench_function(BenchmarkId::new(*case, &*label), |b| b.iter(|| black_box(f(tog))));
            }
        }
        g.finish();
    }
    c.final_summary();

    for (case, f) in &cases {
        for (label, tog) in toggles.iter_mut().filter(|(label, _)| runs(case, label)) {
            let mut times = Vec::with_capacity(2000);
            let mut mods = 0;
            for _ in 0..2000 {
                let t = Instant::now();
                mods = f(tog);
                times.push(t.elapsed());
            }
            let (p50, p99, max) = percentiles(times);
            println!(
                "{case}/{label}: recompute + diff p50 {p50:?} p99 {p99:?} max {max:?} ({mods} flow_mods per change)"
            );
        }
    }
    println!(
        "peak RSS at end ({}): {} MiB",
        toggles.iter().map(|(l, _)| l.as_str()).collect::<Vec<_>>().join(", "),
        vm_hwm_kib() / 1024
    );
}
