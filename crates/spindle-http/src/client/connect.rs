//! Opening a client connection: name resolution and the TCP connect with spindle's async
//! `TcpStream::connect_async` (the lookup runs on the blocking pool with spindle's DNS cache,
//! the connect on the worker's reactor: `getaddrinfo` never stalls a worker, and the same code
//! serves fibers and async tasks), then TLS (feature `tls`, HTTP/2 chosen by ALPN; the
//! client's configuration, else the system's roots of module `roots`), then
//! hyper's HTTP/1.1 or HTTP/2 handshake. The connection future runs as a task pinned to the
//! current worker (`spawn_local`), watched by the pool's idle timer (`pool.rs`).

use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use spindle::hyper_exec::LocalExecutor;

use crate::client::config::ClientConfig;
use crate::client::error::{ClientError, ClientErrorKind};
use crate::client::key::Key;
use crate::client::pool::{Conn, IdleFlag, Lease, OpenGuard};
use crate::transport::socket::{self, Io};
use crate::transport::stream::Transport;

/// Resolves `host:port` and connects to each address in turn, within `timeout` in all.
async fn tcp(key: &Key, timeout: Duration) -> Result<spindle::net::TcpStream, ClientError> {
    let connect = spindle::net::TcpStream::connect_async((key.host.as_str(), key.port));
    let stream = match spindle::time::timeout(timeout, connect).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::TimedOut => {
            return Err(ClientError::new(
                ClientErrorKind::ConnectTimeout,
                format!("connecting to {key}: {e}"),
            ))
        }
        Ok(Err(e)) => {
            return Err(ClientError::new(ClientErrorKind::Connect, format!("connecting to {key}: {e}")))
        }
        Err(_) => {
            return Err(ClientError::new(
                ClientErrorKind::ConnectTimeout,
                format!("connecting to {key}: not connected within {timeout:?}"),
            ))
        }
    };
    let _ = stream.set_nodelay(true);
    Ok(stream)
}

/// A new connection to `key`, its driver spawned; `guard` is the pool's slot for it.
pub(crate) async fn open(key: &Key, config: &ClientConfig, guard: OpenGuard) -> Result<Conn, ClientError> {
    let (transport, h2) = if key.https {
        // The TLS configuration first: no socket is held open while the system's roots load.
        let tls_config = tls_config(key, config).await?;
        tls(tcp(key, config.connect_timeout).await?, key, config, tls_config).await?
    } else {
        (Transport::Plain(tcp(key, config.connect_timeout).await?), config.http2_prior_knowledge)
    };
    let (io, _handle) = socket::new::<()>(transport, false, Vec::new());
    if h2 {
        handshake_h2(io, key, config, guard).await
    } else {
        handshake_h1(io, key, config, guard).await
    }
}

async fn handshake_h1(
    io: Io,
    key: &Key,
    config: &ClientConfig,
    guard: OpenGuard,
) -> Result<Conn, ClientError> {
    let reads = Arc::new(AtomicU32::new(0));
    let io = Capped { io, reads: reads.clone() };
    let (sender, conn) = hyper::client::conn::http1::Builder::new()
        .max_buf_size(config.max_buf_size)
        .handshake(io)
        .await
        .map_err(|e| {
            ClientError::with_source(ClientErrorKind::Protocol, format!("HTTP/1.1 handshake with {key}"), e)
        })?;
    let idle = Arc::new(IdleFlag::lent_once());
    spawn_driver(conn, idle.clone(), config.idle_timeout, guard, Some(reads));
    Ok(Conn::H1 { sender, idle })
}

/// Reads an HTTP/1.1 connection may complete within one poll of its driver (a read hands
/// hyper up to 64 KiB, `max_buf_size`). hyper bounds its own loop (16 rounds a poll, then it
/// yields) but not its head parser, which reads on for as long as the server keeps sending
/// 1xx responses: without a cap, a server that streams `100 Continue` forever keeps the
/// driver in one poll, its worker's timers unfired (the request timeout does not end the
/// request) and the cancelled request unnoticed. A response body is read a chunk a poll
/// (hyper waits for the reader between chunks), so the cap does not slow it.
const READS_PER_POLL: u32 = 2;

/// An HTTP/1.1 connection's socket under its driver's read cap: once [`READS_PER_POLL`] reads
/// completed in one poll of the driver, a read wakes the driver and returns `Pending` (the
/// driver resets the count when it is polled again).
struct Capped {
    io: Io,
    reads: Arc<AtomicU32>,
}

