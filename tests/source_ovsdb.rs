//! The OVSDB source against a real ovsdb-server and ovs-vswitchd (dummy datapath, own network
//! namespace and run directory, stopped by pid).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use npagent::model::LocalPort;
use npagent::source::ovsdb::db::BridgePorts;
use npagent::source::ovsdb::{run_ovsdb, BridgeSpec};
use tokio::sync::watch;

static SANDBOXES: AtomicU32 = AtomicU32::new(0);

/// ovsdb-server (remotes: `db.sock` for OVS's own tools, `client.sock` for the client under
/// test) and ovs-vswitchd with bridge br-int.
struct Ovs {
    dir: tempfile::TempDir,
    netns: String,
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn pid(path: &Path) -> Option<i32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// SIGTERM to the pid in `pidfile`, then wait until it is gone.
fn stop(pidfile: &Path) {
    let Some(p) = pid(pidfile) else { return };
    let _ = Command::new("kill").arg(p.to_string()).status();
    for _ in 0..200 {
        if !Path::new(&format!("/proc/{p}")).exists() {
            return;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    let _ = Command::new("kill").args(["-KILL", &p.to_string()]).status();
}

impl Ovs {
    fn start() -> Ovs {
        let dir = tempfile::tempdir().expect("tempdir");
        let n = SANDBOXES.fetch_add(1, Ordering::SeqCst);
        let netns = format!("npa-src-{}-{n}", std::process::id());
        run(Command::new("ip").args(["netns", "add", &netns]));
        let ovs = Ovs { dir, netns };
        run(Command::new("ovsdb-tool")
            .arg("create")
            .arg(ovs.path("conf.db"))
            .arg("/usr/share/openvswitch/vswitch.ovsschema"));
        ovs.start_db(true);
        run(Command::new("ip")
            .args(["netns", "exec", &ovs.netns, "ovs-vswitchd"])
            .arg(format!("unix:{}", ovs.path("db.sock").display()))
            .arg(format!("--pidfile={}", ovs.path("vswitchd.pid").display()))
            .arg(format!("--unixctl={}", ovs.path("vswitchd.ctl").display()))
            .arg(format!("--log-file={}", ovs.path("vswitchd.log").display()))
            .args([
                "--detach",
                "--no-chdir",
                "-vconsole:off",
                "--enable-dummy",
                "--disable-system",
                "--disable-system-route",
            ])
            .env("OVS_RUNDIR", ovs.dir.path()));
        ovs.vsctl(&[
            "init",
            "--",
            "add-br",
            "br-int",
            "--",
            "set",
            "bridge",
            "br-int",
            "datapath-type=dummy",
            "fail-mode=secure",
        ]);
        ovs
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn client_endpoint(&self) -> String {
        format!("unix:{}", self.path("client.sock").display())
    }

    fn start_db(&self, with_client_remote: bool) {
        let mut cmd = Command::new("ovsdb-server");
        cmd.arg(self.path("conf.db"))
            .arg(format!("--remote=punix:{}", self.path("db.sock").display()))
            .arg(format!("--pidfile={}", self.path("ovsdb-server.pid").display()))
            .arg(format!("--unixctl={}", self.path("ovsdb-server.ctl").display()))
            .arg(format!("--log-file={}", self.path("ovsdb-server.log").display()))
            .args(["--detach", "--no-chdir", "-vconsole:off"]);
        if with_client_remote {
            cmd.arg(format!("--remote=punix:{}", self.path("client.sock").display()));
        }
        run(&mut cmd);
    }

    fn add_client_remote(&self) {
        run(Command::new("ovs-appctl")
            .arg("-t")
            .arg(self.path("ovsdb-server.ctl"))
            .args(["ovsdb-server/add-remote"])
            .arg(format!("punix:{}", self.path("client.sock").display())));
    }

    fn stop_db(&self) {
        stop(&self.path("ovsdb-server.pid"));
    }

    /// ovs-vsctl, waiting until ovs-vswitchd applied the change (so ofports are assigned).
    fn vsctl(&self, args: &[&str]) -> String {
        run(Command::new("ovs-vsctl")
            .arg(format!("--db=unix:{}", self.path("db.sock").display()))
            .arg("--timeout=30")
            .args(args))
    }

    fn add_pod_port(&self, name: &str, on: &str, ids: &str) {
        let set = format!("external_ids={{{ids}}}");
        self.vsctl(&[
            "add-port",
            "br-int",
            name,
            "--",
            "set",
            "Interface",
            name,
            "type=dummy",
            "--",
            "set",
            on,
            name,
            &set,
        ]);
    }
}

impl Drop for Ovs {
    fn drop(&mut self) {
        stop(&self.path("vswitchd.pid"));
        stop(&self.path("ovsdb-server.pid"));
        let _ = Command::new("ip").args(["netns", "del", &self.netns]).status();
    }
}

fn summary(ports: &[LocalPort]) -> Vec<String> {
    ports
        .iter()
        .map(|p| {
            let ips: Vec<String> = p.ips.iter().map(|i| i.to_string()).collect();
            let mac = p.mac.map(|m| m.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":"));
            format!("{} {} [{}] {}", p.interface, p.pod, ips.join(","), mac.unwrap_or_default())
        })
        .collect()
}

async fn wait_for(rx: &mut watch::Receiver<BridgePorts>, what: &str, want: impl Fn(&[LocalPort]) -> bool) {
    wait_for_bridge(rx, what, |b| want(&b.pods)).await
}

async fn wait_for_bridge(rx: &mut watch::Receiver<BridgePorts>, what: &str, want: impl Fn(&BridgePorts) -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        if want(&rx.borrow_and_update()) {
            return;
        }
        if tokio::time::timeout_at(deadline, rx.changed()).await.is_err() {
            panic!("{what}: not within 10 s; ports are {:?}", *rx.borrow());
        }
    }
}

fn names_of(ports: &[LocalPort]) -> Vec<String> {
    summary(ports)
}

const TABLES: [(u8, &str); 3] = [(0, "Classifier"), (3, "IngressRule"), (4, "IngressDefaultRule")];

fn table_names() -> Vec<(u8, String)> {
    TABLES.iter().map(|(i, n)| (*i, n.to_string())).collect()
}

/// The OVSDB source on `ovs`'s br-int (no uplinks, [`TABLES`] named), running as a task; its
/// reports arrive on the receiver.
fn spawn_ovsdb_source(ovs: &Ovs) -> (tokio::task::JoinHandle<()>, watch::Receiver<BridgePorts>) {
    let (tx, rx) = watch::channel(BridgePorts::default());
    let task = tokio::spawn(run_ovsdb(
        ovs.client_endpoint().parse().expect("endpoint"),
        BridgeSpec { name: "br-int".into(), uplinks: vec![] },
        table_names(),
        tx,
    ));
    (task, rx)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follows_pod_ports_live_and_survives_an_ovsdb_restart() {
    let ovs = Ovs::start();
    // A port that is not a pod and a pod port on another bridge: neither is reported.
    ovs.vsctl(&["add-port", "br-int", "uplink", "--", "set", "Interface", "uplink", "type=dummy"]);
    ovs.vsctl(&["add-br", "br-ex", "--", "set", "bridge", "br-ex", "datapath-type=dummy"]);
    ovs.vsctl(&[
        "add-port",
        "br-ex",
        "ext",
        "--",
        "set",
        "Interface",
        "ext",
        "type=dummy",
        "external_ids={pod-name=ext,pod-namespace=x}",
    ]);

    let (task, mut rx) = spawn_ovsdb_source(&ovs);

    // Keys on the Interface row (as Antrea writes them), several addresses with prefixes.
    ovs.add_pod_port(
        "a1",
        "Interface",
        "pod-name=a,pod-namespace=x,\"ip-address\"=\"10.10.0.1/16,fd00::1/64\",attached-mac=\"0a:58:0a:0a:00:01\"",
    );
    wait_for(&mut rx, "pod a", |p| names_of(p) == vec!["a1 x/a [10.10.0.1,fd00::1] 0a:58:0a:0a:00:01"]).await;
    let ofport_a: u32 = ovs.vsctl(&["get", "Interface", "a1", "ofport"]).trim().parse().expect("ofport");
    assert_eq!(rx.borrow().pods.first().map(|p| p.ofport), Some(ofport_a));

    // Keys on the Port row work too.
    ovs.add_pod_port("b1", "Port", "pod-name=b,pod-namespace=y,ip-address=\"10.10.0.2\"");
    wait_for(&mut rx, "pod b", |p| p.len() == 2 && names_of(p).contains(&"b1 y/b [10.10.0.2] ".to_string())).await;

    // Changed external_ids.
    ovs.vsctl(&["set", "Interface", "a1", "external_ids:ip-address=10.10.0.9"]);
    wait_for(&mut rx, "new ip of a", |p| names_of(p).contains(&"a1 x/a [10.10.0.9] 0a:58:0a:0a:00:01".to_string()))
        .await;

    // A deleted port.
    ovs.vsctl(&["del-port", "br-int", "b1"]);
    wait_for(&mut rx, "b deleted", |p| p.len() == 1).await;

    // OVSDB goes away: the last known ports stay published.
    ovs.stop_db();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(names_of(&rx.borrow().pods), vec!["a1 x/a [10.10.0.9] 0a:58:0a:0a:00:01"]);
    assert!(!task.is_finished());

    // It comes back, first without the client's remote: changes happen while the client is
    // still away; then the client gets in again and catches up.
    ovs.start_db(false);
    ovs.add_pod_port("c1", "Interface", "pod-name=c,pod-namespace=x,ip-address=\"10.10.0.3\"");
    ovs.vsctl(&["del-port", "br-int", "a1"]);
    assert_eq!(names_of(&rx.borrow().pods), vec!["a1 x/a [10.10.0.9] 0a:58:0a:0a:00:01"]);
    ovs.add_client_remote();
    wait_for(&mut rx, "caught up", |p| names_of(p) == vec!["c1 x/c [10.10.0.3] "]).await;

    drop(rx);
    tokio::time::timeout(Duration::from_secs(5), task).await.expect("stops without receivers").expect("join");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_the_tables_idempotently() {
    let ovs = Ovs::start();
    // Someone else's name for table 3 and for table 9: table 3 is renamed in place, 9 stays.
    ovs.vsctl(&[
        "--",
        "--id=@t3",
        "create",
        "Flow_Table",
        "name=theirs",
        "flow_limit=1000",
        "--",
        "--id=@t9",
        "create",
        "Flow_Table",
        "name=other",
        "--",
        "set",
        "Bridge",
        "br-int",
        "flow_tables:3=@t3",
        "flow_tables:9=@t9",
    ]);

    for round in 0..2 {
        let (task, rx) = spawn_ovsdb_source(&ovs);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let features = loop {
            let out = run(Command::new("ovs-ofctl")
                .args(["-O", "OpenFlow15", "dump-table-features"])
                .arg(format!("unix:{}", ovs.path("br-int.mgmt").display())));
            if TABLES.iter().all(|(_, n)| out.contains(&format!("(\"{n}\")"))) {
                break out;
            }
            assert!(std::time::Instant::now() < deadline, "round {round}: names not set:\n{out}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert!(features.contains("(\"other\")"), "{features}");
        assert!(!features.contains("(\"theirs\")"), "{features}");
        // One row per named table, plus table 9's: nothing duplicated by the second run.
        let rows = ovs.vsctl(&["--bare", "--columns=name", "list", "Flow_Table"]);
        let mut rows: Vec<&str> = rows.split_whitespace().collect();
        rows.sort();
        assert_eq!(rows, vec!["Classifier", "IngressDefaultRule", "IngressRule", "other"], "round {round}");
        assert_eq!(
            ovs.vsctl(&["get", "Bridge", "br-int", "flow_tables:3"]).trim(),
            ovs.vsctl(&["--bare", "--columns=_uuid", "find", "Flow_Table", "flow_limit=1000"]).trim(),
            "table 3 keeps its row (and flow limit)"
        );
        drop(rx);
        tokio::time::timeout(Duration::from_secs(5), task).await.expect("stops").expect("join");
    }

    // dump-flows --names shows the name.
    run(Command::new("ovs-ofctl")
        .args(["-O", "OpenFlow15", "add-flow"])
        .arg(format!("unix:{}", ovs.path("br-int.mgmt").display()))
        .arg("table=3,priority=5,actions=drop"));
    let flows = run(Command::new("ovs-ofctl")
        .args(["-O", "OpenFlow15", "dump-flows", "--names", "--no-stats"])
        .arg(format!("unix:{}", ovs.path("br-int.mgmt").display())));
    assert!(flows.contains("table=IngressRule"), "{flows}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standalone_or_unset_bridge_becomes_secure() {
    let ovs = Ovs::start();
    for (how, args) in
        [("standalone", &["set-fail-mode", "br-int", "standalone"][..]), ("unset", &["del-fail-mode", "br-int"][..])]
    {
        ovs.vsctl(args);
        assert_ne!(ovs.vsctl(&["get-fail-mode", "br-int"]).trim(), "secure", "{how}: precondition");
        let (task, rx) = spawn_ovsdb_source(&ovs);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while ovs.vsctl(&["get-fail-mode", "br-int"]).trim() != "secure" {
            assert!(std::time::Instant::now() < deadline, "{how}: fail_mode not made secure within 10 s");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        drop(rx);
        tokio::time::timeout(Duration::from_secs(5), task).await.expect("stops").expect("join");
    }
}

/// The gateway's creation transaction against the real schema: it creates one internal port
/// marked as the gateway, and refuses, naming why, a bridge that does not exist, a port of
/// that name already there, and a second gateway.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_is_created_once_and_never_beside_another() {
    use npagent::host::ovsdb::rpc;
    use npagent::source::gateway::{create_outcome, create_params};

    let ovs = Ovs::start();
    let ep: npagent::endpoint::Endpoint = ovs.client_endpoint().parse().expect("endpoint");
    let create = |bridge: &'static str, name: &'static str| {
        let ep = ep.clone();
        async move {
            let result = rpc::call(&ep, "transact", create_params(bridge, name)).await.expect("transact answered");
            create_outcome(bridge, &result)
        }
    };
    let gateways = || ovs.vsctl(&["--bare", "--columns=name", "find", "Interface", "external_ids:antrea-type=gateway"]);

    assert_eq!(create("br-nope", "gw0").await, Err("bridge br-nope does not exist".into()));
    ovs.vsctl(&["add-port", "br-int", "taken", "--", "set", "Interface", "taken", "type=dummy"]);
    let err = create("br-int", "taken").await.expect_err("a port of that name exists");
    assert!(err.contains("constraint violation") && err.contains("taken"), "{err}");
    assert_eq!(gateways().trim(), "", "nothing of the refused transactions is left");

    assert_eq!(create("br-int", "gw0").await, Ok(()));
    assert_eq!(gateways().trim(), "gw0");
    assert_eq!(ovs.vsctl(&["get", "Interface", "gw0", "type"]).trim(), "internal");
    assert_eq!(ovs.vsctl(&["get", "Interface", "gw0", "ofport_request"]).trim(), "32769");
    assert!(ovs.vsctl(&["list-ports", "br-int"]).lines().any(|l| l == "gw0"));
    let err = create("br-int", "gw1").await.expect_err("a gateway exists");
    assert!(err.contains("antrea-type=gateway exists already"), "{err}");
    assert_eq!(gateways().trim(), "gw0");
}
