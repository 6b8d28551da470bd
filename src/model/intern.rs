//! Shared strings for what repeats across a cluster's objects: label keys and values,
//! namespace and node names. At 100,000 pods a handful of distinct label keys and a few
//! thousand values stand for hundreds of thousands of copies.

use super::SharedStr;
use std::collections::HashSet;

/// The table is purged no earlier than at this many strings.
const MIN_PURGE_AT: usize = 1024;

/// Hands out one shared `SharedStr` per distinct string.
///
/// Strings that nothing but the table holds any more (a label value of a pod long gone) are
/// dropped whenever the table has doubled since the last purge, so the table stays within
/// twice the strings in use and a purge costs O(1) per string added, amortised.
#[derive(Debug)]
pub struct Interner {
    strings: HashSet<SharedStr, foldhash::fast::RandomState>,
    purge_at: usize,
}

impl Default for Interner {
    fn default() -> Self {
        Interner { strings: HashSet::default(), purge_at: MIN_PURGE_AT }
    }
}

impl Interner {
    /// The shared copy of `s`.
    pub fn intern(&mut self, s: &str) -> SharedStr {
        if let Some(shared) = self.strings.get(s) {
            return shared.clone();
        }
        if self.strings.len() >= self.purge_at {
            self.strings.retain(|s| SharedStr::strong_count(s).is_none_or(|n| n > 1));
            self.purge_at = self.strings.len().saturating_mul(2).max(MIN_PURGE_AT);
        }
        let shared = SharedStr::from(s);
        self.strings.insert(shared.clone());
        shared
    }

    /// Number of strings in the table (those in use, and those not yet purged).
    pub fn len(&self) -> usize {
        self.strings.len()
    }

    /// True when the table holds no string.
    pub fn is_empty(&self) -> bool {
        self.strings.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_strings_share_one_allocation() {
        let mut t = Interner::default();
        let a = t.intern("app");
        let b = t.intern(&String::from("app"));
        assert!(SharedStr::ptr_eq(&a, &b));
        assert!(!SharedStr::ptr_eq(&a, &t.intern("tier")));
        assert_eq!(t.len(), 2);
    }

    #[test]
    fn strings_no_longer_held_are_purged_and_held_ones_stay_shared() {
        let mut t = Interner::default();
        let kept = t.intern("kept");
        for i in 0..10 * MIN_PURGE_AT {
            // Each dropped at once: only the table holds it.
            t.intern(&format!("gone-{i}"));
        }
        assert!(t.len() <= 2 * MIN_PURGE_AT, "{} strings held", t.len());
        assert!(SharedStr::ptr_eq(&kept, &t.intern("kept")));
    }
}
