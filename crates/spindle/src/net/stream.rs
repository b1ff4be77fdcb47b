//! Accessors every socket type (TCP, Unix, UDP) has the same way: `AsFd`/`AsRawFd`, read and
//! write timeouts, `take_error`. Each type has a `source: IoSource` field; these macros write
//! the accessors once. The data path (`read`, `write` and their async forms) is written out in
//! each stream type's file (`tcp.rs`, `unix.rs`), delegating to `IoSource` (`source.rs`).

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

pub(crate) use impl_as_fd;
pub(crate) use impl_timeouts;
