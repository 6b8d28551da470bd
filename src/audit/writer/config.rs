//! Where and how the audit log is written ([`WriterConfig`]), why it could not be
//! ([`WriteError`]), and opening the file the way the writer does.

use crate::audit::chain::ChainError;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

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
    /// The chain sidecar beside the log (`--audit-chain`) could not be written.
    #[error(transparent)]
    Chain(#[from] ChainError),
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
