//! The CNI specification's side of the plugin (spec 1.1.0; configurations of 0.4.0 and 1.0.0
//! are accepted too): the environment a runtime sets, the network configuration on stdin, and
//! the result and error JSON on stdout. Pure: no I/O.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The version npagent's results are written in when the configuration does not say.
pub const SPEC_VERSION: &str = "1.1.0";
/// The versions npagent accepts in a configuration's `cniVersion`.
pub const SUPPORTED_VERSIONS: &[&str] = &["0.4.0", "1.0.0", "1.1.0"];

/// The spec's well-known error codes (section "Error"), and those of STATUS.
pub mod code {
    /// Incompatible CNI version.
    pub const INCOMPATIBLE_VERSION: u32 = 1;
    /// Unsupported field in the network configuration.
    pub const UNSUPPORTED_FIELD: u32 = 2;
    /// Container unknown or does not exist.
    pub const UNKNOWN_CONTAINER: u32 = 3;
    /// Invalid necessary environment variables, like `CNI_COMMAND` or `CNI_CONTAINERID`.
    pub const INVALID_ENVIRONMENT: u32 = 4;
    /// I/O failure.
    pub const IO_FAILURE: u32 = 5;
    /// Failed to decode content.
    pub const DECODE_FAILURE: u32 = 6;
    /// Invalid network config.
    pub const INVALID_NETWORK_CONFIG: u32 = 7;
    /// Try again later.
    pub const TRY_AGAIN_LATER: u32 = 11;
    /// STATUS: the plugin cannot serve ADDs.
    pub const NOT_AVAILABLE: u32 = 50;
    /// npagent's own: the attachment could not be made (netlink, OVSDB, IPAM).
    pub const ATTACH_FAILED: u32 = 100;
}

/// A CNI error result: what the plugin prints, with a non-zero exit, when it fails.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(rename_all = "camelCase")]
#[error("CNI error {code}: {msg}{}", if details.is_empty() { String::new() } else { format!(" ({details})") })]
pub struct CniError {
    #[serde(default)]
    pub cni_version: String,
    pub code: u32,
    pub msg: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub details: String,
}

impl CniError {
    /// An error with `code` and message `msg`.
    pub fn new(code: u32, msg: impl Into<String>) -> CniError {
        CniError { cni_version: SPEC_VERSION.into(), code, msg: msg.into(), details: String::new() }
    }

    /// The same error with `details`.
    pub fn with_details(mut self, details: impl std::fmt::Display) -> CniError {
        self.details = details.to_string();
        self
    }
}

/// A CNI command (`CNI_COMMAND`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Command {
    Add,
    Del,
    Check,
    Status,
    Gc,
    Version,
}

impl Command {
    /// Every command, in the order the spec lists them.
    pub const ALL: [Command; 6] =
        [Command::Add, Command::Del, Command::Check, Command::Status, Command::Gc, Command::Version];

    /// `CNI_COMMAND`'s value for the command.
    pub fn as_str(self) -> &'static str {
        match self {
            Command::Add => "ADD",
            Command::Del => "DEL",
            Command::Check => "CHECK",
            Command::Status => "STATUS",
            Command::Gc => "GC",
            Command::Version => "VERSION",
        }
    }

    /// The command named by `CNI_COMMAND`'s value.
    pub fn parse(s: &str) -> Option<Command> {
        Command::ALL.into_iter().find(|c| c.as_str() == s)
    }

    /// Whether the command is about one container's attachment (and needs `CNI_CONTAINERID`
    /// and `CNI_IFNAME`).
    pub fn is_per_attachment(self) -> bool {
        matches!(self, Command::Add | Command::Del | Command::Check)
    }
}

