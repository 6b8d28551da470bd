//! Kubernetes name rules (apimachinery's `validation` package): object names, namespace names,
//! label keys and values. Everything npagent later prints (the agent log, the audit log) passes
//! one of these, so no name can carry a space, a newline or any other byte that would split or
//! forge a log line.

/// Longest DNS-1123 subdomain (object names, label key prefixes).
pub const DNS1123_SUBDOMAIN_MAX: usize = 253;
/// Longest DNS-1123 label (namespace names).
pub const DNS1123_LABEL_MAX: usize = 63;

/// An object name (Pods, NetworkPolicies): a DNS-1123 subdomain of at most 253 characters.
pub fn validate_object_name(name: &str) -> Result<(), String> {
    if name.len() > DNS1123_SUBDOMAIN_MAX || !is_dns1123_subdomain(name) {
        return Err(format!(
            "must be a DNS-1123 subdomain of at most {DNS1123_SUBDOMAIN_MAX} characters: lowercase \
             alphanumerics, '-' or '.', starting and ending alphanumeric"
        ));
    }
    Ok(())
}

/// A Namespace name: a DNS-1123 label of at most 63 characters.
pub fn validate_namespace_name(name: &str) -> Result<(), String> {
    if name.len() > DNS1123_LABEL_MAX || !is_dns1123_label(name) {
        return Err(format!(
            "must be a DNS-1123 label of at most {DNS1123_LABEL_MAX} characters: lowercase \
             alphanumerics or '-', starting and ending alphanumeric"
        ));
    }
    Ok(())
}

/// `[prefix/]name`: prefix a DNS-1123 subdomain (≤ 253), name a qualified name part (≤ 63).
pub fn validate_label_key(key: &str) -> Result<(), String> {
    let name = match key.split_once('/') {
        Some((prefix, name)) => {
            if prefix.is_empty() || prefix.len() > DNS1123_SUBDOMAIN_MAX || !is_dns1123_subdomain(prefix) {
                return Err("prefix must be a DNS-1123 subdomain of at most 253 characters".into());
            }
            name
        }
        None => key,
    };
    if name.is_empty() || name.len() > 63 || !is_qualified_name_part(name) {
        return Err("name part must be 1-63 alphanumerics, '-', '_' or '.', starting and ending alphanumeric".into());
    }
    Ok(())
}

/// Empty, or ≤ 63 alphanumerics, `-`, `_`, `.`, starting and ending alphanumeric.
pub fn validate_label_value(v: &str) -> Result<(), String> {
    if v.is_empty() {
        return Ok(());
    }
    if v.len() > 63 || !is_qualified_name_part(v) {
        return Err("must be at most 63 alphanumerics, '-', '_' or '.', starting and ending alphanumeric".into());
    }
    Ok(())
}

fn is_qualified_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    let (Some(first), Some(last)) = (b.first(), b.last()) else { return false };
    first.is_ascii_alphanumeric()
        && last.is_ascii_alphanumeric()
        && b.iter().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// Lowercase alphanumerics and '-', starting and ending alphanumeric (no length check).
fn is_dns1123_label(s: &str) -> bool {
    let b = s.as_bytes();
    let (Some(first), Some(last)) = (b.first(), b.last()) else { return false };
    let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    alnum(first) && alnum(last) && b.iter().all(|c| alnum(c) || *c == b'-')
}

/// Dot-separated DNS-1123 labels (no length check).
fn is_dns1123_subdomain(s: &str) -> bool {
    s.split('.').all(is_dns1123_label)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_and_namespace_names() {
        for good in ["a", "x-1", "a.b.c", "0abc", &"a".repeat(253)] {
            assert!(validate_object_name(good).is_ok(), "{good:?}");
        }
        for bad in ["", "A", "a b", "a\nb", "a\n", "-a", "a-", "a..b", ".a", "a_b", "a/b", "é", &"a".repeat(254)] {
            assert!(validate_object_name(bad).is_err(), "{bad:?}");
        }
        for good in ["x", "kube-system", "0", &"a".repeat(63)] {
            assert!(validate_namespace_name(good).is_ok(), "{good:?}");
        }
        for bad in ["", "a.b", "X", "a b", "a\tb", "-x", &"a".repeat(64)] {
            assert!(validate_namespace_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn label_keys_and_values() {
        for good in ["app", "example.com/app", "A_b.c-d", "k8s.io/x"] {
            assert!(validate_label_key(good).is_ok(), "{good:?}");
        }
        for bad in ["", "/a", "Example.com/a", "a b", "a/b/c", "-a", &"a".repeat(64)] {
            assert!(validate_label_key(bad).is_err(), "{bad:?}");
        }
        for good in ["", "v", "A-1_b.c"] {
            assert!(validate_label_value(good).is_ok(), "{good:?}");
        }
        for bad in ["a b", "a\n", "-a", &"a".repeat(64)] {
            assert!(validate_label_value(bad).is_err(), "{bad:?}");
        }
    }
}
