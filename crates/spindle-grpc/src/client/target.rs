//! gRPC target names (gRPC's naming document): where a [`BalancedChannel`](crate::BalancedChannel)
//! finds its servers.
//!
//! - `dns:///host:port`, `dns:host:port`, or a bare `host:port`: a name resolved to every
//!   address it has, again and again (module `resolve`). An authority (`dns://8.8.8.8/host`)
//!   is refused: resolution goes through spindle's resolver (the system's by default).
//! - `ipv4:addr[:port][,addr[:port]...]` and `ipv6:addr,...` (`ipv6:[addr]:port` with a
//!   port): a fixed list of addresses.
//! - `unix:/path`, `unix:///path`: one Unix socket.
//!
//! The port defaults to 443, as in gRPC's naming document; the host of a `dns` name is also the
//! channel's `:authority` (and the name TLS checks).

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::str::FromStr;

/// The port of a target that names none (gRPC's naming document).
pub const DEFAULT_PORT: u16 = 443;

/// A parsed gRPC target name (module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetName {
    /// A name to resolve, with the port its addresses are dialled on.
    Dns {
        /// The host name (or an IP literal, which resolves to itself), without brackets.
        host: String,
        /// The port.
        port: u16,
    },
    /// A fixed list of addresses (`ipv4:` or `ipv6:`).
    Addrs(Vec<SocketAddr>),
    /// A Unix socket's path.
    Unix(PathBuf),
}

impl TargetName {
    /// The `host:port` requests carry as their `:authority` (`localhost` for a Unix socket).
    pub fn authority(&self) -> String {
        match self {
            TargetName::Dns { host, port } if host.contains(':') => format!("[{host}]:{port}"),
            TargetName::Dns { host, port } => format!("{host}:{port}"),
            TargetName::Addrs(addrs) => addrs[0].to_string(),
            TargetName::Unix(_) => "localhost".to_string(),
        }
    }
}

fn invalid(target: &str, why: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, format!("spindle-grpc: {why}: {target:?}"))
}

/// `host[:port]` with the host possibly bracketed (an IPv6 literal with a port).
fn host_port(target: &str, s: &str) -> io::Result<(String, u16)> {
    if s.is_empty() {
        return Err(invalid(target, "no host"));
    }
    if let Some(rest) = s.strip_prefix('[') {
        let (host, after) = rest.split_once(']').ok_or_else(|| invalid(target, "an unclosed '['"))?;
        let port = match after {
            "" => DEFAULT_PORT,
            p => p
                .strip_prefix(':')
                .and_then(|p| p.parse().ok())
                .ok_or_else(|| invalid(target, "a bad port"))?,
        };
        return Ok((host.to_string(), port));
    }
    match s.rsplit_once(':') {
        // More than one colon and no brackets: an IPv6 literal without a port.
        Some((host, _)) if host.contains(':') => Ok((s.to_string(), DEFAULT_PORT)),
        Some((host, port)) => {
            let port = port.parse().map_err(|_| invalid(target, "a bad port"))?;
            if host.is_empty() {
                return Err(invalid(target, "no host"));
            }
            Ok((host.to_string(), port))
        }
        None => Ok((s.to_string(), DEFAULT_PORT)),
    }
}

fn addr_list<A: FromStr + Into<IpAddr>>(
    target: &str,
    list: &str,
    family: &str,
) -> io::Result<Vec<SocketAddr>> {
    let mut addrs = Vec::new();
    for item in list.split(',') {
        let (host, port) = host_port(target, item)?;
        let ip: A = host.parse().map_err(|_| invalid(target, &format!("not an {family} address: {host}")))?;
        addrs.push(SocketAddr::new(ip.into(), port));
    }
    Ok(addrs)
}

impl FromStr for TargetName {
    type Err = io::Error;

