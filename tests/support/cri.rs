//! A blocking client of a container runtime's CRI socket (`runtime.v1.RuntimeService`, the
//! `k8s-cri` crate's tonic client), making the calls kubelet makes for a pod: RunPodSandbox,
//! CreateContainer and StartContainer, PodSandboxStatus, ExecSync, StopPodSandbox and
//! RemovePodSandbox. Every method may be called from many threads at once.

use std::path::{Path, PathBuf};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use k8s_cri::v1::runtime_service_client::RuntimeServiceClient;
use k8s_cri::v1::{
    ContainerConfig, ContainerMetadata, CreateContainerRequest, ExecSyncRequest, ImageSpec, ListPodSandboxRequest,
    Mount, PodSandboxConfig, PodSandboxMetadata, PodSandboxStatusRequest, RemovePodSandboxRequest,
    RunPodSandboxRequest, StartContainerRequest, StopPodSandboxRequest, VersionRequest,
};
use tonic::transport::{Channel, Endpoint, Uri};

/// A pod as kubelet names it to the runtime.
#[derive(Clone, Debug)]
pub struct PodRef {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

impl PodRef {
    /// Pod `namespace/name` with a uid made from both.
    pub fn new(namespace: &str, name: &str) -> PodRef {
        PodRef { namespace: namespace.into(), name: name.into(), uid: format!("uid-{namespace}-{name}") }
    }

    /// `namespace/name`.
    pub fn id(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// One connection to a CRI socket.
pub struct Cri {
    rt: tokio::runtime::Runtime,
    channel: Channel,
    /// Where the pods' container logs go.
    log_dir: PathBuf,
}

impl Cri {
    /// Connects to the CRI socket at `socket`; container logs go under `log_dir`.
    pub fn connect(socket: &Path, log_dir: &Path) -> Result<Cri, String> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| format!("tokio runtime: {e}"))?;
        let path = socket.to_owned();
        let channel = rt
            .block_on(async {
                Endpoint::from_static("http://[::]")
                    .connect_timeout(Duration::from_secs(5))
                    .connect_with_connector(tower::service_fn(move |_: Uri| {
                        let path = path.clone();
                        async move { Ok::<_, std::io::Error>(TokioIo::new(tokio::net::UnixStream::connect(path).await?)) }
                    }))
                    .await
            })
            .map_err(|e| format!("connect to {}: {e}", socket.display()))?;
        Ok(Cri { rt, channel, log_dir: log_dir.to_owned() })
    }

    fn client(&self) -> RuntimeServiceClient<Channel> {
        RuntimeServiceClient::new(self.channel.clone())
    }

    /// The runtime's name and version (`Version`).
    pub fn version(&self) -> Result<String, tonic::Status> {
        let v = self.rt.block_on(self.client().version(VersionRequest { version: "v1".into() }))?.into_inner();
        Ok(format!("{} {} (CRI {})", v.runtime_name, v.runtime_version, v.runtime_api_version))
    }

    /// The sandbox configuration kubelet would send for `pod`.
    fn sandbox_config(&self, pod: &PodRef) -> PodSandboxConfig {
        PodSandboxConfig {
            metadata: Some(PodSandboxMetadata {
                name: pod.name.clone(),
                uid: pod.uid.clone(),
                namespace: pod.namespace.clone(),
                attempt: 0,
            }),
            hostname: pod.name.clone(),
            log_directory: self.log_dir.join(format!("{}_{}", pod.namespace, pod.name)).display().to_string(),
            ..Default::default()
        }
    }

    /// RunPodSandbox: the pod's sandbox (and, through the CNI, its network); its id.
    pub fn run_pod_sandbox(&self, pod: &PodRef) -> Result<String, tonic::Status> {
        let request = RunPodSandboxRequest { config: Some(self.sandbox_config(pod)), ..Default::default() };
        Ok(self.rt.block_on(self.client().run_pod_sandbox(request))?.into_inner().pod_sandbox_id)
    }

