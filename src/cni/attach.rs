//! The agent's side of the CNI commands: the attachments it made, and how each is made,
//! checked and taken apart.
//!
//! An ADD allocates the address (IPAM), makes the veth pair with the node's end down, and puts
//! that end on the bridge with the pod's `external_ids` in one OVSDB transaction; the agent
//! then compiles the pod's flows like any other port's. Only once they are installed with the
//! Pod known ([`AgentView::enforced`]) is the node's end brought up and the result returned, so
//! no packet passes before the pod is enforced. A DEL undoes it in the order flows, port,
//! veth, address: the port is first withdrawn from the agent's model ([`Attacher::withdrawn`])
//! until its flows are gone. A failed step undoes the steps before it.
//!
//! Each attachment's record (the runtime's environment, the network configuration given to
//! IPAM, the result) is a file in the state directory, written before the address is
//! allocated and removed after it is released: after a restart the agent finds its
//! attachments in OVSDB and these files, takes apart those whose network namespace is gone,
//! and releases the addresses no port holds.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::watch;

use super::spec::{code, AddResult, AttachmentId, CniError, Env, Interface, IpConfig, NetConf, Route};
use super::{ipam, port, veth};
use crate::endpoint::Endpoint;
use crate::model::node::{InterfaceAddr, NodeConfig};
use crate::source::ovsdb::db::format_mac;

/// How long an ADD waits for the pod's flows.
pub const ENFORCED_WITHIN: Duration = Duration::from_secs(30);
/// How long a DEL waits for the pod's flows to go before it removes the port anyway.
const WITHDRAWN_WITHIN: Duration = Duration::from_secs(5);

/// What the agent tells the CNI side.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentView {
    /// The agent has synced its sources and the switch and can take ADDs.
    pub ready: bool,
    /// Why not, when not.
    pub not_ready: String,
    /// The interfaces of pod ports whose flows are installed with their Pod known.
    pub enforced: BTreeSet<String>,
}

/// Where the attacher works.
#[derive(Debug, Clone)]
pub struct AttachConfig {
    pub ovsdb: Endpoint,
    pub bridge: String,
    /// One record file per attachment.
    pub state_dir: PathBuf,
}

/// An attachment's record: in memory and in its state file.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Record {
    env: Env,
    /// The network configuration as given to the IPAM plugin (node ranges filled in).
    config: Value,
    /// The node's end of the veth, the bridge port's name.
    host: String,
    /// The ADD's result, once made.
    result: Option<AddResult>,
}

/// The attachments this agent made, and the means to make more.
pub struct Attacher {
    cfg: AttachConfig,
    node: rtnetlink::Handle,
    records: BTreeMap<AttachmentId, Record>,
    node_config: watch::Receiver<NodeConfig>,
    view: watch::Receiver<AgentView>,
    withdrawn: watch::Sender<BTreeSet<String>>,
}

/// An ADD made but not yet enforced: [`Attacher::wait_enforced`] finishes it.
#[derive(Debug)]
pub struct PendingAdd {
    id: AttachmentId,
    host: String,
    result: AddResult,
}

impl Attacher {
    /// An attacher with no attachments; `node` is a netlink handle of the node's namespace.
    pub fn new(
        cfg: AttachConfig,
        node: rtnetlink::Handle,
        node_config: watch::Receiver<NodeConfig>,
        view: watch::Receiver<AgentView>,
    ) -> Attacher {
        Attacher { cfg, node, records: BTreeMap::new(), node_config, view, withdrawn: watch::Sender::default() }
    }

    /// The pod ports being taken apart: the agent leaves them out of its model.
    pub fn withdrawn(&self) -> watch::Receiver<BTreeSet<String>> {
        self.withdrawn.subscribe()
    }

    /// STATUS: whether the agent can take ADDs.
    pub fn status(&self) -> Result<(), CniError> {
        self.ready(code::NOT_AVAILABLE)
    }

    /// Whether the agent is ready; when not, an error with `code` saying why.
    fn ready(&self, code: u32) -> Result<(), CniError> {
        let view = self.view.borrow();
        match view.ready {
            true => Ok(()),
            false => Err(CniError::new(code, format!("the npagent agent is not ready: {}", view.not_ready))),
        }
    }

