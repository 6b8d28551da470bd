//! The `--audit-*` command-line options, to be flattened into the agent's CLI.

use super::format::Format;
use super::writer::{WriterConfig, DEFAULT_PATH, MEGABYTE};
use super::AuditConfig;
use std::path::PathBuf;
use std::time::Duration;

/// Audit log options (Antrea's defaults).
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct AuditArgs {
    /// Audit log file; its directory is created (0755) if missing.
    #[arg(long = "audit-log", default_value = DEFAULT_PATH, env = "NPAGENT_AUDIT_LOG")]
    pub log: PathBuf,
    /// Line format: antrea (Antrea's 14 fields), antrea-v1 (Antrea 1.8's 10 fields) or json.
    #[arg(long = "audit-format", default_value = "antrea", env = "NPAGENT_AUDIT_FORMAT")]
    pub format: Format,
    /// Window over which identical non-Allow entries are aggregated (Go duration, e.g. 1s, 500ms; 0 disables).
    #[arg(long = "audit-dedup-window", default_value = "1s", value_parser = parse_go_duration, env = "NPAGENT_AUDIT_DEDUP_WINDOW")]
    pub dedup_window: Duration,
    /// Rotate the log before it exceeds this many megabytes (0: never).
    #[arg(long = "audit-max-size", default_value_t = 500, env = "NPAGENT_AUDIT_MAX_SIZE")]
    pub(crate) max_size_mb: u64,
    /// Rotated backups kept (0: all).
    #[arg(long = "audit-max-backups", default_value_t = 3, env = "NPAGENT_AUDIT_MAX_BACKUPS")]
    pub max_backups: usize,
    /// Days a backup is kept (0: no age limit).
    #[arg(long = "audit-max-age", default_value_t = 28, env = "NPAGENT_AUDIT_MAX_AGE")]
    pub(crate) max_age_days: u64,
    /// Gzip rotated backups.
    #[arg(long = "audit-compress", default_value_t = true, action = clap::ArgAction::Set, env = "NPAGENT_AUDIT_COMPRESS")]
    pub compress: bool,
    /// Keep a hash chain next to every log file (`<file>.chain`: a sequence number and a hash
    /// per line), checked by `npagent audit verify`.
    #[arg(long = "audit-chain", env = "NPAGENT_AUDIT_CHAIN")]
    pub chain: bool,
    /// Also log policy changes to this file, as JSON lines: a NetworkPolicy added, modified
    /// (with a hash of what is enforced) or deleted once the bridge holds its flows, and one
    /// rejected as invalid.
    #[arg(long = "audit-changes-log", value_name = "FILE", env = "NPAGENT_AUDIT_CHANGES_LOG")]
    pub changes_log: Option<PathBuf>,
}

impl AuditArgs {
    /// The writer configuration these options describe.
    pub fn writer_config(&self) -> WriterConfig {
        WriterConfig {
            path: self.log.clone(),
            max_size: self.max_size_mb.saturating_mul(MEGABYTE),
            max_backups: self.max_backups,
            max_age: (self.max_age_days > 0).then(|| Duration::from_secs(self.max_age_days.saturating_mul(86_400))),
            compress: self.compress,
            ..WriterConfig::default()
        }
    }

    /// The logger configuration for `node`.
    pub fn config(&self, node: impl Into<String>) -> AuditConfig {
        AuditConfig {
            format: self.format,
            node: node.into(),
            dedup_window: self.dedup_window,
            writer: self.writer_config(),
            chain: self.chain,
            changes_log: self.changes_log.clone(),
            ..AuditConfig::default()
        }
    }
}

/// Parses a Go duration (`time.ParseDuration`): a sequence of decimal numbers with units
/// `ns`, `us`, `µs`, `ms`, `s`, `m`, `h` (`1m30s`, `1.5s`, `250ms`), or `0`. No sign.
pub(crate) fn parse_go_duration(s: &str) -> Result<Duration, String> {
    let err = || format!("invalid duration {s:?} (examples: 1s, 500ms, 1m30s)");
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    let mut rest = s;
    let mut total: u128 = 0;
    if rest.is_empty() {
        return Err(err());
    }
    while !rest.is_empty() {
        let num_len = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).ok_or_else(err)?;
        let (num, tail) = rest.split_at(num_len);
        let unit_len = tail.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        let scale: u128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return Err(err()),
        };
        let (int, frac) = num.split_once('.').unwrap_or((num, ""));
        if int.is_empty() && frac.is_empty() {
            return Err(err());
        }
        let int: u128 = if int.is_empty() { 0 } else { int.parse().map_err(|_| err())? };
        let mut value = int.checked_mul(scale).ok_or_else(err)?;
        let mut place = scale;
        for d in frac.chars() {
            let d = u128::from(d.to_digit(10).ok_or_else(err)?);
            place /= 10;
            value = value.checked_add(d * place).ok_or_else(err)?;
        }
        total = total.checked_add(value).ok_or_else(err)?;
        rest = tail;
    }
    let total = u64::try_from(total).map_err(|_| err())?;
    Ok(Duration::from_nanos(total))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        audit: AuditArgs,
    }

    #[test]
    fn defaults_are_antreas() {
        let cli = Cli::try_parse_from(["npagent"]).unwrap();
        let w = cli.audit.writer_config();
        assert_eq!(w.path, PathBuf::from("/var/log/antrea/networkpolicy/np.log"));
        assert_eq!(w.max_size, 500 * 1024 * 1024);
        assert_eq!(w.max_backups, 3);
        assert_eq!(w.max_age, Some(Duration::from_secs(28 * 86_400)));
        assert!(w.compress);
        assert_eq!(cli.audit.format, Format::Antrea);
        assert_eq!(cli.audit.dedup_window, Duration::from_secs(1));
        assert!(!cli.audit.config("n").chain);
        assert!(Cli::try_parse_from(["npagent", "--audit-chain"]).unwrap().audit.config("n").chain);
    }

    #[test]
    fn options_parse() {
        let cli = Cli::try_parse_from([
            "npagent",
            "--audit-log",
            "/tmp/x.log",
            "--audit-format",
            "json",
            "--audit-dedup-window",
            "250ms",
            "--audit-max-size",
            "1",
            "--audit-max-backups",
            "0",
            "--audit-max-age",
            "0",
            "--audit-compress",
            "false",
        ])
        .unwrap();
        let w = cli.audit.writer_config();
        assert_eq!((w.max_size, w.max_backups, w.max_age, w.compress), (1024 * 1024, 0, None, false));
        assert_eq!(cli.audit.format, Format::Json);
        assert_eq!(cli.audit.dedup_window, Duration::from_millis(250));
        assert!(Cli::try_parse_from(["npagent", "--audit-format", "xml"]).is_err());
    }

    #[test]
    fn go_durations() {
        assert_eq!(parse_go_duration("1s"), Ok(Duration::from_secs(1)));
        assert_eq!(parse_go_duration("1.5s"), Ok(Duration::from_millis(1_500)));
        assert_eq!(parse_go_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_go_duration("2h"), Ok(Duration::from_secs(7_200)));
        assert_eq!(parse_go_duration("100µs"), Ok(Duration::from_micros(100)));
        assert_eq!(parse_go_duration(".5ms"), Ok(Duration::from_micros(500)));
        assert_eq!(parse_go_duration("0"), Ok(Duration::ZERO));
        for bad in ["", "1", "s", "1x", "-1s", "1..2s", "."] {
            assert!(parse_go_duration(bad).is_err(), "{bad}");
        }
    }
}
