//! Opening a client connection: name resolution and the TCP connect with spindle's async
//! `TcpStream::connect_async` (the lookup runs on the blocking pool with spindle's DNS cache,
//! the connect on the worker's reactor: `getaddrinfo` never stalls a worker, and the same code
//! serves fibers and async tasks), then TLS (feature `tls`, HTTP/2 chosen by ALPN), then
//! hyper's HTTP/1.1 or HTTP/2 handshake. The connection future runs as a task pinned to the
//! current worker (`spawn_local`), watched by the pool's idle timer (`pool.rs`).

use std::sync::Arc;
use std::time::Duration;

use crate::client::pool::{Conn, IdleFlag, Lease, OpenGuard};
use crate::client::{ClientConfig, Error, ErrorKind, Key};
use crate::exec::LocalExec;
use crate::socket::{self, Io, Transport};

/// Resolves `host:port` and connects to each address in turn, within `timeout` in all.
async fn tcp(key: &Key, timeout: Duration) -> Result<spindle::net::TcpStream, Error> {
    let connect = spindle::net::TcpStream::connect_async((key.host.as_str(), key.port));
    let stream = match spindle::time::timeout(timeout, connect).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::TimedOut => {
            return Err(Error::new(ErrorKind::ConnectTimeout, format!("connecting to {key}: {e}")))
        }
        Ok(Err(e)) => return Err(Error::new(ErrorKind::Connect, format!("connecting to {key}: {e}"))),
        Err(_) => {
            return Err(Error::new(
                ErrorKind::ConnectTimeout,
                format!("connecting to {key}: not connected within {timeout:?}"),
            ))
        }
    };
    let _ = stream.set_nodelay(true);
    Ok(stream)
}

/// A new connection to `key`, its driver spawned; `guard` is the pool's slot for it.
pub(crate) async fn open(key: &Key, config: &ClientConfig, guard: OpenGuard) -> Result<Conn, Error> {
    let stream = tcp(key, config.connect_timeout).await?;
    let (transport, h2) = if key.https {
        tls(stream, key, config).await?
    } else {
        (Transport::Plain(stream), config.http2_prior_knowledge)
    };
    let (io, _handle) = socket::new(transport, false, Vec::new());
    if h2 {
        handshake_h2(io, key, config, guard).await
    } else {
        handshake_h1(io, key, config, guard).await
    }
}

async fn handshake_h1(io: Io, key: &Key, config: &ClientConfig, guard: OpenGuard) -> Result<Conn, Error> {
    let (sender, conn) = hyper::client::conn::http1::Builder::new()
        .max_buf_size(config.max_buf_size)
        .handshake(io)
        .await
        .map_err(|e| Error::with_source(ErrorKind::Protocol, format!("HTTP/1.1 handshake with {key}"), e))?;
    let idle = Arc::new(IdleFlag::lent_once());
    spawn_driver(conn, idle.clone(), config.idle_timeout, guard);
    Ok(Conn::H1 { sender, idle })
}

async fn handshake_h2(io: Io, key: &Key, config: &ClientConfig, guard: OpenGuard) -> Result<Conn, Error> {
    let (sender, conn) = hyper::client::conn::http2::Builder::new(LocalExec)
        .timer(spindle::hyper_rt::Timer)
        .handshake(io)
        .await
        .map_err(|e| Error::with_source(ErrorKind::Protocol, format!("HTTP/2 handshake with {key}"), e))?;
    let idle = Arc::new(IdleFlag::lent_once());
    spawn_driver(conn, idle.clone(), config.idle_timeout, guard);
    Ok(Conn::H2 { sender, lease: Lease(idle) })
}

/// Runs hyper's connection future until it ends or the pool's idle timer expires it.
fn spawn_driver<C>(mut conn: C, idle: Arc<IdleFlag>, timeout: Duration, guard: OpenGuard)
where
    C: std::future::Future<Output = hyper::Result<()>> + Unpin + 'static,
{
    let mut sleep: Option<spindle::time::Sleep> = None;
    drop(spindle::task::spawn_local(std::future::poll_fn(move |cx| {
        let _slot = &guard; // released (and a waiter woken) when the driver ends
        if std::pin::Pin::new(&mut conn).poll(cx).is_ready() {
            return std::task::Poll::Ready(());
        }
        if idle.poll_expired(cx, timeout, &mut sleep) {
            return std::task::Poll::Ready(()); // dropping `conn` closes the socket
        }
        std::task::Poll::Pending
    })));
}

#[cfg(feature = "tls")]
async fn tls(
    stream: spindle::net::TcpStream,
    key: &Key,
    config: &ClientConfig,
) -> Result<(Transport, bool), Error> {
    let Some(tls) = &config.tls else {
        return Err(Error::new(
            ErrorKind::Tls,
            format!("{key}: https needs a TLS configuration (ClientBuilder::tls or ClientBuilder::root_certificates_pem)"),
        ));
    };
    let name = rustls::pki_types::ServerName::try_from(key.host.clone())
        .map_err(|e| Error::new(ErrorKind::Tls, format!("{key}: not a valid TLS server name: {e}")))?;
    let connect = futures_rustls::TlsConnector::from(tls.clone()).connect(name, stream);
    let stream = match spindle::time::timeout(config.connect_timeout, connect).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return Err(Error::new(ErrorKind::Tls, format!("TLS handshake with {key}: {e}"))),
        Err(_) => {
            return Err(Error::new(
                ErrorKind::ConnectTimeout,
                format!("TLS handshake with {key}: not finished within {:?}", config.connect_timeout),
            ))
        }
    };
    let h2 = stream.get_ref().1.alpn_protocol() == Some(b"h2");
    Ok((Transport::TlsClient(Box::new(stream)), h2))
}

#[cfg(not(feature = "tls"))]
async fn tls(
    _stream: spindle::net::TcpStream,
    key: &Key,
    _config: &ClientConfig,
) -> Result<(Transport, bool), Error> {
    Err(Error::new(ErrorKind::Tls, format!("{key}: https needs spindle-http's `tls` feature")))
}
