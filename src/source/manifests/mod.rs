//! The manifests directory (`--manifests DIR`): Namespaces, Pods and NetworkPolicies from files.
//!
//! What is read: every `*.yaml`, `*.yml` and `*.json` file under DIR, recursively, in sorted
//! path order. Entries whose name starts with `.` are skipped, and symlinks are followed: a
//! ConfigMap mounted as a volume (files are symlinks into `..data/`) works as is, including its
//! atomic updates. See [`parse`] for the file format and what counts as invalid.
//!
//! Choices (all visible to an operator as [`Invalid`] reports, nothing is fatal):
//! - A malformed file (syntax error, unreadable) keeps the objects its last good version had, so
//!   a half-saved edit never lifts enforcement; a new malformed file contributes nothing.
//! - An invalid document of a known kind and name (e.g. a typo in one policy) keeps that
//!   object's last good version from the same file; the file's other objects are updated.
//! - The same object (kind, namespace, name) in several places: the last one in path order
//!   (and document order within a file) wins; the others are reported.
//! - If DIR itself cannot be listed, the last known objects stay.
//!
//! Write files atomically (write a temporary file, then rename it into place, as
//! `kubectl`-style tools and ConfigMap volumes do): a file caught half-written is parsed as
//! it is, and a cut that happens to fall between documents looks like a valid, shorter file
//! until the write completes.
//!
//! Watching: inotify (the `notify` crate) wakes the scanner at once, so a change is applied in
//! milliseconds (the manifest-to-flows target is 100 ms at p99, which polling alone
//! cannot meet). A stat-only poll every 250 ms backs it up for what inotify misses (queue
//! overflow, DIR created later or replaced, filesystems without inotify). A file is re-read
//! only when its (mtime, length) changed or inotify named it, and re-parsed only when its
//! content hash changed.

pub mod parse;

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, HashSet};
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use tokio::sync::{mpsc, Notify};

use super::{Kind, KubeObject, SourceEvent, Sourced};
use crate::model::ObjectRef;

const POLL_INTERVAL: Duration = Duration::from_millis(250);
/// Editors write a file in several steps; wait this long after an inotify event before reading.
const DEBOUNCE: Duration = Duration::from_millis(20);
/// Guards against symlink loops.
const MAX_DEPTH: usize = 16;

/// Input that could not be used: who (file, document, kind, object) and why.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Invalid {
    pub origin: String,
    pub error: String,
}

impl From<Invalid> for SourceEvent {
    fn from(i: Invalid) -> Self {
        SourceEvent::Invalid { origin: i.origin, error: i.error }
    }
}

/// Reads DIR once: the objects it holds (deduplicated, sorted by kind, namespace, name) and
/// everything that could not be used.
pub fn load_dir(dir: &Path) -> (Vec<Sourced<KubeObject>>, Vec<Invalid>) {
    let mut state = DirState::default();
    let invalid = state.rescan(dir, &HashSet::new());
    (state.merged.into_values().collect(), invalid)
}

/// Watches DIR and sends its objects to `tx`: first a [`SourceEvent::Reset`] of all kinds,
/// then [`SourceEvent::Applied`]/[`SourceEvent::Deleted`] for each object that changed, and
/// [`SourceEvent::Invalid`] for each problem found in a new or changed file. Returns when the
/// receiver is gone.
pub async fn watch_manifests(dir: PathBuf, tx: mpsc::Sender<SourceEvent>) {
    let wake = Arc::new(Notify::new());
    let dirty: Arc<Mutex<HashSet<PathBuf>>> = Arc::default();
    let mut watcher = start_inotify(&dir, &wake, &dirty);

    let mut state = DirState::default();
    let mut first = true;
    let mut ticks: u32 = 0;
    loop {
        let force = dirty.lock().map(|mut d| std::mem::take(&mut *d)).unwrap_or_default();
        // The scan rebuilds `merged` only when a file changed: keep a copy to diff against.
        let prev = state.merged.clone();
        let scan_dir = dir.clone();
        let scanned = tokio::task::spawn_blocking(move || {
            let mut state = state;
            let invalid = state.rescan(&scan_dir, &force);
            (state, invalid)
        })
        .await;
        let (new_state, invalid) = match scanned {
            Ok(r) => r,
            Err(e) => {
                tracing::error!("manifest scanner task failed: {e}");
                return;
            }
        };
        state = new_state;
        let mut events = Vec::new();
        if first {
            first = false;
            let objects = state.merged.values().cloned().collect();
            events.push(SourceEvent::Reset { kinds: Kind::ALL.to_vec(), objects });
        } else {
            events.extend(diff(&prev, &state.merged));
        }
        // Consumers report invalid input (once, where it is used).
        events.extend(invalid.into_iter().map(SourceEvent::from));
        for ev in events {
            if tx.send(ev).await.is_err() {
                return;
            }
        }

        tokio::select! {
            _ = wake.notified() => tokio::time::sleep(DEBOUNCE).await,
            _ = tokio::time::sleep(POLL_INTERVAL) => {}
            _ = tx.closed() => return,
        }
        ticks = ticks.wrapping_add(1);
        if watcher.is_none() && ticks % 8 == 0 {
            watcher = start_inotify(&dir, &wake, &dirty);
        }
    }
}

