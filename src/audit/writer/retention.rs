//! Retention of the backups, on a background thread so that the writer never waits for it:
//! those beyond `max_backups` or older than `max_age` are removed (with their chain
//! sidecars), the others gzipped.

use super::config::WriterConfig;
use crate::audit::log_files::{gz_name, list_backups, sidecar_path, Backup};
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::SystemTime;

/// The retention thread of one writer. One pass runs at a time; a pass asked for while one
/// runs (or that could not be started) is started by a later call.
#[derive(Debug, Default)]
pub(super) struct Retention {
    thread: Option<JoinHandle<()>>,
    wanted: bool,
    errors: Arc<AtomicU64>,
}

impl Retention {
    /// Asks for a pass over the backups of `cfg`'s log and starts it unless one is running.
    pub(super) fn request(&mut self, cfg: &WriterConfig) {
        self.wanted = true;
        self.start(cfg);
    }

    /// Starts the pass asked for earlier, if any, unless one is running.
    pub(super) fn resume(&mut self, cfg: &WriterConfig) {
        if self.wanted {
            self.start(cfg);
        }
    }

    /// Waits until no pass runs and none is waiting.
    pub(super) fn wait(&mut self, cfg: &WriterConfig) {
        loop {
            if let Some(h) = self.thread.take() {
                let _ = h.join();
            }
            if !self.wanted {
                return;
            }
            self.start(cfg);
        }
    }

    /// Backup removals or compressions that failed.
    pub(super) fn errors(&self) -> u64 {
        self.errors.load(Ordering::Relaxed)
    }

    fn start(&mut self, cfg: &WriterConfig) {
        if self.thread.as_ref().is_some_and(|h| !h.is_finished()) {
            self.wanted = true;
            return;
        }
        if let Some(h) = self.thread.take() {
            let _ = h.join();
        }
        self.wanted = false;
        let cfg = cfg.clone();
        let errors = Arc::clone(&self.errors);
        let spawned = std::thread::Builder::new().name("audit-log-rotate".into()).spawn(move || {
            let failures = mill(&cfg, SystemTime::now());
            if failures > 0 {
                errors.fetch_add(failures, Ordering::Relaxed);
            }
        });
        match spawned {
            Ok(h) => self.thread = Some(h),
            Err(_) => {
                self.errors.fetch_add(1, Ordering::Relaxed);
                self.wanted = true;
            }
        }
    }
}

/// Removes backups beyond the count or age limits and compresses the rest; returns the number
/// of operations that failed.
fn mill(cfg: &WriterConfig, now: SystemTime) -> u64 {
    let Ok(backups) = list_backups(&cfg.path) else { return 1 };
    let mut failures = 0;
    let cutoff = cfg.max_age.filter(|a| !a.is_zero()).and_then(|a| now.checked_sub(a));
    let mut kept = 0usize;
    let mut keep = Vec::new();
    for b in backups {
        // A plain backup and its gzipped twin (an interrupted compression) count as one.
        let twin = keep.last().is_some_and(|k: &Backup| k.time == b.time);
        let too_many = cfg.max_backups > 0 && !twin && kept >= cfg.max_backups;
        let too_old = cutoff.is_some_and(|c| b.time < c);
        if too_many || too_old {
            if fs::remove_file(&b.path).is_err() {
                failures += 1;
            }
            // Its chain sidecar, if any, goes with it: a pruned oldest file is no break.
            match fs::remove_file(sidecar_path(&b.path)) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => failures += 1,
                _ => {}
            }
            continue;
        }
        if !twin {
            kept += 1;
        }
        keep.push(b);
    }
    if cfg.compress {
        for b in keep.iter().filter(|b| !b.compressed) {
            if let Err(e) = compress(&b.path) {
                tracing::warn!(backup = %b.path.display(), error = %e, "cannot compress audit log backup");
                failures += 1;
            }
        }
    }
    failures
}

/// Gzips `path` to `path.gz` (through a temporary name) and removes `path`.
fn compress(path: &Path) -> io::Result<()> {
    let gz = gz_name(path);
    let mut tmp = gz.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let mut input = File::open(path)?;
    let output = OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&tmp)?;
    let mut enc = flate2::write::GzEncoder::new(io::BufWriter::new(output), flate2::Compression::default());
    io::copy(&mut input, &mut enc)?;
    let out = enc.finish()?;
    out.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    fs::rename(&tmp, &gz)?;
    fs::remove_file(path)
}
