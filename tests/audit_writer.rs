//! The rotating writer on a real filesystem: rotation with a tiny max size, gzip backups,
//! backup limits, directory creation, and write errors that resume.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

use npagent::audit::log_files::list_backups;
use npagent::audit::writer::{RotatingWriter, WriteError, WriterConfig};
use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::Path;
use std::time::Duration;

#[path = "audit_support/log_files.rs"]
mod log_files;
use log_files::read_log;

fn cfg(path: &Path, max_size: u64, max_backups: usize, compress: bool) -> WriterConfig {
    WriterConfig {
        path: path.to_path_buf(),
        max_size,
        max_backups,
        max_age: None,
        compress,
        buffer_size: 256,
        max_pending: 64 * 1024,
    }
}

fn line(i: usize) -> String {
    format!("2023/07/04 12:31:02.801442 IngressRule line {i:05}\n")
}

#[test]
fn rotation_keeps_whole_lines_caps_backups_and_gzips_them() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("logs/networkpolicy/np.log");
    let mut w = RotatingWriter::new(cfg(&path, 500, 3, true));
    let n = 200;
    for i in 0..n {
        w.write_line(line(i).as_bytes()).unwrap();
    }
    w.flush_and_sync().unwrap();
    w.wait_for_maintenance();

    let mode = fs::metadata(path.parent().unwrap()).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode & 0o755, 0o755, "directory mode {mode:o}");

    let backups = list_backups(&path).unwrap();
    assert_eq!(backups.len(), 3, "{backups:?}");
    assert!(backups.iter().all(|b| b.compressed && b.path.to_string_lossy().ends_with(".log.gz")), "{backups:?}");
    let names: Vec<String> =
        backups.iter().map(|b| b.path.file_name().unwrap().to_string_lossy().into_owned()).collect();
    assert!(
        names.iter().all(|n| n.starts_with("np-") && n.len() == "np-2023-07-04T12-31-02.801.log.gz".len()),
        "{names:?}"
    );
    // No stray temporary or uncompressed files.
    let all: Vec<_> = fs::read_dir(path.parent().unwrap()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(all.len(), 4, "{all:?}");

    // The current file and the three backups hold the last lines, in order, whole, each file
    // within the size limit.
    let current = fs::read_to_string(&path).unwrap();
    assert!(current.len() <= 500);
    let mut text = String::new();
    for b in backups.iter().rev() {
        let t = read_log(&b.path);
        assert!(t.len() <= 500 && t.ends_with('\n'), "{}", t.len());
        text.push_str(&t);
    }
    text.push_str(&current);
    let lines: Vec<&str> = text.lines().collect();
    let per_file = 500 / line(0).len();
    assert!(lines.len() >= 3 * per_file, "{}", lines.len());
    let last = n - 1;
    for (k, l) in lines.iter().rev().enumerate() {
        assert_eq!(format!("{l}\n"), line(last - k));
    }
}

#[test]
fn uncompressed_backups_and_no_limit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("np.log");
    let mut w = RotatingWriter::new(cfg(&path, 300, 0, false));
    for i in 0..100 {
        w.write_line(line(i).as_bytes()).unwrap();
    }
    w.flush_and_sync().unwrap();
    w.wait_for_maintenance();
    let backups = list_backups(&path).unwrap();
    assert!(backups.iter().all(|b| !b.compressed));
    // Every line is somewhere, exactly once.
    let mut total = fs::read_to_string(&path).unwrap().lines().count();
    for b in &backups {
        total += read_log(&b.path).lines().count();
    }
    assert_eq!(total, 100);
    assert_eq!(backups.len(), 100 / (300 / line(0).len()) + usize::from(100 % (300 / line(0).len()) != 0) - 1);
}

