//! The values OVSDB's columns hold, read and written: RFC 7047's encodings of sets, maps and
//! uuids (section 5.1), and the text forms of a MAC and an address in `external_ids` and
//! `mac_in_use`.

use std::collections::BTreeMap;
use std::net::IpAddr;

use serde_json::Value;

/// `10.10.0.1`, `10.10.0.1/16`, `fe80::1/64`: the address (Antrea writes CIDR-style values).
pub fn parse_ip(s: &str) -> Option<IpAddr> {
    let (addr, prefix) = match s.split_once('/') {
        Some((a, p)) => (a, Some(p)),
        None => (s, None),
    };
    let ip: IpAddr = addr.parse().ok()?;
    if let Some(p) = prefix {
        let max = if ip.is_ipv4() { 32 } else { 128 };
        p.parse::<u8>().ok().filter(|p| *p <= max)?;
    }
    Some(ip)
}

/// `aa:bb:cc:dd:ee:ff`, as OVSDB's `attached-mac` and `mac_in_use` hold a MAC.
pub fn format_mac(mac: [u8; 6]) -> String {
    mac.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
}

/// `aa:bb:cc:dd:ee:ff` (either case).
pub fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut mac = [0u8; 6];
    let mut parts = s.split(':');
    for byte in mac.iter_mut() {
        let p = parts.next()?;
        if p.len() != 2 || !p.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        *byte = u8::from_str_radix(p, 16).ok()?;
    }
    parts.next().is_none().then_some(mac)
}

/// Members of a set: `["set", [..]]`, or a single atom standing for a one-element set.
pub fn set_items(v: &Value) -> Vec<&Value> {
    match v.as_array().map(Vec::as_slice) {
        Some([tag, Value::Array(items)]) if tag == "set" => items.iter().collect(),
        _ => vec![v],
    }
}

/// `["uuid", "..."]`.
pub fn uuid(v: &Value) -> Option<String> {
    match v.as_array().map(Vec::as_slice) {
        Some([tag, Value::String(u)]) if tag == "uuid" => Some(u.clone()),
        _ => None,
    }
}

/// Pairs of `["map", [[k, v], ..]]`.
pub fn map_pairs(v: &Value) -> Result<Vec<(&Value, &Value)>, String> {
    match v.as_array().map(Vec::as_slice) {
        Some([tag, Value::Array(pairs)]) if tag == "map" => pairs
            .iter()
            .map(|p| match p.as_array().map(Vec::as_slice) {
                Some([k, v]) => Ok((k, v)),
                _ => Err(format!("bad map pair {p}")),
            })
            .collect(),
        _ => Err(format!("not a map: {v}")),
    }
}

/// A map of strings (`["map", [[k, v], ..]]`); absent is empty.
pub fn string_map(v: Option<&Value>) -> Result<BTreeMap<String, String>, String> {
    let Some(v) = v else { return Ok(BTreeMap::new()) };
    map_pairs(v)?
        .into_iter()
        .map(|(k, v)| match (k.as_str(), v.as_str()) {
            (Some(k), Some(v)) => Ok((k.to_string(), v.to_string())),
            _ => Err(format!("non-string map entry {k}: {v}")),
        })
        .collect()
}

/// A set of uuids; absent is empty.
pub fn uuid_set(v: Option<&Value>) -> Result<Vec<String>, String> {
    let Some(v) = v else { return Ok(Vec::new()) };
    set_items(v).into_iter().map(|i| uuid(i).ok_or_else(|| format!("not a uuid: {i}"))).collect()
}

/// A string column that may be empty (a set of at most one string).
pub fn optional_string(v: &Value) -> Option<String> {
    set_items(v).first().and_then(|s| s.as_str()).map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ip_and_mac_parsing() {
        assert_eq!(parse_ip("10.0.0.1/16"), "10.0.0.1".parse().ok());
        assert_eq!(parse_ip("10.0.0.1/33"), None);
        assert_eq!(parse_ip("::1/128"), "::1".parse().ok());
        assert_eq!(parse_ip("10.0.0.1/"), None);
        assert_eq!(parse_mac("aa:bb:cc:dd:ee:ff"), Some([0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff]));
        for bad in [
            "aa:bb:cc:dd:ee",
            "aa:bb:cc:dd:ee:ff:00",
            "a:bb:cc:dd:ee:ff0",
            "gg:bb:cc:dd:ee:ff",
            "+a:bb:cc:dd:ee:ff",
            "",
        ] {
            assert_eq!(parse_mac(bad), None, "{bad}");
        }
    }
}
