//! UDP sockets.

use std::io;
use std::mem::MaybeUninit;
use std::net::{SocketAddr, ToSocketAddrs};

use socket2::{Domain, Protocol, Socket, Type};

use super::each_addr;
use super::source::IoSource;
use crate::reactor::io::Direction;

/// A UDP socket. `recv_from` and `send_to` park the calling fiber while not ready.
#[derive(Debug)]
pub struct UdpSocket {
    source: IoSource,
}

pub(super) fn as_uninit(buf: &mut [u8]) -> &mut [MaybeUninit<u8>] {
    // SAFETY: same layout; the socket calls only write initialised bytes into it.
    unsafe { &mut *(buf as *mut [u8] as *mut [MaybeUninit<u8>]) }
}

impl UdpSocket {
    pub fn bind(addr: impl ToSocketAddrs) -> io::Result<UdpSocket> {
        each_addr(addr, |a| {
            let socket = Socket::new(
                Domain::for_address(a),
                Type::DGRAM.nonblocking().cloexec(),
                Some(Protocol::UDP),
            )?;
            socket.bind(&a.into())?;
            Ok(UdpSocket { source: IoSource::new(socket, true)? })
        })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.source.socket().local_addr()?.as_socket().ok_or_else(|| io::Error::other("not an IP address"))
    }

    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.source.socket().peer_addr()?.as_socket().ok_or_else(|| io::Error::other("not an IP address"))
    }

    /// Sets the default peer for `send`/`recv` and filters incoming datagrams to it.
    pub fn connect(&self, addr: impl ToSocketAddrs) -> io::Result<()> {
        each_addr(addr, |a| self.source.socket().connect(&a.into()))
    }

    pub fn send_to(&self, buf: &[u8], addr: impl ToSocketAddrs) -> io::Result<usize> {
        let addr = addr
            .to_socket_addrs()?
            .next()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no address to send to"))?;
        self.source.blocking(Direction::Write, None, |s| s.send_to(buf, &addr.into()))
    }

    pub fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        let (n, addr) = self.source.blocking(Direction::Read, None, |s| s.recv_from(as_uninit(buf)))?;
        Ok((n, addr.as_socket().ok_or_else(|| io::Error::other("not an IP address"))?))
    }

    pub fn send(&self, buf: &[u8]) -> io::Result<usize> {
        self.source.blocking(Direction::Write, None, |s| s.send(buf))
    }

    pub fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.source.blocking(Direction::Read, None, |s| s.recv(as_uninit(buf)))
    }

    pub fn set_broadcast(&self, on: bool) -> io::Result<()> {
        self.source.socket().set_broadcast(on)
    }
}

super::stream::impl_as_fd!(UdpSocket);
super::stream::impl_timeouts!(UdpSocket);
