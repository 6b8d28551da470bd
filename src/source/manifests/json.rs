//! A JSON document read in one typed pass, straight into the slim objects of
//! [`crate::k8s`]: a single object, or a list (`v1` `List`, `NamespaceList`,
//! `PodList`, `NetworkPolicyList`, any `*List` with `items`) and all its items.
//!
//! This is the fast path of [`super::parse`]: it gives up (`None`) whenever the general path has
//! something to report (a field of the wrong type, an unknown kind, a wrong apiVersion, a
//! nested list), and that path then reads the document again and names the culprit, down to
//! the list item. `spec` and `status` are read as their kind's types when the kind came before
//! them (as `kubectl` writes objects); otherwise they are kept as text and read once the kind
//! is known (JSON puts `kind` anywhere: `kubectl get -o json` writes a List's `kind` after its
//! `items`).
//!
//! An item of a typed list without `kind` (the API server's `PodList` items have none) is of
//! the list's kind and, without `apiVersion`, of the list's apiVersion.

use std::borrow::Cow;
use std::fmt;

use k8s_openapi::api::networking::v1::NetworkPolicySpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::k8s::{
    self, ClusterNetworkPolicy, ClusterNetworkPolicySpec, Namespace, NetworkPolicy, Node, NodeSpec, NodeStatus, Pod,
    PodSpec, PodStatus, StagedNetworkPolicy,
};
use crate::source::{Kind, KubeObject};

/// What a JSON document holds, when every object in it reads without a problem.
#[derive(Debug)]
pub struct JsonDoc {
    /// The object, or the items of a list in order.
    pub objects: Vec<KubeObject>,
    /// Whether the document is a list (its objects are its items).
    pub list: bool,
}

/// Reads `raw`, one JSON document; `None` when the general path must read it.
pub fn read(raw: &str) -> Option<JsonDoc> {
    let mut de = serde_json::Deserializer::from_str(raw);
    let doc = Fields::seed(None, true).deserialize(&mut de).ok()?;
    de.end().ok()?;
    let kind = doc.kind.as_deref()?;
    if Kind::from_kind_str(kind).is_none() && kind.ends_with("List") {
        let items = doc.items?;
        let defaults = element_kind(kind).map(|k| (k, doc.api_version.as_deref().unwrap_or("")));
        let objects = items.into_iter().map(|item| item.object(defaults)).collect::<Option<_>>()?;
        return Some(JsonDoc { objects, list: true });
    }
    Some(JsonDoc { objects: vec![doc.object(None)?], list: false })
}

/// The kind of a typed list's items (`PodList`: Pod); `None` for `List` and unknown lists.
pub fn element_kind(list_kind: &str) -> Option<Kind> {
    list_kind.strip_suffix("List").and_then(Kind::from_kind_str)
}

/// The fields of one document (or list item) that npagent reads.
#[derive(Default)]
struct Fields<'a> {
    api_version: Option<Cow<'a, str>>,
    kind: Option<Cow<'a, str>>,
    metadata: Option<ObjectMeta>,
    spec: Part<'a>,
    status: Part<'a>,
    items: Option<Vec<Fields<'a>>>,
}

/// `spec` or `status`: read as the kind's type, or kept as text until the kind is known.
#[derive(Default)]
enum Part<'a> {
    #[default]
    Absent,
    Raw(&'a RawValue),
    PodSpec(Option<PodSpec>),
    PodStatus(Option<PodStatus>),
    NodeSpec(Option<NodeSpec>),
    NodeStatus(Option<NodeStatus>),
    PolicySpec(Option<NetworkPolicySpec>),
    ClusterPolicySpec(Option<ClusterNetworkPolicySpec>),
    /// Of a kind that has no use for it.
    Skipped,
}

impl<'a> Part<'a> {
    /// The part as `T`: `None` when absent, text read now, a value read as `T` taken by `take`.
    fn read<T: Deserialize<'a>>(self, take: fn(Part<'a>) -> Option<Option<T>>) -> Option<Option<T>> {
        match self {
            Part::Absent => Some(None),
            Part::Raw(raw) => serde_json::from_str(raw.get()).ok(),
            typed => take(typed),
        }
    }
}

impl<'a> Fields<'a> {
    /// Reads a document (`top`: items are read) or a list item (`default`: the list's item
    /// kind, when known before the item is read).
    fn seed(default: Option<Kind>, top: bool) -> FieldsSeed {
        FieldsSeed { default, top }
    }

