//! Reading, hashing and listing manifest files.

use super::*;
use std::hash::BuildHasher as _;

/// A file read (and parsed if its content changed), before it is merged into the state.
pub(super) enum Loaded {
    Failed(String),
    /// The content is the one last read.
    Unchanged,
    Changed {
        hash: u64,
        fresh: Fresh,
    },
}

/// One file's parse (`None`: not UTF-8) and the definitions of its objects.
pub(super) struct Fresh {
    pub(super) parse: Option<parse::FileParse>,
    pub(super) defs: Vec<Def>,
}

/// [`load`]s each file: on several threads when there are many.
pub(super) fn load_all(todo: &[(PathBuf, Stamp, Option<u64>)]) -> Vec<Loaded> {
    const PARALLEL_FROM: usize = 8;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(4);
    if todo.len() < PARALLEL_FROM || threads < 2 {
        return todo.iter().map(|(path, _, hash)| load(path, *hash)).collect();
    }
    let chunk = todo.len().div_ceil(threads);
    std::thread::scope(|s| {
        let workers: Vec<_> = todo
            .chunks(chunk)
            .map(|part| {
                (part.len(), s.spawn(move || part.iter().map(|(path, _, hash)| load(path, *hash)).collect::<Vec<_>>()))
            })
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
pub(super) fn read_manifest(path: &Path) -> Result<Vec<u8>, String> {
    use std::io::Read as _;
    let file = std::fs::File::open(path).map_err(|e| format!("cannot read: {e}"))?;
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES.saturating_add(1)).read_to_end(&mut bytes).map_err(|e| format!("cannot read: {e}"))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(format!("refused: larger than {} MiB, the limit for a manifest file", MAX_FILE_BYTES >> 20));
    }
    Ok(bytes)
}

/// Reads a file; parses it unless its content hash is `previous`.
pub(super) fn load(path: &Path, previous: Option<u64>) -> Loaded {
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
    // A file's objects are mostly of one namespace: their keys share its name.
    let mut namespace: Option<crate::model::SharedStr> = None;
    let defs = parse
        .objects
        .iter()
        .flatten()
        .map(|o| {
            let (kind, mut r) = o.object.key();
            match &namespace {
                Some(shared) if *shared == r.namespace => r.namespace = shared.clone(),
                _ => namespace = Some(r.namespace.clone()),
            }
            Def { key: (kind, r), hash: object_hash(o), pos: doc_pos(&file, &o.origin) }
        })
        .collect();
    Loaded::Changed { hash, fresh: Fresh { parse: Some(parse), defs } }
}

/// The hasher of file contents and objects: foldhash (a manifest directory's 40 MB hash in a
/// fraction of SipHash's time), seeded once per process, so that the hashes of one run are
/// comparable with each other and nobody can predict them.
fn hasher() -> impl Hasher {
    static SEED: std::sync::OnceLock<foldhash::quality::RandomState> = std::sync::OnceLock::new();
    SEED.get_or_init(Default::default).build_hasher()
}

/// Feeds serialized bytes into a hasher.
pub(super) struct HashWriter<'a, H>(&'a mut H);

impl<H: Hasher> std::io::Write for HashWriter<'_, H> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Hash of an object's origin and content: equal hashes mean nothing to deliver.
pub(super) fn object_hash(o: &Sourced<KubeObject>) -> u64 {
    let mut h = hasher();
    o.origin.hash(&mut h);
    o.unreadable.hash(&mut h);
    // Serializing the slim objects is deterministic (fixed field order, sorted maps) and
    // cannot fail; a failure would only make the object look changed.
    let written = match &o.object {
        KubeObject::Namespace(x) => serde_json::to_writer(HashWriter(&mut h), x),
        KubeObject::Pod(x) => serde_json::to_writer(HashWriter(&mut h), x),
        KubeObject::Node(x) => serde_json::to_writer(HashWriter(&mut h), x),
        KubeObject::NetworkPolicy(x) => serde_json::to_writer(HashWriter(&mut h), x),
        KubeObject::StagedNetworkPolicy(x) => serde_json::to_writer(HashWriter(&mut h), x),
        KubeObject::ClusterNetworkPolicy(x) => serde_json::to_writer(HashWriter(&mut h), x),
    };
    if written.is_err() {
        h.write_u64(rand_like());
    }
    h.finish()
}

/// A value that differs from call to call (for the never-expected serialization failure).
pub(super) fn rand_like() -> u64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
}

pub(super) fn content_hash(bytes: &[u8]) -> u64 {
    let mut h = hasher();
    bytes.hash(&mut h);
    h.finish()
}

pub(super) fn is_manifest(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| ["yaml", "yml", "json"].iter().any(|x| e.eq_ignore_ascii_case(x)))
}

/// Collects manifest files under `dir` with their metadata (following symlinks, skipping
/// dot-entries).
pub(super) fn list_files(dir: &Path, depth: usize, out: &mut Vec<(PathBuf, Stamp)>) -> std::io::Result<()> {
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
