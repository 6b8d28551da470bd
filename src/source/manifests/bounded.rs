//! YAML to [`serde_json::Value`] within a budget on the expanded size, so that alias
//! expansion (a "billion laughs" file) cannot make a small file take gigabytes.
//!
//! The YAML parser bounds the number of alias replays (serde-saphyr's alias limits) but not
//! their size: a 100 KB file whose aliases repeat a 90 KB string ten thousand times would
//! still build about 1 GB before such a limit trips. Here every node built costs one unit and
//! every string byte one unit (map keys included), and building stops with an error once the
//! budget is spent.
//! Without aliases a document costs at most about its length (each node takes at least one
//! character of text), so the budget [`budget_for`] gives only refuses expansion.

use std::cell::Cell;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// Budget multiple of the text length (and a floor for tiny files).
pub const BUDGET_PER_BYTE: usize = 4;
const BUDGET_FLOOR: usize = 64 * 1024;

/// The message of the error that ends a document over budget (also used to recognise it).
pub const OVER_BUDGET: &str = "alias expansion too large";

/// The expansion budget for a file of `text_len` bytes.
pub fn budget_for(text_len: usize) -> usize {
    text_len.saturating_mul(BUDGET_PER_BYTE).max(BUDGET_FLOOR)
}

/// Deserializes one value, charging what it builds to `remaining` (shared by the documents of
/// one file).
pub struct Bounded<'a>(pub &'a Cell<usize>);

impl Bounded<'_> {
    fn charge<E: serde::de::Error>(&self, units: usize) -> Result<(), E> {
        let left = self.0.get();
        if units > left {
            self.0.set(0);
            return Err(E::custom(OVER_BUDGET));
        }
        self.0.set(left - units);
        Ok(())
    }
}

impl<'de> DeserializeSeed<'de> for Bounded<'_> {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Bounded<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any YAML value")
    }

    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Value, E> {
        self.charge(1)?;
        Ok(Value::Bool(v))
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Value, E> {
        self.charge(1)?;
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Value, E> {
        self.charge(1)?;
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Value, E> {
        self.charge(1)?;
        // As serde_json's own Value: NaN and infinities become null.
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Value, E> {
        self.charge(v.len().saturating_add(1))?;
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Value, E> {
        self.charge(v.len().saturating_add(1))?;
        Ok(Value::String(v))
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<Value, E> {
        self.charge(1)?;
        Ok(Value::Null)
    }

    fn visit_none<E: serde::de::Error>(self) -> Result<Value, E> {
        self.visit_unit()
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        self.charge(1)?;
        let mut out = Vec::new();
        while let Some(v) = seq.next_element_seed(Bounded(self.0))? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        self.charge(1)?;
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            self.charge::<A::Error>(key.len())?;
            let value = map.next_value_seed(Bounded(self.0))?;
            out.insert(key, value);
        }
        Ok(out.into())
    }
}

/// Whether a deserializer's error message is the over-budget one.
pub fn is_expansion_error(message: &str) -> bool {
    message.contains(OVER_BUDGET)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Vec<Value>, String> {
        let budget = Cell::new(budget_for(text.len()));
        serde_saphyr::with_deserializer_from_str(text, |de| Bounded(&budget).deserialize(de))
            .map(|v| vec![v])
            .map_err(|e| e.to_string())
    }

    #[test]
    fn documents_without_expansion_fit_the_budget() {
        // The densest text there is: one character per node.
        let dense = format!("[{}]", vec!["1"; 100_000].join(","));
        assert_eq!(parse(&dense).expect("dense")[0].as_array().map(Vec::len), Some(100_000));
        let text = format!("a: {}\nb: {{}}\nc: ~\nd: [true, 1.5, -3, null]\n", "x".repeat(1 << 20));
        let v = parse(&text).expect("plain").remove(0);
        assert_eq!(v["d"], serde_json::json!([true, 1.5, -3, null]));
        // Anchors used a few times, as manifests do.
        let anchors = "labels: &l {app: web, tier: front}\nselector: *l\nmore: *l\n";
        assert_eq!(parse(anchors).expect("anchors")[0]["more"]["tier"], "front");
    }

    #[test]
    fn expansion_past_the_budget_is_an_error() {
        let text = format!("a: &a [\"{}\"]\nb: [*a, *a, *a, *a, *a]\n", "x".repeat(100_000));
        let e = parse(&text).expect_err("five times the text");
        assert!(is_expansion_error(&e), "{e}");
    }
}
