//! The `npagent` command line: its clap definitions, in the library so that tests (and the
//! deploy manifests' test) parse arguments exactly as the binary does.
//!
//! Environment variables: every option of `run` can also be set as `NPAGENT_` followed by
//! the option's name in capitals with `-` as `_` (`--audit-log` is `NPAGENT_AUDIT_LOG`); the
//! command line wins over the environment. `--node` alone also falls back to `NODE_NAME`.

use crate::audit::args::AuditArgs;
use crate::endpoint::{self, Endpoint};
use crate::explain::{DestinationPort, EndpointSpec};
use crate::model::node::{InterfaceAddr, NodeConfig};
use crate::model::{Cidr, Node};
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

/// Kubernetes NetworkPolicy enforcement and audit logging on an Open vSwitch bridge, over
/// OpenFlow 1.5.
#[derive(Debug, Parser)]
#[command(name = "npagent", version = VERSION, about, after_help = ENV_HELP)]
pub struct Cli {
    /// Log level of npagent's own messages (error, warn, info, debug, trace, off), or a
    /// tracing filter such as `info,npagent::agent=debug`.
    #[arg(long, global = true, default_value = "info", env = "NPAGENT_LOG_LEVEL", value_parser = parse_log_filter)]
    pub log_level: String,
    /// Format of npagent's own log on stderr: text (colours only on a terminal) or json (one
    /// object a line: timestamp, level, target, message and the event's fields).
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text, env = "NPAGENT_LOG_FORMAT")]
    pub log_format: LogFormat,
    #[command(subcommand)]
    pub command: Command,
}

/// `--version`: the package version and the git commit it was built from.
pub const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("NPAGENT_GIT_COMMIT"), ")");

const ENV_HELP: &str = "Every option of `run` can also be set with an environment variable: NPAGENT_ and the \
option's name in capitals, dashes as underscores (--audit-log: NPAGENT_AUDIT_LOG). The command line wins. \
--node falls back to NODE_NAME (a DaemonSet sets it from the downward API).";

/// The format of npagent's own log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// JSON lines.
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Enforce NetworkPolicies on the bridge and write the audit log, until SIGTERM/SIGINT.
    Run(Box<RunArgs>),
    /// Print the flows `run` would install, in `ovs-ofctl -O OpenFlow15 dump-flows
    /// --no-stats --names` text, sorted, to diff against the bridge.
    Flows(Box<CommonArgs>),
    /// Say whether a connection is allowed or dropped, and why: the isolating policies, the
    /// allowing rule with its conjunction id, cookie and flows. Exit status 0 allowed, 1
    /// dropped, 2 error.
    Explain(Box<ExplainArgs>),
    /// Decode or encode one OpenFlow message (a debugging aid like `ovs-ofctl ofp-print`).
    #[command(subcommand)]
    Ofp(OfpCommand),
    /// Print a shell completion script for npagent to stdout.
    Completions {
        /// The shell to complete in.
        shell: clap_complete::Shell,
    },
    /// Print npagent's manual pages (roff: npagent(1) and one per command) to stdout.
    Man,
    /// Audit log tools.
    #[command(subcommand)]
    Audit(AuditCommand),
    /// StagedNetworkPolicy tools.
    #[command(subcommand)]
    Staged(StagedCommand),
    /// Install npagent as the node's CNI plugin: copy this executable into the CNI bin
    /// directory as `npagent`, add host-local there unless the directory has one, and write
    /// the network config list `10-npagent.conflist` naming the agent's socket (each file
    /// replaced atomically). The DaemonSet's init container runs it.
    InstallCni(InstallCniArgs),
}

