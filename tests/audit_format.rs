//! Each output format, field by field, from crafted packet-ins through decode and resolution.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

mod audit_support;

use audit_support::*;
use npagent::audit::format::{Format, Formatter};
use npagent::audit::{entry_from_packet_in, AuditEntry, AuditError, Direction, PolicyRef, Record, RuleMeta};
use npagent::compiler::tables;
use npagent::compiler::userdata::Disposition;
use ofp::packet_in2::PacketIn2;
use serde_json::{json, Value};
use std::time::{Duration, SystemTime};

fn entry(pi: &PacketIn2, now: SystemTime) -> AuditEntry {
    entry_from_packet_in(pi, &resolver(), now).unwrap()
}

fn line(format: Format, r: &Record) -> String {
    Formatter::new(format, "node-1").line(r)
}

fn fields(s: &str) -> Vec<&str> {
    s.split(' ').collect()
}

#[test]
fn antrea_allow_tcp_is_designs_example() {
    let r = Record::single(entry(&allow_tcp_80(), t_allow()));
    assert_eq!(
        line(Format::Antrea, &r),
        "2023/07/04 12:31:02.801442 IngressRule K8sNetworkPolicy:default/allow-tcp-80 <nil> Ingress Allow 190 \
         default/nettool 10.10.1.13 57050 10.10.1.7 80 TCP 60 <nil>"
    );
}

#[test]
fn antrea_default_drop_icmp_is_designs_example() {
    let r = Record::single(entry(&drop_icmp(), t_drop()));
    assert_eq!(
        line(Format::Antrea, &r),
        "2023/07/04 12:33:26.221413 IngressDefaultRule K8sNetworkPolicy <nil> Ingress Drop <nil> default/nettool \
         10.10.1.13 <nil> 10.10.1.7 <nil> ICMP 84 <nil>"
    );
}

#[test]
fn antrea_fields_udp_sctp_igmp_ipv6() {
    // The 14 fields after the timestamp, as one space-separated string.
    let cases: Vec<(PacketIn2, &str)> = vec![
        (
            packet_in(
                ipv4("10.10.1.13", "10.10.1.7", UDP, &udp(5353, 53, 32)),
                Disposition::Allow,
                tables::INGRESS_RULE,
                18,
            ),
            "IngressRule K8sNetworkPolicy:x/named ingress-0 Ingress Allow 190 default/nettool 10.10.1.13 5353 10.10.1.7 53 UDP 60 audit-me",
        ),
        (
            packet_in(
                ipv4("10.10.1.13", "10.10.1.7", SCTP, &sctp(3000, 5000)),
                Disposition::Drop,
                tables::INGRESS_DEFAULT_RULE,
                5,
            ),
            "IngressDefaultRule K8sNetworkPolicy <nil> Ingress Drop <nil> default/nettool 10.10.1.13 3000 10.10.1.7 5000 SCTP 52 <nil>",
        ),
        (
            packet_in(
                ipv4("10.10.9.9", "10.10.1.7", IGMP, &igmp()),
                Disposition::Drop,
                tables::INGRESS_DEFAULT_RULE,
                5,
            ),
            "IngressDefaultRule K8sNetworkPolicy <nil> Ingress Drop <nil> default/nettool 10.10.9.9 <nil> 10.10.1.7 <nil> IGMP 28 <nil>",
        ),
        (
            packet_in(
                ipv6("fd00::13", "fd00::7", TCP, &[], &tcp(40000, 8080, true)),
                Disposition::Allow,
                tables::INGRESS_RULE,
                17,
            ),
            "IngressRule K8sNetworkPolicy:default/allow-tcp-80 <nil> Ingress Allow 190 default/nettool fd00::13 40000 fd00::7 8080 TCP 80 <nil>",
        ),
        (
            packet_in(
                ipv6("fd00::13", "fd00::7", ICMPV6, &[], &icmp_echo(56)),
                Disposition::Drop,
                tables::INGRESS_DEFAULT_RULE,
                5,
            ),
            "IngressDefaultRule K8sNetworkPolicy <nil> Ingress Drop <nil> default/nettool fd00::13 <nil> fd00::7 <nil> IPv6-ICMP 104 <nil>",
        ),
        (
            // Unknown ofport and an unknown destination: applied-to is <nil>. GRE: unknown protocol.
            packet_in(
                ipv4("10.10.1.13", "10.10.2.2", 47, &[0; 8]),
                Disposition::Drop,
                tables::INGRESS_DEFAULT_RULE,
                99,
            ),
            "IngressDefaultRule K8sNetworkPolicy <nil> Ingress Drop <nil> <nil> 10.10.1.13 <nil> 10.10.2.2 <nil> UnknownProtocol 28 <nil>",
        ),
    ];
    for (pi, want) in cases {
        let l = line(Format::Antrea, &Record::single(entry(&pi, t_allow())));
        let f = fields(&l);
        assert_eq!(f.len(), 16, "{l}");
        assert_eq!(&f[..2], ["2023/07/04", "12:31:02.801442"], "{l}");
        assert_eq!(f[2..].join(" "), want, "{l}");
    }
}

