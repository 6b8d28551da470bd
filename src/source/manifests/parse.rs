//! One manifest file's text to Kubernetes objects.
//!
//! `.json` files are parsed with serde_json (one object, or several concatenated), everything
//! else as (multi-document) YAML with serde-saphyr, except that a YAML document that is a JSON
//! object (as `kubectl get -o json` writes them) is read by serde_json, much faster, and by the
//! YAML parser only if serde_json refuses it. A JSON document, a list included, is read once,
//! straight into the slim types ([`super::json`]); only one that this refuses is read again,
//! into a [`Value`], by the general path, which names what is wrong. Documents are numbered as
//! YAML counts them: every `---` starts one, empty ones included, so `file#N` stays the same
//! whichever parser reads it.
//!
//! Each document, and each item of a `kind: List` (or any `*List` with `items`), becomes one
//! object, of the slim types of [`crate::k8s`]; an item of a typed list without
//! `kind` (as the API server serves a `PodList`) is of the list's kind. Problems come in two
//! sizes:
//! - the file as a whole does not parse (YAML/JSON syntax, not UTF-8): [`FileParse::objects`]
//!   is `None` and one [`Invalid`] names the file and the location serde reports;
//! - one document or list item is unusable (unknown kind, wrong apiVersion, a field of the
//!   wrong type, no name): it gets an [`Invalid`] (`file#N`, or `file#N.M` for item M of a
//!   list) and is skipped, the others are delivered. When its
//!   kind and name can still be read, its identity goes to [`FileParse::broken`], so the caller
//!   can keep the object's last good version.
//! - Except a NetworkPolicy with a field of the wrong type whose podSelector still reads: it is
//!   delivered with its name and podSelector only, marked [`Sourced::unreadable`], so that the
//!   store fails closed for it as for any other invalid policy (and reports it).

use std::cell::Cell;

use k8s_openapi::api::networking::v1::NetworkPolicySpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use serde::de::DeserializeSeed;
use serde_json::Value;

use super::bounded::{self, Bounded};
use super::json;
use super::Invalid;
use crate::k8s::{namespace_or_default, NAMESPACE_NAME_LABEL};
use crate::k8s::{ClusterNetworkPolicy, Namespace, NetworkPolicy, Node, Pod, StagedNetworkPolicy};
use crate::model::ObjectRef;
use crate::source::{Kind, KubeObject, Sourced};

/// Result of parsing one file.
#[derive(Debug, Default)]
pub struct FileParse {
    /// The usable objects, in file order; `None` when the whole file is malformed.
    pub objects: Option<Vec<Sourced<KubeObject>>>,
    /// Objects of a known kind and name that were invalid in this version of the file.
    pub broken: Vec<(Kind, ObjectRef)>,
    pub invalid: Vec<Invalid>,
}

/// Parses `text`, the content of the file shown as `file` in origins and errors.
pub fn parse_file(file: &str, text: &str, json: bool) -> FileParse {
    let mut out = FileParse { objects: Some(Vec::new()), ..FileParse::default() };
    let read = if json { json_file(file, text, &mut out) } else { yaml_file(file, text, &mut out) };
    match read {
        Ok(()) => out,
        // What the documents before the culprit gave is dropped: the file is malformed.
        Err(error) => {
            FileParse { objects: None, broken: Vec::new(), invalid: vec![Invalid { origin: file.to_string(), error }] }
        }
    }
}

/// The origin of document `index` (from 0) of `file`: `file#N`, N from 1.
fn doc_origin(file: &str, index: usize) -> String {
    format!("{file}#{}", index.saturating_add(1))
}

/// The origin of item `index` (from 0) of the list at `origin`: `file#N.M`, M from 1.
fn item_origin(origin: &str, index: usize) -> String {
    format!("{origin}.{}", index.saturating_add(1))
}

/// A `.json` file: one JSON document, or several concatenated, each read as it is split off.
fn json_file(file: &str, text: &str, out: &mut FileParse) -> Result<(), String> {
    let docs = serde_json::Deserializer::from_str(text).into_iter::<&serde_json::value::RawValue>();
    for (i, raw) in docs.enumerate() {
        let raw = raw.map_err(|e| format!("malformed JSON: {e}"))?;
        json_document(&doc_origin(file, i), raw.get(), out);
    }
    Ok(())
}

/// A JSON document: read straight into slim objects when it is a valid object, or list of
/// objects, of the kinds npagent uses (nearly every document); anything else takes the general
/// path, which reports problems exactly.
fn json_document(origin: &str, raw: &str, out: &mut FileParse) {
    if read_fast(origin, raw, out) {
        return;
    }
    match serde_json::from_str::<Value>(raw) {
        Ok(doc) => document(origin, doc, true, out),
        Err(e) => out.invalid.push(Invalid { origin: origin.to_string(), error: format!("malformed JSON: {e}") }),
    }
}

