//! The container image (Containerfile, scripts/build-image), built with podman from the
//! debug binary: its tree holds the binary, stripped (no debug information, no symbol table),
//! host-local and exactly the shared libraries they load, and its own binary, run the way deploy/daemonset.yaml has a runtime run it, enforces a
//! policy on a testbed bridge with real packets, and (as the init container) installs the CNI
//! plugin, host-local and the network config onto a node's directories. Containers cannot run on these machines (no cgroup
//! delegation), so the test does what the runtime would: the image's tree (`podman image
//! mount`) as a read-only root, OVS's socket directory bind-mounted read-only and the audit
//! log directory writable at the DaemonSet's mount points, then chroot, with no capability
//! left (none effective, permitted or in the bounding set) and no_new_privs. Needs root,
//! podman and capsh (scripts/test installs them).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

mod support;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use support::agent::npagent_bin;
use support::image::Image;
use support::sandbox::{output, repo_path, run};
use support::{exit_within, write_atomic, Port, Reachability, Testbed};

/// Where deploy/daemonset.yaml mounts the node's OVS sockets and np.log directory: the
/// directories of npagent's default `--ofp`, `--ovsdb` and `--audit-log`
/// (tests/deploy_manifests.rs checks that the DaemonSet uses those defaults).
const OVS_DIR: &str = "var/run/openvswitch";
const AUDIT_DIR: &str = "var/log/antrea/networkpolicy";
/// Where the test puts the testbed's manifests for `--manifests` (no API server here).
const MANIFESTS_DIR: &str = "manifests";
/// Where the DaemonSet's init container mounts the node's CNI directories.
const HOST_CNI_BIN: &str = "host/opt/cni/bin";
const HOST_CNI_CONF: &str = "host/etc/cni/net.d";
/// Where the image keeps host-local (Debian's place, install-cni's default --ipam-plugins).
const HOST_LOCAL: &str = "/usr/lib/cni/host-local";

/// The shared libraries `binary` loads, by the paths ldd resolves them to.
fn shared_libraries(binary: &Path) -> Vec<String> {
    let text = run(Command::new("ldd").arg(binary));
    let mut libs: Vec<String> = text
        .lines()
        .filter_map(|l| {
            let l = l.trim();
            assert!(!l.contains("not found"), "ldd: {l}");
            let path = l.split_once("=> ").map_or(l, |(_, p)| p);
            path.starts_with('/').then(|| path.split(" (").next().unwrap_or(path).to_owned())
        })
        .collect();
    libs.sort();
    libs
}

/// Every entry under `root`, as `/relative/path` with `d` (directory), `f` (file) or `l`
/// (anything else), and its mode.
fn tree(root: &Path) -> Vec<(String, char, u32)> {
    use std::os::unix::fs::PermissionsExt;
    let mut out = Vec::new();
    let mut todo = vec![root.to_owned()];
    while let Some(dir) = todo.pop() {
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let entry = entry.expect("dir entry");
            let meta = std::fs::symlink_metadata(entry.path()).expect("metadata");
            let rel = format!("/{}", entry.path().strip_prefix(root).expect("under root").display());
            let kind = if meta.is_dir() {
                todo.push(entry.path());
                'd'
            } else if meta.is_file() {
                'f'
            } else {
                'l'
            };
            out.push((rel, kind, meta.permissions().mode()));
        }
    }
    out.sort();
    out
}

/// The sections of ELF file `path`: name and flags (`A`: loaded), as `readelf -S -W` lists them.
fn sections(path: &Path) -> Vec<(String, String)> {
    let text = run(Command::new("readelf").args(["-S", "-W"]).arg(path));
    text.lines()
        .filter_map(|l| l.split_once("] ").map(|(_, rest)| rest.split_whitespace().collect::<Vec<_>>()))
        .filter(|fields| fields.first().is_some_and(|name| name.starts_with('.')))
        // Name, type, address, offset, size, entry size, [flags,] link, info, alignment.
        .map(|fields| (fields[0].to_owned(), if fields.len() == 10 { fields[6].to_owned() } else { String::new() }))
        .collect()
}