#[test]
fn antrea_v1_lines_are_prs_examples() {
    let mut res = resolver();
    res.rules.get_mut(&17).unwrap().policy = obj("default", "test-np-log");
    let allow = packet_in(
        ipv4("10.10.1.82", "10.10.1.84", TCP, &tcp(49518, 80, true)),
        Disposition::Allow,
        tables::INGRESS_RULE,
        17,
    );
    let drop = packet_in(
        ipv4("10.10.1.83", "10.10.1.84", TCP, &tcp(38608, 80, true)),
        Disposition::Drop,
        tables::INGRESS_DEFAULT_RULE,
        5,
    );
    let ping = packet_in(
        ipv4("10.10.1.83", "10.10.1.84", ICMP, &icmp_echo(56)),
        Disposition::Drop,
        tables::INGRESS_DEFAULT_RULE,
        5,
    );
    let e = |pi: &PacketIn2| Record::single(entry_from_packet_in(pi, &res, t_allow()).unwrap());
    assert_eq!(
        line(Format::AntreaV1, &e(&allow)),
        "2023/07/04 12:31:02.801442 IngressRule K8sNetworkPolicy:default/test-np-log Allow 190 10.10.1.82 49518 10.10.1.84 80 TCP 60"
    );
    assert_eq!(
        line(Format::AntreaV1, &e(&drop)),
        "2023/07/04 12:31:02.801442 IngressDefaultRule K8sNetworkPolicy Drop -1 10.10.1.83 38608 10.10.1.84 80 TCP 60"
    );
    assert_eq!(
        line(Format::AntreaV1, &e(&ping)),
        "2023/07/04 12:31:02.801442 IngressDefaultRule K8sNetworkPolicy Drop -1 10.10.1.83 <nil> 10.10.1.84 <nil> ICMP 84"
    );
}

#[test]
fn aggregate_suffix_in_text_formats() {
    let first = t_drop();
    let mut r = Record::single(entry(&drop_icmp(), first));
    r.count = 7;
    r.last_seen = first + Duration::from_millis(600);
    r.span = Duration::from_nanos(1_000_512_345);
    r.written_at = first + r.span;
    let l = line(Format::Antrea, &r);
    assert!(l.starts_with("2023/07/04 12:33:27.221925 IngressDefaultRule "), "{l}");
    assert!(l.ends_with(" ICMP 84 <nil> [7 packets in 1.000512345s]"), "{l}");
    let l = line(Format::AntreaV1, &r);
    assert!(l.ends_with(" ICMP 84 [7 packets in 1.000512345s]"), "{l}");
}

#[test]
fn json_names_both_ends() {
    let r = Record::single(entry(&allow_tcp_80(), t_allow()));
    let v: Value = serde_json::from_str(&line(Format::Json, &r)).unwrap();
    assert_eq!(
        v,
        json!({
            "time": "2023-07-04T12:31:02.801442000Z",
            "node": "node-1",
            "table": "IngressRule",
            "direction": "Ingress",
            "disposition": "Allow",
            "policy": {"kind": "K8sNetworkPolicy", "namespace": "default", "name": "allow-tcp-80"},
            "rule": null,
            "priority": 190,
            "applied_to": {"namespace": "default", "pod": "nettool"},
            "source": {"ip": "10.10.1.13", "port": 57050, "namespace": "default", "pod": "client"},
            "destination": {"ip": "10.10.1.7", "port": 80, "namespace": "default", "pod": "nettool"},
            "protocol": "TCP",
            "length": 60,
            "log_label": null,
            "count": 1,
            "first_seen": "2023-07-04T12:31:02.801442000Z",
            "last_seen": "2023-07-04T12:31:02.801442000Z",
        })
    );
}

