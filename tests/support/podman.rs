//! A private podman (Debian's 4.3, CNI network backend) for one test: its own
//! containers.conf and storage.conf (vfs storage, root and runroot in a directory of the
//! test's, cgroupfs, runc, events to a file, ulimits its containers may have), run inside the
//! node's network namespace and calling the CNI plugins of a [`CniNode`] for the conflist's
//! network. podman names only the container to the CNI (`K8S_POD_NAME`); it passes its own
//! `CNI_ARGS` environment on to the plugins, which is how [`Podman::run`] names the pod's
//! namespace (`K8S_POD_NAMESPACE`). On drop it removes every container it still has.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use super::cni_node::{CniNode, NETWORK};
use super::containerd::which;
use super::rootfs;
use super::sandbox::output;

/// One private podman.
pub struct Podman {
    dir: PathBuf,
    netns: String,
}

impl Podman {
    /// Why podman cannot run on this machine at all (a program it needs is missing).
    pub fn unavailable() -> Option<String> {
        let missing = ["podman", "runc", "nsenter"].into_iter().find(|tool| which(tool).is_none());
        missing.map(|tool| format!("{tool} is not installed")).or_else(rootfs::missing)
    }

    /// A podman for `node` with its state in `<sandbox dir>/podman` and the image
    /// ([`rootfs::IMAGE`]) imported; Err says why it does not work.
    pub fn start(node: &CniNode) -> Result<Podman, String> {
        let dir = node.tb.sandbox.dir.join("podman");
        std::fs::create_dir_all(dir.join("tmp")).map_err(|e| format!("create {}: {e}", dir.display()))?;
        let q = |p: &Path| serde_json::to_string(&p.display().to_string()).unwrap_or_default();
        // The machine's limits may be lower than podman's defaults (1048576 open files):
        // runc then cannot set them, so the containers get modest ones.
        let containers_conf = format!(
            r#"[containers]
default_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]
netns = "private"

[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = {events}
runtime = "runc"
tmp_dir = {tmp}

[network]
network_backend = "cni"
cni_plugin_dirs = [{bin}]
network_config_dir = {conf}
default_network = "{NETWORK}"
"#,
            events = q(&dir.join("events.log")),
            tmp = q(&dir.join("tmp")),
            bin = q(&node.cni_bin),
            conf = q(&node.cni_conf),
        );
        let storage_conf = format!(
            "[storage]\ndriver = \"vfs\"\ngraphroot = {}\nrunroot = {}\n",
            q(&dir.join("root")),
            q(&dir.join("runroot"))
        );
        std::fs::write(dir.join("containers.conf"), containers_conf).map_err(|e| e.to_string())?;
        std::fs::write(dir.join("storage.conf"), storage_conf).map_err(|e| e.to_string())?;
        let podman = Podman { dir, netns: node.netns().to_owned() };
        let tar = rootfs::rootfs_tar(&podman.dir);
        let change = rootfs::podman_cmd_change();
        let out = podman.output(None, &["import", "--change", &change, &tar.display().to_string(), rootfs::IMAGE]);
        if !out.status.success() {
            return Err(format!("podman import: {}", String::from_utf8_lossy(&out.stderr)));
        }
        Ok(podman)
    }

    /// `podman ARGS` of this instance in the node's network namespace (nsenter keeps the
    /// host's mounts: `ip netns exec` would remount /sys, hiding the cgroups), with
    /// `CNI_ARGS` set to `cni_args` if given.
    pub fn command(&self, cni_args: Option<&str>, args: &[&str]) -> Command {
        let mut cmd = Command::new("nsenter");
        cmd.arg(format!("--net=/var/run/netns/{}", self.netns))
            .arg("podman")
            .args(args)
            .env("CONTAINERS_CONF", self.dir.join("containers.conf"))
            .env("CONTAINERS_STORAGE_CONF", self.dir.join("storage.conf"))
            .env_remove("CNI_ARGS");
        if let Some(a) = cni_args {
            cmd.env("CNI_ARGS", a);
        }
        cmd
    }

    /// Runs podman; its output whatever the exit status.
    pub fn output(&self, cni_args: Option<&str>, args: &[&str]) -> Output {
        output(&mut self.command(cni_args, args))
    }

    /// Runs podman; its stdout, trimmed, or Err with its stderr.
    pub fn run_ok(&self, cni_args: Option<&str>, args: &[&str]) -> Result<String, String> {
        let out = self.output(cni_args, args);
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
        } else {
            Err(format!("podman {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim()))
        }
    }

    /// `podman run -d` of container `name` on the conflist's network, as pod
    /// `namespace/name` (`CNI_ARGS=K8S_POD_NAMESPACE=<namespace>`), running `command` (the
    /// image's `sleep infinity` when empty) with `volumes` (`host:container[:ro]`); its id.
    pub fn run(&self, namespace: &str, name: &str, volumes: &[String], command: &[String]) -> Result<String, String> {
        let mut args: Vec<String> =
            ["run", "-d", "--name", name, "--network", NETWORK].iter().map(|s| s.to_string()).collect();
        for v in volumes {
            args.push("-v".into());
            args.push(v.clone());
        }
        args.push(rootfs::IMAGE.into());
        args.extend(command.iter().cloned());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.run_ok(Some(&format!("K8S_POD_NAMESPACE={namespace}")), &args)
    }

    /// The container's address on the conflist's network.
    pub fn ip(&self, name: &str) -> Result<String, String> {
        let format = format!("{{{{(index .NetworkSettings.Networks \"{NETWORK}\").IPAddress}}}}");
        self.run_ok(None, &["inspect", "--format", &format, name])
    }

    /// `podman rm -f -t 0 NAME`: stops and removes the container (its network taken down
    /// through the CNI).
    pub fn remove(&self, name: &str) -> Result<(), String> {
        self.run_ok(None, &["rm", "-f", "-t", "0", name]).map(|_| ())
    }

    /// The names of the containers it has.
    pub fn containers(&self) -> Vec<String> {
        self.run_ok(None, &["ps", "-a", "--format", "{{.Names}}"])
            .map(|s| s.lines().map(str::to_owned).collect())
            .unwrap_or_default()
    }

    /// podman's version line.
    pub fn version(&self) -> String {
        self.run_ok(None, &["--version"]).unwrap_or_else(|e| e)
    }
}

impl super::cni_node::Runtime for Podman {
    const NAME: &'static str = "podman";

    fn unavailable() -> Option<String> {
        Podman::unavailable()
    }

    fn start(node: &CniNode) -> Result<Podman, String> {
        Podman::start(node)
    }

    fn version(&self) -> String {
        Podman::version(self)
    }
}

impl Drop for Podman {
    fn drop(&mut self) {
        if let Err(e) = self.run_ok(None, &["rm", "-a", "-f", "-t", "0"]) {
            eprintln!("podman cleanup: {e}");
        }
    }
}
