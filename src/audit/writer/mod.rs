//! A buffered log file writer with size-based rotation, lumberjack-style (the library Antrea
//! rotates np.log with): when the next write would take the file past `max_size`, it is
//! renamed to `<stem>-<UTC 2006-01-02T15-04-05.000>.<ext>` and a new file is started; a
//! background thread then removes backups beyond `max_backups` or older than `max_age` and
//! gzips the others (`.log.gz`). Lines are never split across files.
//!
//! Rotation is written here rather than taken from a crate: `file-rotate` (the maintained
//! candidate) splits a line at the size limit, supports a file count *or* an age limit but not
//! both, and loses data silently when its file cannot be opened; what we need fits in this module
//! over `flate2`.
//!
//! Failures (disk full, no permission, directory removed) never panic and never block the
//! caller: [`RotatingWriter::flush`] returns the error, whole lines stay buffered up to
//! `max_pending` bytes (lines beyond are discarded and counted), and writing is retried on
//! later flushes, at most once per [`RETRY_INTERVAL`] unless a flush is asked for explicitly.
//!
//! Files: `config.rs` what to write where and the errors, `retention.rs` removing and
//! compressing backups; this one buffers, writes and rotates. The backups' names are
//! [`super::log_files`]'.

mod config;
mod retention;

pub(crate) use config::open_for_append;
pub use config::{
    check_writable, WriteError, WriterConfig, DEFAULT_BUFFER, DEFAULT_MAX_PENDING, DEFAULT_PATH, MEGABYTE,
    RETRY_INTERVAL,
};

use super::chain::sidecar::ChainFile;
use super::chain::ChainState;
use super::log_files::free_backup_name;
use retention::Retention;
use std::fs::{self, File};
use std::io::{self, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

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
    retention: Retention,
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
            retention: Retention::default(),
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
    pub fn chain_state(&self) -> Option<&ChainState> {
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
        self.retention.errors()
    }

    /// Creates the directory (0755) and opens the file for appending if not open yet.
    pub(crate) fn ensure_open(&mut self) -> Result<(), WriteError> {
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
        self.retention.request(&self.cfg);
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
        self.retention.resume(&self.cfg);
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
        self.retention.wait(&self.cfg);
    }

    fn flush_inner(&mut self) -> Result<(), WriteError> {
        self.flush_lines()?;
        match self.chain.as_mut() {
            Some(c) => Ok(c.flush()?),
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
            c.follow(&backup)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_lines() {
        assert_eq!(whole_lines_within(b"ab\ncd\n", 10, false), 6);
        assert_eq!(whole_lines_within(b"ab\ncd\n", 5, false), 3);
        assert_eq!(whole_lines_within(b"ab\ncd\n", 2, false), 0);
        assert_eq!(whole_lines_within(b"abcdef\nx\n", 2, true), 7);
    }
}
