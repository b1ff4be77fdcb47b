//! The in-process channel: [`Channel`] holds tonic-generated servers and is the transport of
//! tonic-generated clients, with no sockets and no HTTP/2 (the crate docs have the semantics).
//!
//! A call walks through these files in order: `in_process` (the route, the deadline, the
//! request body) with the services of `registry`; `request` (the request body the handler
//! reads, under the channel's limits); `direct` (the handler driven in the caller's call) or
//! `pipe` (in a pump task, for a caller outside any worker); `response` (the future and body
//! tonic's client polls). `call_state` is what the call's sides share, on the encoded path
//! and the typed path (module `typed`) alike.

pub(crate) mod call_state;
mod direct;
mod in_process;
pub(crate) mod pipe;
mod registry;
mod request;
mod response;

pub(crate) use in_process::no_runtime;
pub use in_process::Channel;
pub use response::{ResponseBody, ResponseFuture};
