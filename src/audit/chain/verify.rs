//! `npagent audit verify`: checks rotated audit log files (plain or gzipped) against their
//! chain sidecars (see [`super`]) and names the first break: file, line and what it
//! looks like (modified, inserted, deleted, reordered, truncated, a file missing).
//!
//! Files are put in chain order by the index in their sidecar's header, not by name. The
//! oldest file given may continue a file that is not there (pruned by `--audit-max-backups`
//! or `--audit-max-age`): that is reported, not a break. A gap in the indices is.

use super::{next_hash, start_hash, Hash, Sidecar};
use crate::audit::log_files::{open_log, sidecar_path, SIDECAR_SUFFIX};
use std::fmt;
use std::io::{self, BufRead};
use std::path::{Path, PathBuf};

/// What is wrong at a break.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BreakKind {
    /// The line matches no record.
    Modified,
    /// The line matches no record and the next line is the one recorded here.
    Inserted,
    /// The line is the one recorded `count` lines later: the lines in between are gone.
    Deleted { count: u64 },
    /// The line is recorded at another position.
    Reordered { recorded_at: u64 },
    /// The file ends, but the chain records more lines.
    Truncated { recorded: u64 },
    /// The last line has no newline.
    CutLine,
    /// More lines than records.
    Unrecorded { recorded: u64 },
    /// Files with these indices are missing before this one.
    MissingFiles { from: u64, to: u64 },
    /// The file does not continue the last record of the file before it, `previous`.
    Spliced { previous: PathBuf },
    /// Another file given has the same index.
    DuplicateIndex { other: PathBuf },
    /// The sidecar is missing or malformed.
    BadSidecar(String),
    /// The file cannot be read to its end (a damaged gzip stream).
    Unreadable(String),
}

/// The first break found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Break {
    pub file: PathBuf,
    /// 1-based line of the log file, when the break is at a line.
    pub line: Option<u64>,
    pub kind: BreakKind,
}

impl fmt::Display for Break {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(n) = self.line {
            write!(f, " line {n}")?;
        }
        f.write_str(": ")?;
        match &self.kind {
            BreakKind::Modified => f.write_str("modified (matches no chain record)"),
            BreakKind::Inserted => f.write_str("inserted (matches no chain record; the next line is the recorded one)"),
            BreakKind::Deleted { count } => {
                write!(f, "{count} line(s) deleted before this one (it is recorded {count} line(s) later)")
            }
            BreakKind::Reordered { recorded_at } => {
                write!(f, "reordered (this line is recorded at line {recorded_at})")
            }
            BreakKind::Truncated { recorded } => {
                write!(f, "truncated: the file ends here, the chain records {recorded} lines")
            }
            BreakKind::CutLine => f.write_str("truncated inside the line (no newline)"),
            BreakKind::Unrecorded { recorded } => write!(f, "has no chain record (the chain records {recorded} lines)"),
            BreakKind::MissingFiles { from, to } if from == to => {
                write!(f, "the file with chain index {from} before it is missing")
            }
            BreakKind::MissingFiles { from, to } => {
                write!(f, "the files with chain index {from} to {to} before it are missing")
            }
            BreakKind::Spliced { previous } => write!(
                f,
                "does not continue {} (its last lines were deleted with their records, or it was replaced)",
                previous.display()
            ),
            BreakKind::DuplicateIndex { other } => write!(f, "has the same chain index as {}", other.display()),
            BreakKind::BadSidecar(e) => write!(f, "chain sidecar: {e}"),
            BreakKind::Unreadable(e) => write!(f, "cannot be read to its end: {e}"),
        }
    }
}

/// One file checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileSummary {
    pub path: PathBuf,
    pub file_index: u64,
    pub lines: u64,
}

/// The outcome of a verification.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Report {
    /// Files found intact, in chain order.
    pub files: Vec<FileSummary>,
    /// Whether the oldest file is the chain's first (else earlier files were not given).
    pub from_genesis: bool,
    pub broken: Option<Break>,
}

impl Report {
    /// Lines verified.
    pub fn lines(&self) -> u64 {
        self.files.iter().map(|f| f.lines).sum()
    }

    /// What `npagent audit verify` prints: one line per intact file, then the verdict.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for f in &self.files {
            out.push_str(&format!("ok {} (chain file {}, {} lines)\n", f.path.display(), f.file_index, f.lines));
        }
        match &self.broken {
            Some(b) => out.push_str(&format!("BROKEN {b}\n")),
            None => {
                let start = match (self.from_genesis, self.files.first()) {
                    (true, _) => "from the chain's first file".to_string(),
                    (false, Some(f)) => format!("from chain file {} (earlier files not given: pruned?)", f.file_index),
                    (false, None) => String::new(),
                };
                out.push_str(&format!("intact: {} lines in {} files, {start}\n", self.lines(), self.files.len()));
            }
        }
        out
    }
}