/// The Applied/Deleted events that turn `old` into `new`.
fn diff(
    old: &BTreeMap<(Kind, ObjectRef), Sourced<KubeObject>>,
    new: &BTreeMap<(Kind, ObjectRef), Sourced<KubeObject>>,
) -> Vec<SourceEvent> {
    let mut events = Vec::new();
    for (key, _) in old.iter().filter(|(k, _)| !new.contains_key(*k)) {
        events.push(SourceEvent::Deleted { kind: key.0, object: key.1.clone() });
    }
    for (key, obj) in new {
        if old.get(key) != Some(obj) {
            events.push(SourceEvent::Applied(obj.clone()));
        }
    }
    events
}

fn start_inotify(
    dir: &Path,
    wake: &Arc<Notify>,
    dirty: &Arc<Mutex<HashSet<PathBuf>>>,
) -> Option<notify::RecommendedWatcher> {
    use notify::Watcher as _;
    let (wake, dirty) = (Arc::clone(wake), Arc::clone(dirty));
    let handler = move |res: notify::Result<notify::Event>| {
        if let Ok(event) = res {
            if let Ok(mut d) = dirty.lock() {
                d.extend(event.paths);
            }
        }
        // On errors too: the rescan finds whatever changed.
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

/// What changes of a file's metadata say it may have changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    mtime: Option<SystemTime>,
    len: u64,
}

#[derive(Debug)]
struct FileState {
    stamp: Stamp,
    /// Content hash of the version last read (`None` if unreadable).
    hash: Option<u64>,
    /// The objects in effect for this file (last good versions where it is broken).
    objects: Vec<Sourced<KubeObject>>,
}

#[derive(Debug, Default)]
struct DirState {
    files: BTreeMap<PathBuf, FileState>,
    merged: BTreeMap<(Kind, ObjectRef), Sourced<KubeObject>>,
    /// Duplicate reports already made (so each is made once).
    duplicates: HashSet<Invalid>,
    /// Last error listing DIR (reported when it changes).
    list_error: Option<String>,
}

impl DirState {
    /// Brings the state up to date with DIR; returns the new problems. `force` names paths
    /// to re-read even when their metadata did not change.
    fn rescan(&mut self, dir: &Path, force: &HashSet<PathBuf>) -> Vec<Invalid> {
        let mut invalid = Vec::new();
        let mut found = Vec::new();
        if let Err(e) = list_files(dir, 0, &mut found) {
            let msg = format!("cannot read the manifests directory: {e}; keeping the last known objects");
            if self.list_error.as_ref() != Some(&msg) {
                invalid.push(Invalid { origin: dir.display().to_string(), error: msg.clone() });
                self.list_error = Some(msg);
            }
            return invalid;
        }
        self.list_error = None;
        found.sort();
        let present: HashSet<&PathBuf> = found.iter().collect();
        let before = self.files.len();
        self.files.retain(|p, _| present.contains(p));
        let mut changed = self.files.len() != before;

        for path in &found {
            let stamp = match std::fs::metadata(path) {
                Ok(m) => Stamp { mtime: m.modified().ok(), len: m.len() },
                Err(_) => continue, // vanished since the listing: next scan removes it
            };
            let known = self.files.get(path);
            if known.is_some_and(|f| f.stamp == stamp) && !force.contains(path) {
                continue;
            }
            let file = path.display().to_string();
            let previous = self.files.remove(path);
            let (hash, objects) = match std::fs::read(path) {
                Err(e) => {
                    invalid.push(Invalid { origin: file, error: format!("cannot read: {e}") });
                    (None, previous.map(|p| p.objects).unwrap_or_default())
                }
                Ok(bytes) => {
                    let hash = content_hash(&bytes);
                    match previous {
                        Some(p) if p.hash == Some(hash) => (Some(hash), p.objects),
                        previous => {
                            changed = true;
                            let old = previous.map(|p| p.objects).unwrap_or_default();
                            (Some(hash), self::reparse(&file, path, &bytes, old, &mut invalid))
                        }
                    }
                }
            };
            self.files.insert(path.clone(), FileState { stamp, hash, objects });
        }
        if changed {
            self.merge(&mut invalid);
        }
        invalid
    }

    fn merge(&mut self, invalid: &mut Vec<Invalid>) {
        let mut merged: BTreeMap<(Kind, ObjectRef), Sourced<KubeObject>> = BTreeMap::new();
        let mut duplicates = HashSet::new();
        for obj in self.files.values().flat_map(|f| f.objects.iter()) {
            if let Some(shadowed) = merged.insert(obj.object.key(), obj.clone()) {
                duplicates.insert(Invalid {
                    origin: shadowed.origin,
                    error: format!("defined again in {}, which wins", obj.origin),
                });
            }
        }
        invalid.extend(duplicates.iter().filter(|d| !self.duplicates.contains(*d)).cloned());
        self.duplicates = duplicates;
        self.merged = merged;
    }
}

/// Parses a changed file. Broken documents and malformed files keep last good objects.
fn reparse(
    file: &str,
    path: &Path,
    bytes: &[u8],
    old: Vec<Sourced<KubeObject>>,
    invalid: &mut Vec<Invalid>,
) -> Vec<Sourced<KubeObject>> {
    let Ok(text) = std::str::from_utf8(bytes) else {
        invalid.push(Invalid { origin: file.to_string(), error: "not UTF-8 text".into() });
        return old;
    };
    let json = path.extension().is_some_and(|e| e.eq_ignore_ascii_case("json"));
    let mut parsed = parse::parse_file(file, text, json);
    invalid.append(&mut parsed.invalid);
    let Some(mut objects) = parsed.objects else {
        if !old.is_empty() {
            if let Some(last) = invalid.last_mut() {
                last.error.push_str(&format!("; keeping its last good {} object(s)", old.len()));
            }
        }
        return old;
    };
    let present: HashSet<(Kind, ObjectRef)> = objects.iter().map(|o| o.object.key()).collect();
    for keep in old.into_iter().filter(|o| {
        let key = o.object.key();
        parsed.broken.contains(&key) && !present.contains(&key)
    }) {
        objects.push(keep);
    }
    objects
}

fn content_hash(bytes: &[u8]) -> u64 {
    let mut h = DefaultHasher::new();
    bytes.hash(&mut h);
    h.finish()
}

fn is_manifest(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| ["yaml", "yml", "json"].iter().any(|x| e.eq_ignore_ascii_case(x)))
}

/// Collects manifest files under `dir` (following symlinks, skipping dot-entries).
fn list_files(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let Ok(entry) = entry else { continue };
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        let path = entry.path();
        let Ok(meta) = std::fs::metadata(&path) else { continue }; // dangling symlink
        if meta.is_dir() {
            if depth < MAX_DEPTH {
                // An unreadable subdirectory is skipped, not fatal for the rest.
                if let Err(e) = list_files(&path, depth.saturating_add(1), out) {
                    tracing::warn!("skipping {}: {e}", path.display());
                }
            }
        } else if meta.is_file() && is_manifest(&path) {
            out.push(path);
        }
    }
    Ok(())
}
