//! A container image built by one of the repository's build scripts for one test, with a tag
//! no other run uses; mounted on demand (`podman image mount`), unmounted and removed by id on
//! drop. Needs root and podman.

use std::ffi::OsStr;
use std::path::PathBuf;
use std::process::Command;

use super::sandbox::{output, repo_path, run};

pub struct Image {
    pub id: String,
    mounted: bool,
}

impl Image {
    /// `<script> <args> --tag <unique tag>`; the script prints the image's id on stdout.
    pub fn build(script: &str, args: &[&OsStr]) -> Image {
        let nanos =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
        let name = script.rsplit('/').next().unwrap_or(script);
        let tag = format!("localhost/npagent-test-{name}:{}-{nanos}", std::process::id());
        let out = run(Command::new(repo_path(script)).args(args).args(["--tag", &tag]));
        let id = out.trim().strip_prefix("sha256:").unwrap_or(out.trim()).to_owned();
        assert!(id.len() == 64 && id.bytes().all(|b| b.is_ascii_hexdigit()), "{script} printed no image id: {out:?}");
        let image = Image { id, mounted: false };
        let tags = run(Command::new("podman").args(["image", "inspect", "--format", "{{json .RepoTags}}", &image.id]));
        assert!(tags.contains(&tag), "{tags}");
        image
    }

    /// `podman image mount`: the image's tree, read-only.
    pub fn mount(&mut self) -> PathBuf {
        let path = run(Command::new("podman").args(["image", "mount", &self.id]));
        self.mounted = true;
        PathBuf::from(path.trim())
    }

    /// The image's config, as podman shows it.
    pub fn config(&self) -> serde_json::Value {
        let text = run(Command::new("podman").args(["image", "inspect", "--format", "{{json .Config}}", &self.id]));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("image config {text}: {e}"))
    }
}

impl Drop for Image {
    fn drop(&mut self) {
        if self.mounted {
            let out = output(Command::new("podman").args(["image", "unmount", &self.id]));
            if !out.status.success() {
                eprintln!("podman image unmount {}: {}", self.id, String::from_utf8_lossy(&out.stderr));
            }
        }
        let out = output(Command::new("podman").args(["rmi", &self.id]));
        if !out.status.success() {
            eprintln!("podman rmi {}: {}", self.id, String::from_utf8_lossy(&out.stderr));
        }
    }
}