#[test]
fn json_default_drop_aggregate() {
    let pi = packet_in(
        ipv4("10.20.0.5", "10.10.1.7", ICMP, &icmp_echo(56)),
        Disposition::Drop,
        tables::INGRESS_DEFAULT_RULE,
        5,
    );
    let first = t_drop();
    let mut r = Record::single(entry(&pi, first));
    r.count = 3;
    r.last_seen = first + Duration::from_millis(900);
    r.span = Duration::from_secs(1);
    r.written_at = first + r.span;
    let l = line(Format::Json, &r);
    assert!(!l.contains('\n'));
    let v: Value = serde_json::from_str(&l).unwrap();
    assert_eq!(v["policy"], json!({"kind": "K8sNetworkPolicy", "namespace": null, "name": null}));
    assert_eq!(v["priority"], Value::Null);
    assert_eq!(v["source"], json!({"ip": "10.20.0.5", "port": null, "namespace": null, "pod": null}));
    assert_eq!(v["destination"]["pod"], "nettool");
    assert_eq!(v["protocol"], "ICMP");
    assert_eq!(v["length"], 84);
    assert_eq!(v["count"], 3);
    assert_eq!(v["time"], "2023-07-04T12:33:27.221413000Z");
    assert_eq!(v["first_seen"], "2023-07-04T12:33:26.221413000Z");
    assert_eq!(v["last_seen"], "2023-07-04T12:33:27.121413000Z");
    assert_eq!(
        v["isolated_by"],
        json!([{"namespace": "default", "name": "allow-tcp-80"}, {"namespace": "default", "name": "deny-all"}]),
        "a default drop names the policies isolating the pod in its direction"
    );
}

#[test]
fn json_default_drop_of_another_direction_names_its_own_isolating_policies() {
    // Egress from the same port: nothing isolates it for egress in the resolver.
    let pi = packet_in(
        ipv4("10.10.1.7", "10.10.1.13", ICMP, &icmp_echo(56)),
        Disposition::Drop,
        tables::EGRESS_DEFAULT_RULE,
        5,
    );
    let v: Value = serde_json::from_str(&line(Format::Json, &Record::single(entry(&pi, t_drop())))).unwrap();
    assert_eq!(v["direction"], "Egress");
    assert_eq!(v["isolated_by"], json!([]));
}

#[test]
fn unresolvable_packet_ins_are_errors() {
    let res = resolver();
    let mut pi = allow_tcp_80();
    pi.userdata = None;
    assert_eq!(entry_from_packet_in(&pi, &res, t_allow()), Err(AuditError::NoUserdata));
    let mut pi = allow_tcp_80();
    pi.userdata = Some(bytes::Bytes::from_static(&[1, 1]));
    assert!(matches!(entry_from_packet_in(&pi, &res, t_allow()), Err(AuditError::Userdata(_))));
    let pi = packet_in(
        ipv4("10.10.1.13", "10.10.1.7", TCP, &tcp(1, 2, false)),
        Disposition::Allow,
        tables::INGRESS_RULE,
        4242,
    );
    assert_eq!(entry_from_packet_in(&pi, &res, t_allow()), Err(AuditError::UnknownRule(4242)));
    let mut pi = allow_tcp_80();
    pi.packet = pi.packet.slice(..30);
    assert!(matches!(entry_from_packet_in(&pi, &res, t_allow()), Err(AuditError::Packet(_))));
}

