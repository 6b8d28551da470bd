//! The agent's CNI socket (`--cni-socket`): one request per connection, read to its end, one
//! answer written back. Commands run one at a time against the [`Attacher`], except an ADD's
//! wait for the pod's flows, during which others go on.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::Mutex;

use super::attach::Attacher;
use super::plugin::{Answer, Request};
use super::spec::{self, code, CniError, Command, NetConf};

/// The longest request read.
const MAX_REQUEST: u64 = 1 << 20;
/// How long a plugin may take to send its request.
const REQUEST_WITHIN: Duration = Duration::from_secs(10);

/// Binds `path` (replacing a socket an earlier run left), readable and writable by its owner
/// only: whoever can write to it can attach pods.
pub fn bind(path: &Path) -> std::io::Result<UnixListener> {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket()) {
        std::fs::remove_file(path)?;
    }
    let listener = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

/// Serves `listener` until the task is dropped.
pub async fn serve(listener: UnixListener, attacher: Arc<Mutex<Attacher>>) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let attacher = Arc::clone(&attacher);
                tokio::spawn(async move {
                    if let Err(e) = answer_connection(stream, &attacher).await {
                        tracing::warn!("CNI socket: {e}");
                    }
                });
            }
            Err(e) => {
                tracing::warn!("CNI socket: accept: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

async fn answer_connection(mut stream: UnixStream, attacher: &Mutex<Attacher>) -> std::io::Result<()> {
    let mut bytes = Vec::new();
    let read = tokio::time::timeout(REQUEST_WITHIN, (&mut stream).take(MAX_REQUEST).read_to_end(&mut bytes)).await;
    let answer = match read {
        Ok(Ok(_)) => match serde_json::from_slice::<Request>(&bytes) {
            Ok(request) => handle(request, attacher).await,
            Err(e) => {
                Answer::Error(CniError::new(code::DECODE_FAILURE, "the plugin's request is malformed").with_details(e))
            }
        },
        Ok(Err(e)) => return Err(e),
        Err(_) => Answer::Error(CniError::new(code::IO_FAILURE, format!("no request within {REQUEST_WITHIN:?}"))),
    };
    // An answer that cannot be serialised is no answer: the plugin then says the agent did
    // not answer, rather than printing an empty result.
    let bytes = serde_json::to_vec(&answer).map_err(std::io::Error::other)?;
    stream.write_all(&bytes).await?;
    stream.shutdown().await
}

/// Runs one command.
pub async fn handle(request: Request, attacher: &Mutex<Attacher>) -> Answer {
    let Request { env, config } = request;
    if let Err(e) = env.validate() {
        return Answer::Error(e);
    }
    let started = std::time::Instant::now();
    let conf = match NetConf::from_value(config) {
        Ok(conf) => conf,
        Err(e) => return Answer::Error(e),
    };
    let who = format!("{:?} container {} {}", env.command, env.container_id, env.ifname);
    let outcome: Result<Value, CniError> = match env.command {
        Command::Version => Ok(spec::version_result(&conf.cni_version)),
        Command::Status => attacher.lock().await.status().map(|()| Value::Null),
        Command::Add => {
            let pending = attacher.lock().await.add(&env, &conf).await;
            match pending {
                Ok(p) => Attacher::wait_enforced(attacher, p)
                    .await
                    .and_then(|r| serde_json::to_value(r).map_err(|e| CniError::new(code::IO_FAILURE, e.to_string()))),
                Err(e) => Err(e),
            }
        }
        Command::Del => attacher.lock().await.del(&env, &conf).await.map(|()| Value::Null),
        Command::Check => attacher.lock().await.check(&env, &conf).await.map(|()| Value::Null),
        Command::Gc => attacher.lock().await.gc(&conf).await.map(|()| Value::Null),
    };
    match outcome {
        Ok(v) => {
            tracing::info!("CNI {who}: done in {:?}", started.elapsed());
            Answer::Result(v)
        }
        Err(mut e) => {
            tracing::warn!("CNI {who}: {e}");
            e.cni_version = conf.cni_version;
            Answer::Error(e)
        }
    }
}
