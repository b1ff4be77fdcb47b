//! [`Shared`]: the state one server's accept loops and connections share, on every worker:
//! the handler, the settings, hyper's connection builders and the server's [`Drain`].
//!
//! An HTTP/2 connection's streams are spawned by hyper through [`STREAMS`]: `Send` tasks
//! (a connection's streams go wherever a worker is free, so that one busy stream does not
//! hold up the others), eager (on a runtime of one worker with no other task queued, a
//! stream's first poll happens at once inside the connection's poll: a handler that answers
//! at once has its response written in the same pass), and batched like the connection tasks
//! (module `server::accept`): under load a worker then runs its queue in phases, the connections'
//! polls, then the streams', whose code stays in the instruction cache (docs/ARCHITECTURE.md,
//! "HTTP/2").

use std::sync::Arc;

use spindle::graceful::Drain;
use spindle::hyper_exec::TaskExecutor;

use crate::server::config::Config;

/// State shared by the workers of one server.
pub(crate) struct Shared<H> {
    pub(crate) handler: H,
    pub(crate) http: hyper::server::conn::http1::Builder,
    pub(crate) http2: hyper::server::conn::http2::Builder<TaskExecutor>,
    /// The graceful shutdown's signal and count (the `Server` and its `ShutdownHandle`s hold
    /// it too).
    pub(crate) drain: Arc<Drain>,
    pub(crate) config: Config,
}

/// hyper's own limit on header fields when none is set (`proto::h1::role::DEFAULT_MAX_HEADERS`).
const HYPER_DEFAULT_MAX_HEADERS: usize = 100;

/// hyper's executor for an HTTP/2 connection's streams (module doc).
pub(crate) const STREAMS: TaskExecutor = TaskExecutor::new().eager(true).batched(true);

impl<H> Shared<H> {
    /// The state of a server of `config` serving with `handler`: hyper's builders made from
    /// the settings.
    pub(crate) fn new(handler: H, config: Config) -> Shared<H> {
        #[allow(unused_mut)]
        let mut config = config;
        #[cfg(feature = "tls")]
        {
            config.tls = config.tls.map(|tls| tls.with_alpn(config.http2));
        }
        let mut http = hyper::server::conn::http1::Builder::new();
        // Capped: hyper adds the timeout to an `Instant` itself, which panics for
        // `Duration::MAX` ("no limit"); capped, it is a deadline 35,000 years away.
        let header_read_timeout = config.header_read_timeout.map(|t| t.min(spindle::time::NEVER));
        http.timer(spindle::hyper_rt::Timer)
            .keep_alive(config.keep_alive)
            .max_buf_size(config.max_buf_size)
            .max_header_size(config.max_header_size)
            .header_read_timeout(header_read_timeout);
        let mut http2 = hyper::server::conn::http2::Builder::new(STREAMS);
        http2
            .timer(spindle::hyper_rt::Timer)
            .max_header_list_size(u32::try_from(config.max_header_size).unwrap_or(u32::MAX))
            .max_concurrent_streams(config.max_concurrent_streams)
            .max_send_buf_size(config.max_buf_size);
        if config.max_headers != HYPER_DEFAULT_MAX_HEADERS {
            // Only when it differs: with a limit set, hyper fills its header arrays element by
            // element for every request (`smallvec![uninit; n]`); at its default it uses an
            // uninitialised inline array.
            http.max_headers(config.max_headers);
        }
        Shared { handler, http, http2, drain: Arc::new(Drain::new()), config }
    }
}

/// A watch on the server's shutdown reaches the drain through the server's state.
impl<H> AsRef<Drain> for Shared<H> {
    fn as_ref(&self) -> &Drain {
        &self.drain
    }
}
