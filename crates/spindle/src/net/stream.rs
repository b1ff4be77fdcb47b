//! What every byte-stream socket (TCP, Unix) implements the same way: `std::io::Read` and
//! `Write` (blocking-style, parking the fiber), the `futures-io` traits, and hyper 1.x's
//! `hyper::rt::Read`/`Write` behind the `hyper` feature. Each type has a `source: IoSource`
//! field and a `shutdown(std::net::Shutdown)` method; the macros below write the impls once.

/// Implements `AsFd` and `AsRawFd` for a type with a `source: IoSource` field.
macro_rules! impl_as_fd {
    ($($ty:ty),+) => {$(
        impl ::std::os::fd::AsFd for $ty {
            fn as_fd(&self) -> ::std::os::fd::BorrowedFd<'_> {
                ::std::os::fd::AsFd::as_fd(self.source.socket())
            }
        }

        impl ::std::os::fd::AsRawFd for $ty {
            fn as_raw_fd(&self) -> ::std::os::fd::RawFd {
                ::std::os::fd::AsRawFd::as_raw_fd(self.source.socket())
            }
        }
    )+};
}

/// Read and write timeouts and `take_error` for a socket type with a `source: IoSource`.
macro_rules! impl_timeouts {
    ($($ty:ty),+) => {$(
        impl $ty {
            /// Sets how long a read may wait before failing with `TimedOut` (`None`: forever;
            /// zero is rejected with `InvalidInput`, as in std).
            pub fn set_read_timeout(&self, timeout: Option<::std::time::Duration>) -> ::std::io::Result<()> {
                self.source.set_timeout($crate::reactor::io::Direction::Read, timeout)
            }

            /// Sets how long a write may wait before failing with `TimedOut`.
            pub fn set_write_timeout(&self, timeout: Option<::std::time::Duration>) -> ::std::io::Result<()> {
                self.source.set_timeout($crate::reactor::io::Direction::Write, timeout)
            }

            /// The read timeout (`None`: reads wait forever).
            pub fn read_timeout(&self) -> ::std::io::Result<Option<::std::time::Duration>> {
                Ok(self.source.timeout($crate::reactor::io::Direction::Read))
            }

            /// The write timeout (`None`: writes wait forever).
            pub fn write_timeout(&self) -> ::std::io::Result<Option<::std::time::Duration>> {
                Ok(self.source.timeout($crate::reactor::io::Direction::Write))
            }

            /// Takes the pending socket error (`SO_ERROR`), if any.
            pub fn take_error(&self) -> ::std::io::Result<Option<::std::io::Error>> {
                self.source.socket().take_error()
            }
        }
    )+};
}

