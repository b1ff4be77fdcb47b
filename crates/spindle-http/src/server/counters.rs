//! [`Counters`]: what a server connection's service, its handlers, its metered bodies and its
//! driver count together, attached to the connection's socket (module `transport::socket`,
//! "one allocation per connection"): the service holds them strongly ([`CountersRef`]), a
//! running handler and a metered body weakly ([`WeakCounters`]), so that what outlives its
//! connection counts nowhere.
//!
//! Invariant: **atomics, no lock.** Under HTTP/2 the streams' futures and the handlers'
//! fibers may end on several workers at once: every count that they change is changed by a
//! read-modify-write; the ones only the connection's task changes (`refused`, `requested`)
//! take a load and a store.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8};

use crate::transport::socket::{Attached, WeakAttached};

/// The connection's counters, held strongly (by its service).
pub(crate) type CountersRef = Attached<Counters>;

/// The connection's counters, held weakly (by a running handler, a metered body).
pub(crate) type WeakCounters = WeakAttached<Counters>;

/// The counters a connection's service and its driver share (they live in the socket's
/// shared state, module `transport::socket`: one allocation per connection).
#[derive(Debug, Default)]
pub(crate) struct Counters {
    /// Handlers running (request received, handler not yet ended): a connection with a
    /// running handler is not idle. Under HTTP/2 the streams' futures and the handlers'
    /// fibers may end on several workers at once: read-modify-writes.
    pub(crate) busy: AtomicU32,
    /// HTTP/2: metered bodies waiting for the peer's window (module `meter`).
    pub(crate) stalled: AtomicU32,
    /// HTTP/2: response bytes held by the connection's metered bodies (module `meter`).
    pub(crate) unsent: AtomicU64,
    /// HTTP/2: streams refused in a row because `busy` was at the stream limit (it need not
    /// count past the service's `REFUSALS_BEFORE_GOAWAY`: a byte).
    pub(crate) refused: AtomicU8,
    /// Whether a request was received (atomics the size of a byte: the counters share an
    /// allocation with the socket, whose size is rounded to the allocator's chunk).
    pub(crate) requested: AtomicBool,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One allocation per connection for the socket and the counters: 200 bytes + 16 of
    /// counts = 216, which glibc serves from a 224-byte chunk. With the `tls` feature the
    /// transport is an enum of the plain socket and the boxed TLS streams: 8 bytes more.
    #[test]
    fn the_shared_state_stays_small() {
        let bound = if cfg!(feature = "tls") { 208 } else { 200 };
        let size = crate::transport::socket::shared_size::<Counters>();
        assert!(size <= bound, "{size}");
    }
}
