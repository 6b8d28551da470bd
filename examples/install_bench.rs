//! Flow-install benchmark helper, driven by `scripts/bench-install`.
//!
//! - `install_bench text N` prints the benchmark's N conjunctive flows in `ovs-ofctl`
//!   add-flows syntax (the same flows `install` sends).
//! - `install_bench install ENDPOINT N` connects to the switch, installs the N flows in one
//!   bundle through npagent's connection and prints `connect_s=... install_s=...`
//!   (install: from the `install()` call to the commit reply; flows are built beforehand, as
//!   the agent's compiler would have them).
//!
//! The flows follow docs/pipeline.md's rule flows: per rule three clause flows (priority 200: source IP,
//! destination port register, TCP port; `conjunction(id,k/3)`) and one `conj_id` flow
//! (priority 190) that records the rule in reg3 and goes on to table 10, spread over tables 0..5.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

use npagent::switch::{spawn, ConnectionConfig};
use ofp::{Action, FlowMod, Instruction, Masked, Match, Oxm};
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

const TABLES: u32 = 5;
const NEXT_TABLE: u8 = 10;

/// One rule of the benchmark: its table, conjunction id, and clause values.
struct Rule {
    table: u8,
    id: u32,
    src: Ipv4Addr,
    reg1: u32,
    port: u16,
    cookie: u64,
}

fn rules(n_flows: usize) -> impl Iterator<Item = Rule> {
    let per_table = (n_flows / 4).div_ceil(TABLES as usize) as u32;
    (0..TABLES).flat_map(move |t| (0..per_table).map(move |r| (t, r))).take(n_flows / 4).map(|(t, r)| {
        let id = t * 100_000 + r + 1;
        Rule {
            table: t as u8,
            id,
            src: Ipv4Addr::from(0x0a00_0000 | t << 16 | r),
            reg1: r + 1,
            port: (1000 + r % 60_000) as u16,
            cookie: 0x00ab_0000_0000_0000 | u64::from(id),
        }
    })
}

fn flow_mods(n_flows: usize) -> Vec<FlowMod> {
    let mut flows = Vec::with_capacity(n_flows);
    for rule in rules(n_flows) {
        let conj =
            |clause| vec![Instruction::ApplyActions(vec![Action::Conjunction { id: rule.id, clause, n_clauses: 3 }])];
        let base = FlowMod { table_id: rule.table, priority: 200, cookie: rule.cookie, ..FlowMod::default() };
        let with = |priority, fields, instructions| FlowMod {
            priority,
            match_: Match { fields },
            instructions,
            ..base.clone()
        };
        flows.push(with(200, vec![Oxm::EthType(0x0800), Oxm::Ipv4Src(Masked::exact(rule.src))], conj(0)));
        flows.push(with(200, vec![Oxm::Reg { index: 1, value: Masked::exact(rule.reg1) }], conj(1)));
        flows.push(with(
            200,
            vec![Oxm::EthType(0x0800), Oxm::IpProto(6), Oxm::TcpDst(Masked::exact(rule.port))],
            conj(2),
        ));
        flows.push(with(
            190,
            vec![Oxm::ConjId(rule.id)],
            vec![
                Instruction::ApplyActions(vec![Action::SetField(Oxm::Reg { index: 3, value: Masked::exact(rule.id) })]),
                Instruction::GotoTable(NEXT_TABLE),
            ],
        ));
    }
    flows
}

fn print_text(n_flows: usize) {
    use std::io::Write;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for r in rules(n_flows) {
        let head = format!("table={},cookie={:#x}", r.table, r.cookie);
        let id = r.id;
        let lines = [
            format!("{head},priority=200,ip,nw_src={} actions=conjunction({id},1/3)", r.src),
            format!("{head},priority=200,reg1={} actions=conjunction({id},2/3)", r.reg1),
            format!("{head},priority=200,tcp,tp_dst={} actions=conjunction({id},3/3)", r.port),
            format!("{head},priority=190,conj_id={id} actions=set_field:{id}->reg3,goto_table:{NEXT_TABLE}"),
        ];
        for l in lines {
            let _ = writeln!(out, "{l}");
        }
    }
}

async fn install(endpoint: &str, n_flows: usize) -> Result<(), Box<dyn std::error::Error>> {
    let flows = flow_mods(n_flows);
    let started = Instant::now();
    let config = ConnectionConfig { endpoint: endpoint.parse()?, ..ConnectionConfig::default() };
    let (switch, _packet_ins) = spawn(config);
    switch.wait_connected(Duration::from_secs(10)).await?;
    let connect_s = started.elapsed().as_secs_f64();
    let started = Instant::now();
    switch.install(flows).await?;
    let install_s = started.elapsed().as_secs_f64();
    println!("connect_s={connect_s:.4} install_s={install_s:.4}");
    Ok(())
}

fn usage() -> ! {
    eprintln!("usage: install_bench text N | install_bench install ENDPOINT N");
    std::process::exit(2)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let n = |s: Option<&String>| s.and_then(|s| s.parse::<usize>().ok()).unwrap_or_else(|| usage());
    match args.first().map(String::as_str) {
        Some("text") => print_text(n(args.get(1))),
        Some("install") => {
            let endpoint = args.get(1).unwrap_or_else(|| usage());
            if let Err(e) = install(endpoint, n(args.get(2))).await {
                eprintln!("install_bench: {e}");
                std::process::exit(1);
            }
        }
        _ => usage(),
    }
}
