//! The Kubernetes API as a source: kube-rs watchers of Namespaces, Pods (of all nodes: remote
//! pods are policy peers), Nodes (routes to their pods, this node's configuration),
//! NetworkPolicies, StagedNetworkPolicies and ClusterNetworkPolicies; the ServiceCIDRs are
//! watched for the node's configuration ([`super::node_config`]).
//!
//! The two CRDs are optional (`watch_optional`): when the API server serves no
//! StagedNetworkPolicies or no ClusterNetworkPolicies (404: the CRD is not installed), that is
//! said once, that kind's watch ends with an empty listing (nothing is staged, or no
//! ClusterNetworkPolicy is enforced, and the kind counts as listed), and the other watchers go
//! on.
//!
//! The watchers deserialize straight into [`crate::k8s`]: only the fields npagent reads are
//! ever built. Each watcher's (re)list (`Init`, `InitApply`..., `InitDone`) is delivered in
//! [`SourceEvent::ResetChunk`]s of [`LIST_CHUNK`] objects and the [`SourceEvent::Reset`] that
//! ends it at `InitDone`, so consumers replace the kind's objects as one listing (also after a
//! 410 Gone resync) without a whole listing ever in memory at once. Watch errors are logged and
//! retried with kube's default backoff; they never end the stream.

use std::path::Path;

use futures::{Stream, StreamExt};
use kube::runtime::watcher::{self, watcher, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Client};
use tokio::sync::mpsc;

use super::{Error, Kind, KubeObject, SourceEvent, Sourced};
use crate::k8s::{ClusterNetworkPolicy, Namespace, NetworkPolicy, Node, Pod, StagedNetworkPolicy};

/// Objects per [`SourceEvent::ResetChunk`] of a listing.
pub const LIST_CHUNK: usize = 1000;

/// Origin of every object this source delivers.
pub const ORIGIN: &str = "kube";

/// A client from the kubeconfig at `kubeconfig`, or else the default chain (`$KUBECONFIG`,
/// `~/.kube/config`, then the in-cluster service account).
pub async fn client(kubeconfig: Option<&Path>) -> Result<Client, Error> {
    let err = |e: &dyn std::fmt::Display| Error::Kube(e.to_string());
    match kubeconfig {
        None => Client::try_default().await.map_err(|e| err(&e)),
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .map_err(|e| Error::Kube(format!("{}: {e}", path.display())))?;
            let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
                .await
                .map_err(|e| Error::Kube(format!("{}: {e}", path.display())))?;
            Client::try_from(config).map_err(|e| err(&e))
        }
    }
}

/// A Kubernetes resource type this source watches.
pub trait Watched:
    kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + Sync + 'static
{
    const KIND: Kind;
    fn wrap(self) -> KubeObject;
}

impl Watched for Namespace {
    const KIND: Kind = Kind::Namespace;
    fn wrap(self) -> KubeObject {
        KubeObject::Namespace(self)
    }
}

impl Watched for Pod {
    const KIND: Kind = Kind::Pod;
    fn wrap(self) -> KubeObject {
        KubeObject::Pod(self)
    }
}

impl Watched for Node {
    const KIND: Kind = Kind::Node;
    fn wrap(self) -> KubeObject {
        KubeObject::Node(self)
    }
}

impl Watched for NetworkPolicy {
    const KIND: Kind = Kind::NetworkPolicy;
    fn wrap(self) -> KubeObject {
        KubeObject::NetworkPolicy(self)
    }
}

impl Watched for StagedNetworkPolicy {
    const KIND: Kind = Kind::StagedNetworkPolicy;
    fn wrap(self) -> KubeObject {
        KubeObject::StagedNetworkPolicy(self)
    }
}

impl Watched for ClusterNetworkPolicy {
    const KIND: Kind = Kind::ClusterNetworkPolicy;
    fn wrap(self) -> KubeObject {
        KubeObject::ClusterNetworkPolicy(self)
    }
}

/// Turns one kind's watcher events into [`SourceEvent`]s.
#[derive(Debug)]
pub struct EventMapper<K> {
    /// Objects of a (re)list in progress.
    listing: Option<Vec<Sourced<KubeObject>>>,
    _kind: std::marker::PhantomData<K>,
}

impl<K: Watched> Default for EventMapper<K> {
    fn default() -> Self {
        Self { listing: None, _kind: std::marker::PhantomData }
    }
}

impl<K: Watched> EventMapper<K> {
    /// The event to deliver for `ev`, if any.
    pub fn map(&mut self, ev: Event<K>) -> Option<SourceEvent> {
        let sourced = |o: K| Sourced::new(ORIGIN, o.wrap());
        match ev {
            Event::Init => {
                self.listing = Some(Vec::new());
                None
            }
            Event::InitApply(o) => {
                let listing = self.listing.get_or_insert_with(Vec::new);
                listing.push(sourced(o));
                (listing.len() >= LIST_CHUNK)
                    .then(|| SourceEvent::ResetChunk { kinds: vec![K::KIND], objects: std::mem::take(listing) })
            }
            Event::InitDone => {
                Some(SourceEvent::Reset { kinds: vec![K::KIND], objects: self.listing.take().unwrap_or_default() })
            }
            Event::Apply(o) => Some(SourceEvent::Applied(sourced(o))),
            Event::Delete(o) => {
                let object = o.wrap().object_ref();
                Some(SourceEvent::Deleted { kind: K::KIND, object })
            }
        }
    }
}

