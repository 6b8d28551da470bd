//! A private containerd (Debian's, with its CRI plugin) for one test: its own root, state,
//! socket and config.toml in a directory of the test's, run inside the node's network
//! namespace (as on a node, where it shares the host's with npagent and OVS) and calling the
//! CNI plugins of a [`CniNode`]. Started and stopped by pid; on drop it removes every sandbox
//! it still has (through the CRI, as kubelet would), stops, and takes away what it wrote
//! outside its root for the test's sandboxes (shim sockets under `/run/containerd/s`, libcni's
//! cache in `/var/lib/cni/results`).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::cni_node::{CniNode, NETWORK};
use super::cri::{Cri, PodRef};
use super::rootfs;
use super::sandbox::output;

/// Where containerd's shims put their sockets (outside the instance's root).
const SHIM_SOCKETS: &str = "/run/containerd/s";
/// libcni's result cache (outside the instance's root).
const CNI_CACHE: &str = "/var/lib/cni/results";
/// The CRI plugin's containerd namespace.
const NAMESPACE: &str = "k8s.io";

/// One running containerd.
pub struct Containerd {
    child: Option<Child>,
    dir: PathBuf,
    socket: PathBuf,
    /// The CRI client.
    pub cri: Cri,
    /// Sandbox and container ids created through [`Containerd::cri`] (for the cleanup of what
    /// containerd leaves outside its root): callers [`Containerd::created`] them.
    ids: Mutex<Vec<String>>,
}

impl Containerd {
    /// Why containerd cannot run on this machine at all (a program it needs is missing).
    pub fn unavailable() -> Option<String> {
        let missing = ["containerd", "ctr", "runc", "nsenter"].into_iter().find(|tool| which(tool).is_none());
        missing.map(|tool| format!("{tool} is not installed")).or_else(rootfs::missing)
    }

    /// Starts containerd in `node`'s network namespace with its state in `<sandbox dir>/containerd`
    /// and the image ([`rootfs::IMAGE`]) imported; Err says why it cannot start here.
    pub fn start(node: &CniNode) -> Result<Containerd, String> {
        let dir = node.tb.sandbox.dir.join("containerd");
        std::fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
        let socket = dir.join("containerd.sock");
        let snapshotter = if overlay_works(&dir) { "overlayfs" } else { "native" };
        std::fs::write(dir.join("config.toml"), config(&dir, &socket, snapshotter, node))
            .map_err(|e| format!("write config.toml: {e}"))?;
        let log = std::fs::File::create(dir.join("containerd.log")).map_err(|e| format!("containerd.log: {e}"))?;
        let err = log.try_clone().map_err(|e| e.to_string())?;
        // nsenter execs containerd (its pid is containerd's) in the node's network namespace,
        // keeping the host's mounts (`ip netns exec` would remount /sys, hiding the cgroups).
        let mut child = Command::new("nsenter")
            .arg(format!("--net=/var/run/netns/{}", node.netns()))
            .arg("containerd")
            .arg("--config")
            .arg(dir.join("config.toml"))
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("start containerd: {e}"))?;
        let cri = wait_for_socket(&socket, &mut child).and_then(|()| Cri::connect(&socket, &dir.join("pods")));
        let cri = match cri {
            Ok(cri) => cri,
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                let log = std::fs::read_to_string(dir.join("containerd.log")).unwrap_or_default();
                return Err(format!("{e}\ncontainerd's log:\n{log}"));
            }
        };
        let mut started = Containerd { child: Some(child), cri, dir, socket, ids: Mutex::new(Vec::new()) };
        started.wait_ready()?;
        started.import_image()?;
        Ok(started)
    }

    /// Waits until the CRI answers Version.
    fn wait_ready(&mut self) -> Result<(), String> {
        let started = Instant::now();
        loop {
            match self.cri.version() {
                Ok(_) => return Ok(()),
                Err(e) if started.elapsed() > Duration::from_secs(20) => {
                    return Err(format!("containerd's CRI did not answer within 20 s ({e}):\n{}", self.log_tail(30)))
                }
                Err(_) => {}
            }
            if let Some(status) = self.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                return Err(format!("containerd exited ({status}):\n{}", self.log_tail(30)));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn import_image(&self) -> Result<(), String> {
        let tar = rootfs::image_tar(&self.dir);
        let out = output(self.ctr().args(["images", "import"]).arg(&tar));
        if !out.status.success() {
            return Err(format!("ctr images import: {}", String::from_utf8_lossy(&out.stderr)));
        }
        Ok(())
    }

    /// `ctr` against this instance, in the CRI plugin's namespace.
    pub fn ctr(&self) -> Command {
        let mut cmd = Command::new("ctr");
        cmd.arg("-a").arg(&self.socket).args(["-n", NAMESPACE]);
        cmd
    }

    /// Notes a sandbox or container id made through [`Containerd::cri`].
    pub fn created(&self, id: &str) {
        self.ids.lock().unwrap_or_else(|e| e.into_inner()).push(id.to_owned());
    }

    /// RunPodSandbox for `pod`, noted for the cleanup; the sandbox id.
    pub fn run_pod(&self, pod: &PodRef) -> Result<String, tonic::Status> {
        let id = self.cri.run_pod_sandbox(pod)?;
        self.created(&id);
        Ok(id)
    }

    /// The tail of containerd's own log.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(self.dir.join("containerd.log")).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// containerd's version line.
    pub fn version(&self) -> String {
        self.cri.version().unwrap_or_else(|e| e.to_string())
    }

    /// Stops containerd (SIGTERM, SIGKILL after 10 s).
    fn stop(&mut self) {
        let Some(mut child) = self.child.take() else { return };
        let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
        let started = Instant::now();
        while matches!(child.try_wait(), Ok(None)) && started.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
    }

    /// The pids of shims serving this instance (their command line names its socket).
    fn shim_pids(&self) -> Vec<u32> {
        let needle = self.socket.display().to_string();
        let Ok(procs) = std::fs::read_dir("/proc") else { return Vec::new() };
        procs
            .flatten()
            .filter_map(|p| p.file_name().to_str()?.parse::<u32>().ok())
            .filter(|pid| {
                let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
                text.contains("containerd-shim") && text.contains(&needle)
            })
            .collect()
    }
}

impl super::cni_node::Runtime for Containerd {
    const NAME: &'static str = "containerd";

    fn unavailable() -> Option<String> {
        Containerd::unavailable()
    }

    fn start(node: &CniNode) -> Result<Containerd, String> {
        Containerd::start(node)
    }

    fn version(&self) -> String {
        Containerd::version(self)
    }
}

impl Drop for Containerd {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("containerd log (tail):\n{}", self.log_tail(40));
        }
        // Sandboxes a test left (a failed one too, which was never noted) are removed as
        // kubelet would; their network namespaces are removed after containerd stops if
        // it could not.
        let mut netns = Vec::new();
        for id in self.cri.sandboxes().unwrap_or_default() {
            self.created(&id);
            netns.extend(self.cri.netns_path(&id));
            if let Err(e) = self.cri.remove_pod(&id) {
                eprintln!("containerd cleanup: sandbox {id}: {e}");
            }
        }
        self.stop();
        for path in netns.iter().filter(|p| Path::new(p).exists()) {
            let _ = Command::new("umount").arg(path).status();
            let _ = std::fs::remove_file(path);
        }
        for pid in self.shim_pids() {
            let _ = Command::new("kill").args(["-KILL", &pid.to_string()]).status();
        }
        // Mounts containerd left under its directory (a sandbox it could not take apart).
        let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
        let dir = self.dir.display().to_string();
        let mut under: Vec<&str> =
            mounts.lines().filter_map(|l| l.split(' ').nth(1)).filter(|m| m.starts_with(&dir)).collect();
        under.sort_by_key(|m| std::cmp::Reverse(m.len()));
        for m in under {
            let _ = Command::new("umount").args(["-l", m]).status();
        }
        let ids = self.ids.lock().unwrap_or_else(|e| e.into_inner()).clone();
        for id in ids {
            let shim = format!("{}/{NAMESPACE}/{id}", self.socket.display());
            let _ = std::fs::remove_file(Path::new(SHIM_SOCKETS).join(sha256_hex(shim.as_bytes())));
            for cached in [format!("{NETWORK}-{id}-eth0"), format!("cni-loopback-{id}-lo")] {
                let _ = std::fs::remove_file(Path::new(CNI_CACHE).join(cached));
            }
        }
    }
}