impl std::fmt::Display for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the runtime says in the environment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Env {
    pub command: Command,
    /// `CNI_CONTAINERID`.
    #[serde(default)]
    pub container_id: String,
    /// `CNI_NETNS`: the container's network namespace (a path); may be empty for DEL.
    #[serde(default)]
    pub netns: Option<PathBuf>,
    /// `CNI_IFNAME`: the interface to create inside the container.
    #[serde(default)]
    pub ifname: String,
    /// `CNI_ARGS` as key-value pairs (`K8S_POD_NAMESPACE`, `K8S_POD_NAME`, ...).
    #[serde(default)]
    pub args: BTreeMap<String, String>,
    /// `CNI_PATH`: where plugins (the IPAM plugin) are looked for, in order.
    #[serde(default)]
    pub path: Vec<PathBuf>,
}

/// The longest interface name Linux takes (IFNAMSIZ - 1).
pub const MAX_IFNAME: usize = 15;

impl Env {
    /// Reads the environment through `var`; an error names the variable at fault.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Env, CniError> {
        let invalid = |msg: String| CniError::new(code::INVALID_ENVIRONMENT, msg);
        let raw = var("CNI_COMMAND").ok_or_else(|| invalid("CNI_COMMAND is not set".into()))?;
        let command = Command::parse(&raw).ok_or_else(|| {
            invalid(format!("CNI_COMMAND {raw:?} is not one of ADD, DEL, CHECK, STATUS, GC, VERSION"))
        })?;
        let nonempty = |name: &str| var(name).filter(|v| !v.is_empty());
        let container_id = nonempty("CNI_CONTAINERID").unwrap_or_default();
        let ifname = nonempty("CNI_IFNAME").unwrap_or_default();
        let netns = nonempty("CNI_NETNS").map(PathBuf::from);
        let args = parse_args(&var("CNI_ARGS").unwrap_or_default()).map_err(invalid)?;
        let path = var("CNI_PATH")
            .map(|p| p.split(':').filter(|d| !d.is_empty()).map(PathBuf::from).collect())
            .unwrap_or_default();
        let env = Env { command, container_id, netns, ifname, args, path };
        env.validate()?;
        Ok(env)
    }

    /// Checks what the spec requires of the environment: the attachment's container id and
    /// interface for ADD, DEL and CHECK, a network namespace for ADD and CHECK, and names that
    /// cannot escape a directory or a device name. The agent checks again what reaches its
    /// socket.
    pub fn validate(&self) -> Result<(), CniError> {
        let invalid = |msg: String| Err(CniError::new(code::INVALID_ENVIRONMENT, msg));
        let Env { command, container_id, netns, ifname, .. } = self;
        if command.is_per_attachment() {
            if container_id.is_empty() {
                return invalid("CNI_CONTAINERID is not set".into());
            }
            if ifname.is_empty() {
                return invalid("CNI_IFNAME is not set".into());
            }
        }
        if !container_id.is_empty() && !valid_container_id(container_id) {
            return invalid(format!(
                "CNI_CONTAINERID {container_id:?}: only letters, digits, '_', '.' and '-', starting with a letter or digit"
            ));
        }
        if !ifname.is_empty() && !valid_ifname(ifname) {
            return invalid(format!(
                "CNI_IFNAME {ifname:?} is not a Linux interface name (1 to {MAX_IFNAME} bytes, no '/', ':' or whitespace, not '.' or '..')"
            ));
        }
        if matches!(command, Command::Add | Command::Check) && netns.is_none() {
            return invalid("CNI_NETNS is not set".into());
        }
        Ok(())
    }

    /// The Pod the runtime names in `CNI_ARGS` (`K8S_POD_NAMESPACE`, `K8S_POD_NAME`).
    pub fn pod(&self) -> Option<(&str, &str)> {
        let get = |k: &str| self.args.get(k).map(String::as_str).filter(|v| !v.is_empty());
        Some((get("K8S_POD_NAMESPACE")?, get("K8S_POD_NAME")?))
    }
}

/// `K1=V1;K2=V2` (the spec's `CNI_ARGS`); an error names the malformed pair.
pub fn parse_args(s: &str) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    for pair in s.split(';').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some((k, v)) if !k.is_empty() => {
                out.insert(k.to_string(), v.to_string());
            }
            _ => return Err(format!("CNI_ARGS: {pair:?} is not KEY=VALUE")),
        }
    }
    Ok(out)
}

