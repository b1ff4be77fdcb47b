//! What the server (`crate::server`) and the client (`crate::client`) both use, and nothing
//! of either: the body type (`body`), the request body's limits (`limits`), the byte stream
//! under a connection, plain or TLS (`stream`), the socket as hyper sees it, with its
//! coalescing buffer (`socket`), and hyper's timer (`timer`).

pub(crate) mod body;
pub(crate) mod limits;
pub(crate) mod socket;
pub(crate) mod stream;
pub(crate) mod timer;
