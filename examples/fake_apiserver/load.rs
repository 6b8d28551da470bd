//! A manifests directory to the served [`Cluster`]: every `*.yaml`, `*.yml` and `*.json` file
//! under it (subdirectories too, dot-entries skipped), YAML as multi-document streams, JSON as
//! one or more concatenated values, the items of a `*List` as objects of their own.
//!
//! Objects of other kinds, of the wrong apiVersion or without a name are skipped with a line
//! on stderr; the API server would have refused them. The rest get what the API server fills
//! in: the namespace `default` when a namespaced object has none, the label
//! `kubernetes.io/metadata.name` on Namespaces, and a `metadata.resourceVersion` (1, 2, ... in
//! resource and key order; the cluster's resourceVersion is the last). A later file's object of
//! the same kind and name replaces the earlier one.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use serde_json::Value;

use crate::cluster::{Cluster, Collection, Resource, RESOURCES};

/// Reads `dir` into a [`Cluster`]. Fails only when the directory or a file cannot be read or
/// parsed at all.
pub fn load_dir(dir: &Path) -> Result<Cluster, String> {
    let mut files = Vec::new();
    list_files(dir, &mut files).map_err(|e| e.to_string())?;
    files.sort();
    // Per resource, the objects by (namespace, name): the API server's key order.
    let mut objects: Vec<BTreeMap<(String, String), Value>> = RESOURCES.iter().map(|_| BTreeMap::new()).collect();
    for file in &files {
        let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
        let json = file.extension().is_some_and(|e| e.eq_ignore_ascii_case("json"));
        let docs = documents(&text, json).map_err(|e| format!("{}: {e}", file.display()))?;
        for (i, doc) in docs.into_iter().flat_map(list_items).enumerate() {
            let shown = format!("{}#{}", file.display(), i.saturating_add(1));
            match admit(doc) {
                Ok((r, key, object)) => {
                    if objects[r].insert(key.clone(), object).is_some() {
                        let kind = RESOURCES[r].kind;
                        eprintln!("fake_apiserver: {shown}: {kind} {}/{} again; the later one wins", key.0, key.1);
                    }
                }
                Err(e) => eprintln!("fake_apiserver: {shown}: {e}; skipped"),
            }
        }
    }
    let mut resource_version = 0u64;
    let mut collections = Vec::new();
    for (resource, objects) in RESOURCES.iter().zip(objects) {
        let mut items = Vec::with_capacity(objects.len());
        for (_, mut object) in objects {
            resource_version += 1;
            object["metadata"]["resourceVersion"] = Value::String(resource_version.to_string());
            items.push(Bytes::from(serde_json::to_vec(&object).map_err(|e| e.to_string())?));
        }
        collections.push(Collection { resource, items });
    }
    Ok(Cluster { collections, resource_version })
}

fn list_files(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        let path = entry.path();
        let meta = std::fs::metadata(&path)?;
        if meta.is_dir() {
            list_files(&path, out)?;
        } else if meta.is_file()
            && path
                .extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| ["yaml", "yml", "json"].iter().any(|x| e.eq_ignore_ascii_case(x)))
        {
            out.push(path);
        }
    }
    Ok(())
}

/// The documents of one file's text; empty YAML documents are left out.
fn documents(text: &str, json: bool) -> Result<Vec<Value>, String> {
    if json {
        serde_json::Deserializer::from_str(text)
            .into_iter::<Value>()
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("malformed JSON: {e}"))
    } else {
        // As npagent reads manifests (YAML 1.2 core scalars: a namespace `y` is a name).
        let docs = serde_saphyr::from_multiple_with_options::<Value>(text, npagent::source::manifests::yaml_options())
            .map_err(|e| format!("malformed YAML: {e}"))?;
        Ok(docs.into_iter().filter(|d| !d.is_null()).collect())
    }
}

/// A `*List` document's items, or the document itself.
fn list_items(doc: Value) -> Vec<Value> {
    let is_list = doc.get("kind").and_then(Value::as_str).is_some_and(|k| k.ends_with("List"));
    match doc {
        Value::Object(mut map) if is_list && map.get("items").is_some_and(Value::is_array) => {
            match map.remove("items") {
                Some(Value::Array(items)) => items,
                _ => Vec::new(),
            }
        }
        doc => vec![doc],
    }
}

/// Which resource `doc` is (an index into [`RESOURCES`]), its key, and the object as served.
fn admit(mut doc: Value) -> Result<(usize, (String, String), Value), String> {
    let field = |doc: &Value, key: &str| doc.get(key).and_then(Value::as_str).map(str::to_owned);
    let kind = field(&doc, "kind").ok_or("no kind")?;
    let api_version = field(&doc, "apiVersion").unwrap_or_default();
    let r = RESOURCES.iter().position(|r| r.kind == kind).ok_or_else(|| format!("kind {kind:?} is not served"))?;
    let resource: &Resource = &RESOURCES[r];
    if api_version != resource.api_version {
        return Err(format!("{kind} needs apiVersion {}, not {api_version:?}", resource.api_version));
    }
    if !doc.get("metadata").is_some_and(Value::is_object) {
        return Err("no metadata".into());
    }
    let meta = &mut doc["metadata"];
    let name = field(meta, "name").filter(|n| !n.is_empty()).ok_or("no metadata.name")?;
    let namespace = if resource.namespaced {
        let ns = field(meta, "namespace").filter(|n| !n.is_empty()).unwrap_or_else(|| "default".into());
        meta["namespace"] = Value::String(ns.clone());
        ns
    } else {
        if let Some(m) = meta.as_object_mut() {
            m.remove("namespace");
        }
        if !meta.get("labels").is_some_and(Value::is_object) {
            meta["labels"] = Value::Object(Default::default());
        }
        meta["labels"]["kubernetes.io/metadata.name"] = Value::String(name.clone());
        String::new()
    };
    Ok((r, (namespace, name), doc))
}