    /// CreateContainer and StartContainer: container `name` of `image` in sandbox `sandbox`
    /// running `command`, with `mounts` (`(host path, container path, read-only)`); its id.
    pub fn start_container(
        &self,
        sandbox: &str,
        pod: &PodRef,
        name: &str,
        image: &str,
        command: &[String],
        mounts: &[(PathBuf, String, bool)],
    ) -> Result<String, tonic::Status> {
        let config = ContainerConfig {
            metadata: Some(ContainerMetadata { name: name.into(), attempt: 0 }),
            image: Some(ImageSpec { image: image.into(), ..Default::default() }),
            command: command.to_vec(),
            mounts: mounts
                .iter()
                .map(|(host, container, readonly)| Mount {
                    host_path: host.display().to_string(),
                    container_path: container.clone(),
                    readonly: *readonly,
                    ..Default::default()
                })
                .collect(),
            log_path: format!("{name}.log"),
            ..Default::default()
        };
        let request = CreateContainerRequest {
            pod_sandbox_id: sandbox.into(),
            config: Some(config),
            sandbox_config: Some(self.sandbox_config(pod)),
        };
        let id = self.rt.block_on(self.client().create_container(request))?.into_inner().container_id;
        self.rt.block_on(self.client().start_container(StartContainerRequest { container_id: id.clone() }))?;
        Ok(id)
    }

    /// The sandbox's pod address (PodSandboxStatus).
    pub fn pod_ip(&self, sandbox: &str) -> Result<String, tonic::Status> {
        let request = PodSandboxStatusRequest { pod_sandbox_id: sandbox.into(), verbose: false };
        let status = self.rt.block_on(self.client().pod_sandbox_status(request))?.into_inner();
        Ok(status.status.and_then(|s| s.network).map(|n| n.ip).unwrap_or_default())
    }

    /// The sandbox's network namespace, from the runtime's verbose PodSandboxStatus (the
    /// network namespace of its runtime spec), if it says.
    pub fn netns_path(&self, sandbox: &str) -> Option<String> {
        let request = PodSandboxStatusRequest { pod_sandbox_id: sandbox.into(), verbose: true };
        let status = self.rt.block_on(self.client().pod_sandbox_status(request)).ok()?.into_inner();
        let info: serde_json::Value = serde_json::from_str(status.info.get("info")?).ok()?;
        let namespaces = info["runtimeSpec"]["linux"]["namespaces"].as_array()?;
        let network = namespaces.iter().find(|n| n["type"] == "network")?;
        network["path"].as_str().map(str::to_owned)
    }

    /// ExecSync: runs `cmd` in container `container`; its exit code and stdout.
    pub fn exec_sync(&self, container: &str, cmd: &[&str]) -> Result<(i32, String), tonic::Status> {
        let request = ExecSyncRequest {
            container_id: container.into(),
            cmd: cmd.iter().map(|s| s.to_string()).collect(),
            timeout: 30,
        };
        let out = self.rt.block_on(self.client().exec_sync(request))?.into_inner();
        Ok((out.exit_code, String::from_utf8_lossy(&out.stdout).into_owned()))
    }

    /// StopPodSandbox (its containers stop, its network is taken down through the CNI).
    pub fn stop_pod_sandbox(&self, sandbox: &str) -> Result<(), tonic::Status> {
        self.rt.block_on(self.client().stop_pod_sandbox(StopPodSandboxRequest { pod_sandbox_id: sandbox.into() }))?;
        Ok(())
    }

    /// RemovePodSandbox.
    pub fn remove_pod_sandbox(&self, sandbox: &str) -> Result<(), tonic::Status> {
        let request = RemovePodSandboxRequest { pod_sandbox_id: sandbox.into() };
        self.rt.block_on(self.client().remove_pod_sandbox(request))?;
        Ok(())
    }

    /// Stops and removes a sandbox, as kubelet does when a pod is deleted.
    pub fn remove_pod(&self, sandbox: &str) -> Result<(), tonic::Status> {
        self.stop_pod_sandbox(sandbox)?;
        self.remove_pod_sandbox(sandbox)
    }

    /// The ids of every sandbox the runtime knows.
    pub fn sandboxes(&self) -> Result<Vec<String>, tonic::Status> {
        let list = self.rt.block_on(self.client().list_pod_sandbox(ListPodSandboxRequest { filter: None }))?;
        Ok(list.into_inner().items.into_iter().map(|s| s.id).collect())
    }
}
