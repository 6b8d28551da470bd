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
//! - Bounded inputs: a file larger than [`MAX_FILE_BYTES`] is refused as a whole, and so is
//!   a YAML file whose aliases expand far beyond its size (a "billion laughs" file): both
//!   count as malformed files, named in the report.
//!
//! Write files atomically (write a temporary file, then rename it into place, as
//! `kubectl`-style tools and ConfigMap volumes do): a file caught half-written is parsed as
//! it is, and a cut that happens to fall between documents looks like a valid, shorter file
//! until the write completes.
//!
//! Watching: inotify (the `notify` crate) wakes the scanner at once, so a change is applied in
//! milliseconds (the manifest-to-flows target in docs/BENCHMARKS.md is 100 ms at p99, which
//! polling alone cannot meet). A stat-only poll every 250 ms backs it up for what inotify misses (queue
//! overflow, DIR created later or replaced, filesystems without inotify). A file is re-read
//! only when its (mtime, length) changed or inotify named it, and re-parsed only when its
//! content hash changed.

//!
//! Memory: the watcher does not keep the objects it has delivered. Per object it keeps its
//! identity, a hash of its content and origin, and where in its file it was defined (a few
//! hundred bytes, where a parsed Pod takes several KiB); only the objects of the files that
//! changed are parsed, and the changes are worked out from the hashes. An object whose winning
//! definition lies in a file that did not change (a duplicate that takes over) is read again
//! from that file. The one case that cannot be served that way is reported: the takeover by
//! a kept last good version of a now broken document (see [`Invalid`] reports). The first
//! scan parses about 1 MiB of files at a time and sends their objects on as a
//! [`SourceEvent::ResetChunk`] before it parses more, so that a large directory's objects never
//! exist all at once.

mod bounded;
pub mod parse;

use std::collections::hash_map::{DefaultHasher, Entry as MapEntry};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use tokio::sync::{mpsc, Notify};

use super::{Kind, KubeObject, SourceEvent, Sourced};
use crate::model::ObjectRef;

const POLL_INTERVAL: Duration = Duration::from_millis(250);
/// Editors write a file in several steps; wait this long after an inotify event before reading.
const DEBOUNCE: Duration = Duration::from_millis(20);
/// The first scan parses and hands on the objects of about this many bytes of files at a time.
const BATCH_BYTES: u64 = 1 << 20;
/// Guards against symlink loops.
const MAX_DEPTH: usize = 16;
/// The largest manifest file read: a larger one is refused (its last good objects, if any,
/// stay), so that one file cannot exhaust the agent's memory.
pub const MAX_FILE_BYTES: u64 = 16 << 20;

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
    let scan = DirState::default().rescan(dir, &HashSet::new());
    (scan.applied, scan.invalid)
}

/// Watches DIR and sends its objects to `tx`: first a listing of all kinds (the objects in
/// [`SourceEvent::ResetChunk`]s, a batch of files at a time as they are parsed, closed by a
/// [`SourceEvent::Reset`]), then [`SourceEvent::Applied`]/[`SourceEvent::Deleted`] for each
/// object that changed, and [`SourceEvent::Invalid`] for each problem found in a new or changed
/// file. Returns when the receiver is gone.
pub async fn watch_manifests(dir: PathBuf, tx: mpsc::Sender<SourceEvent>) {
    let wake = Arc::new(Notify::new());
    let dirty = Arc::new(Dirty::default());
    let mut watcher = start_inotify(&dir, &wake, &dirty);

    let mut state = DirState::default();
    let mut first = true;
    // The first scan and every poll look at the whole directory; an inotify wake only at the
    // files inotify named, when that is enough (see `targets`).
    let mut full = true;
    let mut ticks: u32 = 0;
    loop {
        let force = dirty.paths.lock().map(|mut d| std::mem::take(&mut *d)).unwrap_or_default();
        let full_needed = dirty.everything.swap(false, Ordering::Relaxed);
        let only = if full || full_needed { None } else { targets(&dir, &force) };
        let scan_dir = dir.clone();
        let initial = first;
        let chunk_tx = tx.clone();
        let scanned = tokio::task::spawn_blocking(move || {
            let mut state = state;
            let started = std::time::Instant::now();
            let scan = if initial {
                // The listing's earlier parts go out from here, as each batch is parsed.
                let mut chunks = 0usize;
                let last = state.rescan_in_batches(&scan_dir, |scan| {
                    chunks = chunks.saturating_add(1);
                    let objects = scan.applied;
                    let chunk = SourceEvent::ResetChunk { kinds: Kind::ALL.to_vec(), objects };
                    std::iter::once(chunk)
                        .chain(scan.invalid.into_iter().map(SourceEvent::from))
                        .all(|ev| chunk_tx.blocking_send(ev).is_ok())
                });
                tracing::debug!(
                    "manifests: first scan of {} files in {} parts in {:?}",
                    state.files.len(),
                    chunks.saturating_add(1),
                    started.elapsed()
                );
                last
            } else {
                Some(match &only {
                    Some(paths) => state.rescan_paths(paths),
                    None => state.rescan(&scan_dir, &force),
                })
            };
            if let Some(scan) = scan.as_ref().filter(|s| !(s.applied.is_empty() && s.deleted.is_empty() && s.invalid.is_empty())) {
                tracing::debug!(
                    "manifests: {} of {} files looked at, {} parsed: {} applied, {} deleted, {} problems in {:?}",
                    only.as_ref().map_or(state.files.len(), Vec::len),
                    state.files.len(),
                    scan.parsed,
                    scan.applied.len(),
                    scan.deleted.len(),
                    scan.invalid.len(),
                    started.elapsed()
                );
            }
            (state, scan)
        })
        .await;
        let scan = match scanned {
            Ok((new_state, Some(scan))) => {
                state = new_state;
                scan
            }
            // The receiver is gone.
            Ok((_, None)) => return,
            Err(e) => {
                tracing::error!("manifest scanner task failed: {e}");
                return;
            }
        };
        let mut events = Vec::new();
        if first {
            first = false;
            events.push(SourceEvent::Reset { kinds: Kind::ALL.to_vec(), objects: scan.applied });
        } else {
            events.extend(scan.deleted.into_iter().map(|(kind, object)| SourceEvent::Deleted { kind, object }));
            events.extend(scan.applied.into_iter().map(SourceEvent::Applied));
        }
        // Consumers report invalid input (once, where it is used).
        events.extend(scan.invalid.into_iter().map(SourceEvent::from));
        for ev in events {
            if tx.send(ev).await.is_err() {
                return;
            }
        }

        full = tokio::select! {
            _ = wake.notified() => {
                tokio::time::sleep(DEBOUNCE).await;
                false
            }
            _ = tokio::time::sleep(POLL_INTERVAL) => true,
            _ = tx.closed() => return,
        };
        ticks = ticks.wrapping_add(1);
        if watcher.is_none() && ticks % 8 == 0 {
            watcher = start_inotify(&dir, &wake, &dirty);
        }
    }
}