/// Egress lines name the source pod as the applied-to pod, in every format; Antrea 1.8's 10
/// fields have no direction and no pods, so they differ only by the table.
#[test]
fn egress_lines_name_the_source_pod() {
    let mut res = resolver();
    res.ports.insert(6, obj("default", "client"));
    let allow = packet_in(
        ipv4("10.10.1.13", "10.10.1.7", TCP, &tcp(57050, 80, true)),
        Disposition::Allow,
        tables::EGRESS_RULE,
        17,
    );
    let drop = packet_in(
        ipv4("10.10.1.13", "10.10.1.7", ICMP, &icmp_echo(56)),
        Disposition::Drop,
        tables::EGRESS_DEFAULT_RULE,
        6,
    );
    let e = |pi: &PacketIn2| Record::single(entry_from_packet_in(pi, &res, t_allow()).unwrap());
    assert_eq!(
        line(Format::Antrea, &e(&allow)),
        "2023/07/04 12:31:02.801442 EgressRule K8sNetworkPolicy:default/allow-tcp-80 <nil> Egress Allow 190 \
         default/client 10.10.1.13 57050 10.10.1.7 80 TCP 60 <nil>"
    );
    assert_eq!(
        line(Format::Antrea, &e(&drop)),
        "2023/07/04 12:31:02.801442 EgressDefaultRule K8sNetworkPolicy <nil> Egress Drop <nil> default/client \
         10.10.1.13 <nil> 10.10.1.7 <nil> ICMP 84 <nil>"
    );
    assert_eq!(
        line(Format::AntreaV1, &e(&allow)),
        "2023/07/04 12:31:02.801442 EgressRule K8sNetworkPolicy:default/allow-tcp-80 Allow 190 10.10.1.13 57050 10.10.1.7 80 TCP 60"
    );
    let j: Value = serde_json::from_str(&line(Format::Json, &e(&drop))).unwrap();
    assert_eq!(j["direction"], "Egress");
    assert_eq!(j["applied_to"], json!({"namespace": "default", "pod": "client"}));
    assert_eq!(j["source"]["pod"], "client");
    assert_eq!(j["destination"]["pod"], "nettool");
    // Without the port in the rule table, the source pod by its address.
    let unknown_port = packet_in(
        ipv4("10.10.1.13", "10.10.1.7", ICMP, &icmp_echo(56)),
        Disposition::Drop,
        tables::EGRESS_DEFAULT_RULE,
        99,
    );
    assert_eq!(fields(&line(Format::Antrea, &e(&unknown_port)))[8], "default/client");
}

#[test]
fn a_table_without_logging_flows_is_refused() {
    let pi = packet_in(ipv4("10.10.1.13", "10.10.1.7", ICMP, &icmp_echo(8)), Disposition::Drop, 42, 5);
    assert_eq!(entry_from_packet_in(&pi, &resolver(), t_allow()), Err(AuditError::UnknownTable(42)));
}

#[test]
fn free_form_values_stay_one_field() {
    let mut res = resolver();
    let rule = res.rules.get_mut(&18).unwrap();
    rule.rule_name = Some("allow web\nnow".into());
    rule.log_label = Some(String::new());
    let pi = packet_in(
        ipv4("10.10.1.13", "10.10.1.7", UDP, &udp(5353, 53, 32)),
        Disposition::Allow,
        tables::INGRESS_RULE,
        18,
    );
    let e = entry_from_packet_in(&pi, &res, t_allow()).unwrap();
    let l = line(Format::Antrea, &Record::single(e));
    let f = fields(&l);
    assert_eq!(f.len(), 16, "{l}");
    assert_eq!(f[4], "allow_web_now");
    assert_eq!(f[15], "<nil>");
}