/// Implements the I/O traits of a byte-stream socket type (see the module doc).
macro_rules! impl_stream_io {
    ($ty:ty) => {
        impl ::std::io::Read for $ty {
            fn read(&mut self, buf: &mut [u8]) -> ::std::io::Result<usize> {
                self.source.read_stream(buf)
            }
            fn read_vectored(&mut self, bufs: &mut [::std::io::IoSliceMut<'_>]) -> ::std::io::Result<usize> {
                self.source.blocking($crate::reactor::io::Direction::Read, None, |mut s| {
                    ::std::io::Read::read_vectored(&mut s, bufs)
                })
            }
        }

        impl ::std::io::Read for &$ty {
            fn read(&mut self, buf: &mut [u8]) -> ::std::io::Result<usize> {
                self.source.read_stream(buf)
            }
        }

        impl ::std::io::Write for $ty {
            fn write(&mut self, buf: &[u8]) -> ::std::io::Result<usize> {
                self.source.write_stream(buf)
            }
            fn write_vectored(&mut self, bufs: &[::std::io::IoSlice<'_>]) -> ::std::io::Result<usize> {
                self.source.blocking($crate::reactor::io::Direction::Write, None, |mut s| {
                    ::std::io::Write::write_vectored(&mut s, bufs)
                })
            }
            fn flush(&mut self) -> ::std::io::Result<()> {
                Ok(())
            }
        }

        impl ::std::io::Write for &$ty {
            fn write(&mut self, buf: &[u8]) -> ::std::io::Result<usize> {
                self.source.write_stream(buf)
            }
            fn flush(&mut self) -> ::std::io::Result<()> {
                Ok(())
            }
        }

        impl ::futures_io::AsyncRead for $ty {
            fn poll_read(
                self: ::std::pin::Pin<&mut Self>,
                cx: &mut ::std::task::Context<'_>,
                buf: &mut [u8],
            ) -> ::std::task::Poll<::std::io::Result<usize>> {
                self.source.poll_read_stream(cx, buf)
            }
        }

        impl ::futures_io::AsyncWrite for $ty {
            fn poll_write(
                self: ::std::pin::Pin<&mut Self>,
                cx: &mut ::std::task::Context<'_>,
                buf: &[u8],
            ) -> ::std::task::Poll<::std::io::Result<usize>> {
                self.source.poll_io(cx, $crate::reactor::io::Direction::Write, |mut s| {
                    ::std::io::Write::write(&mut s, buf)
                })
            }
            fn poll_flush(
                self: ::std::pin::Pin<&mut Self>,
                _cx: &mut ::std::task::Context<'_>,
            ) -> ::std::task::Poll<::std::io::Result<()>> {
                ::std::task::Poll::Ready(Ok(()))
            }
            fn poll_close(
                self: ::std::pin::Pin<&mut Self>,
                _cx: &mut ::std::task::Context<'_>,
            ) -> ::std::task::Poll<::std::io::Result<()>> {
                ::std::task::Poll::Ready(self.shutdown(::std::net::Shutdown::Write))
            }
        }

        #[cfg(feature = "hyper")]
        impl ::hyper::rt::Read for $ty {
            fn poll_read(
                self: ::std::pin::Pin<&mut Self>,
                cx: &mut ::std::task::Context<'_>,
                mut buf: ::hyper::rt::ReadBufCursor<'_>,
            ) -> ::std::task::Poll<::std::io::Result<()>> {
                let len = buf.remaining();
                let drained = |&n: &usize| n > 0 && n < len;
                let n = match self.source.poll_io_until_drained(
                    cx,
                    $crate::reactor::io::Direction::Read,
                    // SAFETY: recv writes only initialised bytes into the unfilled part, and we
                    // advance the cursor by exactly the number of bytes it reports.
                    |s| s.recv(unsafe { buf.as_mut() }),
                    drained,
                ) {
                    ::std::task::Poll::Ready(Ok(n)) => n,
                    ::std::task::Poll::Ready(Err(e)) => return ::std::task::Poll::Ready(Err(e)),
                    ::std::task::Poll::Pending => return ::std::task::Poll::Pending,
                };
                // SAFETY: `n` bytes were initialised by recv just above.
                unsafe { buf.advance(n) };
                ::std::task::Poll::Ready(Ok(()))
            }
        }

        #[cfg(feature = "hyper")]
        impl ::hyper::rt::Write for $ty {
            fn poll_write(
                self: ::std::pin::Pin<&mut Self>,
                cx: &mut ::std::task::Context<'_>,
                buf: &[u8],
            ) -> ::std::task::Poll<::std::io::Result<usize>> {
                self.source.poll_io(cx, $crate::reactor::io::Direction::Write, |mut s| {
                    ::std::io::Write::write(&mut s, buf)
                })
            }
            fn poll_write_vectored(
                self: ::std::pin::Pin<&mut Self>,
                cx: &mut ::std::task::Context<'_>,
                bufs: &[::std::io::IoSlice<'_>],
            ) -> ::std::task::Poll<::std::io::Result<usize>> {
                self.source.poll_io(cx, $crate::reactor::io::Direction::Write, |mut s| {
                    ::std::io::Write::write_vectored(&mut s, bufs)
                })
            }
            fn is_write_vectored(&self) -> bool {
                true
            }
            fn poll_flush(
                self: ::std::pin::Pin<&mut Self>,
                _cx: &mut ::std::task::Context<'_>,
            ) -> ::std::task::Poll<::std::io::Result<()>> {
                ::std::task::Poll::Ready(Ok(()))
            }
            fn poll_shutdown(
                self: ::std::pin::Pin<&mut Self>,
                _cx: &mut ::std::task::Context<'_>,
            ) -> ::std::task::Poll<::std::io::Result<()>> {
                ::std::task::Poll::Ready(self.shutdown(::std::net::Shutdown::Write))
            }
        }

        $crate::net::stream::impl_as_fd!($ty);
    };
}

pub(crate) use impl_as_fd;
pub(crate) use impl_stream_io;
pub(crate) use impl_timeouts;
