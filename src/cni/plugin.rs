//! The plugin side: what the `npagent` binary does when a runtime starts it with `CNI_COMMAND`
//! set. A thin client: it reads the environment and the configuration, answers VERSION
//! itself, and hands every other command to the agent over the unix socket the configuration
//! names (`"socket"`), one request per connection; the agent holds the state and does the
//! work. Blocking I/O: the plugin is a short-lived process with one thing to wait for.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::spec::{self, code, CniError, Command, Env, NetConf};

/// How long the plugin waits for the agent's answer: an ADD waits for the pod's flows, which
/// a busy agent may take seconds to install.
pub const ANSWER_WITHIN: Duration = Duration::from_secs(120);
/// The longest answer the plugin reads.
const MAX_ANSWER: u64 = 1 << 20;

/// One request to the agent: the runtime's environment and configuration, as given.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Request {
    pub env: Env,
    pub config: Value,
}

/// The agent's answer: a result to print (ADD, CHECK's `null`...) or a CNI error.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "lowercase")]
pub enum Answer {
    Result(Value),
    Error(CniError),
}

/// What the plugin prints and its exit status.
#[derive(Debug, PartialEq)]
pub struct Outcome {
    pub stdout: String,
    pub success: bool,
}

/// Runs one CNI command: `var` reads the environment, `stdin` is the configuration.
pub fn run(var: impl Fn(&str) -> Option<String>, stdin: &[u8]) -> Outcome {
    let answer = match answer(var, stdin) {
        Ok(answer) => answer,
        Err(e) => Answer::Error(e),
    };
    match answer {
        Answer::Result(Value::Null) => Outcome { stdout: String::new(), success: true },
        Answer::Result(v) => Outcome { stdout: v.to_string(), success: true },
        Answer::Error(e) => Outcome { stdout: serde_json::to_string(&e).unwrap_or_default(), success: false },
    }
}

fn answer(var: impl Fn(&str) -> Option<String>, stdin: &[u8]) -> Result<Answer, CniError> {
    let env = Env::from_vars(var)?;
    if env.command == Command::Version {
        // VERSION may come with a configuration naming only its version, or with none.
        let version = serde_json::from_slice::<Value>(stdin)
            .ok()
            .and_then(|v| v.get("cniVersion").and_then(Value::as_str).map(str::to_string))
            .unwrap_or_else(|| spec::SPEC_VERSION.to_string());
        return Ok(Answer::Result(spec::version_result(&version)));
    }
    let conf = NetConf::parse(stdin)?;
    let socket = conf.socket.clone().ok_or_else(|| {
        CniError::new(
            code::INVALID_NETWORK_CONFIG,
            "the network configuration has no \"socket\" (the agent's --cni-socket)",
        )
    })?;
    let unavailable = if env.command == Command::Status { code::NOT_AVAILABLE } else { code::TRY_AGAIN_LATER };
    ask(&socket, &Request { env, config: conf.raw }).map_err(|e| {
        CniError::new(unavailable, format!("the npagent agent on {} did not answer", socket.display())).with_details(e)
    })
}

/// Sends `request` to the agent on `socket` and reads its answer.
pub fn ask(socket: &Path, request: &Request) -> std::io::Result<Answer> {
    let mut stream = UnixStream::connect(socket)?;
    stream.set_read_timeout(Some(ANSWER_WITHIN))?;
    stream.set_write_timeout(Some(ANSWER_WITHIN))?;
    stream.write_all(&serde_json::to_vec(request)?)?;
    stream.shutdown(std::net::Shutdown::Write)?;
    let mut bytes = Vec::new();
    stream.take(MAX_ANSWER).read_to_end(&mut bytes)?;
    serde_json::from_slice(&bytes).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(list: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| list.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
    }

    #[test]
    fn version_is_answered_without_an_agent() {
        let out = run(vars(&[("CNI_COMMAND", "VERSION")]), br#"{"cniVersion":"1.0.0"}"#);
        assert!(out.success);
        let v: Value = serde_json::from_str(&out.stdout).unwrap();
        assert_eq!(v["cniVersion"], "1.0.0");
        assert_eq!(v["supportedVersions"], serde_json::json!(["0.4.0", "1.0.0", "1.1.0"]));
    }

    #[test]
    fn an_agent_that_is_down_is_try_again_later_naming_its_socket() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("none.sock");
        let conf = format!(r#"{{"cniVersion":"1.1.0","name":"n","type":"npagent","socket":"{}"}}"#, socket.display());
        let del = vars(&[("CNI_COMMAND", "DEL"), ("CNI_CONTAINERID", "c1"), ("CNI_IFNAME", "eth0")]);
        let out = run(del, conf.as_bytes());
        assert!(!out.success);
        let e: CniError = serde_json::from_str(&out.stdout).unwrap();
        assert_eq!(e.code, code::TRY_AGAIN_LATER);
        assert!(e.msg.contains(&socket.display().to_string()), "{}", e.msg);
        let out = run(vars(&[("CNI_COMMAND", "STATUS")]), conf.as_bytes());
        let e: CniError = serde_json::from_str(&out.stdout).unwrap();
        assert_eq!(e.code, code::NOT_AVAILABLE);
    }

    #[test]
    fn a_configuration_without_a_socket_is_refused() {
        let out = run(vars(&[("CNI_COMMAND", "STATUS")]), br#"{"cniVersion":"1.1.0","name":"n","type":"npagent"}"#);
        let e: CniError = serde_json::from_str(&out.stdout).unwrap();
        assert_eq!(e.code, code::INVALID_NETWORK_CONFIG);
        assert!(e.msg.contains("socket"));
    }
}
