//! A chain of npagent's own in one of the node's `iptables` tables, jumped to from the first
//! rule of a built-in chain, kept level-triggered: read back (`iptables -S`) and, when it
//! differs, put back in one `iptables-restore --noflush` transaction. Through the node's own
//! `iptables` (the table and backend kube-proxy's rules are in). Used for the forwarded
//! connections' source address (`nat`) and the pod ports' host ends (`raw`).

use crate::rate_limited::RateLimitedWarning;
use std::net::IpAddr;
use std::time::Duration;
use tokio::io::AsyncWriteExt;

/// What a message says when npagent runs apart from the devices its rules name.
pub const NOT_HERE: &str = "run npagent in the node's network namespace";

/// How long one `iptables` command may take.
const TIMEOUT: Duration = Duration::from_secs(10);

/// One IP family's `iptables`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    V4,
    V6,
}

impl Family {
    /// The family of `ip`.
    pub fn of(ip: &IpAddr) -> Family {
        if ip.is_ipv4() {
            Family::V4
        } else {
            Family::V6
        }
    }

    fn command(self) -> &'static str {
        match self {
            Family::V4 => "iptables",
            Family::V6 => "ip6tables",
        }
    }
}

/// Where npagent's chain lives: `table`, jumped to first from built-in chain `hook`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chain {
    pub table: &'static str,
    pub hook: &'static str,
    pub name: &'static str,
}

impl Chain {
    /// The jump from the hook to the chain, as `iptables -S` prints it.
    fn jump(&self) -> String {
        format!("-A {} -j {}", self.hook, self.name)
    }

    /// `iptables-restore --noflush` input that leaves the chain holding `rules` alone
    /// (declaring a chain flushes it) and its jump first in the hook, once (`stale` earlier
    /// jumps deleted), in one transaction.
    fn restore_input(&self, rules: &[String], stale: usize) -> String {
        let Chain { table, hook, name } = self;
        let mut s = format!("*{table}\n:{name} - [0:0]\n");
        for _ in 0..stale {
            s.push_str(&format!("-D {hook} -j {name}\n"));
        }
        s.push_str(&format!("-I {hook} 1 -j {name}\n"));
        for rule in rules {
            s.push_str(rule);
            s.push('\n');
        }
        s.push_str("COMMIT\n");
        s
    }

    /// Is it in place: the jump the first rule of the hook (`hook`, as `iptables -S <hook>`
    /// prints it) and the only one, and the chain (`chain`, as `-S <name>` prints it) holding
    /// exactly `rules`? Also returns how many jumps there are.
    fn in_place(&self, hook: &str, chain: &str, rules: &[String]) -> (bool, usize) {
        let hook_rules: Vec<&str> = hook.lines().map(str::trim).filter(|l| l.starts_with("-A ")).collect();
        let jump = self.jump();
        let jumps = hook_rules.iter().filter(|r| **r == jump).count();
        let chain_rules: Vec<&str> = chain.lines().map(str::trim).filter(|l| l.starts_with("-A ")).collect();
        let ok = jumps == 1 && hook_rules.first() == Some(&jump.as_str()) && chain_rules == rules;
        (ok, jumps)
    }

    /// Puts the chain holding `rules` in place for `family` unless it is; says whether it had
    /// to.
    pub async fn ensure(&self, family: Family, rules: &[String]) -> Result<bool, IptablesError> {
        let iptables = family.command();
        let hook = run(iptables, &["-w", "5", "-t", self.table, "-S", self.hook], None).await?;
        // A missing chain is one to create.
        let chain = run(iptables, &["-w", "5", "-t", self.table, "-S", self.name], None).await.unwrap_or_default();
        let (ok, jumps) = self.in_place(&hook, &chain, rules);
        if ok {
            return Ok(false);
        }
        let restore = format!("{iptables}-restore");
        run(&restore, &["-w", "5", "--noflush"], Some(&self.restore_input(rules, jumps))).await?;
        Ok(true)
    }
}

/// What a chain's keeper says of its checks: a new message once (a warning when it says
/// npagent runs apart from the node, [`NOT_HERE`]), failures through a rate-limited warning.
#[derive(Default)]
pub struct Reports {
    said: Option<String>,
    failing: RateLimitedWarning,
    failures: u64,
}

