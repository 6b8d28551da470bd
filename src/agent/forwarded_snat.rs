//! Connections the node forwards, told apart from those it starts. kube-proxy masquerades
//! what it marks for it (NodePorts with `externalTrafficPolicy: Cluster`, hairpin, traffic
//! from outside the cluster to a ClusterIP) to the address of the interface the packet
//! leaves by: through the gateway, that is the gateway's own address, which the pipeline
//! takes for the node's own traffic (kubelet's probes), always allowed. So npagent keeps, in
//! the node's network namespace, a `nat` rule ahead of kube-proxy's masquerade that gives
//! such a connection, when the node only forwards it (its source is none of the node's
//! addresses) and it leaves by the gateway, a source address of its own
//! (`--forwarded-source`: 169.254.0.253, fc01::aabb:ccdd:eeff for IPv6, the addresses Antrea's
//! proxy uses), which no policy takes for the node: the destination's ingress
//! policy judges it as a non-pod peer, and logs it.
//!
//! The rule lives in chain `NPAGENT-POSTROUTING`, jumped to from the first rule of the `nat`
//! table's POSTROUTING, through the node's own `iptables` (the table and backend
//! kube-proxy's rules are in, where the order of rules is the order of NAT decisions).
//! Level-triggered: every [`CHECK_EVERY`] (and when the gateway changes) the chain and the
//! jump's place are read back and, when they differ, put back in one `iptables-restore`
//! transaction (kube-proxy prepends its own jump when it finds it missing). Nothing is removed
//! when npagent stops, so forwarded connections keep their address while it restarts.
//!
//! It holds on both datapaths: the address is in the packet (and its conntrack tuple), where
//! a kernel mark would not cross the userspace datapath's tap. The node never needs to hold
//! the address: its replies are un-NATed by the node's conntrack before they are routed.

use crate::host::netlink::link::{LinkError, Netlink};
use crate::model::node::NodeConfig;
use crate::rate_limited::RateLimitedWarning;
use crate::source::ovsdb::db::BridgePorts;
use std::net::IpAddr;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::sync::watch;

/// The chain npagent owns in the `nat` table.
pub const CHAIN: &str = "NPAGENT-POSTROUTING";
/// How often the rules are read back and repaired.
pub const CHECK_EVERY: Duration = Duration::from_secs(5);
/// How long one `iptables` command may take.
const TIMEOUT: Duration = Duration::from_secs(10);
/// What a warning says when npagent runs apart from the gateway's device.
const NOT_HERE: &str = "run npagent in the node's network namespace";

/// What the rules say (`--forwarded-source`, `--masquerade-mark`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForwardedSnatConfig {
    /// The source address of forwarded connections, at most one per IP family.
    pub sources: Vec<IpAddr>,
    /// The mark (bits) kube-proxy sets on connections it masquerades (0x4000 unless its
    /// `--iptables-masquerade-bit` says otherwise).
    pub masquerade_mark: u32,
}

/// One IP family's `iptables`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    V4,
    V6,
}

