//! The npagent-ovs image (scripts/build-ovs-image, images/ovs/start-ovs), built from Debian's
//! packages without a base image: its tree holds the entrypoint and the Open vSwitch daemons,
//! which run; and its entrypoint, run as deploy/daemonset.yaml's `ovs` container has a runtime
//! run it (the image's tree as a read-only root, the node's OVS run and database directories
//! bound at their mount points, /proc, /dev and a /tmp of its own; containers cannot run on
//! these machines, so the test does what the runtime would), in a network namespace of its own
//! with the userspace datapath: it creates the database, brings up br-int as the tests' sandbox
//! has it, stops both daemons and exits 0 on SIGTERM, keeps the database across a restart, and
//! exits 1 when a daemon dies. Needs root, mmdebstrap, podman (scripts/test installs them) and
//! Debian's package archive.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use support::exit_within;
use support::image::Image;
use support::sandbox::{output, repo_path, run};

/// The image's entrypoint (scripts/build-ovs-image).
const ENTRYPOINT: &str = "/usr/local/bin/start-ovs";
/// Where the DaemonSet mounts the node's directories in the `ovs` container.
const RUN_DIR: &str = "var/run/openvswitch";
const DB_DIR: &str = "etc/openvswitch";

/// Mounts the container's filesystem in a mount namespace of its own (the process is already in
/// a network namespace of its own): the image below empty mount points, read-only; /proc, the
/// host's /dev (a privileged container's) and a fresh /tmp; the run and database directories;
/// then brings up loopback and executes the entrypoint in a chroot.
const JAIL_SH: &str = r#"set -eu
root=$1 points=$2 image=$3 run=$4 db=$5
mount -t overlay npagent-ovs -o "ro,lowerdir=$points:$image" "$root"
mount -t proc -o nosuid,nodev,noexec proc "$root/proc"
mount --rbind /dev "$root/dev"
mount -t tmpfs -o nosuid,nodev tmpfs "$root/tmp"
mount --bind "$run" "$root/var/run/openvswitch"
mount --bind "$db" "$root/etc/openvswitch"
ip link set lo up
exec chroot "$root" /usr/local/bin/start-ovs
"#;

/// One run of the image's entrypoint; stopped on drop (SIGTERM, then SIGKILL to it and to the
/// daemons it started, by pid).
struct OvsContainer {
    child: Option<Child>,
    log: PathBuf,
    run: PathBuf,
    daemons: Vec<u32>,
}

impl OvsContainer {
    /// Starts the entrypoint with the userspace datapath on `run` and `db`, and waits until it
    /// says it is ready.
    fn start(image_root: &Path, work: &Path, run: &Path, db: &Path, log_name: &str) -> OvsContainer {
        let points = work.join("mount-points");
        for dir in [RUN_DIR, DB_DIR, "proc", "dev", "tmp"] {
            std::fs::create_dir_all(points.join(dir)).expect("mount point");
        }
        let root = work.join("root");
        std::fs::create_dir_all(&root).expect("root dir");
        let log = work.join(log_name);
        let out = std::fs::File::create(&log).expect("log");
        let err = out.try_clone().expect("clone log handle");
        let child = Command::new("unshare")
            .args(["--mount", "--net", "--propagation", "private", "bash", "-c", JAIL_SH, "jail"])
            .args([root.as_os_str(), points.as_os_str(), image_root.as_os_str(), run.as_os_str(), db.as_os_str()])
            .env_clear()
            .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
            .env("NPAGENT_OVS_DATAPATH", "netdev")
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .expect("start unshare");
        let mut ovs = OvsContainer { child: Some(child), log, run: run.to_owned(), daemons: Vec::new() };
        let started = Instant::now();
        while !ovs.log_text().contains("start-ovs: ready: br-int") {
            if let Some(status) = ovs.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                panic!("start-ovs exited ({status}) before it was ready:\n{}", ovs.log_text());
            }
            assert!(started.elapsed() < Duration::from_secs(60), "start-ovs not ready in 60 s:\n{}", ovs.log_text());
            std::thread::sleep(Duration::from_millis(50));
        }
        ovs.daemons = ["ovsdb-server", "ovs-vswitchd"].iter().map(|d| ovs.pid_of(d)).collect();
        ovs
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The pid in `daemon`'s pidfile in the run directory.
    fn pid_of(&self, daemon: &str) -> u32 {
        let path = self.run.join(format!("{daemon}.pid"));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        text.trim().parse().unwrap_or_else(|e| panic!("{}: {text:?}: {e}", path.display()))
    }