/// What inotify reported since the last scan.
#[derive(Debug, Default)]
struct Dirty {
    /// Paths named by events.
    paths: Mutex<HashSet<PathBuf>>,
    /// Events were lost (queue overflow) or failed: look at everything.
    everything: AtomicBool,
}

/// The files a scan after an inotify wake must look at, if looking at them alone is enough:
/// each path is a manifest file (or gone) where the full listing would find it. `None` when
/// a path may be a directory, a `..`-entry (a ConfigMap volume's `..data` switch changes the
/// files behind the links) or lies elsewhere: then the whole directory is scanned.
fn targets(dir: &Path, dirty: &HashSet<PathBuf>) -> Option<Vec<PathBuf>> {
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

fn start_inotify(dir: &Path, wake: &Arc<Notify>, dirty: &Arc<Dirty>) -> Option<notify::RecommendedWatcher> {
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
fn matters(event: &notify::Event) -> bool {
    use notify::event::{AccessKind, EventKind};
    if matches!(event.kind, EventKind::Access(AccessKind::Open(_))) {
        return false;
    }
    let skipped = |p: &PathBuf| {
        p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with('.') && !n.starts_with(".."))
    };
    event.need_rescan() || event.paths.is_empty() || !event.paths.iter().all(skipped)
}

type Key = (Kind, ObjectRef);

/// What changes of a file's metadata say it may have changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    mtime: Option<SystemTime>,
    len: u64,
}

impl Stamp {
    fn of(m: &std::fs::Metadata) -> Stamp {
        Stamp { mtime: m.modified().ok(), len: m.len() }
    }
}

/// Where in its file an object is defined: document number and, for an item of a `List`,
/// the item number (both from 1; item 0 = not a list item), as in origins (`file#2.3`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct DocPos {
    doc: u32,
    item: u32,
}

/// One object definition in a file: who, which content, where.
#[derive(Debug)]
struct Def {
    key: Key,
    /// Hash of the origin and the content (see [`object_hash`]).
    hash: u64,
    pos: DocPos,
}

#[derive(Debug)]
struct FileState {
    stamp: Stamp,
    /// Content hash of the version last read (`None` if unreadable).
    hash: Option<u64>,
    /// The definitions in effect for this file (last good versions where it is broken), in
    /// file order.
    defs: Vec<Def>,
}

/// What the consumer holds of an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Held {
    Nothing,
    /// The version with this hash.
    Version(u64),
    /// A version that is not the winning definition's (which could not be delivered).
    Other,
}

#[derive(Debug)]
struct KeyState {
    /// Number of definitions (several = duplicates).
    defs: u32,
    held: Held,
}

#[derive(Debug, Default)]
struct DirState {
    files: BTreeMap<PathBuf, FileState>,
    keys: HashMap<Key, KeyState>,
    /// Duplicate reports in force per object (each is made once).
    duplicates: HashMap<Key, Vec<Invalid>>,
    /// Last error listing DIR (reported when it changes).
    list_error: Option<String>,
}

