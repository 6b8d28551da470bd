//! YAML in the tests, with serde-saphyr: the testbed's manifests, scenario files, deploy/.
//! Untyped documents are `serde_json::Value`s.
//!
//! Also included on its own (`#[path = "support/yaml.rs"] mod yaml;`) by tests that need no
//! other fixture.
#![allow(dead_code)]

use serde::de::DeserializeOwned;
use serde_json::Value;

/// What the tests read YAML with: npagent's own options
/// (`npagent::source::manifests::yaml_options`), so a fixture means to a test what it means to
/// the agent (the testbed has a namespace `y`, which YAML 1.1 would read as `true`).
pub fn options() -> serde_saphyr::Options {
    npagent::source::manifests::yaml_options()
}

/// The single document of `text` as `T`.
pub fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, serde_saphyr::Error> {
    serde_saphyr::from_str_with_options(text, options())
}

/// The documents of `text`; empty and `null` documents are skipped.
pub fn documents(text: &str) -> Result<Vec<Value>, serde_saphyr::Error> {
    serde_saphyr::from_multiple_with_options(text, options())
}