impl hyper::rt::Read for Capped {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        if this.reads.load(Relaxed) >= READS_PER_POLL {
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        let read = Pin::new(&mut this.io).poll_read(cx, buf);
        if read.is_ready() {
            this.reads.fetch_add(1, Relaxed);
        }
        read
    }
}

impl hyper::rt::Write for Capped {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

async fn handshake_h2(
    io: Io,
    key: &Key,
    config: &ClientConfig,
    guard: OpenGuard,
) -> Result<Conn, ClientError> {
    let (sender, conn) = hyper::client::conn::http2::Builder::new(LocalExecutor)
        .timer(spindle::hyper_rt::Timer)
        .handshake(io)
        .await
        .map_err(|e| {
            ClientError::with_source(ClientErrorKind::Protocol, format!("HTTP/2 handshake with {key}"), e)
        })?;
    let idle = Arc::new(IdleFlag::lent_once());
    // No read cap: hyper runs the HTTP/2 connection's I/O in a task of its own.
    spawn_driver(conn, idle.clone(), config.idle_timeout, guard, None);
    Ok(Conn::H2 { sender, lease: Lease(idle) })
}

/// Runs hyper's connection future until it ends or the pool's idle timer expires it; each
/// poll starts a new count of `reads` (HTTP/1.1's read cap, see [`Capped`]).
fn spawn_driver<C>(
    mut conn: C,
    idle: Arc<IdleFlag>,
    timeout: Duration,
    guard: OpenGuard,
    reads: Option<Arc<AtomicU32>>,
) where
    C: std::future::Future<Output = hyper::Result<()>> + Unpin + 'static,
{
    let mut sleep: Option<spindle::time::Sleep> = None;
    drop(spindle::task::spawn_local(std::future::poll_fn(move |cx| {
        let _slot = &guard; // released (and a waiter woken) when the driver ends
        if let Some(reads) = &reads {
            reads.store(0, Relaxed);
        }
        if std::pin::Pin::new(&mut conn).poll(cx).is_ready() {
            return std::task::Poll::Ready(());
        }
        if idle.poll_expired(cx, timeout, &mut sleep) {
            return std::task::Poll::Ready(()); // dropping `conn` closes the socket
        }
        std::task::Poll::Pending
    })));
}

/// The client's own TLS configuration, else the system's roots (loaded once per process on
/// the blocking pool, module `roots`).
#[cfg(feature = "tls")]
async fn tls_config(key: &Key, config: &ClientConfig) -> Result<Arc<rustls::ClientConfig>, ClientError> {
    match &config.tls {
        Some(tls) => Ok(tls.clone()),
        None => crate::client::roots::system(key, config.connect_timeout).await,
    }
}

#[cfg(feature = "tls")]
async fn tls(
    stream: spindle::net::TcpStream,
    key: &Key,
    config: &ClientConfig,
    tls: Arc<rustls::ClientConfig>,
) -> Result<(Transport, bool), ClientError> {
    let name = rustls::pki_types::ServerName::try_from(key.host.clone()).map_err(|e| {
        ClientError::new(ClientErrorKind::Tls, format!("{key}: not a valid TLS server name: {e}"))
    })?;
    let connect = futures_rustls::TlsConnector::from(tls).connect(name, stream);
    let stream = match spindle::time::timeout(config.connect_timeout, connect).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            return Err(ClientError::new(ClientErrorKind::Tls, format!("TLS handshake with {key}: {e}")))
        }
        Err(_) => {
            return Err(ClientError::new(
                ClientErrorKind::ConnectTimeout,
                format!("TLS handshake with {key}: not finished within {:?}", config.connect_timeout),
            ))
        }
    };
    let h2 = stream.get_ref().1.alpn_protocol() == Some(b"h2");
    Ok((Transport::TlsClient(Box::new(stream)), h2))
}

/// Without the `tls` feature there is no TLS configuration: an `https://` URL is refused
/// before any socket is opened.
#[cfg(not(feature = "tls"))]
async fn tls_config(key: &Key, _config: &ClientConfig) -> Result<std::convert::Infallible, ClientError> {
    Err(ClientError::new(ClientErrorKind::Tls, format!("{key}: https needs spindle-http's `tls` feature")))
}

#[cfg(not(feature = "tls"))]
async fn tls(
    _stream: spindle::net::TcpStream,
    _key: &Key,
    _config: &ClientConfig,
    tls: std::convert::Infallible,
) -> Result<(Transport, bool), ClientError> {
    match tls {}
}
