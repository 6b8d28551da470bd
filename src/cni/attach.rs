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
//!
//! An ADD that can never succeed fails at once with its cause, never after the wait: a Pod
//! whose name the API server would refuse or whose object the agent refused, a network
//! namespace that is the agent's or the host's, an address another local pod holds.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::watch;

use super::spec::{code, AddResult, AttachmentId, CniError, Command, Env, Interface, IpConfig, NetConf, Route};
use super::veth::{Leftover, PodEndConfig};
use super::{ipam, port, veth};
use crate::endpoint::Endpoint;
use crate::host::ovsdb::bridge;
use crate::host::ovsdb::port_keys::{self, role};
use crate::host::ovsdb::value::format_mac;
use crate::model::names::{validate_namespace_name, validate_object_name};
use crate::model::node::{InterfaceAddr, NodeConfig};
use crate::model::ObjectRef;

/// How long an ADD waits for the pod's flows.
pub const ENFORCED_WITHIN: Duration = Duration::from_secs(30);
/// How long a DEL waits for the pod's flows to go before it removes the port anyway.
const WITHDRAWN_WITHIN: Duration = Duration::from_secs(5);
/// How often a waiting ADD asks whether its Pod was refused meanwhile.
const REFUSAL_POLL: Duration = Duration::from_millis(100);
/// The network namespaces no pod may be given: the agent's own and the host's (init's).
const FORBIDDEN_NETNS: &[(&str, &str)] =
    &[("/proc/self/ns/net", "the npagent agent's own"), ("/proc/1/ns/net", "the host's")];

/// What the agent knows of a Pod, for an ADD that names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodStatus {
    /// No such Pod (yet): in kube mode not in the API, in manifests mode not in the directory.
    Unknown,
    Known,
    /// The agent refused the Pod's object, with why (its log said so too).
    Refused(String),
}

/// The local pod holding an address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// `namespace/name`.
    pub pod: String,
    /// Its port on the bridge.
    pub port: String,
}

/// What the agent knows of pods, asked by the CNI side (the agent's store answers).
pub trait PodDirectory: Send + Sync {
    /// What the agent knows of Pod `namespace/name`.
    fn pod(&self, namespace: &str, name: &str) -> PodStatus;
    /// The local pod that holds `ip` (its port's or its Pod's address), if any.
    fn local_holder(&self, ip: IpAddr) -> Option<Holder>;
}

/// Whether the agent can take ADDs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Readiness {
    /// The agent has synced its sources and the switch.
    Ready,
    /// Not yet, or not any more: why.
    NotReady(String),
}

impl Default for Readiness {
    /// Not ready, before the agent has said anything.
    fn default() -> Readiness {
        Readiness::NotReady(String::new())
    }
}

/// What the agent tells the CNI side.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentView {
    pub readiness: Readiness,
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
    /// Whether the node's end carries the attachment's mark (every device this npagent
    /// makes); records of an npagent that did not mark its devices lack it.
    #[serde(default)]
    marked: bool,
}

/// The attachments this agent made, and the means to make more.
pub struct Attacher {
    cfg: AttachConfig,
    node: rtnetlink::Handle,
    records: BTreeMap<AttachmentId, Record>,
    node_config: watch::Receiver<NodeConfig>,
    view: watch::Receiver<AgentView>,
    pods: Arc<dyn PodDirectory>,
    withdrawn: watch::Sender<BTreeSet<String>>,
}

/// An ADD made but not yet enforced: [`Attacher::wait_enforced`] finishes it.
#[derive(Debug)]
pub struct PendingAdd {
    id: AttachmentId,
    host: String,
    pod: ObjectRef,
    result: AddResult,
}

/// The bridge's datapath, as far as a pod's interface is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Datapath {
    Kernel,
    /// OVS's userspace datapath (`datapath_type=netdev`): pods' interfaces must compute their
    /// own checksums.
    Userspace,
}

impl Attacher {
    /// An attacher with no attachments; `node` is a netlink handle of the node's namespace.
    pub fn new(
        cfg: AttachConfig,
        node: rtnetlink::Handle,
        node_config: watch::Receiver<NodeConfig>,
        view: watch::Receiver<AgentView>,
        pods: Arc<dyn PodDirectory>,
    ) -> Attacher {
        Attacher { cfg, node, records: BTreeMap::new(), node_config, view, pods, withdrawn: watch::Sender::default() }
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
        match &self.view.borrow().readiness {
            Readiness::Ready => Ok(()),
            Readiness::NotReady(why) => Err(CniError::new(code, format!("the npagent agent is not ready: {why}"))),
        }
    }

