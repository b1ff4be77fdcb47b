//! The HTTP server: [`Builder`](crate::Builder) binds the listeners and starts the runtimes,
//! an accept loop per listener (`accept`) spawns a task per connection (`conn`), which serves
//! it with spindle-http's own HTTP/1 path (`h1`) or hyper's connection and its service
//! (`service`, `precheck`, `meter`, `trace`), calling the handler (`handler`, `tower`);
//! [`Server`](crate::Server) (`running`) ends it through the server's drain. Nothing here is
//! used by the client (`crate::client`); what both share is in `crate::transport`.

pub(crate) mod accept;
pub(crate) mod builder;
pub(crate) mod config;
pub(crate) mod conn;
pub(crate) mod counters;
pub(crate) mod h1;
pub(crate) mod handler;
pub(crate) mod meter;
pub(crate) mod origin;
pub(crate) mod precheck;
pub(crate) mod running;
pub(crate) mod service;
pub(crate) mod shared;
#[cfg(feature = "tls")]
pub(crate) mod tls;
pub(crate) mod tower;
pub(crate) mod trace;