/// The config.toml of an instance in `dir` listening on `socket`.
fn config(dir: &Path, socket: &Path, snapshotter: &str, node: &CniNode) -> String {
    let q = |p: &Path| serde_json::to_string(&p.display().to_string()).unwrap_or_default();
    format!(
        r#"version = 2
root = {root}
state = {state}
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.internal.v1.opt",
  "io.containerd.tracing.processor.v1.otlp"]

[grpc]
  address = {socket}

[ttrpc]
  address = {ttrpc}

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{image}"
  disable_apparmor = true
  # The sandbox asks for oom_score_adj -998, which a container on a host that forbids
  # lowering it cannot get: keep it at containerd's own.
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "{snapshotter}"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = {bin}
    conf_dir = {conf}
"#,
        root = q(&dir.join("root")),
        state = q(&dir.join("state")),
        socket = q(socket),
        ttrpc = q(&dir.join("containerd.sock.ttrpc")),
        image = rootfs::IMAGE,
        bin = q(&node.cni_bin),
        conf = q(&node.cni_conf),
    )
}

/// Whether an overlay mount works in `dir` (the overlayfs snapshotter needs it; on a
/// filesystem that cannot be an upper dir, the native snapshotter is used).
fn overlay_works(dir: &Path) -> bool {
    let probe = dir.join("overlay-probe");
    let paths: Vec<PathBuf> = ["lower", "upper", "work", "merged"].iter().map(|d| probe.join(d)).collect();
    if paths.iter().any(|p| std::fs::create_dir_all(p).is_err()) {
        return false;
    }
    let options =
        format!("lowerdir={},upperdir={},workdir={}", paths[0].display(), paths[1].display(), paths[2].display());
    let mounted = Command::new("mount")
        .args(["-t", "overlay", "overlay", "-o", &options])
        .arg(&paths[3])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if mounted {
        let _ = Command::new("umount").arg(&paths[3]).status();
    }
    let _ = std::fs::remove_dir_all(&probe);
    mounted
}

/// Waits for `socket` to exist (containerd starting); Err when containerd exits first or
/// takes more than 20 s.
fn wait_for_socket(socket: &Path, child: &mut Child) -> Result<(), String> {
    let started = Instant::now();
    while !socket.exists() {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("containerd exited ({status})"));
        }
        if started.elapsed() > Duration::from_secs(20) {
            return Err(format!("containerd made no {} within 20 s", socket.display()));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

/// The path of `tool` on PATH.
pub fn which(tool: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?.to_str()?.split(':').map(|d| Path::new(d).join(tool)).find(|p| p.is_file())
}

fn sha256_hex(data: &[u8]) -> String {
    hex::encode(ring::digest::digest(&ring::digest::SHA256, data))
}
