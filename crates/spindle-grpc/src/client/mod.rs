//! The network client: [`Endpoint`] and [`RemoteChannel`], the transport of tonic-generated
//! clients over HTTP/2 on spindle sockets (hyper's HTTP/2 client driven by spindle).
//!
//! One connection per channel (its clones share it), calls multiplexed on it. A *manager*
//! fiber on the channel's runtime connects, runs the connection while it lives, and
//! reconnects with exponential backoff when it is lost (module `connector`). Calls read the
//! connection's state (module `shared`):
//!
//! - **connected**: the call is sent on the connection (hyper's `SendRequest`, usable from
//!   any thread: the connection's tasks run on spindle, the caller only exchanges messages
//!   with them);
//! - **connecting**: the call waits for the attempt's outcome (bounded by the connect
//!   timeout and the call's deadline);
//! - **down** (the last attempt failed, a retry is scheduled): the call fails at once with
//!   `UNAVAILABLE`, naming the error.
//!
//! The files: `endpoint` (the URI and settings), `remote_channel` (the channel and its
//! `connect`), `shared` (the state its clones, calls and manager share), `state` (the
//! connection's states), `connector` and `first_frame` (the manager fiber and its handshake
//! check), `call` (one call's life), `balance` ([`BalancedChannel`] over several servers),
//! `target` (gRPC target names), `outlier` (servers left out while their calls fail),
//! `health` (servers left out while they report they are not serving), `resolution` and `resolve` (a channel over a name kept in
//! step with its addresses), `retry` and `retry_call` (retry policies and the calls that
//! follow them).

mod balance;
mod call;
mod child;
mod connector;
mod endpoint;
mod first_frame;
mod health;
mod outlier;
mod remote_channel;
mod resolution;
mod resolve;
mod retry;
mod retry_call;
mod shared;
mod state;
mod target;
mod trace;

pub use balance::{BalancedChannel, LoadBalancing};
pub use call::{RemoteBody, RemoteFuture};
pub use endpoint::Endpoint;
pub use outlier::OutlierEjection;
pub use remote_channel::RemoteChannel;
pub use resolve::BalancedBuilder;
pub use retry::{RetryPolicy, RetryThrottle, ServiceConfig};
pub use retry_call::{BalancedFuture, DEFAULT_RETRY_BUFFER, TRANSPARENT_RETRIES};
pub use target::{TargetName, DEFAULT_PORT as DEFAULT_TARGET_PORT};
