//! The hash chain on a real filesystem: the chained rotating writer with a tiny max size,
//! gzipped and pruned backups and restarts, checked by `npagent audit verify` (the binary, for
//! its exit status) after every kind of tampering.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

use flate2::write::GzEncoder;
use npagent::audit::chain::verify::{verify_paths, BreakKind};
use npagent::audit::log_files::list_backups;
use npagent::audit::writer::{RotatingWriter, WriterConfig};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "audit_support/log_files.rs"]
mod log_files;
use log_files::read_log;

fn cfg(path: &Path, max_backups: usize) -> WriterConfig {
    WriterConfig {
        path: path.to_path_buf(),
        max_size: 2_000,
        max_backups,
        max_age: None,
        compress: true,
        buffer_size: 300,
        max_pending: 64 * 1024,
    }
}

fn line(i: usize) -> String {
    format!("2023/07/04 12:31:02.801442 IngressRule AllowToPod line {i:05}\n")
}

/// Writes lines `from..to` through a new chained writer (a new agent process, as far as the
/// chain is concerned) and waits for its backups to be gzipped or pruned.
fn write_run(path: &Path, max_backups: usize, from: usize, to: usize) {
    let mut w = RotatingWriter::chained(cfg(path, max_backups));
    for i in from..to {
        w.write_line(line(i).as_bytes()).unwrap();
    }
    w.flush_and_sync().unwrap();
    w.wait_for_maintenance();
}

/// The log files of `path`, oldest backup first, the live file last.
fn log_files(path: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = list_backups(path).unwrap().into_iter().rev().map(|b| b.path).collect();
    files.push(path.to_path_buf());
    files
}

fn verify_bin(files: &[PathBuf]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_npagent")).arg("audit").arg("verify").args(files).output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.code().unwrap_or(-1), text)
}

fn write_log(p: &Path, text: &str) {
    if p.extension().is_some_and(|e| e == "gz") {
        let mut enc = GzEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(text.as_bytes()).unwrap();
        fs::write(p, enc.finish().unwrap()).unwrap();
    } else {
        fs::write(p, text).unwrap();
    }
}

/// Rewrites the lines of one log file.
fn edit(p: &Path, f: impl FnOnce(&mut Vec<String>)) {
    let mut lines: Vec<String> = read_log(p).split_inclusive('\n').map(str::to_string).collect();
    f(&mut lines);
    write_log(p, &lines.concat());
}

/// A chained log of 400 lines over many rotated, gzipped files, written by three runs.
fn long_run(dir: &Path) -> (PathBuf, Vec<PathBuf>) {
    let path = dir.join("np.log");
    write_run(&path, 0, 0, 150);
    write_run(&path, 0, 150, 151);
    write_run(&path, 0, 151, 400);
    let files = log_files(&path);
    (path, files)
}

#[test]
fn a_long_run_with_rotation_and_restarts_verifies_and_every_line_is_there() {
    let dir = tempfile::tempdir().unwrap();
    let (_, files) = long_run(dir.path());
    assert!(files.len() >= 10, "expected many rotations: {files:?}");
    assert!(files.iter().filter(|f| f.extension().is_some_and(|e| e == "gz")).count() >= 9, "{files:?}");
    let all: String = files.iter().map(|f| read_log(f)).collect();
    assert_eq!(all, (0..400).map(line).collect::<String>());
    let (code, text) = verify_bin(&files);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("intact: 400 lines"), "{text}");
    assert!(text.contains("from the chain's first file"), "{text}");
    // The sidecars may be given too (a shell glob picks them up), and the order does not matter.
    let mut with_sidecars: Vec<PathBuf> = fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().path()).collect();
    with_sidecars.sort();
    with_sidecars.reverse();
    assert_eq!(verify_bin(&with_sidecars).0, 0);
}

#[test]
fn pruned_oldest_backups_are_no_break() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("np.log");
    write_run(&path, 2, 0, 100);
    write_run(&path, 2, 100, 200);
    let files = log_files(&path);
    assert_eq!(files.len(), 3, "{files:?}");
    let sidecars = fs::read_dir(dir.path())
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().to_string_lossy().ends_with(".chain"))
        .count();
    assert_eq!(sidecars, 3, "the sidecars of pruned backups are pruned with them");
    let report = verify_paths(&files).unwrap();
    assert_eq!(report.broken, None);
    assert!(!report.from_genesis);
    assert!(report.files[0].file_index > 1);
    assert!(read_log(&path).ends_with(&line(199)));
}

/// Applies `tamper` to a fresh long run and returns verify's exit status and report.
fn tampered(tamper: impl FnOnce(&[PathBuf])) -> (i32, String) {
    let dir = tempfile::tempdir().unwrap();
    let (_, files) = long_run(dir.path());
    tamper(&files);
    let files: Vec<PathBuf> = files.into_iter().filter(|f| f.exists()).collect();
    verify_bin(&files)
}

fn name(p: &Path) -> String {
    p.file_name().unwrap().to_string_lossy().into_owned()
}