    /// ADD's first half: the address, the veth (node's end down) and the port. The pod is
    /// not reachable yet; [`Attacher::wait_enforced`] finishes.
    pub async fn add(&mut self, env: &Env, conf: &NetConf) -> Result<PendingAdd, CniError> {
        self.ready(code::TRY_AGAIN_LATER)?;
        let id = AttachmentId { container_id: env.container_id.clone(), ifname: env.ifname.clone() };
        if let Some(Record { host, result: Some(result), .. }) = self.records.get(&id) {
            // A repeated ADD of a made attachment (a runtime retrying after a lost answer).
            return Ok(PendingAdd { id, host: host.clone(), result: result.clone() });
        }
        let (namespace, name) = env.pod().ok_or_else(|| {
            CniError::new(code::INVALID_ENVIRONMENT, "CNI_ARGS names no pod (K8S_POD_NAMESPACE and K8S_POD_NAME)")
        })?;
        let netns = env.netns.clone().unwrap_or_default();
        if let Err(e) = std::fs::File::open(&netns) {
            return Err(CniError::new(
                code::INVALID_ENVIRONMENT,
                format!("CNI_NETNS {}: the network namespace cannot be opened", netns.display()),
            )
            .with_details(e));
        }
        let plugin = conf.ipam_type().ok_or_else(|| {
            CniError::new(code::INVALID_NETWORK_CONFIG, "the network configuration has no ipam section")
        })?;
        let gateways = self.node_config.borrow().gateway_addrs.clone();
        let record = self.record_for(env, conf, name);
        if let Some(other) = self.records.values().find(|r| r.host == record.host) {
            return Err(CniError::new(
                code::ATTACH_FAILED,
                format!("port {} is held by container {} already", record.host, other.env.container_id),
            ));
        }
        self.save(&id, &record)?;
        let allocated = match ipam::delegate(plugin, "ADD", env, &record.config).await {
            Ok(v) => ipam::parse_result(plugin, v),
            Err(e) => Err(e),
        };
        let ipam_result = match allocated {
            Ok(r) => r,
            Err(e) => {
                // The plugin may have allocated before it failed.
                self.release(&id, &record).await;
                return Err(e);
            }
        };
        self.records.insert(id.clone(), record.clone());
        match self.plumb(&id, &record, &ipam_result, namespace, name, &gateways, &conf.cni_version).await {
            Ok(result) => {
                let record = Record { result: Some(result.clone()), ..record };
                if let Err(e) = self.save(&id, &record) {
                    self.undo(&id).await;
                    return Err(e);
                }
                self.records.insert(id.clone(), record.clone());
                Ok(PendingAdd { id, host: record.host, result })
            }
            Err(e) => {
                self.undo(&id).await;
                Err(e)
            }
        }
    }