    /// The object, with `defaults` (kind and apiVersion) for a typed list's items; `None` if it
    /// is not a valid object of a kind npagent uses.
    fn object(self, defaults: Option<(Kind, &str)>) -> Option<KubeObject> {
        let (kind, api_version) = match (self.kind.as_deref(), defaults) {
            (Some(kind), _) => (Kind::from_kind_str(kind)?, self.api_version.as_deref().unwrap_or("")),
            (None, Some((kind, list_api_version))) => (kind, self.api_version.as_deref().unwrap_or(list_api_version)),
            (None, None) => return None,
        };
        if api_version != kind.api_version() {
            return None;
        }
        let metadata = self.metadata.unwrap_or_default();
        Some(match kind {
            Kind::Namespace => KubeObject::Namespace(Namespace { metadata }),
            Kind::Pod => KubeObject::Pod(Pod {
                metadata,
                spec: self.spec.read(|p| if let Part::PodSpec(s) = p { Some(s) } else { None })?,
                status: self.status.read(|p| if let Part::PodStatus(s) = p { Some(s) } else { None })?,
            }),
            Kind::Node => KubeObject::Node(Node {
                metadata,
                spec: self.spec.read(|p| if let Part::NodeSpec(s) = p { Some(s) } else { None })?,
                status: self.status.read(|p| if let Part::NodeStatus(s) = p { Some(s) } else { None })?,
            }),
            Kind::NetworkPolicy => KubeObject::NetworkPolicy(NetworkPolicy {
                metadata,
                spec: self.spec.read(|p| if let Part::PolicySpec(s) = p { Some(s) } else { None })?,
            }),
            Kind::StagedNetworkPolicy => KubeObject::StagedNetworkPolicy(StagedNetworkPolicy {
                metadata,
                spec: self.spec.read(|p| if let Part::PolicySpec(s) = p { Some(s) } else { None })?,
            }),
            Kind::ClusterNetworkPolicy => KubeObject::ClusterNetworkPolicy(ClusterNetworkPolicy {
                metadata,
                spec: self.spec.read(|p| if let Part::ClusterPolicySpec(s) = p { Some(s) } else { None })?,
            }),
        })
    }
}

#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "camelCase")]
enum Key {
    ApiVersion,
    Kind,
    Metadata,
    Spec,
    Status,
    Items,
    #[serde(other)]
    Other,
}

/// A string, borrowed from the text unless it has escapes.
#[derive(Deserialize)]
struct Text<'a>(#[serde(borrow)] Cow<'a, str>);

/// Object metadata as the slim types read it.
struct Meta(ObjectMeta);

impl<'de> Deserialize<'de> for Meta {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        k8s::slim_meta(d).map(Meta)
    }
}

#[derive(Clone, Copy)]
struct FieldsSeed {
    default: Option<Kind>,
    top: bool,
}

impl FieldsSeed {
    /// The kind that `spec` and `status` are read as, if known by now.
    fn kind_now(self, kind: Option<&str>) -> Option<Option<Kind>> {
        match kind {
            Some(kind) => Some(Kind::from_kind_str(kind)),
            None => self.default.map(Some),
        }
    }
}

impl<'de> DeserializeSeed<'de> for FieldsSeed {
    type Value = Fields<'de>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Fields<'de>, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for FieldsSeed {
    type Value = Fields<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a Kubernetes object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Fields<'de>, A::Error> {
        use serde::de::Error;
        let mut out = Fields::default();
        let mut seen = [false; 6];
        while let Some(key) = map.next_key::<Key>()? {
            let index = match key {
                Key::ApiVersion => 0,
                Key::Kind => 1,
                Key::Metadata => 2,
                Key::Spec => 3,
                Key::Status => 4,
                Key::Items => 5,
                Key::Other => {
                    map.next_value::<IgnoredAny>()?;
                    continue;
                }
            };
            // The general path reports duplicates as JSON reads them (the last one counts).
            if std::mem::replace(&mut seen[index], true) {
                return Err(A::Error::custom("duplicate field"));
            }
            match key {
                Key::ApiVersion => out.api_version = Some(map.next_value::<Text>()?.0),
                Key::Kind => out.kind = Some(map.next_value::<Text>()?.0),
                // A list's own metadata is of no use.
                Key::Metadata if out.kind.as_deref().is_some_and(|k| k.ends_with("List")) => {
                    map.next_value::<IgnoredAny>()?;
                }
                Key::Metadata => out.metadata = Some(map.next_value::<Meta>()?.0),
                Key::Spec => {
                    out.spec = match self.kind_now(out.kind.as_deref()) {
                        None => Part::Raw(map.next_value()?),
                        Some(Some(Kind::Pod)) => Part::PodSpec(map.next_value()?),
                        Some(Some(Kind::Node)) => Part::NodeSpec(map.next_value()?),
                        Some(Some(Kind::NetworkPolicy | Kind::StagedNetworkPolicy)) => {
                            Part::PolicySpec(map.next_value()?)
                        }
                        Some(Some(Kind::ClusterNetworkPolicy)) => Part::ClusterPolicySpec(map.next_value()?),
                        Some(_) => {
                            map.next_value::<IgnoredAny>()?;
                            Part::Skipped
                        }
                    }
                }
                Key::Status => {
                    out.status = match self.kind_now(out.kind.as_deref()) {
                        None => Part::Raw(map.next_value()?),
                        Some(Some(Kind::Pod)) => Part::PodStatus(map.next_value()?),
                        Some(Some(Kind::Node)) => Part::NodeStatus(map.next_value()?),
                        Some(_) => {
                            map.next_value::<IgnoredAny>()?;
                            Part::Skipped
                        }
                    }
                }
                Key::Items if self.top => {
                    let default = out.kind.as_deref().and_then(element_kind);
                    out.items = Some(map.next_value_seed(Items(default))?);
                }
                Key::Items | Key::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(out)
    }
}

/// A list's `items`, each read as a document of the list's item kind if known.
struct Items(Option<Kind>);

impl<'de> DeserializeSeed<'de> for Items {
    type Value = Vec<Fields<'de>>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Vec<Fields<'de>>, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Items {
    type Value = Vec<Fields<'de>>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of Kubernetes objects")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<Fields<'de>>, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(item) = seq.next_element_seed(Fields::seed(self.0, false))? {
            out.push(item);
        }
        Ok(out)
    }
}
