//! The audit log's files, as the writer, the chain and the readers of the log name them: the
//! backups, with lumberjack's names (`<stem>-<UTC 2006-01-02T15-04-05.000>.<ext>`, gzipped
//! ones with `.gz` added), a free name for the next rotation and the backups found on disk;
//! the chain sidecar beside each file; and reading a file back, gzipped or not. A leaf: the
//! writer ([`super::writer`]) and the chain ([`super::chain`]) both use it, neither the other
//! through it.

use super::timefmt::{backup_timestamp, parse_backup_timestamp};
use std::fs;
use std::io::{self, BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// The directory, stem and extension (with its dot) of `path`.
fn split_name(path: &Path) -> (PathBuf, String, String) {
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let ext = path.extension().map(|s| format!(".{}", s.to_string_lossy())).unwrap_or_default();
    (dir, stem, ext)
}

/// A backup name for a rotation at `t` that no existing file (plain or gzipped) has, and the
/// time it names; on a clash the time is moved on by a millisecond, so names keep sorting by age.
pub(crate) fn free_backup_name(path: &Path, t: SystemTime) -> (PathBuf, SystemTime) {
    let (dir, stem, ext) = split_name(path);
    let mut t = t;
    loop {
        let candidate = dir.join(format!("{stem}-{}{ext}", backup_timestamp(t)));
        let gz = gz_name(&candidate);
        if !candidate.exists() && !gz.exists() {
            return (candidate, t);
        }
        t += Duration::from_millis(1);
    }
}

/// `p` with `.gz` added: the name of its compressed backup.
pub(crate) fn gz_name(p: &Path) -> PathBuf {
    let mut s = p.as_os_str().to_owned();
    s.push(".gz");
    PathBuf::from(s)
}

/// One backup found on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backup {
    pub path: PathBuf,
    pub time: SystemTime,
    pub compressed: bool,
}

/// The backups of the log at `path`, newest first.
pub fn list_backups(path: &Path) -> io::Result<Vec<Backup>> {
    let (dir, stem, ext) = split_name(path);
    let dir = if dir.as_os_str().is_empty() { PathBuf::from(".") } else { dir };
    let prefix = format!("{stem}-");
    let mut out = Vec::new();
    for item in fs::read_dir(&dir)? {
        let item = item?;
        let name = item.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(rest) = name.strip_prefix(&prefix) else { continue };
        let (rest, compressed) = match rest.strip_suffix(".gz") {
            Some(r) => (r, true),
            None => (rest, false),
        };
        let Some(ts) = rest.strip_suffix(ext.as_str()) else { continue };
        let Some(time) = parse_backup_timestamp(ts) else { continue };
        out.push(Backup { path: dir.join(name), time, compressed });
    }
    out.sort_by(|a, b| b.time.cmp(&a.time).then(a.compressed.cmp(&b.compressed)));
    Ok(out)
}

/// What a sidecar's name adds to its log's name (before any `.gz`).
pub(crate) const SIDECAR_SUFFIX: &str = ".chain";

/// The chain sidecar of the log file `log`: `np.log` -> `np.log.chain`; a gzipped backup
/// shares the sidecar of its uncompressed name (`np-T.log.gz` -> `np-T.log.chain`).
pub(crate) fn sidecar_path(log: &Path) -> PathBuf {
    let mut s = log.as_os_str().to_owned();
    if let Some(plain) = log.to_str().and_then(|p| p.strip_suffix(".gz")) {
        s = plain.into();
    }
    s.push(SIDECAR_SUFFIX);
    PathBuf::from(s)
}

/// Opens a log file, gunzipping a `.gz`.
pub fn open_log(path: &Path) -> io::Result<Box<dyn BufRead>> {
    let file = std::fs::File::open(path)?;
    if path.extension().is_some_and(|e| e == "gz") {
        Ok(Box::new(BufReader::new(flate2::read::MultiGzDecoder::new(file))))
    } else {
        Ok(Box::new(BufReader::new(file)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sidecar_names() {
        assert_eq!(sidecar_path(Path::new("/l/np.log")), PathBuf::from("/l/np.log.chain"));
        assert_eq!(
            sidecar_path(Path::new("/l/np-2023-07-04T12-31-02.801.log.gz")),
            PathBuf::from("/l/np-2023-07-04T12-31-02.801.log.chain")
        );
    }
}
