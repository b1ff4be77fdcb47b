//! [`ToSocketAddrs`]: the addresses `connect` and `send_to` accept, split into those that are
//! already IP addresses (used as they are, no system call) and a host name with a port, which
//! is looked up by [`dns`](super::dns) off the worker thread.
//!
//! std's `ToSocketAddrs` cannot be used for this: converting a host name with it calls
//! `getaddrinfo` on the calling thread, which in a fiber stalls every fiber of the worker. The
//! trait here is implemented for the same types as std's, so `connect("example.com:80")`,
//! `connect(("example.com", 80))`, `connect(addr)` and `connect(&addrs[..])` all still read
//! the same.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

/// What an address converts to before any lookup.
#[doc(hidden)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// IP addresses, tried in order.
    Addrs(Vec<SocketAddr>),
    /// A name to look up, and the port to pair with each address found.
    Host(String, u16),
}

/// Addresses for spindle's `connect` and `send_to`: implemented for the same types as
/// [`std::net::ToSocketAddrs`]. A host name is resolved by [`dns`](super::dns) on the blocking
/// pool (never on a worker thread); IP literals are used without a lookup.
///
/// The trait is sealed: its one method is an implementation detail.
pub trait ToSocketAddrs: sealed::Sealed {
    /// Splits the address into IP addresses or a name to look up.
    #[doc(hidden)]
    fn to_target(&self) -> io::Result<Target>;

    /// The address itself when it is one IP address: the allocation-free path of `send_to`.
    #[doc(hidden)]
    fn as_single(&self) -> Option<SocketAddr> {
        None
    }
}

mod sealed {
    pub trait Sealed {}
}

fn invalid(msg: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

/// `host` paired with `port`: an IP literal (IPv6 with or without brackets) needs no lookup.
fn host_port(host: &str, port: u16) -> Target {
    let bare = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
    match bare.parse::<IpAddr>() {
        Ok(ip) => Target::Addrs(vec![SocketAddr::new(ip, port)]),
        Err(_) => Target::Host(host.to_owned(), port),
    }
}

macro_rules! ready_addr {
    ($($ty:ty),+) => {$(
        impl sealed::Sealed for $ty {}
        impl ToSocketAddrs for $ty {
            fn to_target(&self) -> io::Result<Target> {
                Ok(Target::Addrs(vec![SocketAddr::from(*self)]))
            }
            fn as_single(&self) -> Option<SocketAddr> {
                Some(SocketAddr::from(*self))
            }
        }
    )+};
}

ready_addr!(SocketAddr, SocketAddrV4, SocketAddrV6, (IpAddr, u16), (Ipv4Addr, u16), (Ipv6Addr, u16));

impl sealed::Sealed for str {}
impl ToSocketAddrs for str {
    fn to_target(&self) -> io::Result<Target> {
        if let Ok(addr) = self.parse::<SocketAddr>() {
            return Ok(Target::Addrs(vec![addr]));
        }
        let (host, port) = self.rsplit_once(':').ok_or_else(|| invalid("invalid socket address"))?;
        let port = port.parse::<u16>().map_err(|_| invalid("invalid port value"))?;
        Ok(host_port(host, port))
    }
}

impl sealed::Sealed for String {}
impl ToSocketAddrs for String {
    fn to_target(&self) -> io::Result<Target> {
        self.as_str().to_target()
    }
}

impl sealed::Sealed for (&str, u16) {}
impl ToSocketAddrs for (&str, u16) {
    fn to_target(&self) -> io::Result<Target> {
        Ok(host_port(self.0, self.1))
    }
}

impl sealed::Sealed for (String, u16) {}
impl ToSocketAddrs for (String, u16) {
    fn to_target(&self) -> io::Result<Target> {
        Ok(host_port(&self.0, self.1))
    }
}

impl sealed::Sealed for [SocketAddr] {}
impl ToSocketAddrs for [SocketAddr] {
    fn to_target(&self) -> io::Result<Target> {
        Ok(Target::Addrs(self.to_vec()))
    }
}

impl sealed::Sealed for Vec<SocketAddr> {}
impl ToSocketAddrs for Vec<SocketAddr> {
    fn to_target(&self) -> io::Result<Target> {
        Ok(Target::Addrs(self.clone()))
    }
}

impl<T: ToSocketAddrs + ?Sized> sealed::Sealed for &T {}
impl<T: ToSocketAddrs + ?Sized> ToSocketAddrs for &T {
    fn to_target(&self) -> io::Result<Target> {
        (**self).to_target()
    }
    fn as_single(&self) -> Option<SocketAddr> {
        (**self).as_single()
    }
}

/// Resolves `addr` with std (on the calling thread: used only by `bind`, whose addresses are
/// local) and runs `f` on each address until one succeeds (like std's `each_addr`).
pub(super) fn each_addr<A: std::net::ToSocketAddrs, T>(
    addr: A,
    mut f: impl FnMut(SocketAddr) -> io::Result<T>,
) -> io::Result<T> {
    let mut last_err = None;
    for addr in addr.to_socket_addrs()? {
        match f(addr) {
            Ok(v) => return Ok(v),
            Err(e) => last_err = Some(e),
        }
    }
    Err(last_err
        .unwrap_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "could not resolve to any addresses")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_need_no_lookup() {
        let v4: SocketAddr = "127.0.0.1:80".parse().unwrap();
        let v6: SocketAddr = "[::1]:80".parse().unwrap();
        assert_eq!("127.0.0.1:80".to_target().unwrap(), Target::Addrs(vec![v4]));
        assert_eq!("[::1]:80".to_target().unwrap(), Target::Addrs(vec![v6]));
        assert_eq!(("::1", 80).to_target().unwrap(), Target::Addrs(vec![v6]));
        assert_eq!(("[::1]", 80).to_target().unwrap(), Target::Addrs(vec![v6]));
        assert_eq!((Ipv4Addr::LOCALHOST, 80).to_target().unwrap(), Target::Addrs(vec![v4]));
    }

    #[test]
    fn names_are_split_from_their_port() {
        assert_eq!("example.com:443".to_target().unwrap(), Target::Host("example.com".into(), 443));
        assert_eq!(("example.com", 80).to_target().unwrap(), Target::Host("example.com".into(), 80));
    }

    #[test]
    fn bad_ports_are_rejected() {
        assert_eq!("example.com".to_target().unwrap_err().kind(), io::ErrorKind::InvalidInput);
        assert_eq!("example.com:http".to_target().unwrap_err().kind(), io::ErrorKind::InvalidInput);
        assert_eq!("example.com:70000".to_target().unwrap_err().kind(), io::ErrorKind::InvalidInput);
    }
}