#[test]
fn every_kind_of_tampering_is_found_in_the_right_file_at_the_right_line() {
    type Tamper = Box<dyn Fn(&mut Vec<String>)>;
    let cases: Vec<(&str, Tamper, &str)> = vec![
        ("edit", Box::new(|l| l[3] = l[3].replace("AllowToPod", "DropToPod")), "line 4: modified"),
        ("delete", Box::new(|l| drop(l.remove(2))), "line 3: 1 line(s) deleted"),
        ("insert", Box::new(|l| l.insert(1, "2023/07/04 12:31:02.000000 forged\n".into())), "line 2: inserted"),
        ("reorder", Box::new(|l| l.swap(4, 5)), "line 5: reordered (this line is recorded at line 6)"),
        ("truncate", Box::new(|l| l.truncate(5)), "line 6: truncated"),
    ];
    for (what, f, want) in cases {
        // A gzipped backup in the middle of the set.
        let mut target = String::new();
        let (code, text) = tampered(|files| {
            let p = &files[4];
            target = name(p);
            edit(p, f);
        });
        assert_eq!(code, 1, "{what}: {text}");
        assert!(text.contains(&format!("BROKEN {}", target)) || text.contains(&target), "{what}: {text}");
        assert!(text.contains(want), "{what}: want {want:?} in {text}");
        assert!(target.ends_with(".gz"), "{target}");
    }
}

#[test]
fn a_missing_middle_file_a_damaged_gzip_and_a_cut_live_file_are_breaks() {
    let mut gone = String::new();
    let (code, text) = tampered(|files| {
        gone = name(&files[3]);
        fs::remove_file(&files[3]).unwrap();
    });
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("before it is missing"), "{gone} removed: {text}");
    let (code, text) = tampered(|files| {
        let bytes = fs::read(&files[2]).unwrap();
        fs::write(&files[2], &bytes[..bytes.len() / 2]).unwrap();
    });
    assert_eq!(code, 1, "{text}");
    let (code, text) = tampered(|files| {
        let live = files.last().unwrap();
        let bytes = fs::read(live).unwrap();
        fs::write(live, &bytes[..bytes.len() - 10]).unwrap();
    });
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("np.log line") && text.contains("no newline"), "{text}");
    // The last lines of a backup deleted together with their records.
    let (code, text) = tampered(|files| {
        edit(&files[5], |l| l.truncate(l.len() - 2));
        let sidecar = PathBuf::from(format!("{}.chain", files[5].to_string_lossy().trim_end_matches(".gz")));
        let s = fs::read_to_string(&sidecar).unwrap();
        let kept: Vec<&str> = s.lines().collect();
        fs::write(&sidecar, kept[..kept.len() - 2].iter().map(|l| format!("{l}\n")).collect::<String>()).unwrap();
    });
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("does not continue"), "{text}");
}

#[test]
fn verify_errors_exit_2_and_unchained_logs_are_broken() {
    let dir = tempfile::tempdir().unwrap();
    let (code, text) = verify_bin(&[dir.path().join("nothing.log")]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("nothing.log"), "{text}");
    let plain = dir.path().join("plain.log");
    fs::write(&plain, line(1)).unwrap();
    let (code, text) = verify_bin(&[plain]);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("plain.log.chain does not exist"), "{text}");
}

#[test]
fn a_restart_does_not_launder_a_tampered_live_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("np.log");
    let big = WriterConfig { max_size: 0, ..cfg(&path, 0) };
    let mut w = RotatingWriter::chained(big.clone());
    for i in 0..10 {
        w.write_line(line(i).as_bytes()).unwrap();
    }
    w.flush_and_sync().unwrap();
    drop(w);
    edit(&path, |l| l[6] = l[6].replace("AllowToPod", "DropToPod"));
    // The agent starts again: the tampered file is moved aside, not continued as if intact.
    let mut w = RotatingWriter::chained(big);
    w.write_line(line(10).as_bytes()).unwrap();
    w.flush_and_sync().unwrap();
    w.wait_for_maintenance();
    drop(w);
    let files = log_files(&path);
    assert_eq!(files.len(), 2, "{files:?}");
    assert_eq!(read_log(&path), line(10));
    let report = verify_paths(&files).unwrap();
    let b = report.broken.expect("the edit is still found");
    assert_eq!((b.file, b.line, b.kind), (files[0].clone(), Some(7), BreakKind::Modified));
    // Without the tampered file, the new one continues the chain where the old one ended.
    let report = verify_paths(&files[1..]).unwrap();
    assert_eq!((report.broken, report.files[0].file_index), (None, 2));
}

#[test]
fn an_unchained_log_is_moved_aside_when_the_chain_is_turned_on() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("np.log");
    let mut w = RotatingWriter::new(cfg(&path, 0));
    w.write_line(line(0).as_bytes()).unwrap();
    w.flush_and_sync().unwrap();
    drop(w);
    write_run(&path, 0, 1, 3);
    assert_eq!(read_log(&path), line(1) + &line(2));
    let report = verify_paths(&[path]).unwrap();
    assert_eq!((report.broken.clone(), report.lines(), report.from_genesis), (None, 2, true));
}