/// Where `install-cni` puts the plugin and its config.
#[derive(Debug, Args)]
pub struct InstallCniArgs {
    /// The node's CNI bin directory (created if missing), e.g. /opt/cni/bin as mounted.
    #[arg(long, value_name = "DIR")]
    pub bin_dir: PathBuf,
    /// The node's CNI config directory (created if missing), e.g. /etc/cni/net.d as mounted.
    #[arg(long, value_name = "DIR")]
    pub conf_dir: PathBuf,
    /// The agent's unix socket as the node sees it (`npagent run --cni-socket`), written into
    /// the config as its "socket" key.
    #[arg(long, value_name = "PATH", default_value = crate::install_cni::DEFAULT_SOCKET)]
    pub socket: PathBuf,
    /// Where to find the host-local IPAM plugin to copy when the bin directory has none.
    #[arg(long, value_name = "DIR", default_value = crate::install_cni::DEFAULT_IPAM_PLUGINS)]
    pub ipam_plugins: PathBuf,
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
pub enum StagedCommand {
    /// Print, per staged policy, the distinct connections (source pod or address, destination
    /// pod or address, protocol, port) it would cut (WouldDrop) or newly allow (WouldAllow),
    /// with packet counts and first and last seen, from the audit log's WouldDrop and
    /// WouldAllow lines (any format) and its rotated backups. Exit status 0, 2 on error.
    Report(StagedReportArgs),
}

/// `npagent staged report`.
#[derive(Debug, Args)]
pub struct StagedReportArgs {
    /// The audit log (`run --audit-log`); its rotated backups beside it are read too.
    #[arg(long, value_name = "PATH")]
    pub audit_log: PathBuf,
    /// Only connections last seen within this long before now (Go duration: 30m, 24h).
    #[arg(long, value_name = "DURATION", value_parser = crate::audit::args::parse_go_duration)]
    pub since: Option<std::time::Duration>,
    #[arg(short = 'o', long, value_enum, default_value = "human")]
    pub output: OutputFormat,
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
    #[arg(long, default_value = endpoint::DEFAULT_OFP, env = "NPAGENT_OFP")]
    pub ofp: Endpoint,
    /// OVSDB endpoint: unix:PATH or tcp:HOST:PORT.
    #[arg(long, default_value = endpoint::DEFAULT_OVSDB, env = "NPAGENT_OVSDB")]
    pub ovsdb: Endpoint,
    /// The bridge npagent owns.
    #[arg(long, default_value = "br-int", env = "NPAGENT_BRIDGE")]
    pub bridge: String,
    /// Read Namespaces, Pods and NetworkPolicies from this directory (*.yaml, *.yml, *.json,
    /// watched) instead of the Kubernetes API.
    #[arg(long, value_name = "DIR", env = "NPAGENT_MANIFESTS")]
    pub manifests: Option<PathBuf>,
    /// Kubeconfig for the Kubernetes API (default: $KUBECONFIG, ~/.kube/config, or the
    /// in-cluster service account). Ignored with --manifests.
    #[arg(long, value_name = "FILE", env = "NPAGENT_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// This node's name (JSON audit lines) [default: $NODE_NAME, else empty].
    #[arg(long, env = "NPAGENT_NODE")]
    pub node: Option<String>,
    /// Controller id npagent sets on its OpenFlow connection and in its logging flows.
    #[arg(long, default_value_t = 0x4e50, env = "NPAGENT_CONTROLLER_ID")]
    pub controller_id: u16,
    #[command(flatten)]
    pub node_net: NodeArgs,
}

/// The node's network as the pipeline needs it: what OVSDB cannot say.
#[derive(Debug, Clone, Default, Args)]
pub struct NodeArgs {
    /// An address of the node's gateway port, with its subnet's prefix length or without
    /// (a host address) (repeatable, or comma-separated; one per IP family): the node answers
    /// ARP and neighbour solicitations for it, connections from it into pods are the node's
    /// own (kubelet's probes), always allowed, and a gateway npagent creates gets it. In kube
    /// mode the default is the first address of each of the Node's podCIDRs; otherwise (`run`)
    /// the addresses the adopted gateway's device holds.
    #[arg(long = "gateway-ip", value_name = "ADDR[/PREFIX]", value_delimiter = ',', env = "NPAGENT_GATEWAY_IP", value_parser = InterfaceAddr::parse)]
    pub gateway_ips: Vec<InterfaceAddr>,
    /// The name of the gateway port npagent creates (`run` only) when the bridge has none
    /// (no port with `external_ids:antrea-type=gateway`) and the gateway has an address: an
    /// OVS internal port, its addresses set and brought up in npagent's network namespace.
    /// An existing gateway is adopted, whatever its name. Empty: create none.
    #[arg(long = "gateway", value_name = "NAME", default_value = "antrea-gw0", env = "NPAGENT_GATEWAY")]
    pub gateway: String,
    /// Another address of the node (repeatable, or comma-separated): connections from it that
    /// arrive by the gateway are the node's own too.
    #[arg(long = "node-ip", value_name = "ADDR", value_delimiter = ',', env = "NPAGENT_NODE_IP")]
    pub node_ips: Vec<IpAddr>,
    /// A Service range whose ClusterIPs kube-proxy handles on the node (repeatable, or
    /// comma-separated; e.g. 10.96.0.0/12): pods' connections to it go to the gateway without
    /// an egress verdict, and their egress is judged after the node's DNAT.
    #[arg(long = "service-cidr", value_name = "CIDR", value_delimiter = ',', env = "NPAGENT_SERVICE_CIDR", value_parser = parse_cidr_arg)]
    pub service_cidrs: Vec<Cidr>,
    /// An interface of the bridge that is an uplink or tunnel whatever its external_ids say
    /// (repeatable). Ports with `external_ids:antrea-type=uplink` or `tunnel` are uplinks
    /// anyway.
    #[arg(long = "uplink", value_name = "INTERFACE", env = "NPAGENT_UPLINK", value_delimiter = ',')]
    pub uplinks: Vec<String>,
}

impl NodeArgs {
    /// The node as these flags describe it, before OVSDB names its ports.
    pub fn node(&self) -> Node {
        self.config().node()
    }