    /// The veth and the port for an allocated address; the ADD's result.
    #[allow(clippy::too_many_arguments)]
    async fn plumb(
        &self,
        id: &AttachmentId,
        record: &Record,
        ipam_result: &AddResult,
        namespace: &str,
        name: &str,
        gateways: &[InterfaceAddr],
        version: &str,
    ) -> Result<AddResult, CniError> {
        let failed =
            |what: String| move |e: &dyn std::fmt::Display| CniError::new(code::ATTACH_FAILED, what).with_details(e);
        let addrs = ipam_result
            .ips
            .iter()
            .map(|ip| {
                InterfaceAddr::parse(&ip.address).map_err(|e| failed(format!("IPAM gave address {:?}", ip.address))(&e))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let routes = default_gateways(ipam_result, &addrs, gateways);
        let netns = record.env.netns.clone().unwrap_or_default();
        let mac = veth::create(&self.node, &record.host, &id.container_id, &netns, &id.ifname, &addrs, &routes)
            .await
            .map_err(|e| match e.is_netns() {
            true => CniError::new(code::INVALID_ENVIRONMENT, format!("CNI_NETNS: {e}")),
            false => failed(format!("cannot make the veth pair {}", record.host))(&e),
        })?;
        let mac_text = format_mac(mac);
        let ips: Vec<String> = addrs.iter().map(|a| a.ip.to_string()).collect();
        let ids: BTreeMap<String, String> = [
            (port::key::ANTREA_TYPE, port::key::CONTAINER.to_string()),
            (port::key::CONTAINER_ID, id.container_id.clone()),
            (port::key::POD_NAME, name.to_string()),
            (port::key::POD_NAMESPACE, namespace.to_string()),
            (port::key::IP_ADDRESS, ips.join(",")),
            (port::key::ATTACHED_MAC, mac_text.clone()),
            (port::key::IF_DEV, id.ifname.clone()),
            (port::key::NET_NS, netns.display().to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        port::add(&self.cfg.ovsdb, &self.cfg.bridge, &record.host, &ids)
            .await
            .map_err(|e| failed(format!("cannot put port {} on bridge {}", record.host, self.cfg.bridge))(&e))?;
        let result = AddResult {
            cni_version: version.to_string(),
            interfaces: vec![
                Interface { name: record.host.clone(), mac: String::new(), sandbox: String::new() },
                Interface { name: id.ifname.clone(), mac: mac_text, sandbox: netns.display().to_string() },
            ],
            ips: ipam_result
                .ips
                .iter()
                .map(|ip| IpConfig {
                    version: None,
                    address: ip.address.clone(),
                    gateway: ip.gateway.clone(),
                    interface: Some(1),
                })
                .collect(),
            routes: routes
                .iter()
                .map(|gw| Route {
                    dst: if gw.is_ipv4() { "0.0.0.0/0" } else { "::/0" }.to_string(),
                    gw: Some(gw.to_string()),
                })
                .collect(),
            dns: ipam_result.dns.clone(),
        };
        Ok(result.for_version(version))
    }

    /// ADD's second half: waits until the agent has installed the pod's flows, then brings
    /// the node's end up. On failure the attachment is taken apart (through `this`, locked
    /// again only then, so that other commands go on while this one waits).
    pub async fn wait_enforced(
        this: &tokio::sync::Mutex<Attacher>,
        pending: PendingAdd,
    ) -> Result<AddResult, CniError> {
        let (mut view, node) = {
            let a = this.lock().await;
            (a.view.clone(), a.node.clone())
        };
        let host = pending.host.clone();
        let wait = async { view.wait_for(|v| v.enforced.contains(&host)).await.map(|_| ()) };
        let enforced = tokio::time::timeout(ENFORCED_WITHIN, wait).await;
        let outcome = match enforced {
            Ok(Ok(_)) => veth::set_up(&node, &host).await.map_err(|e| {
                CniError::new(code::ATTACH_FAILED, format!("cannot bring {host} up")).with_details(e)
            }),
            Ok(Err(_)) => Err(CniError::new(code::TRY_AGAIN_LATER, "the npagent agent is shutting down")),
            Err(_) => Err(CniError::new(
                code::TRY_AGAIN_LATER,
                format!(
                    "the pod's flows were not installed within {ENFORCED_WITHIN:?}: is the Pod known to the agent (in kube mode from the API, in manifests mode in the directory)?"
                ),
            )),
        };
        match outcome {
            Ok(()) => Ok(pending.result),
            Err(e) => {
                this.lock().await.undo(&pending.id).await;
                Err(e)
            }
        }
    }

    /// DEL: takes the attachment apart; one this agent does not know (never made, or taken
    /// apart already) is looked for by the names it would have had, and is no error.
    pub async fn del(&mut self, env: &Env, conf: &NetConf) -> Result<(), CniError> {
        let id = AttachmentId { container_id: env.container_id.clone(), ifname: env.ifname.clone() };
        if self.records.contains_key(&id) {
            return self.take_apart(&id).await;
        }
        let Some((_, name)) = env.pod() else { return Ok(()) };
        let record = self.record_for(env, conf, name);
        // Whatever an earlier agent left under those names (its record lost).
        let ours = port::list(&self.cfg.ovsdb, &self.cfg.bridge)
            .await
            .map_err(|e| CniError::new(code::TRY_AGAIN_LATER, "cannot read the bridge's ports").with_details(e))?
            .into_iter()
            .any(|p| p.name == record.host && p.get(port::key::CONTAINER_ID) == id.container_id);
        if ours {
            self.records.insert(id.clone(), record);
            return self.take_apart(&id).await;
        }
        if conf.ipam_type().is_some() {
            self.records.insert(id.clone(), Record { host: String::new(), ..record });
            return self.take_apart(&id).await;
        }
        Ok(())
    }

    /// CHECK: the attachment is as `prevResult` says, and enforced.
    pub async fn check(&self, env: &Env, conf: &NetConf) -> Result<(), CniError> {
        let id = AttachmentId { container_id: env.container_id.clone(), ifname: env.ifname.clone() };
        let unknown = |what: String| CniError::new(code::UNKNOWN_CONTAINER, what);
        let record = self
            .records
            .get(&id)
            .ok_or_else(|| unknown(format!("no attachment of container {} as {}", id.container_id, id.ifname)))?;
        let prev: AddResult = conf
            .prev_result
            .clone()
            .map(serde_json::from_value)
            .transpose()
            .map_err(|e| CniError::new(code::DECODE_FAILURE, "prevResult is malformed").with_details(e))?
            .ok_or_else(|| CniError::new(code::INVALID_NETWORK_CONFIG, "CHECK without prevResult"))?;
        let differs = |what: String| CniError::new(code::ATTACH_FAILED, what);
        let netns = env.netns.clone().unwrap_or_default();
        let end = veth::pod_end(&netns, &id.ifname)
            .await
            .map_err(|e| differs(format!("cannot read {} in {}", id.ifname, netns.display())).with_details(e))?
            .ok_or_else(|| differs(format!("{} is missing from {}", id.ifname, netns.display())))?;
        if !end.up {
            return Err(differs(format!("{} is down", id.ifname)));
        }
        let want_mac = prev.interfaces.iter().find(|i| i.name == id.ifname).map(|i| i.mac.to_lowercase());
        if want_mac.as_ref().is_some_and(|m| *m != format_mac(end.mac)) {
            return Err(differs(format!(
                "{} has MAC {}, prevResult says {}",
                id.ifname,
                format_mac(end.mac),
                want_mac.unwrap_or_default()
            )));
        }
        for ip in &prev.ips {
            let want = InterfaceAddr::parse(&ip.address).map_err(|e| differs(format!("prevResult address: {e}")))?;
            if !end.addrs.contains(&want) {
                return Err(differs(format!("{} lacks address {want} of prevResult", id.ifname)));
            }
        }
        let ports = port::list(&self.cfg.ovsdb, &self.cfg.bridge)
            .await
            .map_err(|e| CniError::new(code::TRY_AGAIN_LATER, "cannot read the bridge's ports").with_details(e))?;
        if !ports.iter().any(|p| p.name == record.host && p.get(port::key::CONTAINER_ID) == id.container_id) {
            return Err(differs(format!("port {} is missing from bridge {}", record.host, self.cfg.bridge)));
        }
        if !self.view.borrow().enforced.contains(&record.host) {
            return Err(differs(format!("the flows of port {} are not installed", record.host)));
        }
        Ok(())
    }

    /// GC: takes apart every attachment the runtime does not list as valid.
    pub async fn gc(&mut self, conf: &NetConf) -> Result<(), CniError> {
        let valid: BTreeSet<AttachmentId> = conf.valid_attachments.clone().unwrap_or_default().into_iter().collect();
        let stale: Vec<AttachmentId> = self.records.keys().filter(|id| !valid.contains(*id)).cloned().collect();
        let mut first_error = None;
        for id in stale {
            if let Err(e) = self.take_apart(&id).await {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// After a restart: the attachments from OVSDB and the state files; takes apart those
    /// whose network namespace is gone and releases addresses no port holds.
    pub async fn restore(&mut self) -> Result<(), CniError> {
        let io =
            |e: &dyn std::fmt::Display| CniError::new(code::IO_FAILURE, "restoring the attachments").with_details(e);
        std::fs::create_dir_all(&self.cfg.state_dir).map_err(|e| io(&e))?;
        let ports = port::list(&self.cfg.ovsdb, &self.cfg.bridge).await.map_err(|e| io(&e))?;
        let mut records = BTreeMap::new();
        for entry in std::fs::read_dir(&self.cfg.state_dir).map_err(|e| io(&e))?.flatten() {
            let path = entry.path();
            let read = std::fs::read(&path).ok().and_then(|b| serde_json::from_slice::<Record>(&b).ok());
            match read {
                Some(r) => {
                    let id = AttachmentId { container_id: r.env.container_id.clone(), ifname: r.env.ifname.clone() };
                    records.insert(id, r);
                }
                None => tracing::warn!("CNI state file {} is unreadable: ignored", path.display()),
            }
        }
        let mut gone = Vec::new();
        for (id, r) in records {
            let port = ports.iter().find(|p| p.name == r.host && p.get(port::key::CONTAINER_ID) == id.container_id);
            let netns_alive = r.env.netns.as_deref().is_some_and(Path::exists);
            if port.is_none() || !netns_alive || r.result.is_none() {
                gone.push(id.clone());
            }
            self.records.insert(id, r);
        }
        // Pod ports that no record explains and whose namespace is gone.
        for p in &ports {
            let id = AttachmentId {
                container_id: p.get(port::key::CONTAINER_ID).to_string(),
                ifname: p.get(port::key::IF_DEV).to_string(),
            };
            let netns = p.get(port::key::NET_NS);
            if !self.records.contains_key(&id) && !netns.is_empty() && !Path::new(netns).exists() {
                if let Err(e) = port::remove(&self.cfg.ovsdb, &self.cfg.bridge, &p.name).await {
                    tracing::warn!("removing the port of a gone pod: {e}");
                }
                let _ = veth::delete(&self.node, &p.name).await;
            }
        }
        let found = self.records.len();
        for id in &gone {
            self.undo(id).await;
        }
        tracing::info!(
            "CNI: {} attachment(s) restored, {} taken apart (namespace or port gone)",
            found - gone.len(),
            gone.len()
        );
        Ok(())
    }

    /// Takes attachment `id` apart: flows (withdrawn from the model), port, veth, address,
    /// record. Every step is tried; the first failure is returned and the record kept so a
    /// later DEL or GC tries again.
    async fn take_apart(&mut self, id: &AttachmentId) -> Result<(), CniError> {
        let Some(record) = self.records.get(id).cloned() else { return Ok(()) };
        let mut errors = Vec::new();
        if !record.host.is_empty() {
            self.withdrawn.send_modify(|w| {
                w.insert(record.host.clone());
            });
            let mut view = self.view.clone();
            let gone = async { view.wait_for(|v| !v.enforced.contains(&record.host)).await.map(|_| ()) };
            let _ = tokio::time::timeout(WITHDRAWN_WITHIN, gone).await;
            if let Err(e) = port::remove(&self.cfg.ovsdb, &self.cfg.bridge, &record.host).await {
                errors.push(e.to_string());
            }
            if let Err(e) = veth::delete(&self.node, &record.host).await {
                errors.push(e.to_string());
            }
        }
        if errors.is_empty() {
            self.release(id, &record).await;
        }
        self.withdrawn.send_modify(|w| {
            w.remove(&record.host);
        });
        match errors.is_empty() {
            true => {
                self.records.remove(id);
                Ok(())
            }
            false => Err(CniError::new(code::TRY_AGAIN_LATER, format!("cannot take apart port {}", record.host))
                .with_details(errors.join("; "))),
        }
    }

    /// The record of `env`'s attachment of pod `name` before it is made: the configuration
    /// the IPAM plugin gets, the node's end's name.
    fn record_for(&self, env: &Env, conf: &NetConf, name: &str) -> Record {
        let gateways = self.node_config.borrow().gateway_addrs.clone();
        Record {
            env: env.clone(),
            config: ipam::with_node_ranges(&conf.raw, &gateways),
            host: veth::host_ifname(name, &env.container_id),
            result: None,
        }
    }

    /// Takes apart an attachment whose ADD failed; what cannot be undone now stays recorded
    /// for a DEL or GC to finish, and is said.
    async fn undo(&mut self, id: &AttachmentId) {
        if let Err(e) = self.take_apart(id).await {
            tracing::warn!("container {} as {}: undoing its attachment: {e}", id.container_id, id.ifname);
        }
    }

    /// Releases the record's address through its IPAM plugin and removes its state file.
    async fn release(&mut self, id: &AttachmentId, record: &Record) {
        let plugin = record.config.get("ipam").and_then(|i| i.get("type")).and_then(Value::as_str);
        if let Some(plugin) = plugin {
            if let Err(e) = ipam::delegate(plugin, "DEL", &record.env, &record.config).await {
                tracing::warn!("container {} as {}: releasing its address: {e}", id.container_id, id.ifname);
                return;
            }
        }
        let _ = std::fs::remove_file(self.state_file(id));
    }

    fn state_file(&self, id: &AttachmentId) -> PathBuf {
        self.cfg.state_dir.join(format!("{}-{}.json", id.container_id, id.ifname))
    }

    /// Writes the record's state file (atomically: a temporary file renamed).
    fn save(&self, id: &AttachmentId, record: &Record) -> Result<(), CniError> {
        let path = self.state_file(id);
        let tmp = path.with_extension("tmp");
        let bytes = serde_json::to_vec(record).unwrap_or_default();
        std::fs::create_dir_all(&self.cfg.state_dir)
            .and_then(|()| std::fs::write(&tmp, bytes))
            .and_then(|()| std::fs::rename(&tmp, &path))
            .map_err(|e| CniError::new(code::IO_FAILURE, format!("cannot write {}", path.display())).with_details(e))
    }
}

/// The default routes' gateways: per family, the IPAM result's gateway, else the node's
/// gateway address of that family.
fn default_gateways(result: &AddResult, addrs: &[InterfaceAddr], node: &[InterfaceAddr]) -> Vec<IpAddr> {
    let mut out: Vec<IpAddr> = Vec::new();
    for (ip, addr) in result.ips.iter().zip(addrs) {
        let from_ipam = ip.gateway.as_deref().and_then(|g| g.parse::<IpAddr>().ok());
        let from_node = node.iter().map(|a| a.ip).find(|g| g.is_ipv4() == addr.ip.is_ipv4());
        if let Some(gw) = from_ipam.or(from_node) {
            if !out.iter().any(|o| o.is_ipv4() == gw.is_ipv4()) {
                out.push(gw);
            }
        }
    }
    out
}
