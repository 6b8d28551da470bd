//! Sets `NPAGENT_GIT_COMMIT` for `--version` and the build_info metric: the commit's short
//! hash (12 digits), `-dirty` when the files the binary is built from differ from it,
//! `unknown` without git or a repository of its own (a source tarball).

use std::path::{Path, PathBuf};
use std::process::Command;

/// What the binary is built from: a change here may make the tree dirty.
const INPUTS: [&str; 5] = ["src", "proto", "Cargo.toml", "Cargo.lock", "build.rs"];

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    // Only this package's own repository: not one it happens to be unpacked in.
    let own_repo = git(&["rev-parse", "--show-toplevel"]).is_some_and(|top| {
        let here = std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from).and_then(|d| d.canonicalize().ok());
        PathBuf::from(top).canonicalize().ok() == here
    });
    let commit = if own_repo { git(&["rev-parse", "--short=12", "HEAD"]) } else { None };
    if let Some(commit) = &commit {
        watch_head();
        for input in INPUTS {
            println!("cargo:rerun-if-changed={input}");
        }
        let mut status = vec!["status", "--porcelain", "--untracked-files=no", "--"];
        status.extend(INPUTS);
        let dirty = git(&status).is_some_and(|s| !s.is_empty());
        println!("cargo:rustc-env=NPAGENT_GIT_COMMIT={commit}{}", if dirty { "-dirty" } else { "" });
    } else {
        println!("cargo:rustc-env=NPAGENT_GIT_COMMIT=unknown");
    }
}

/// Re-runs when HEAD moves: HEAD itself (a worktree has its own), the branch it points at,
/// and packed-refs (where the branch may live instead).
fn watch_head() {
    let dir = |arg: &str| git(&["rev-parse", "--path-format=absolute", arg]).map(PathBuf::from);
    let (Some(git_dir), Some(common)) = (dir("--git-dir"), dir("--git-common-dir")) else { return };
    watch(&git_dir.join("HEAD"));
    watch(&common.join("packed-refs"));
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watch(&common.join(branch));
    }
}

/// Only files that exist: cargo re-runs the script on every build for a missing one.
fn watch(path: &Path) {
    if path.exists() {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}
