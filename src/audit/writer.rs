//! A buffered log file writer with size-based rotation, lumberjack-style (the library Antrea
//! rotates np.log with): when the next write would take the file past `max_size`, it is
//! renamed to `<stem>-<UTC 2006-01-02T15-04-05.000>.<ext>` and a new file is started; a
//! background thread then removes backups beyond `max_backups` or older than `max_age` and
//! gzips the others (`.log.gz`). Lines are never split across files.
//!
//! Rotation is written here rather than taken from a crate: `file-rotate` (the maintained
//! candidate) splits a line at the size limit, supports a file count *or* an age limit but not
//! both, and loses data silently when its file cannot be opened; what we need is ~200 lines
//! over `flate2`.
//!
//! Failures (disk full, no permission, directory removed) never panic and never block the
//! caller: [`RotatingWriter::flush`] returns the error, whole lines stay buffered up to
//! `max_pending` bytes (lines beyond are discarded and counted), and writing is retried on
//! later flushes, at most once per [`RETRY_INTERVAL`] unless a flush is asked for explicitly.

use super::chain::sidecar_path;
use super::sidecar::ChainFile;
use super::timefmt::{push_padded, Civil};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Antrea's log file.
pub const DEFAULT_PATH: &str = "/var/log/antrea/networkpolicy/np.log";
/// One megabyte as lumberjack counts it.
pub const MEGABYTE: u64 = 1024 * 1024;
/// Bytes buffered before a write reaches the file.
pub const DEFAULT_BUFFER: usize = 64 * 1024;
/// Bytes kept in memory while the file cannot be written.
pub const DEFAULT_MAX_PENDING: usize = 8 * 1024 * 1024;
/// Minimum time between automatic retries after a failed write.
pub const RETRY_INTERVAL: Duration = Duration::from_secs(1);

/// Where and how to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriterConfig {
    pub path: PathBuf,
    /// Rotate before the file would exceed this many bytes; 0 never rotates.
    pub max_size: u64,
    /// Backups kept; 0 keeps all (lumberjack's meaning).
    pub max_backups: usize,
    /// Backups older than this are removed; `None` keeps them regardless of age.
    pub max_age: Option<Duration>,
    /// Gzip backups.
    pub compress: bool,
    /// Flush to the file when this many bytes are buffered.
    pub buffer_size: usize,
    /// Bound on buffered bytes while the file cannot be written.
    pub max_pending: usize,
}

impl Default for WriterConfig {
    fn default() -> Self {
        WriterConfig {
            path: PathBuf::from(DEFAULT_PATH),
            max_size: 500 * MEGABYTE,
            max_backups: 3,
            max_age: Some(Duration::from_secs(28 * 86_400)),
            compress: true,
            buffer_size: DEFAULT_BUFFER,
            max_pending: DEFAULT_MAX_PENDING,
        }
    }
}

/// Why the log could not be written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WriteError {
    #[error("cannot create audit log directory {path}: {source}")]
    CreateDir { path: PathBuf, source: io::Error },
    #[error("cannot open audit log {path}: {source}")]
    Open { path: PathBuf, source: io::Error },
    #[error("cannot write audit log {path}: {source}")]
    Write { path: PathBuf, source: io::Error },
    #[error("cannot rotate audit log {path} to {backup}: {source}")]
    Rotate { path: PathBuf, backup: PathBuf, source: io::Error },
    #[error("cannot sync audit log {path}: {source}")]
    Sync { path: PathBuf, source: io::Error },
}

/// Checks that the audit log at `path` can be written, as the writer will: creates its
/// directory (0755) if missing and opens (creates) the file for appending. For start-up, so
/// that a bad `--audit-log` stops npagent at once instead of failing every write later.
pub fn check_writable(path: &Path) -> Result<(), WriteError> {
    open_for_append(path).map(drop)
}

/// Creates the directory of `path` (0755) if missing and opens the file for appending.
pub(crate) fn open_for_append(path: &Path) -> Result<File, WriteError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(dir)
            .map_err(|source| WriteError::CreateDir { path: dir.to_path_buf(), source })?;
    }
    OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .open(path)
        .map_err(|source| WriteError::Open { path: path.to_path_buf(), source })
}