/// Why verification could not run (exit status 2).
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: io::Error },
    #[error("{0} is a chain sidecar: pass the log file it belongs to")]
    SidecarGiven(PathBuf),
    #[error("no files given")]
    Empty,
}

/// Verifies the log files at `paths` (sidecars found next to them; sidecar paths among
/// `paths` whose log is given too are skipped).
pub fn verify_paths(paths: &[PathBuf]) -> Result<Report, VerifyError> {
    let logs: Vec<&PathBuf> = paths.iter().filter(|p| !is_sidecar(p)).collect();
    for p in paths.iter().filter(|p| is_sidecar(p)) {
        if !logs.iter().any(|l| sidecar_path(l) == **p) {
            return Err(VerifyError::SidecarGiven(p.clone()));
        }
    }
    let mut inputs = Vec::new();
    for log in logs {
        // A log that cannot be opened is an error of the invocation, not a break.
        std::fs::metadata(log).map_err(|source| VerifyError::Read { path: log.clone(), source })?;
        let sidecar = match std::fs::read(sidecar_path(log)) {
            Ok(text) => Sidecar::parse(&text),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                Err(format!("{} does not exist", sidecar_path(log).display()))
            }
            Err(source) => return Err(VerifyError::Read { path: sidecar_path(log), source }),
        };
        inputs.push((log.clone(), sidecar));
    }
    verify_set(inputs, open_log)
}

fn is_sidecar(p: &Path) -> bool {
    p.to_str().is_some_and(|s| s.ends_with(SIDECAR_SUFFIX))
}

/// Verifies files given with their parsed sidecars; `open` reads a log file's lines.
pub fn verify_set<F>(inputs: Vec<(PathBuf, Result<Sidecar, String>)>, mut open: F) -> Result<Report, VerifyError>
where
    F: FnMut(&Path) -> io::Result<Box<dyn BufRead>>,
{
    if inputs.is_empty() {
        return Err(VerifyError::Empty);
    }
    let mut files = Vec::new();
    for (path, sidecar) in inputs {
        match sidecar {
            Ok(s) => files.push((path, s)),
            Err(e) => {
                return Ok(Report {
                    broken: Some(Break { file: path, line: None, kind: BreakKind::BadSidecar(e) }),
                    ..Report::default()
                })
            }
        }
    }
    files.sort_by_key(|(_, s)| s.header.file_index);
    let mut report =
        Report { from_genesis: files.first().is_some_and(|(_, s)| s.header.file_index == 1), ..Report::default() };
    let mut previous: Option<&(PathBuf, Sidecar)> = None;
    for file in &files {
        let (path, sidecar) = file;
        let index = sidecar.header.file_index;
        let at_file = |kind| Some(Break { file: path.clone(), line: None, kind });
        if let Some((prev_path, prev)) = previous {
            let expected = prev.header.file_index.saturating_add(1);
            if index < expected {
                report.broken = at_file(BreakKind::DuplicateIndex { other: prev_path.clone() });
            } else if index > expected {
                report.broken = at_file(BreakKind::MissingFiles { from: expected, to: index - 1 });
            } else if sidecar.header.prev != prev.last() {
                report.broken = at_file(BreakKind::Spliced { previous: prev_path.clone() });
            }
            if report.broken.is_some() {
                return Ok(report);
            }
        }
        let mut reader = open(path).map_err(|source| VerifyError::Read { path: path.clone(), source })?;
        match verify_lines(sidecar, &mut reader) {
            Ok(lines) => report.files.push(FileSummary { path: path.clone(), file_index: index, lines }),
            Err((line, kind)) => {
                report.broken = Some(Break { file: path.clone(), line: Some(line), kind });
                return Ok(report);
            }
        }
        previous = Some(file);
    }
    Ok(report)
}

/// Checks one file's lines against its sidecar: the number of lines, or the first break's
/// line and kind.
pub(crate) fn verify_lines(sidecar: &Sidecar, log: &mut dyn BufRead) -> Result<u64, (u64, BreakKind)> {
    let start = start_hash(sidecar.header.file_index, &sidecar.header.prev);
    let records = &sidecar.records;
    let recorded = records.len() as u64;
    let mut head = start;
    let mut line = Vec::new();
    let mut n = 0u64;
    loop {
        line.clear();
        match log.read_until(b'\n', &mut line) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => return Err((n + 1, BreakKind::Unreadable(e.to_string()))),
        }
        n += 1;
        let Some(&want) = records.get((n - 1) as usize) else {
            return Err((n, BreakKind::Unrecorded { recorded }));
        };
        let got = next_hash(&head, &line);
        if got == want {
            head = got;
            continue;
        }
        if !line.ends_with(b"\n") {
            return Err((n, BreakKind::CutLine));
        }
        let mut next = Vec::new();
        let next = match log.read_until(b'\n', &mut next) {
            Ok(len) if len > 0 => Some(next),
            _ => None,
        };
        return Err((n, classify(start, records, n, &line, next.as_deref())));
    }
    if n < recorded {
        return Err((n + 1, BreakKind::Truncated { recorded }));
    }
    Ok(n)
}

