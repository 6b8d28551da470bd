//! The compiled pipeline against a real ovs-vswitchd (3.1, dummy datapath, its own network
//! namespace and run directory, stopped by pid): OVS accepts every flow; a dump of the
//! installed flows, parsed and normalised, equals the desired flows (empty diff); the flow
//! text equals `ovs-ofctl dump-flows --names`; incremental changes sent as raw flow_mods
//! converge; ids recovered from the dump reproduce the installed flows with zero flow_mods.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

use bytes::{BufMut, BytesMut};
use npagent::compiler::synthetic::*;
use npagent::compiler::{
    diff, diff_keys, flows_text, installed_from_stats, tables, Change, Compiler, Config, FlowTable, IdAllocator,
};
use npagent::model::{IngressRule, Model, Peer};
use ofp::{
    FlowMod, FlowStats, FlowStatsRequest, MultipartReply, MultipartReplyBody, MultipartRequest, MultipartRequestBody,
};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Command;

struct Sandbox {
    dir: tempfile::TempDir,
    netns: String,
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(out.status.success(), "{cmd:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

impl Sandbox {
    /// ovsdb-server + ovs-vswitchd (dummy datapath) in a fresh network namespace, br-int with
    /// the given ports and npagent's table names.
    fn start(ports: &[(u32, String)]) -> Option<Sandbox> {
        if Command::new("ovs-vswitchd").arg("--version").output().is_err() {
            eprintln!("ovs-vswitchd not installed: skipping");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().to_str().unwrap().to_string();
        let netns = format!("npc-{}-{}", std::process::id(), dir.path().file_name().unwrap().to_string_lossy());
        run(Command::new("ip").args(["netns", "add", &netns]));
        let sb = Sandbox { dir, netns };
        let schema = "/usr/share/openvswitch/vswitch.ovsschema";
        run(Command::new("ovsdb-tool").args(["create", &format!("{d}/conf.db"), schema]));
        run(sb.exec("ovsdb-server").args([
            &format!("{d}/conf.db"),
            &format!("--remote=punix:{d}/db.sock"),
            &format!("--pidfile={d}/db.pid"),
            &format!("--unixctl={d}/db.ctl"),
            "--detach",
            "--no-chdir",
            &format!("--log-file={d}/db.log"),
        ]));
        run(sb.exec("ovs-vswitchd").env("OVS_RUNDIR", &d).args([
            &format!("unix:{d}/db.sock"),
            "--enable-dummy",
            "--disable-system",
            "--disable-system-route",
            &format!("--pidfile={d}/vs.pid"),
            &format!("--unixctl={d}/vs.ctl"),
            "--detach",
            "--no-chdir",
            &format!("--log-file={d}/vs.log"),
        ]));
        let mut args: Vec<String> = vec![
            format!("--db=unix:{d}/db.sock"),
            "--".into(),
            "init".into(),
            "--".into(),
            "add-br".into(),
            "br-int".into(),
            "--".into(),
            "set".into(),
            "bridge".into(),
            "br-int".into(),
            "datapath-type=dummy".into(),
            "fail-mode=secure".into(),
            "protocols=OpenFlow15".into(),
        ];
        for (ofport, name) in ports {
            args.extend(
                ["--", "add-port", "br-int", name, "--", "set", "Interface", name, "type=dummy"].map(String::from),
            );
            args.push(format!("ofport_request={ofport}"));
        }
        for (id, name) in tables::TABLES {
            args.extend([
                "--".into(),
                format!("--id=@t{id}"),
                "create".into(),
                "Flow_Table".into(),
                format!("name={name}"),
            ]);
            args.extend([
                "--".into(),
                "set".into(),
                "Bridge".into(),
                "br-int".into(),
                format!("flow_tables:{id}=@t{id}"),
            ]);
        }
        run(Command::new("ovs-vsctl").args(&args));
        Some(sb)
    }

    fn exec(&self, prog: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.netns, prog]);
        c
    }

    fn dir(&self) -> &Path {
        self.dir.path()
    }

    fn ofctl(&self, args: &[&str]) -> String {
        run(Command::new("ovs-ofctl").env("OVS_RUNDIR", self.dir()).args(["-O", "OpenFlow15"]).args(args))
    }

    fn mgmt(&self) -> PathBuf {
        self.dir().join("br-int.mgmt")
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        for pidfile in ["vs.pid", "db.pid"] {
            if let Ok(pid) = std::fs::read_to_string(self.dir().join(pidfile)) {
                let _ = Command::new("kill").arg(pid.trim()).status();
            }
        }
        let _ = Command::new("ip").args(["netns", "del", &self.netns]).status();
    }
}

/// A minimal OpenFlow 1.5 client over the bridge's management socket.
struct Conn {
    s: UnixStream,
    xid: u32,
}

impl Conn {
    fn open(path: &Path) -> Conn {
        let s = UnixStream::connect(path).unwrap();
        let mut c = Conn { s, xid: 1 };
        c.send(0, &[]);
        let (t, _, _) = c.recv();
        assert_eq!(t, 0, "expected HELLO");
        c
    }

