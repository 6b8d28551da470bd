//! The manifests directory (`--manifests DIR`): Namespaces, Pods, Nodes, NetworkPolicies,
//! StagedNetworkPolicies and ClusterNetworkPolicies from files (every [`crate::source::Kind`]).
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
//! polling alone cannot meet). A stat-only poll every 250 ms backs it up for what inotify
//! misses (queue overflow, DIR created later or replaced, filesystems without inotify). A file
//! is re-read only when its (mtime, length) changed or inotify named it, and re-parsed only
//! when its content hash changed.
//!
//! The parts: [`parse`] (one file's documents), `json` (a JSON document or list straight into
//! the objects, parse's fast path), `files` (reading, hashing, listing), `state`
//! (what the watcher remembers, and the changes a scan yields), `watch` (inotify and the
//! paths it makes dirty); this module holds the scan loop.

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
mod files;
mod json;
pub mod parse;
mod state;
mod watch;

pub use parse::yaml_options;

use files::*;
use state::*;
use watch::*;

use std::collections::hash_map::Entry as MapEntry;
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
                    // Parsing runs ahead of the consumer; were the channel's room the only
                    // bound, dozens of parsed batches could wait in it. So a batch goes out
                    // once the consumer has taken everything sent before: one batch is
                    // applied while the next is parsed, and no more are held.
                    if chunks > 1 && !consumer_took_all(&chunk_tx) {
                        return false;
                    }
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
            if let Some(scan) =
                scan.as_ref().filter(|s| !(s.applied.is_empty() && s.deleted.is_empty() && s.invalid.is_empty()))
            {
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
        // Consumers report invalid input (once, where it is used). In the first listing the
        // reports come before the Reset that ends it, so that whoever reads only the listing
        // (`flows`, `explain`) sees every problem of it.
        let invalid = scan.invalid.into_iter().map(SourceEvent::from);
        let mut events = Vec::new();
        if first {
            first = false;
            events.extend(invalid);
            events.push(SourceEvent::Reset { kinds: Kind::ALL.to_vec(), objects: scan.applied });
        } else {
            events.extend(scan.deleted.into_iter().map(|(kind, object)| SourceEvent::Deleted { kind, object }));
            events.extend(scan.applied.into_iter().map(SourceEvent::Applied));
            events.extend(invalid);
        }
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

/// Waits (on a blocking thread) until the receiver of `tx` has taken every event sent so
/// far; false when it is gone.
fn consumer_took_all(tx: &mpsc::Sender<SourceEvent>) -> bool {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else { return true };
    // Holding every slot of the channel at once means nothing sent is left in it.
    runtime.block_on(tx.reserve_many(tx.max_capacity())).is_ok()
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
        let p0 = whole.iter().find(|o| o.object.object_ref().name.as_str() == "p0").expect("p0");
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
        assert!(
            s.invalid.iter().any(|i| i.origin.ends_with("1.yaml#1 Pod x/a") && i.error.contains("last good")),
            "{:?}",
            s.invalid
        );

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