    /// ADD's first half: the address, the veth (node's end down) and the port. The pod is
    /// not reachable yet; [`Attacher::wait_enforced`] finishes.
    pub async fn add(&mut self, env: &Env, conf: &NetConf) -> Result<PendingAdd, CniError> {
        self.ready(code::TRY_AGAIN_LATER)?;
        let id = AttachmentId::of(env);
        let pod = self.pod_of(env)?;
        if let Some(Record { host, result: Some(result), .. }) = self.records.get(&id) {
            // A repeated ADD of a made attachment (a runtime retrying after a lost answer).
            return Ok(PendingAdd { id, host: host.clone(), pod, result: result.clone() });
        }
        let netns = env.netns.clone().unwrap_or_default();
        check_netns(&netns)?;
        let plugin = conf.ipam_type().ok_or_else(|| {
            CniError::new(code::INVALID_NETWORK_CONFIG, "the network configuration has no ipam section")
        })?;
        let record = self.record_for(env, conf, &pod.name);
        if let Some(other) = self.records.values().find(|r| r.host == record.host) {
            return Err(CniError::new(
                code::ATTACH_FAILED,
                format!("port {} is held by container {} already", record.host, other.env.container_id),
            ));
        }
        let datapath = self.datapath().await?;
        self.save(&id, &record)?;
        let allocated = match ipam::delegate(plugin, Command::Add, env, &record.config).await {
            Ok(v) => ipam::parse_result(plugin, v).and_then(|r| self.unheld(&id, plugin, r)),
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
        match self.plumb(&record, &pod, &ipam_result, datapath, &conf.cni_version).await {
            Ok(result) => {
                let record = Record { result: Some(result.clone()), ..record };
                if let Err(e) = self.save(&id, &record) {
                    self.undo(&id).await;
                    return Err(e);
                }
                self.records.insert(id.clone(), record.clone());
                Ok(PendingAdd { id, host: record.host, pod, result })
            }
            Err(e) => {
                self.undo(&id).await;
                Err(e)
            }
        }
    }

    /// The Pod `env` names (`K8S_POD_NAMESPACE`, `K8S_POD_NAME`), refused at once when the
    /// API server would refuse its names or the agent refused its object.
    fn pod_of(&self, env: &Env) -> Result<ObjectRef, CniError> {
        let (namespace, name) = env.pod().ok_or_else(|| {
            CniError::new(code::INVALID_ENVIRONMENT, "CNI_ARGS names no pod (K8S_POD_NAMESPACE and K8S_POD_NAME)")
        })?;
        let invalid = |what: &str, value: &str, why: String| {
            CniError::new(
                code::INVALID_ENVIRONMENT,
                format!("CNI_ARGS {what} {value:?} is not a Kubernetes name: {why}"),
            )
        };
        validate_namespace_name(namespace).map_err(|why| invalid("K8S_POD_NAMESPACE", namespace, why))?;
        validate_object_name(name).map_err(|why| invalid("K8S_POD_NAME", name, why))?;
        let pod = ObjectRef { namespace: namespace.into(), name: name.into() };
        if let PodStatus::Refused(why) = self.pods.pod(namespace, name) {
            return Err(refused(&pod, &why));
        }
        Ok(pod)
    }

    /// The bridge's datapath.
    async fn datapath(&self) -> Result<Datapath, CniError> {
        let datapath = bridge::datapath_type(&self.cfg.ovsdb, &self.cfg.bridge).await.map_err(|e| {
            CniError::new(code::TRY_AGAIN_LATER, "cannot read the bridge's datapath type").with_details(e)
        })?;
        Ok(match datapath == bridge::USERSPACE_DATAPATH {
            true => Datapath::Userspace,
            false => Datapath::Kernel,
        })
    }

    /// `result` when none of its addresses is held by another local pod or attachment; else
    /// an error naming the holder (the caller releases the addresses).
    fn unheld(&self, id: &AttachmentId, plugin: &str, result: AddResult) -> Result<AddResult, CniError> {
        for ip in &result.ips {
            let Ok(addr) = InterfaceAddr::parse(&ip.address) else { continue };
            let other_record = self.records.iter().find(|(other, r)| {
                *other != id
                    && r.result.as_ref().is_some_and(|res| {
                        res.ips.iter().any(|o| InterfaceAddr::parse(&o.address).is_ok_and(|o| o.ip == addr.ip))
                    })
            });
            let holder = match (other_record, self.pods.local_holder(addr.ip)) {
                (_, Some(h)) => format!("local pod {} (port {})", h.pod, h.port),
                (Some((other, r)), None) => {
                    format!("container {} as {} (port {})", other.container_id, other.ifname, r.host)
                }
                (None, None) => continue,
            };
            return Err(CniError::new(
                code::ATTACH_FAILED,
                format!(
                    "IPAM plugin {plugin} gave address {}, which {holder} holds already; the address is released",
                    addr.ip
                ),
            ));
        }
        Ok(result)
    }

    /// The veth and the port of `record`'s attachment of `pod` for the addresses IPAM
    /// allocated (`ipam_result`); the ADD's result, written in `version`.
    async fn plumb(
        &self,
        record: &Record,
        pod: &ObjectRef,
        ipam_result: &AddResult,
        datapath: Datapath,
        version: &str,
    ) -> Result<AddResult, CniError> {
        let id = &AttachmentId::of(&record.env);
        let gateways = self.node_config.borrow().gateway_addrs.clone();
        let failed =
            |what: String| move |e: &dyn std::fmt::Display| CniError::new(code::ATTACH_FAILED, what).with_details(e);
        let addrs = ipam_result
            .ips
            .iter()
            .map(|ip| {
                InterfaceAddr::parse(&ip.address).map_err(|e| failed(format!("IPAM gave address {:?}", ip.address))(&e))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let routes = default_gateways(ipam_result, &addrs, &gateways);
        let netns = record.env.netns.clone().unwrap_or_default();
        let pod_end = PodEndConfig {
            netns: netns.clone(),
            ifname: id.ifname.clone(),
            addrs: addrs.clone(),
            gateways: routes.clone(),
            tx_checksums_off: datapath == Datapath::Userspace,
        };
        let mac =
            veth::create(&self.node, &record.host, &owner(id), &pod_end).await.map_err(|e| match e.is_netns() {
                true => CniError::new(code::INVALID_ENVIRONMENT, format!("CNI_NETNS: {e}")),
                false => failed(format!("cannot make the veth pair {}", record.host))(&e),
            })?;
        let mac_text = format_mac(mac);
        let ips: Vec<String> = addrs.iter().map(|a| a.ip.to_string()).collect();
        let ids: BTreeMap<String, String> = [
            (port_keys::ANTREA_TYPE, role::CONTAINER.to_string()),
            (port_keys::CONTAINER_ID, id.container_id.clone()),
            (port_keys::POD_NAME, pod.name.to_string()),
            (port_keys::POD_NAMESPACE, pod.namespace.to_string()),
            (port_keys::IP_ADDRESS, ips.join(",")),
            (port_keys::ATTACHED_MAC, mac_text.clone()),
            (port_keys::IF_DEV, id.ifname.clone()),
            (port_keys::NET_NS, netns.display().to_string()),
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
        let (view, node, pods) = {
            let a = this.lock().await;
            (a.view.clone(), a.node.clone(), Arc::clone(&a.pods))
        };
        let host = pending.host.clone();
        let pod = &pending.pod;
        let enforced = tokio::time::timeout(ENFORCED_WITHIN, wait_for_flows(view, &*pods, &host, pod)).await;
        let outcome = match enforced {
            Ok(Ok(())) => veth::set_up(&node, &host).await.map_err(|e| {
                CniError::new(code::ATTACH_FAILED, format!("cannot bring {host} up")).with_details(e)
            }),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(match pods.pod(&pod.namespace, &pod.name) {
                PodStatus::Unknown => CniError::new(
                    code::TRY_AGAIN_LATER,
                    format!(
                        "Pod {pod} is not known to the agent within {ENFORCED_WITHIN:?} (in kube mode: not in the API; in manifests mode: not in the directory)"
                    ),
                ),
                PodStatus::Refused(why) => refused(pod, &why),
                PodStatus::Known => CniError::new(
                    code::TRY_AGAIN_LATER,
                    format!(
                        "the flows of Pod {pod} were not installed within {ENFORCED_WITHIN:?}: the agent has not caught up (see its log)"
                    ),
                ),
            }),
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
        let id = AttachmentId::of(env);
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
            .any(|p| p.is_of(&record.host, &id));
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
        let id = AttachmentId::of(env);
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
        if !ports.iter().any(|p| p.is_of(&record.host, &id)) {
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
            if path.extension().is_some_and(|e| e == "tmp") {
                // A write a crash cut short: the record it would have replaced is still there.
                let _ = std::fs::remove_file(&path);
                continue;
            }
            let read = std::fs::read(&path).ok().and_then(|b| serde_json::from_slice::<Record>(&b).ok());
            match read {
                Some(r) => {
                    let id = AttachmentId::of(&r.env);
                    if path != self.state_file(&id) {
                        // Named as an earlier npagent named records: renamed to today's name.
                        if let Err(e) = std::fs::rename(&path, self.state_file(&id)) {
                            tracing::warn!("CNI state file {}: cannot rename it: {e}", path.display());
                        }
                    }
                    records.insert(id, r);
                }
                None => tracing::warn!("CNI state file {} is unreadable: ignored", path.display()),
            }
        }
        let mut gone = Vec::new();
        for (id, r) in records {
            let has_port = ports.iter().any(|p| p.is_of(&r.host, &id));
            let netns_alive = r.env.netns.as_deref().is_some_and(Path::exists);
            if !has_port || !netns_alive || r.result.is_none() {
                gone.push(id.clone());
            }
            self.records.insert(id, r);
        }
        // Pod ports that no record explains and whose namespace is gone.
        for p in &ports {
            let id = p.attachment();
            let netns = p.get(port_keys::NET_NS);
            if !self.records.contains_key(&id) && !netns.is_empty() && !Path::new(netns).exists() {
                if let Err(e) = port::remove(&self.cfg.ovsdb, &self.cfg.bridge, &p.name).await {
                    tracing::warn!("removing the port of a gone pod: {e}");
                }
                if let Err(e) = veth::delete_owned(&self.node, &p.name, &owner(&id), Leftover::MayBeUnmarked).await {
                    tracing::warn!("removing the veth of a gone pod: {e}");
                }
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
            let leftover = if record.marked { Leftover::MustBeMarked } else { Leftover::MayBeUnmarked };
            match veth::delete_owned(&self.node, &record.host, &owner(id), leftover).await {
                Ok(()) => {}
                // Another's device under the name: nothing of this attachment is there.
                Err(e @ veth::VethError::NotOurs { .. }) => tracing::warn!("CNI {}: {e}: left as it is", owner(id)),
                Err(e) => errors.push(e.to_string()),
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
            marked: true,
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
            if let Err(e) = ipam::delegate(plugin, Command::Del, &record.env, &record.config).await {
                tracing::warn!("container {} as {}: releasing its address: {e}", id.container_id, id.ifname);
                return;
            }
        }
        let _ = std::fs::remove_file(self.state_file(id));
    }

    /// The record's file: `<container id>:<interface>.json`. Neither part can hold a ':', so
    /// no two attachments share a name.
    fn state_file(&self, id: &AttachmentId) -> PathBuf {
        self.cfg.state_dir.join(format!("{}:{}.json", id.container_id, id.ifname))
    }

    /// Writes the record's state file (atomically: a temporary file renamed).
    fn save(&self, id: &AttachmentId, record: &Record) -> Result<(), CniError> {
        let path = self.state_file(id);
        let mut tmp = path.clone().into_os_string();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        let bytes = serde_json::to_vec(record).map_err(|e| {
            CniError::new(code::IO_FAILURE, format!("cannot serialise the record of {}", path.display()))
                .with_details(e)
        })?;
        std::fs::create_dir_all(&self.cfg.state_dir)
            .and_then(|()| std::fs::write(&tmp, bytes))
            .and_then(|()| std::fs::rename(&tmp, &path))
            .map_err(|e| CniError::new(code::IO_FAILURE, format!("cannot write {}", path.display())).with_details(e))
    }
}

/// The mark on the ends of attachment `id`'s veth.
fn owner(id: &AttachmentId) -> String {
    veth::owner_alias(&id.container_id, &id.ifname)
}

/// The ADD of a Pod the agent refused.
fn refused(pod: &ObjectRef, why: &str) -> CniError {
    CniError::new(code::ATTACH_FAILED, format!("Pod {pod} was refused by the agent: {why}"))
}

/// Refuses a `CNI_NETNS` that cannot be opened, or that is the agent's own or the host's
/// network namespace (the same device and inode, whatever the path).
fn check_netns(netns: &Path) -> Result<(), CniError> {
    let invalid = |msg: String| CniError::new(code::INVALID_ENVIRONMENT, msg);
    let meta = std::fs::metadata(netns).and_then(|m| std::fs::File::open(netns).map(|_| m)).map_err(|e| {
        invalid(format!("CNI_NETNS {}: the network namespace cannot be opened", netns.display())).with_details(e)
    })?;
    for (path, whose) in FORBIDDEN_NETNS {
        if std::fs::metadata(path).is_ok_and(|m| (m.dev(), m.ino()) == (meta.dev(), meta.ino())) {
            return Err(invalid(format!("CNI_NETNS {} is {whose} network namespace, not a pod's", netns.display())));
        }
    }
    Ok(())
}

/// Waits until `host`'s flows are installed; an error as soon as the agent refuses the Pod
/// or shuts down.
async fn wait_for_flows(
    mut view: watch::Receiver<AgentView>,
    pods: &dyn PodDirectory,
    host: &str,
    pod: &ObjectRef,
) -> Result<(), CniError> {
    let mut poll = tokio::time::interval(REFUSAL_POLL);
    loop {
        if view.borrow_and_update().enforced.contains(host) {
            return Ok(());
        }
        if let PodStatus::Refused(why) = pods.pod(&pod.namespace, &pod.name) {
            return Err(refused(pod, &why));
        }
        tokio::select! {
            changed = view.changed() => if changed.is_err() {
                return Err(CniError::new(code::TRY_AGAIN_LATER, "the npagent agent is shutting down"));
            },
            _ = poll.tick() => {}
        }
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