#[test]
fn old_backups_are_removed_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("np.log");
    let old = dir.path().join("np-2001-01-01T00-00-00.000.log.gz");
    let recent_name = {
        // A backup from a minute ago, named as the writer names them.
        let mut w = RotatingWriter::new(cfg(&path, 60, 0, false));
        w.write_line(line(1).as_bytes()).unwrap();
        w.write_line(line(2).as_bytes()).unwrap();
        w.flush().unwrap();
        w.wait_for_maintenance();
        list_backups(&path).unwrap()[0].path.clone()
    };
    fs::write(&old, b"x").unwrap();
    let unrelated = dir.path().join("np-notes.log");
    fs::write(&unrelated, b"keep").unwrap();
    let mut c = cfg(&path, 1_000_000, 0, false);
    c.max_age = Some(Duration::from_secs(86_400));
    let mut w = RotatingWriter::new(c);
    w.write_line(line(3).as_bytes()).unwrap();
    w.flush().unwrap();
    w.wait_for_maintenance();
    assert!(!old.exists());
    assert!(recent_name.exists());
    assert!(unrelated.exists());
}

#[test]
fn appends_to_an_existing_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("np.log");
    fs::write(&path, line(0)).unwrap();
    let mut w = RotatingWriter::new(cfg(&path, 1_000_000, 3, true));
    w.write_line(line(1).as_bytes()).unwrap();
    w.flush().unwrap();
    assert_eq!(fs::read_to_string(&path).unwrap(), line(0) + &line(1));
}

#[test]
fn a_directory_that_cannot_be_created_then_can() {
    let dir = tempfile::tempdir().unwrap();
    let blocker = dir.path().join("networkpolicy");
    fs::write(&blocker, b"not a directory").unwrap();
    let path = blocker.join("np.log");
    let mut w = RotatingWriter::new(cfg(&path, 1_000_000, 3, true));
    w.write_line(line(1).as_bytes()).unwrap();
    let err = w.flush().unwrap_err();
    assert!(matches!(err, WriteError::CreateDir { .. }), "{err}");
    assert!(err.to_string().contains("networkpolicy"), "{err}");
    assert!(w.is_failing());
    w.write_line(line(2).as_bytes()).unwrap();
    assert_eq!(w.buffered(), 2 * line(0).len());

    fs::remove_file(&blocker).unwrap();
    w.write_line(line(3).as_bytes()).unwrap();
    w.flush().unwrap();
    assert!(!w.is_failing());
    assert_eq!(fs::read_to_string(&path).unwrap(), line(1) + &line(2) + &line(3));
    assert_eq!(w.discarded(), 0);
}

#[test]
fn disk_full_keeps_a_bounded_buffer_then_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("np.log");
    // Writes to /dev/full fail with ENOSPC, as on a full disk.
    symlink("/dev/full", &path).unwrap();
    let mut c = cfg(&path, 0, 3, false);
    c.max_pending = 10 * line(0).len();
    let mut w = RotatingWriter::new(c);
    for i in 0..15 {
        let _ = w.write_line(line(i).as_bytes());
    }
    let err = w.flush().unwrap_err();
    assert!(matches!(&err, WriteError::Write { source, .. } if source.raw_os_error() == Some(28)), "{err}");
    assert_eq!(w.discarded(), 5);
    assert_eq!(w.buffered(), 10 * line(0).len());

    // Space again: the kept lines land in a real file.
    fs::remove_file(&path).unwrap();
    w.flush().unwrap();
    let text = fs::read_to_string(&path).unwrap();
    let want: String = (0..10).map(line).collect();
    assert_eq!(text, want);
}

#[test]
fn an_oversized_line_gets_a_file_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("np.log");
    let mut w = RotatingWriter::new(cfg(&path, 100, 5, false));
    let big = format!("{}\n", "x".repeat(300));
    w.write_line(line(0).as_bytes()).unwrap();
    w.write_line(big.as_bytes()).unwrap();
    w.write_line(line(1).as_bytes()).unwrap();
    w.flush().unwrap();
    w.wait_for_maintenance();
    let backups = list_backups(&path).unwrap();
    assert_eq!(backups.len(), 2);
    assert_eq!(read_log(&backups[1].path), line(0));
    assert_eq!(read_log(&backups[0].path), big);
    assert_eq!(fs::read_to_string(&path).unwrap(), line(1));
}
