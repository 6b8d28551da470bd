//! Where Open vSwitch listens, for OpenFlow (`--ofp`) and OVSDB (`--ovsdb`) alike:
//! `unix:PATH` or `tcp:HOST:PORT` (`tcp:[v6addr]:PORT` for IPv6 literals).

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use tokio::io::{AsyncRead, AsyncWrite};

/// The paths of OVS's sockets in its default run directory, written once: the `const`s below
/// are built from them (`concat!` takes only literals).
macro_rules! default_ofp_path {
    () => {
        "/var/run/openvswitch/br-int.mgmt"
    };
}
macro_rules! default_ovsdb_path {
    () => {
        "/var/run/openvswitch/db.sock"
    };
}

/// OVS's management socket of br-int in the default run directory.
pub const DEFAULT_OFP_PATH: &str = default_ofp_path!();
/// [`DEFAULT_OFP_PATH`] as an endpoint string.
pub const DEFAULT_OFP: &str = concat!("unix:", default_ofp_path!());
/// ovsdb-server's socket in the default run directory.
pub const DEFAULT_OVSDB_PATH: &str = default_ovsdb_path!();
/// [`DEFAULT_OVSDB_PATH`] as an endpoint string.
pub const DEFAULT_OVSDB: &str = concat!("unix:", default_ovsdb_path!());

/// An endpoint of an Open vSwitch daemon.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// A Unix socket path (OVS's `<bridge>.mgmt`, ovsdb-server's `db.sock`).
    Unix(PathBuf),
    /// `host:port`.
    Tcp(String),
}

/// Why an endpoint string is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EndpointError {
    #[error("endpoint {0:?}: expected unix:PATH or tcp:HOST:PORT")]
    Syntax(String),
}

impl FromStr for Endpoint {
    type Err = EndpointError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if let Some(path) = s.strip_prefix("unix:") {
            if !path.is_empty() {
                return Ok(Endpoint::Unix(PathBuf::from(path)));
            }
        } else if let Some(addr) = s.strip_prefix("tcp:") {
            let port_ok = addr.rsplit_once(':').is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok());
            if port_ok {
                return Ok(Endpoint::Tcp(addr.to_string()));
            }
        }
        Err(EndpointError::Syntax(s.to_string()))
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Endpoint::Unix(p) => write!(f, "unix:{}", p.display()),
            Endpoint::Tcp(a) => write!(f, "tcp:{a}"),
        }
    }
}

/// A connected byte stream to an endpoint.
pub trait Stream: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> Stream for T {}

impl Endpoint {
    /// [`DEFAULT_OFP`].
    pub fn default_ofp() -> Endpoint {
        Endpoint::Unix(PathBuf::from(DEFAULT_OFP_PATH))
    }

    /// [`DEFAULT_OVSDB`].
    pub fn default_ovsdb() -> Endpoint {
        Endpoint::Unix(PathBuf::from(DEFAULT_OVSDB_PATH))
    }

    /// Connects once.
    pub async fn connect(&self) -> std::io::Result<Box<dyn Stream>> {
        match self {
            Endpoint::Unix(path) => Ok(Box::new(tokio::net::UnixStream::connect(path).await?)),
            Endpoint::Tcp(addr) => {
                let s = tokio::net::TcpStream::connect(addr.as_str()).await?;
                s.set_nodelay(true)?;
                Ok(Box::new(s))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_are_the_documented_endpoints() {
        assert_eq!(DEFAULT_OFP.parse(), Ok(Endpoint::default_ofp()));
        assert_eq!(DEFAULT_OVSDB.parse(), Ok(Endpoint::default_ovsdb()));
    }

    #[test]
    fn parses_unix_and_tcp() {
        assert_eq!("unix:/run/x.mgmt".parse(), Ok(Endpoint::Unix("/run/x.mgmt".into())));
        assert_eq!("unix:relative/db.sock".parse(), Ok(Endpoint::Unix("relative/db.sock".into())));
        assert_eq!("tcp:127.0.0.1:6653".parse(), Ok(Endpoint::Tcp("127.0.0.1:6653".into())));
        assert_eq!("tcp:[::1]:6640".parse(), Ok(Endpoint::Tcp("[::1]:6640".into())));
        assert_eq!("tcp:ovs.example:0".parse(), Ok(Endpoint::Tcp("ovs.example:0".into())));
        assert_eq!(DEFAULT_OFP.parse(), Ok(Endpoint::Unix("/var/run/openvswitch/br-int.mgmt".into())));
        assert_eq!(DEFAULT_OVSDB.parse(), Ok(Endpoint::Unix("/var/run/openvswitch/db.sock".into())));
    }

    #[test]
    fn rejects_garbage_naming_it() {
        let bad = [
            "",
            "unix:",
            "tcp:",
            "tcp:host",
            "tcp::80",
            "tcp:h:",
            "tcp:h:99999",
            "tcp:h:-1",
            "tcp:h:80x",
            "ssl:1.2.3.4:6653",
            "punix:/run/x",
            "/path",
            "UNIX:/path",
            "garbage",
        ];
        for s in bad {
            let err = s.parse::<Endpoint>().expect_err(s);
            assert_eq!(err.to_string(), format!("endpoint {s:?}: expected unix:PATH or tcp:HOST:PORT"));
        }
    }

    #[test]
    fn display_round_trips() {
        for s in ["unix:/a/b.mgmt", "tcp:localhost:6653", "tcp:[fd00::1]:6640"] {
            assert_eq!(s.parse::<Endpoint>().map(|e| e.to_string()), Ok(s.to_string()));
        }
    }

    #[tokio::test]
    async fn connecting_to_a_missing_socket_fails() {
        let dir = tempfile::tempdir().expect("temp dir");
        let missing = Endpoint::Unix(dir.path().join("absent.sock"));
        let err = missing.connect().await.err().expect("nothing listens there");
        assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
    }
}
