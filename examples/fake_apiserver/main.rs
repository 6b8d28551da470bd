//! A local stand-in for the Kubernetes API server, for `scripts/bench-scale-kube`: it loads a
//! manifests directory (as `npagent run --manifests` reads one) and serves its Namespaces, Pods
//! and NetworkPolicies over plain HTTP/1.1 with the list/watch protocol kube-rs's `watcher`
//! speaks: cluster-wide chunked lists (`limit`, `continue`) and watches that stay open until
//! `timeoutSeconds`, with a BOOKMARK every few seconds. The objects never change, so the
//! watches carry nothing else.
//!
//!   fake_apiserver DIR [--port PORT]
//!
//! Prints `listening on http://127.0.0.1:PORT` to stdout once bound (port 0, the default, picks
//! a free one) and serves until killed. One timestamped line per request to stderr; paths it
//! does not serve get a 404 Status. No TLS, no authentication, no admission: what the files say
//! is what it serves, with what the API server fills in itself (resourceVersion, the namespace
//! of namespaced objects, the Namespace name label).
//!
//! It runs on one thread, so that on a small machine it leaves the other cores to the agent.

mod cluster;
mod load;
mod query;
mod routes;
mod watch;

use std::convert::Infallible;
use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

const USAGE: &str = "usage: fake_apiserver DIR [--port PORT]";

fn main() -> ExitCode {
    let (dir, port) = match parse_args(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(e) => {
            eprintln!("fake_apiserver: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let cluster = match load::load_dir(&dir) {
        Ok(c) => Arc::new(c),
        Err(e) => {
            eprintln!("fake_apiserver: {}: {e}", dir.display());
            return ExitCode::FAILURE;
        }
    };
    eprintln!("fake_apiserver: {} (resourceVersion {})", cluster.summary(), cluster.resource_version);
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("fake_apiserver: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(serve(cluster, port)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fake_apiserver: {e}");
            ExitCode::FAILURE
        }
    }
}

fn parse_args(mut args: impl Iterator<Item = String>) -> Result<(PathBuf, u16), String> {
    let mut dir = None;
    let mut port = 0;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--port" => {
                let value = args.next().ok_or("--port needs a value")?;
                port = value.parse().map_err(|_| format!("--port {value:?} is not a port number"))?;
            }
            "-h" | "--help" => return Err("help".into()),
            _ if arg.starts_with('-') => return Err(format!("unknown option {arg:?}")),
            _ if dir.is_none() => dir = Some(PathBuf::from(arg)),
            _ => return Err(format!("unexpected argument {arg:?}")),
        }
    }
    Ok((dir.ok_or("the manifests directory is missing")?, port))
}

/// Binds 127.0.0.1:`port`, says where, and serves every connection until the process ends.
async fn serve(cluster: Arc<cluster::Cluster>, port: u16) -> Result<(), String> {
    let listener = TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
        .await
        .map_err(|e| format!("cannot bind 127.0.0.1:{port}: {e}"))?;
    let addr = listener.local_addr().map_err(|e| format!("cannot read the bound address: {e}"))?;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "listening on http://{addr}").and_then(|()| stdout.flush()).map_err(|e| format!("stdout: {e}"))?;
    drop(stdout);
    loop {
        let (sock, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of descriptors and the like: say so, breathe, go on.
                eprintln!("fake_apiserver: accept: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        let cluster = Arc::clone(&cluster);
        let conn = http1::Builder::new().serve_connection(
            TokioIo::new(sock),
            service_fn(move |req| {
                let resp = routes::respond(&cluster, &req);
                async move { Ok::<_, Infallible>(resp) }
            }),
        );
        tokio::spawn(async move {
            // A malformed request or a client gone ends that connection only.
            if let Err(e) = conn.await {
                eprintln!("fake_apiserver: connection from {peer}: {e}");
            }
        });
    }
}