/// The rotating writer. Not thread-safe by itself: one task owns it.
#[derive(Debug)]
pub struct RotatingWriter {
    cfg: WriterConfig,
    file: Option<File>,
    size: u64,
    buf: Vec<u8>,
    discarded: u64,
    failing: bool,
    retry_at: Option<Instant>,
    mill: Option<JoinHandle<()>>,
    mill_wanted: bool,
    mill_errors: Arc<AtomicU64>,
    /// Time in the newest backup name, so names keep increasing even within a millisecond.
    last_backup: Option<SystemTime>,
    /// The hash chain sidecar (`--audit-chain`).
    chain: Option<ChainFile>,
}

impl RotatingWriter {
    /// A writer for `cfg`. Nothing is touched on disk until the first flush.
    pub fn new(cfg: WriterConfig) -> RotatingWriter {
        let buf = Vec::with_capacity(cfg.buffer_size.min(cfg.max_pending).saturating_add(4096));
        RotatingWriter {
            cfg,
            file: None,
            size: 0,
            buf,
            discarded: 0,
            failing: false,
            retry_at: None,
            mill: None,
            mill_wanted: false,
            mill_errors: Arc::new(AtomicU64::new(0)),
            last_backup: None,
            chain: None,
        }
    }

    /// A writer for `cfg` that also keeps the hash chain sidecar of every file (see
    /// [`super::chain`]), continuing the chain found on disk.
    pub fn chained(cfg: WriterConfig) -> RotatingWriter {
        let chain = ChainFile::new(&cfg.path);
        let mut w = RotatingWriter::new(cfg);
        w.chain = Some(chain);
        w
    }

    /// The chain so far: file index, lines in the current file and last hash (`None`
    /// unchained, or before the first write).
    pub fn chain_state(&self) -> Option<&super::chain::ChainState> {
        self.chain.as_ref().and_then(ChainFile::state)
    }

    /// The configuration in use.
    pub fn config(&self) -> &WriterConfig {
        &self.cfg
    }

    /// Lines thrown away because the file could not be written and the buffer was full.
    pub fn discarded(&self) -> u64 {
        self.discarded
    }

    /// Whether the last attempt to write failed.
    pub fn is_failing(&self) -> bool {
        self.failing
    }

    /// Bytes waiting to be written.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// Backup removals or compressions that failed.
    pub fn maintenance_errors(&self) -> u64 {
        self.mill_errors.load(Ordering::Relaxed)
    }

    /// Creates the directory (0755) and opens the file for appending if not open yet.
    pub fn ensure_open(&mut self) -> Result<(), WriteError> {
        if self.file.is_some() {
            return Ok(());
        }
        let path = self.cfg.path.clone();
        if let Some(recovery) = self.chain.as_ref().filter(|c| !c.recovered()).map(|c| c.recover(&path)) {
            if recovery.move_aside {
                self.move_aside()?;
            }
            if let Some(c) = self.chain.as_mut() {
                c.adopt(recovery);
            }
        }
        let file = open_for_append(&path)?;
        self.size = file.metadata().map(|m| m.len()).unwrap_or(0);
        self.file = Some(file);
        if let Some(c) = self.chain.as_mut() {
            c.open()?;
        }
        // Like lumberjack, tidy up backups left by an earlier run.
        self.mill_wanted = true;
        self.start_mill();
        Ok(())
    }

    /// Buffers one line (a newline is expected at its end) and flushes when the buffer is full.
    /// An error is that of the flush; the line itself is kept unless the buffer is at its bound.
    pub fn write_line(&mut self, line: &[u8]) -> Result<(), WriteError> {
        if self.buf.len().saturating_add(line.len()) > self.cfg.max_pending {
            self.discarded += 1;
        } else {
            self.buf.extend_from_slice(line);
        }
        if self.buf.len() >= self.cfg.buffer_size {
            let waiting = self.retry_at.is_some_and(|at| Instant::now() < at);
            if !waiting {
                return self.flush();
            }
        }
        Ok(())
    }