/// The spec's container id rule: `^[a-z0-9][a-z0-9_.\-]*$` (case-insensitive here: runtimes
/// use upper case too).
fn valid_container_id(id: &str) -> bool {
    let mut bytes = id.bytes();
    bytes.next().is_some_and(|b| b.is_ascii_alphanumeric())
        && bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// What Linux accepts as an interface name (`dev_valid_name`).
pub fn valid_ifname(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_IFNAME
        && name != "."
        && name != ".."
        && !name.bytes().any(|b| b == b'/' || b == b':' || b.is_ascii_whitespace())
}

/// One attachment a runtime holds (`cni.dev/valid-attachments` of GC).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct AttachmentId {
    #[serde(rename = "containerID")]
    pub container_id: String,
    pub ifname: String,
}

impl AttachmentId {
    /// The attachment of container `container_id` as interface `ifname`.
    pub fn new(container_id: &str, ifname: &str) -> AttachmentId {
        AttachmentId { container_id: container_id.to_string(), ifname: ifname.to_string() }
    }

    /// The attachment `env` names (`CNI_CONTAINERID`, `CNI_IFNAME`).
    pub fn of(env: &Env) -> AttachmentId {
        AttachmentId::new(&env.container_id, &env.ifname)
    }
}

/// The network configuration on stdin, as far as npagent reads it. The whole value is kept
/// (`raw`): the IPAM plugin is given it as it came.
#[derive(Debug, Clone, PartialEq)]
pub struct NetConf {
    pub cni_version: String,
    pub name: String,
    /// The agent's unix socket.
    pub socket: Option<PathBuf>,
    /// The `ipam` section; its `type` names the IPAM plugin.
    pub ipam: Option<Value>,
    pub prev_result: Option<Value>,
    /// GC's `cni.dev/valid-attachments`.
    pub valid_attachments: Option<Vec<AttachmentId>>,
    pub raw: Value,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ConfFields {
    cni_version: Option<String>,
    name: Option<String>,
    #[serde(rename = "type")]
    plugin_type: Option<String>,
    socket: Option<PathBuf>,
    ipam: Option<Value>,
    prev_result: Option<Value>,
    #[serde(rename = "cni.dev/valid-attachments")]
    valid_attachments: Option<Vec<AttachmentId>>,
}

impl NetConf {
    /// Parses stdin's configuration; an error says what is wrong with it.
    pub fn parse(bytes: &[u8]) -> Result<NetConf, CniError> {
        let raw: Value = serde_json::from_slice(bytes).map_err(|e| {
            CniError::new(code::DECODE_FAILURE, "the network configuration on stdin is not JSON").with_details(e)
        })?;
        NetConf::from_value(raw)
    }

    /// Reads a configuration already parsed as JSON (what reaches the agent's socket).
    pub fn from_value(raw: Value) -> Result<NetConf, CniError> {
        let fields: ConfFields = serde_json::from_value(raw.clone()).map_err(|e| {
            CniError::new(code::INVALID_NETWORK_CONFIG, "the network configuration is malformed").with_details(e)
        })?;
        let invalid = |msg: &str| CniError::new(code::INVALID_NETWORK_CONFIG, msg);
        let cni_version = fields.cni_version.ok_or_else(|| invalid("the network configuration has no cniVersion"))?;
        if !SUPPORTED_VERSIONS.contains(&cni_version.as_str()) {
            return Err(CniError::new(
                code::INCOMPATIBLE_VERSION,
                format!(
                    "cniVersion {cni_version:?} is not supported (npagent supports {})",
                    SUPPORTED_VERSIONS.join(", ")
                ),
            ));
        }
        let name =
            fields.name.filter(|n| !n.is_empty()).ok_or_else(|| invalid("the network configuration has no name"))?;
        if fields.plugin_type.as_deref().is_none_or(str::is_empty) {
            return Err(invalid("the network configuration has no type"));
        }
        if let Some(ipam) = &fields.ipam {
            if ipam.get("type").and_then(Value::as_str).is_none_or(str::is_empty) {
                return Err(invalid("the network configuration's ipam section has no type"));
            }
        }
        Ok(NetConf {
            cni_version,
            name,
            socket: fields.socket,
            ipam: fields.ipam,
            prev_result: fields.prev_result,
            valid_attachments: fields.valid_attachments,
            raw,
        })
    }