/// Maps a watcher stream (errors included) to source events, logging the errors.
pub fn source_events<K, S>(stream: S) -> impl Stream<Item = SourceEvent> + Send
where
    K: Watched,
    S: Stream<Item = Result<Event<K>, watcher::Error>> + Send,
{
    let mut mapper = EventMapper::<K>::default();
    stream.filter_map(move |item| {
        let out = match item {
            Ok(ev) => mapper.map(ev),
            Err(e) => {
                tracing::warn!(kind = %K::KIND, "Kubernetes watch failed, retrying with backoff: {e}");
                None
            }
        };
        std::future::ready(out)
    })
}

fn watch<K: Watched>(client: Client) -> impl Stream<Item = SourceEvent> + Send {
    let stream = watcher(Api::<K>::all(client), watcher::Config::default()).default_backoff();
    source_events::<K, _>(stream)
}

/// Whether a watcher error is the API server's 404: the resource is not served.
pub(super) fn is_not_found(e: &watcher::Error) -> bool {
    match e {
        watcher::Error::InitialListFailed(kube::Error::Api(status))
        | watcher::Error::WatchStartFailed(kube::Error::Api(status))
        | watcher::Error::WatchFailed(kube::Error::Api(status)) => status.is_not_found(),
        watcher::Error::WatchError(status) => status.is_not_found(),
        _ => false,
    }
}

/// The watch of a resource the API server may not serve (its CRD is optional): as [`watch`],
/// but a 404 ends it with an empty listing of its kind (none exists, and the kind counts as
/// listed) after one line is logged, once: "the Kubernetes API does not serve <Kind>
/// (<apiVersion>): <absent>". A CRD installed later is read after a restart.
fn watch_optional<K: Watched + k8s_openapi::Resource>(
    client: Client,
    absent: &'static str,
) -> impl Stream<Item = SourceEvent> + Send {
    let stream = watcher(Api::<K>::all(client), watcher::Config::default()).default_backoff();
    let served = stream.take_while(|item| std::future::ready(!matches!(item, Err(e) if is_not_found(e))));
    source_events::<K, _>(served).chain(futures::stream::once(async move {
        tracing::info!(
            "the Kubernetes API does not serve {} ({}): {absent}",
            <K as k8s_openapi::Resource>::KIND,
            <K as k8s_openapi::Resource>::API_VERSION
        );
        SourceEvent::Reset { kinds: vec![<K as Watched>::KIND], objects: Vec::new() }
    }))
}

/// The API group (`""` for core) and resource (plural, as in RBAC rules) of every kind
/// [`watch_kube`] and [`super::node_config::service_cidr_events`] watch: what npagent's ClusterRole must grant,
/// with [`VERBS`], and nothing more.
pub const WATCHED_RESOURCES: [(&str, &str); 7] = [
    api_resource::<k8s_openapi::api::core::v1::Namespace>(),
    api_resource::<k8s_openapi::api::core::v1::Pod>(),
    api_resource::<k8s_openapi::api::networking::v1::NetworkPolicy>(),
    api_resource::<StagedNetworkPolicy>(),
    api_resource::<ClusterNetworkPolicy>(),
    api_resource::<k8s_openapi::api::core::v1::Node>(),
    api_resource::<k8s_openapi::api::networking::v1::ServiceCIDR>(),
];

/// The RBAC verbs npagent needs on [`WATCHED_RESOURCES`]. The watchers list and watch; `get`
/// reveals nothing a `list` does not, and is granted so that a read-only role reads as one.
pub const VERBS: [&str; 3] = ["get", "list", "watch"];

const fn api_resource<K: k8s_openapi::Resource>() -> (&'static str, &'static str) {
    (K::GROUP, K::URL_PATH_SEGMENT)
}

