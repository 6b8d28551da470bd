//! What the stand-in serves: for each of the three resources, its objects in the API server's
//! key order (namespace, then name), each already serialized as JSON with its
//! `metadata.resourceVersion`, and the cluster's resourceVersion (the newest object's); and
//! one page of a list of them.

use bytes::Bytes;
use serde_json::json;

/// A resource served cluster-wide at `path`.
#[derive(Debug)]
pub struct Resource {
    pub kind: &'static str,
    pub api_version: &'static str,
    /// The cluster-wide collection, as kube-rs's `Api::all` requests it.
    pub path: &'static str,
    pub namespaced: bool,
}

/// The resources npagent watches (src/source/kube.rs), in the order `Cluster::collections` holds them.
pub const RESOURCES: [Resource; 3] = [
    Resource { kind: "Namespace", api_version: "v1", path: "/api/v1/namespaces", namespaced: false },
    Resource { kind: "Pod", api_version: "v1", path: "/api/v1/pods", namespaced: true },
    Resource {
        kind: "NetworkPolicy",
        api_version: "networking.k8s.io/v1",
        path: "/apis/networking.k8s.io/v1/networkpolicies",
        namespaced: true,
    },
];

/// The objects of one resource.
#[derive(Debug)]
pub struct Collection {
    pub resource: &'static Resource,
    /// JSON of each object, in key order.
    pub items: Vec<Bytes>,
}

/// Every collection, and the resourceVersion lists and bookmarks carry.
#[derive(Debug)]
pub struct Cluster {
    /// Parallel to [`RESOURCES`].
    pub collections: Vec<Collection>,
    pub resource_version: u64,
}

/// Where a list page starts: the `continue` token of the page before, parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Continue {
    /// The resourceVersion the list was first served at.
    pub resource_version: u64,
    /// Index of the next item.
    pub offset: usize,
}

impl Continue {
    /// The token: opaque to clients, `RV.OFFSET` here (the objects never change, so an offset
    /// names the same place as the API server's last key would).
    pub fn token(self) -> String {
        format!("{}.{}", self.resource_version, self.offset)
    }

    pub fn parse(token: &str) -> Option<Self> {
        let (rv, offset) = token.split_once('.')?;
        Some(Self { resource_version: rv.parse().ok()?, offset: offset.parse().ok()? })
    }
}

impl Cluster {
    /// The collection served at `path`, if any.
    pub fn at(&self, path: &str) -> Option<&Collection> {
        self.collections.iter().find(|c| c.resource.path == path)
    }

    /// "1000 namespaces, 100000 pods, 10000 networkpolicies".
    pub fn summary(&self) -> String {
        let parts: Vec<String> = self
            .collections
            .iter()
            .map(|c| format!("{} {}", c.items.len(), c.resource.path.rsplit('/').next().unwrap_or_default()))
            .collect();
        parts.join(", ")
    }
}

impl Collection {
    /// The list body (`kind: PodList` and so on) of at most `limit` items (all with `None`)
    /// from `from`, at resourceVersion `rv`, with a `continue` token when more follow; and the
    /// number of items in it.
    pub fn page(&self, from: usize, limit: Option<usize>, rv: u64) -> (Bytes, usize) {
        let from = from.min(self.items.len());
        let end = limit.map_or(self.items.len(), |l| from.saturating_add(l).min(self.items.len()));
        let mut metadata = json!({ "resourceVersion": rv.to_string() });
        if end < self.items.len() {
            metadata["continue"] = json!(Continue { resource_version: rv, offset: end }.token());
            metadata["remainingItemCount"] = json!(self.items.len() - end);
        }
        let head = json!({
            "kind": format!("{}List", self.resource.kind),
            "apiVersion": self.resource.api_version,
            "metadata": metadata,
        });
        let items = &self.items[from..end];
        let mut body = head.to_string().into_bytes();
        body.pop(); // the closing brace: the items follow
        body.reserve(items.iter().map(|i| i.len() + 1).sum::<usize>() + 16);
        body.extend_from_slice(b",\"items\":[");
        for (i, item) in items.iter().enumerate() {
            if i > 0 {
                body.push(b',');
            }
            body.extend_from_slice(item);
        }
        body.extend_from_slice(b"]}");
        (Bytes::from(body), items.len())
    }
}