/// The fast path of [`json_document`] ([`json::read`]): false, having added nothing, whenever
/// the general path has something to say.
fn read_fast(origin: &str, raw: &str, out: &mut FileParse) -> bool {
    let Some(doc) = json::read(raw) else { return false };
    let read: Option<Vec<_>> = match doc.list {
        false => doc.objects.into_iter().map(|object| served(origin.to_string(), object)).collect(),
        true => doc.objects.into_iter().enumerate().map(|(j, object)| served(item_origin(origin, j), object)).collect(),
    };
    let Some(read) = read else { return false };
    if let Some(objects) = out.objects.as_mut() {
        objects.extend(read);
    }
    true
}

/// An object read by the fast path, as the API server would serve it; `None` without a name.
fn served(origin: String, object: KubeObject) -> Option<Sourced<KubeObject>> {
    let id = object.object_ref();
    if id.name.is_empty() {
        return None;
    }
    let kind = object.kind();
    Some(Sourced::new(format!("{origin} {kind} {}", display_ref(&id)), as_served(object, &id)))
}

/// A YAML file: its documents, each read as it is split off; those that are JSON objects (as
/// `kubectl get -o json` writes them) by serde_json, the others by the YAML parser.
fn yaml_file(file: &str, text: &str, out: &mut FileParse) -> Result<(), String> {
    let budget = Cell::new(bounded::budget_for(text.len()));
    for (i, doc) in split_documents(text).into_iter().enumerate() {
        let Some(body) = doc.body() else { continue }; // an empty document
        let origin = doc_origin(file, i);
        if body.starts_with('{') {
            if read_fast(&origin, body, out) {
                continue;
            }
            // JSON, but not for the fast path; YAML reads JSON the same way, only slower.
            if let Ok(doc) = serde_json::from_str::<Value>(body) {
                document(&origin, doc, true, out);
                continue;
            }
        }
        let value = yaml_value(&doc, i.saturating_add(1), &budget)?;
        document(&origin, value, true, out);
    }
    Ok(())
}

/// Document `number` of a YAML file, charged to the file's expansion `budget`; `Err` says why
/// the file is malformed.
fn yaml_value(doc: &YamlDocument<'_>, number: usize, budget: &Cell<usize>) -> Result<Value, String> {
    let parsed = serde_saphyr::with_deserializer_from_str_with_options(doc.text, yaml_options(), |de| {
        Bounded(budget).deserialize(de)
    });
    parsed.map_err(|e| {
        let shown = e.render_with_options(serde_saphyr::render_options! {
            snippets: serde_saphyr::SnippetMode::Off,
            line_offset: doc.first_line.saturating_sub(1) as u64,
        });
        if bounded::is_expansion_error(&shown) || is_alias_limit(&e) {
            return format!(
                "refused: YAML aliases in document {number} expand to more than {} times the file's size \
                 (a \"billion laughs\" file?)",
                bounded::BUDGET_PER_BYTE
            );
        }
        format!("malformed YAML in document {number}: {}", one_line(&shown))
    })
}

/// How npagent reads YAML (manifests, and the tests' fixtures): scalars are typed by the YAML
/// 1.2 core schema, as the parser npagent used before read them, so a value means the same
/// whichever reads it: only `true`/`false` are booleans (not 1.1's `y`, `yes`, `on`: a
/// namespace `y` stays a name), `0755` and `1_000` stay strings; of a key given twice the
/// last value counts. Errors are one line (no source snippet).
pub fn yaml_options() -> serde_saphyr::Options {
    serde_saphyr::options! {
        strict_booleans: true,
        leading_zero_numbers_as_strings: true,
        underscored_numbers_as_strings: true,
        duplicate_keys: serde_saphyr::DuplicateKeyPolicy::LastWins,
        with_snippet: false,
    }
}

fn is_alias_limit(e: &serde_saphyr::Error) -> bool {
    matches!(
        e.without_snippet(),
        serde_saphyr::Error::AliasReplayLimitExceeded { .. }
            | serde_saphyr::Error::AliasReplayStackDepthExceeded { .. }
            | serde_saphyr::Error::AliasReplayCounterOverflow { .. }
    )
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// One YAML document of a stream: its text (document markers included) and the line of the
/// file it starts on.
struct YamlDocument<'a> {
    text: &'a str,
    first_line: usize,
}

