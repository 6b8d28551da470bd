//! npagent's routes to other nodes' pods, made in a fresh network namespace of each test's own
//! (a veth pair holding 192.168.77.1/24 and fd00:77::1/64, so that gateways of those subnets
//! are on-link) and read back with `ip`, an observer of its own: routes npagent makes carry
//! `proto 78`, routes it did not make (`ip route add`, `proto boot`) stay exactly as they were,
//! and nothing is touched before the desired set is known. The keeper's functions run on a
//! thread that entered the namespace (setns), with a runtime of its own; the test's main
//! thread never changes namespace. Needs root.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

use npagent::agent::routes::{enable_forwarding, remove_own_routes, run_routes, sync_routes, Synced};
use npagent::host::netlink::link::Netlink;
use npagent::host::netlink::route::{Route, RouteError};
use npagent::model::cidr::{parse_cidr, Cidr};
use std::collections::BTreeMap;
use std::future::Future;
use std::net::IpAddr;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// A network namespace of the test's own, deleted when dropped (also when the test fails).
struct Namespace {
    name: String,
}

impl Namespace {
    fn new() -> Namespace {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let name = format!("npr-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        run(Command::new("ip").args(["netns", "add", &name]));
        let ns = Namespace { name };
        ns.ip(&["link", "add", "v0", "type", "veth", "peer", "name", "v1"]);
        ns.ip(&["addr", "add", "192.168.77.1/24", "dev", "v0"]);
        ns.ip(&["addr", "add", "fd00:77::1/64", "dev", "v0", "nodad"]);
        ns.ip(&["link", "set", "v1", "up"]);
        ns.ip(&["link", "set", "v0", "up"]);
        ns
    }

    /// `ip -n <ns> args`; its output.
    fn ip(&self, args: &[&str]) -> String {
        run(Command::new("ip").args(["-n", &self.name]).args(args))
    }

    /// The lines of `ip -n <ns> -4 route show <selector>` and then of `-6`.
    fn routes(&self, selector: &[&str]) -> Vec<String> {
        let show = |family| self.ip(&[family, "route", "show"].iter().chain(selector).copied().collect::<Vec<_>>());
        let both = show("-4") + &show("-6");
        both.lines().map(|l| l.trim().to_string()).collect()
    }

    /// npagent's routes, as `ip route show proto 78` prints them.
    fn ours(&self) -> Vec<String> {
        self.routes(&["proto", "78"])
    }

    /// Every route of the main table that is not npagent's.
    fn others(&self) -> Vec<String> {
        self.routes(&["table", "main"]).into_iter().filter(|r| !r.contains("proto 78")).collect()
    }

    /// Adds routes npagent did not make (`proto boot`, as `ip route add` makes them): two to
    /// destinations that will be desired, one to a destination no node has.
    fn add_foreign_routes(&self) {
        self.ip(&["route", "add", "10.99.0.0/24", "via", "192.168.77.3"]);
        self.ip(&["route", "add", "fd00:99::/64", "via", "fd00:77::3"]);
        self.ip(&["route", "add", "10.98.0.0/24", "via", "192.168.77.3"]);
    }

    /// Runs `work` on a thread that entered the namespace.
    fn spawn<T: Send + 'static>(&self, work: impl FnOnce() -> T + Send + 'static) -> JoinHandle<T> {
        let file = std::fs::File::open(format!("/run/netns/{}", self.name)).expect("the namespace's file");
        std::thread::spawn(move || {
            nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET).expect("setns");
            work()
        })
    }

    /// Runs `work` to its end on a thread that entered the namespace.
    fn enter<T: Send + 'static>(&self, work: impl FnOnce() -> T + Send + 'static) -> T {
        self.spawn(work).join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    }

    /// Runs `work` to its end on a thread that entered the namespace, with a current-thread
    /// runtime of its own.
    fn block_on<T, Fut>(&self, work: impl FnOnce() -> Fut + Send + 'static) -> T
    where
        T: Send + 'static,
        Fut: Future<Output = T>,
    {
        self.enter(move || runtime().block_on(work()))
    }

    /// [`sync_routes`] in the namespace.
    fn sync(&self, desired: &[(&str, &str)]) -> Synced {
        let desired = desired_set(desired);
        self.block_on(move || async move { sync_routes(&desired).await.expect("the main table is read") })
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "delete", &self.name]).status();
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime")
}

/// Runs `cmd`; its stdout, or a panic with its stderr.
fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(out.status.success(), "{cmd:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn cidr(s: &str) -> Cidr {
    parse_cidr(s).unwrap()
}

