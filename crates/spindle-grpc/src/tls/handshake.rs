//! The TLS handshakes (feature `tls`): the server's ([`accept`], bounded by its handshake
//! timeout and the server's shutdown) and the client's ([`connect`], within the attempt's
//! connect timeout, run by the manager fiber); each refuses a peer that agreed on another
//! protocol than HTTP/2 (module `tls`, "HTTP/2 by ALPN", "bounded handshakes").

use std::future::{poll_fn, Future};
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use rustls::pki_types::ServerName;
use spindle::net::{CoalescedStream, TcpStream};

use super::config::{ClientTlsConfig, ServerTlsConfig};
use super::io::TlsIo;
use spindle::graceful::{Drain, Watch};

/// A server-side TLS stream over a spindle socket that gathers the records written during a
/// burst of the worker's work and sends them together (`spindle::net::CoalescedStream`).
pub(crate) type ServerStream = futures_rustls::server::TlsStream<CoalescedStream>;
/// A client-side TLS stream over a gathering spindle socket, as [`ServerStream`].
pub(crate) type ClientStream = futures_rustls::client::TlsStream<CoalescedStream>;

/// The server side of a connection's handshake, bounded by the handshake timeout and the
/// server's shutdown (`shutdown`, "bounded handshakes"); `None` when it failed (logged).
pub(crate) async fn accept(
    config: &ServerTlsConfig,
    mut shutdown: Watch<std::sync::Arc<Drain>>,
    io: TcpStream,
) -> Option<ServerStream> {
    let peer = io.peer_addr().map_or_else(|_| "a client".to_owned(), |p| p.to_string());
    // Boxed: rustls's connection state would otherwise be part of every connection task's.
    let io = CoalescedStream::from(io);
    let mut accept = Box::pin(futures_rustls::TlsAcceptor::from(config.config.clone()).accept(io));
    let mut deadline = spindle::time::sleep_future(config.handshake_timeout.min(spindle::time::NEVER));
    let result = poll_fn(|cx| {
        if let Poll::Ready(result) = accept.as_mut().poll(cx) {
            return Poll::Ready(
                result.and_then(|stream| check_alpn(stream.get_ref().1.alpn_protocol()).map(|()| stream)),
            );
        }
        if shutdown.poll_triggered(cx).is_ready() {
            return Poll::Ready(Err(io::Error::other("server shutting down")));
        }
        if Pin::new(&mut deadline).poll(cx).is_ready() {
            let why = format!("not finished within {:?}", config.handshake_timeout);
            return Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, why)));
        }
        Poll::Pending
    })
    .await;
    match result {
        Ok(stream) => Some(stream),
        Err(e) => {
            log::debug!("spindle-grpc: TLS handshake with {peer} failed: {e}");
            None
        }
    }
}

/// Refuses a connection whose ALPN agreed on something else than HTTP/2 ("HTTP/2 by ALPN").
fn check_alpn(protocol: Option<&[u8]>) -> io::Result<()> {
    match protocol {
        None | Some(b"h2") => Ok(()),
        Some(other) => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("the peer agreed on ALPN protocol {:?}, not h2", String::from_utf8_lossy(other)),
        )),
    }
}

/// The client's handshake over a connected socket with `rustls` (`config`'s,
/// [`ClientTlsConfig::rustls`]), within `left` (run by the manager fiber).
pub(crate) fn connect(
    config: &ClientTlsConfig,
    rustls: Arc<rustls::ClientConfig>,
    host: &str,
    stream: TcpStream,
    left: Duration,
) -> io::Result<TlsIo<ClientStream>> {
    let name = config.domain.as_deref().unwrap_or(host);
    let name = ServerName::try_from(name.to_owned())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("TLS server name {name:?}: {e}")))?;
    let handshake = futures_rustls::TlsConnector::from(rustls).connect(name, CoalescedStream::from(stream));
    let stream = match spindle::task::block_on(spindle::time::timeout(left, handshake)) {
        Ok(Ok(stream)) => stream,
        Ok(Err(e)) => return Err(io::Error::new(e.kind(), format!("TLS handshake: {e}"))),
        Err(_) => return Err(io::Error::new(io::ErrorKind::TimedOut, "TLS handshake timed out")),
    };
    check_alpn(stream.get_ref().1.alpn_protocol())?;
    Ok(TlsIo(stream))
}
