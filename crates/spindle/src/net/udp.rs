//! UDP sockets: blocking-style calls for fibers, and `poll_*` methods with future-returning
//! `*_async` wrappers for tasks.

use std::future::{poll_fn, Future};
use std::io;
use std::net::{SocketAddr, ToSocketAddrs as StdToSocketAddrs};
use std::task::{Context, Poll};

use socket2::{Domain, Protocol, Socket, Type};

use super::addr::{each_addr, ToSocketAddrs};
use super::dns;
use super::source::IoSource;
use super::uninit::as_uninit;
use crate::reactor::io::Direction;

/// A UDP socket. `recv_from` and `send_to` park the calling fiber while not ready.
#[derive(Debug)]
pub struct UdpSocket {
    source: IoSource,
}

impl UdpSocket {
    pub fn bind(addr: impl StdToSocketAddrs) -> io::Result<UdpSocket> {
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

    /// Sets the default peer for `send`/`recv` and filters incoming datagrams to it. A host
    /// name is looked up on the blocking pool ([`dns`]).
    pub fn connect(&self, addr: impl ToSocketAddrs) -> io::Result<()> {
        dns::each_resolved(addr, |a| self.source.socket().connect(&a.into()))
    }

    /// Sends one datagram to `addr` (the first address a host name resolves to, looked up on
    /// the blocking pool); waits while the send buffer is full.
    pub fn send_to(&self, buf: &[u8], addr: impl ToSocketAddrs) -> io::Result<usize> {
        let addr = match addr.as_single() {
            Some(a) => a,
            None => *dns::lookup_host(addr)?.first().ok_or_else(dns::no_addresses)?,
        };
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

    /// Polls to send one datagram to `addr` (registering the task's waker while the send
    /// buffer is full).
    pub fn poll_send_to(
        &self,
        cx: &mut Context<'_>,
        buf: &[u8],
        addr: SocketAddr,
    ) -> Poll<io::Result<usize>> {
        self.source.poll_io(cx, Direction::Write, |s| s.send_to(buf, &addr.into()))
    }

    /// Polls to receive one datagram and its sender's address.
    pub fn poll_recv_from(
        &self,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<(usize, SocketAddr)>> {
        self.source.poll_io(cx, Direction::Read, |s| s.recv_from(as_uninit(buf))).map(|r| {
            let (n, addr) = r?;
            Ok((n, addr.as_socket().ok_or_else(|| io::Error::other("not an IP address"))?))
        })
    }

    /// Polls to send one datagram to the connected peer.
    pub fn poll_send(&self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.source.poll_io(cx, Direction::Write, |s| s.send(buf))
    }

    /// Polls to receive one datagram from the connected peer.
    pub fn poll_recv(&self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        self.source.poll_io(cx, Direction::Read, |s| s.recv(as_uninit(buf)))
    }

    /// The future-side [`send_to`](Self::send_to). It takes an IP address: resolve a name
    /// first with [`lookup_host_async`](super::lookup_host_async).
    pub fn send_to_async<'a>(
        &'a self,
        buf: &'a [u8],
        addr: SocketAddr,
    ) -> impl Future<Output = io::Result<usize>> + Send + 'a {
        poll_fn(move |cx| self.poll_send_to(cx, buf, addr))
    }

    /// The future-side [`recv_from`](Self::recv_from).
    ///
    /// ```
    /// use spindle::net::UdpSocket;
    ///
    /// let rt = spindle::Runtime::new().unwrap();
    /// let task = rt.spawn_async(async {
    ///     let a = UdpSocket::bind("127.0.0.1:0").unwrap();
    ///     let b = UdpSocket::bind("127.0.0.1:0").unwrap();
    ///     a.send_to_async(b"hi", b.local_addr().unwrap()).await.unwrap();
    ///     let mut buf = [0; 8];
    ///     let (n, from) = b.recv_from_async(&mut buf).await.unwrap();
    ///     assert_eq!((&buf[..n], from), (&b"hi"[..], a.local_addr().unwrap()));
    /// });
    /// task.join().unwrap();
    /// ```
    pub fn recv_from_async<'a>(
        &'a self,
        buf: &'a mut [u8],
    ) -> impl Future<Output = io::Result<(usize, SocketAddr)>> + Send + 'a {
        poll_fn(move |cx| self.poll_recv_from(cx, buf))
    }

    /// The future-side [`send`](Self::send).
    pub fn send_async<'a>(&'a self, buf: &'a [u8]) -> impl Future<Output = io::Result<usize>> + Send + 'a {
        poll_fn(move |cx| self.poll_send(cx, buf))
    }

    /// The future-side [`recv`](Self::recv).
    pub fn recv_async<'a>(
        &'a self,
        buf: &'a mut [u8],
    ) -> impl Future<Output = io::Result<usize>> + Send + 'a {
        poll_fn(move |cx| self.poll_recv(cx, buf))
    }

    pub fn set_broadcast(&self, on: bool) -> io::Result<()> {
        self.source.socket().set_broadcast(on)
    }
}

super::stream::impl_as_fd!(UdpSocket);
super::stream::impl_timeouts!(UdpSocket);