    fn send(&mut self, msg_type: u8, body: &[u8]) -> u32 {
        self.xid += 1;
        let mut b = BytesMut::new();
        b.put_u8(ofp::OFP_VERSION);
        b.put_u8(msg_type);
        b.put_u16(u16::try_from(8 + body.len()).unwrap());
        b.put_u32(self.xid);
        b.put_slice(body);
        self.s.write_all(&b).unwrap();
        self.xid
    }

    fn recv(&mut self) -> (u8, u32, Vec<u8>) {
        let mut h = [0u8; 8];
        self.s.read_exact(&mut h).unwrap();
        let len = usize::from(u16::from_be_bytes([h[2], h[3]]));
        let mut body = vec![0u8; len - 8];
        self.s.read_exact(&mut body).unwrap();
        (h[1], u32::from_be_bytes([h[4], h[5], h[6], h[7]]), body)
    }

    fn dump(&mut self) -> Vec<FlowStats> {
        let req = MultipartRequest {
            flags: 0,
            body: MultipartRequestBody::Flow(FlowStatsRequest {
                table_id: ofp::TABLE_ALL,
                out_port: ofp::port::ANY,
                out_group: ofp::GROUP_ANY,
                cookie: 0,
                cookie_mask: 0,
                match_: ofp::Match::default(),
            }),
        };
        let mut b = BytesMut::new();
        req.emit(&mut b);
        let xid = self.send(18, &b);
        let mut flows = Vec::new();
        loop {
            let (t, rx, body) = self.recv();
            if t != 19 || rx != xid {
                assert_ne!(t, 1, "error reply to flow dump: {body:02x?}");
                continue;
            }
            let reply = MultipartReply::parse(&body).expect("flow stats reply parses");
            if let MultipartReplyBody::Flow(v) = reply.body {
                flows.extend(v);
            }
            if reply.flags & 1 == 0 {
                return flows;
            }
        }
    }

