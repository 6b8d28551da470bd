//! [`Labels`]: a pod's or namespace's labels, compact and shared.

use super::intern::Interner;
use super::SharedStr;
use std::collections::BTreeMap;

/// Labels: key/value pairs sorted by key, each key once, the strings shared (see
/// [`Interner`]). A pod's three labels take one allocation holding six shared strings, not a
/// B-tree node and six strings of their own.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Labels(Box<[(SharedStr, SharedStr)]>);

impl Labels {
    /// No labels.
    pub fn new() -> Labels {
        Labels::default()
    }

    /// Labels from a map (as objects carry them), their strings taken from `strings`.
    pub fn interned(map: &BTreeMap<String, String>, strings: &mut Interner) -> Labels {
        // A BTreeMap is sorted by key and has each key once, as Labels must be.
        Labels(map.iter().map(|(k, v)| (strings.intern(k), strings.intern(v))).collect())
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.binary_search_by(|(k, _)| (**k).cmp(key)).ok().map(|at| &*self.0[at].1)
    }

    /// Whether `key` is set.
    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// The pairs, sorted by key.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (&**k, &**v))
    }

    /// Number of labels.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True without labels.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Sets `key` to `value` (replacing its value if it was set).
    pub fn insert(&mut self, key: impl Into<SharedStr>, value: impl Into<SharedStr>) {
        let (key, value) = (key.into(), value.into());
        let mut pairs = std::mem::take(&mut self.0).into_vec();
        match pairs.binary_search_by(|(k, _)| k.cmp(&key)) {
            Ok(at) => pairs[at].1 = value,
            Err(at) => pairs.insert(at, (key, value)),
        }
        self.0 = pairs.into_boxed_slice();
    }
}

impl<K: Into<SharedStr>, V: Into<SharedStr>> FromIterator<(K, V)> for Labels {
    /// Labels from pairs in any order; of a key given twice, the last value counts.
    fn from_iter<I: IntoIterator<Item = (K, V)>>(pairs: I) -> Labels {
        let mut labels = Labels::new();
        for (k, v) in pairs {
            labels.insert(k, v);
        }
        labels
    }
}

impl serde::Serialize for Labels {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.iter())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_like_the_map_it_was_made_from() {
        let map: BTreeMap<String, String> = [("tier", "front"), ("app", "web"), ("pod", "a")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let mut strings = Interner::default();
        let labels = Labels::interned(&map, &mut strings);
        assert_eq!(labels.len(), 3);
        for (k, v) in &map {
            assert_eq!(labels.get(k), Some(v.as_str()));
        }
        assert_eq!(labels.get("nope"), None);
        assert_eq!(
            labels.iter().collect::<Vec<_>>(),
            map.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect::<Vec<_>>()
        );
        assert_eq!(labels, map.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect());
    }

    #[test]
    fn insert_keeps_keys_sorted_and_unique() {
        let mut labels: Labels = [("b", "1"), ("a", "2"), ("b", "3")].into_iter().collect();
        labels.insert("c", "4");
        labels.insert("a", "5");
        assert_eq!(labels.iter().collect::<Vec<_>>(), vec![("a", "5"), ("b", "3"), ("c", "4")]);
    }
}