    /// What these flags say of the node (in kube mode its Node and the ServiceCIDRs add to it).
    pub fn config(&self) -> NodeConfig {
        NodeConfig {
            gateway_addrs: self.gateway_ips.clone(),
            node_ips: self.node_ips.iter().copied().collect(),
            service_cidrs: self.service_cidrs.clone(),
        }
    }

    /// The gateway port to create when the bridge has none (`--gateway`), unless empty.
    pub fn gateway_to_create(&self) -> Option<String> {
        Some(self.gateway.clone()).filter(|name| !name.is_empty())
    }
}

fn parse_cidr_arg(s: &str) -> Result<Cidr, String> {
    crate::model::cidr::parse_cidr(s)
}

impl CommonArgs {
    /// This node's name: `--node` (or `NPAGENT_NODE`), else `NODE_NAME`, else empty.
    pub fn node_name(&self) -> String {
        self.node.clone().or_else(|| std::env::var("NODE_NAME").ok()).unwrap_or_default()
    }
}

/// Where the admin server listens unless told otherwise.
pub const DEFAULT_ADMIN_ADDR: &str = "127.0.0.1:9496";

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Default of --audit-allow-rate, --audit-drop-rate and --audit-staged-rate.
    #[arg(long, default_value_t = 5000, env = "NPAGENT_PACKET_IN_RATE", value_parser = clap::value_parser!(u32).range(1..))]
    pub packet_in_rate: u32,
    /// Allow copies per second the switch sends to npagent for logging, per pod (each pod has
    /// an OVS meter of its own, which a connection's copies pass when the pod opened it, so
    /// one pod's flood cannot crowd out another's lines; burst twice that). Forwarded traffic
    /// is never metered. Default: --packet-in-rate.
    #[arg(long, value_name = "PACKETS_PER_S", env = "NPAGENT_AUDIT_ALLOW_RATE", value_parser = clap::value_parser!(u32).range(1..))]
    pub audit_allow_rate: Option<u32>,
    /// Drop copies per second per isolated pod (meters apart from the Allow ones, so dropped
    /// floods cannot crowd out Allow lines), and security events (SpoofGuard and conntrack
    /// drops) per pod whose port sent them (and for the node's ports). Default:
    /// --packet-in-rate.
    #[arg(long, value_name = "PACKETS_PER_S", env = "NPAGENT_AUDIT_DROP_RATE", value_parser = clap::value_parser!(u32).range(1..))]
    pub audit_drop_rate: Option<u32>,
    /// Staged policies' verdict copies per second (WouldDrop and WouldAllow) per pod, as for
    /// Allow copies (meters apart from the Allow and Drop ones, so a flood of would-dropped
    /// packets cannot crowd out Allow or Drop lines; burst twice that). Default:
    /// --packet-in-rate.
    #[arg(long, value_name = "PACKETS_PER_S", env = "NPAGENT_AUDIT_STAGED_RATE", value_parser = clap::value_parser!(u32).range(1..))]
    pub audit_staged_rate: Option<u32>,
    /// Serve the admin server on HOST:PORT: /livez, /readyz (for probes) and /metrics
    /// (Prometheus). Port 9496 by default, on loopback; port 0 picks a free one (logged).
    #[arg(long, value_name = "HOST:PORT", default_value = DEFAULT_ADMIN_ADDR, env = "NPAGENT_ADMIN_ADDR")]
    pub admin_addr: SocketAddr,
    /// Deprecated alias of --admin-addr, kept for one release.
    #[arg(long, value_name = "HOST:PORT", conflicts_with = "admin_addr", env = "NPAGENT_METRICS_ADDR")]
    pub metrics_addr: Option<SocketAddr>,
    /// Name each staged policy and each ClusterNetworkPolicy rule on /metrics
    /// (npagent_staged_verdicts_total{policy, disposition},
    /// npagent_cluster_policy_verdicts_total{tier, policy, rule, action, direction}). Anyone
    /// who can reach --admin-addr reads the page (on loopback: every local user and
    /// hostNetwork pod); false keeps the names off it and counts the staged verdicts by
    /// disposition only, the ClusterNetworkPolicy verdicts by tier, action and direction
    /// (sums over the policies).
    #[arg(long, value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set, env = "NPAGENT_METRICS_POLICY_LABELS")]
    pub metrics_policy_labels: bool,
    #[command(flatten)]
    pub audit: AuditArgs,
    #[command(flatten)]
    pub conntrack: ConntrackArgs,
    #[command(flatten)]
    pub forwarded: ForwardedArgs,
    #[command(flatten)]
    pub cluster: ClusterArgs,
    #[command(flatten)]
    pub cni: CniArgs,
}

