//! `npagent install-cni`: makes a node run npagent as its network plugin. The DaemonSet's init
//! container runs it with the node's `/opt/cni/bin` and `/etc/cni/net.d` mounted: it copies the
//! running executable there as the `npagent` plugin, adds the IPAM plugin the network config
//! names (host-local, which the image carries) unless the node already has one, and writes the
//! network config list that points the plugin at the agent's unix socket.
//!
//! Every file is written whole or not at all (a temporary file in the same directory, synced,
//! then renamed over the old one), so the container runtime never executes a half-copied plugin
//! or reads a half-written config, and a plugin that is running while it is replaced keeps its
//! old inode. Running it again gives the same files.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The plugin's name: the file in the CNI bin directory and the config's `type`.
pub const PLUGIN: &str = "npagent";
/// The IPAM plugin the network config delegates to.
pub const IPAM_PLUGIN: &str = "host-local";
/// The network config list's file name in the CNI config directory.
pub const CONFLIST: &str = "10-npagent.conflist";
/// The network's name in the config.
pub const NETWORK: &str = "npagent";
/// The CNI spec version the config declares: 1.0.0, the newest that runtimes on libcni
/// before 1.2 (containerd up to 1.7, podman 4) accept in a result; npagent answers in the
/// version the config declares.
pub const CNI_VERSION: &str = "1.0.0";
/// Where the agent serves the plugin (`npagent run --cni-socket`) unless told otherwise.
pub const DEFAULT_SOCKET: &str = "/var/run/npagent/cni.sock";
/// Where Debian's containernetworking-plugins, and so the npagent image, keep host-local.
pub const DEFAULT_IPAM_PLUGINS: &str = "/usr/lib/cni";

/// What to install, and where.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The executable to install as the plugin (the running one: `/proc/self/exe`).
    pub executable: PathBuf,
    /// The node's CNI bin directory (kubelet's and the runtime's `CNI_PATH`).
    pub bin_dir: PathBuf,
    /// The node's CNI config directory.
    pub conf_dir: PathBuf,
    /// The agent's unix socket, written into the config as `"socket"`.
    pub socket: PathBuf,
    /// The directory holding the IPAM plugin to add when the bin directory has none.
    pub ipam_plugins: PathBuf,
}

/// What `install` did with one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Written (created or replaced) at this path.
    Wrote(PathBuf),
    /// Left as it was: the node already has this file.
    Kept(PathBuf),
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Step::Wrote(path) => write!(f, "wrote {}", path.display()),
            Step::Kept(path) => write!(f, "kept {} (already there)", path.display()),
        }
    }
}

/// Why an install failed: the path, what was being done to it, and the system's error.
#[derive(Debug, thiserror::Error)]
#[error("{}: {action}: {source}", path.display())]
pub struct InstallError {
    pub path: PathBuf,
    pub action: &'static str,
    #[source]
    pub source: io::Error,
}

/// An error naming `path` and `action`, for `map_err`.
fn fail<'a>(path: &'a Path, action: &'static str) -> impl FnOnce(io::Error) -> InstallError + 'a {
    move |source| InstallError { path: path.to_owned(), action, source }
}

/// Installs the plugin, the IPAM plugin (unless present) and the config list, in that order:
/// the config, which makes the runtime call the plugin, comes last.
pub fn install(plan: &Plan) -> Result<Vec<Step>, InstallError> {
    for dir in [&plan.bin_dir, &plan.conf_dir] {
        std::fs::create_dir_all(dir).map_err(fail(dir, "cannot create the directory"))?;
    }
    let mut steps = Vec::with_capacity(3);

    let plugin = plan.bin_dir.join(PLUGIN);
    let mut exe = File::open(&plan.executable)
        .map_err(fail(&plan.executable, "cannot read the executable (is /proc mounted?)"))?;
    write_atomic(&plugin, 0o755, |out| io::copy(&mut exe, out).map(drop))?;
    steps.push(Step::Wrote(plugin));

    let ipam = plan.bin_dir.join(IPAM_PLUGIN);
    if std::fs::symlink_metadata(&ipam).is_ok() {
        steps.push(Step::Kept(ipam));
    } else {
        let source = plan.ipam_plugins.join(IPAM_PLUGIN);
        let mut from = File::open(&source).map_err(fail(&source, "cannot read the IPAM plugin"))?;
        write_atomic(&ipam, 0o755, |out| io::copy(&mut from, out).map(drop))?;
        steps.push(Step::Wrote(ipam));
    }

    let conflist = plan.conf_dir.join(CONFLIST);
    let text = conflist_text(&plan.socket).map_err(fail(&plan.socket, "not usable as the config's socket"))?;
    write_atomic(&conflist, 0o644, |out| out.write_all(text.as_bytes()))?;
    steps.push(Step::Wrote(conflist));
    Ok(steps)
}

