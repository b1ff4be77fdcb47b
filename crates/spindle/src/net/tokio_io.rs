//! tokio's I/O traits (`tokio::io::AsyncRead`, `AsyncWrite`) for spindle's streams, beside
//! the `futures-io` ones (feature `tokio-io`): crates written against tokio's traits (tokio-
//! util codecs, tokio-rustls, tonic's and hyper-util's tokio adapters) use spindle's sockets
//! from spindle's tasks, with no tokio runtime. The work is the `futures-io` impls' (module
//! `net::source`); a read fills tokio's `ReadBuf` through its initialised part. The streams'
//! own `shutdown(how)` takes the method name: call the trait's as
//! `AsyncWriteExt::shutdown(&mut stream)`.

use std::io;
use std::net::Shutdown;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::split::{OwnedReadHalf, OwnedWriteHalf, SplitStream};
use super::tcp::TcpStream;
use super::unix::UnixStream;

/// A read into the unfilled part of `buf` with `read` (a `futures-io` style poll).
fn fill(
    buf: &mut ReadBuf<'_>,
    read: impl FnOnce(&mut [u8]) -> Poll<io::Result<usize>>,
) -> Poll<io::Result<()>> {
    let n = ready!(read(buf.initialize_unfilled()))?;
    buf.advance(n);
    Poll::Ready(Ok(()))
}

macro_rules! impl_tokio_io {
    ($($ty:ty),+) => {$(
        impl AsyncRead for $ty {
            fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
                fill(buf, |b| self.source.poll_read_stream(cx, b))
            }
        }

        impl AsyncWrite for $ty {
            fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
                self.source.poll_write_stream(cx, buf)
            }
            fn poll_write_vectored(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                bufs: &[io::IoSlice<'_>],
            ) -> Poll<io::Result<usize>> {
                self.source.poll_write_vectored_stream(cx, bufs)
            }
            fn is_write_vectored(&self) -> bool {
                true
            }
            fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                Poll::Ready(Ok(()))
            }
            fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                Poll::Ready(self.shutdown(Shutdown::Write))
            }
        }
    )+};
}

impl_tokio_io!(TcpStream, UnixStream);

impl<S: SplitStream> AsyncRead for OwnedReadHalf<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        fill(buf, |b| futures_io::AsyncRead::poll_read(Pin::new(this), cx, b))
    }
}

impl<S: SplitStream> AsyncWrite for OwnedWriteHalf<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        futures_io::AsyncWrite::poll_write(self, cx, buf)
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        futures_io::AsyncWrite::poll_flush(self, cx)
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        futures_io::AsyncWrite::poll_close(self, cx)
    }
}