    /// The IPAM plugin's name (`ipam.type`).
    pub fn ipam_type(&self) -> Option<&str> {
        self.ipam.as_ref()?.get("type")?.as_str()
    }
}

/// An interface of a result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Interface {
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub mac: String,
    /// The network namespace path, for the container's interface; empty for the host's.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub sandbox: String,
}

/// An address of a result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IpConfig {
    /// 0.4.0's `"4"` or `"6"`; absent from 1.0.0 on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// CIDR notation: the address and its prefix length.
    pub address: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<String>,
    /// Index into the result's `interfaces`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface: Option<usize>,
}

/// A route of a result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Route {
    pub dst: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gw: Option<String>,
}

/// A successful ADD's result (also CHECK's `prevResult`, and an IPAM plugin's result).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AddResult {
    pub cni_version: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub interfaces: Vec<Interface>,
    #[serde(default)]
    pub ips: Vec<IpConfig>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub routes: Vec<Route>,
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub dns: Value,
}

impl AddResult {
    /// The result written for a configuration of `version`: 0.4.0 results give each address
    /// its IP version, later ones do not.
    pub fn for_version(mut self, version: &str) -> AddResult {
        let old = version.starts_with("0.");
        for ip in &mut self.ips {
            ip.version = old.then(|| if ip.address.contains(':') { "6" } else { "4" }.to_string());
        }
        self.cni_version = version.to_string();
        self
    }
}

