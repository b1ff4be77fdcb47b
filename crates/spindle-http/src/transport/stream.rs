//! [`Transport`]: the byte stream under a connection, on either side: a plain spindle socket,
//! or TLS over one (feature `tls`: rustls through futures-rustls, the server's or the
//! client's side of it), read and written through hyper's traits or futures-io's.

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll};

use spindle::net::TcpStream;

/// A server-side TLS stream over a spindle socket.
#[cfg(feature = "tls")]
pub(crate) type ServerStream = futures_rustls::server::TlsStream<TcpStream>;

/// A client-side TLS stream over a spindle socket.
#[cfg(feature = "tls")]
pub(crate) type ClientStream = futures_rustls::client::TlsStream<TcpStream>;

/// The byte stream under hyper: a plain socket, or TLS over one.
pub(crate) enum Transport {
    Plain(TcpStream),
    #[cfg(feature = "tls")]
    Tls(Box<ServerStream>),
    #[cfg(feature = "tls")]
    TlsClient(Box<ClientStream>),
}

impl Transport {
    pub(crate) fn poll_read(
        &mut self,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        match self {
            Transport::Plain(s) => hyper::rt::Read::poll_read(Pin::new(s), cx, buf),
            #[cfg(feature = "tls")]
            Transport::Tls(s) => tls_read(&mut **s, cx, buf),
            #[cfg(feature = "tls")]
            Transport::TlsClient(s) => tls_read(&mut **s, cx, buf),
        }
    }

    pub(crate) fn poll_write(&mut self, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        match self {
            Transport::Plain(s) => hyper::rt::Write::poll_write(Pin::new(s), cx, data),
            #[cfg(feature = "tls")]
            Transport::Tls(s) => futures_io::AsyncWrite::poll_write(Pin::new(&mut **s), cx, data),
            #[cfg(feature = "tls")]
            Transport::TlsClient(s) => futures_io::AsyncWrite::poll_write(Pin::new(&mut **s), cx, data),
        }
    }

    pub(crate) fn poll_write_vectored(
        &mut self,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self {
            Transport::Plain(s) => hyper::rt::Write::poll_write_vectored(Pin::new(s), cx, bufs),
            #[cfg(feature = "tls")]
            Transport::Tls(s) => futures_io::AsyncWrite::poll_write_vectored(Pin::new(&mut **s), cx, bufs),
            #[cfg(feature = "tls")]
            Transport::TlsClient(s) => {
                futures_io::AsyncWrite::poll_write_vectored(Pin::new(&mut **s), cx, bufs)
            }
        }
    }

    /// Pushes out what the transport itself buffered (TLS records); a no-op for a socket.
    pub(crate) fn poll_flush(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self {
            Transport::Plain(_) => {
                let _ = cx;
                Poll::Ready(Ok(()))
            }
            #[cfg(feature = "tls")]
            Transport::Tls(s) => futures_io::AsyncWrite::poll_flush(Pin::new(&mut **s), cx),
            #[cfg(feature = "tls")]
            Transport::TlsClient(s) => futures_io::AsyncWrite::poll_flush(Pin::new(&mut **s), cx),
        }
    }

    /// Ends the transport's own protocol: TLS sends `close_notify` and half-closes; a plain
    /// socket is left open (closing it ends the connection anyway, and after a parse error
    /// the driver still writes and lingers, module `server::conn`).
    pub(crate) fn poll_shutdown(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self {
            Transport::Plain(_) => {
                let _ = cx;
                Poll::Ready(Ok(()))
            }
            #[cfg(feature = "tls")]
            Transport::Tls(s) => futures_io::AsyncWrite::poll_close(Pin::new(&mut **s), cx),
            #[cfg(feature = "tls")]
            Transport::TlsClient(s) => futures_io::AsyncWrite::poll_close(Pin::new(&mut **s), cx),
        }
    }

    /// The TCP socket underneath.
    pub(crate) fn into_tcp(self) -> TcpStream {
        match self {
            Transport::Plain(s) => s,
            #[cfg(feature = "tls")]
            Transport::Tls(s) => s.into_inner().0,
            #[cfg(feature = "tls")]
            Transport::TlsClient(s) => s.into_inner().0,
        }
    }
}

/// A TLS read into hyper's buffer. rustls copies plaintext out of its own buffer; `buf` is
/// uninitialised memory, which this crate (no `unsafe`) cannot hand out as `&mut [u8]`: go
/// through a small stack buffer.
#[cfg(feature = "tls")]
fn tls_read<S: futures_io::AsyncRead + Unpin>(
    s: &mut S,
    cx: &mut Context<'_>,
    mut buf: hyper::rt::ReadBufCursor<'_>,
) -> Poll<io::Result<()>> {
    let mut chunk = [0u8; 4096];
    let want = buf.remaining().min(chunk.len());
    let n = std::task::ready!(futures_io::AsyncRead::poll_read(Pin::new(s), cx, &mut chunk[..want]))?;
    buf.put_slice(&chunk[..n]);
    Poll::Ready(Ok(()))
}