/// The outcome of a scan: what the consumer must apply, sorted by kind, namespace, name.
#[derive(Debug, Default)]
struct Scan {
    deleted: Vec<Key>,
    applied: Vec<Sourced<KubeObject>>,
    invalid: Vec<Invalid>,
    /// Files parsed.
    parsed: usize,
}

/// A file read and parsed in this scan: the objects of its definitions (`None` for the last
/// good versions it keeps).
struct Parsed {
    path: PathBuf,
    objects: Vec<Option<Sourced<KubeObject>>>,
}

impl DirState {
    /// Brings the state up to date with DIR; returns the changes and the new problems.
    /// `force` names paths to re-read even when their metadata did not change.
    fn rescan(&mut self, dir: &Path, force: &HashSet<PathBuf>) -> Scan {
        let mut found = Vec::new();
        if let Err(e) = list_files(dir, 0, &mut found) {
            let mut scan = Scan::default();
            let msg = format!("cannot read the manifests directory: {e}; keeping the last known objects");
            if self.list_error.as_ref() != Some(&msg) {
                scan.invalid.push(Invalid { origin: dir.display().to_string(), error: msg.clone() });
                self.list_error = Some(msg);
            }
            return scan;
        }
        self.list_error = None;
        found.sort_by(|a, b| a.0.cmp(&b.0));
        let removed: Vec<PathBuf> =
            self.files.keys().filter(|p| found.binary_search_by(|(f, _)| f.cmp(p)).is_err()).cloned().collect();
        self.update(found, removed, force)
    }

    /// [`Self::rescan`] in batches of files of about [`BATCH_BYTES`], so that the objects of a
    /// large directory are never all parsed at once: each batch's outcome but the last goes to
    /// `emit` as soon as it is known (`emit` returns false to stop: then `None`); the last is
    /// returned (it also deletes what is gone from DIR).
    fn rescan_in_batches(&mut self, dir: &Path, mut emit: impl FnMut(Scan) -> bool) -> Option<Scan> {
        let mut found = Vec::new();
        if list_files(dir, 0, &mut found).is_err() {
            // Reported (once) by the plain rescan.
            return Some(self.rescan(dir, &HashSet::new()));
        }
        found.sort_by(|a, b| a.0.cmp(&b.0));
        let removed: Vec<PathBuf> =
            self.files.keys().filter(|p| found.binary_search_by(|(f, _)| f.cmp(p)).is_err()).cloned().collect();
        let mut batches: Vec<Vec<(PathBuf, Stamp)>> = Vec::new();
        let mut bytes = u64::MAX;
        for file in found {
            if bytes >= BATCH_BYTES {
                batches.push(Vec::new());
                bytes = 0;
            }
            bytes = bytes.saturating_add(file.1.len);
            if let Some(batch) = batches.last_mut() {
                batch.push(file);
            }
        }
        let last = batches.pop().unwrap_or_default();
        for batch in batches {
            if !emit(self.update(batch, Vec::new(), &HashSet::new())) {
                return None;
            }
        }
        self.list_error = None;
        Some(self.update(last, removed, &HashSet::new()))
    }

    /// Brings the state up to date with these files alone (named by inotify, see [`targets`]),
    /// re-reading each that exists.
    fn rescan_paths(&mut self, paths: &[PathBuf]) -> Scan {
        let mut found = Vec::new();
        let mut removed = Vec::new();
        for path in paths {
            match std::fs::metadata(path) {
                Ok(m) if m.is_file() => found.push((path.clone(), Stamp::of(&m))),
                _ if self.files.contains_key(path) => removed.push(path.clone()),
                _ => {}
            }
        }
        let force = paths.iter().cloned().collect();
        self.update(found, removed, &force)
    }