/// VERSION's answer.
pub fn version_result(cni_version: &str) -> Value {
    serde_json::json!({ "cniVersion": cni_version, "supportedVersions": SUPPORTED_VERSIONS })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &[(&str, &str)]) -> Result<Env, CniError> {
        let vars: BTreeMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Env::from_vars(|k| vars.get(k).cloned())
    }

    #[test]
    fn add_environment_reads_every_variable() {
        let e = env(&[
            ("CNI_COMMAND", "ADD"),
            ("CNI_CONTAINERID", "abc123"),
            ("CNI_NETNS", "/var/run/netns/p"),
            ("CNI_IFNAME", "eth0"),
            ("CNI_ARGS", "IgnoreUnknown=1;K8S_POD_NAMESPACE=x;K8S_POD_NAME=a"),
            ("CNI_PATH", "/opt/cni/bin:/usr/lib/cni"),
        ])
        .unwrap();
        assert_eq!(e.command, Command::Add);
        assert_eq!(e.pod(), Some(("x", "a")));
        assert_eq!(e.path, vec![PathBuf::from("/opt/cni/bin"), PathBuf::from("/usr/lib/cni")]);
    }

    #[test]
    fn a_bad_environment_is_an_error_naming_the_variable() {
        let cases: &[(&[(&str, &str)], &str)] = &[
            (&[], "CNI_COMMAND is not set"),
            (&[("CNI_COMMAND", "ATTACH")], "\"ATTACH\""),
            (&[("CNI_COMMAND", "ADD"), ("CNI_IFNAME", "eth0"), ("CNI_NETNS", "/n")], "CNI_CONTAINERID"),
            (&[("CNI_COMMAND", "ADD"), ("CNI_CONTAINERID", "c"), ("CNI_IFNAME", "eth0")], "CNI_NETNS"),
            (&[("CNI_COMMAND", "DEL"), ("CNI_CONTAINERID", "c"), ("CNI_IFNAME", "a/b")], "CNI_IFNAME"),
            (&[("CNI_COMMAND", "DEL"), ("CNI_CONTAINERID", "-c"), ("CNI_IFNAME", "e")], "CNI_CONTAINERID"),
            (
                &[("CNI_COMMAND", "DEL"), ("CNI_CONTAINERID", "c"), ("CNI_IFNAME", "e"), ("CNI_ARGS", "novalue")],
                "CNI_ARGS",
            ),
        ];
        for (vars, culprit) in cases {
            let e = env(vars).unwrap_err();
            assert_eq!(e.code, code::INVALID_ENVIRONMENT, "{vars:?}");
            assert!(e.msg.contains(culprit), "{vars:?}: {}", e.msg);
        }
        // DEL may come without a network namespace (it may be gone already).
        assert!(env(&[("CNI_COMMAND", "DEL"), ("CNI_CONTAINERID", "c"), ("CNI_IFNAME", "eth0")]).is_ok());
        assert!(env(&[("CNI_COMMAND", "VERSION")]).is_ok());
    }

    #[test]
    fn what_reaches_the_agents_socket_is_checked_again() {
        let forged: Env = serde_json::from_value(serde_json::json!({
            "command": "DEL", "containerId": "../../etc/x", "ifname": "eth0"
        }))
        .unwrap();
        assert!(forged.validate().unwrap_err().msg.contains("CNI_CONTAINERID"));
        let no_netns: Env =
            serde_json::from_value(serde_json::json!({"command": "ADD", "containerId": "c", "ifname": "eth0"}))
                .unwrap();
        assert!(no_netns.validate().unwrap_err().msg.contains("CNI_NETNS"));
    }

    #[test]
    fn configurations_are_checked_and_kept_whole() {
        let conf = NetConf::parse(
            br#"{"cniVersion":"1.0.0","name":"n","type":"npagent","socket":"/s","ipam":{"type":"host-local","ranges":[]},"extra":1}"#,
        )
        .unwrap();
        assert_eq!(conf.ipam_type(), Some("host-local"));
        assert_eq!(conf.raw["extra"], 1);
        let bad: &[(&[u8], u32, &str)] = &[
            (b"{", code::DECODE_FAILURE, "not JSON"),
            (br#"{"name":"n","type":"t"}"#, code::INVALID_NETWORK_CONFIG, "cniVersion"),
            (br#"{"cniVersion":"0.3.1","name":"n","type":"t"}"#, code::INCOMPATIBLE_VERSION, "0.3.1"),
            (br#"{"cniVersion":"1.1.0","type":"t"}"#, code::INVALID_NETWORK_CONFIG, "name"),
            (br#"{"cniVersion":"1.1.0","name":"n","type":"t","ipam":{}}"#, code::INVALID_NETWORK_CONFIG, "ipam"),
            (br#"{"cniVersion":"1.1.0","name":7,"type":"t"}"#, code::INVALID_NETWORK_CONFIG, "malformed"),
        ];
        for (input, want, culprit) in bad {
            let e = NetConf::parse(input).unwrap_err();
            assert_eq!((e.code, e.msg.contains(culprit)), (*want, true), "{}: {e}", String::from_utf8_lossy(input));
        }
    }

    #[test]
    fn results_follow_the_configurations_version() {
        let r = AddResult {
            ips: vec![
                IpConfig { version: None, address: "10.0.0.2/24".into(), gateway: None, interface: Some(1) },
                IpConfig { version: None, address: "fd00::2/64".into(), gateway: None, interface: Some(1) },
            ],
            ..AddResult::default()
        };
        let old = serde_json::to_value(r.clone().for_version("0.4.0")).unwrap();
        assert_eq!((old["ips"][0]["version"].as_str(), old["ips"][1]["version"].as_str()), (Some("4"), Some("6")));
        let new = serde_json::to_value(r.for_version("1.1.0")).unwrap();
        assert!(new["ips"][0].get("version").is_none());
        assert_eq!(new["cniVersion"], "1.1.0");
    }

    #[test]
    fn errors_serialize_as_the_spec_says() {
        let e = CniError::new(code::TRY_AGAIN_LATER, "agent not ready").with_details("socket /s");
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"cniVersion": "1.1.0", "code": 11, "msg": "agent not ready", "details": "socket /s"})
        );
    }
}