    fn from_str(target: &str) -> io::Result<TargetName> {
        if let Some(rest) = target.strip_prefix("dns:") {
            let name = match rest.strip_prefix("//") {
                Some(with_authority) => {
                    let (authority, name) = with_authority
                        .split_once('/')
                        .ok_or_else(|| invalid(target, "dns:// needs a third '/' (dns:///host:port)"))?;
                    if !authority.is_empty() {
                        return Err(invalid(
                            target,
                            "a DNS server authority is not supported (names resolve through spindle's resolver): use dns:///host:port",
                        ));
                    }
                    name
                }
                None => rest,
            };
            let (host, port) = host_port(target, name)?;
            return Ok(TargetName::Dns { host, port });
        }
        if let Some(list) = target.strip_prefix("ipv4:") {
            return addr_list::<Ipv4Addr>(target, list, "IPv4").map(TargetName::Addrs);
        }
        if let Some(list) = target.strip_prefix("ipv6:") {
            return addr_list::<Ipv6Addr>(target, list, "IPv6").map(TargetName::Addrs);
        }
        if let Some(path) = target.strip_prefix("unix:") {
            let path = path.strip_prefix("//").unwrap_or(path);
            if !path.starts_with('/') {
                return Err(invalid(target, "a unix target needs an absolute path (unix:/path)"));
            }
            return Ok(TargetName::Unix(path.into()));
        }
        if target.contains("://") {
            return Err(invalid(target, "not a gRPC target (dns:///host:port, ipv4:, ipv6:, unix:)"));
        }
        let (host, port) = host_port(target, target)?;
        Ok(TargetName::Dns { host, port })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> TargetName {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    fn dns(host: &str, port: u16) -> TargetName {
        TargetName::Dns { host: host.into(), port }
    }

    #[test]
    fn dns_names_in_every_spelling() {
        assert_eq!(parse("dns:///svc.ns.svc.cluster.local:50051"), dns("svc.ns.svc.cluster.local", 50051));
        assert_eq!(parse("dns:svc:8080"), dns("svc", 8080));
        assert_eq!(parse("svc:8080"), dns("svc", 8080));
        assert_eq!(parse("dns:///svc"), dns("svc", DEFAULT_PORT));
        assert_eq!(parse("dns:///[::1]:50051"), dns("::1", 50051));
        assert_eq!(parse("dns:///::1"), dns("::1", DEFAULT_PORT));
        assert_eq!(parse("dns:///svc:50051").authority(), "svc:50051");
        assert_eq!(parse("dns:///[::1]:7").authority(), "[::1]:7");
    }

    #[test]
    fn address_lists() {
        assert_eq!(
            parse("ipv4:127.0.0.1:1,127.0.0.2"),
            TargetName::Addrs(vec!["127.0.0.1:1".parse().unwrap(), "127.0.0.2:443".parse().unwrap()])
        );
        assert_eq!(
            parse("ipv6:[::1]:5,::2"),
            TargetName::Addrs(vec!["[::1]:5".parse().unwrap(), "[::2]:443".parse().unwrap()])
        );
        assert_eq!(parse("unix:///tmp/s.sock"), TargetName::Unix("/tmp/s.sock".into()));
        assert_eq!(parse("unix:/tmp/s.sock"), TargetName::Unix("/tmp/s.sock".into()));
    }

    #[test]
    fn bad_targets_say_why() {
        for (bad, why) in [
            ("dns://8.8.8.8/svc:1", "authority is not supported"),
            ("dns://svc:1", "third '/'"),
            ("dns:///svc:port", "bad port"),
            ("dns:///", "no host"),
            ("ipv4:::1", "not an IPv4 address"),
            ("ipv6:127.0.0.1", "not an IPv6 address"),
            ("ipv4:127.0.0.1:99999", "bad port"),
            ("unix:relative", "absolute path"),
            ("http://svc:1", "not a gRPC target"),
            ("dns:///[::1:5", "unclosed"),
        ] {
            let err = bad.parse::<TargetName>().expect_err(bad).to_string();
            assert!(err.contains(why), "{bad}: {err}");
        }
    }
}
