//! `npagent install-cni`, run as the DaemonSet's init container runs it, on real temporary
//! directories: the plugin is the running binary, host-local is added only where missing, the
//! config list is the documented one, the modes are right, nothing temporary is left, a second
//! run changes nothing, a replaced file is a new inode (never rewritten in place), and every
//! failure names its path. No root.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

mod support;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use support::agent::npagent_bin;

/// A node's directories under one temporary root, and an IPAM plugin directory holding a
/// host-local of known bytes.
struct Node {
    root: tempfile::TempDir,
}

const FAKE_HOST_LOCAL: &[u8] = b"#!/bin/sh\necho host-local from the image\n";

impl Node {
    fn new() -> Node {
        let root = tempfile::Builder::new().prefix("npa-install-cni-").tempdir().expect("temp dir");
        let ipam = root.path().join("image/usr/lib/cni");
        std::fs::create_dir_all(&ipam).expect("ipam dir");
        std::fs::write(ipam.join("host-local"), FAKE_HOST_LOCAL).expect("host-local");
        Node { root }
    }

    fn bin_dir(&self) -> PathBuf {
        self.root.path().join("host/opt/cni/bin")
    }

    fn conf_dir(&self) -> PathBuf {
        self.root.path().join("host/etc/cni/net.d")
    }

    fn ipam_dir(&self) -> PathBuf {
        self.root.path().join("image/usr/lib/cni")
    }

    /// `npagent install-cni` with the node's directories and `extra` arguments.
    fn install(&self, extra: &[&str]) -> Output {
        Command::new(npagent_bin())
            .arg("install-cni")
            .arg("--bin-dir")
            .arg(self.bin_dir())
            .arg("--conf-dir")
            .arg(self.conf_dir())
            .arg("--ipam-plugins")
            .arg(self.ipam_dir())
            .args(extra)
            .output()
            .expect("run npagent install-cni")
    }

    fn install_ok(&self, extra: &[&str]) -> String {
        let out = self.install(extra);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "install-cni {extra:?} failed: {stderr}");
        assert!(stderr.is_empty(), "install-cni says nothing on stderr when it works: {stderr}");
        String::from_utf8(out.stdout).expect("utf-8 stdout")
    }
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())).permissions().mode() & 0o7777
}

/// The names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").file_name().to_string_lossy().into_owned())
        .collect();
    out.sort();
    out
}

fn conflist(node: &Node) -> serde_json::Value {
    let path = node.conf_dir().join("10-npagent.conflist");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}\n{text}", path.display()))
}

fn documented_conflist(socket: &str) -> serde_json::Value {
    serde_json::json!({"cniVersion": "1.0.0", "name": "npagent", "plugins": [
        {"type": "npagent", "socket": socket, "ipam": {"type": "host-local"}}]})
}

#[test]
fn installs_the_running_binary_host_local_and_the_conflist() {
    let node = Node::new();
    let stdout = node.install_ok(&["--socket", "/var/run/npagent/cni.sock"]);
    let (bin, conf) = (node.bin_dir(), node.conf_dir());
    assert_eq!(names(&bin), ["host-local", "npagent"], "created with the directories, nothing temporary left");
    assert_eq!(names(&conf), ["10-npagent.conflist"]);

    let plugin = bin.join("npagent");
    assert_eq!(
        std::fs::read(&plugin).expect("plugin"),
        std::fs::read(npagent_bin()).expect("binary"),
        "a copy of itself"
    );
    assert_eq!(mode(&plugin), 0o755);
    let version = Command::new(&plugin).arg("--version").output().expect("run the installed plugin");
    assert!(version.status.success() && String::from_utf8_lossy(&version.stdout).starts_with("npagent "));

    let host_local = bin.join("host-local");
    assert_eq!(std::fs::read(&host_local).expect("host-local"), FAKE_HOST_LOCAL, "copied from --ipam-plugins");
    assert_eq!(mode(&host_local), 0o755, "executable whatever the source's mode");

    assert_eq!(conflist(&node), documented_conflist("/var/run/npagent/cni.sock"));
    assert_eq!(mode(&conf.join("10-npagent.conflist")), 0o644);

    let want = format!(
        "npagent install-cni: wrote {}\nnpagent install-cni: wrote {}\nnpagent install-cni: wrote {}\n",
        plugin.display(),
        host_local.display(),
        conf.join("10-npagent.conflist").display()
    );
    assert_eq!(stdout, want);
}

