//! The one image the runtime tests run, built here from Debian's busybox-static (no registry
//! is reachable): `/bin/busybox` and its applets' links, `/lib` and `/lib64` pointing into
//! `/usr` as on Debian, and `sleep infinity` as the command (it serves as the sandbox's
//! pause image too). Busybox has no UDP server, so a pod's server is the testbed's own
//! listener (`testbed/probe.py serve`) run by the host's Python, mounted read-only into the
//! container as hostPath volumes are ([`SERVER_MOUNTS`]).

use std::path::{Path, PathBuf};
use std::process::Command;

use super::sandbox::{repo_path, run};

/// The image's name, for the runtime's image store and the CRI plugin's `sandbox_image`.
pub const IMAGE: &str = "npagent.test/busybox:1";

/// The image's command (its `CMD`): a process that waits, the sandbox's pause.
const SLEEP: [&str; 2] = ["/bin/sleep", "infinity"];

/// The `podman import --change` that gives the image its command.
pub fn podman_cmd_change() -> String {
    format!("CMD {}", serde_json::json!(SLEEP))
}

/// Where Debian's busybox-static installs busybox.
const BUSYBOX: &str = "/usr/bin/busybox";

/// The applets linked in `/bin`.
const APPLETS: [&str; 6] = ["sh", "sleep", "cat", "ls", "ip", "nc"];

/// Where the container finds the testbed's scripts (`probe.py`).
pub const TESTBED_IN_CONTAINER: &str = "/testbed";

/// Where the container writes its listener's pidfile (a host directory mounted read-write).
pub const SHARE_IN_CONTAINER: &str = "/share";

/// Host directories mounted read-only into a server container: the host's Python and its
/// libraries, and the testbed's scripts. `(host path, container path)`.
pub fn server_mounts() -> Vec<(PathBuf, String)> {
    let mut mounts: Vec<(PathBuf, String)> =
        ["/usr", "/lib", "/lib64"].iter().map(|d| (PathBuf::from(d), d.to_string())).collect();
    mounts.push((repo_path("testbed"), TESTBED_IN_CONTAINER.to_string()));
    mounts
}

/// The command of a server container: the testbed's listeners (TCP 80, TCP 81, UDP 80),
/// writing their pid to `<share>/<name>.pid` once every socket is bound.
pub fn server_command(name: &str) -> Vec<String> {
    vec![
        "/usr/bin/python3".into(),
        format!("{TESTBED_IN_CONTAINER}/probe.py"),
        "serve".into(),
        "--pidfile".into(),
        format!("{SHARE_IN_CONTAINER}/{name}.pid"),
    ]
}

/// Why the image cannot be built on this machine, if it cannot.
pub fn missing() -> Option<String> {
    (!Path::new(BUSYBOX).exists()).then(|| format!("{BUSYBOX} is missing (Debian's busybox-static)"))
}

/// The image's root filesystem as a tar archive in `dir` (`rootfs.tar`, for `podman import`);
/// its path.
pub fn rootfs_tar(dir: &Path) -> PathBuf {
    let root = dir.join("rootfs");
    let bin = root.join("bin");
    std::fs::create_dir_all(&bin).expect("create rootfs/bin");
    std::fs::create_dir_all(root.join("tmp")).expect("create rootfs/tmp");
    std::fs::copy(BUSYBOX, bin.join("busybox")).unwrap_or_else(|e| panic!("copy {BUSYBOX}: {e}"));
    for applet in APPLETS {
        std::os::unix::fs::symlink("busybox", bin.join(applet)).expect("link an applet");
    }
    for lib in ["lib", "lib64"] {
        std::os::unix::fs::symlink(format!("usr/{lib}"), root.join(lib)).expect("link a lib dir");
    }
    let tar = dir.join("rootfs.tar");
    run(Command::new("tar").arg("-C").arg(&root).arg("--numeric-owner").arg("-cf").arg(&tar).arg("."));
    tar
}

/// The image as a Docker archive in `dir` (`image.tar`: manifest.json naming [`IMAGE`], its
/// config and the one layer, for `ctr images import`); its path.
pub fn image_tar(dir: &Path) -> PathBuf {
    let layer = rootfs_tar(dir);
    let digest = sha256_hex(&std::fs::read(&layer).expect("read the layer"));
    let config = serde_json::json!({
        "architecture": "amd64",
        "os": "linux",
        "config": {"Cmd": SLEEP},
        "rootfs": {"type": "layers", "diff_ids": [format!("sha256:{digest}")]},
    });
    let archive = dir.join("archive");
    std::fs::create_dir_all(&archive).expect("create the archive dir");
    std::fs::write(archive.join("config.json"), config.to_string()).expect("write config.json");
    let manifest = serde_json::json!([{"Config": "config.json", "RepoTags": [IMAGE], "Layers": ["layer.tar"]}]);
    std::fs::write(archive.join("manifest.json"), manifest.to_string()).expect("write manifest.json");
    std::fs::rename(&layer, archive.join("layer.tar")).expect("move the layer");
    let tar = dir.join("image.tar");
    run(Command::new("tar").arg("-C").arg(&archive).arg("-cf").arg(&tar).args([
        "manifest.json",
        "config.json",
        "layer.tar",
    ]));
    tar
}

fn sha256_hex(data: &[u8]) -> String {
    hex::encode(ring::digest::digest(&ring::digest::SHA256, data))
}