    /// Writes everything buffered, rotating as needed.
    pub fn flush(&mut self) -> Result<(), WriteError> {
        let result = self.flush_inner();
        self.failing = result.is_err();
        self.retry_at = if self.failing { Some(Instant::now() + RETRY_INTERVAL) } else { None };
        if result.is_err() {
            // Reopen on the next attempt: the file may have been removed or become writable.
            self.file = None;
        }
        if self.mill_wanted {
            self.start_mill();
        }
        result
    }

    /// Flushes and syncs the file's data to disk (shutdown).
    pub fn flush_and_sync(&mut self) -> Result<(), WriteError> {
        self.flush()?;
        if let Some(f) = &self.file {
            f.sync_data().map_err(|source| WriteError::Sync { path: self.cfg.path.clone(), source })?;
        }
        if let Some(c) = self.chain.as_mut() {
            c.sync()?;
        }
        Ok(())
    }

    /// Waits for backup removal and compression to finish (tests, shutdown).
    pub fn wait_for_maintenance(&mut self) {
        loop {
            if let Some(h) = self.mill.take() {
                let _ = h.join();
            }
            if !self.mill_wanted {
                return;
            }
            self.start_mill();
        }
    }

    fn flush_inner(&mut self) -> Result<(), WriteError> {
        self.flush_lines()?;
        match self.chain.as_mut() {
            Some(c) => c.flush(),
            None => Ok(()),
        }
    }

    fn flush_lines(&mut self) -> Result<(), WriteError> {
        if self.buf.is_empty() {
            return Ok(());
        }
        self.ensure_open()?;
        while !self.buf.is_empty() {
            let room = if self.cfg.max_size == 0 { u64::MAX } else { self.cfg.max_size.saturating_sub(self.size) };
            let len = whole_lines_within(&self.buf, room, self.size == 0);
            if len == 0 {
                self.rotate()?;
                continue;
            }
            self.write_prefix(len)?;
            if !self.buf.is_empty() {
                self.rotate()?;
            }
        }
        Ok(())
    }

    /// Writes `buf[..len]`, keeping whatever the file did not take.
    fn write_prefix(&mut self, len: usize) -> Result<(), WriteError> {
        let path = &self.cfg.path;
        let file = match self.file.as_mut() {
            Some(f) => f,
            None => return Err(WriteError::Write { path: path.clone(), source: io::ErrorKind::NotConnected.into() }),
        };
        let mut done = 0;
        let mut result = Ok(());
        while done < len {
            let Some(rest) = self.buf.get(done..len) else { break };
            match file.write(rest) {
                Ok(0) => {
                    result = Err(WriteError::Write { path: path.clone(), source: io::ErrorKind::WriteZero.into() });
                    break;
                }
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(source) => {
                    result = Err(WriteError::Write { path: path.clone(), source });
                    break;
                }
            }
        }
        if let (Some(c), Some(written)) = (self.chain.as_mut(), self.buf.get(..done)) {
            c.wrote(written);
        }
        self.buf.drain(..done);
        self.size = self.size.saturating_add(done as u64);
        result
    }

    fn rotate(&mut self) -> Result<(), WriteError> {
        let backup = self.rename_to_backup()?;
        if let Some(c) = self.chain.as_mut() {
            c.rotate(&backup)?;
        }
        self.size = 0;
        self.ensure_open()
    }

