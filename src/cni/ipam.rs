//! IPAM by the CNI delegation protocol: the configuration's `ipam.type` plugin is executed from
//! `CNI_PATH` with the runtime's environment (its command replaced) and the network
//! configuration on stdin; its result or error comes back on stdout.
//!
//! A configuration whose IPAM section has no `ranges` or `subnet` gets the node's pod subnets
//! (the gateway's addresses: `--gateway-ip`, or in kube mode the first address of each of the
//! Node's podCIDRs), each range with the gateway as its gateway, as host-local reads them.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;

use super::spec::{code, AddResult, CniError, Command, Env};
use crate::model::node::InterfaceAddr;
use crate::model::Cidr;

/// How long an IPAM plugin may take.
const IPAM_WITHIN: Duration = Duration::from_secs(30);

/// The configuration given to the IPAM plugin: `config` with the node's pod subnets as its
/// ranges when it names none.
pub fn with_node_ranges(config: &Value, gateways: &[InterfaceAddr]) -> Value {
    let mut config = config.clone();
    let Some(ipam) = config.get_mut("ipam").and_then(Value::as_object_mut) else { return config };
    if ipam.contains_key("ranges") || ipam.contains_key("subnet") || gateways.is_empty() {
        return config;
    }
    let ranges: Vec<Value> = gateways
        .iter()
        .map(|gw| json!([{ "subnet": Cidr::new(gw.ip, gw.prefix).to_string(), "gateway": gw.ip.to_string() }]))
        .collect();
    ipam.insert("ranges".into(), Value::Array(ranges));
    config
}

/// Runs the IPAM plugin `plugin` for `command` (ADD, DEL, CHECK) of `env`'s attachment
/// with `config` on stdin; returns its stdout parsed (`Null` when empty). A plugin that does
/// not know spec 1.1.0 yet is asked again in 1.0.0, whose results and IPAM commands are the
/// same.
pub async fn delegate(plugin: &str, command: Command, env: &Env, config: &Value) -> Result<Value, CniError> {
    match run_plugin(plugin, command, env, config).await {
        Err(e) if e.code == code::INCOMPATIBLE_VERSION && config.get("cniVersion") == Some(&json!("1.1.0")) => {
            let mut older = config.clone();
            older["cniVersion"] = json!("1.0.0");
            run_plugin(plugin, command, env, &older).await
        }
        outcome => outcome,
    }
}

async fn run_plugin(plugin: &str, command: Command, env: &Env, config: &Value) -> Result<Value, CniError> {
    let failed = |msg: String| CniError::new(code::ATTACH_FAILED, msg);
    let path = find(plugin, &env.path)
        .ok_or_else(|| failed(format!("IPAM plugin {plugin:?} not found in CNI_PATH {:?}", env.path)))?;
    // The pod's names are npagent's to read: an IPAM plugin that checks its arguments
    // (host-local does) is told to ignore what it does not know, as kubelet always tells it.
    let ignore = (!env.args.contains_key("IgnoreUnknown")).then(|| "IgnoreUnknown=1".to_string());
    let args: Vec<String> = ignore.into_iter().chain(env.args.iter().map(|(k, v)| format!("{k}={v}"))).collect();
    let search: Vec<String> = env.path.iter().map(|p| p.display().to_string()).collect();
    let mut child = tokio::process::Command::new(&path)
        .env_clear()
        .env("CNI_COMMAND", command.as_str())
        .env("CNI_CONTAINERID", &env.container_id)
        .env("CNI_NETNS", env.netns.as_ref().map(|p| p.display().to_string()).unwrap_or_default())
        .env("CNI_IFNAME", &env.ifname)
        .env("CNI_ARGS", args.join(";"))
        .env("CNI_PATH", search.join(":"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| failed(format!("cannot run IPAM plugin {}", path.display())).with_details(e))?;
    let input = serde_json::to_vec(config).map_err(|e| {
        CniError::new(code::IO_FAILURE, format!("cannot serialise the configuration for IPAM plugin {plugin}"))
            .with_details(e)
    })?;
    if let Some(mut stdin) = child.stdin.take() {
        // A plugin that exits without reading its input is judged by its exit status.
        let _ = stdin.write_all(&input).await;
    }
    let out = tokio::time::timeout(IPAM_WITHIN, child.wait_with_output())
        .await
        .map_err(|_| failed(format!("IPAM plugin {plugin} {command} did not finish within {IPAM_WITHIN:?}")))?
        .map_err(|e| failed(format!("IPAM plugin {plugin} {command}")).with_details(e))?;
    let stdout: Value = if out.stdout.iter().all(u8::is_ascii_whitespace) {
        Value::Null
    } else {
        serde_json::from_slice(&out.stdout)
            .map_err(|e| failed(format!("IPAM plugin {plugin} {command} printed what is not JSON")).with_details(e))?
    };
    if out.status.success() {
        return Ok(stdout);
    }
    // The plugin's own error, passed on with its code and prefixed with who said it.
    let mut e = serde_json::from_value::<CniError>(stdout).unwrap_or_else(|_| {
        CniError::new(code::ATTACH_FAILED, String::from_utf8_lossy(&out.stderr).trim().to_string())
    });
    e.msg = format!("IPAM plugin {plugin} {command}: {}", e.msg);
    Err(e)
}

/// An IPAM ADD's result, read.
pub fn parse_result(plugin: &str, v: Value) -> Result<AddResult, CniError> {
    let result: AddResult = serde_json::from_value(v).map_err(|e| {
        CniError::new(code::ATTACH_FAILED, format!("IPAM plugin {plugin}'s result is malformed")).with_details(e)
    })?;
    if result.ips.is_empty() {
        return Err(CniError::new(code::ATTACH_FAILED, format!("IPAM plugin {plugin} gave no address")));
    }
    Ok(result)
}

/// `plugin` in the first directory of `dirs` that has it. Plugin names are file names, not
/// paths.
fn find(plugin: &str, dirs: &[PathBuf]) -> Option<PathBuf> {
    if plugin.is_empty() || plugin.contains('/') || plugin == "." || plugin == ".." {
        return None;
    }
    dirs.iter().map(|d| d.join(plugin)).find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_configuration_without_ranges_gets_the_nodes_pod_subnets() {
        let gw = [InterfaceAddr::parse("10.10.0.254/16").unwrap(), InterfaceAddr::parse("fd00::1/64").unwrap()];
        let conf = json!({"name": "n", "ipam": {"type": "host-local"}});
        let out = with_node_ranges(&conf, &gw);
        assert_eq!(
            out["ipam"]["ranges"],
            json!([[{"subnet": "10.10.0.0/16", "gateway": "10.10.0.254"}], [{"subnet": "fd00::/64", "gateway": "fd00::1"}]])
        );
        let own = json!({"ipam": {"type": "host-local", "ranges": [[{"subnet": "10.1.0.0/24"}]]}});
        assert_eq!(with_node_ranges(&own, &gw), own, "the configuration's own ranges win");
        let legacy = json!({"ipam": {"type": "host-local", "subnet": "10.1.0.0/24"}});
        assert_eq!(with_node_ranges(&legacy, &gw), legacy);
    }

    #[test]
    fn plugin_names_are_not_paths() {
        let dirs = [PathBuf::from("/usr/bin")];
        assert_eq!(find("../bin/true", &dirs), None);
        assert_eq!(find("/usr/bin/true", &dirs), None);
        assert_eq!(find("true", &dirs), Some(PathBuf::from("/usr/bin/true")));
    }
}