/// Staged verdicts' copies, as the staged flows send them, resolved: the pod from `reg4`
/// (ingress) and the policies from the resolver. `WouldDrop` names the staged policies that
/// would isolate the pod, `WouldAllow` the staged policy whose rule would allow, in every
/// format.
#[test]
fn staged_lines_in_every_format() {
    let drop = Record::single(entry(&would_drop_tcp_80(), t_allow()));
    let allow = Record::single(entry(&would_allow_tcp_80(), t_allow()));
    assert_eq!(
        line(Format::Antrea, &drop),
        "2023/07/04 12:31:02.801442 StagedIngressDefaultRule StagedNetworkPolicy:default/deny-all,default/web-only \
         <nil> Ingress WouldDrop <nil> default/nettool 10.10.1.13 57050 10.10.1.7 80 TCP 60 <nil>"
    );
    assert_eq!(
        line(Format::Antrea, &allow),
        "2023/07/04 12:31:02.801442 StagedIngressRule StagedNetworkPolicy:default/allow-staged from-client \
         Ingress WouldAllow 190 default/nettool 10.10.1.13 57050 10.10.1.7 80 TCP 60 <nil>"
    );
    // Both keep Antrea's field counts.
    assert_eq!(fields(&line(Format::Antrea, &drop)).len(), 16);
    assert_eq!(fields(&line(Format::Antrea, &allow)).len(), 16);
    assert_eq!(
        line(Format::AntreaV1, &drop),
        "2023/07/04 12:31:02.801442 StagedIngressDefaultRule StagedNetworkPolicy:default/deny-all,default/web-only \
         WouldDrop -1 10.10.1.13 57050 10.10.1.7 80 TCP 60"
    );
    assert_eq!(
        line(Format::AntreaV1, &allow),
        "2023/07/04 12:31:02.801442 StagedIngressRule StagedNetworkPolicy:default/allow-staged WouldAllow 190 \
         10.10.1.13 57050 10.10.1.7 80 TCP 60"
    );
    let d: Value = serde_json::from_str(&line(Format::Json, &drop)).unwrap();
    assert_eq!(
        d,
        json!({
            "time": "2023-07-04T12:31:02.801442000Z",
            "node": "node-1",
            "table": "StagedIngressDefaultRule",
            "direction": "Ingress",
            "disposition": "WouldDrop",
            "policy": {"kind": "StagedNetworkPolicy", "namespace": null, "name": null},
            "rule": null,
            "priority": null,
            "applied_to": {"namespace": "default", "pod": "nettool"},
            "source": {"ip": "10.10.1.13", "port": 57050, "namespace": "default", "pod": "client"},
            "destination": {"ip": "10.10.1.7", "port": 80, "namespace": "default", "pod": "nettool"},
            "protocol": "TCP",
            "length": 60,
            "log_label": null,
            "isolated_by": [{"namespace": "default", "name": "deny-all"}, {"namespace": "default", "name": "web-only"}],
            "count": 1,
            "first_seen": "2023-07-04T12:31:02.801442000Z",
            "last_seen": "2023-07-04T12:31:02.801442000Z",
        })
    );
    let a: Value = serde_json::from_str(&line(Format::Json, &allow)).unwrap();
    assert_eq!(a["table"], "StagedIngressRule");
    assert_eq!(a["disposition"], "WouldAllow");
    assert_eq!(a["policy"], json!({"kind": "StagedNetworkPolicy", "namespace": "default", "name": "allow-staged"}));
    assert_eq!((&a["rule"], &a["priority"]), (&json!("from-client"), &json!(190)));
    assert_eq!(a["applied_to"], json!({"namespace": "default", "pod": "nettool"}));
    assert!(a.get("isolated_by").is_none(), "{a}");
}

/// A WouldDrop of either direction finds its pod in the direction's register (`reg2` egress,
/// `reg4` ingress) even when the other one holds another pod, and the staged policies by that
/// pod's port: the copy's subject is 0, and the addresses are not asked.
#[test]
fn a_would_drop_names_the_pod_of_its_directions_register() {
    let mut res = resolver();
    res.ports.insert(6, obj("default", "client"));
    res.staged_isolating.insert((Direction::Egress, 6, Disposition::WouldDrop), vec![obj("default", "deny-egress")]);
    // Egress from client (port 6) at an address the model does not know, to a remote address;
    // reg4 holds no pod.
    let egress = staged_packet_in(
        ipv4("10.10.1.99", "10.20.0.5", UDP, &udp(40000, 53, 32)),
        Disposition::WouldDrop,
        Direction::Egress,
        6,
        0,
    );
    let e = entry_from_packet_in(&egress, &res, t_allow()).unwrap();
    assert_eq!(
        line(Format::Antrea, &Record::single(e.clone())),
        "2023/07/04 12:31:02.801442 StagedEgressDefaultRule StagedNetworkPolicy:default/deny-egress <nil> Egress \
         WouldDrop <nil> default/client 10.10.1.99 40000 10.20.0.5 53 UDP 60 <nil>"
    );
    assert_eq!(e.isolated_by, [obj("default", "deny-egress")]);
    // Ingress into nettool (port 5) from client, whose port is in reg2: reg4 decides.
    let mut regs = staged_registers(Disposition::WouldDrop, Direction::Ingress, 5, 0);
    regs.push((2, 6));
    let ingress = staged_packet_in_with(
        ipv4("10.10.1.13", "10.10.1.7", TCP, &tcp(57050, 80, true)),
        Disposition::WouldDrop,
        Direction::Ingress,
        regs,
    );
    let e = entry_from_packet_in(&ingress, &res, t_allow()).unwrap();
    let l = line(Format::Antrea, &Record::single(e.clone()));
    assert_eq!(
        fields(&l)[3..9],
        [
            "StagedNetworkPolicy:default/deny-all,default/web-only",
            "<nil>",
            "Ingress",
            "WouldDrop",
            "<nil>",
            "default/nettool"
        ],
        "{l}"
    );
    assert_eq!(e.isolated_by, [obj("default", "deny-all"), obj("default", "web-only")]);
    // The pod's port, not an address: with nettool's address unknown, still nettool.
    res.ips.remove(&ip("10.10.1.7"));
    let e = entry_from_packet_in(&ingress, &res, t_allow()).unwrap();
    assert_eq!(fields(&line(Format::Antrea, &Record::single(e)))[8], "default/nettool");
}

