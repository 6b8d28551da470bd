//! Each output format, field by field, from crafted packet-ins through decode and resolution.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

mod audit_support;

use audit_support::*;
use npagent::audit::format::{Format, Formatter};
use npagent::audit::{entry_from_packet_in, AuditEntry, AuditError, Record};
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

/// `allow_tcp_80`'s entry as a staged policy's verdict: `WouldDrop` names the staged policies
/// that would isolate the pod, `WouldAllow` the staged policy whose rule would allow.
fn staged_entry(would: npagent::audit::LineDisposition) -> AuditEntry {
    use npagent::audit::{LineDisposition, PolicyRef};
    let mut e = entry(&allow_tcp_80(), t_allow());
    e.disposition = would;
    match would {
        LineDisposition::WouldDrop => {
            e.table = "IngressDefaultRule".into();
            e.policy = PolicyRef::StagedDrop;
            e.priority = None;
            e.isolated_by = vec![obj("default", "deny-all"), obj("default", "web-only")];
        }
        _ => {
            e.policy = PolicyRef::Staged(obj("default", "allow-staged"));
            e.rule_name = Some("from-client".into());
        }
    }
    e
}

#[test]
fn staged_lines_in_every_format() {
    use npagent::audit::LineDisposition::{WouldAllow, WouldDrop};
    let drop = Record::single(staged_entry(WouldDrop));
    let allow = Record::single(staged_entry(WouldAllow));
    assert_eq!(
        line(Format::Antrea, &drop),
        "2023/07/04 12:31:02.801442 IngressDefaultRule StagedNetworkPolicy:default/deny-all,default/web-only <nil> \
         Ingress WouldDrop <nil> default/nettool 10.10.1.13 57050 10.10.1.7 80 TCP 60 <nil>"
    );
    assert_eq!(
        line(Format::Antrea, &allow),
        "2023/07/04 12:31:02.801442 IngressRule StagedNetworkPolicy:default/allow-staged from-client \
         Ingress WouldAllow 190 default/nettool 10.10.1.13 57050 10.10.1.7 80 TCP 60 <nil>"
    );
    // Both keep Antrea's field counts.
    assert_eq!(fields(&line(Format::Antrea, &drop)).len(), 16);
    assert_eq!(
        line(Format::AntreaV1, &drop),
        "2023/07/04 12:31:02.801442 IngressDefaultRule StagedNetworkPolicy:default/deny-all,default/web-only \
         WouldDrop -1 10.10.1.13 57050 10.10.1.7 80 TCP 60"
    );
    assert_eq!(
        line(Format::AntreaV1, &allow),
        "2023/07/04 12:31:02.801442 IngressRule StagedNetworkPolicy:default/allow-staged WouldAllow 190 \
         10.10.1.13 57050 10.10.1.7 80 TCP 60"
    );
    let d: Value = serde_json::from_str(&line(Format::Json, &drop)).unwrap();
    assert_eq!(d["disposition"], "WouldDrop");
    assert_eq!(d["policy"], json!({"kind": "StagedNetworkPolicy", "namespace": null, "name": null}));
    assert_eq!(
        d["isolated_by"],
        json!([{"namespace": "default", "name": "deny-all"}, {"namespace": "default", "name": "web-only"}])
    );
    let a: Value = serde_json::from_str(&line(Format::Json, &allow)).unwrap();
    assert_eq!(a["disposition"], "WouldAllow");
    assert_eq!(a["policy"], json!({"kind": "StagedNetworkPolicy", "namespace": "default", "name": "allow-staged"}));
    assert_eq!(a["rule"], "from-client");
    assert!(a.get("isolated_by").is_none(), "{a}");
}

#[test]
fn packet_ins_give_only_allow_and_drop() {
    // No flow reports a staged verdict yet: the datapath's copies are Allow or Drop.
    use npagent::audit::LineDisposition;
    assert_eq!(entry(&allow_tcp_80(), t_allow()).disposition, LineDisposition::Allow);
    assert_eq!(entry(&drop_icmp(), t_drop()).disposition, LineDisposition::Drop);
    for d in [LineDisposition::WouldDrop, LineDisposition::WouldAllow] {
        assert_eq!(LineDisposition::parse(d.as_str()), Some(d));
        assert!(d.is_staged());
    }
}
