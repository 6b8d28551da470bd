//! Waking the scanner: inotify events and which paths they make dirty.

use super::*;

/// What inotify reported since the last scan.
#[derive(Debug, Default)]
pub(super) struct Dirty {
    /// Paths named by events.
    pub(super) paths: Mutex<HashSet<PathBuf>>,
    /// Events were lost (queue overflow) or failed: look at everything.
    pub(super) everything: AtomicBool,
}

/// The files a scan after an inotify wake must look at, if looking at them alone is enough:
/// each path is a manifest file (or gone) where the full listing would find it. `None` when
/// a path may be a directory, a `..`-entry (a ConfigMap volume's `..data` switch changes the
/// files behind the links) or lies elsewhere: then the whole directory is scanned.
pub(super) fn targets(dir: &Path, dirty: &HashSet<PathBuf>) -> Option<Vec<PathBuf>> {
    if dirty.is_empty() {
        return None;
    }
    let mut out = Vec::new();
    'paths: for path in dirty {
        let rel = path.strip_prefix(dir).ok()?;
        let mut depth = 0usize;
        for c in rel.components() {
            let std::path::Component::Normal(name) = c else { return None };
            let name = name.to_string_lossy();
            if name.starts_with("..") {
                return None;
            }
            if name.starts_with('.') {
                continue 'paths; // the listing skips it
            }
            depth = depth.saturating_add(1);
        }
        if depth == 0 || depth > MAX_DEPTH.saturating_add(1) || !is_manifest(path) {
            return None;
        }
        if std::fs::metadata(path).is_ok_and(|m| m.is_dir()) {
            return None;
        }
        out.push(path.clone());
    }
    out.sort();
    Some(out)
}

pub(super) fn start_inotify(dir: &Path, wake: &Arc<Notify>, dirty: &Arc<Dirty>) -> Option<notify::RecommendedWatcher> {
    use notify::Watcher as _;
    let (wake, dirty) = (Arc::clone(wake), Arc::clone(dirty));
    let handler = move |res: notify::Result<notify::Event>| {
        if let Ok(event) = &res {
            if !matters(event) {
                return;
            }
        }
        match res {
            Ok(event) if !event.need_rescan() => {
                if let Ok(mut d) = dirty.paths.lock() {
                    d.extend(event.paths);
                }
            }
            // Lost or failed events: the next scan looks at everything.
            _ => dirty.everything.store(true, Ordering::Relaxed),
        }
        wake.notify_one();
    };
    let mut watcher = match notify::recommended_watcher(handler) {
        Ok(w) => w,
        Err(e) => {
            tracing::debug!("inotify unavailable, polling {}: {e}", dir.display());
            return None;
        }
    };
    match watcher.watch(dir, notify::RecursiveMode::Recursive) {
        Ok(()) => Some(watcher),
        Err(e) => {
            tracing::debug!("cannot watch {} with inotify yet, polling: {e}", dir.display());
            None
        }
    }
}

/// Whether an inotify event may change what DIR holds. Not: opening a file or directory
/// (inotify reports the scanner's own reads, which would wake it again and again), and
/// anything about entries the scan skips: dot-files such as the temporary file of an atomic
/// replace (so that the wake comes with the rename, not before it). `..`-entries do count:
/// a ConfigMap volume switches its `..data` link to update its files.
pub(super) fn matters(event: &notify::Event) -> bool {
    use notify::event::{AccessKind, EventKind};
    if matches!(event.kind, EventKind::Access(AccessKind::Open(_))) {
        return false;
    }
    let skipped = |p: &PathBuf| {
        p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with('.') && !n.starts_with(".."))
    };
    event.need_rescan() || event.paths.is_empty() || !event.paths.iter().all(skipped)
}
