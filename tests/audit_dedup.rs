//! Deduplication as Antrea does it: Allow at once; others aggregated over a window, written
//! once at the window's end, with ` [N packets in D]` when N > 1.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

mod audit_support;

use audit_support::*;
use npagent::audit::dedup::{Dedup, Moment, Record};
use npagent::audit::format::{Format, Formatter};
use npagent::audit::{entry_from_packet_in, AuditEntry, Direction};
use npagent::compiler::tables;
use npagent::compiler::userdata::Disposition;
use ofp::packet_in2::PacketIn2;
use proptest::prelude::*;
use std::time::{Duration, SystemTime};

const SEC: Duration = Duration::from_secs(1);

fn entry(pi: &PacketIn2, now: SystemTime) -> AuditEntry {
    entry_from_packet_in(pi, &resolver(), now).unwrap()
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

struct Run {
    dedup: Dedup,
    out: Vec<Record>,
}

impl Run {
    fn new(window: Duration) -> Run {
        Run { dedup: Dedup::new(window, 1_000), out: Vec::new() }
    }
    fn offer(&mut self, e: AuditEntry) {
        let out = &mut self.out;
        let mono = clocks(e.time).mono;
        self.dedup.offer(e, mono, &mut |r| out.push(r));
    }
    fn tick(&mut self, now: SystemTime) {
        let out = &mut self.out;
        self.dedup.tick(clocks(now), &mut |r| out.push(r));
    }
    fn flush(&mut self, now: SystemTime) {
        let out = &mut self.out;
        self.dedup.flush(clocks(now), &mut |r| out.push(r));
    }
}

#[test]
fn an_allow_entry_is_written_at_once_and_its_repeats_aggregated() {
    let t0 = t_allow();
    let mut run = Run::new(SEC);
    // The first at once.
    run.offer(entry(&allow_tcp_80(), t0));
    assert_eq!(run.out.len(), 1);
    assert_eq!((run.out[0].count, run.out[0].written_at), (1, t0));
    // Its repeats (a flow nobody answers stays +new) within the window: one line at its end.
    for i in 1..5 {
        run.offer(entry(&allow_tcp_80(), t0 + ms(i * 100)));
    }
    assert_eq!(run.out.len(), 1, "repeats are not written one by one");
    run.tick(t0 + ms(1000));
    assert_eq!(run.out.len(), 2);
    assert_eq!((run.out[1].count, run.out[1].first_seen, run.out[1].last_seen), (4, t0 + ms(100), t0 + ms(400)));
    assert_eq!(run.dedup.pending(), 0);
    // A lone Allow: its window ends with nothing more to write.
    run.offer(entry(&allow_tcp_80(), t0 + ms(5000)));
    run.tick(t0 + ms(6000));
    assert_eq!(run.out.len(), 3);
    assert_eq!(run.dedup.pending(), 0);
}

#[test]
fn drops_are_aggregated_over_the_window() {
    let t0 = t_drop();
    let mut run = Run::new(SEC);
    for offset in [0, 100, 250, 900] {
        run.offer(entry(&drop_icmp(), t0 + ms(offset)));
    }
    // Like Antrea, nothing is written before the window ends.
    run.tick(t0 + ms(999));
    assert!(run.out.is_empty());
    run.tick(t0 + ms(1_000));
    assert_eq!(run.out.len(), 1);
    let r = &run.out[0];
    assert_eq!((r.count, r.first_seen, r.last_seen, r.written_at), (4, t0, t0 + ms(900), t0 + SEC));
    let line = Formatter::new(Format::Antrea, "n").line(r);
    assert_eq!(
        line,
        "2023/07/04 12:33:27.221413 IngressDefaultRule K8sNetworkPolicy <nil> Ingress Drop <nil> default/nettool \
         10.10.1.13 <nil> 10.10.1.7 <nil> ICMP 84 <nil> [4 packets in 1s]"
    );
    assert_eq!(run.dedup.pending(), 0);
}

/// Staged verdicts are deduplicated like Drop lines: nothing is written before the window
/// ends, then one line with the count; a WouldAllow is not an Allow (not written at once), and
/// neither merges with the enforced Drop of the same connection.
#[test]
fn staged_verdicts_are_aggregated_like_drops() {
    let t0 = t_drop();
    let mut run = Run::new(SEC);
    for offset in [0, 100, 250, 900] {
        run.offer(entry(&would_drop_tcp_80(), t0 + ms(offset)));
    }
    run.offer(entry(&would_allow_tcp_80(), t0 + ms(5)));
    let enforced_drop = packet_in(
        ipv4("10.10.1.13", "10.10.1.7", TCP, &tcp(57050, 80, true)),
        Disposition::Drop,
        tables::INGRESS_DEFAULT_RULE,
        5,
    );
    run.offer(entry(&enforced_drop, t0 + ms(10)));
    run.tick(t0 + ms(999));
    assert!(run.out.is_empty(), "nothing before the window ends: {:?}", run.out);
    run.tick(t0 + ms(1_010));
    let f = Formatter::new(Format::Antrea, "n");
    let lines: Vec<String> = run.out.iter().map(|r| f.line(r)).collect();
    assert_eq!(
        lines,
        [
            "2023/07/04 12:33:27.231413 StagedIngressDefaultRule StagedNetworkPolicy:default/deny-all,default/web-only \
             <nil> Ingress WouldDrop <nil> default/nettool 10.10.1.13 57050 10.10.1.7 80 TCP 60 <nil> [4 packets in 1.01s]",
            "2023/07/04 12:33:27.231413 StagedIngressRule StagedNetworkPolicy:default/allow-staged from-client \
             Ingress WouldAllow 190 default/nettool 10.10.1.13 57050 10.10.1.7 80 TCP 60 <nil>",
            "2023/07/04 12:33:27.231413 IngressDefaultRule K8sNetworkPolicy <nil> Ingress Drop <nil> \
             default/nettool 10.10.1.13 57050 10.10.1.7 80 TCP 60 <nil>",
        ]
    );
    let r = &run.out[0];
    assert_eq!((r.count, r.first_seen, r.last_seen), (4, t0, t0 + ms(900)));
    assert_eq!(run.dedup.pending(), 0);
}

/// WouldDrop lines of the same connection naming other staged policies (one was staged in
/// between) are separate lines.
#[test]
fn would_drops_naming_other_staged_policies_are_separate() {
    let t0 = t_drop();
    let mut run = Run::new(SEC);
    let res = resolver();
    let mut more = resolver();
    more.staged_isolating.get_mut(&(Direction::Ingress, 5, Disposition::WouldDrop)).unwrap().push(obj("default", "z"));
    for (i, r) in [&res, &more, &res].into_iter().enumerate() {
        run.offer(entry_from_packet_in(&would_drop_tcp_80(), r, t0 + ms(i as u64)).unwrap());
    }
    run.flush(t0 + SEC);
    let counts: Vec<(usize, u64)> = run.out.iter().map(|r| (r.entry.isolated_by.len(), r.count)).collect();
    assert_eq!(counts, [(2, 2), (3, 1)]);
}

#[test]
fn a_single_drop_is_written_plain_at_the_window_end() {
    let t0 = t_drop();
    let mut run = Run::new(SEC);
    run.offer(entry(&drop_icmp(), t0));
    run.tick(t0 + ms(1_042));
    assert_eq!(run.out.len(), 1);
    let line = Formatter::new(Format::Antrea, "n").line(&run.out[0]);
    assert!(line.starts_with("2023/07/04 12:33:27.263413 "), "{line}");
    assert!(line.ends_with(" ICMP 84 <nil>"), "{line}");
}

#[test]
fn entries_differing_in_any_field_are_separate() {
    let t0 = t_drop();
    let mut run = Run::new(SEC);
    let a = packet_in(
        ipv4("10.10.1.13", "10.10.1.7", TCP, &tcp(1000, 80, true)),
        Disposition::Drop,
        tables::INGRESS_DEFAULT_RULE,
        5,
    );
    let b = packet_in(
        ipv4("10.10.1.13", "10.10.1.7", TCP, &tcp(1001, 80, true)),
        Disposition::Drop,
        tables::INGRESS_DEFAULT_RULE,
        5,
    );
    let c = packet_in(
        ipv4("10.10.1.13", "10.10.1.7", TCP, &tcp(1000, 80, false)),
        Disposition::Drop,
        tables::INGRESS_DEFAULT_RULE,
        5,
    );
    for (i, pi) in [&a, &b, &a, &c, &a].into_iter().enumerate() {
        run.offer(entry(pi, t0 + ms(i as u64)));
    }
    run.tick(t0 + SEC + ms(10));
    let counts: Vec<(Option<u16>, u32, u64)> =
        run.out.iter().map(|r| (r.entry.src_port, r.entry.ip_len, r.count)).collect();
    // Written in order of first occurrence.
    assert_eq!(counts, vec![(Some(1000), 60, 3), (Some(1001), 60, 1), (Some(1000), 40, 1)]);
}

#[test]
fn a_packet_after_the_window_starts_a_new_one_even_without_a_tick() {
    let t0 = t_drop();
    let mut run = Run::new(SEC);
    run.offer(entry(&drop_icmp(), t0));
    run.offer(entry(&drop_icmp(), t0 + ms(500)));
    run.offer(entry(&drop_icmp(), t0 + ms(1_200)));
    assert_eq!(run.out.len(), 1);
    assert_eq!((run.out[0].count, run.out[0].written_at), (2, t0 + ms(1_200)));
    run.tick(t0 + ms(2_200));
    assert_eq!(run.out.len(), 2);
    assert_eq!((run.out[1].count, run.out[1].first_seen), (1, t0 + ms(1_200)));
}

#[test]
fn flush_writes_everything_pending() {
    let t0 = t_drop();
    let mut run = Run::new(Duration::from_secs(60));
    run.offer(entry(&drop_icmp(), t0));
    run.offer(entry(&drop_icmp(), t0 + ms(1)));
    let other = packet_in(
        ipv4("10.10.1.13", "10.10.1.7", UDP, &udp(1, 2, 0)),
        Disposition::Drop,
        tables::INGRESS_DEFAULT_RULE,
        5,
    );
    run.offer(entry(&other, t0 + ms(2)));
    run.tick(t0 + SEC);
    assert!(run.out.is_empty());
    run.flush(t0 + ms(1_500));
    assert_eq!(run.out.iter().map(|r| r.count).collect::<Vec<_>>(), vec![2, 1]);
    assert_eq!(run.out[0].span, ms(1_500));
    assert_eq!(run.dedup.pending(), 0);
}

#[test]
fn zero_window_writes_every_entry() {
    let t0 = t_drop();
    let mut run = Run::new(Duration::ZERO);
    run.offer(entry(&drop_icmp(), t0));
    run.offer(entry(&drop_icmp(), t0));
    assert_eq!(run.out.len(), 2);
}

#[test]
fn beyond_the_pending_bound_entries_are_written_at_once() {
    let t0 = t_drop();
    let mut dedup = Dedup::new(SEC, 2);
    let mut out = Vec::new();
    for port in 0..5u16 {
        let pi = packet_in(
            ipv4("10.10.1.13", "10.10.1.7", UDP, &udp(port, 53, 0)),
            Disposition::Drop,
            tables::INGRESS_DEFAULT_RULE,
            5,
        );
        dedup.offer(entry(&pi, t0), clocks(t0).mono, &mut |r| out.push(r));
    }
    assert_eq!(dedup.pending(), 2);
    assert_eq!(out.len(), 3);
    dedup.flush(clocks(t0), &mut |r| out.push(r));
    assert_eq!(out.len(), 5);
}

#[test]
fn a_wall_clock_stepped_back_does_not_hold_drops() {
    let hour = Duration::from_secs(3_600);
    let start = clocks(t_drop());
    // The wall clock is stepped back an hour at 500 ms; the monotonic clock goes on.
    let at = |after: u64| {
        let step = if after >= 500 { hour } else { Duration::ZERO };
        Moment { wall: start.wall + ms(after) - step, mono: start.mono + ms(after) }
    };
    let mut dedup = Dedup::new(SEC, 1_000);
    let mut out = Vec::new();
    for after in [0, 600] {
        let now = at(after);
        dedup.offer(entry(&drop_icmp(), now.wall), now.mono, &mut |r| out.push(r));
    }
    dedup.tick(at(999), &mut |r| out.push(r));
    assert!(out.is_empty());
    dedup.tick(at(1_000), &mut |r| out.push(r));
    assert_eq!(out.len(), 1, "the aggregate is written when its second has passed on the monotonic clock");
    assert_eq!((out[0].count, out[0].span, out[0].written_at), (2, SEC, at(1_000).wall));
    // Packets after the step open windows of one second too.
    let now = at(1_200);
    dedup.offer(entry(&drop_icmp(), now.wall), now.mono, &mut |r| out.push(r));
    dedup.tick(at(2_199), &mut |r| out.push(r));
    assert_eq!(out.len(), 1);
    dedup.tick(at(2_200), &mut |r| out.push(r));
    assert_eq!(out.len(), 2);
    assert_eq!((out[1].count, out[1].first_seen, out[1].span), (1, at(1_200).wall, SEC));
}

proptest! {
    /// Whatever the interleaving of packets and ticks, every packet is counted exactly once,
    /// and a record never spans more than its window before it is written.
    #[test]
    fn no_entry_is_lost(steps in proptest::collection::vec((0u8..4, 0u64..400, any::<bool>()), 1..200)) {
        let t0 = t_drop();
        let mut run = Run::new(SEC);
        let mut now = t0;
        let mut offered = 0u64;
        let frames: Vec<PacketIn2> = (0..4u16)
            .map(|i| packet_in(ipv4("10.10.1.13", "10.10.1.7", UDP, &udp(i, 53, 0)), if i == 3 { Disposition::Allow } else { Disposition::Drop }, tables::INGRESS_DEFAULT_RULE, 5))
            .collect();
        let mut allow = resolver();
        allow.rules.insert(5, allow.rules[&17].clone());
        for (which, advance, tick) in steps {
            now += ms(advance);
            if tick {
                run.tick(now);
            } else {
                let e = entry_from_packet_in(&frames[which as usize], &allow, now).unwrap();
                run.offer(e);
                offered += 1;
            }
        }
        run.flush(now + Duration::from_secs(5));
        prop_assert_eq!(run.out.iter().map(|r| r.count).sum::<u64>(), offered);
        for r in &run.out {
            prop_assert!(r.first_seen <= r.last_seen && r.last_seen <= r.written_at);
            prop_assert!(r.last_seen.duration_since(r.first_seen).unwrap() < SEC);
        }
    }
}
