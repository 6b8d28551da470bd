//! Nothing outlives its permission, with real packets: every packet of a connection is
//! judged by the policies in force, on the connection's original direction. ICMP errors a pod
//! forges about another pod's connection, a UDP flow whose policy was revoked, an address
//! reused by a new pod while the old peer keeps sending, SCTP to another port after an allowed
//! association, and (the control that must get through) fragments of a large datagram to an
//! allowed port and a genuine ICMP error from the node. Each attack got through a pipeline
//! that let established and related packets skip the policy tables. Needs root.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

mod support;

use std::time::Duration;

use support::bed::{wait_for, Bed};
use support::policy::{allow_egress, allow_ingress};
use support::{finish, finish_count, write_atomic, Port, Testbed};

/// x/a accepts only x/b, on UDP 80 and SCTP 80.
fn a_from_b_udp_sctp() -> String {
    allow_ingress("x", "a-from-b", "a", "b", &[("UDP", 80), ("SCTP", 80)])
}

/// x/a sends only to x/b, on UDP 80.
fn a_to_b_udp() -> String {
    allow_egress("x", "a-to-b", "a", "b", &[("UDP", 80)])
}

/// x/a accepts nothing.
const A_DENY_ALL: &str = "apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: a-from-b, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
";

#[test]
fn a_revoked_udp_flow_is_cut_and_logged() {
    let bed = Bed::start(Testbed::start_with_outside(), &[("policy.yaml", &a_from_b_udp_sctp())], |tb| {
        tb.reaches("x/b", "x/a", Port::Udp80) && !tb.reaches("x/c", "x/a", Port::Udp80)
    });
    // A flow x/b keeps sending from one port: allowed.
    assert!(bed.echoes("x/b", 40500, 10, 16) >= 8);
    bed.put("policy.yaml", A_DENY_ALL);
    wait_for("the revocation", || !bed.tb.reaches("x/b", "x/a", Port::Udp80));
    // The same flow (its conntrack entry is still there): nothing gets through any more.
    assert_eq!(bed.echoes("x/b", 40500, 10, 16), 0, "the revoked flow still reaches x/a");
    // ...and it is logged as dropped by x/a's default drop.
    std::thread::sleep(Duration::from_millis(800));
    let b = bed.tb.pod("x/b").ip;
    let lines = bed.audit_lines();
    assert!(
        lines
            .iter()
            .any(|l| l.contains("IngressDefaultRule") && l.contains("Drop") && l.contains(&format!(" {b} 40500 "))),
        "{lines:#?}"
    );
    // Control: allowed again, the same flow flows again.
    bed.put("policy.yaml", &a_from_b_udp_sctp());
    wait_for("the new permission", || bed.tb.reaches("x/b", "x/a", Port::Udp80));
    assert!(bed.echoes("x/b", 40500, 10, 16) >= 8);
}

#[test]
fn an_address_reused_by_a_new_pod_meets_the_new_pods_policy() {
    let bed = Bed::start(Testbed::start_with_outside(), &[("policy.yaml", &a_from_b_udp_sctp())], |tb| {
        tb.reaches("x/b", "x/a", Port::Udp80)
    });
    // x/d (no policy) at 10.10.1.14 talks with x/b on one flow.
    bed.tb.add_pod("x", "d", "10.10.1.14");
    let d = "10.10.1.14";
    let flow = ["udp-echo", "--dst", d, "--dport", "80", "--sport", "40600", "--count", "10"];
    wait_for("x/d reachable", || bed.tb.reaches("x/b", "x/d", Port::Udp80));
    assert!(bed.tb.attack("x/b", &flow).parse::<u32>().unwrap() >= 8);
    // x/d goes; x/e comes with its address and a policy that lets nothing in.
    bed.tb.del_pod("x", "d");
    write_atomic(
        &bed.tb.manifests_dir().join("e-deny.yaml"),
        "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: e-deny, namespace: x}\nspec:\n  podSelector: {matchLabels: {pod: e}}\n",
    );
    bed.tb.add_pod("x", "e", d);
    wait_for("x/e isolated", || !bed.tb.reaches("x/c", "x/e", Port::Udp80));
    // The old peer keeps sending on the old flow: the new pod hears nothing of it.
    assert_eq!(bed.tb.attack("x/b", &flow), "0", "the old flow reached the new pod past its policy");
}