impl<'a> YamlDocument<'a> {
    /// The content after the `---` line and leading blank and comment lines; `None` when
    /// there is none (an empty document).
    fn body(&self) -> Option<&'a str> {
        let mut rest = self.text;
        if is_marker(rest, "---") {
            // Content may follow the marker on its line (`--- {a: 1}`).
            rest = &rest[3..];
        }
        loop {
            let trimmed = rest.trim_start_matches([' ', '\t', '\r', '\n']);
            if let Some(comment) = trimmed.strip_prefix('#') {
                rest = comment.split_once('\n').map_or("", |(_, after)| after);
            } else if trimmed.is_empty() || is_marker(trimmed, "...") {
                return None;
            } else {
                return Some(trimmed);
            }
        }
    }
}

/// Whether `line` starts with the document marker `marker` (`---` or `...`): at column 0,
/// then the end of the line, a space or a tab. No scalar may hold such a line, so documents
/// can be told apart before parsing.
fn is_marker(line: &str, marker: &str) -> bool {
    line.strip_prefix(marker).is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', '\t', '\r', '\n']))
}

/// Splits a YAML stream into its documents, as YAML counts them: every `---` line starts a
/// document; content before the first one, or after a `...` line that no `---` follows, is a
/// document of its own (directives, comments and blank lines alone are none).
fn split_documents(text: &str) -> Vec<YamlDocument<'_>> {
    let mut docs = Vec::new();
    // The open document: its start offset and first line, and whether it began with `---`.
    let (mut start, mut first_line, mut explicit) = (0, 1, false);
    let mut offset = 0;
    for (i, line) in text.split_inclusive('\n').enumerate() {
        let end = offset + line.len();
        if is_marker(line, "---") {
            push(&mut docs, &text[start..offset], first_line, explicit);
            (start, first_line, explicit) = (offset, i + 1, true);
        } else if is_marker(line, "...") {
            push(&mut docs, &text[start..end], first_line, explicit);
            (start, first_line, explicit) = (end, i + 2, false);
        }
        offset = end;
    }
    push(&mut docs, &text[start..], first_line, explicit);
    docs
}

/// Adds the document `text` to `docs` if it is one: it began with `---` (`explicit`) or has
/// content other than directives, comments and blank lines.
fn push<'a>(docs: &mut Vec<YamlDocument<'a>>, text: &'a str, first_line: usize, explicit: bool) {
    let doc = YamlDocument { text, first_line };
    if explicit || doc.body().is_some_and(|b| !b.starts_with('%')) {
        docs.push(doc);
    }
}

fn str_field<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

fn document(origin: &str, doc: Value, allow_list: bool, out: &mut FileParse) {
    let mut invalid = |origin: String, error: String| out.invalid.push(Invalid { origin, error });
    if doc.is_null() {
        return; // empty document (`---` at the end, comments only)
    }
    if !doc.is_object() {
        invalid(origin.to_string(), "document is not an object".into());
        return;
    }
    let Some(kind_str) = str_field(&doc, "kind") else {
        invalid(origin.to_string(), "document has no `kind`".into());
        return;
    };
    let api_version = str_field(&doc, "apiVersion").unwrap_or("");
    let kind_shown = shown(kind_str);
    let Some(kind) = Kind::from_kind_str(kind_str) else {
        if kind_str.ends_with("List") && doc.get("items").is_some_and(Value::is_array) {
            if !allow_list {
                invalid(origin.to_string(), format!("nested {kind_shown} is not supported"));
                return;
            }
            let defaults = json::element_kind(kind_str).map(|k| (k, api_version.to_string()));
            list_items(origin, doc, defaults, out);
            return;
        }
        let meta = doc.get("metadata");
        let named = match (meta.and_then(|m| str_field(m, "namespace")), meta.and_then(|m| str_field(m, "name"))) {
            (Some(ns), Some(name)) => format!(" {}/{}", shown(ns), shown(name)),
            (None, Some(name)) => format!(" {}", shown(name)),
            _ => String::new(),
        };
        let used: Vec<&str> = Kind::ALL.iter().map(|k| k.as_str()).collect();
        invalid(
            format!("{origin} {kind_shown}{named}"),
            format!(
                "kind {kind_shown} (apiVersion {api_version:?}) is not used by npagent ({}); skipped",
                used.join(", ")
            ),
        );
        return;
    };
    let meta = doc.get("metadata");
    let name = meta.and_then(|m| str_field(m, "name")).unwrap_or("");
    let namespace = match kind.is_namespaced() {
        true => namespace_or_default(meta.and_then(|m| str_field(m, "namespace"))),
        false => "",
    };
    let id = ObjectRef { namespace: namespace.into(), name: name.into() };
    let culprit = format!("{origin} {kind} {}", display_ref(&id));
    if id.name.is_empty() {
        invalid(culprit, "metadata.name is missing".into());
        return;
    }
    if api_version != kind.api_version() {
        invalid(culprit, format!("{kind} needs apiVersion {}, not {api_version:?}", kind.api_version()));
        out.broken.push((kind, id));
        return;
    }
    // What a NetworkPolicy needs to fail closed, read before `typed` consumes the document.
    let selector = (kind == Kind::NetworkPolicy).then(|| pod_selector(&doc));
    match typed(kind, doc, &id) {
        Ok(object) => {
            if let Some(objects) = out.objects.as_mut() {
                objects.push(Sourced::new(culprit, object));
            }
        }
        Err(e) => match (selector, out.objects.as_mut()) {
            // Handed on as it can be read, marked unreadable: the store keeps the policy's
            // last good version or, if it never had one, isolates the selected pods (and
            // reports it).
            (Some(Ok(pod_selector)), Some(objects)) => {
                let np = NetworkPolicy {
                    metadata: ObjectMeta {
                        name: Some(id.name.to_string()),
                        namespace: Some(id.namespace.to_string()),
                        ..Default::default()
                    },
                    spec: Some(NetworkPolicySpec { pod_selector, ..Default::default() }),
                };
                objects.push(Sourced {
                    origin: culprit,
                    object: KubeObject::NetworkPolicy(np),
                    unreadable: Some(format!("invalid {kind}: {e}")),
                });
            }
            _ => {
                invalid(culprit, format!("invalid {kind}: {e}"));
                out.broken.push((kind, id));
            }
        },
    }
}