/// How pods on different nodes reach each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TrafficMode {
    /// Through the node's routing table: npagent keeps a route to every other Node's
    /// podCIDR via its InternalIP, turns IP forwarding on and masquerades pods' connections
    /// to the outside. The nodes must share one L2, or the network between them route the
    /// pod subnets.
    Routed,
}

/// The cluster beyond this node (with `--node` naming it among the Nodes).
#[derive(Debug, Clone, Args)]
pub struct ClusterArgs {
    /// How pods reach pods of other nodes (encapsulation is not supported yet).
    #[arg(long, value_enum, default_value = "routed", env = "NPAGENT_TRAFFIC_MODE")]
    pub traffic_mode: TrafficMode,
    /// Remove npagent's routes to the other nodes' pods when it stops cleanly (they stay by
    /// default, so that pods keep reaching each other while npagent restarts).
    #[arg(long, env = "NPAGENT_REMOVE_ROUTES_AT_EXIT")]
    pub remove_routes_at_exit: bool,
}

/// Connections the node forwards, told apart from those it starts.
#[derive(Debug, Clone, Args)]
pub struct ForwardedArgs {
    /// The source address connections get that the node forwards through the gateway and
    /// kube-proxy masquerades (NodePorts, hairpin): an iptables rule npagent keeps ahead of
    /// kube-proxy's masquerade, in the node's network namespace, gives it them instead of the
    /// gateway's address, so that they meet pods' ingress policy as non-pod peers rather than
    /// pass as the node's own (repeatable, one per IP family; an address no node or pod holds).
    #[arg(
        long = "forwarded-source",
        value_name = "ADDR",
        value_delimiter = ',',
        default_value = "169.254.0.253,fc01::aabb:ccdd:eeff",
        env = "NPAGENT_FORWARDED_SOURCE"
    )]
    pub forwarded_sources: Vec<IpAddr>,
    /// The mark kube-proxy sets on the connections it masquerades (1 << its
    /// --iptables-masquerade-bit; 0x4000 by default).
    #[arg(long, value_name = "MARK", default_value = "0x4000", env = "NPAGENT_MASQUERADE_MARK", value_parser = parse_mark)]
    pub masquerade_mark: u32,
}

/// A packet mark, in hex (`0x4000`) or decimal, not zero.
fn parse_mark(s: &str) -> Result<u32, String> {
    let parsed = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u32::from_str_radix(hex, 16),
        None => s.parse(),
    };
    match parsed {
        Ok(0) => Err("the mark must have a bit set".into()),
        Ok(mark) => Ok(mark),
        Err(_) => Err(format!("{s:?} is not a mark (0x4000, say)")),
    }
}

/// npagent as the node's CNI plugin.
#[derive(Debug, Clone, Args)]
pub struct CniArgs {
    /// Serve the CNI plugin on this unix socket (the network configuration's "socket" key):
    /// the `npagent` binary run by a container runtime with CNI_COMMAND set asks the agent
    /// here, and the agent attaches the pod. Off when unset.
    #[arg(long, value_name = "PATH", env = "NPAGENT_CNI_SOCKET")]
    pub cni_socket: Option<PathBuf>,
    /// Where the agent keeps a record of each attachment it made (to take them apart and
    /// release their addresses after a restart).
    #[arg(long, value_name = "DIR", default_value = DEFAULT_CNI_STATE_DIR, env = "NPAGENT_CNI_STATE_DIR")]
    pub cni_state_dir: PathBuf,
}

