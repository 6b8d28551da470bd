//! The `npagent` command line.

use clap::{CommandFactory, Parser};
use npagent::agent::{self, AgentConfig, SourceConfig};
use npagent::cli::{
    AuditCommand, Cli, Command, CommonArgs, InstallCniArgs, LogFormat, OfpCommand, OutputFormat, RunArgs, StagedCommand,
};
use npagent::compiler::{self, Compiler, IdAllocator};
use npagent::snapshot;
use npagent::source::ovsdb::BridgeSpec;
use std::io::{IsTerminal, Write};
use std::time::Duration;

// jemalloc, not glibc's malloc: at cluster scale the agent builds its model from millions of
// small allocations on several threads, where glibc spent about a third of the CPU time in
// malloc and free and held more memory at the peak (docs/BENCHMARKS.md). One arena is set in
// .cargo/config.toml.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// `npagent ofp ...`: no runtime, no logging; exit status 2 on bad input.
fn ofp_command(cmd: OfpCommand) -> std::process::ExitCode {
    let result = match cmd {
        OfpCommand::Decode { hex } => npagent::ofp_tool::decode_hex(&hex.join("")),
        OfpCommand::Encode => {
            let mut json = String::new();
            match std::io::Read::read_to_string(&mut std::io::stdin(), &mut json) {
                Ok(_) => npagent::ofp_tool::encode_json(&json),
                Err(e) => Err(format!("cannot read stdin: {e}")),
            }
        }
    };
    match result {
        Ok(out) => {
            println!("{out}");
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            std::process::ExitCode::from(2)
        }
    }
}

/// `npagent audit ...`: no runtime; exit status 0 intact, 1 broken, 2 error.
fn audit_command(cmd: AuditCommand) -> std::process::ExitCode {
    let AuditCommand::Verify { files } = cmd;
    match npagent::audit::chain::verify::verify_paths(&files) {
        Ok(report) => {
            print!("{}", report.text());
            std::process::ExitCode::from(if report.broken.is_some() { 1 } else { 0 })
        }
        Err(e) => {
            eprintln!("npagent audit verify: {e}");
            std::process::ExitCode::from(2)
        }
    }
}

/// `npagent staged report ...`: no runtime; exit status 0, 2 naming the culprit on error.
fn staged_command(cmd: StagedCommand) -> std::process::ExitCode {
    let StagedCommand::Report(args) = cmd;
    let since = args.since.map(|d| std::time::SystemTime::now().checked_sub(d).unwrap_or(std::time::UNIX_EPOCH));
    let report = npagent::audit::staged_report::log_files(&args.audit_log)
        .and_then(|files| npagent::audit::staged_report::read_logs(&files, since));
    match report {
        Ok(report) => {
            match args.output {
                OutputFormat::Human => print!("{}", report.text()),
                OutputFormat::Json => println!("{}", report.json()),
            }
            if let Some(first) = &report.first_unreadable {
                eprintln!(
                    "npagent staged report: {} staged line(s) could not be read, the first: {first}",
                    report.unreadable
                );
            }
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("npagent staged report: {e}");
            std::process::ExitCode::from(2)
        }
    }
}