    /// Applies what a scan found: `found` (sorted, with their metadata) may have changed,
    /// `removed` are gone.
    fn update(&mut self, found: Vec<(PathBuf, Stamp)>, removed: Vec<PathBuf>, force: &HashSet<PathBuf>) -> Scan {
        let mut scan = Scan::default();
        // Definitions that went away (with removed files, or from changed files) and keys
        // with several definitions before or after: the keys whose winner may have changed.
        let mut gone: Vec<Key> = Vec::new();
        let mut multi: HashSet<Key> = HashSet::new();
        for path in removed {
            if let Some(old) = self.files.remove(&path) {
                self.forget(old.defs, &mut gone, &mut multi);
            }
        }

        // Files whose metadata changed (or that inotify named): read, and parse where the
        // content changed, in parallel when there are many (the first scan).
        let todo: Vec<(PathBuf, Stamp, Option<u64>)> = found
            .into_iter()
            .filter_map(|(path, stamp)| {
                let known = self.files.get(&path);
                if known.is_some_and(|f| f.stamp == stamp) && !force.contains(&path) {
                    return None;
                }
                let hash = known.and_then(|f| f.hash);
                Some((path, stamp, hash))
            })
            .collect();
        let loaded = load_all(&todo);

        let mut parsed: Vec<Parsed> = Vec::new();
        for ((path, stamp, _), loaded) in todo.into_iter().zip(loaded) {
            let file = path.display().to_string();
            let previous = self.files.remove(&path);
            let (hash, defs, objects) = match loaded {
                Loaded::Failed(mut error) => {
                    let (hash, defs) = previous.map(|p| (p.hash, p.defs)).unwrap_or_default();
                    if !defs.is_empty() {
                        error.push_str(&format!("; keeping its last good {} object(s)", defs.len()));
                    }
                    scan.invalid.push(Invalid { origin: file, error });
                    // Unchanged definitions: put back as they were.
                    self.files.insert(path, FileState { stamp, hash, defs });
                    continue;
                }
                Loaded::Unchanged => {
                    let (hash, defs) = previous.map(|p| (p.hash, p.defs)).unwrap_or_default();
                    self.files.insert(path, FileState { stamp, hash, defs });
                    continue;
                }
                Loaded::Changed { hash, fresh } => {
                    let old = previous.map(|p| p.defs).unwrap_or_default();
                    let (defs, objects, forgotten) = merge_parse(&file, fresh, old, &mut scan.invalid);
                    self.forget(forgotten, &mut gone, &mut multi);
                    (Some(hash), defs, objects)
                }
            };
            for def in &defs {
                self.define(def, &mut multi);
            }
            self.files.insert(path.clone(), FileState { stamp, hash, defs });
            parsed.push(Parsed { path, objects });
            scan.parsed = scan.parsed.saturating_add(1);
        }

        // Keys defined several times (rare): settle them first, so that below each parsed
        // file's objects can be handed on and freed file by file.
        if !multi.is_empty() {
            self.settle_duplicates(&multi, &mut parsed, &mut scan);
        }
        for key in gone {
            if multi.contains(&key) {
                continue;
            }
            if let MapEntry::Occupied(e) = self.keys.entry(key) {
                if e.get().defs == 0 {
                    let (key, st) = e.remove_entry();
                    if st.held != Held::Nothing {
                        scan.deleted.push(key);
                    }
                }
            }
        }
        // Every other definition in a parsed file is the only one of its key.
        for p in parsed {
            let Some(file) = self.files.get(&p.path) else { continue };
            for (def, object) in file.defs.iter().zip(p.objects) {
                if multi.contains(&def.key) {
                    continue;
                }
                let Some(st) = self.keys.get_mut(&def.key) else { continue };
                if st.held == Held::Version(def.hash) {
                    continue;
                }
                match object {
                    Some(object) => {
                        st.held = Held::Version(def.hash);
                        scan.applied.push(object);
                    }
                    // A kept last good version that the consumer does not hold.
                    None => {
                        if let Some(object) = fetch(&p.path, def, &mut scan.invalid) {
                            st.held = Held::Version(def.hash);
                            scan.applied.push(object);
                        } else if st.held != Held::Nothing {
                            st.held = Held::Other;
                        }
                    }
                }
            }
        }
        scan.deleted.sort_unstable();
        // Cached keys: the objects are large, so they are moved once each, not at every
        // comparison step.
        scan.applied.sort_by_cached_key(|o| o.object.key());
        scan
    }

    /// Counts a new definition.
    fn define(&mut self, def: &Def, multi: &mut HashSet<Key>) {
        let st = self.keys.entry(def.key.clone()).or_insert(KeyState { defs: 0, held: Held::Nothing });
        st.defs = st.defs.saturating_add(1);
        if st.defs > 1 {
            multi.insert(def.key.clone());
        }
    }

    /// Uncounts definitions that are gone.
    fn forget(&mut self, defs: Vec<Def>, gone: &mut Vec<Key>, multi: &mut HashSet<Key>) {
        for def in defs {
            if let Some(st) = self.keys.get_mut(&def.key) {
                if st.defs > 1 {
                    multi.insert(def.key.clone());
                }
                st.defs = st.defs.saturating_sub(1);
            }
            gone.push(def.key);
        }
    }

