//! Reading audit log files back in tests: the live file or a backup, gzipped or not.

use flate2::read::GzDecoder;
use std::io::Read;
use std::path::Path;

/// The text of a log file, decompressed when it ends in `.gz`.
pub fn read_log(p: &Path) -> String {
    let bytes = std::fs::read(p).unwrap_or_else(|e| panic!("read {}: {e}", p.display()));
    if p.extension().is_some_and(|e| e == "gz") {
        let mut s = String::new();
        GzDecoder::new(&bytes[..]).read_to_string(&mut s).unwrap_or_else(|e| panic!("gunzip {}: {e}", p.display()));
        s
    } else {
        String::from_utf8(bytes).unwrap_or_else(|e| panic!("{}: not UTF-8: {e}", p.display()))
    }
}
