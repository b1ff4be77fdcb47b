//! A channel's connection state: [`ConnState`] as the manager fiber publishes it (module
//! `connector`) and calls read it (module `shared`), and [`Phase`], the same state as the
//! balancer reads it of each child (module `balance`). A leaf: the channel, its manager and
//! the balancer all import it.

use tonic::body::Body;

/// The sending side of a live connection (cloned per call).
pub(crate) type Sender = hyper::client::conn::http2::SendRequest<Body>;

/// The connection's state, as calls read it (module `connector`'s "states").
pub(crate) enum ConnState {
    Idle,
    Connecting,
    Ready(Sender),
    Down { error: String },
}

/// A child's connection state, as the balancer reads it (`RemoteChannel::phase`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Phase {
    Connected,
    Connecting,
    /// No connection and no attempt: before the first call, or after a connection ended.
    Idle,
    /// The last attempt failed (its error); a retry is scheduled.
    Down(String),
}