    /// For keys with several definitions before or after this scan: the last one in path
    /// (and document) order wins, the others are reported once.
    fn settle_duplicates(&mut self, multi: &HashSet<Key>, parsed: &mut [Parsed], scan: &mut Scan) {
        // Every definition of those keys, in path and document order.
        let mut all: HashMap<&Key, Vec<(&PathBuf, usize)>> = HashMap::new();
        for (path, file) in &self.files {
            for (i, def) in file.defs.iter().enumerate() {
                if multi.contains(&def.key) {
                    all.entry(&def.key).or_default().push((path, i));
                }
            }
        }
        // Per key: the winning definition (file, index), if any, and the duplicate reports.
        type Outcome = (Key, Option<(PathBuf, usize)>, Vec<Invalid>);
        let mut outcome: Vec<Outcome> = Vec::new();
        for key in multi {
            let defs = all.get(key).map(Vec::as_slice).unwrap_or_default();
            let origins: Vec<String> = defs
                .iter()
                .filter_map(|(path, i)| self.files.get(*path).and_then(|f| f.defs.get(*i)).map(|d| origin(path, d)))
                .collect();
            let reports = origins
                .windows(2)
                .map(|w| Invalid { origin: w[0].clone(), error: format!("defined again in {}, which wins", w[1]) })
                .collect();
            let winner = defs.last().map(|(path, i)| ((*path).clone(), *i));
            outcome.push((key.clone(), winner, reports));
        }
        drop(all);
        outcome.sort_by(|a, b| a.0.cmp(&b.0));
        for (key, winner, reports) in outcome {
            let before = self.duplicates.remove(&key).unwrap_or_default();
            scan.invalid.extend(reports.iter().filter(|r| !before.contains(r)).cloned());
            if !reports.is_empty() {
                self.duplicates.insert(key.clone(), reports);
            }
            let Some((path, i)) = winner else {
                if let Some(st) = self.keys.remove(&key) {
                    if st.held != Held::Nothing {
                        scan.deleted.push(key);
                    }
                }
                continue;
            };
            let Some(def) = self.files.get(&path).and_then(|f| f.defs.get(i)) else { continue };
            let Some(st) = self.keys.get_mut(&key) else { continue };
            if st.held == Held::Version(def.hash) {
                continue;
            }
            let here = parsed.iter_mut().find(|p| p.path == path).and_then(|p| p.objects.get_mut(i)).and_then(Option::take);
            match here.or_else(|| fetch(&path, def, &mut scan.invalid)) {
                Some(object) => {
                    st.held = Held::Version(def.hash);
                    scan.applied.push(object);
                }
                None => {
                    if st.held != Held::Nothing {
                        st.held = Held::Other;
                    }
                }
            }
        }
    }
}

/// A file read (and parsed if its content changed), before it is merged into the state.
enum Loaded {
    Failed(String),
    /// The content is the one last read.
    Unchanged,
    Changed { hash: u64, fresh: Fresh },
}

/// One file's parse (`None`: not UTF-8) and the definitions of its objects.
struct Fresh {
    parse: Option<parse::FileParse>,
    defs: Vec<Def>,
}

/// [`load`]s each file: on several threads when there are many.
fn load_all(todo: &[(PathBuf, Stamp, Option<u64>)]) -> Vec<Loaded> {
    const PARALLEL_FROM: usize = 8;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(4);
    if todo.len() < PARALLEL_FROM || threads < 2 {
        return todo.iter().map(|(path, _, hash)| load(path, *hash)).collect();
    }
    let chunk = todo.len().div_ceil(threads);
    std::thread::scope(|s| {
        let workers: Vec<_> = todo
            .chunks(chunk)
            .map(|part| (part.len(), s.spawn(move || part.iter().map(|(path, _, hash)| load(path, *hash)).collect::<Vec<_>>())))
            .collect();
        let mut out = Vec::with_capacity(todo.len());
        for (len, worker) in workers {
            match worker.join() {
                Ok(loaded) => out.extend(loaded),
                // Parsing does not panic; should it, those files count as unreadable.
                Err(_) => out.extend((0..len).map(|_| Loaded::Failed("cannot read: the parser failed".into()))),
            }
        }
        out
    })
}

/// Reads a whole manifest file, refusing one larger than [`MAX_FILE_BYTES`] (checked on what
/// is read, not on the size the metadata claims, so a file growing meanwhile is caught too).
fn read_manifest(path: &Path) -> Result<Vec<u8>, String> {
    use std::io::Read as _;
    let file = std::fs::File::open(path).map_err(|e| format!("cannot read: {e}"))?;
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES.saturating_add(1)).read_to_end(&mut bytes).map_err(|e| format!("cannot read: {e}"))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(format!(
            "refused: larger than {} MiB, the limit for a manifest file",
            MAX_FILE_BYTES >> 20
        ));
    }
    Ok(bytes)
}

/// Reads a file; parses it unless its content hash is `previous`.
fn load(path: &Path, previous: Option<u64>) -> Loaded {
    let bytes = match read_manifest(path) {
        Ok(b) => b,
        Err(e) => return Loaded::Failed(e),
    };
    let hash = content_hash(&bytes);
    if previous == Some(hash) {
        return Loaded::Unchanged;
    }
    let Ok(text) = std::str::from_utf8(&bytes) else {
        return Loaded::Changed { hash, fresh: Fresh { parse: None, defs: Vec::new() } };
    };
    let file = path.display().to_string();
    let json = path.extension().is_some_and(|e| e.eq_ignore_ascii_case("json"));
    let parse = parse::parse_file(&file, text, json);
    let defs = parse
        .objects
        .iter()
        .flatten()
        .map(|o| Def { key: o.object.key(), hash: object_hash(o), pos: doc_pos(&file, &o.origin) })
        .collect();
    Loaded::Changed { hash, fresh: Fresh { parse: Some(parse), defs } }
}

