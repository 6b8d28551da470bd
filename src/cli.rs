//! The `npagent` command line: its clap definitions, in the library so that tests (and the
//! deploy manifests' test) parse arguments exactly as the binary does.

use crate::audit::args::AuditArgs;
use crate::switch;
use clap::{Args, Parser, Subcommand};
use std::net::SocketAddr;
use std::path::PathBuf;

/// Kubernetes NetworkPolicy enforcement and audit logging on an Open vSwitch bridge, over
/// OpenFlow 1.5.
#[derive(Debug, Parser)]
#[command(name = "npagent", version, about)]
pub struct Cli {
    /// Log level of npagent's own messages (error, warn, info, debug, trace), or a tracing
    /// filter such as `npagent=debug`.
    #[arg(long, global = true, default_value = "info", env = "NPAGENT_LOG")]
    pub log_level: String,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Enforce NetworkPolicies on the bridge and write the audit log, until SIGTERM/SIGINT.
    Run(RunArgs),
    /// Print the flows `run` would install, in `ovs-ofctl -O OpenFlow15 dump-flows
    /// --no-stats --names` text, sorted, to diff against the bridge.
    Flows(CommonArgs),
    /// Decode or encode one OpenFlow message (a debugging aid like `ovs-ofctl ofp-print`).
    #[command(subcommand)]
    Ofp(OfpCommand),
    /// Audit log tools.
    #[command(subcommand)]
    Audit(AuditCommand),
}

#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Check audit log files written with --audit-chain (plain or .gz, any order; `.chain`
    /// sidecars next to them) and name the first break. Exit status 0 intact, 1 broken,
    /// 2 error.
    Verify {
        /// The log files, e.g. /var/log/antrea/networkpolicy/np*.log*.
        #[arg(num_args = 1.., required = true)]
        files: Vec<PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
pub enum OfpCommand {
    /// Print the message given as hex (whitespace ignored) as JSON; on a malformed message,
    /// print one line naming what is wrong and exit with status 2.
    Decode {
        /// The whole message in hex, e.g. 0614000800000001.
        #[arg(num_args = 1.., required = true)]
        hex: Vec<String>,
    },
    /// Read a message's JSON (as `decode` prints it) on stdin and print its hex.
    Encode,
}

/// Where the agent finds the switch, OVSDB and the cluster objects.
#[derive(Debug, Args)]
pub struct CommonArgs {
    /// OpenFlow endpoint of the bridge: unix:PATH or tcp:HOST:PORT.
    #[arg(long, default_value = switch::DEFAULT_ENDPOINT)]
    pub ofp: String,
    /// OVSDB endpoint: unix:PATH or tcp:HOST:PORT.
    #[arg(long, default_value = "unix:/var/run/openvswitch/db.sock")]
    pub ovsdb: String,
    /// The bridge npagent owns.
    #[arg(long, default_value = "br-int")]
    pub bridge: String,
    /// Read Namespaces, Pods and NetworkPolicies from this directory (*.yaml, *.yml, *.json,
    /// watched) instead of the Kubernetes API.
    #[arg(long, value_name = "DIR")]
    pub manifests: Option<PathBuf>,
    /// Kubeconfig for the Kubernetes API (default: $KUBECONFIG, ~/.kube/config, or the
    /// in-cluster service account). Ignored with --manifests.
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// This node's name (JSON audit lines).
    #[arg(long, env = "NODE_NAME", default_value = "")]
    pub node: String,
    /// Controller id npagent sets on its OpenFlow connection and in its logging flows.
    #[arg(long, default_value_t = 0x4e50)]
    pub controller_id: u16,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Default of --audit-allow-rate and --audit-drop-rate.
    #[arg(long, default_value_t = 5000)]
    pub packet_in_rate: u32,
    /// Allow copies per second the switch sends to npagent for logging (an OVS meter of its
    /// own; burst twice that). Forwarded traffic is never metered. Default: --packet-in-rate.
    #[arg(long, value_name = "PACKETS_PER_S")]
    pub audit_allow_rate: Option<u32>,
    /// Drop copies per second (a separate meter, so dropped floods cannot crowd out Allow
    /// lines). Default: --packet-in-rate.
    #[arg(long, value_name = "PACKETS_PER_S")]
    pub audit_drop_rate: Option<u32>,
    /// Serve Prometheus metrics on HOST:PORT.
    #[arg(long, value_name = "HOST:PORT")]
    pub metrics_addr: Option<SocketAddr>,
    #[command(flatten)]
    pub audit: AuditArgs,
}