/// The network config list naming `socket`, as JSON text with a final newline. A socket path
/// that is not UTF-8 cannot be a JSON string.
pub fn conflist_text(socket: &Path) -> io::Result<String> {
    let socket = socket
        .to_str()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "the path is not UTF-8, so not a JSON string"))?;
    let list = ConfList {
        cni_version: CNI_VERSION,
        name: NETWORK,
        plugins: [PluginConf { type_: PLUGIN, socket, ipam: Ipam { type_: IPAM_PLUGIN } }],
    };
    let mut text = serde_json::to_string_pretty(&list).map_err(io::Error::other)?;
    text.push('\n');
    Ok(text)
}

/// The network config list: the fields in the order the CNI spec shows them.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct ConfList<'a> {
    cni_version: &'a str,
    name: &'a str,
    plugins: [PluginConf<'a>; 1],
}

/// npagent's entry of the list.
#[derive(serde::Serialize)]
struct PluginConf<'a> {
    #[serde(rename = "type")]
    type_: &'a str,
    socket: &'a str,
    ipam: Ipam<'a>,
}

/// The IPAM section: the plugin only; the agent adds host-local's ranges from the Node.
#[derive(serde::Serialize)]
struct Ipam<'a> {
    #[serde(rename = "type")]
    type_: &'a str,
}

/// Replaces `path` with what `fill` writes, with `mode`: a temporary file beside it, synced,
/// renamed over it, and the directory synced. On failure the temporary file is removed and
/// `path` is as it was.
fn write_atomic(path: &Path, mode: u32, fill: impl FnOnce(&mut File) -> io::Result<()>) -> Result<(), InstallError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let temp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let written = (|| {
        // A leftover of an earlier run that died with this pid.
        match std::fs::remove_file(&temp) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        let mut file = OpenOptions::new().write(true).create_new(true).mode(mode).open(&temp)?;
        fill(&mut file)?;
        // The umask may have narrowed the mode open() gave.
        file.set_permissions(std::fs::Permissions::from_mode(mode))?;
        file.sync_all()
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&temp);
        return Err(InstallError { path: temp, action: "cannot write the temporary file", source: e });
    }
    if let Err(e) = std::fs::rename(&temp, path) {
        let _ = std::fs::remove_file(&temp);
        return Err(InstallError {
            path: path.to_owned(),
            action: "cannot rename the temporary file over it",
            source: e,
        });
    }
    File::open(dir).and_then(|d| d.sync_all()).map_err(fail(dir, "cannot sync the directory"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_conflist_is_the_documented_one() {
        let text = conflist_text(Path::new("/var/run/npagent/cni.sock")).expect("utf-8 path");
        let got: serde_json::Value = serde_json::from_str(&text).expect("json");
        let want = serde_json::json!({"cniVersion": "1.0.0", "name": "npagent", "plugins": [
            {"type": "npagent", "socket": "/var/run/npagent/cni.sock", "ipam": {"type": "host-local"}}]});
        assert_eq!(got, want);
        assert!(text.ends_with("}\n"), "{text:?}");
        assert!(text.find("cniVersion") < text.find("plugins"), "spec order: {text}");
    }

    #[test]
    fn a_socket_path_is_escaped_or_refused() {
        let text = conflist_text(Path::new("/run/a \"b\".sock")).expect("utf-8 path");
        let got: serde_json::Value = serde_json::from_str(&text).expect("json");
        assert_eq!(got["plugins"][0]["socket"], "/run/a \"b\".sock");
        use std::os::unix::ffi::OsStrExt;
        let bad = Path::new(std::ffi::OsStr::from_bytes(b"/run/\xff.sock"));
        assert_eq!(conflist_text(bad).expect_err("not utf-8").kind(), io::ErrorKind::InvalidInput);
    }
}