/// Merges a changed file's parse with its old definitions: broken documents and malformed
/// files keep their last good definitions. Returns the file's definitions, their objects
/// (`None` where kept) and the old definitions that are gone.
fn merge_parse(
    file: &str,
    fresh: Fresh,
    old: Vec<Def>,
    invalid: &mut Vec<Invalid>,
) -> (Vec<Def>, Vec<Option<Sourced<KubeObject>>>, Vec<Def>) {
    let keep_all = |old: Vec<Def>| {
        let none = old.iter().map(|_| None).collect();
        (old, none, Vec::new())
    };
    let Some(mut parsed) = fresh.parse else {
        invalid.push(Invalid { origin: file.to_string(), error: "not UTF-8 text".into() });
        return keep_all(old);
    };
    invalid.append(&mut parsed.invalid);
    let Some(objects) = parsed.objects else {
        if !old.is_empty() {
            if let Some(last) = invalid.last_mut() {
                last.error.push_str(&format!("; keeping its last good {} object(s)", old.len()));
            }
        }
        return keep_all(old);
    };
    let mut defs = fresh.defs;
    let mut out: Vec<Option<Sourced<KubeObject>>> = objects.into_iter().map(Some).collect();
    let present: HashSet<&Key> = defs.iter().map(|d| &d.key).collect();
    let (kept, forgotten): (Vec<Def>, Vec<Def>) =
        old.into_iter().partition(|d| parsed.broken.contains(&d.key) && !present.contains(&d.key));
    drop(present);
    for d in kept {
        defs.push(d);
        out.push(None);
    }
    (defs, out, forgotten)
}

/// Reads a definition again from its file (which did not change in this scan, or keeps it as
/// its last good version). Reports when that is not possible.
fn fetch(path: &Path, def: &Def, invalid: &mut Vec<Invalid>) -> Option<Sourced<KubeObject>> {
    let file = path.display().to_string();
    let found = read_manifest(path).ok().and_then(|bytes| {
        let text = std::str::from_utf8(&bytes).ok()?;
        let json = path.extension().is_some_and(|e| e.eq_ignore_ascii_case("json"));
        let wanted = origin(path, def);
        parse::parse_file(&file, text, json).objects?.into_iter().find(|o| o.origin == wanted && object_hash(o) == def.hash)
    });
    if found.is_none() {
        invalid.push(Invalid {
            origin: origin(path, def),
            error: "now in effect, but it is the last good version of a broken document, which is not \
                    kept in memory; the version applied before stays until the file is fixed"
                .into(),
        });
    }
    found
}

/// The origin of a definition, as [`parse::parse_file`] writes it.
fn origin(path: &Path, def: &Def) -> String {
    let (kind, r) = &def.key;
    let item = if def.pos.item > 0 { format!(".{}", def.pos.item) } else { String::new() };
    format!("{}#{}{item} {kind} {}", path.display(), def.pos.doc, parse::display_ref(r))
}

/// Reads the position back from an origin `file#D[.I] ...`.
fn doc_pos(file: &str, origin: &str) -> DocPos {
    let pos = origin.strip_prefix(file).and_then(|s| s.strip_prefix('#')).and_then(|s| s.split(' ').next());
    let mut parts = pos.unwrap_or("").split('.').map(|n| n.parse::<u32>().ok());
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(doc), item) => DocPos { doc, item: item.unwrap_or(0) },
        _ => DocPos::default(),
    }
}

/// Feeds serialized bytes into a hasher.
struct HashWriter<'a>(&'a mut DefaultHasher);

impl std::io::Write for HashWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Hash of an object's origin and content: equal hashes mean nothing to deliver.
fn object_hash(o: &Sourced<KubeObject>) -> u64 {
    let mut h = DefaultHasher::new();
    o.origin.hash(&mut h);
    o.unreadable.hash(&mut h);
    // Serializing k8s-openapi types is deterministic (fixed field order, sorted maps) and
    // cannot fail; a failure would only make the object look changed.
    let written = match &o.object {
        KubeObject::Namespace(x) => serde_json::to_writer(HashWriter(&mut h), x),
        KubeObject::Pod(x) => serde_json::to_writer(HashWriter(&mut h), x),
        KubeObject::NetworkPolicy(x) => serde_json::to_writer(HashWriter(&mut h), x),
    };
    if written.is_err() {
        h.write_u64(rand_like());
    }
    h.finish()
}

/// A value that differs from call to call (for the never-expected serialization failure).
fn rand_like() -> u64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
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