    /// `ovs-vsctl` on the container's database, from the host (the socket is in the bound run
    /// directory).
    fn vsctl(&self, args: &[&str]) -> String {
        let db = format!("--db=unix:{}/db.sock", self.run.display());
        run(Command::new("ovs-vsctl").arg(db).arg("--timeout=10").args(args)).trim().to_owned()
    }

    /// The exit status once the entrypoint ends (within 20 s), after `signal` if given.
    fn wait_exit(&mut self, signal: Option<&str>) -> ExitStatus {
        let mut child = self.child.take().expect("running");
        if let Some(sig) = signal {
            run(Command::new("kill").args([&format!("-{sig}"), &child.id().to_string()]));
        }
        exit_within(&mut child, Duration::from_secs(20))
            .unwrap_or_else(|| panic!("start-ovs did not exit within 20 s:\n{}", self.log_text()))
    }
}

impl Drop for OvsContainer {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
            exit_within(&mut child, Duration::from_secs(10));
        }
        for pid in &self.daemons {
            if alive(*pid) {
                let _ = Command::new("kill").args(["-KILL", &pid.to_string()]).status();
            }
        }
        if std::thread::panicking() {
            eprintln!("start-ovs log:\n{}", self.log_text());
        }
    }
}

/// Whether a process `pid` exists and is not a zombie.
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| s.rsplit_once(')').is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')))
}

/// `--version` of a program of the image, run in a chroot of its tree.
fn version_in(root: &Path, program: &str) -> String {
    run(Command::new("chroot").arg(root).args([program, "--version"]).env_clear().env("PATH", "/usr/sbin:/usr/bin"))
}

