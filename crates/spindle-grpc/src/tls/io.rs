//! [`TlsIo`]: a TLS stream (futures-rustls over spindle's futures-io sockets) as hyper's I/O,
//! hyper's `Read` and `Write` over futures-io's `AsyncRead` and `AsyncWrite`.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

/// A TLS stream as hyper's I/O (hyper's traits over futures-io's).
pub(crate) struct TlsIo<S>(pub(crate) S);

impl<S: futures_io::AsyncRead + Unpin> hyper::rt::Read for TlsIo<S> {
    /// rustls copies plaintext out of its own buffer; `buf` is uninitialised memory, which
    /// this crate (no `unsafe`) cannot hand out as `&mut [u8]`: through a stack buffer.
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        let mut chunk = [0u8; 8192];
        let want = buf.remaining().min(chunk.len());
        let n = std::task::ready!(Pin::new(&mut self.0).poll_read(cx, &mut chunk[..want]))?;
        buf.put_slice(&chunk[..n]);
        Poll::Ready(Ok(()))
    }
}

impl<S: futures_io::AsyncWrite + Unpin> hyper::rt::Write for TlsIo<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_close(cx)
    }
}