/// The items of a list document, each read as a document: an item of a typed list
/// without `kind` is of the list's kind (`defaults`) and, without `apiVersion`, of its
/// apiVersion, as the API server serves a `PodList`.
fn list_items(origin: &str, list: Value, defaults: Option<(Kind, String)>, out: &mut FileParse) {
    let Value::Object(mut list) = list else { return };
    let Some(Value::Array(items)) = list.remove("items") else { return };
    for (j, mut item) in items.into_iter().enumerate() {
        if let (Some((kind, api_version)), Value::Object(fields)) = (&defaults, &mut item) {
            if !fields.contains_key("kind") {
                fields.insert("kind".into(), kind.as_str().into());
                fields.entry("apiVersion").or_insert_with(|| api_version.as_str().into());
            }
        }
        document(&item_origin(origin, j), item, false, out);
    }
}

/// A NetworkPolicy document's `spec.podSelector`: `Ok(None)` when absent (all pods), `Err`
/// when it (or `spec`) is not of the right shape.
fn pod_selector(doc: &Value) -> Result<Option<LabelSelector>, ()> {
    match doc.get("spec") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(spec)) => match spec.get("podSelector") {
            None | Some(Value::Null) => Ok(None),
            Some(s) => serde_json::from_value(s.clone()).map(Some).map_err(drop),
        },
        Some(_) => Err(()),
    }
}

/// `ns/name` (`name` for cluster-scoped kinds) as origins show it: names as they are when
/// they hold only visible ASCII, else quoted and escaped, so that no name can split or forge a
/// log line (the model refuses such names; the report naming them must be readable).
pub(super) fn display_ref(id: &ObjectRef) -> String {
    let name = shown(&id.name);
    if id.namespace.is_empty() {
        name
    } else {
        format!("{}/{name}", shown(&id.namespace))
    }
}

fn shown(s: &str) -> String {
    if s.bytes().all(|b| b.is_ascii_graphic()) {
        s.to_string()
    } else {
        format!("{s:?}")
    }
}

/// Deserializes into the slim type, as the API server would serve it ([`as_served`]).
fn typed(kind: Kind, doc: Value, id: &ObjectRef) -> Result<KubeObject, serde_json::Error> {
    let object = match kind {
        Kind::Namespace => KubeObject::Namespace(serde_json::from_value::<Namespace>(doc)?),
        Kind::Pod => KubeObject::Pod(serde_json::from_value::<Pod>(doc)?),
        Kind::Node => KubeObject::Node(serde_json::from_value::<Node>(doc)?),
        Kind::NetworkPolicy => KubeObject::NetworkPolicy(serde_json::from_value::<NetworkPolicy>(doc)?),
        Kind::StagedNetworkPolicy => {
            KubeObject::StagedNetworkPolicy(serde_json::from_value::<StagedNetworkPolicy>(doc)?)
        }
        Kind::ClusterNetworkPolicy => {
            KubeObject::ClusterNetworkPolicy(serde_json::from_value::<ClusterNetworkPolicy>(doc)?)
        }
    };
    Ok(as_served(object, id))
}

