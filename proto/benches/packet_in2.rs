//! Decode of a ~150-byte NXT_PACKET_IN2 as OVS sends it for a logged packet (target: at least
//! 2 million per second per core). Run: `cargo bench -p npagent-proto --bench packet_in2`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ofp::oxm::{Masked, Oxm};
use ofp::{Message, PacketIn2, Payload};
use std::hint::black_box;

/// A TCP SYN (54 bytes) with the properties OVS 3.1 sends for a controller2 action with
/// userdata: table_id, cookie, reason, metadata (in_port + xreg0), userdata.
fn packet_in2_bytes() -> Bytes {
    let frame = hex::decode(
        "505400000002505400000001080045000028000100004006\
         26c80a0000010a00000204d2005000000000000000005002\
         200000000000",
    )
    .unwrap();
    let pin = PacketIn2 {
        packet: Bytes::from(frame),
        table_id: Some(3),
        cookie: Some(0x0123_4567_89ab_cdef),
        reason: Some(1),
        metadata: vec![Oxm::InPort(1), Oxm::XReg { index: 0, value: Masked::exact(0x0000_002a_0000_1234) }],
        userdata: Some(Bytes::from_static(&[1, 0x11, 0, 0, 0, 0x2a])),
        ..Default::default()
    };
    Message::new(0, Payload::PacketIn2(pin)).to_bytes().unwrap()
}

fn bench(c: &mut Criterion) {
    let bytes = packet_in2_bytes();
    let mut g = c.benchmark_group("nxt_packet_in2");
    g.throughput(Throughput::Elements(1));
    g.bench_function(format!("decode_{}_bytes", bytes.len()), |b| {
        b.iter(|| {
            let msg = Message::parse(black_box(&bytes)).unwrap();
            match msg.payload {
                Payload::PacketIn2(p) => black_box(p.register(0)),
                _ => unreachable!(),
            }
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
