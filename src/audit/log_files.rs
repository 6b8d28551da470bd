//! The audit log's files, as the writer, the chain and the readers of the log name them: the
//! backups, with lumberjack's names (`<stem>-<UTC 2006-01-02T15-04-05.000>.<ext>`, gzipped
//! ones with `.gz` added), a free name for the next rotation and the backups found on disk;
//! the chain sidecar beside each file; and reading a file back, gzipped or not. A leaf: the
//! writer ([`super::writer`]) and the chain ([`super::chain`]) both use it, neither the other
//! through it.

use super::timefmt::{push_padded, Civil};
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

/// `2006-01-02T15-04-05.000` in UTC, lumberjack's backup time format.
fn backup_timestamp(t: SystemTime) -> String {
    let c = Civil::from_system_time(t);
    let mut v = Vec::with_capacity(23);
    push_padded(&mut v, c.year as u64, 4);
    v.push(b'-');
    push_padded(&mut v, c.month.into(), 2);
    v.push(b'-');
    push_padded(&mut v, c.day.into(), 2);
    v.push(b'T');
    push_padded(&mut v, c.hour.into(), 2);
    v.push(b'-');
    push_padded(&mut v, c.minute.into(), 2);
    v.push(b'-');
    push_padded(&mut v, c.second.into(), 2);
    v.push(b'.');
    push_padded(&mut v, (c.nanos / 1_000_000).into(), 3);
    String::from_utf8(v).unwrap_or_default()
}

/// Parses [`backup_timestamp`]'s text back.
fn parse_backup_timestamp(s: &str) -> Option<SystemTime> {
    let b = s.as_bytes();
    if b.len() != 23 {
        return None;
    }
    let num = |from: usize, to: usize| -> Option<u32> { s.get(from..to)?.parse().ok() };
    let seps = [(4, b'-'), (7, b'-'), (10, b'T'), (13, b'-'), (16, b'-'), (19, b'.')];
    if seps.iter().any(|&(i, c)| b.get(i) != Some(&c)) {
        return None;
    }
    let (y, mo, d) = (num(0, 4)?, num(5, 7)?, num(8, 10)?);
    let (h, mi, sec, ms) = (num(11, 13)?, num(14, 16)?, num(17, 19)?, num(20, 23)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let c = Civil { year: y.into(), month: mo, day: d, hour: h, minute: mi, second: sec, nanos: ms * 1_000_000 };
    c.to_system_time()
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
    use std::time::UNIX_EPOCH;

    #[test]
    fn backup_timestamps_round_trip() {
        let t = UNIX_EPOCH + Duration::from_millis(1_688_473_862_801);
        assert_eq!(backup_timestamp(t), "2023-07-04T12-31-02.801");
        assert_eq!(parse_backup_timestamp("2023-07-04T12-31-02.801"), Some(t));
        assert_eq!(parse_backup_timestamp("2023-07-04T12:31:02.801"), None);
        assert_eq!(parse_backup_timestamp("2023-13-04T12-31-02.801"), None);
        for days in [0u64, 59, 60, 365, 11_016, 20_000, 47_482] {
            let t = UNIX_EPOCH + Duration::from_secs(days * 86_400 + 3_723) + Duration::from_millis(5);
            assert_eq!(parse_backup_timestamp(&backup_timestamp(t)), Some(t), "day {days}");
        }
    }

    #[test]
    fn sidecar_names() {
        assert_eq!(sidecar_path(Path::new("/l/np.log")), PathBuf::from("/l/np.log.chain"));
        assert_eq!(
            sidecar_path(Path::new("/l/np-2023-07-04T12-31-02.801.log.gz")),
            PathBuf::from("/l/np-2023-07-04T12-31-02.801.log.chain")
        );
    }
}