/// Fills in what the API server would: the namespace of namespaced objects (`default` when
/// absent) and the Namespace name label. Cluster-scoped objects (Nodes,
/// ClusterNetworkPolicies) are keyed without a namespace whatever their metadata says.
fn as_served(mut object: KubeObject, id: &ObjectRef) -> KubeObject {
    match &mut object {
        KubeObject::Node(_) | KubeObject::ClusterNetworkPolicy(_) => {}
        KubeObject::Namespace(ns) => {
            ns.metadata
                .labels
                .get_or_insert_with(Default::default)
                .insert(NAMESPACE_NAME_LABEL.to_string(), id.name.to_string());
        }
        KubeObject::Pod(Pod { metadata, .. })
        | KubeObject::NetworkPolicy(NetworkPolicy { metadata, .. })
        | KubeObject::StagedNetworkPolicy(StagedNetworkPolicy { metadata, .. }) => {
            metadata.namespace = Some(id.namespace.to_string());
        }
    }
    object
}

/// A billion-laughs document of about 100 KB, for the tests of the alias limits: `head` (a
/// manifest up to a mapping key), then under it at `indent` a 90 KB string and nine levels of
/// ten aliases each.
#[cfg(any(test, feature = "testing"))]
pub fn billion_laughs(head: &str, indent: &str) -> String {
    let mut text = head.to_string();
    text.push_str(&format!("{indent}l0: &l0 [\"{}\"]\n", "lol".repeat(30_000)));
    for level in 1..10 {
        let refs = vec![format!("*l{}", level - 1); 10].join(",");
        text.push_str(&format!("{indent}l{level}: &l{level} [{refs}]\n"));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(p: &FileParse) -> Vec<String> {
        p.objects
            .as_ref()
            .map(|o| o.iter().map(|s| format!("{} {}", s.object.kind(), s.object.object_ref())).collect())
            .unwrap_or_default()
    }

    #[test]
    fn multi_document_yaml_with_defaults() {
        let text = "---\napiVersion: v1\nkind: Namespace\nmetadata: {name: x}\n---\n\
                    apiVersion: v1\nkind: Pod\nmetadata: {name: a, labels: {pod: a}}\n---\n";
        let p = parse_file("f.yaml", text, false);
        assert!(p.invalid.is_empty(), "{:?}", p.invalid);
        assert_eq!(names(&p), vec!["Namespace /x", "Pod default/a"]);
        let objects = p.objects.unwrap_or_default();
        let Some(KubeObject::Namespace(ns)) = objects.first().map(|s| &s.object) else {
            panic!("first object is not a Namespace");
        };
        let labels = ns.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels.get(NAMESPACE_NAME_LABEL).map(String::as_str), Some("x"));
        assert_eq!(objects.get(1).map(|s| s.origin.as_str()), Some("f.yaml#2 Pod default/a"));
    }

    #[test]
    fn list_items_and_json() {
        let text = r#"{"apiVersion":"v1","kind":"List","items":[
            {"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","namespace":"x"}},
            {"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy","metadata":{"name":"p","namespace":"x"},"spec":{}}]}"#;
        let p = parse_file("f.json", text, true);
        assert!(p.invalid.is_empty(), "{:?}", p.invalid);
        assert_eq!(names(&p), vec!["Pod x/a", "NetworkPolicy x/p"]);
        assert_eq!(
            p.objects.unwrap_or_default().get(1).map(|s| s.origin.clone()),
            Some("f.json#1.2 NetworkPolicy x/p".to_string())
        );
    }

    #[test]
    fn bad_documents_are_skipped_and_named() {
        let text = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n---\n\
                    apiVersion: extensions/v1beta1\nkind: NetworkPolicy\nmetadata: {name: old, namespace: x}\n---\n\
                    apiVersion: v1\nkind: Pod\nmetadata: {name: typo, namespace: x}\nspec: {containers: 5}\n---\n\
                    apiVersion: v1\nkind: Pod\nmetadata: {namespace: x}\n---\n\
                    - just a list\n---\n\
                    apiVersion: v1\nkind: Pod\nmetadata: {name: good, namespace: x}\n";
        let p = parse_file("f.yaml", text, false);
        assert_eq!(names(&p), vec!["Pod x/good"]);
        let origins: Vec<&str> = p.invalid.iter().map(|i| i.origin.as_str()).collect();
        assert_eq!(
            origins,
            vec![
                "f.yaml#1 Deployment d",
                "f.yaml#2 NetworkPolicy x/old",
                "f.yaml#3 Pod x/typo",
                "f.yaml#4 Pod x/",
                "f.yaml#5"
            ]
        );
        assert!(p.invalid.iter().any(|i| i.error.contains("networking.k8s.io/v1")));
        let broken: Vec<String> = p.broken.iter().map(|(k, r)| format!("{k} {r}")).collect();
        assert_eq!(broken, vec!["NetworkPolicy x/old", "Pod x/typo"]);
    }

    #[test]
    fn names_that_could_split_a_log_line_are_shown_escaped() {
        let text = "apiVersion: v1\nkind: Pod\nmetadata: {name: \"a\\nb c\", namespace: x}\n---\n\
                    apiVersion: v1\nkind: \"Odd\\nKind\"\nmetadata: {name: \"d\\ne\"}\n";
        let p = parse_file("f.yaml", text, false);
        let origins: Vec<String> = p
            .objects
            .iter()
            .flatten()
            .map(|o| o.origin.clone())
            .chain(p.invalid.iter().map(|i| i.origin.clone()))
            .collect();
        assert_eq!(origins, vec!["f.yaml#1 Pod x/\"a\\nb c\"", "f.yaml#2 \"Odd\\nKind\" \"d\\ne\""]);
        assert!(p.invalid.iter().all(|i| !i.error.contains('\n')), "{:?}", p.invalid);
    }

    #[test]
    fn a_policy_with_a_mistyped_field_is_handed_on_to_fail_closed_when_its_selector_reads() {
        let text = "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: typo, namespace: x}\n\
                    spec: {podSelector: {matchLabels: {pod: a}}, ingress: 5}\n---\n\
                    apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: blind, namespace: x}\n\
                    spec: {podSelector: [pod], ingress: 5}\n---\n\
                    apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: flat, namespace: x}\nspec: 5\n";
        let p = parse_file("f.yaml", text, false);
        let objects = p.objects.unwrap_or_default();
        assert_eq!(objects.len(), 1, "{objects:?}");
        let o = &objects[0];
        assert_eq!(o.origin, "f.yaml#1 NetworkPolicy x/typo");
        assert!(
            o.unreadable.as_deref().is_some_and(|u| u.starts_with("invalid NetworkPolicy: invalid type")),
            "{:?}",
            o.unreadable
        );
        let KubeObject::NetworkPolicy(np) = &o.object else { panic!("not a policy") };
        let spec = np.spec.clone().unwrap_or_default();
        assert_eq!(
            spec.pod_selector.and_then(|s| s.match_labels).and_then(|l| l.get("pod").cloned()).as_deref(),
            Some("a")
        );
        assert!(spec.ingress.is_none());
        // Unreadable selectors: reported and kept as broken, as before.
        let origins: Vec<&str> = p.invalid.iter().map(|i| i.origin.as_str()).collect();
        assert_eq!(origins, vec!["f.yaml#2 NetworkPolicy x/blind", "f.yaml#3 NetworkPolicy x/flat"]);
        assert_eq!(p.broken.len(), 2);
    }

    #[test]
    fn malformed_yaml_names_the_location() {
        let text = "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n---\nkind: [unclosed\n";
        let p = parse_file("f.yaml", text, false);
        assert!(p.objects.is_none());
        assert_eq!(p.invalid.len(), 1);
        let e = &p.invalid[0];
        assert_eq!(e.origin, "f.yaml");
        assert!(e.error.contains("document 2") && e.error.contains("line"), "{}", e.error);
    }

    proptest::proptest! {
        #[test]
        fn never_panics(text in "(\\PC|[-:{}\\[\\],\n ]){0,200}", json: bool) {
            let p = parse_file("f", &text, json);
            proptest::prop_assert!(p.objects.is_some() || !p.invalid.is_empty());
        }
    }

    #[test]
    fn an_alias_bomb_is_refused_naming_the_file() {
        let text = billion_laughs("apiVersion: v1\nkind: Pod\nmetadata: {name: lol, namespace: x}\nspec:\n", "  ");
        assert!((90_000..110_000).contains(&text.len()), "{}", text.len());
        let started = std::time::Instant::now();
        let p = parse_file("bomb.yaml", &text, false);
        assert!(started.elapsed() < std::time::Duration::from_secs(5), "took {:?}", started.elapsed());
        assert!(p.objects.is_none());
        assert_eq!(p.invalid.len(), 1, "{:?}", p.invalid);
        assert_eq!(p.invalid[0].origin, "bomb.yaml");
        assert!(p.invalid[0].error.contains("alias"), "{}", p.invalid[0].error);
    }

    #[test]
    fn documents_are_numbered_as_yaml_counts_them_empty_ones_included() {
        let pod = |name: &str| format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: x}}\n");
        // As helm writes them: an empty document between sources.
        let text = format!("---\n# Source: a.yaml\n---\n{}...\n{}---\n--- # nothing\n{}", pod("a"), pod("b"), pod("c"));
        let p = parse_file("f.yaml", &text, false);
        assert!(p.invalid.is_empty(), "{:?}", p.invalid);
        let origins: Vec<String> = p.objects.unwrap_or_default().into_iter().map(|o| o.origin).collect();
        assert_eq!(origins, vec!["f.yaml#2 Pod x/a", "f.yaml#3 Pod x/b", "f.yaml#5 Pod x/c"]);
    }

    #[test]
    fn json_documents_in_a_yaml_file_read_as_yaml_would() {
        let json = r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a", "namespace": "x", "labels": {"on": "yes"}}}"#;
        let yaml_only = "{apiVersion: v1, kind: Pod, metadata: {name: b, namespace: x}}";
        let text = format!("{json}\n---\n{yaml_only}\n---\n{json}\n");
        let p = parse_file("f.yaml", &text, false);
        assert!(p.invalid.is_empty(), "{:?}", p.invalid);
        let objects = p.objects.unwrap_or_default();
        assert_eq!(objects.len(), 3);
        let Some(KubeObject::Pod(pod)) = objects.first().map(|o| &o.object) else { panic!("not a pod") };
        assert_eq!(pod.metadata.labels.as_ref().and_then(|l| l.get("on")).map(String::as_str), Some("yes"));
        assert_eq!(objects[1].origin, "f.yaml#2 Pod x/b");
    }

    #[test]
    fn scalars_mean_what_they_meant_to_the_previous_parser() {
        let text =
            "apiVersion: v1\nkind: Namespace\nmetadata: {name: y, labels: {a: yes, b: on, c: 0755, d: 1_000, d: n}}\n";
        let p = parse_file("f.yaml", text, false);
        assert!(p.invalid.is_empty(), "{:?}", p.invalid);
        let Some(KubeObject::Namespace(ns)) = p.objects.unwrap_or_default().pop().map(|o| o.object) else {
            panic!("no namespace")
        };
        assert_eq!(ns.metadata.name.as_deref(), Some("y"));
        let labels = ns.metadata.labels.unwrap_or_default();
        let got: Vec<(&str, &str)> = labels.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(got, [("a", "yes"), ("b", "on"), ("c", "0755"), ("d", "n"), (NAMESPACE_NAME_LABEL, "y")]);
    }

    #[test]
    fn a_syntax_error_names_the_line_of_the_file() {
        let text =
            "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: [b\n";
        let p = parse_file("f.yaml", text, false);
        assert!(p.objects.is_none());
        let e = &p.invalid[0].error;
        assert!(e.starts_with("malformed YAML in document 2") && e.contains("line 7"), "{e}");
        assert!(!e.contains('\n'), "{e}");
    }

    #[test]
    fn the_json_fast_path_reads_every_document_as_the_general_path_does() {
        let docs = [
            r#"{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x", "labels": {"a": "b"}}}"#,
            r#"{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x", "labels": null}}"#,
            r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"}, "spec": {"containers": [{"name": "c", "ports": [{"containerPort": 80}]}]}}"#,
            r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a", "namespace": "y"}, "status": {"podIP": "10.0.0.1"}}"#,
            r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"}, "spec": {"containers": 5}}"#,
            r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a", "name": "b"}}"#,
            r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": "x"}}"#,
            r#"{"apiVersion": "v2", "kind": "Pod", "metadata": {"name": "a"}}"#,
            r#"{"apiVersion": "v1", "kind": "Deployment", "metadata": {"name": "a"}}"#,
            r#"{"apiVersion": "v1", "kind": "List", "items": [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"}}]}"#,
            r#"{"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "p"}, "spec": {"podSelector": {}, "ingress": [{}]}}"#,
            r#"{"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "p"}, "spec": {"podSelector": {"matchLabels": {"a": "b"}}, "ingress": 5}}"#,
            r#"{"kind": "Pod", "metadata": {"name": 5}}"#,
            r#"[1, 2]"#,
            r#"{"apiVersion": "v1", "items": [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a", "namespace": "x"}, "spec": {"nodeName": "n"}}], "kind": "List", "metadata": {"resourceVersion": ""}}"#,
            r#"{"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "5"}, "items": [{"metadata": {"name": "a"}, "spec": {"containers": []}, "status": {"podIP": "10.0.0.2"}}]}"#,
            r#"{"kind": "NamespaceList", "apiVersion": "v1", "items": [{"metadata": {"name": "n"}}, {"metadata": {"name": "m"}}]}"#,
            r#"{"items": [{"metadata": {"name": "p"}, "spec": {"podSelector": {}}}], "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicyList"}"#,
            r#"{"kind": "PodList", "apiVersion": "v1", "items": [{"metadata": {"name": "a"}}, {"metadata": {"name": "b", "labels": 5}}, {"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": "n"}}]}"#,
            r#"{"kind": "PodList", "apiVersion": "v1", "items": [{"spec": {"podSelector": {}}, "kind": "NetworkPolicy", "apiVersion": "networking.k8s.io/v1", "metadata": {"name": "p"}}]}"#,
            r#"{"kind": "PodList", "apiVersion": "v2", "items": [{"metadata": {"name": "a"}}]}"#,
            r#"{"kind": "List", "apiVersion": "v1", "items": [{"kind": "List", "apiVersion": "v1", "items": []}]}"#,
            r#"{"kind": "List", "apiVersion": "v1", "items": [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"}}, {"apiVersion": "v1", "kind": "Pod", "metadata": {}}]}"#,
            r#"{"kind": "List", "apiVersion": "v1", "items": [{"metadata": {"name": "a"}}]}"#,
            r#"{"kind": "List", "items": 5}"#,
            r#"{"kind": "List", "metadata": {"name": 5}, "items": []}"#,
            r#"{"apiVersion": "policy.networking.k8s.io/v1alpha2", "kind": "ClusterNetworkPolicy", "metadata": {"name": "c", "namespace": "x"}, "spec": {"tier": "Admin", "priority": 1, "subject": {"namespaces": {}}}, "status": {"conditions": []}}"#,
            r#"{"spec": {"tier": "Admin"}, "apiVersion": "policy.networking.k8s.io/v1alpha2", "kind": "ClusterNetworkPolicy", "metadata": {"name": "c"}}"#,
            r#"{"apiVersion": "policy.networking.k8s.io/v1alpha2", "kind": "ClusterNetworkPolicy", "metadata": {"name": "c"}, "spec": {"priority": "high"}}"#,
            r#"{"apiVersion": "policy.networking.k8s.io/v1alpha1", "kind": "ClusterNetworkPolicy", "metadata": {"name": "c"}}"#,
            r#"{"kind": "ClusterNetworkPolicyList", "apiVersion": "policy.networking.k8s.io/v1alpha2", "items": [{"metadata": {"name": "a"}, "spec": {"tier": "Baseline"}}]}"#,
        ];
        for raw in docs {
            let (mut fast, mut general) = (FileParse::default(), FileParse::default());
            fast.objects = Some(Vec::new());
            general.objects = Some(Vec::new());
            json_document("f#1", raw, &mut fast);
            document("f#1", serde_json::from_str(raw).expect("JSON"), true, &mut general);
            assert_eq!(format!("{fast:?}"), format!("{general:?}"), "{raw}");
        }
    }

    #[test]
    fn lists_are_read_in_one_typed_pass() {
        let kubectl = r#"{"apiVersion": "v1", "items": [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}},
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a", "namespace": "x"}, "status": {"podIP": "10.0.0.1"}}
        ], "kind": "List", "metadata": {"resourceVersion": ""}}"#;
        let typed = r#"{"kind": "PodList", "apiVersion": "v1", "items": [{"metadata": {"name": "a"}}, {"metadata": {"name": "b"}}]}"#;
        for (raw, len) in [(kubectl, 2), (typed, 2)] {
            let Some(json::JsonDoc { objects, list: true }) = json::read(raw) else {
                panic!("not read as a list: {raw}")
            };
            assert_eq!(objects.len(), len);
        }
        let p = parse_file("f.json", typed, true);
        assert!(p.invalid.is_empty(), "{:?}", p.invalid);
        let origins: Vec<String> = p.objects.unwrap_or_default().into_iter().map(|o| o.origin).collect();
        assert_eq!(origins, vec!["f.json#1.1 Pod default/a", "f.json#1.2 Pod default/b"]);
    }

    #[test]
    fn a_bad_list_item_is_named_and_the_rest_kept() {
        let text = r#"{"kind": "PodList", "apiVersion": "v1", "items": [{"metadata": {"name": "a", "namespace": "x"}},
            {"metadata": {"name": "b", "namespace": "x"}, "spec": {"containers": 5}},
            {"metadata": {"name": "c", "namespace": "x"}}]}"#;
        for (file, text) in [("f.json", text.to_string()), ("f.yaml", format!("---\n{text}"))] {
            let p = parse_file(file, &text, file.ends_with("json"));
            assert_eq!(names(&p), vec!["Pod x/a", "Pod x/c"]);
            assert_eq!(p.invalid.len(), 1, "{:?}", p.invalid);
            assert_eq!(p.invalid[0].origin, format!("{file}#1.2 Pod x/b"));
            assert!(p.invalid[0].error.starts_with("invalid Pod: invalid type"), "{}", p.invalid[0].error);
        }
    }

    #[test]
    fn malformed_json_names_the_location() {
        let p = parse_file("f.json", "{\"kind\": \"Pod\",\n ", true);
        assert!(p.objects.is_none());
        assert!(p.invalid[0].error.contains("line 2"), "{}", p.invalid[0].error);
    }
}