/// Collects manifest files under `dir` with their metadata (following symlinks, skipping
/// dot-entries).
fn list_files(dir: &Path, depth: usize, out: &mut Vec<(PathBuf, Stamp)>) -> std::io::Result<()> {
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
            out.push((path, Stamp::of(&meta)));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, label: &str) -> String {
        format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: x, labels: {{l: {label}}}}}\nspec: {{containers: []}}\n")
    }

    fn label(o: &Sourced<KubeObject>) -> String {
        match &o.object {
            KubeObject::Pod(p) => p.metadata.labels.as_ref().and_then(|l| l.get("l")).cloned().unwrap_or_default(),
            _ => String::new(),
        }
    }

    #[test]
    fn the_first_scan_in_batches_hands_on_what_one_scan_would() {
        let d = tempfile::tempdir().expect("tempdir");
        // 24 files of 100 KB (padded with a comment): several batches.
        let padding = format!("# {}\n", "x".repeat(100_000));
        for i in 0..24 {
            let text = format!("{padding}{}---\n{}", pod(&format!("p{i}"), "a"), pod(&format!("q{i}"), "a"));
            std::fs::write(d.path().join(format!("f{i:02}.yaml")), text).expect("write");
        }
        // Defined again in a later batch: that one wins, as in one scan.
        std::fs::write(d.path().join("z.yaml"), pod("p0", "last")).expect("write");
        std::fs::write(d.path().join("bad.yaml"), "kind: [").expect("write");

        let mut parts: Vec<Scan> = Vec::new();
        let mut batched = DirState::default();
        let last = batched.rescan_in_batches(d.path(), |s| {
            parts.push(s);
            true
        });
        parts.extend(last);
        assert!(parts.len() >= 3, "{} parts", parts.len());
        let mut held: BTreeMap<Key, Sourced<KubeObject>> = BTreeMap::new();
        let mut invalid = Vec::new();
        for part in parts {
            assert!(part.deleted.is_empty());
            invalid.extend(part.invalid);
            for o in part.applied {
                held.insert(o.object.key(), o);
            }
        }
        let (whole, whole_invalid) = load_dir(d.path());
        assert_eq!(held.into_values().collect::<Vec<_>>(), whole);
        assert_eq!(invalid.len(), whole_invalid.len(), "{invalid:?}");
        for i in &whole_invalid {
            assert!(invalid.contains(i), "{i:?} missing from {invalid:?}");
        }
        let p0 = whole.iter().find(|o| o.object.object_ref().name == "p0").expect("p0");
        assert_eq!(label(p0), "last");

        // The state is the one a single scan leaves: the next scan finds nothing to do.
        let again = batched.rescan(d.path(), &HashSet::new());
        assert!(again.applied.is_empty() && again.deleted.is_empty() && again.invalid.is_empty());

        // Stopped by the consumer: nothing more.
        let mut calls = 0;
        assert!(DirState::default()
            .rescan_in_batches(d.path(), |_| {
                calls += 1;
                false
            })
            .is_none());
        assert_eq!(calls, 1);
    }

    /// Rescans with every file forced (same-size rewrites within one mtime tick count too).
    fn scan(state: &mut DirState, dir: &Path) -> Scan {
        let mut all = Vec::new();
        list_files(dir, 0, &mut all).expect("list");
        let force = all.into_iter().map(|(p, _)| p).collect();
        state.rescan(dir, &force)
    }

    fn names(keys: &[Key]) -> Vec<String> {
        keys.iter().map(|(k, r)| format!("{k} {r}")).collect()
    }

    #[test]
    fn a_duplicate_takes_over_when_the_winner_goes() {
        let d = tempfile::tempdir().expect("tempdir");
        std::fs::write(d.path().join("1.yaml"), pod("a", "first")).expect("write");
        std::fs::write(d.path().join("2.yaml"), pod("a", "second")).expect("write");
        let mut st = DirState::default();
        let s = scan(&mut st, d.path());
        assert_eq!(s.applied.iter().map(label).collect::<Vec<_>>(), vec!["second"]);
        assert_eq!(s.invalid.len(), 1, "{:?}", s.invalid);

        // The winner's file goes: the other definition (in a file that did not change) is
        // read again and delivered; nothing is deleted and the duplicate is over.
        std::fs::remove_file(d.path().join("2.yaml")).expect("rm");
        let s = scan(&mut st, d.path());
        assert!(s.deleted.is_empty(), "{:?}", s.deleted);
        assert_eq!(s.applied.iter().map(label).collect::<Vec<_>>(), vec!["first"]);
        assert!(s.applied[0].origin.ends_with("1.yaml#1 Pod x/a"), "{}", s.applied[0].origin);
        assert!(st.duplicates.is_empty());

        // The duplicate comes back: reported again, and the later file wins again.
        std::fs::write(d.path().join("2.yaml"), pod("a", "second")).expect("write");
        let s = scan(&mut st, d.path());
        assert_eq!(s.applied.iter().map(label).collect::<Vec<_>>(), vec!["second"]);
        assert_eq!(s.invalid.len(), 1, "{:?}", s.invalid);

        std::fs::remove_file(d.path().join("1.yaml")).expect("rm");
        std::fs::remove_file(d.path().join("2.yaml")).expect("rm");
        let s = scan(&mut st, d.path());
        assert_eq!(names(&s.deleted), vec!["Pod x/a"]);
        assert!(st.keys.is_empty() && st.files.is_empty());
    }

    #[test]
    fn an_object_moving_between_files_is_not_deleted() {
        let d = tempfile::tempdir().expect("tempdir");
        std::fs::write(d.path().join("1.yaml"), format!("{}---\n{}", pod("a", "a"), pod("b", "b"))).expect("write");
        let mut st = DirState::default();
        assert_eq!(scan(&mut st, d.path()).applied.len(), 2);

        std::fs::write(d.path().join("1.yaml"), pod("b", "b")).expect("write");
        std::fs::write(d.path().join("2.yaml"), pod("a", "a")).expect("write");
        let s = scan(&mut st, d.path());
        assert!(s.deleted.is_empty(), "{:?}", s.deleted);
        // a has a new origin; b moved from document 2 to 1 of its file: both re-delivered.
        let origins: Vec<&str> = s.applied.iter().map(|o| o.origin.as_str()).collect();
        assert!(origins[0].ends_with("2.yaml#1 Pod x/a") && origins[1].ends_with("1.yaml#1 Pod x/b"), "{origins:?}");

        // Nothing changed: nothing to deliver.
        let s = scan(&mut st, d.path());
        assert!(s.applied.is_empty() && s.deleted.is_empty() && s.invalid.is_empty());
    }

    #[test]
    fn a_kept_last_good_version_that_cannot_be_delivered_is_reported() {
        let d = tempfile::tempdir().expect("tempdir");
        std::fs::write(d.path().join("1.yaml"), pod("a", "first")).expect("write");
        std::fs::write(d.path().join("2.yaml"), pod("a", "second")).expect("write");
        let mut st = DirState::default();
        scan(&mut st, d.path());

        // A typo in the shadowed definition: its last good version is kept (as a hash).
        let typo = "apiVersion: v1\nkind: Pod\nmetadata: {name: a, namespace: x}\nspec: {containers: 7}\n";
        std::fs::write(d.path().join("1.yaml"), typo).expect("write");
        let s = scan(&mut st, d.path());
        assert!(s.applied.is_empty() && s.deleted.is_empty());

        // The winner goes: the kept version would win but is not in memory. Reported; the
        // consumer keeps what it has (nothing deleted).
        std::fs::remove_file(d.path().join("2.yaml")).expect("rm");
        let s = scan(&mut st, d.path());
        assert!(s.applied.is_empty() && s.deleted.is_empty(), "{:?} {:?}", s.applied, s.deleted);
        assert!(s.invalid.iter().any(|i| i.origin.ends_with("1.yaml#1 Pod x/a") && i.error.contains("last good")), "{:?}", s.invalid);

        // Fixed, with the very content of the kept version: delivered.
        std::fs::write(d.path().join("1.yaml"), pod("a", "first")).expect("write");
        let s = scan(&mut st, d.path());
        assert_eq!(s.applied.iter().map(label).collect::<Vec<_>>(), vec!["first"]);
    }

    #[test]
    fn looking_at_named_files_alone_gives_what_a_full_scan_gives() {
        let d = tempfile::tempdir().expect("tempdir");
        let (p1, p2) = (d.path().join("1.yaml"), d.path().join("sub/2.yaml"));
        std::fs::create_dir_all(d.path().join("sub")).expect("mkdir");
        std::fs::write(&p1, pod("a", "a")).expect("write");
        std::fs::write(&p2, pod("b", "b")).expect("write");
        let mut st = DirState::default();
        scan(&mut st, d.path());

        std::fs::write(&p1, pod("a", "changed")).expect("write");
        let s = st.rescan_paths(std::slice::from_ref(&p1));
        assert_eq!(s.applied.iter().map(label).collect::<Vec<_>>(), vec!["changed"]);
        std::fs::remove_file(&p2).expect("rm");
        let s = st.rescan_paths(std::slice::from_ref(&p2));
        assert_eq!(names(&s.deleted), vec!["Pod x/b"]);
        // A full scan afterwards finds nothing more.
        let s = scan(&mut st, d.path());
        assert!(s.applied.is_empty() && s.deleted.is_empty() && s.invalid.is_empty());
    }

    #[test]
    fn which_inotify_paths_need_a_full_scan() {
        let d = tempfile::tempdir().expect("tempdir");
        let dir = d.path();
        std::fs::create_dir_all(dir.join("sub.yaml")).expect("mkdir");
        let set = |paths: &[&str]| paths.iter().map(|p| dir.join(p)).collect::<HashSet<_>>();
        assert_eq!(targets(dir, &set(&["a.yaml", "b/c.json"])), Some(vec![dir.join("a.yaml"), dir.join("b/c.json")]));
        // Temporary dot-files of atomic replaces are skipped.
        assert_eq!(targets(dir, &set(&[".a.yaml.tmp", "a.yaml"])), Some(vec![dir.join("a.yaml")]));
        assert_eq!(targets(dir, &set(&[".a.yaml.tmp"])), Some(vec![]));
        // A ConfigMap volume's `..data` switch, a directory, anything not a manifest name.
        assert_eq!(targets(dir, &set(&["..data"])), None);
        assert_eq!(targets(dir, &set(&["sub.yaml"])), None);
        assert_eq!(targets(dir, &set(&["newdir"])), None);
        assert_eq!(targets(dir, &HashSet::from([PathBuf::from("/elsewhere/a.yaml")])), None);
        assert_eq!(targets(dir, &HashSet::new()), None);
    }
}