    /// Sends flow_mods then a barrier; panics on any error reply.
    fn flow_mods(&mut self, mods: &[FlowMod]) {
        for m in mods {
            let mut b = BytesMut::new();
            m.emit(&mut b);
            self.send(14, &b);
        }
        let xid = self.send(20, &[]);
        loop {
            let (t, rx, body) = self.recv();
            assert_ne!(t, 1, "error reply: {body:02x?}");
            if t == 21 && rx == xid {
                return;
            }
        }
    }
}

fn installed(conn: &mut Conn) -> FlowTable {
    installed_from_stats(&conn.dump())
}

/// Installs `text` (flows as `flows_text` prints them) with `ovs-ofctl add-flows` in one
/// bundle, and returns the bridge's flows as `ovs-ofctl dump-flows` prints them, sorted.
fn add_flows_and_dump(sb: &Sandbox, text: &[String]) -> Vec<String> {
    let file = sb.dir().join("flows.txt");
    std::fs::write(&file, text.iter().map(|l| format!("{}\n", l.trim_start())).collect::<String>()).unwrap();
    sb.ofctl(&["--bundle", "add-flows", "br-int", file.to_str().unwrap()]);
    let mut dumped: Vec<String> =
        sb.ofctl(&["dump-flows", "--no-stats", "--names", "br-int"]).lines().map(str::to_string).collect();
    dumped.sort();
    dumped
}

/// `flow` with `ct_state=new|trk` and the conntrack tuple of a new connection (its `nw_src`,
/// `nw_dst`, `ipv6_src`, `ipv6_dst`, protocol and `tp_dst`/`tcp_dst`/`udp_dst` as
/// `ct_nw_src`, ...), as ofproto/trace wants them: ct_state first.
fn with_ct_tuple(flow: &str) -> String {
    let mut ct = vec!["ct_state=new|trk".to_string()];
    let mut proto = None;
    for part in flow.split(',') {
        let (key, value) = part.split_once('=').unwrap_or((part, ""));
        match key {
            "tcp" | "tcp6" => proto = Some(6),
            "udp" | "udp6" => proto = Some(17),
            "sctp" | "sctp6" => proto = Some(132),
            "nw_src" => ct.push(format!("ct_nw_src={value}")),
            "nw_dst" => ct.push(format!("ct_nw_dst={value}")),
            "ipv6_src" => ct.push(format!("ct_ipv6_src={value}")),
            "ipv6_dst" => ct.push(format!("ct_ipv6_dst={value}")),
            "tp_dst" | "tcp_dst" | "udp_dst" => ct.push(format!("ct_tp_dst={value}")),
            _ => {}
        }
    }
    if let Some(p) = proto {
        ct.push(format!("ct_nw_proto={p}"));
    }
    format!("{flow},{}", ct.join(","))
}

fn port_list(m: &Model) -> Vec<(u32, String)> {
    let node = m.node.gateway.iter().chain(&m.node.uplinks).map(|p| (p.ofport, p.interface.clone()));
    m.ports.values().map(|p| (p.ofport, p.interface.clone())).chain(node).collect()
}

#[test]
fn compiled_pipeline_on_real_ovs() {
    let mut model = small_model();
    let Some(sb) = Sandbox::start(&port_list(&model)) else { return };
    let mut c = Compiler::new(Config::default(), IdAllocator::new(60));
    c.full(&model, 0);

    // Install through ovs-ofctl from our text: OVS accepts every flow shape.
    let text = flows_text(c.flows(), &c.port_names());
    let dumped = add_flows_and_dump(&sb, &text);

    // Our text is OVS's text.
    assert_eq!(dumped, text);

    // OVS's own verdicts (ofproto/trace of a new connection). x/b and x/c are remote pods,
    // so their packets come in by an uplink: b -> a on TCP 80
    // (IPv4) and on the named port 8080 (IPv6) is allowed, logged and committed; c -> a is
    // dropped and logged.
    // A new connection: its conntrack tuple is its own addresses and ports (ofproto/trace
    // gives a ct() no tuple of its own, so the flow carries it). Its commit into its owner's
    // zone succeeds (the trace's recirculated packet keeps the mark the commit set).
    let trace = |flow: &str| {
        let flow = with_ct_tuple(flow);
        let flow = flow.as_str();
        let out = run(Command::new("ovs-appctl").args([
            "-t",
            sb.dir().join("vs.ctl").to_str().unwrap(),
            "ofproto/trace",
            "br-int",
            flow,
            "--ct-next",
            "trk,new",
        ]));
        // A new connection recirculates (ConntrackQuota): the passes' actions, in order.
        out.lines().filter(|l| l.starts_with("Datapath actions:")).collect::<Vec<_>>().join(" | ")
    };
    let allowed = trace("in_port=uplink0,tcp,nw_src=10.0.0.2,nw_dst=10.0.0.1,dl_dst=0a:58:00:00:00:01,tp_dst=80");
    assert!(allowed.contains("userdata") || allowed.contains("controller("), "{allowed}");
    // Committed first into the inbound zone (it entered by the uplink: no local pod opened
    // it, so no pod's zone counts it), then recirculated; then with the uplink's ofport (200)
    // as mark: its replies go back out there.
    assert!(allowed.contains("ct(commit,zone=65522,mark=0x1/0xffffffff),recirc("), "{allowed}");
    assert!(allowed.contains("ct(commit,zone=65520,mark=0xc8/0xffffffff)"), "{allowed}");
    let allowed6 = trace("in_port=uplink0,tcp6,ipv6_src=fd00::2,ipv6_dst=fd00::1,dl_dst=0a:58:00:00:00:01,tp_dst=8080");
    assert!(allowed6.contains("ct(commit,zone=65520,mark=0xc8/0xffffffff)"), "{allowed6}");
    let dropped = trace("in_port=uplink0,tcp,nw_src=10.0.0.3,nw_dst=10.0.0.1,dl_dst=0a:58:00:00:00:01,tp_dst=80");
    assert!(dropped.contains("controller(") && !dropped.contains("ct(commit"), "{dropped}");
    let wrong_port = trace("in_port=uplink0,tcp,nw_src=10.0.0.2,nw_dst=10.0.0.1,dl_dst=0a:58:00:00:00:01,tp_dst=81");
    assert!(!wrong_port.contains("ct(commit"), "{wrong_port}");
    // The local pod y/d claiming x/b's address, or its own address with another MAC: dropped
    // in SpoofGuard, before conntrack (IP with a security event's copy, ARP quietly). With its
    // own MAC and address it gets through to x/a, which is isolated from it (dropped and
    // logged).
    let only_copied = |actions: &str| {
        actions == "Datapath actions: drop"
            || (actions.starts_with("Datapath actions: userspace(")
                && !actions.contains("),")
                && !actions.contains("ct("))
    };
    let d_mac = "dl_src=0a:58:00:00:00:02";
    for spoofed in [
        format!("in_port=2,{d_mac},tcp,nw_src=10.0.0.2,nw_dst=10.0.0.1,dl_dst=0a:58:00:00:00:01,tp_dst=80"),
        "in_port=2,dl_src=0a:58:00:00:00:09,tcp,nw_src=10.0.1.4,nw_dst=10.0.0.1,dl_dst=0a:58:00:00:00:01,tp_dst=80"
            .into(),
        format!("in_port=2,{d_mac},arp,arp_spa=10.0.0.2,arp_sha=0a:58:00:00:00:02,arp_tpa=10.0.0.1"),
    ] {
        let out = trace(&spoofed);
        assert!(only_copied(&out), "{spoofed}: {out}");
    }
    let genuine =
        trace(&format!("in_port=2,{d_mac},tcp,nw_src=10.0.1.4,nw_dst=10.0.0.1,dl_dst=0a:58:00:00:00:01,tp_dst=80"));
    assert!(genuine.contains("controller(") && !genuine.contains("ct(commit"), "{genuine}");
    let arp = trace(&format!("in_port=2,{d_mac},arp,arp_spa=10.0.1.4,arp_sha=0a:58:00:00:00:02,arp_tpa=10.0.0.1"));
    assert_ne!(arp, "Datapath actions: drop", "{arp}");
    // To x/a's address through a broadcast MAC: still x/a's ingress policy (isolated).
    let broadcast = trace("in_port=uplink0,udp,nw_src=10.0.0.3,nw_dst=10.0.0.1,dl_dst=ff:ff:ff:ff:ff:ff,udp_dst=80");
    assert!(broadcast.contains("controller(") && !broadcast.contains("ct(commit"), "{broadcast}");

    // Dump, parse, normalise: equal to desired.
    let mut conn = Conn::open(&sb.mgmt());
    let inst = installed(&mut conn);
    assert_eq!(inst.len(), c.flows().len());
    assert_eq!(diff(c.flows(), &inst), vec![], "installed flows differ from desired");

    // Incremental changes, sent as raw flow_mods: logging off in x (modify_strict of the
    // conj_id flow and the default drop), y's deny-all deleted (delete_strict), a new policy
    // in y from x's pods (adds), pod c relabelled into the allowed set.
    model.namespaces.get_mut("x").unwrap().annotations.clear();
    model.policies.remove(&oref("y", "deny-all"));
    model = model.with_policy(policy(
        "y",
        "from-x",
        sel(&[]),
        vec![IngressRule {
            from: vec![Peer::Pods { pod_selector: None, namespace_selector: Some(sel(&[("ns", "x")])) }],
            ports: vec![],
        }],
    ));
    // Sorts before allow-b: a fresh compile would give it a smaller id than it gets here.
    model = model.with_policy(policy(
        "x",
        "a-first",
        sel(&[("pod", "a")]),
        vec![IngressRule {
            from: vec![ip_block("192.168.0.0/16", &["192.168.1.0/24"])],
            ports: vec![npagent::model::PortSpec {
                protocol: npagent::model::Protocol::Udp,
                port: Some(npagent::model::PortRef::Number(5000)),
                end_port: Some(5100),
            }],
        }],
    ));
    model.pods.get_mut(&oref("x", "c")).unwrap().labels.insert("pod", "b");
    let touched = c.update(
        &model,
        &[
            Change::Namespace("x".into()),
            Change::Policy(oref("y", "deny-all")),
            Change::Policy(oref("y", "from-x")),
            Change::Pod(oref("x", "c")),
            Change::Policy(oref("x", "a-first")),
        ],
        5,
    );
    let mods = diff_keys(c.flows(), &inst, &touched);
    assert_eq!(mods, diff(c.flows(), &inst), "incremental diff equals full diff");
    let kinds: Vec<ofp::FlowModCommand> = mods.iter().map(|m| m.command).collect();
    assert!(kinds.contains(&ofp::FlowModCommand::ModifyStrict), "{kinds:?}");
    assert!(kinds.contains(&ofp::FlowModCommand::Add), "{kinds:?}");
    conn.flow_mods(&mods);
    let inst = installed(&mut conn);
    assert_eq!(diff(c.flows(), &inst), vec![]);

    // A foreign flow and a desired key under another cookie: deleted and re-added.
    let key = c.flows().keys().find(|k| k.table == tables::OUTPUT && k.priority == 200).unwrap().clone();
    conn.flow_mods(&[
        FlowMod { cookie: 0x1234, table_id: 6, priority: 7, ..FlowMod::default() },
        FlowMod {
            cookie: 0x99,
            table_id: key.table,
            priority: key.priority,
            match_: key.match_.clone(),
            ..FlowMod::default()
        },
    ]);
    let inst = installed(&mut conn);
    let fix = diff(c.flows(), &inst);
    assert_eq!(fix.len(), 2, "{fix:?}");
    conn.flow_mods(&fix);
    let inst = installed(&mut conn);
    assert_eq!(diff(c.flows(), &inst), vec![]);

    // Restart: ids recovered from the switch reproduce the installed flows exactly.
    let stats = conn.dump();
    let mut restarted = Compiler::new(Config::default(), IdAllocator::recover(&stats, 60));
    restarted.full(&model, 100);
    assert_eq!(diff(restarted.flows(), &installed_from_stats(&stats)), vec![], "restart sends no flow_mod");
    // Without recovery the ids would differ (the check above is not vacuous).
    let mut fresh = Compiler::new(Config::default(), IdAllocator::new(60));
    fresh.full(&model, 100);
    assert_ne!(diff(fresh.flows(), &installed_from_stats(&stats)), vec![]);
}

#[test]
fn synthetic_cluster_on_real_ovs() {
    // Ranges, ipBlocks with except, UDP, named ports, logging: every shape the generator makes.
    let model = cluster(ClusterSpec { namespaces: 40, pods_per_ns: 20, policies_per_ns: 10, local_pods: 8 });
    let Some(sb) = Sandbox::start(&port_list(&model)) else { return };
    let c = npagent::compiler::compile(&model, Config::default(), IdAllocator::new(60), 0);
    let text = flows_text(c.flows(), &c.port_names());
    let dumped = add_flows_and_dump(&sb, &text);
    assert_eq!(dumped.len(), text.len());
    for (d, t) in dumped.iter().zip(&text) {
        assert_eq!(d, t);
    }
    let mut conn = Conn::open(&sb.mgmt());
    let inst = installed(&mut conn);
    assert_eq!(diff(c.flows(), &inst), vec![]);

    // The same flows sent as raw flow_mods into an empty bridge converge too.
    sb.ofctl(&["del-flows", "br-int"]);
    let mods = diff(c.flows(), &FlowTable::new());
    conn.flow_mods(&mods);
    assert_eq!(diff(c.flows(), &installed(&mut conn)), vec![]);
}

/// The staged view's flows, sent as raw flow_mods, beside a default drop that logs (x logs):
/// OVS accepts every one (a flow with two apply-actions instructions is refused with
/// OFPBIC_DUP_INST), and its own traces copy the verdicts: the staged edit of x/allow-b
/// (port 81 instead of 80) makes b -> a on 81 a WouldAllow beside its logged Drop, and on 80
/// a WouldDrop beside its logged Allow.
#[test]
fn staged_flows_on_real_ovs() {
    let mut model = small_model();
    let mut edit = model.policies[&oref("x", "allow-b")].clone();
    edit.ingress[0].ports = vec![tcp(81)];
    model.staged_policies.insert(oref("x", "allow-b"), edit);
    let Some(sb) = Sandbox::start(&port_list(&model)) else { return };
    let c = npagent::compiler::compile(&model, Config::default(), IdAllocator::new(60), 0);
    let mut conn = Conn::open(&sb.mgmt());
    conn.flow_mods(&diff(c.flows(), &FlowTable::new()));
    assert_eq!(diff(c.flows(), &installed(&mut conn)), vec![], "OVS holds every desired flow");

    // The userdata of the copies a new connection's trace makes: Allow 00, Drop 01, WouldDrop
    // 02, WouldAllow 03 (the third byte).
    let copies = |flow: &str| -> Vec<String> {
        let out = run(Command::new("ovs-appctl").args([
            "-t",
            sb.dir().join("vs.ctl").to_str().unwrap(),
            "ofproto/trace",
            "br-int",
            &with_ct_tuple(flow),
            "--ct-next",
            "trk,new",
        ]));
        let mut seen: Vec<String> = out
            .split("userdata=")
            .skip(1)
            .filter_map(|s| s.get(..8))
            .map(|u| u.split('.').nth(2).unwrap_or_default().to_string())
            .collect();
        seen.dedup();
        seen
    };
    let b_to_a = |port: u16| {
        copies(&format!("in_port=uplink0,tcp,nw_src=10.0.0.2,nw_dst=10.0.0.1,dl_dst=0a:58:00:00:00:01,tp_dst={port}"))
    };
    assert_eq!(b_to_a(81), ["03", "01"], "WouldAllow, then the Drop's own copy");
    assert_eq!(b_to_a(80), ["00", "02"], "the Allow's copy, then WouldDrop");
}
