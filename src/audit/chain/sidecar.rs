//! The chain sidecar the rotating writer keeps next to the log when `--audit-chain` is on:
//! records appended as lines reach the log, renamed with the log on rotation, and the chain
//! picked up again when the agent starts.

use super::verify::verify_lines;
use super::{ChainState, Header, Sidecar, GENESIS};
use crate::audit::log_files::{list_backups, sidecar_path};
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufReader, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Why the chain sidecar at `path` could not be kept. The text is the one the writer gives
/// for the log, naming the sidecar.
#[derive(Debug, thiserror::Error)]
#[error("cannot {step} audit log {}{}: {source}", .path.display(), .step.destination())]
pub struct ChainError {
    step: Step,
    path: PathBuf,
    source: io::Error,
}

/// What was done to the sidecar when it failed.
#[derive(Debug)]
enum Step {
    Open,
    Write,
    Sync,
    /// Renaming it after its log, to `to`.
    Rotate {
        to: PathBuf,
    },
}

impl Step {
    /// ` to <path>` for a rename, else nothing.
    fn destination(&self) -> String {
        match self {
            Step::Rotate { to } => format!(" to {}", to.display()),
            _ => String::new(),
        }
    }
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Step::Open => "open",
            Step::Write => "write",
            Step::Sync => "sync",
            Step::Rotate { .. } => "rotate",
        })
    }
}

/// How the chain goes on when the writer first opens the log.
#[derive(Debug)]
pub(crate) struct Recovery {
    /// The log (and sidecar) on disk cannot be continued: the writer moves them aside as a
    /// backup, where `npagent audit verify` will show what is wrong with them.
    pub(crate) move_aside: bool,
    /// The chain to continue.
    pub(crate) state: ChainState,
    /// Whether `state` continues the sidecar on disk (else a new one is started).
    pub(crate) resume: bool,
}

/// The sidecar of one log path.
#[derive(Debug)]
pub(crate) struct ChainFile {
    path: PathBuf,
    file: Option<File>,
    /// `None` until the chain on disk has been read.
    state: Option<ChainState>,
    /// The header to write when the sidecar is (re)created.
    header: Option<Header>,
    records: Vec<u8>,
}

impl ChainFile {
    /// The sidecar of the log at `log`; nothing is read until [`ChainFile::recover`].
    pub(crate) fn new(log: &Path) -> ChainFile {
        ChainFile { path: sidecar_path(log), file: None, state: None, header: None, records: Vec::new() }
    }

    /// Whether the chain on disk has been read.
    pub(crate) fn recovered(&self) -> bool {
        self.state.is_some()
    }

    /// The chain so far (`None` before recovery).
    pub fn state(&self) -> Option<&ChainState> {
        self.state.as_ref()
    }

    /// Reads the chain on disk for the log at `log` and decides how to go on (see
    /// [`Recovery`]); the caller moves the files aside if asked, then calls [`Self::adopt`].
    pub(crate) fn recover(&self, log: &Path) -> Recovery {
        let after_backups =
            || Recovery { move_aside: false, state: ChainState::start(newest_backup_header(log)), resume: false };
        let log_len = fs::metadata(log).map(|m| m.len()).ok();
        let sidecar = match fs::read(&self.path) {
            Ok(text) => Some(Sidecar::parse(&text)),
            Err(_) => None,
        };
        match (sidecar, log_len) {
            (None, None | Some(0)) => after_backups(),
            (None, Some(_)) => {
                tracing::warn!(log = %log.display(), "audit log has no chain sidecar; it is moved aside and a new chained file started");
                Recovery { move_aside: true, ..after_backups() }
            }
            (Some(Err(e)), _) => {
                tracing::warn!(sidecar = %self.path.display(), error = %e, "audit chain sidecar unreadable; log moved aside");
                Recovery { move_aside: true, ..after_backups() }
            }
            (Some(Ok(s)), len) => {
                let intact =
                    len.is_some() && File::open(log).is_ok_and(|f| verify_lines(&s, &mut BufReader::new(f)).is_ok());
                let state = ChainState::resume(&s);
                if intact {
                    Recovery { move_aside: false, state, resume: true }
                } else {
                    tracing::warn!(log = %log.display(), "audit log does not match its chain; moved aside for `npagent audit verify`");
                    Recovery { move_aside: true, state: ChainState::start(state.next_header()), resume: false }
                }
            }
        }
    }

