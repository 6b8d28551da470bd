//! Encode (and decode) of a conjunctive FLOW_MOD as npagent sends it: table IngressRule,
//! priority 200, `ip,nw_src=10.x.y.z`, `actions=conjunction(id,1/3)`. Target: >= 1M encodes/s
//! per core.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

use bytes::{BufMut, BytesMut};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ofp::action::Action;
use ofp::flow_mod::FlowMod;
use ofp::instruction::Instruction;
use ofp::oxm::{Masked, Match, Oxm};
use std::hint::black_box;
use std::net::Ipv4Addr;

fn conj_flow(i: u32) -> FlowMod {
    FlowMod {
        cookie: 0x1_0000_0000 | u64::from(i),
        table_id: 3,
        priority: 200,
        match_: Match::new(vec![Oxm::EthType(0x0800), Oxm::Ipv4Src(Masked::exact(Ipv4Addr::from(0x0a00_0000 | i)))]),
        instructions: vec![Instruction::ApplyActions(vec![Action::Conjunction {
            id: 1000 + i,
            clause: 0,
            n_clauses: 3,
        }])],
        ..FlowMod::default()
    }
}

/// One whole OFPT_FLOW_MOD message into `out`.
fn encode(fm: &FlowMod, xid: u32, out: &mut BytesMut) {
    let len = 8 + fm.buffer_len();
    out.reserve(len);
    out.put_u8(6);
    out.put_u8(14);
    out.put_u16(len as u16);
    out.put_u32(xid);
    fm.emit(out);
}

fn bench(c: &mut Criterion) {
    let flows: Vec<FlowMod> = (0..1024).map(conj_flow).collect();
    let mut g = c.benchmark_group("flow_mod");
    g.throughput(Throughput::Elements(1));
    g.bench_function("encode_conjunctive", |b| {
        let mut out = BytesMut::with_capacity(1 << 20);
        let mut i = 0usize;
        b.iter(|| {
            if out.len() > (1 << 20) - 256 {
                out.clear();
            }
            let fm = &flows[i & 1023];
            encode(black_box(fm), i as u32, &mut out);
            i = i.wrapping_add(1);
        })
    });
    let mut wire = BytesMut::new();
    encode(&flows[7], 1, &mut wire);
    let wire = wire.freeze();
    g.bench_function("decode_conjunctive", |b| b.iter(|| FlowMod::parse(black_box(&wire[8..])).unwrap()));
    g.bench_function("build_and_encode_conjunctive", |b| {
        let mut out = BytesMut::with_capacity(1 << 20);
        let mut i = 0u32;
        b.iter(|| {
            if out.len() > (1 << 20) - 256 {
                out.clear();
            }
            encode(&conj_flow(black_box(i)), i, &mut out);
            i = i.wrapping_add(1);
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
