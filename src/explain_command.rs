//! `npagent explain`: load the model, compile it (offline, or with the bridge's ports and
//! conjunction ids), explain, print. Exit status 0 allowed, 1 dropped, 2 error.

use crate::agent::SourceConfig;
use crate::cli::{ExplainArgs, OutputFormat};
use crate::compiler::{self, Compiler, IdAllocator};
use crate::explain::{self, render, Query};
use crate::snapshot;
use anyhow::Context;
use std::process::ExitCode;

/// OVSDB endpoint when only `--ofp` names the bridge.
const DEFAULT_OVSDB: &str = "unix:/var/run/openvswitch/db.sock";

/// Runs the command and maps its outcome to the exit status, the error (naming its culprit)
/// on stderr.
pub fn main(args: ExplainArgs) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("npagent explain: cannot start the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(run(&args)) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("npagent explain: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// Prints the explanation; returns whether the connection is allowed.
async fn run(args: &ExplainArgs) -> anyhow::Result<bool> {
    let source = match &args.manifests {
        Some(dir) => SourceConfig::Manifests(dir.clone()),
        None => SourceConfig::Kube { kubeconfig: args.kubeconfig.clone() },
    };
    let mut store = snapshot::load_store(&source, true).await?;
    let bridge = (args.ofp.is_some() || args.ovsdb.is_some()).then(|| {
        (args.ofp.clone().unwrap_or_else(|| crate::switch::DEFAULT_ENDPOINT.to_string()), args.ovsdb.clone().unwrap_or_else(|| DEFAULT_OVSDB.to_string()))
    });
    let ids = match &bridge {
        Some((ofp, ovsdb)) => {
            store.set_ports(&snapshot::read_ports(ovsdb, &args.bridge).await?);
            let dump = snapshot::installed_flows(ofp).await.context("reading the bridge's conjunction ids")?;
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
    let cfg = compiler::Config { controller_id: args.controller_id, ..Default::default() };
    let mut compiler = Compiler::new(cfg, ids);
    compiler.full(store.model(), 0);
    let explanation = explain::explain(store.model(), &compiler, &query)?;
    let note = note(bridge.as_ref().map(|(ofp, _)| ofp.as_str()), &stand_ins);
    match args.output {
        OutputFormat::Human => print!("{}", render::human(&explanation, &note)),
        OutputFormat::Json => {
            let mut v = serde_json::to_value(&explanation)?;
            if let Some(obj) = v.as_object_mut() {
                obj.insert("compiled".into(), serde_json::Value::String(note));
            }
            println!("{v}");
        }
    }
    Ok(explanation.allowed)
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