#[test]
fn icmp_errors_a_pod_forges_about_others_connections_are_dropped() {
    // x/a isolated both ways: it accepts only x/b and sends only to x/b (UDP 80).
    let policies = format!("{}---\n{}", a_from_b_udp_sctp(), a_to_b_udp());
    let bed = Bed::start(Testbed::start_with_outside(), &[("policy.yaml", &policies)], |tb| {
        !tb.reaches("x/c", "x/a", Port::Udp80) && !tb.reaches("x/a", "x/c", Port::Udp80)
    });
    let (a, b, c) = (bed.tb.pod("x/a"), bed.tb.pod("x/b"), bed.tb.pod("x/c"));
    // `from` sends `to` a port unreachable, from address `src`, about the UDP datagram
    // `inner_src`:`inner_sport` -> x/b:80.
    let icmp_error = |from: &str, src: &str, to: &str, inner_src: &str, inner_sport: &str| {
        let args = ["icmp-error", "--src", src, "--dst", to, "--inner-src", inner_src, "--inner-sport", inner_sport];
        let inner = ["--inner-dst", &b.ip, "--inner-dport", "80", "--count", "3"];
        bed.tb.attack(from, &[&args[..], &inner[..]].concat());
    };
    // x/a talks to x/b on a connected UDP socket, which reports an ICMP error that reaches it.
    let victim = || {
        bed.tb
            .spawn_attack(&a.netns, &["udp-victim", "--peer", &b.ip, "--dport", "80", "--sport", "5000", "--wait", "2"])
    };
    // x/c (no end of that connection) sends x/a a port unreachable about it: dropped.
    let watching = victim();
    icmp_error("x/c", &c.ip, &a.ip, &a.ip, "5000");
    assert_eq!(finish(watching), "quiet", "x/c's forged ICMP error reached x/a's socket");
    // Out of x/a (isolated both ways) to a colluding x/c: errors about x/c's own live
    // connection to x/b, which x/a is no end of, go nowhere.
    assert_eq!(bed.tb.attack("x/c", &["udp-echo", "--dst", &b.ip, "--dport", "80", "--sport", "6000"]), "1");
    let listener = bed.tb.spawn_attack(
        &c.netns,
        &["sniff", "--iface", "eth0", "--from-mac", &a.mac, "--timeout", "2", "--ip-proto", "1"],
    );
    icmp_error("x/a", &a.ip, &c.ip, &c.ip, "6000");
    assert_eq!(finish_count(listener), 0, "x/a's ICMP error about x/c's connection reached x/c");
    // Control: the same error as x/c's from a router (the outside host, through the node)
    // arrives.
    let watching = victim();
    icmp_error("outside/h1", &bed.tb.host("outside/h1").ip, &a.ip, &a.ip, "5000");
    assert_eq!(finish(watching), "refused", "a genuine ICMP error from beyond the node did not arrive");
}

#[test]
fn sctp_to_another_port_after_an_allowed_association_is_dropped() {
    let bed = Bed::start(Testbed::start_with_outside(), &[("policy.yaml", &a_from_b_udp_sctp())], |tb| {
        tb.reaches("x/b", "x/a", Port::Udp80)
    });
    let (a, b) = (bed.tb.pod("x/a"), bed.tb.pod("x/b"));
    let sniff = |dport: &str| {
        bed.tb.spawn_attack(
            &a.netns,
            &[
                "sniff",
                "--iface",
                "eth0",
                "--from-mac",
                &b.mac,
                "--timeout",
                "2",
                "--ip-proto",
                "132",
                "--dport",
                dport,
            ],
        )
    };
    let send = |dport: &str| {
        bed.tb.attack(
            "x/b",
            &["sctp-raw", "--src", &b.ip, "--dst", &a.ip, "--sport", "7000", "--dport", dport, "--count", "3"],
        );
    };
    // The allowed association (SCTP 80) reaches x/a...
    let on_80 = sniff("80");
    send("80");
    assert!(finish_count(on_80) > 0, "control: SCTP to the allowed port did not arrive");
    // ...and SCTP to port 81 between the same addresses right after does not.
    let on_81 = sniff("81");
    send("81");
    assert_eq!(finish_count(on_81), 0, "SCTP to an unallowed port rode an allowed association");
}

#[test]
fn a_large_datagram_to_an_allowed_port_arrives_in_fragments() {
    let bed = Bed::start(Testbed::start_with_outside(), &[("policy.yaml", &a_from_b_udp_sctp())], |tb| {
        tb.reaches("x/b", "x/a", Port::Udp80)
    });
    // 3,000 bytes: three fragments each way over the veths' 1,500-byte MTU.
    assert!(bed.echoes("x/b", 40700, 5, 3000) >= 4, "a 3,000-byte datagram to an allowed port was lost");
    // Still judged: x/c is not allowed, large or small.
    assert_eq!(bed.echoes("x/c", 40701, 3, 3000), 0);
}