impl Reports {
    /// Says what one check found (`Ok(Some(message))`: what changed), or that it failed, with
    /// `consequence` saying what holds meanwhile.
    pub fn check(&mut self, outcome: Result<Option<String>, String>, consequence: &str) {
        match outcome {
            Ok(Some(message)) if self.said.as_deref() != Some(message.as_str()) => {
                if message.contains(NOT_HERE) {
                    tracing::warn!("{message}");
                } else {
                    tracing::info!("{message}");
                }
                self.said = Some(message);
            }
            Ok(_) => {}
            Err(e) => {
                self.failures += 1;
                self.failing.total(self.failures, |_| tracing::warn!("{e}: {consequence} (retrying)"));
            }
        }
    }
}

/// An `iptables` command that could not run or failed, named.
#[derive(Debug, thiserror::Error)]
pub enum IptablesError {
    #[error("{command}: {error}")]
    Spawn { command: String, error: std::io::Error },
    #[error("{command} failed: {stderr}")]
    Failed { command: String, stderr: String },
    #[error("{command} took more than {TIMEOUT:?}")]
    Timeout { command: String },
}

/// Runs `command args` (with `input` on stdin); its stdout.
async fn run(command: &str, args: &[&str], input: Option<&str>) -> Result<String, IptablesError> {
    let name = format!("{command} {}", args.join(" "));
    let mut cmd = tokio::process::Command::new(command);
    cmd.args(args)
        .stdin(if input.is_some() { std::process::Stdio::piped() } else { std::process::Stdio::null() })
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let work = async {
        let mut child = cmd.spawn().map_err(|error| IptablesError::Spawn { command: name.clone(), error })?;
        if let (Some(text), Some(mut stdin)) = (input, child.stdin.take()) {
            stdin
                .write_all(text.as_bytes())
                .await
                .map_err(|error| IptablesError::Spawn { command: name.clone(), error })?;
        }
        let out =
            child.wait_with_output().await.map_err(|error| IptablesError::Spawn { command: name.clone(), error })?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            let stderr = String::from_utf8_lossy(&out.stderr).trim().to_owned();
            Err(IptablesError::Failed { command: name.clone(), stderr })
        }
    };
    tokio::time::timeout(TIMEOUT, work).await.unwrap_or_else(|_| Err(IptablesError::Timeout { command: name.clone() }))
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHAIN: Chain = Chain { table: "nat", hook: "POSTROUTING", name: "NPAGENT-POSTROUTING" };
    const RULE: &str = "-A NPAGENT-POSTROUTING -o gw0 -m mark --mark 0x4000/0x4000 -m addrtype ! --src-type LOCAL -j SNAT --to-source 169.254.0.253";

    #[test]
    fn the_jump_must_be_first_and_alone_and_the_chain_hold_the_rules_alone() {
        let rules = [RULE.to_string()];
        let chain = format!("-N NPAGENT-POSTROUTING\n{RULE}\n");
        let first =
            "-P POSTROUTING ACCEPT\n-A POSTROUTING -j NPAGENT-POSTROUTING\n-A POSTROUTING -j KUBE-POSTROUTING\n";
        assert_eq!(CHAIN.in_place(first, &chain, &rules), (true, 1));
        let second =
            "-P POSTROUTING ACCEPT\n-A POSTROUTING -j KUBE-POSTROUTING\n-A POSTROUTING -j NPAGENT-POSTROUTING\n";
        assert_eq!(CHAIN.in_place(second, &chain, &rules), (false, 1));
        let twice = format!("{first}-A POSTROUTING -j NPAGENT-POSTROUTING\n");
        assert_eq!(CHAIN.in_place(&twice, &chain, &rules), (false, 2));
        assert_eq!(CHAIN.in_place(first, "-N NPAGENT-POSTROUTING\n", &rules), (false, 1));
        assert_eq!(CHAIN.in_place(first, &format!("{chain}{RULE}\n"), &rules), (false, 1));
        assert_eq!(CHAIN.in_place("-P POSTROUTING ACCEPT\n", "", &rules), (false, 0));
        assert_eq!(CHAIN.in_place(first, "-N NPAGENT-POSTROUTING\n", &[]), (true, 1));
    }

    #[test]
    fn one_transaction_moves_the_jump_first_and_refills_the_chain() {
        assert_eq!(
            CHAIN.restore_input(&[RULE.to_string()], 2),
            format!(
                "*nat\n:NPAGENT-POSTROUTING - [0:0]\n-D POSTROUTING -j NPAGENT-POSTROUTING\n-D POSTROUTING -j \
                 NPAGENT-POSTROUTING\n-I POSTROUTING 1 -j NPAGENT-POSTROUTING\n{RULE}\nCOMMIT\n"
            )
        );
    }
}