impl Family {
    fn of(ip: &IpAddr) -> Family {
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

/// The rule of one family: connections leaving by `gateway` that kube-proxy marked for
/// masquerading and whose source is no address of the node get `source`.
fn snat_rule(gateway: &str, mark: u32, source: IpAddr) -> String {
    format!(
        "-A {CHAIN} -o {gateway} -m mark --mark {mark:#x}/{mark:#x} -m addrtype ! --src-type LOCAL -j SNAT --to-source {source}"
    )
}

/// The jump from POSTROUTING to [`CHAIN`], as `iptables -S` prints it.
fn jump() -> String {
    format!("-A POSTROUTING -j {CHAIN}")
}

/// `iptables-restore --noflush` input that leaves [`CHAIN`] holding `rule` alone (declaring
/// a chain flushes it) and its jump first in POSTROUTING, once (`stale` earlier jumps deleted),
/// in one transaction.
fn restore_input(rule: &str, stale: usize) -> String {
    let mut s = format!("*nat\n:{CHAIN} - [0:0]\n");
    for _ in 0..stale {
        s.push_str(&format!("-D POSTROUTING -j {CHAIN}\n"));
    }
    s.push_str(&format!("-I POSTROUTING 1 -j {CHAIN}\n{rule}\nCOMMIT\n"));
    s
}

/// Is the rule set in place: the jump the first rule of POSTROUTING (`postrouting`, as
/// `iptables -S POSTROUTING` prints it) and the only one, and the chain (`chain`, as `-S
/// NPAGENT-POSTROUTING` prints it) holding exactly `rule`? Also returns how many jumps there
/// are.
fn in_place(postrouting: &str, chain: &str, rule: &str) -> (bool, usize) {
    let rules: Vec<&str> = postrouting.lines().map(str::trim).filter(|l| l.starts_with("-A ")).collect();
    let jump = jump();
    let jumps = rules.iter().filter(|r| **r == jump).count();
    let chain_rules: Vec<&str> = chain.lines().map(str::trim).filter(|l| l.starts_with("-A ")).collect();
    let ok = jumps == 1 && rules.first() == Some(&jump.as_str()) && chain_rules == [rule];
    (ok, jumps)
}

#[derive(Debug, thiserror::Error)]
enum SnatError {
    #[error("{command}: {error}")]
    Spawn { command: String, error: std::io::Error },
    #[error("{command} failed: {stderr}")]
    Failed { command: String, stderr: String },
    #[error("{command} took more than {TIMEOUT:?}")]
    Timeout { command: String },
}

/// Runs `command args` (with `input` on stdin); its stdout.
async fn run(command: &str, args: &[&str], input: Option<&str>) -> Result<String, SnatError> {
    let name = format!("{command} {}", args.join(" "));
    let mut cmd = tokio::process::Command::new(command);
    cmd.args(args)
        .stdin(if input.is_some() { std::process::Stdio::piped() } else { std::process::Stdio::null() })
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let work = async {
        let mut child = cmd.spawn().map_err(|error| SnatError::Spawn { command: name.clone(), error })?;
        if let (Some(text), Some(mut stdin)) = (input, child.stdin.take()) {
            stdin
                .write_all(text.as_bytes())
                .await
                .map_err(|error| SnatError::Spawn { command: name.clone(), error })?;
        }
        let out = child.wait_with_output().await.map_err(|error| SnatError::Spawn { command: name.clone(), error })?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            let stderr = String::from_utf8_lossy(&out.stderr).trim().to_owned();
            Err(SnatError::Failed { command: name.clone(), stderr })
        }
    };
    tokio::time::timeout(TIMEOUT, work).await.unwrap_or_else(|_| Err(SnatError::Timeout { command: name.clone() }))
}

/// Puts one family's rule in place unless it is; says whether it had to.
async fn ensure(family: Family, rule: &str) -> Result<bool, SnatError> {
    let iptables = family.command();
    let postrouting = run(iptables, &["-w", "5", "-t", "nat", "-S", "POSTROUTING"], None).await?;
    // A missing chain is one to create.
    let chain = run(iptables, &["-w", "5", "-t", "nat", "-S", CHAIN], None).await.unwrap_or_default();
    let (ok, jumps) = in_place(&postrouting, &chain, rule);
    if ok {
        return Ok(false);
    }
    let restore = format!("{iptables}-restore");
    run(&restore, &["-w", "5", "--noflush"], Some(&restore_input(rule, jumps))).await?;
    Ok(true)
}

/// Keeps the rules in place for the gateway OVSDB names (`ports`) and the IP families the
/// node has addresses in (`config`: only traffic from those is taken for the node's own),
/// until either channel closes.
pub async fn run_forwarded_snat(
    cfg: ForwardedSnatConfig,
    mut ports: watch::Receiver<BridgePorts>,
    mut config: watch::Receiver<NodeConfig>,
) {
    let mut said: Option<String> = None;
    let mut failing = RateLimitedWarning::default();
    let mut failures = 0u64;
    loop {
        let gateway = ports.borrow_and_update().gateway.as_ref().map(|g| g.interface.clone());
        let node = config.borrow_and_update().clone();
        if let Some(gateway) = gateway {
            match step(&cfg, &gateway, &node).await {
                Ok(Some(message)) => {
                    if said.as_deref() != Some(message.as_str()) {
                        if message.contains(NOT_HERE) {
                            tracing::warn!("{message}");
                        } else {
                            tracing::info!("{message}");
                        }
                        said = Some(message);
                    }
                }
                Ok(None) => {}
                Err(e) => {
                    failures += 1;
                    failing.total(failures, |_| {
                        tracing::warn!(
                            "cannot keep the node's forwarded connections apart from its own ({e}): connections the \
                             node masquerades to the gateway (NodePorts, hairpin) pass as the node's own into every \
                             pod until it works (retrying)"
                        )
                    });
                }
            }
        }
        tokio::select! {
            changed = ports.changed() => if changed.is_err() { return },
            changed = config.changed() => if changed.is_err() { return },
            _ = tokio::time::sleep(CHECK_EVERY) => {}
        }
    }
}

/// One check of every family; what changed, to say once.
async fn step(cfg: &ForwardedSnatConfig, gateway: &str, node: &NodeConfig) -> Result<Option<String>, String> {
    match Netlink::open().map_err(|e| e.to_string())?.device(gateway).await {
        Ok(_) => {}
        Err(LinkError::NotFound(_)) => {
            return Ok(Some(format!(
                "the gateway's device {gateway} is not in npagent's network namespace: connections the node \
                 forwards are not told apart from its own ({NOT_HERE})"
            )))
        }
        Err(e) => return Err(e.to_string()),
    }
    let own: Vec<IpAddr> = node.gateway_addrs.iter().map(|a| a.ip).chain(node.node_ips.iter().copied()).collect();
    let mut installed = Vec::new();
    for source in &cfg.sources {
        let family = Family::of(source);
        // Without a node address of that family nothing of it passes as the node's own.
        if !own.iter().any(|ip| Family::of(ip) == family) {
            continue;
        }
        let rule = snat_rule(gateway, cfg.masquerade_mark, *source);
        if ensure(family, &rule).await.map_err(|e| e.to_string())? {
            installed.push(source.to_string());
        }
    }
    Ok((!installed.is_empty()).then(|| {
        format!(
            "connections the node forwards through {gateway} and masquerades (mark {:#x}) leave it from {} (chain \
             {CHAIN}, first in nat POSTROUTING): pods' ingress policy judges them as non-pod peers",
            cfg.masquerade_mark,
            installed.join(", ")
        )
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    const RULE: &str = "-A NPAGENT-POSTROUTING -o gw0 -m mark --mark 0x4000/0x4000 -m addrtype ! --src-type LOCAL -j SNAT --to-source 169.254.0.253";

    #[test]
    fn the_rule_reads_as_iptables_prints_it() {
        assert_eq!(snat_rule("gw0", 0x4000, "169.254.0.253".parse().unwrap()), RULE);
    }

    #[test]
    fn the_jump_must_be_first_and_alone_and_the_chain_hold_the_rule_alone() {
        let chain = format!("-N NPAGENT-POSTROUTING\n{RULE}\n");
        let first =
            "-P POSTROUTING ACCEPT\n-A POSTROUTING -j NPAGENT-POSTROUTING\n-A POSTROUTING -j KUBE-POSTROUTING\n";
        assert_eq!(in_place(first, &chain, RULE), (true, 1));
        let second =
            "-P POSTROUTING ACCEPT\n-A POSTROUTING -j KUBE-POSTROUTING\n-A POSTROUTING -j NPAGENT-POSTROUTING\n";
        assert_eq!(in_place(second, &chain, RULE), (false, 1));
        let twice = format!("{first}-A POSTROUTING -j NPAGENT-POSTROUTING\n");
        assert_eq!(in_place(&twice, &chain, RULE), (false, 2));
        assert_eq!(in_place(first, "-N NPAGENT-POSTROUTING\n", RULE), (false, 1));
        assert_eq!(in_place(first, &format!("{chain}{RULE}\n"), RULE), (false, 1));
        assert_eq!(in_place("-P POSTROUTING ACCEPT\n", "", RULE), (false, 0));
    }

    #[test]
    fn one_transaction_moves_the_jump_first_and_refills_the_chain() {
        assert_eq!(
            restore_input(RULE, 2),
            format!(
                "*nat\n:NPAGENT-POSTROUTING - [0:0]\n-D POSTROUTING -j NPAGENT-POSTROUTING\n-D POSTROUTING -j \
                 NPAGENT-POSTROUTING\n-I POSTROUTING 1 -j NPAGENT-POSTROUTING\n{RULE}\nCOMMIT\n"
            )
        );
    }
}