/// The 1-based position at which `line` is recorded, if any.
fn recorded_at(start: Hash, records: &[Hash], line: &[u8]) -> Option<u64> {
    let mut prev = start;
    for (i, r) in records.iter().enumerate() {
        if next_hash(&prev, line) == *r {
            return Some(i as u64 + 1);
        }
        prev = *r;
    }
    None
}

/// What a mismatch at line `n` looks like, from where this line and the next are recorded.
fn classify(start: Hash, records: &[Hash], n: u64, line: &[u8], next: Option<&[u8]>) -> BreakKind {
    let next_at = next.and_then(|l| recorded_at(start, records, l));
    match recorded_at(start, records, line) {
        None if next_at == Some(n) => BreakKind::Inserted,
        None => BreakKind::Modified,
        Some(at) if at > n && next_at != Some(n) => BreakKind::Deleted { count: at - n },
        Some(at) => BreakKind::Reordered { recorded_at: at },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::chain::{ChainState, Header, GENESIS};
    use proptest::prelude::*;
    use std::collections::HashMap;

    /// Files as the writer would chain them: (name, log text, sidecar text).
    fn chained(files: &[Vec<String>]) -> Vec<(PathBuf, Vec<u8>, Vec<u8>)> {
        let mut header = Header { file_index: 1, prev: GENESIS };
        let mut out = Vec::new();
        for (i, lines) in files.iter().enumerate() {
            let mut state = ChainState::start(header);
            let mut sidecar = header.line().into_bytes();
            let log: Vec<u8> = lines.concat().into_bytes();
            state.append(&log, &mut sidecar);
            out.push((PathBuf::from(format!("np-{i}.log")), log, sidecar));
            header = state.next_header();
        }
        out
    }

    fn run(files: &[(PathBuf, Vec<u8>, Vec<u8>)]) -> Report {
        let logs: HashMap<PathBuf, Vec<u8>> = files.iter().map(|(p, l, _)| (p.clone(), l.clone())).collect();
        let inputs = files.iter().map(|(p, _, s)| (p.clone(), Sidecar::parse(s))).collect();
        verify_set(inputs, |p| Ok(Box::new(io::Cursor::new(logs[p].clone())) as Box<dyn BufRead>)).unwrap()
    }

    fn lines(n: usize, tag: &str) -> Vec<String> {
        (1..=n).map(|i| format!("2023/07/04 12:31:02.{i:06} IngressRule {tag} line {i}\n")).collect()
    }

    fn set() -> Vec<(PathBuf, Vec<u8>, Vec<u8>)> {
        chained(&[lines(5, "a"), lines(5, "b"), lines(5, "c")])
    }

    fn broken_at(files: &[(PathBuf, Vec<u8>, Vec<u8>)]) -> (String, Option<u64>, BreakKind) {
        let b = run(files).broken.expect("a break");
        (b.file.to_string_lossy().into_owned(), b.line, b.kind)
    }

    fn edit_log(files: &mut [(PathBuf, Vec<u8>, Vec<u8>)], file: usize, f: impl FnOnce(&mut Vec<String>)) {
        let text = String::from_utf8(files[file].1.clone()).unwrap();
        let mut ls: Vec<String> = text.split_inclusive('\n').map(str::to_string).collect();
        f(&mut ls);
        files[file].1 = ls.concat().into_bytes();
    }

    #[test]
    fn intact_sets_verify_in_any_order_and_without_their_oldest_file() {
        let files = set();
        let r = run(&files);
        assert_eq!((r.broken.clone(), r.lines(), r.from_genesis), (None, 15, true));
        let reversed: Vec<_> = files.iter().rev().cloned().collect();
        assert_eq!(run(&reversed).lines(), 15);
        let r = run(&files[1..]);
        assert_eq!((r.broken.clone(), r.lines(), r.from_genesis), (None, 10, false));
    }

    #[test]
    fn every_kind_of_tampering_is_found_at_its_line() {
        type Tamper = Box<dyn Fn(&mut Vec<String>)>;
        let cases: Vec<(&str, Tamper, u64, BreakKind)> = vec![
            ("edit", Box::new(|l| l[2] = l[2].replace("IngressRule", "EgressRule")), 3, BreakKind::Modified),
            ("delete", Box::new(|l| drop(l.remove(1))), 2, BreakKind::Deleted { count: 1 }),
            ("delete two", Box::new(|l| drop(l.drain(1..3))), 2, BreakKind::Deleted { count: 2 }),
            ("insert", Box::new(|l| l.insert(3, "2023/07/04 forged\n".into())), 4, BreakKind::Inserted),
            ("swap", Box::new(|l| l.swap(1, 2)), 2, BreakKind::Reordered { recorded_at: 3 }),
            (
                "move up",
                Box::new(|l| {
                    let x = l.remove(3);
                    l.insert(0, x)
                }),
                1,
                BreakKind::Reordered { recorded_at: 4 },
            ),
            ("duplicate", Box::new(|l| l.insert(2, l[0].clone())), 3, BreakKind::Reordered { recorded_at: 1 }),
            ("truncate", Box::new(|l| l.truncate(3)), 4, BreakKind::Truncated { recorded: 5 }),
            (
                "cut line",
                Box::new(|l| {
                    l[4].pop();
                }),
                5,
                BreakKind::CutLine,
            ),
            ("append", Box::new(|l| l.push("extra\n".into())), 6, BreakKind::Unrecorded { recorded: 5 }),
        ];
        for (name, tamper, line, kind) in cases {
            let mut files = set();
            edit_log(&mut files, 1, tamper);
            assert_eq!(broken_at(&files), ("np-1.log".into(), Some(line), kind), "{name}");
        }
    }

    #[test]
    fn missing_spliced_and_duplicated_files_are_found() {
        let files = set();
        let without_middle = vec![files[0].clone(), files[2].clone()];
        assert_eq!(broken_at(&without_middle), ("np-2.log".into(), None, BreakKind::MissingFiles { from: 2, to: 2 }));
        // The last two lines of the middle file deleted together with their records.
        let mut cut = files.clone();
        edit_log(&mut cut, 1, |l| l.truncate(3));
        let text = String::from_utf8(cut[1].2.clone()).unwrap();
        cut[1].2 = text.lines().take(4).map(|l| format!("{l}\n")).collect::<String>().into_bytes();
        assert_eq!(broken_at(&cut), ("np-2.log".into(), None, BreakKind::Spliced { previous: "np-1.log".into() }));
        let twice = vec![
            files[0].clone(),
            files[1].clone(),
            (PathBuf::from("copy.log"), files[1].1.clone(), files[1].2.clone()),
        ];
        assert!(matches!(broken_at(&twice).2, BreakKind::DuplicateIndex { .. }));
        let mut no_sidecar = files;
        no_sidecar[2].2.clear();
        assert!(matches!(broken_at(&no_sidecar), (f, None, BreakKind::BadSidecar(_)) if f == "np-2.log"));
    }

    #[test]
    fn crafted_file_indices_do_not_overflow() {
        let mut files = set();
        for (i, f) in files.iter_mut().enumerate() {
            let text = String::from_utf8(f.2.clone()).unwrap();
            f.2 = text
                .replacen(&format!("file={}", i + 1), &format!("file={}", u64::MAX - 1 + i.min(1) as u64), 1)
                .into_bytes();
        }
        // Indices MAX-1, MAX, MAX: the chain hashes no longer match either.
        assert!(run(&files).broken.is_some());
    }

    proptest! {
        /// Any change of one byte of a log (a flip, a deletion or an insertion) is found in
        /// the line it touched (or in its next, when a newline is deleted).
        #[test]
        fn any_byte_change_is_found_in_its_line(sizes in proptest::collection::vec(1usize..6, 1..4), pick in any::<prop::sample::Index>(), op in 0u8..3, byte in any::<u8>()) {
            let files = chained(&sizes.iter().map(|&n| lines(n, "p")).collect::<Vec<_>>());
            let total: usize = files.iter().map(|f| f.1.len()).sum();
            let mut at = pick.index(total);
            let file = files.iter().position(|f| { if at < f.1.len() { true } else { at -= f.1.len(); false } }).unwrap();
            let mut tampered = files.clone();
            let log = &mut tampered[file].1;
            let line_of = |log: &[u8], at: usize| log[..at].iter().filter(|&&b| b == b'\n').count() as u64 + 1;
            let line = line_of(log, at);
            match op {
                0 => { if log[at] == byte { return Ok(()); } log[at] = byte }
                1 => { log.remove(at); }
                _ => log.insert(at, byte),
            }
            let b = run(&tampered).broken.expect("tampering not detected");
            prop_assert_eq!(b.file, tampered[file].0.clone());
            let found = b.line.expect("a line");
            prop_assert!(found == line || found == line + 1, "byte {} of line {}: found at {:?}", at, line, found);
        }
    }
}