    /// Takes the decision of [`Self::recover`].
    pub(crate) fn adopt(&mut self, r: Recovery) {
        if !r.resume {
            self.header = Some(r.state.header());
        }
        self.state = Some(r.state);
    }

    /// Opens the sidecar (creating it with its header for a new file) if not open.
    pub(crate) fn open(&mut self) -> Result<(), ChainError> {
        if self.file.is_some() {
            return Ok(());
        }
        let fresh = self.header.is_some();
        let mut opts = OpenOptions::new();
        opts.create(true).mode(0o600);
        if fresh {
            opts.write(true).truncate(true);
        } else {
            opts.append(true);
        }
        let mut file = opts.open(&self.path).map_err(|e| self.failed(Step::Open, e))?;
        if let Some(h) = self.header {
            file.write_all(h.line().as_bytes()).map_err(|e| self.failed(Step::Write, e))?;
            self.header = None;
        }
        self.file = Some(file);
        Ok(())
    }

    /// Chains bytes just written to the log.
    pub(crate) fn wrote(&mut self, bytes: &[u8]) {
        if let Some(s) = self.state.as_mut() {
            s.append(bytes, &mut self.records);
        }
    }

    /// Writes the records of the lines written so far; kept for a retry on error.
    pub(crate) fn flush(&mut self) -> Result<(), ChainError> {
        if self.records.is_empty() {
            return Ok(());
        }
        self.open()?;
        let Some(file) = self.file.as_mut() else { return Ok(()) };
        match file.write_all(&self.records) {
            Ok(()) => {
                self.records.clear();
                Ok(())
            }
            Err(source) => {
                // A partial write would leave a cut record: start a fresh handle and let the
                // verifier see the damage rather than guess what reached the disk.
                self.file = None;
                Err(self.failed(Step::Write, source))
            }
        }
    }

    /// Flushes and syncs the sidecar.
    pub(crate) fn sync(&mut self) -> Result<(), ChainError> {
        self.flush()?;
        if let Some(f) = &self.file {
            f.sync_data().map_err(|e| self.failed(Step::Sync, e))?;
        }
        Ok(())
    }

    /// The log was renamed to `backup`: the sidecar follows, and the next file's chain starts
    /// from this one's last hash.
    pub(crate) fn rotate(&mut self, backup: &Path) -> Result<(), ChainError> {
        self.flush()?;
        self.file = None;
        let Some(state) = self.state.as_ref() else { return Ok(()) };
        let next = state.next_header();
        tracing::info!(
            file = %backup.display(), index = state.file_index, lines = state.seq, head = %hex::encode(state.head),
            "audit chain: file closed"
        );
        self.follow(backup)?;
        self.state = Some(ChainState::start(next));
        self.header = Some(next);
        Ok(())
    }

    fn failed(&self, step: Step, source: io::Error) -> ChainError {
        ChainError { step, path: self.path.clone(), source }
    }

    /// The log was renamed to `backup`: the sidecar on disk is renamed to `backup`'s (a missing
    /// one is no error). For a log moved aside as well as rotated.
    pub(crate) fn follow(&self, backup: &Path) -> Result<(), ChainError> {
        let to = sidecar_path(backup);
        match fs::rename(&self.path, &to) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(self.failed(Step::Rotate { to }, e)),
        }
    }
}

/// The header that continues the newest backup with a readable sidecar, or the genesis header.
fn newest_backup_header(log: &Path) -> Header {
    let backups = list_backups(log).unwrap_or_default();
    for b in backups {
        if let Ok(text) = fs::read(sidecar_path(&b.path)) {
            if let Ok(s) = Sidecar::parse(&text) {
                return ChainState::resume(&s).next_header();
            }
        }
    }
    Header { file_index: 1, prev: GENESIS }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_read_like_the_writers_naming_the_sidecar() {
        let chain = ChainFile::new(Path::new("/l/np.log"));
        let gone = || io::Error::from(io::ErrorKind::NotFound);
        let to = PathBuf::from("/l/np-T.log.chain");
        assert_eq!(
            chain.failed(Step::Write, gone()).to_string(),
            format!("cannot write audit log /l/np.log.chain: {}", gone())
        );
        assert_eq!(
            chain.failed(Step::Rotate { to }, gone()).to_string(),
            format!("cannot rotate audit log /l/np.log.chain to /l/np-T.log.chain: {}", gone())
        );
    }
}