/// The GNU build id of ELF file `path`.
fn build_id(path: &Path) -> String {
    let out = output(Command::new("readelf").arg("-n").arg(path));
    let text = String::from_utf8_lossy(&out.stdout);
    let id = text.lines().find_map(|l| l.trim().strip_prefix("Build ID: ")).map(str::to_owned);
    id.unwrap_or_else(|| panic!("{} has no build id:\n{text}", path.display()))
}

/// Asserts that ELF file `path` carries no debug information and no symbol table: only
/// loaded sections (gdb's script reference) may be named `.debug_*`.
fn assert_stripped(path: &Path) {
    let sections = sections(path);
    assert!(sections.iter().any(|(name, _)| name == ".text"), "{}: no sections read: {sections:?}", path.display());
    let unstripped: Vec<&(String, String)> = sections
        .iter()
        .filter(|(name, flags)| (name.starts_with(".debug_") && !flags.contains('A')) || name == ".symtab")
        .collect();
    assert!(unstripped.is_empty(), "{} is not stripped: {unstripped:?}", path.display());
}

fn same_bytes(a: &Path, b: &Path) -> bool {
    let open =
        |p: &Path| std::io::BufReader::new(std::fs::File::open(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())));
    let (mut a, mut b) = (open(a), open(b));
    let (mut x, mut y) = (vec![0u8; 1 << 20], vec![0u8; 1 << 20]);
    loop {
        let n = read_full(&mut a, &mut x);
        let m = read_full(&mut b, &mut y);
        if n != m || x[..n] != y[..m] {
            return false;
        }
        if n == 0 {
            return true;
        }
    }
}

fn read_full(r: &mut impl Read, buf: &mut [u8]) -> usize {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]).expect("read") {
            0 => break,
            k => n += k,
        }
    }
    n
}

/// The image's binary running as a DaemonSet pod's container would, stopped on drop.
struct Jailed {
    child: Option<Child>,
    log: PathBuf,
}

/// A host directory bound into the container at `point` (relative to its root).
struct Bind<'a> {
    host: &'a Path,
    point: &'a str,
    read_only: bool,
}

/// Mounts the container's filesystem in a mount namespace of its own (gone with the process):
/// the image below empty mount points, read-only; /proc, as every runtime mounts it; the host
/// directories on those points (given as count, then host, point, ro|rw for each); then chroot
/// and no capabilities, and exec npagent with the remaining arguments.
const JAIL_SH: &str = r#"set -eu
root=$1 points=$2 image=$3 binds=$4
shift 4
mount -t overlay npagent-image -o "ro,lowerdir=$points:$image" "$root"
mount -t proc -o nosuid,nodev,noexec proc "$root/proc"
for ((i = 0; i < binds; i++)); do
    if [ "$3" = ro ]; then mount --bind -o ro "$1" "$root/$2"; else mount --bind "$1" "$root/$2"; fi
    shift 3
done
exec capsh --chroot="$root" --drop=all --caps= --noamb --no-new-privs --shell=/npagent -- "$@"
"#;