/// A WouldAllow's staged rule is in the direction's rule register (`reg9` egress, `reg11`
/// ingress), beside the verdict in the same `xreg` (exact, both halves set).
#[test]
fn a_would_allow_names_the_staged_rule_of_its_directions_register() {
    let mut res = resolver();
    res.ports.insert(6, obj("default", "client"));
    res.staged_rules.insert(
        8,
        RuleMeta {
            policy: obj("default", "egress-staged"),
            rule_name: None,
            priority: 190,
            log_label: Some("dns".into()),
            table: tables::STAGED_EGRESS_RULE,
            cluster: None,
        },
    );
    let egress = staged_packet_in(
        ipv4("10.10.1.13", "10.20.0.5", UDP, &udp(40000, 53, 32)),
        Disposition::WouldAllow,
        Direction::Egress,
        6,
        8,
    );
    let e = entry_from_packet_in(&egress, &res, t_allow()).unwrap();
    assert_eq!(
        line(Format::Antrea, &Record::single(e)),
        "2023/07/04 12:31:02.801442 StagedEgressRule StagedNetworkPolicy:default/egress-staged <nil> Egress \
         WouldAllow 190 default/client 10.10.1.13 40000 10.20.0.5 53 UDP 60 dns"
    );
    let e = entry_from_packet_in(&would_allow_tcp_80(), &res, t_allow()).unwrap();
    assert_eq!(e.policy, PolicyRef::Staged(obj("default", "allow-staged")));
    assert_eq!((e.rule_name.as_deref(), e.priority), (Some("from-client"), Some(190)));
    assert!(e.isolated_by.is_empty());
}

/// Rule 0: the staged view does not isolate the pod at all. The line names the staged edit
/// whose isolation of the pod the staged view ends, with no rule and no priority.
#[test]
fn a_would_allow_by_no_rule_names_the_policy_whose_isolation_ends() {
    let pi = staged_packet_in(
        ipv4("10.10.1.13", "10.10.1.7", TCP, &tcp(57050, 80, true)),
        Disposition::WouldAllow,
        Direction::Ingress,
        5,
        0,
    );
    let r = Record::single(entry(&pi, t_allow()));
    assert_eq!(r.entry.policy, PolicyRef::Staged(obj("default", "allow-tcp-80")));
    assert_eq!(
        line(Format::Antrea, &r),
        "2023/07/04 12:31:02.801442 StagedIngressRule StagedNetworkPolicy:default/allow-tcp-80 <nil> Ingress \
         WouldAllow <nil> default/nettool 10.10.1.13 57050 10.10.1.7 80 TCP 60 <nil>"
    );
    assert_eq!(
        line(Format::AntreaV1, &r),
        "2023/07/04 12:31:02.801442 StagedIngressRule StagedNetworkPolicy:default/allow-tcp-80 WouldAllow -1 \
         10.10.1.13 57050 10.10.1.7 80 TCP 60"
    );
    let j: Value = serde_json::from_str(&line(Format::Json, &r)).unwrap();
    assert_eq!(j["policy"], json!({"kind": "StagedNetworkPolicy", "namespace": "default", "name": "allow-tcp-80"}));
    assert_eq!((&j["rule"], &j["priority"]), (&Value::Null, &Value::Null));
}