#[test]
fn the_socket_defaults_to_the_daemonsets() {
    let node = Node::new();
    node.install_ok(&[]);
    assert_eq!(conflist(&node), documented_conflist("/var/run/npagent/cni.sock"));
    let node = Node::new();
    node.install_ok(&["--socket", "/run/other/agent.sock"]);
    assert_eq!(conflist(&node), documented_conflist("/run/other/agent.sock"));
}

#[test]
fn a_second_run_gives_the_same_files_and_replaces_by_rename() {
    let node = Node::new();
    node.install_ok(&[]);
    let plugin = node.bin_dir().join("npagent");
    let conf = node.conf_dir().join("10-npagent.conflist");
    let before: Vec<Vec<u8>> = [&plugin, &conf].iter().map(|p| std::fs::read(p).expect("file")).collect();
    let old_inode = std::fs::metadata(&plugin).expect("plugin").ino();
    // A runtime executing the old plugin holds its inode: a link to it must keep its bytes.
    let held = node.root.path().join("held-plugin");
    std::fs::hard_link(&plugin, &held).expect("hard link");

    let stdout = node.install_ok(&[]);
    assert!(stdout.contains("kept ") && stdout.contains("host-local (already there)"), "{stdout}");
    assert_eq!(names(&node.bin_dir()), ["host-local", "npagent"]);
    assert_eq!(names(&node.conf_dir()), ["10-npagent.conflist"]);
    let after: Vec<Vec<u8>> = [&plugin, &conf].iter().map(|p| std::fs::read(p).expect("file")).collect();
    assert!(before == after, "a second run changed the files");
    assert_ne!(std::fs::metadata(&plugin).expect("plugin").ino(), old_inode, "replaced by a rename");
    assert_eq!(std::fs::read(&held).expect("held"), before[0], "the old inode was written in place");
    assert_eq!((mode(&plugin), mode(&conf)), (0o755, 0o644));
}

#[test]
fn an_existing_host_local_is_left_alone() {
    let node = Node::new();
    std::fs::create_dir_all(node.bin_dir()).expect("bin dir");
    let host_local = node.bin_dir().join("host-local");
    std::fs::write(&host_local, b"the node's own host-local").expect("write");
    std::fs::set_permissions(&host_local, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    let inode = std::fs::metadata(&host_local).expect("host-local").ino();
    // Not needed then: a missing --ipam-plugins is no error.
    std::fs::remove_file(node.ipam_dir().join("host-local")).expect("rm");

    let stdout = node.install_ok(&[]);
    assert!(stdout.contains(&format!("kept {} (already there)", host_local.display())), "{stdout}");
    assert_eq!(std::fs::read(&host_local).expect("host-local"), b"the node's own host-local");
    assert_eq!(mode(&host_local), 0o700);
    assert_eq!(std::fs::metadata(&host_local).expect("host-local").ino(), inode);
    assert!(node.bin_dir().join("npagent").is_file());
}

#[test]
fn failures_name_the_path_and_write_no_config() {
    // No host-local to copy: the plugin is there, but no config makes the runtime call it.
    let node = Node::new();
    std::fs::remove_file(node.ipam_dir().join("host-local")).expect("rm");
    let out = node.install(&[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let missing = node.ipam_dir().join("host-local");
    assert!(err.contains(&format!("{}: cannot read the IPAM plugin: ", missing.display())), "{err}");
    assert!(err.starts_with("npagent install-cni: "), "{err}");
    assert!(!node.conf_dir().join("10-npagent.conflist").exists(), "a config without its IPAM plugin");
    assert_eq!(names(&node.bin_dir()), ["npagent"], "nothing temporary left");

    // The config directory is a file.
    let node = Node::new();
    std::fs::create_dir_all(node.conf_dir().parent().expect("parent")).expect("mkdir");
    std::fs::write(node.conf_dir(), b"not a directory").expect("write");
    let out = node.install(&[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(&format!("{}: cannot create the directory: ", node.conf_dir().display())), "{err}");

    // The config list's name is taken by a directory: the rename fails, the temporary goes.
    let node = Node::new();
    let conflist = node.conf_dir().join("10-npagent.conflist");
    std::fs::create_dir_all(conflist.join("inside")).expect("mkdir");
    let out = node.install(&[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(&format!("{}: cannot rename the temporary file over it: ", conflist.display())), "{err}");
    assert_eq!(names(&node.conf_dir()), ["10-npagent.conflist"], "nothing temporary left");

    // Required arguments.
    let out = Command::new(npagent_bin()).args(["install-cni", "--bin-dir", "/tmp"]).output().expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--conf-dir"));
}