/// Where attachment records are kept unless told otherwise: on the node's disk, so that a
/// reboot's leftovers (ports in OVSDB, addresses in the IPAM store) are found and undone.
pub const DEFAULT_CNI_STATE_DIR: &str = "/var/lib/npagent/cni";

/// ovs-vswitchd's pidfile in the default run directory: its control socket is
/// `ovs-vswitchd.<pid>.ctl` beside it.
pub const DEFAULT_VSWITCHD_CTL: &str = "/var/run/openvswitch/ovs-vswitchd.pid";

/// Each local pod's share of the datapath's conntrack table.
#[derive(Debug, Clone, Args)]
pub struct ConntrackArgs {
    /// Conntrack entries each local pod's connections may hold (a conntrack zone limit per
    /// pod, set through ovs-vswitchd's control socket), so that one pod cannot fill the table
    /// for every other. Default: a twentieth of the datapath's `dpctl/ct-get-maxconns` when
    /// npagent starts (150000 of the userspace datapath's 3000000: each connection takes two
    /// entries, so ten zones at their limit fill the table), or 65536 where the datapath does
    /// not say. A warning says when the zones at their limit can fill the table. 0 turns the
    /// limits off.
    #[arg(long, value_name = "N", env = "NPAGENT_CONNTRACK_POD_LIMIT")]
    pub conntrack_pod_limit: Option<u32>,
    /// ovs-vswitchd's control socket (unixctl), or its pidfile (then the socket is
    /// `<name>.<pid>.ctl` beside it, read anew at each use), as `ovs-appctl -t` takes it.
    #[arg(long, value_name = "PATH", default_value = DEFAULT_VSWITCHD_CTL, env = "NPAGENT_VSWITCHD_CTL")]
    pub vswitchd_ctl: PathBuf,
}

/// Output of `explain`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
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
    pub port: Option<DestinationPort>,
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
    #[arg(long, env = "NPAGENT_OFP")]
    pub ofp: Option<Endpoint>,
    /// OVSDB endpoint of the bridge (implies the bridge; default
    /// unix:/var/run/openvswitch/db.sock when only --ofp is given).
    #[arg(long, env = "NPAGENT_OVSDB")]
    pub ovsdb: Option<Endpoint>,
    /// The bridge npagent owns.
    #[arg(long, default_value = "br-int")]
    pub bridge: String,
    #[command(flatten)]
    pub node_net: NodeArgs,
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

/// Level names `--log-level` accepts on their own.
const LEVELS: [&str; 6] = ["error", "warn", "info", "debug", "trace", "off"];

/// Checks a `--log-level`: comma-separated directives, each a level name or `TARGET=LEVEL`.
/// A bare word that is no level would be a tracing target at every level, silencing the rest
/// (`warning` would log nothing but target `warning`): refused.
fn parse_log_filter(s: &str) -> Result<String, String> {
    let hint = "expected a level (error, warn, info, debug, trace, off) or TARGET=LEVEL, comma-separated";
    if s.trim().is_empty() {
        return Err(format!("empty log filter: {hint}"));
    }
    for directive in s.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        let is_level = LEVELS.iter().any(|l| l.eq_ignore_ascii_case(directive));
        if !is_level && !directive.contains('=') {
            return Err(format!("unknown log level {directive:?}: {hint}"));
        }
    }
    tracing_subscriber::EnvFilter::builder()
        .parse(s)
        .map(|_| s.to_string())
        .map_err(|e| format!("bad log filter {s:?}: {e} ({hint})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_filters_are_levels_or_directives() {
        for ok in ["info", "WARN", "off", "info,npagent::agent=debug", "npagent=trace", "debug,kube=warn,"] {
            assert_eq!(parse_log_filter(ok).as_deref(), Ok(ok), "{ok}");
        }
        for (bad, culprit) in
            [("warning", "\"warning\""), ("info,verbose", "\"verbose\""), ("", "empty"), ("npagent=loud", "loud")]
        {
            let err = parse_log_filter(bad).expect_err(bad);
            assert!(err.contains(culprit), "{bad}: {err}");
        }
    }

    #[test]
    fn the_command_line_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