/// A staged rule the resolver does not know (its staged policy deleted beyond the grace
/// period) is an error naming the staged id, not the enforced rules'; nothing panics on a
/// staged copy without its registers either.
#[test]
fn an_unknown_staged_rule_is_a_clear_error() {
    let frame = || ipv4("10.10.1.13", "10.10.1.7", TCP, &tcp(57050, 80, true));
    let pi = staged_packet_in(frame(), Disposition::WouldAllow, Direction::Ingress, 5, 4242);
    let err = entry_from_packet_in(&pi, &resolver(), t_allow()).unwrap_err();
    assert_eq!(err, AuditError::UnknownStagedRule(4242));
    assert_eq!(err.to_string(), "no staged rule known for staged conjunction id 4242");
    // The enforced rule 17 is not a staged rule.
    let pi = staged_packet_in(frame(), Disposition::WouldAllow, Direction::Ingress, 5, 17);
    assert_eq!(entry_from_packet_in(&pi, &resolver(), t_allow()), Err(AuditError::UnknownStagedRule(17)));
    // No registers at all: no pod by port, no policy known; the line still says what it is.
    for disposition in [Disposition::WouldDrop, Disposition::WouldAllow] {
        let pi = staged_packet_in_with(frame(), disposition, Direction::Ingress, Vec::new());
        let e = entry_from_packet_in(&pi, &resolver(), t_allow()).unwrap();
        assert_eq!((e.policy, e.isolated_by.len()), (PolicyRef::StagedDrop, 0), "{disposition:?}");
    }
}

/// The registers the test support builds are read back as OVS means them: even registers in
/// the high half of their `xreg`, zero ones absent.
#[test]
fn staged_registers_read_back_as_ovs_reports_them() {
    let pi = staged_packet_in(frame_for_registers(), Disposition::WouldAllow, Direction::Egress, 6, 9);
    let regs: Vec<Option<u32>> = [2, 3, 4, 8, 9, 10, 11].into_iter().map(|n| pi.register(n)).collect();
    assert_eq!(regs, [Some(6), Some(1), None, Some(2), Some(9), None, None]);
    assert_eq!(
        pi.metadata,
        [
            ofp::Oxm::XReg { index: 1, value: ofp::Masked::exact((6 << 32) | 1) },
            ofp::Oxm::XReg { index: 4, value: ofp::Masked::exact((2 << 32) | 9) },
        ]
    );
    let pi = staged_packet_in(frame_for_registers(), Disposition::WouldDrop, Direction::Ingress, 5, 0);
    assert_eq!(pi.register(4), Some(5));
    assert_eq!(pi.register(11), None);
    assert!(pi
        .metadata
        .contains(&ofp::Oxm::XReg { index: 5, value: ofp::Masked::masked(1 << 32, 0xffff_ffff_0000_0000) }));
}

fn frame_for_registers() -> Vec<u8> {
    ipv4("10.10.1.13", "10.10.1.7", ICMP, &icmp_echo(8))
}

/// The ClusterNetworkPolicy rules of the tests below: 30, Admin `guard` (priority 5) rule
/// `to-np`, a Pass; 31, Baseline `tenants` (priority 50), its unnamed ingress rule 1, a Deny.
fn cluster_resolver() -> FakeResolver {
    use npagent::compiler::ClusterRuleInfo;
    use npagent::model::cluster_policy::{Action, Tier};
    let mut r = resolver();
    let cnp = |name: &str| npagent::model::ObjectRef { namespace: "".into(), name: name.into() };
    r.rules.insert(
        30,
        RuleMeta {
            policy: cnp("guard"),
            rule_name: Some("to-np".into()),
            priority: 60000,
            log_label: None,
            table: tables::ADMIN_INGRESS_RULE,
            cluster: Some(ClusterRuleInfo { tier: Tier::Admin, action: Action::Pass, policy_priority: 5 }),
        },
    );
    r.rules.insert(
        31,
        RuleMeta {
            policy: cnp("tenants"),
            rule_name: None,
            priority: 59999,
            log_label: None,
            table: tables::BASELINE_INGRESS_RULE,
            cluster: Some(ClusterRuleInfo { tier: Tier::Baseline, action: Action::Deny, policy_priority: 50 }),
        },
    );
    r
}