/// Watches Namespaces, Pods, Nodes, NetworkPolicies, StagedNetworkPolicies and
/// ClusterNetworkPolicies cluster-wide and sends their events to `tx`
/// until the receiver is gone. Never fails: API errors are retried with backoff.
pub async fn watch_kube(client: Client, tx: mpsc::Sender<SourceEvent>) {
    let mut all = futures::stream::select_all([
        watch::<Namespace>(client.clone()).boxed(),
        watch::<Pod>(client.clone()).boxed(),
        watch::<Node>(client.clone()).boxed(),
        watch::<NetworkPolicy>(client.clone()).boxed(),
        watch_optional::<StagedNetworkPolicy>(
            client.clone(),
            "its CRD, deploy/staged-network-policy-crd.yaml, is not installed; nothing is staged; \
             install it and restart npagent to stage policies",
        )
        .boxed(),
        watch_optional::<ClusterNetworkPolicy>(
            client,
            "its CRD, from kubernetes-sigs/network-policy-api (README.md, \"Deploy on a cluster\"), is not \
             installed; no ClusterNetworkPolicy is enforced; install it and restart npagent to enforce them",
        )
        .boxed(),
    ]);
    loop {
        tokio::select! {
            ev = all.next() => match ev {
                Some(ev) => if tx.send(ev).await.is_err() { return },
                None => return, // watchers never end; kept for completeness
            },
            _ = tx.closed() => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn pod(name: &str) -> Pod {
        Pod {
            metadata: ObjectMeta { name: Some(name.into()), namespace: Some("x".into()), ..Default::default() },
            ..Default::default()
        }
    }

    fn names(ev: &SourceEvent) -> Vec<String> {
        match ev {
            SourceEvent::Reset { objects, .. } => objects.iter().map(|o| o.object.object_ref().to_string()).collect(),
            other => panic!("not a Reset: {other:?}"),
        }
    }

    #[test]
    fn watched_resources_are_the_rbac_names() {
        assert_eq!(
            WATCHED_RESOURCES,
            [
                ("", "namespaces"),
                ("", "pods"),
                ("networking.k8s.io", "networkpolicies"),
                ("policy.npagent.io", "stagednetworkpolicies"),
                ("policy.networking.k8s.io", "clusternetworkpolicies"),
                ("", "nodes"),
                ("networking.k8s.io", "servicecidrs")
            ]
        );
    }

    #[test]
    fn init_is_buffered_into_one_reset() {
        let mut m = EventMapper::<Pod>::default();
        assert_eq!(m.map(Event::Init), None);
        assert_eq!(m.map(Event::InitApply(pod("a"))), None);
        assert_eq!(m.map(Event::InitApply(pod("b"))), None);
        let reset = m.map(Event::InitDone).expect("a Reset at InitDone");
        assert!(matches!(&reset, SourceEvent::Reset { kinds, .. } if kinds == &vec![Kind::Pod]));
        assert_eq!(names(&reset), vec!["x/a", "x/b"]);

        // A relist starts from scratch: nothing of the first list leaks into the second.
        assert_eq!(m.map(Event::Init), None);
        assert_eq!(m.map(Event::InitApply(pod("c"))), None);
        assert_eq!(names(&m.map(Event::InitDone).expect("Reset")), vec!["x/c"]);
        // An empty relist is an empty Reset (everything of the kind is gone).
        assert_eq!(m.map(Event::Init), None);
        assert_eq!(names(&m.map(Event::InitDone).expect("Reset")), Vec::<String>::new());
    }

    #[test]
    fn a_long_listing_comes_in_chunks() {
        let mut m = EventMapper::<Pod>::default();
        assert_eq!(m.map(Event::Init), None);
        let mut chunks = Vec::new();
        for i in 0..LIST_CHUNK * 2 + 3 {
            if let Some(ev) = m.map(Event::InitApply(pod(&format!("p{i}")))) {
                chunks.push(ev);
            }
        }
        assert_eq!(chunks.len(), 2);
        assert!(chunks.iter().all(
            |c| matches!(c, SourceEvent::ResetChunk { kinds, objects } if kinds == &vec![Kind::Pod] && objects.len() == LIST_CHUNK)
        ));
        assert_eq!(names(&m.map(Event::InitDone).expect("Reset")), vec!["x/p2000", "x/p2001", "x/p2002"]);
    }

    #[test]
    fn apply_and_delete() {
        let mut m = EventMapper::<Pod>::default();
        let applied = m.map(Event::Apply(pod("a")));
        assert_eq!(applied, Some(SourceEvent::Applied(Sourced::new("kube", KubeObject::Pod(pod("a"))))));
        let deleted = m.map(Event::Delete(pod("a")));
        assert_eq!(
            deleted,
            Some(SourceEvent::Deleted {
                kind: Kind::Pod,
                object: crate::model::ObjectRef { namespace: "x".into(), name: "a".into() }
            })
        );
        let mut n = EventMapper::<Namespace>::default();
        let ns = Namespace { metadata: ObjectMeta { name: Some("x".into()), ..Default::default() } };
        assert_eq!(
            n.map(Event::Delete(ns)),
            Some(SourceEvent::Deleted {
                kind: Kind::Namespace,
                object: crate::model::ObjectRef { namespace: "".into(), name: "x".into() }
            })
        );
    }

    #[tokio::test]
    async fn errors_are_skipped_not_fatal() {
        let items: Vec<Result<Event<Pod>, watcher::Error>> = vec![
            Ok(Event::Init),
            Err(watcher::Error::NoResourceVersion),
            Ok(Event::InitApply(pod("a"))),
            Ok(Event::InitDone),
            Err(watcher::Error::NoResourceVersion),
            Ok(Event::Apply(pod("b"))),
        ];
        let out: Vec<SourceEvent> = source_events(futures::stream::iter(items)).collect().await;
        assert_eq!(out.len(), 2, "{out:?}");
        assert_eq!(names(&out[0]), vec!["x/a"]);
        assert!(matches!(&out[1], SourceEvent::Applied(s) if s.object.object_ref().name.as_str() == "b"));
    }
}
