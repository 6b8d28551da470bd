//! `npagent explain`: load the model, compile it (offline, or with the bridge's ports and
//! conjunction ids), explain, with `--trace` ask OVS too, print. The outcome is the exit
//! status (`main.rs`): 0 allowed, 1 dropped, 2 error or a datapath that disagrees.

use crate::agent::SourceConfig;
use crate::cli::{ExplainArgs, OutputFormat};
use crate::compiler::{self, Compiler, IdAllocator};
use crate::endpoint::Endpoint;
use crate::explain::staged::StagedExplanation;
use crate::explain::trace::{self, TracePacket, TraceVerdict};
use crate::explain::{self, render, ExplainError, Explanation, Query};
use crate::model::{Model, ObjectRef};
use crate::snapshot::{self, SnapshotError};
use crate::source::ovsdb::BridgeSpec;

/// What the command found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Allowed,
    Dropped,
    /// `--trace`: OVS's datapath decides otherwise than the explanation.
    DatapathDisagrees,
}

/// Why the command could not answer; each names its culprit.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    #[error("cannot start the runtime")]
    Runtime(#[source] std::io::Error),
    #[error("--trace needs the bridge: give --ofp and --ovsdb")]
    TraceNeedsBridge,
    /// The model or the bridge's ports could not be read.
    #[error(transparent)]
    Input(#[from] SnapshotError),
    #[error("reading the bridge's conjunction ids")]
    ConjunctionIds(#[source] SnapshotError),
    #[error(transparent)]
    Explain(#[from] ExplainError),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    #[error("--trace needs the source to be a pod on bridge {bridge}; {source_name} is not")]
    TraceSourceNotLocal { bridge: String, source_name: String },
    #[error("--trace: the port of {0} has no MAC address in OVSDB")]
    TraceSourceNoMac(String),
    #[error("running ovs-appctl")]
    OvsAppctl(#[source] std::io::Error),
    #[error("ovs-appctl ofproto/trace {bridge} {flow}: {stderr}")]
    TraceFailed { bridge: String, flow: String, stderr: String },
    #[error("ofproto/trace {flow}: no datapath actions in its output:\n{output}")]
    NoDatapathActions { flow: String, output: String },
}

/// Runs the command on a runtime of its own: prints the explanation (and the trace), returns
/// the outcome.
pub fn run(args: &ExplainArgs) -> Result<Outcome, CommandError> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(CommandError::Runtime)?;
    runtime.block_on(explain_and_print(args))
}

/// Prints the explanation (and the trace); returns the outcome.
async fn explain_and_print(args: &ExplainArgs) -> Result<Outcome, CommandError> {
    if args.trace && args.ofp.is_none() && args.ovsdb.is_none() {
        return Err(CommandError::TraceNeedsBridge);
    }
    let source = match &args.manifests {
        Some(dir) => SourceConfig::Manifests(dir.clone()),
        None => SourceConfig::Kube { kubeconfig: args.kubeconfig.clone() },
    };
    let mut store = snapshot::load_store(&source, true).await?;
    store.set_node_config(&args.node_net.node());
    let bridge = (args.ofp.is_some() || args.ovsdb.is_some()).then(|| {
        (
            args.ofp.clone().unwrap_or_else(Endpoint::default_ofp),
            args.ovsdb.clone().unwrap_or_else(Endpoint::default_ovsdb),
        )
    });
    let ids = match &bridge {
        Some((ofp, ovsdb)) => {
            let bridge = BridgeSpec { name: args.bridge.clone(), uplinks: args.node_net.uplinks.clone() };
            store.set_bridge_ports(&snapshot::read_ports(ovsdb, &bridge).await?);
            let dump = snapshot::installed_flows(ofp).await.map_err(CommandError::ConjunctionIds)?;
            IdAllocator::recover(&dump, 0)
        }
        None => IdAllocator::new(0),
    };
    let query = Query { from: args.from.clone(), to: args.to.clone(), port: args.port.clone() };
    let pods: Vec<_> = [&query.from, &query.to]
        .into_iter()
        .filter_map(|spec| explain::endpoint_pod(store.model(), spec).transpose())
        .collect::<Result<Vec<_>, _>>()?
        .into_iter()
        .map(|(r, _)| r.clone())
        .collect();
    let (ports, stand_ins) = explain::ports_with_stand_ins(store.model(), &pods.iter().collect::<Vec<_>>());
    store.set_ports(&ports);
    let cfg = compiler::Config { controller_id: args.controller_id };
    let mut compiler = Compiler::new(cfg.clone(), ids);
    compiler.full(store.model(), 0);
    let explanation = explain::explain(store.model(), &compiler, &query)?;
    let staged = staged_explanation(store.model(), cfg, &query, &explanation)?;
    let note = note(bridge.as_ref().map(|(ofp, _)| ofp.to_string()).as_deref(), &stand_ins);
    let traced = if args.trace { Some(trace_in_ovs(args, store.model(), &stand_ins, &explanation)?) } else { None };
    match args.output {
        OutputFormat::Human => {
            print!("{}", render::human(&explanation, &note));
            if let Some(s) = &staged {
                print!("{}", render::staged(s));
            }
            if let Some(t) = &traced {
                print!("{}", render::trace(t));
            }
        }
        OutputFormat::Json => {
            let mut v = serde_json::to_value(&explanation)?;
            if let Some(obj) = v.as_object_mut() {
                obj.insert("compiled".into(), serde_json::Value::String(note));
                if let Some(s) = &staged {
                    obj.insert("staged".into(), serde_json::to_value(s)?);
                }
                if let Some(t) = &traced {
                    obj.insert("trace".into(), serde_json::to_value(t)?);
                }
            }
            println!("{v}");
        }
    }
    if let Some(t) = traced.filter(|t| !t.agrees) {
        let (says, does) = if explanation.allowed { ("allowed", "drops") } else { ("dropped", "delivers") };
        eprintln!(
            "npagent explain: THE DATAPATH DISAGREES: explained {says}, but OVS {does} the packet ({})",
            t.datapath_actions
        );
        return Ok(Outcome::DatapathDisagrees);
    }
    Ok(if explanation.allowed { Outcome::Allowed } else { Outcome::Dropped })
}

/// The staged verdict when the model holds staged policies: the question answered against
/// the staged view, compiled apart (its conjunction ids are its own, not the bridge's).
pub fn staged_explanation(
    model: &Model,
    cfg: compiler::Config,
    query: &Query,
    enforced: &Explanation,
) -> Result<Option<StagedExplanation>, ExplainError> {
    if model.staged_policies.is_empty() {
        return Ok(None);
    }
    let view = crate::model::staged::staged_view(model);
    let mut compiler = Compiler::new(cfg, IdAllocator::new(0));
    compiler.full(&view, 0);
    let staged = explain::explain(&view, &compiler, query)?;
    Ok(Some(explain::staged::compare(model, enforced, staged)))
}

/// A placeholder destination MAC for a destination that is not a pod of this bridge (OVS
/// forwards by IP address first; any unicast address does).
const REMOTE_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];

/// Runs `ovs-appctl ofproto/trace` for the connection's first packet, from the source pod's
/// real port, MAC and address.
fn trace_in_ovs(
    args: &ExplainArgs,
    model: &Model,
    stand_ins: &[ObjectRef],
    e: &Explanation,
) -> Result<TraceVerdict, CommandError> {
    let real_port = |end: &explain::ConnectionEnd| {
        end.ofport.and_then(|o| model.ports.get(&o)).filter(|p| !stand_ins.contains(&p.pod)).filter(|_| end.pod)
    };
    let src = real_port(&e.from).ok_or_else(|| CommandError::TraceSourceNotLocal {
        bridge: args.bridge.clone(),
        source_name: e.from.name.clone(),
    })?;
    let src_mac = src.mac.ok_or_else(|| CommandError::TraceSourceNoMac(e.from.name.clone()))?;
    let dst_mac = real_port(&e.to).and_then(|p| p.mac).unwrap_or(REMOTE_MAC);
    let transport = args.port.as_ref().zip(e.port.as_ref()).map(|(spec, p)| (spec.protocol, p.port));
    let flow =
        trace::flow(&TracePacket { in_port: src.ofport, src_mac, dst_mac, src: e.from.ip, dst: e.to.ip, transport });
    let mut cmd = std::process::Command::new("ovs-appctl");
    if let Some(target) = &args.ovs_appctl_target {
        cmd.arg("-t").arg(target);
    }
    cmd.args(["ofproto/trace", &args.bridge, &flow, "--ct-next", trace::CT_NEXT]);
    let out = cmd.output().map_err(CommandError::OvsAppctl)?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(CommandError::TraceFailed {
            bridge: args.bridge.clone(),
            flow,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    trace::verdict(flow.clone(), &text, e.allowed)
        .ok_or_else(|| CommandError::NoDatapathActions { flow, output: text.into_owned() })
}

/// Where the conjunction ids, cookies and flows come from.
fn note(bridge: Option<&str>, stand_ins: &[crate::model::ObjectRef]) -> String {
    let mut note = match bridge {
        Some(ofp) => format!("compiled against the bridge at {ofp}: its local ports and conjunction ids"),
        None => "compiled offline, the endpoints' pods as local ports: conjunction ids and cookies are this compile's, not a bridge's".to_string(),
    };
    if bridge.is_some() && !stand_ins.is_empty() {
        let names: Vec<String> = stand_ins.iter().map(ToString::to_string).collect();
        note.push_str(&format!("; not on this bridge, compiled as if local: {}", names.join(", ")));
    }
    note
}