/// `npagent install-cni ...`: no runtime; each file it wrote or kept on stdout, exit status 1
/// naming the path on failure.
fn install_cni_command(args: &InstallCniArgs) -> std::process::ExitCode {
    use npagent::install_cni::{install, Plan};
    let plan = Plan {
        // The running executable itself, even if its file was replaced since it started.
        executable: "/proc/self/exe".into(),
        bin_dir: args.bin_dir.clone(),
        conf_dir: args.conf_dir.clone(),
        socket: args.socket.clone(),
        ipam_plugins: args.ipam_plugins.clone(),
    };
    match install(&plan) {
        Ok(steps) => {
            for step in steps {
                println!("npagent install-cni: {step}");
            }
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("npagent install-cni: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// `npagent explain ...`: exit status 0 allowed, 1 dropped, 2 error or a datapath that
/// disagrees (the error, naming its culprit, on stderr).
fn explain_command(args: &npagent::cli::ExplainArgs) -> std::process::ExitCode {
    use npagent::explain_command::Outcome;
    match npagent::explain_command::run(args) {
        Ok(Outcome::Allowed) => std::process::ExitCode::SUCCESS,
        Ok(Outcome::Dropped) => std::process::ExitCode::from(1),
        Ok(Outcome::DatapathDisagrees) => std::process::ExitCode::from(2),
        Err(e) => {
            eprintln!("npagent explain: {:#}", anyhow::Error::from(e));
            std::process::ExitCode::from(2)
        }
    }
}

/// The CNI plugin: a runtime ran the binary with `CNI_COMMAND` set and no arguments. The
/// result or error JSON on stdout, exit status 0 or 1; nothing else on stdout.
fn cni_plugin() -> std::process::ExitCode {
    let mut stdin = Vec::new();
    if let Err(e) = std::io::Read::read_to_end(&mut std::io::stdin(), &mut stdin) {
        eprintln!("npagent (CNI plugin): cannot read stdin: {e}");
    }
    let outcome = npagent::cni::plugin::run(|name| std::env::var(name).ok(), &stdin);
    if !outcome.stdout.is_empty() {
        println!("{}", outcome.stdout);
    }
    match outcome.success {
        true => std::process::ExitCode::SUCCESS,
        false => std::process::ExitCode::FAILURE,
    }
}

fn main() -> std::process::ExitCode {
    if std::env::var_os("CNI_COMMAND").is_some() && std::env::args_os().len() == 1 {
        return cni_plugin();
    }
    let cli = Cli::parse();
    let command = match cli.command {
        Command::Ofp(cmd) => return ofp_command(cmd),
        Command::Audit(cmd) => return audit_command(cmd),
        Command::Staged(cmd) => return staged_command(cmd),
        Command::Completions { shell } => {
            clap_complete::generate(shell, &mut Cli::command(), "npagent", &mut std::io::stdout());
            return std::process::ExitCode::SUCCESS;
        }
        Command::Man => return man_pages(),
        Command::Explain(args) => return explain_command(&args),
        Command::InstallCni(args) => return install_cni_command(&args),
        Command::Run(args) => {
            check_run_args(&args);
            Command::Run(args)
        }
        other => other,
    };
    init_logging(&cli.log_level, cli.log_format);
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!("cannot start the runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match command {
            Command::Run(args) => run(*args).await,
            Command::Flows(args) => flows(*args).await,
            Command::Ofp(_)
            | Command::Completions { .. }
            | Command::Man
            | Command::Explain(_)
            | Command::Audit(_)
            | Command::Staged(_)
            | Command::InstallCni(_) => unreachable!("handled before the runtime starts"),
        }
    });
    // The audit log is flushed by now; a blocking task still running (a manifests scan) must
    // not hold the exit.
    runtime.shutdown_timeout(Duration::from_millis(200));
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("npagent: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Checks what the command line cannot: exits with status 2 (clap's usage error) naming the
/// flag, before anything connects.
fn check_run_args(args: &RunArgs) {
    let invalid = |message: String| -> ! {
        let mut cli = Cli::command();
        cli.build(); // names the subcommand `npagent run` in the usage line
        let mut run = cli.find_subcommand("run").cloned().unwrap_or(cli);
        run.error(clap::error::ErrorKind::ValueValidation, message).exit()
    };
    if let Err(e) = npagent::audit::writer::check_writable(&args.audit.log) {
        invalid(format!("--audit-log {}: {e}", args.audit.log.display()));
    }
    if let Some(path) = &args.audit.changes_log {
        if let Err(e) = npagent::audit::writer::check_writable(path) {
            invalid(format!("--audit-changes-log {}: {e}", path.display()));
        }
    }
    if let (None, Some(path)) = (&args.common.manifests, &args.common.kubeconfig) {
        if let Err(e) = kube::config::Kubeconfig::read_from(path) {
            invalid(format!("--kubeconfig {}: {e}", path.display()));
        }
    }
}

/// npagent's own log on stderr, in `format`, filtered by `level` (checked by the parser).
fn init_logging(level: &str, format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::new(level);
    let logs = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    match format {
        LogFormat::Text => {
            let colours = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
            logs.with_ansi(colours).init();
        }
        LogFormat::Json => {
            logs.json().flatten_event(true).with_current_span(false).with_span_list(false).init();
            // A panic's message would be the one line of plain text in the log.
            std::panic::set_hook(Box::new(|panic| tracing::error!("{panic}")));
        }
    }
}

/// `npagent man`: npagent(1), then a page for each command, as roff on stdout.
fn man_pages() -> std::process::ExitCode {
    let mut out = std::io::stdout().lock();
    let mut top = Cli::command();
    top.build(); // gives the commands their `npagent <command>` names for the synopses
    let mut pages = vec![clap_mangen::Man::new(top.clone())];
    for sub in top.get_subcommands() {
        pages.push(clap_mangen::Man::new(sub.clone()).title(format!("npagent-{}", sub.get_name())));
    }
    for page in pages {
        if let Err(e) = page.render(&mut out) {
            eprintln!("npagent man: {e}");
            return std::process::ExitCode::FAILURE;
        }
    }
    std::process::ExitCode::SUCCESS
}

fn source_config(args: &CommonArgs) -> SourceConfig {
    match &args.manifests {
        Some(dir) => SourceConfig::Manifests(dir.clone()),
        None => SourceConfig::Kube { kubeconfig: args.kubeconfig.clone() },
    }
}

async fn run(args: RunArgs) -> anyhow::Result<()> {
    let node = args.common.node_name();
    let cfg = AgentConfig {
        ofp: args.common.ofp.clone(),
        ovsdb: args.common.ovsdb.clone(),
        bridge: bridge_spec(&args.common),
        node_net: args.common.node_net.config(),
        gateway: args.common.node_net.gateway_to_create(),
        source: source_config(&args.common),
        node: node.clone(),
        allow_rate: args.audit_allow_rate.unwrap_or(args.packet_in_rate),
        drop_rate: args.audit_drop_rate.unwrap_or(args.packet_in_rate),
        staged_rate: args.audit_staged_rate.unwrap_or(args.packet_in_rate),
        controller_id: args.common.controller_id,
        audit: args.audit.config(node.clone()),
        admin_addr: args.metrics_addr.unwrap_or(args.admin_addr),
        metrics_policy_labels: npagent::admin::metrics::PolicyLabels::from_flag(args.metrics_policy_labels),
        conntrack: agent::QuotaConfig {
            target: args.conntrack.vswitchd_ctl.clone(),
            limit: agent::PodLimit::from_flag(args.conntrack.conntrack_pod_limit),
        },
        forwarded: agent::ForwardedSnatConfig {
            sources: args.forwarded.forwarded_sources.clone(),
            masquerade_mark: args.forwarded.masquerade_mark,
        },
        remove_routes_at_exit: args.cluster.remove_routes_at_exit,
        cni: args
            .cni
            .cni_socket
            .clone()
            .map(|socket| agent::CniConfig { socket, state_dir: args.cni.cni_state_dir.clone() }),
    };
    if let Some(addr) = args.metrics_addr {
        tracing::warn!("--metrics-addr is deprecated and will be removed in the next release: use --admin-addr {addr}");
    }
    tracing::info!(
        "npagent {} starting: node {node:?}, bridge {} at {}",
        npagent::cli::VERSION,
        cfg.bridge.name,
        cfg.ofp
    );
    Ok(agent::run(cfg, shutdown_signal()).await?)
}

/// The bridge and its uplinks as `args` name them.
fn bridge_spec(args: &CommonArgs) -> BridgeSpec {
    BridgeSpec { name: args.bridge.clone(), uplinks: args.node_net.uplinks.clone() }
}

/// Resolves at the first SIGTERM or SIGINT.
async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) else {
        tracing::error!("cannot install signal handlers; stop npagent with SIGKILL");
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM received"),
        _ = int.recv() => tracing::info!("SIGINT received"),
    }
}

async fn flows(args: CommonArgs) -> anyhow::Result<()> {
    let source = source_config(&args);
    let bridge = bridge_spec(&args);
    let (store, ports, dump) = tokio::join!(
        snapshot::load_store(&source, false),
        snapshot::read_ports(&args.ovsdb, &bridge),
        snapshot::installed_flows(&args.ofp)
    );
    let mut store = store?;
    store.set_node_config(&args.node_net.node());
    store.set_bridge_ports(&ports?);

    // Use the bridge's conjunction ids when it can be reached, so the text matches it.
    let cfg = compiler::Config { controller_id: args.controller_id };
    let mut compiler = match dump {
        Ok(dump) => Compiler::recovering(cfg, &dump, 0),
        Err(e) => {
            let e = anyhow::Error::from(e);
            tracing::warn!("{e:#}; conjunction ids are freshly allocated and may differ from the bridge's");
            Compiler::new(cfg, IdAllocator::new(0))
        }
    };
    compiler.full(store.model(), 0);
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for line in compiler::flows_text(compiler.flows(), &compiler.port_names()) {
        writeln!(out, "{line}")?;
    }
    out.flush()?;
    // The process ends here: freeing a cluster's model piece by piece would only add time.
    std::mem::forget((store, compiler));
    Ok(())
}
