//! Trying to get around ClusterNetworkPolicy with real packets on the testbed: a flow that
//! outlives the Admin Accept that let it through, a flow an Admin Deny arrives in the middle
//! of, a forged source address claiming an accepted peer (SpoofGuard's, before any tier), and (the control that must get
//! through) a fragmented datagram beside a Deny of another port, whose later fragments carry
//! no port. Needs root.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

mod support;

use std::time::Duration;

use support::bed::{wait_for, Bed};
use support::{Port, Testbed};

/// x/a accepts nothing by its own NetworkPolicy.
const A_DENY_ALL: &str = "apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: a-deny-all, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
";

/// An Admin ClusterNetworkPolicy `name` of pod x/a's ingress from x/b: `action` on `protocols`
/// (YAML, or none: every protocol).
fn admin_a_from_b(name: &str, action: &str, protocols: &str) -> String {
    format!(
        "apiVersion: policy.networking.k8s.io/v1alpha2
kind: ClusterNetworkPolicy
metadata: {{name: {name}}}
spec:
  tier: Admin
  priority: 1
  subject:
    pods:
      namespaceSelector: {{matchLabels: {{ns: x}}}}
      podSelector: {{matchLabels: {{pod: a}}}}
  ingress:
  - name: {name}-rule
    action: {action}
    from:
    - pods:
        namespaceSelector: {{matchLabels: {{ns: x}}}}
        podSelector: {{matchLabels: {{pod: b}}}}
{protocols}"
    )
}

const UDP_80: &str = "    protocols:\n    - udp: {destinationPort: {number: 80}}\n";
const UDP_81: &str = "    protocols:\n    - udp: {destinationPort: {number: 81}}\n";

#[test]
fn a_flow_the_admin_tier_accepted_is_cut_when_the_policy_goes() {
    let accept = admin_a_from_b("monitoring", "Accept", UDP_80);
    let bed = Bed::start(Testbed::start(), &[("np.yaml", A_DENY_ALL), ("cnp.yaml", &accept)], |tb| {
        tb.reaches("x/b", "x/a", Port::Udp80) && !tb.reaches("x/c", "x/a", Port::Udp80)
    });
    // One flow x/b keeps sending from one port: accepted over x/a's isolation.
    assert!(bed.echoes("x/b", 41500, 10, 16) >= 8);
    bed.remove("cnp.yaml");
    wait_for("the removal", || !bed.tb.reaches("x/b", "x/a", Port::Udp80));
    // The same flow (its conntrack entry still there) meets x/a's isolation now.
    assert_eq!(bed.echoes("x/b", 41500, 10, 16), 0, "the flow outlived the Admin Accept");
    std::thread::sleep(Duration::from_millis(800));
    let b = bed.tb.pod("x/b").ip;
    let lines = bed.audit_lines();
    assert!(
        lines.iter().any(|l| l.contains("IngressDefaultRule K8sNetworkPolicy") && l.contains(&format!(" {b} 41500 "))),
        "{lines:#?}"
    );
}

#[test]
fn an_admin_deny_cuts_a_flow_a_network_policy_allows() {
    let bed = Bed::start(Testbed::start(), &[], |tb| tb.reaches("x/b", "x/a", Port::Udp80));
    assert!(bed.echoes("x/b", 41600, 10, 16) >= 8);
    bed.put("cnp.yaml", &admin_a_from_b("quarantine", "Deny", ""));
    wait_for("the Deny", || !bed.tb.reaches("x/b", "x/a", Port::Udp80));
    assert_eq!(bed.echoes("x/b", 41600, 10, 16), 0, "the flow outlived the Admin Deny's arrival");
    std::thread::sleep(Duration::from_millis(800));
    let b = bed.tb.pod("x/b").ip;
    let lines = bed.audit_lines();
    assert!(
        lines
            .iter()
            .any(|l| l.contains("AdminIngressRule ClusterNetworkPolicy:quarantine quarantine-rule Ingress Drop")
                && l.contains(&format!(" {b} 41600 "))),
        "{lines:#?}"
    );
    // Others still pass: the Deny is x/b's alone.
    assert!(bed.tb.reaches("x/c", "x/a", Port::Udp80));
}

#[test]
fn a_forged_source_does_not_ride_an_admin_accept() {
    let accept = admin_a_from_b("monitoring", "Accept", "");
    let bed = Bed::start(Testbed::start(), &[("np.yaml", A_DENY_ALL), ("cnp.yaml", &accept)], |tb| {
        tb.reaches("x/b", "x/a", Port::Udp80) && !tb.reaches("x/c", "x/a", Port::Udp80)
    });
    let (a, b) = (bed.tb.pod("x/a"), bed.tb.pod("x/b"));
    let listener = bed.tb.spawn_attack(&a.netns, &["udp-listen", "--port", "41801", "--timeout", "3"]);
    // x/c sends in x/b's name.
    let spoof = ["udp-spoof", "--src", &b.ip, "--sport", "41800", "--dst", &a.ip, "--dport", "41801", "--count", "5"];
    bed.tb.attack("x/c", &spoof);
    assert_eq!(support::finish_count(listener), 0, "a forged x/b source reached x/a through the Admin Accept");
    // Control: x/b itself gets through on that port.
    let listener = bed.tb.spawn_attack(&a.netns, &["udp-listen", "--port", "41801", "--timeout", "2"]);
    let genuine = ["udp-spoof", "--src", &b.ip, "--sport", "41800", "--dst", &a.ip, "--dport", "41801", "--count", "5"];
    bed.tb.attack("x/b", &genuine);
    assert!(support::finish_count(listener) > 0, "control: x/b's own datagrams did not arrive");
}

#[test]
fn a_fragmented_datagram_beside_a_deny_of_another_port_arrives() {
    // x/b may not send x/a UDP 81; UDP 80 is no rule's business.
    let bed = Bed::start(Testbed::start(), &[("cnp.yaml", &admin_a_from_b("no-81", "Deny", UDP_81))], |tb| {
        tb.sandbox.ofctl(&["dump-flows", "--names", "table=AdminIngressRule"]).contains("conj_id")
    });
    // 3,000 bytes: three fragments each way; the later ones carry no port.
    assert!(bed.echoes("x/b", 41700, 5, 3000) >= 4, "a 3,000-byte datagram to UDP 80 was lost to a Deny of UDP 81");
}
