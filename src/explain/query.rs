//! What `npagent explain` is asked: two endpoints and a port, as the user writes them.

use super::ExplainError;
use crate::model::{ObjectRef, PortRef, Protocol};
use std::net::IpAddr;

/// One end of a connection, as given: a pod by `namespace/name`, or an address (which is a
/// pod when a pod of the model holds it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EndpointSpec {
    Pod(ObjectRef),
    Ip(IpAddr),
}

impl std::str::FromStr for EndpointSpec {
    type Err = ExplainError;

    /// `ns/pod` or an IPv4/IPv6 address.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if let Ok(ip) = s.parse::<IpAddr>() {
            return Ok(EndpointSpec::Ip(ip));
        }
        match s.split_once('/') {
            Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
                Ok(EndpointSpec::Pod(ObjectRef { namespace: ns.into(), name: name.into() }))
            }
            _ => Err(ExplainError::BadEndpoint(s.to_string())),
        }
    }
}

/// The destination port of the connection and its protocol: a number or a container port
/// name (resolved on the destination pod, as Kubernetes resolves named ports).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DestinationPort {
    pub protocol: Protocol,
    pub port: PortRef,
}

impl std::str::FromStr for DestinationPort {
    type Err = ExplainError;

    /// `80/TCP`, `tcp/80`, `udp/53`, `http/TCP`, `tcp/http`, or a bare `80` or `http` (TCP,
    /// the Kubernetes default). Protocols are case-insensitive.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || ExplainError::BadPort(s.to_string());
        let (protocol, port) = match s.split_once('/') {
            None => (Protocol::Tcp, s),
            Some((a, b)) => match (protocol(a), protocol(b)) {
                (Some(p), _) => (p, b),
                (None, Some(p)) => (p, a),
                (None, None) => return Err(bad()),
            },
        };
        let port = match port.parse::<u16>() {
            Ok(0) => return Err(bad()),
            Ok(n) => PortRef::Number(n),
            Err(_) if is_port_name(port) => PortRef::Name(port.to_string()),
            Err(_) => return Err(bad()),
        };
        Ok(DestinationPort { protocol, port })
    }
}

fn protocol(s: &str) -> Option<Protocol> {
    match s.to_ascii_lowercase().as_str() {
        "tcp" => Some(Protocol::Tcp),
        "udp" => Some(Protocol::Udp),
        "sctp" => Some(Protocol::Sctp),
        _ => None,
    }
}

/// An IANA service name, as Kubernetes validates container port names: 1 to 15 lower-case
/// letters, digits and inner, non-consecutive hyphens, at least one letter.
fn is_port_name(s: &str) -> bool {
    (1..=15).contains(&s.len())
        && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && s.bytes().any(|b| b.is_ascii_lowercase())
        && !s.starts_with('-')
        && !s.ends_with('-')
        && !s.contains("--")
}

/// The protocol's name as Kubernetes writes it.
pub(crate) fn protocol_name(p: Protocol) -> &'static str {
    match p {
        Protocol::Tcp => "TCP",
        Protocol::Udp => "UDP",
        Protocol::Sctp => "SCTP",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn port(s: &str) -> Result<DestinationPort, ExplainError> {
        s.parse()
    }

    #[test]
    fn ports_in_either_order_and_case() {
        let tcp80 = DestinationPort { protocol: Protocol::Tcp, port: PortRef::Number(80) };
        for s in ["80/TCP", "tcp/80", "TCP/80", "80/tcp", "80"] {
            assert_eq!(port(s).unwrap(), tcp80, "{s}");
        }
        assert_eq!(port("udp/53").unwrap(), DestinationPort { protocol: Protocol::Udp, port: PortRef::Number(53) });
        assert_eq!(port("53/SCTP").unwrap().protocol, Protocol::Sctp);
        let http = DestinationPort { protocol: Protocol::Tcp, port: PortRef::Name("http".into()) };
        assert_eq!(port("http/TCP").unwrap(), http);
        assert_eq!(port("tcp/http").unwrap(), http);
        assert_eq!(port("http").unwrap(), http);
    }

    #[test]
    fn bad_ports_are_named() {
        for s in ["", "0", "65536", "80/icmp", "Http", "a--b", "-a", "a_b", "80/tcp/1", "sixteen-chars-xx"] {
            match port(s) {
                Err(ExplainError::BadPort(got)) => assert_eq!(got, s),
                other => panic!("{s:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn endpoints() {
        assert_eq!(
            "x/a".parse::<EndpointSpec>().unwrap(),
            EndpointSpec::Pod(ObjectRef { namespace: "x".into(), name: "a".into() })
        );
        assert_eq!("10.0.0.1".parse::<EndpointSpec>().unwrap(), EndpointSpec::Ip("10.0.0.1".parse().unwrap()));
        assert_eq!("fd00::1".parse::<EndpointSpec>().unwrap(), EndpointSpec::Ip("fd00::1".parse().unwrap()));
        for s in ["x", "/a", "x/", "x/a/b", "10.0.0.300"] {
            assert!(matches!(s.parse::<EndpointSpec>(), Err(ExplainError::BadEndpoint(_))), "{s}");
        }
    }
}
