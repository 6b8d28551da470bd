//! The `npagent` command line: its clap definitions, in the library so that tests (and the
//! deploy manifests' test) parse arguments exactly as the binary does.

use crate::audit::args::AuditArgs;
use crate::explain::{EndpointSpec, PortSpec};
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
    /// Say whether a connection is allowed or dropped, and why: the isolating policies, the
    /// allowing rule with its conjunction id, cookie and flows. Exit status 0 allowed, 1
    /// dropped, 2 error.
    Explain(Box<ExplainArgs>),
    /// Decode or encode one OpenFlow message (a debugging aid like `ovs-ofctl ofp-print`).
    #[command(subcommand)]
    Ofp(OfpCommand),
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
    /// Packets per second the switch sends to npagent for logging (an OVS meter; burst twice
    /// that). Forwarded traffic is never metered.
    #[arg(long, default_value_t = 5000)]
    pub packet_in_rate: u32,
    /// Serve Prometheus metrics on HOST:PORT.
    #[arg(long, value_name = "HOST:PORT")]
    pub metrics_addr: Option<SocketAddr>,
    #[command(flatten)]
    pub audit: AuditArgs,
}


/// Output of `explain`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    Human,
    Json,
}

#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// The source: NAMESPACE/POD, or an IP address (a pod's address is that pod).
    #[arg(long, value_name = "ENDPOINT")]
    pub from: EndpointSpec,
    /// The destination: NAMESPACE/POD, or an IP address.
    #[arg(long, value_name = "ENDPOINT")]
    pub to: EndpointSpec,
    /// Destination port: 80/TCP, tcp/80, udp/53, or a container port name of the destination
    /// pod (http/TCP); a bare number or name is TCP. Without it, only rules allowing every port
    /// count.
    #[arg(long, value_name = "PORT/PROTO")]
    pub port: Option<PortSpec>,
    #[arg(short = 'o', long, value_enum, default_value = "human")]
    pub output: OutputFormat,
    /// Read Namespaces, Pods and NetworkPolicies from this directory instead of the
    /// Kubernetes API; a manifest that cannot be used is an error.
    #[arg(long, value_name = "DIR")]
    pub manifests: Option<PathBuf>,
    /// Kubeconfig for the Kubernetes API. Ignored with --manifests.
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// Explain against this bridge (OpenFlow endpoint): its local ports and conjunction ids.
    /// Without --ofp and --ovsdb, explain compiles offline, as if the endpoints' pods were
    /// local.
    #[arg(long)]
    pub ofp: Option<String>,
    /// OVSDB endpoint of the bridge (implies the bridge; default
    /// unix:/var/run/openvswitch/db.sock when only --ofp is given).
    #[arg(long)]
    pub ovsdb: Option<String>,
    /// The bridge npagent owns.
    #[arg(long, default_value = "br-int")]
    pub bridge: String,
    /// Controller id of npagent's logging flows (as given to `run`).
    #[arg(long, default_value_t = 0x4e50)]
    pub controller_id: u16,
    /// Also trace the connection's first packet through the bridge with `ovs-appctl
    /// ofproto/trace` (the source must be a pod on the bridge) and check that the datapath
    /// agrees; exit status 2 when it does not.
    #[arg(long)]
    pub trace: bool,
    /// ovs-appctl's target (`-t`): the vswitchd's unixctl socket or pidfile, when it is not in
    /// the default run directory.
    #[arg(long, value_name = "PATH", requires = "trace")]
    pub ovs_appctl_target: Option<PathBuf>,
}