impl Jailed {
    fn start(image_root: &Path, work: &Path, binds: &[Bind<'_>], args: &[&str]) -> Jailed {
        let points = work.join("mount-points");
        std::fs::create_dir_all(points.join("proc")).expect("mount point");
        let mut bind_args: Vec<&std::ffi::OsStr> = Vec::new();
        for b in binds {
            std::fs::create_dir_all(points.join(b.point)).expect("mount point");
            bind_args.extend([b.host.as_os_str(), b.point.as_ref(), if b.read_only { "ro" } else { "rw" }.as_ref()]);
        }
        let root = work.join("root");
        std::fs::create_dir_all(&root).expect("root dir");
        let log = work.join("npagent.log");
        let out = std::fs::File::create(&log).expect("agent log");
        let err = out.try_clone().expect("clone log handle");
        let child = Command::new("unshare")
            .args(["--mount", "--propagation", "private", "bash", "-c", JAIL_SH, "jail"])
            .args([root.as_os_str(), points.as_os_str(), image_root.as_os_str()])
            .arg(binds.len().to_string())
            .args(bind_args)
            .args(args)
            .env_clear()
            .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .expect("start unshare");
        Jailed { child: Some(child), log }
    }

    /// The exit status of a command that ends by itself (within 10 s), and its output.
    fn finish(mut self) -> (std::process::ExitStatus, String) {
        let mut child = self.child.take().expect("running");
        match exit_within(&mut child, Duration::from_secs(10)) {
            Some(status) => (status, self.log_text()),
            None => panic!("the jailed npagent did not exit within 10 s:\n{}", self.log_text()),
        }
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().map(Child::id).expect("running")
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// /proc/<pid>/`file`, once the process is npagent itself (after the execs).
    fn proc_file(&mut self, file: &str) -> String {
        let started = Instant::now();
        loop {
            let comm = std::fs::read_to_string(format!("/proc/{}/comm", self.pid())).unwrap_or_default();
            if comm.trim() == "npagent" {
                return std::fs::read_to_string(format!("/proc/{}/{file}", self.pid())).expect("proc file");
            }
            if let Some(status) = self.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                panic!("the jailed npagent exited ({status}):\n{}", self.log_text());
            }
            assert!(started.elapsed() < Duration::from_secs(10), "npagent did not start:\n{}", self.log_text());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGTERM, then the exit status (within 10 s).
    fn stop(mut self) -> std::process::ExitStatus {
        let mut child = self.child.take().expect("running");
        run(Command::new("kill").args(["-TERM", &child.id().to_string()]));
        exit_within(&mut child, Duration::from_secs(10))
            .unwrap_or_else(|| panic!("npagent ignored SIGTERM for 10 s:\n{}", self.log_text()))
    }
}

impl Drop for Jailed {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
            if std::thread::panicking() {
                eprintln!("jailed npagent log:\n{}", self.log_text());
            }
        }
    }
}

/// The capability sets and no_new_privs from /proc/<pid>/status.
fn privileges(status: &str) -> Vec<(String, String)> {
    status
        .lines()
        .filter_map(|l| l.split_once(':'))
        .filter(|(k, _)| k.starts_with("Cap") || *k == "NoNewPrivs" || *k == "Uid")
        .map(|(k, v)| (k.to_owned(), v.split_whitespace().collect::<Vec<_>>().join(" ")))
        .collect()
}

#[test]
fn image_holds_the_binary_and_its_libraries_only_and_enforces_without_capabilities() {
    let binary = npagent_bin();
    let mut image = Image::build("scripts/build-image", &["--binary".as_ref(), binary.as_os_str()]);
    let config = image.config();
    assert_eq!(config["Entrypoint"], serde_json::json!(["/npagent"]), "{config}");
    assert_eq!(config["User"], "0:0", "{config}");
    let root = image.mount();

    // The tree: /npagent, the libraries at the paths the loader looks for them, their
    // directories, and host-local with its own; no shell, no symlink, nothing setuid, nothing
    // else.
    let libs = shared_libraries(&binary);
    assert!(libs.iter().any(|l| l.contains("/libc.so")) && libs.iter().any(|l| l.contains("/ld-linux")), "{libs:?}");
    let entries = tree(&root);
    let files: Vec<String> = entries.iter().filter(|e| e.1 != 'd').map(|e| e.0.clone()).collect();
    let mut want: Vec<String> = libs.clone();
    want.extend(shared_libraries(Path::new(HOST_LOCAL)));
    want.extend(["/npagent".into(), HOST_LOCAL.into()]);
    want.sort();
    want.dedup();
    assert_eq!(files, want, "the image's files");
    for (path, kind, mode) in &entries {
        assert!(*kind != 'l', "{path}: not a regular file or directory");
        assert_eq!(mode & 0o7000, 0, "{path}: setuid, setgid or sticky ({mode:o})");
        if *kind == 'd' {
            assert!(want.iter().any(|f| f.starts_with(&format!("{path}/"))), "{path}: a directory of nothing");
        }
    }
    assert!(!root.join("bin/sh").exists());
    // The given binary, stripped: the same link (build id), no debug information.
    assert!(sections(&binary).iter().any(|(name, _)| name == ".debug_line"), "the test's binary has no line tables");
    assert_stripped(&root.join("npagent"));
    assert_eq!(build_id(&root.join("npagent")), build_id(&binary), "the image's npagent is not the given binary");
    assert!(same_bytes(Path::new(HOST_LOCAL), &root.join(&HOST_LOCAL[1..])), "the image's host-local is not Debian's");

    // The image's binary at work: the testbed's bridge in secure mode forwards nothing until
    // npagent installs its pipeline.
    let tb = Testbed::start();
    let sb = &tb.sandbox;
    assert_eq!(sb.ofp, format!("unix:{}/br-int.mgmt", sb.dir.display()), "the default --ofp in the OVS dir");
    assert_eq!(sb.ovsdb, format!("unix:{}/db.sock", sb.dir.display()), "the default --ovsdb in the OVS dir");
    let namespaces = tb.manifests_dir().join("namespaces.yaml");
    let text = std::fs::read_to_string(&namespaces).expect("namespaces.yaml");
    let logging =
        "  name: x\n  labels:\n    ns: x\n  annotations:\n    networkpolicy.antrea.io/enable-logging: \"true\"\n";
    write_atomic(&namespaces, &text.replacen("  name: x\n  labels:\n    ns: x\n", logging, 1));
    let pods = Reachability::standard_pods();
    assert!(!tb.reaches("x/b", "x/a", Port::Tcp80), "the secure bridge forwards before npagent runs");

    let work = tempfile::Builder::new().prefix("npa-image-").tempdir().expect("work dir");
    let audit = work.path().join("audit");
    std::fs::create_dir(&audit).expect("audit dir");
    // Default --ofp, --ovsdb and --audit-log: the paths deploy/daemonset.yaml uses.
    let manifests = tb.manifests_dir();
    let binds = [
        Bind { host: &sb.dir, point: OVS_DIR, read_only: true },
        Bind { host: &audit, point: AUDIT_DIR, read_only: false },
        Bind { host: &manifests, point: MANIFESTS_DIR, read_only: true },
    ];
    let mut agent =
        Jailed::start(&root, work.path(), &binds, &["run", "--manifests", "/manifests", "--admin-addr", "127.0.0.1:0"]);

    let status = agent.proc_file("status");
    let held = privileges(&status);
    for (key, value) in &held {
        let want = match key.as_str() {
            "NoNewPrivs" => "1",
            "Uid" => "0 0 0 0",
            _ => "0000000000000000",
        };
        assert_eq!(value, want, "{key} of the jailed npagent:\n{status}");
    }
    assert_eq!(held.len(), 7, "Uid, NoNewPrivs and five capability sets in:\n{status}");
    let mounts = agent.proc_file("mountinfo");
    let mount_at = |point: &str| -> String {
        mounts
            .lines()
            .find(|l| l.split_whitespace().nth(4) == Some(point))
            .unwrap_or_else(|| panic!("nothing mounted at {point}:\n{mounts}"))
            .to_owned()
    };
    let root_mount = mount_at("/");
    assert!(root_mount.contains(" - overlay npagent-image "), "npagent's root is not the image: {root_mount}");
    for point in ["/", "/var/run/openvswitch", "/manifests"] {
        let line = mount_at(point);
        let options = line.split_whitespace().nth(5).unwrap_or("");
        assert!(options.split(',').any(|o| o == "ro"), "{point} is mounted read-write: {line}");
    }

    let open = Reachability::new(&pods, true);
    tb.wait_reachability(&open, Duration::from_secs(30));

    write_atomic(
        &tb.manifests_dir().join("deny-x.yaml"),
        "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {namespace: x, name: deny-all-ingress}\n\
         spec: {podSelector: {}, policyTypes: [Ingress]}\n",
    );
    let mut isolated = Reachability::new(&pods, true);
    isolated.expect_all_ingress("x/*", false).allow_loopback();
    tb.wait_reachability(&isolated, Duration::from_secs(15));

    // np.log, written through the bind mount by a process without CAP_DAC_OVERRIDE.
    let np_log = audit.join("np.log");
    let started = Instant::now();
    let drop_line = loop {
        let text = std::fs::read_to_string(&np_log).unwrap_or_default();
        if let Some(l) =
            text.lines().find(|l| l.contains("IngressDefaultRule K8sNetworkPolicy <nil> Ingress Drop <nil> x/"))
        {
            break l.to_owned();
        }
        assert!(started.elapsed() < Duration::from_secs(10), "no drop in np.log:\n{text}\n{}", agent.log_text());
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(drop_line.contains(" 10.10."), "{drop_line}");

    let status = agent.stop();
    assert!(status.success(), "npagent exited with {status} on SIGTERM");
    // The flows stay when npagent exits (what the DaemonSet's rolling update relies on).
    tb.assert_reachability(&isolated);
}

#[test]
fn image_installs_the_cni_plugin_as_the_init_container_does() {
    let binary = npagent_bin();
    let mut image = Image::build("scripts/build-image", &["--binary".as_ref(), binary.as_os_str()]);
    let root = image.mount();
    let work = tempfile::Builder::new().prefix("npa-image-cni-").tempdir().expect("work dir");
    let (bin, conf) = (work.path().join("node/opt/cni/bin"), work.path().join("node/etc/cni/net.d"));
    for dir in [&bin, &conf] {
        std::fs::create_dir_all(dir).expect("node dir");
    }
    // The init container's command line (tests/deploy_manifests.rs holds the DaemonSet to it),
    // with no capability and a read-only root: only the node's directories are writable.
    let binds = [
        Bind { host: &bin, point: HOST_CNI_BIN, read_only: false },
        Bind { host: &conf, point: HOST_CNI_CONF, read_only: false },
    ];
    let bin_dir = format!("/{HOST_CNI_BIN}");
    let conf_dir = format!("/{HOST_CNI_CONF}");
    let args = ["install-cni", "--bin-dir", &bin_dir, "--conf-dir", &conf_dir, "--socket", "/var/run/npagent/cni.sock"];
    let (status, log) = Jailed::start(&root, work.path(), &binds, &args).finish();
    assert!(status.success(), "install-cni in the image failed ({status}):\n{log}");

    assert!(same_bytes(&root.join("npagent"), &bin.join("npagent")), "the node's plugin is not the image's npagent");
    assert_stripped(&bin.join("npagent"));
    assert!(same_bytes(Path::new(HOST_LOCAL), &bin.join("host-local")), "the node's host-local is not the image's");
    let conflist = std::fs::read_to_string(conf.join("10-npagent.conflist")).expect("the conflist");
    let conflist: serde_json::Value = serde_json::from_str(&conflist).expect("conflist json");
    assert_eq!(conflist["plugins"][0]["socket"], "/var/run/npagent/cni.sock", "{conflist}");
    assert_eq!(conflist["plugins"][0]["ipam"]["type"], "host-local", "{conflist}");

    // The copied host-local runs on the node and speaks CNI.
    let out = output(Command::new(bin.join("host-local")).env_clear().env("CNI_COMMAND", "VERSION"));
    let version: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "host-local VERSION: {e}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let supported = version["supportedVersions"].as_array().expect("supportedVersions");
    assert!(supported.iter().any(|v| v == "1.0.0"), "{version}");

    // A second run (the init container runs at every pod start) leaves the node's host-local.
    std::fs::write(bin.join("host-local"), b"the node's own").expect("write");
    let (status, log) = Jailed::start(&root, work.path(), &binds, &args).finish();
    assert!(status.success(), "second install-cni failed ({status}):\n{log}");
    assert!(log.contains("kept /host/opt/cni/bin/host-local (already there)"), "{log}");
    assert_eq!(std::fs::read(bin.join("host-local")).expect("host-local"), b"the node's own");
}

#[test]
fn build_image_names_what_is_wrong_with_its_input() {
    let script = repo_path("scripts/build-image");
    let fails = |args: &[&str], needle: &str| {
        let out = output(Command::new(&script).args(args));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "build-image {args:?} succeeded");
        assert!(err.contains(needle), "build-image {args:?}: {needle:?} not in {err}");
        assert!(out.stdout.is_empty(), "no image id on failure: {:?}", String::from_utf8_lossy(&out.stdout));
    };
    fails(&["--binary", "/nonexistent/npagent"], "--binary /nonexistent/npagent: not an executable file");
    let not_elf = repo_path("scripts/test"); // executable, but a shell script
    let not_elf = not_elf.to_str().expect("utf-8 path");
    fails(&["--binary", not_elf], &format!("--binary {not_elf}: not an ELF file"));
    fails(&["--binary"], "--binary needs a path");
    fails(&["--tag"], "--tag needs a name");
    fails(&["--push"], "unknown argument --push");
}