fn route(destination: &str, via: &str) -> Route {
    Route { destination: cidr(destination), via: via.parse().unwrap() }
}

fn desired_set(pairs: &[(&str, &str)]) -> BTreeMap<Cidr, IpAddr> {
    pairs.iter().map(|(d, v)| (cidr(d), v.parse().unwrap())).collect()
}

/// Waits up to `within` for `ok`, checking every 50 ms.
fn wait_until(within: Duration, what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !ok() {
        assert!(Instant::now() < deadline, "not within {within:?}: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

const V4_2: &str = "10.10.2.0/24 via 192.168.77.2 dev v0";
const V4_3: &str = "10.10.3.0/24 via 192.168.77.3 dev v0";
const V6_2: &str = "fd00:10:2::/64 via fd00:77::2 dev v0 metric 1024 pref medium";

#[test]
fn desired_routes_are_made_as_npagents_replaced_when_their_gateway_changes_and_removed_with_their_node() {
    let ns = Namespace::new();
    let synced = ns.sync(&[
        ("10.10.2.0/24", "192.168.77.2"),
        ("10.10.3.0/24", "192.168.77.3"),
        ("fd00:10:2::/64", "fd00:77::2"),
    ]);
    assert!(synced.failures.is_empty(), "{:?}", synced.failures);
    assert_eq!(synced.put.len(), 3);
    assert_eq!(ns.ours(), [V4_2, V4_3, V6_2]);

    let synced = ns.sync(&[("10.10.2.0/24", "192.168.77.4"), ("fd00:10:2::/64", "fd00:77::2")]);
    assert!(synced.failures.is_empty(), "{:?}", synced.failures);
    assert_eq!(synced.put, [route("10.10.2.0/24", "192.168.77.4")]);
    assert_eq!(
        synced.deleted,
        [route("10.10.3.0/24", "192.168.77.3")],
        "the old gateway's route was replaced, not deleted"
    );
    assert_eq!(ns.ours(), ["10.10.2.0/24 via 192.168.77.4 dev v0", V6_2]);

    let synced = ns.sync(&[("10.10.2.0/24", "192.168.77.4"), ("fd00:10:2::/64", "fd00:77::2")]);
    assert!(synced.put.is_empty() && synced.deleted.is_empty(), "in place, nothing is done: {synced:?}");
    let synced = ns.sync(&[]);
    assert_eq!(synced.deleted.len(), 2);
    assert!(ns.ours().is_empty());
}

#[test]
fn routes_npagent_did_not_make_are_left_exactly_as_they_were_and_said() {
    let ns = Namespace::new();
    ns.add_foreign_routes();
    let others = ns.others();
    let synced =
        ns.sync(&[("10.99.0.0/24", "192.168.77.2"), ("fd00:99::/64", "fd00:77::2"), ("10.10.2.0/24", "192.168.77.2")]);
    assert!(synced.failures.is_empty(), "{:?}", synced.failures);
    assert_eq!(synced.put, [route("10.10.2.0/24", "192.168.77.2")]);
    assert_eq!(synced.foreign, [cidr("10.99.0.0/24"), cidr("fd00:99::/64")]);
    assert_eq!(ns.ours(), [V4_2]);
    assert_eq!(ns.others(), others);

    let synced = ns.sync(&[]);
    assert_eq!(synced.deleted, [route("10.10.2.0/24", "192.168.77.2")], "the removed node's route goes");
    assert!(ns.ours().is_empty());
    assert_eq!(ns.others(), others, "the routes npagent did not make stay");
}

#[test]
fn a_foreign_route_is_neither_replaced_nor_deleted_when_asked_directly() {
    let ns = Namespace::new();
    ns.add_foreign_routes();
    let others = ns.others();
    let (put, deleted) = ns.block_on(|| async {
        let netlink = Netlink::open().unwrap();
        let put = [netlink.put_route(&route("10.99.0.0/24", "192.168.77.2")).await.unwrap_err()];
        let mut deleted = Vec::new();
        for r in [route("10.99.0.0/24", "192.168.77.3"), route("fd00:99::/64", "fd00:77::3")] {
            deleted.push(netlink.delete_route(&r).await.unwrap());
        }
        (put, deleted)
    });
    assert!(matches!(put[0], RouteError::Foreign { .. }), "{:?}", put[0]);
    assert_eq!(
        put[0].to_string(),
        "route 10.99.0.0/24 via 192.168.77.2: cannot add: the main table holds a route to 10.99.0.0/24 that \
         npagent did not make (proto boot)"
    );
    assert_eq!(deleted, [false, false], "no route of npagent's was there");
    assert_eq!(ns.others(), others);
    assert!(ns.ours().is_empty());
}

#[test]
fn a_route_the_kernel_refuses_is_named_and_the_others_are_made() {
    let ns = Namespace::new();
    let synced = ns.sync(&[("10.10.2.0/24", "192.168.77.2"), ("10.10.5.0/24", "203.0.113.9")]);
    let failures: Vec<String> = synced.failures.iter().map(ToString::to_string).collect();
    assert_eq!(failures, ["route 10.10.5.0/24 via 203.0.113.9: cannot add: Network is unreachable (os error 101)"]);
    assert_eq!(synced.put, [route("10.10.2.0/24", "192.168.77.2")]);
    assert_eq!(ns.ours(), [V4_2]);
}

#[test]
fn the_keeper_touches_nothing_until_the_desired_set_is_known_then_follows_and_repairs_it() {
    let ns = Namespace::new();
    ns.add_foreign_routes();
    let others = ns.others();
    // The routes of the agent before this one.
    ns.sync(&[("10.10.2.0/24", "192.168.77.2")]);
    let (desired, rx) = watch::channel(None);
    let (ended, keeper_ended) = std::sync::mpsc::channel();
    let keeper = ns.spawn(move || {
        runtime().block_on(run_routes(rx));
        let _ = ended.send(());
    });

    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(ns.ours(), [V4_2], "not known yet: nothing is touched");

    // On a change, not at the next check (every 5 s).
    let fast = Duration::from_secs(3);
    desired.send_replace(Some(desired_set(&[("10.10.2.0/24", "192.168.77.2"), ("10.10.3.0/24", "192.168.77.3")])));
    wait_until(fast, "the new node's route", || ns.ours() == [V4_2, V4_3]);
    desired.send_replace(Some(desired_set(&[("10.10.3.0/24", "192.168.77.3"), ("10.99.0.0/24", "192.168.77.2")])));
    wait_until(fast, "the removed node's route gone", || ns.ours() == [V4_3]);

    ns.ip(&["route", "del", "10.10.3.0/24", "proto", "78"]);
    wait_until(Duration::from_secs(8), "the deleted route repaired by the next check", || ns.ours() == [V4_3]);
    assert_eq!(ns.others(), others, "the routes npagent did not make stay");

    drop(desired);
    keeper_ended.recv_timeout(Duration::from_secs(3)).expect("the keeper ends with its channel");
    keeper.join().unwrap();
}

#[test]
fn removing_npagents_routes_leaves_the_others() {
    let ns = Namespace::new();
    ns.add_foreign_routes();
    let others = ns.others();
    ns.sync(&[("10.10.2.0/24", "192.168.77.2"), ("fd00:10:2::/64", "fd00:77::2"), ("10.99.0.0/24", "192.168.77.2")]);
    assert_eq!(ns.ours(), [V4_2, V6_2]);
    let removed = ns.block_on(|| async { remove_own_routes().await.unwrap() });
    assert_eq!(removed, 2);
    assert!(ns.ours().is_empty());
    assert_eq!(ns.others(), others);
}

#[test]
fn forwarding_is_turned_on_in_npagents_namespace_only() {
    let ns = Namespace::new();
    let files = ["/proc/sys/net/ipv4/ip_forward", "/proc/sys/net/ipv6/conf/all/forwarding"];
    let in_ns =
        || files.map(|f| run(Command::new("ip").args(["netns", "exec", &ns.name, "cat", f])).trim().to_string());
    let host = || files.map(|f| std::fs::read_to_string(f).unwrap().trim().to_string());
    // A new namespace takes the host's IPv4 settings (net.core.devconf_inherit_init_net 0):
    // off in it first, whatever the host has.
    for f in ["net.ipv4.ip_forward=0", "net.ipv6.conf.all.forwarding=0"] {
        run(Command::new("ip").args(["netns", "exec", &ns.name, "sysctl", "-qw", f]));
    }
    let host_before = host();
    assert_eq!(in_ns(), ["0", "0"], "forwarding off to begin with");

    ns.enter(|| enable_forwarding(true, false)).unwrap();
    assert_eq!(in_ns(), ["1", "0"]);
    ns.enter(|| enable_forwarding(false, true)).unwrap();
    assert_eq!(in_ns(), ["1", "1"]);
    assert_eq!(host(), host_before, "the host's are its own");
}
