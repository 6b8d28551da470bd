//! Pure compiler: model to desired flows, and the diff against installed flows.
//!
//! No I/O, no clock, no logging; deterministic (BTreeMap/BTreeSet everywhere). The pipeline is
//! described in `docs/pipeline.md`; [`tables`] has its ids and names.

pub(crate) mod cluster;
pub mod compile;
pub mod cookie;
pub(crate) mod copies;
pub mod diff;
pub mod flow;
pub(crate) mod ids;
pub(crate) mod meters;
pub(crate) mod normalize;
pub(crate) mod pipeline;
mod policy;
pub(crate) mod ranges;
pub(crate) mod rules;
pub(crate) mod staged;
#[cfg(feature = "testing")]
pub mod synthetic;
pub mod tables;
pub mod text;
pub mod userdata;

pub use compile::{compile, Change, Compiler, Config};
pub use diff::{apply, diff, diff_keys, installed_from_stats};
pub use flow::{DesiredFlows, FlowKey, FlowTable, FlowValue};
pub use ids::{IdAllocator, PortRange, RuleKey};
pub use normalize::{normalize_instructions, normalize_match};
pub use rules::{ClusterRuleInfo, Direction, RuleInfo, RuleTable, Stage};
pub use staged::is_staged_flow;
pub use text::flows_text;
