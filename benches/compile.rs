//! Compiler benchmarks at the scale target: 10,000 NetworkPolicies, 100,000 pods, 1,000
//! namespaces, 100 local pods (synthetic cluster of `npagent::compiler::synthetic`).
//!
//! - `full_compile`: a fresh compiler over the whole cluster.
//! - `policy_change`: one policy changed (ports toggled), recompute + diff of the touched keys.
//! - `pod_relabel`: one pod relabelled in and out of a peer selector, recompute + diff.
//! - `pod_relabel_broad`: the same against a policy whose peer selects the front tier of every
//!   namespace (~33,000 source pods, as many clause flows).
//!
//! After the criterion groups, a plain loop prints p50/p99/max of the incremental paths and
//! the process's peak RSS (VmHWM), which criterion does not report.
//! `BENCH_SCALE=small` runs a 10x smaller cluster.

use criterion::{BenchmarkId, Criterion};
use std::hint::black_box;
use npagent::compiler::synthetic::{cluster, ns_name, oref, pod_name, tcp, ClusterSpec};
use npagent::compiler::{compile, diff_keys, Change, Compiler, Config, FlowTable, IdAllocator};
use npagent::model::Model;
use std::time::{Duration, Instant};

fn spec() -> ClusterSpec {
    match std::env::var("BENCH_SCALE").as_deref() {
        Ok("small") => ClusterSpec { namespaces: 100, pods_per_ns: 100, policies_per_ns: 10, local_pods: 10 },
        _ => ClusterSpec::TARGET,
    }
}

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
        self.model.pods.get_mut(&r).expect("pod5").labels.insert("app".into(), app.into());
        self.apply(&[Change::Pod(r)])
    }

    /// Relabels a remote front-tier pod of ns500 out of and back into the broad peer.
    fn pod_relabel_broad(&mut self) -> usize {
        self.n += 1;
        let r = oref(&ns_name(500), &pod_name(3));
        let tier = if self.n % 2 == 0 { "front" } else { "back" };
        self.model.pods.get_mut(&r).expect("pod3").labels.insert("tier".into(), tier.into());
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
        .and_then(|s| s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| l.split_whitespace().nth(1)?.parse().ok()))
        .unwrap_or(0)
}

fn main() {
    let spec = spec();
    let t = Instant::now();
    let model = cluster(spec);
    let gen = t.elapsed();
    let rss_model = vm_hwm_kib();
    let t = Instant::now();
    let first = compile(&model, Config::default(), IdAllocator::new(60), 0);
    let first_compile = t.elapsed();
    let rss_compiled = vm_hwm_kib();
    println!(
        "cluster {spec:?}: generated in {gen:?} (peak RSS {} MiB); first full compile {first_compile:?}: {} flows, {} rules; peak RSS {} MiB",
        rss_model / 1024,
        first.flows().len(),
        first.rules().rules().len(),
        rss_compiled / 1024
    );
    drop(first);

    let mut c = Criterion::default().configure_from_args();
    {
        let mut g = c.benchmark_group("compiler");
        g.sample_size(10).measurement_time(Duration::from_secs(20));
        g.bench_with_input(BenchmarkId::new("full_compile", "target"), &model, |b, m| {
            b.iter(|| black_box(compile(m, Config::default(), IdAllocator::new(60), 0)))
        });
        g.finish();
    }
    // A policy in ns0 allowing the front tier of every namespace into every pod.
    let mut model = model;
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
    model.policies.insert(oref(&ns_name(0), "broad"), broad);
    let mut tog = Toggle::new(model);
    println!("with the broad policy: {} flows", tog.compiler.flows().len());
    {
        let mut g = c.benchmark_group("compiler");
        g.sample_size(100);
        g.bench_function("policy_change", |b| b.iter(|| black_box(tog.policy_change())));
        g.bench_function("pod_relabel", |b| b.iter(|| black_box(tog.pod_relabel())));
        g.bench_function("pod_relabel_broad", |b| b.iter(|| black_box(tog.pod_relabel_broad())));
        g.finish();
    }
    c.final_summary();

    for (name, f) in [
        ("policy_change", Toggle::policy_change as fn(&mut Toggle) -> usize),
        ("pod_relabel", Toggle::pod_relabel),
        ("pod_relabel_broad", Toggle::pod_relabel_broad),
    ] {
        let mut times = Vec::with_capacity(2000);
        let mut mods = 0;
        for _ in 0..2000 {
            let t = Instant::now();
            mods = f(&mut tog);
            times.push(t.elapsed());
        }
        let (p50, p99, max) = percentiles(times);
        println!("{name}: recompute + diff p50 {p50:?} p99 {p99:?} max {max:?} ({mods} flow_mods per change)");
    }
    println!("peak RSS at end: {} MiB", vm_hwm_kib() / 1024);
}