fn syn_client_to_nettool() -> Vec<u8> {
    ipv4("10.10.1.13", "10.10.1.7", TCP, &tcp(57050, 80, true))
}

#[test]
fn a_pass_line_names_the_cluster_policy_and_the_next_tiers_line_its_chain() {
    let res = cluster_resolver();
    // The Pass copy: the rule in reg6, the judged pod (nettool, ofport 5) in reg4.
    let pass = cluster_packet_in(syn_client_to_nettool(), Disposition::Pass, Direction::Ingress, &[(4, 5), (6, 30)]);
    let e = entry_from_packet_in(&pass, &res, t_allow()).unwrap();
    assert_eq!(e.policy, PolicyRef::Cluster("guard".into()));
    assert_eq!(
        line(Format::Antrea, &Record::single(e.clone())),
        "2023/07/04 12:31:02.801442 AdminIngressRule ClusterNetworkPolicy:guard to-np Ingress Pass 60000 \
         default/nettool 10.10.1.13 57050 10.10.1.7 80 TCP 60 <nil>"
    );
    let v: Value = serde_json::from_str(&line(Format::Json, &Record::single(e))).unwrap();
    assert_eq!(v["policy"], json!({"kind": "ClusterNetworkPolicy", "namespace": null, "name": "guard"}));
    assert_eq!((&v["tier"], &v["tier_priority"], &v["rule"]), (&json!("Admin"), &json!(5), &json!("to-np")));
    assert_eq!(v["chain"], json!(["Admin/Pass guard:to-np"]));
    // The NetworkPolicy's Allow after it: the Pass rule is in reg13.
    let mut allow = allow_tcp_80();
    allow.metadata = ovs_registers(&[(6, 17), (13, 30)]);
    let v: Value = serde_json::from_str(&line(
        Format::Json,
        &Record::single(entry_from_packet_in(&allow, &res, t_allow()).unwrap()),
    ))
    .unwrap();
    assert_eq!(v["chain"], json!(["Admin/Pass guard:to-np", "NetworkPolicy default/allow-tcp-80"]));
    assert!(v.get("tier").is_none(), "a NetworkPolicy's line has no tier: {v}");
    // Without a Pass, a NetworkPolicy's line has no chain (the NetworkPolicies alone decided).
    let v: Value =
        serde_json::from_str(&line(Format::Json, &Record::single(entry(&allow_tcp_80(), t_allow())))).unwrap();
    assert!(v.get("chain").is_none(), "{v}");
}

#[test]
fn a_baseline_deny_is_a_drop_in_its_tiers_table() {
    let res = cluster_resolver();
    let deny = cluster_packet_in(syn_client_to_nettool(), Disposition::Drop, Direction::Ingress, &[(4, 5), (6, 31)]);
    let e = entry_from_packet_in(&deny, &res, t_drop()).unwrap();
    let l = line(Format::Antrea, &Record::single(e));
    let f = fields(&l);
    assert_eq!(
        &f[2..8],
        ["BaselineIngressRule", "ClusterNetworkPolicy:tenants", "<nil>", "Ingress", "Drop", "59999"],
        "{l}"
    );
}

#[test]
fn a_tier_tables_copy_naming_no_cluster_policy_rule_is_an_error_not_a_line() {
    let res = cluster_resolver();
    // reg6 names a NetworkPolicy's rule (17), or nothing known (99), or is missing.
    for regs in [&[(4, 5), (6, 17)][..], &[(4, 5), (6, 99)][..], &[(4, 5)][..]] {
        let pi = cluster_packet_in(syn_client_to_nettool(), Disposition::Allow, Direction::Ingress, regs);
        assert!(matches!(entry_from_packet_in(&pi, &res, t_allow()), Err(AuditError::UnknownRule(_))), "{regs:?}");
    }
    // A Pass from a table that is no tier's: refused.
    let mut pass =
        cluster_packet_in(syn_client_to_nettool(), Disposition::Pass, Direction::Ingress, &[(4, 5), (6, 30)]);
    let ud = npagent::compiler::userdata::LogUserdata {
        disposition: Disposition::Pass,
        table_id: tables::INGRESS_RULE,
        subject: 0,
    };
    pass.userdata = Some(ud.encode().to_vec().into());
    assert!(entry_from_packet_in(&pass, &res, t_allow()).is_err());
}
