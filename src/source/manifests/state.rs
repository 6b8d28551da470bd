//! What the watcher remembers of the directory, and how a scan turns into the changes to send.

use super::*;

pub(super) type Key = (Kind, ObjectRef);

/// What changes of a file's metadata say it may have changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Stamp {
    pub(super) mtime: Option<SystemTime>,
    pub(super) len: u64,
}

impl Stamp {
    pub(super) fn of(m: &std::fs::Metadata) -> Stamp {
        Stamp { mtime: m.modified().ok(), len: m.len() }
    }
}

/// Where in its file an object is defined: document number and, for an item of a `List`,
/// the item number (both from 1; item 0 = not a list item), as in origins (`file#2.3`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct DocPos {
    pub(super) doc: u32,
    pub(super) item: u32,
}

/// One object definition in a file: who, which content, where.
#[derive(Debug)]
pub(super) struct Def {
    pub(super) key: Key,
    /// Hash of the origin and the content (see [`object_hash`]).
    pub(super) hash: u64,
    pub(super) pos: DocPos,
}

#[derive(Debug)]
pub(super) struct FileState {
    pub(super) stamp: Stamp,
    /// Content hash of the version last read (`None` if unreadable).
    pub(super) hash: Option<u64>,
    /// The definitions in effect for this file (last good versions where it is broken), in
    /// file order.
    pub(super) defs: Vec<Def>,
}

/// What the consumer holds of an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Held {
    Nothing,
    /// The version with this hash.
    Version(u64),
    /// A version that is not the winning definition's (which could not be delivered).
    Other,
}

#[derive(Debug)]
pub(super) struct KeyState {
    /// Number of definitions (several = duplicates).
    pub(super) defs: u32,
    pub(super) held: Held,
}

#[derive(Debug, Default)]
pub(super) struct DirState {
    pub(super) files: BTreeMap<PathBuf, FileState>,
    /// foldhash, not SipHash: a large directory's first scan hashes every key several times.
    pub(super) keys: std::collections::HashMap<Key, KeyState, foldhash::fast::RandomState>,
    /// Duplicate reports in force per object (each is made once).
    pub(super) duplicates: HashMap<Key, Vec<Invalid>>,
    /// Last error listing DIR (reported when it changes).
    pub(super) list_error: Option<String>,
}

/// The outcome of a scan: what the consumer must apply, sorted by kind, namespace, name.
#[derive(Debug, Default)]
pub(super) struct Scan {
    pub(super) deleted: Vec<Key>,
    pub(super) applied: Vec<Sourced<KubeObject>>,
    pub(super) invalid: Vec<Invalid>,
    /// Files parsed.
    pub(super) parsed: usize,
}

/// A file read and parsed in this scan: the objects of its definitions (`None` for the last
/// good versions it keeps).
pub(super) struct Parsed {
    pub(super) path: PathBuf,
    pub(super) objects: Vec<Option<Sourced<KubeObject>>>,
}

impl DirState {
    /// Brings the state up to date with DIR; returns the changes and the new problems.
    /// `force` names paths to re-read even when their metadata did not change.
    pub(super) fn rescan(&mut self, dir: &Path, force: &HashSet<PathBuf>) -> Scan {
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
    pub(super) fn rescan_in_batches(&mut self, dir: &Path, mut emit: impl FnMut(Scan) -> bool) -> Option<Scan> {
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
    pub(super) fn rescan_paths(&mut self, paths: &[PathBuf]) -> Scan {
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
            let here =
                parsed.iter_mut().find(|p| p.path == path).and_then(|p| p.objects.get_mut(i)).and_then(Option::take);
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

/// Merges a changed file's parse with its old definitions: broken documents and malformed
/// files keep their last good definitions. Returns the file's definitions, their objects
/// (`None` where kept) and the old definitions that are gone.
pub(super) fn merge_parse(
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
pub(super) fn fetch(path: &Path, def: &Def, invalid: &mut Vec<Invalid>) -> Option<Sourced<KubeObject>> {
    let file = path.display().to_string();
    let found = read_manifest(path).ok().and_then(|bytes| {
        let text = std::str::from_utf8(&bytes).ok()?;
        let json = path.extension().is_some_and(|e| e.eq_ignore_ascii_case("json"));
        let wanted = origin(path, def);
        parse::parse_file(&file, text, json)
            .objects?
            .into_iter()
            .find(|o| o.origin == wanted && object_hash(o) == def.hash)
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
pub(super) fn origin(path: &Path, def: &Def) -> String {
    let (kind, r) = &def.key;
    let item = if def.pos.item > 0 { format!(".{}", def.pos.item) } else { String::new() };
    format!("{}#{}{item} {kind} {}", path.display(), def.pos.doc, parse::display_ref(r))
}

/// Reads the position back from an origin `file#D[.I] ...`.
pub(super) fn doc_pos(file: &str, origin: &str) -> DocPos {
    let pos = origin.strip_prefix(file).and_then(|s| s.strip_prefix('#')).and_then(|s| s.split(' ').next());
    let mut parts = pos.unwrap_or("").split('.').map(|n| n.parse::<u32>().ok());
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(doc), item) => DocPos { doc, item: item.unwrap_or(0) },
        _ => DocPos::default(),
    }
}