    /// Moves a log the chain cannot continue, and its sidecar, to a backup name.
    fn move_aside(&mut self) -> Result<(), WriteError> {
        let backup = self.rename_to_backup()?;
        if let Some(c) = self.chain.as_ref() {
            let to = sidecar_path(&backup);
            match fs::rename(c.path(), &to) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(source) => return Err(WriteError::Rotate { path: c.path().to_path_buf(), backup: to, source }),
            }
        }
        Ok(())
    }

    /// Closes the log and renames it to a new backup name (a missing log is no error).
    fn rename_to_backup(&mut self) -> Result<PathBuf, WriteError> {
        self.file = None;
        let mut t = SystemTime::now();
        if let Some(last) = self.last_backup {
            // A name freed by backup removal must not be reused: it would sort as old.
            t = t.max(last + Duration::from_millis(1));
        }
        let (backup, t) = free_backup_name(&self.cfg.path, t);
        self.last_backup = Some(t);
        match fs::rename(&self.cfg.path, &backup) {
            Ok(()) => {}
            // Someone removed the file: there is nothing to keep, start a new one.
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(source) => return Err(WriteError::Rotate { path: self.cfg.path.clone(), backup, source }),
        }
        Ok(backup)
    }

    fn start_mill(&mut self) {
        if self.mill.as_ref().is_some_and(|h| !h.is_finished()) {
            self.mill_wanted = true;
            return;
        }
        if let Some(h) = self.mill.take() {
            let _ = h.join();
        }
        self.mill_wanted = false;
        let cfg = self.cfg.clone();
        let errors = Arc::clone(&self.mill_errors);
        let spawned = std::thread::Builder::new().name("audit-log-rotate".into()).spawn(move || {
            let failures = mill(&cfg, SystemTime::now());
            if failures > 0 {
                errors.fetch_add(failures, Ordering::Relaxed);
            }
        });
        match spawned {
            Ok(h) => self.mill = Some(h),
            Err(_) => {
                self.mill_errors.fetch_add(1, Ordering::Relaxed);
                self.mill_wanted = true;
            }
        }
    }
}

impl Drop for RotatingWriter {
    fn drop(&mut self) {
        let _ = self.flush();
    }
}

/// The length of the longest prefix of `buf` made of whole lines that fits in `room` bytes.
/// An empty file takes at least one line, however long, so an oversized line is still written.
fn whole_lines_within(buf: &[u8], room: u64, empty_file: bool) -> usize {
    if buf.len() as u64 <= room {
        return buf.len();
    }
    let limit = usize::try_from(room).unwrap_or(usize::MAX).min(buf.len());
    let fit = buf.get(..limit).and_then(|b| b.iter().rposition(|&c| c == b'\n')).map_or(0, |i| i + 1);
    if fit == 0 && empty_file {
        return buf.iter().position(|&c| c == b'\n').map_or(buf.len(), |i| i + 1);
    }
    fit
}

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
    let num = |from: usize, to: usize| -> Option<u64> { s.get(from..to)?.parse().ok() };
    let seps = [(4, b'-'), (7, b'-'), (10, b'T'), (13, b'-'), (16, b'-'), (19, b'.')];
    if seps.iter().any(|&(i, c)| b.get(i) != Some(&c)) {
        return None;
    }
    let (y, mo, d) = (num(0, 4)?, num(5, 7)?, num(8, 10)?);
    let (h, mi, sec, ms) = (num(11, 13)?, num(14, 16)?, num(17, 19)?, num(20, 23)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    // Days from civil (inverse of Civil::from_system_time), for years >= 1970.
    let (y, m) = if mo <= 2 { (y.checked_sub(1)?, mo + 9) } else { (y, mo - 3) };
    let era = y / 400;
    let yoe = y % 400;
    let doy = (153 * m + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = (era * 146_097 + doe).checked_sub(719_468)?;
    let secs = days * 86_400 + h * 3_600 + mi * 60 + sec;
    UNIX_EPOCH.checked_add(Duration::from_secs(secs) + Duration::from_millis(ms))
}

/// A backup name for a rotation at `t` that no existing file (plain or gzipped) has, and the
/// time it names; on a clash the time is moved on by a millisecond, so names keep sorting by age.
fn free_backup_name(path: &Path, t: SystemTime) -> (PathBuf, SystemTime) {
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

fn gz_name(p: &Path) -> PathBuf {
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

#[cfg(test)]
mod tests {
    use super::*;

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
    fn whole_lines() {
        assert_eq!(whole_lines_within(b"ab\ncd\n", 10, false), 6);
        assert_eq!(whole_lines_within(b"ab\ncd\n", 5, false), 3);
        assert_eq!(whole_lines_within(b"ab\ncd\n", 2, false), 0);
        assert_eq!(whole_lines_within(b"abcdef\nx\n", 2, true), 7);
    }
}