#[test]
fn ovs_image_runs_open_vswitch_and_brings_up_br_int() {
    let mut image = Image::build("scripts/build-ovs-image", &[]);
    let config = image.config();
    assert_eq!(config["Entrypoint"], serde_json::json!([ENTRYPOINT]), "{config}");
    assert_eq!(config["User"], "0:0", "{config}");
    assert_eq!(config["Labels"]["org.opencontainers.image.version"], env!("CARGO_PKG_VERSION"), "{config}");
    let root = image.mount();

    // The tree: the entrypoint as in the repository, the daemons and modprobe, no apt, no docs.
    let entry = root.join(&ENTRYPOINT[1..]);
    let repo_script = repo_path("images/ovs/start-ovs");
    assert_eq!(std::fs::read(&entry).expect("entrypoint"), std::fs::read(&repo_script).expect("start-ovs"));
    assert_eq!(std::fs::metadata(&entry).expect("entrypoint").permissions().mode() & 0o7777, 0o755);
    for program in ["ovsdb-server", "ovs-vswitchd", "ovs-vsctl"] {
        let v = version_in(&root, program);
        assert!(v.starts_with(&format!("{program} (Open vSwitch) ")), "{program} --version: {v}");
    }
    assert!(version_in(&root, "modprobe").starts_with("kmod version "), "modprobe from kmod");
    assert!(!root.join("usr/bin/apt-get").exists(), "apt in the image");
    assert!(
        !root.join("usr/share/man").exists()
            || std::fs::read_dir(root.join("usr/share/man")).expect("man").count() == 0
    );

    // The entrypoint at work, on empty node directories.
    let work = tempfile::Builder::new().prefix("npa-ovs-image-").tempdir().expect("work dir");
    let (run_dir, db_dir) = (work.path().join("node-run"), work.path().join("node-etc"));
    for dir in [&run_dir, &db_dir] {
        std::fs::create_dir(dir).expect("node dir");
    }
    let mut ovs = OvsContainer::start(&root, work.path(), &run_dir, &db_dir, "first.log");
    assert!(ovs.log_text().contains("start-ovs: creating /etc/openvswitch/conf.db"), "{}", ovs.log_text());
    assert!(db_dir.join("conf.db").is_file(), "the database in the node's directory");
    assert_eq!(ovs.vsctl(&["get", "Bridge", "br-int", "fail_mode"]), "secure");
    assert_eq!(ovs.vsctl(&["get", "Bridge", "br-int", "datapath_type"]), "netdev");
    assert_eq!(ovs.vsctl(&["get", "Bridge", "br-int", "protocols"]), "[OpenFlow10, OpenFlow13, OpenFlow15]");
    // npagent's endpoints: the bridge speaks OpenFlow 1.5 on br-int.mgmt, and ovs-vswitchd's
    // control socket is beside its pidfile (--vswitchd-ctl).
    let mgmt = format!("unix:{}/br-int.mgmt", run_dir.display());
    let show = run(Command::new("ovs-ofctl").args(["-O", "OpenFlow15", "show", &mgmt]));
    assert!(show.contains("OFPT_FEATURES_REPLY (OF1.5)"), "{show}");
    let vswitchd = ovs.pid_of("ovs-vswitchd");
    assert!(run_dir.join(format!("ovs-vswitchd.{vswitchd}.ctl")).exists(), "the control socket beside the pidfile");
    ovs.vsctl(&["set", "Bridge", "br-int", "external_ids:kept=yes"]);

    // SIGTERM: both daemons stop, the entrypoint exits 0.
    let daemons = ovs.daemons.clone();
    let status = ovs.wait_exit(Some("TERM"));
    assert!(status.success(), "start-ovs exited with {status} on SIGTERM:\n{}", ovs.log_text());
    for pid in &daemons {
        assert!(!alive(*pid), "daemon {pid} outlived its container:\n{}", ovs.log_text());
    }
    assert!(ovs.log_text().ends_with("start-ovs: stopped\n"), "{}", ovs.log_text());
    drop(ovs);

    // A restart keeps the database (and so what was set on the bridge).
    let mut ovs = OvsContainer::start(&root, work.path(), &run_dir, &db_dir, "second.log");
    assert!(!ovs.log_text().contains("creating"), "the database was made anew:\n{}", ovs.log_text());
    assert_eq!(ovs.vsctl(&["get", "Bridge", "br-int", "external_ids:kept"]), "yes");
    assert_eq!(ovs.vsctl(&["get", "Bridge", "br-int", "fail_mode"]), "secure");

    // A daemon that dies takes the container with it (status 1), the other daemon stopped.
    let (db_pid, vswitchd) = (ovs.pid_of("ovsdb-server"), ovs.pid_of("ovs-vswitchd"));
    run(Command::new("kill").args(["-KILL", &vswitchd.to_string()]));
    let status = ovs.wait_exit(None);
    assert_eq!(status.code(), Some(1), "start-ovs after ovs-vswitchd died:\n{}", ovs.log_text());
    assert!(!alive(db_pid), "ovsdb-server outlived its container");
    assert!(ovs.log_text().contains("start-ovs: error: a daemon exited"), "{}", ovs.log_text());
}

#[test]
fn build_ovs_image_and_start_ovs_name_what_is_wrong_with_their_input() {
    let fails = |cmd: &mut Command, needle: &str| {
        let out = output(cmd);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{cmd:?} succeeded");
        assert!(err.contains(needle), "{cmd:?}: {needle:?} not in {err}");
        assert!(out.stdout.is_empty(), "no output on failure: {:?}", String::from_utf8_lossy(&out.stdout));
    };
    let script = repo_path("scripts/build-ovs-image");
    fails(Command::new(&script).arg("--tag"), "--tag needs a name");
    fails(Command::new(&script).arg("--push"), "unknown argument --push");
    let help = run(Command::new(&script).arg("--help"));
    assert!(help.contains("scripts/build-ovs-image [--tag TAG]") && !help.contains("set -euo"), "{help}");
    // Refused before it touches anything.
    let start = repo_path("images/ovs/start-ovs");
    fails(
        Command::new(&start).env("NPAGENT_OVS_DATAPATH", "dpdk").env("OVS_RUNDIR", "/nonexistent/run"),
        "NPAGENT_OVS_DATAPATH=dpdk: expected system or netdev",
    );
}
