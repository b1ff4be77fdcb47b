//! Name resolution that never blocks a worker: the system resolver (`getaddrinfo`, which
//! reads `/etc/hosts`, `nsswitch.conf` and `resolv.conf` as every other program on the host
//! does) run on the runtime's blocking pool, behind a small cache with a fixed time to live.
//!
//! # Why the blocking pool and not a resolver crate
//!
//! `getaddrinfo` is what users expect a name to resolve to (hosts file, mDNS, LDAP, search
//! domains, the system's DNS cache): a DNS-only resolver driven on spindle's sockets would
//! disagree with every other program on the host in exactly the cases that are hard to debug.
//! A lookup is rare next to the requests it enables, so a thread hop per cache miss costs
//! nothing that matters; the cache makes repeated connects to the same host free.

// # Invariants
//
// - **Never on a worker.** On a spindle worker a lookup runs as a `spawn_blocking` job; the
//   calling fiber parks (or the task returns `Pending`) until it finishes or the resolver's
//   timeout passes. Only on a plain thread, which stalls nobody, does it run inline.
// - **Bounded waits.** A lookup that never answers ends the caller's wait with `TimedOut`
//   after the resolver's timeout (default [`DEFAULT_TIMEOUT`]). The pool thread stays in
//   `getaddrinfo` until the system gives up (a thread cannot be interrupted): at most
//   `max_blocking_threads` such lookups can be stuck at once, later jobs queue.
// - **One job per name.** Concurrent lookups of one name share one job (`net/flight.rs`):
//   10,000 connects to one host run one `getaddrinfo`, and a name that never answers holds
//   one pool thread, not one per caller.
// - **Bounded cache.** At most `capacity` names, each kept for `ttl` after its lookup (the
//   system resolver does not report record TTLs, so one fixed TTL applies). Failures are not
//   cached. IP literals never reach the cache or the pool.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use super::addr::{Target, ToSocketAddrs};
use super::flight::{Flights, Landing};
use super::io_future::IoFuture;
use crate::sched::caller::{blocking_caller, Caller};
use crate::sched::worker;

/// How long a lookup may take by default before the caller gets `TimedOut`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a name stays cached by default.
pub const DEFAULT_TTL: Duration = Duration::from_secs(30);
/// How many names the cache holds by default.
pub const DEFAULT_CAPACITY: usize = 256;

type LookupFn = dyn Fn(&str) -> io::Result<Vec<IpAddr>> + Send + Sync;

/// A name resolver: a lookup function (the system's by default) run off the worker threads,
/// a timeout, and a TTL-bounded cache. Cloning shares the cache.
///
/// ```
/// use spindle::net::dns::Resolver;
///
/// let rt = spindle::Runtime::new().unwrap();
/// let ips = rt.block_on(|| Resolver::system().lookup("localhost")).unwrap();
/// assert!(ips.iter().all(|ip| ip.is_loopback()));
/// ```
#[derive(Clone)]
pub struct Resolver {
    inner: Arc<Inner>,
}

struct Inner {
    lookup: Arc<LookupFn>,
    timeout: Option<Duration>,
    ttl: Duration,
    capacity: usize,
    cache: Mutex<HashMap<String, Entry>>,
    /// Lookups under way on the blocking pool, shared by concurrent callers.
    flights: Arc<Flights>,
}

struct Entry {
    addrs: Vec<IpAddr>,
    expires: Instant,
}

impl fmt::Debug for Resolver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Resolver")
            .field("timeout", &self.inner.timeout)
            .field("ttl", &self.inner.ttl)
            .field("capacity", &self.inner.capacity)
            .finish_non_exhaustive()
    }
}

/// The system resolver: `getaddrinfo` through std.
fn system_lookup(host: &str) -> io::Result<Vec<IpAddr>> {
    let addrs = std::net::ToSocketAddrs::to_socket_addrs(&(host, 0))?;
    Ok(addrs.map(|a| a.ip()).collect())
}

impl Resolver {
    /// The system resolver (`getaddrinfo`) with the default timeout, TTL and cache size.
    pub fn system() -> Resolver {
        Resolver::with_lookup(system_lookup)
    }

    /// A resolver that calls `lookup` (on the blocking pool) for each name not in its cache:
    /// for a resolver library with a blocking API, a fixed table, or tests.
    pub fn with_lookup<F>(lookup: F) -> Resolver
    where
        F: Fn(&str) -> io::Result<Vec<IpAddr>> + Send + Sync + 'static,
    {
        Resolver::build(Arc::new(lookup), Some(DEFAULT_TIMEOUT), DEFAULT_TTL, DEFAULT_CAPACITY)
    }

    fn build(lookup: Arc<LookupFn>, timeout: Option<Duration>, ttl: Duration, capacity: usize) -> Resolver {
        let cache = Mutex::new(HashMap::new());
        Resolver { inner: Arc::new(Inner { lookup, timeout, ttl, capacity, cache, flights: Arc::default() }) }
    }

    /// The same lookup with another timeout (`None`: wait as long as the lookup takes) and a
    /// new, empty cache.
    pub fn timeout(self, timeout: Option<Duration>) -> Resolver {
        let i = &self.inner;
        Resolver::build(i.lookup.clone(), timeout, i.ttl, i.capacity)
    }

    /// The same lookup with another cache TTL (zero: no caching; `Duration::MAX`: for good) and
    /// a new, empty cache.
    pub fn ttl(self, ttl: Duration) -> Resolver {
        let i = &self.inner;
        Resolver::build(i.lookup.clone(), i.timeout, ttl, i.capacity)
    }

    /// The same lookup with another cache capacity (zero: no caching) and a new, empty cache.
    pub fn capacity(self, names: usize) -> Resolver {
        let i = &self.inner;
        Resolver::build(i.lookup.clone(), i.timeout, i.ttl, names)
    }

    /// Resolves `host` to its IP addresses. In a fiber the fiber parks while the lookup runs on
    /// the blocking pool; on a plain thread the lookup runs on the thread. An IP literal is
    /// returned as is. Past the timeout: `TimedOut`.
    ///
    /// # Panics
    ///
    /// In an async task polled by a spindle worker (it would block the worker): use
    /// [`lookup_async`](Self::lookup_async) there.
    #[track_caller]
    pub fn lookup(&self, host: &str) -> io::Result<Vec<IpAddr>> {
        if let Some(ready) = self.ready(host) {
            return ready;
        }
        match blocking_caller("DNS lookup") {
            Caller::Thread => self.lookup_inline(host),
            Caller::Fiber(_) => crate::park::block_on::block_on(self.lookup_async(host)),
        }
    }

    /// The future-side [`lookup`](Self::lookup). Polled on a spindle worker the lookup runs on
    /// the blocking pool; polled elsewhere it runs inline at the first poll.
    pub fn lookup_async(&self, host: &str) -> impl Future<Output = io::Result<Vec<IpAddr>>> + Send + 'static {
        let this = self.clone();
        let host = host.to_owned();
        async move {
            if let Some(ready) = this.ready(&host) {
                return ready;
            }
            if worker::current().is_none() {
                return this.lookup_inline(&host);
            }
            // Join the lookup of this name already in flight, or start it on the blocking pool.
            let key = host.to_ascii_lowercase();
            let (flight, started) = this.inner.flights.join(&key);
            if started {
                let landing = Landing::new(this.inner.flights.clone(), key, flight.clone());
                let (job_resolver, name) = (this.clone(), host.clone());
                let job = move || {
                    let result = (job_resolver.inner.lookup)(&name);
                    landing.land(&job_resolver.finish(&name, result));
                };
                // On a worker, the lookup runs on its runtime's blocking pool.
                if let Some(services) = crate::services::services() {
                    drop(services.blocking.spawn(job)); // the flight carries the result
                }
            }
            match this.inner.timeout {
                Some(limit) => crate::time::timeout(limit, flight.wait()).await.map_err(|_| {
                    io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("DNS lookup of {host:?} timed out after {limit:?}"),
                    )
                })?,
                None => flight.wait().await,
            }
        }
    }

    /// An IP literal or a cached answer, if `host` has one.
    fn ready(&self, host: &str) -> Option<io::Result<Vec<IpAddr>>> {
        let bare = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
        if let Ok(ip) = bare.parse::<IpAddr>() {
            return Some(Ok(vec![ip]));
        }
        let cache = crate::lock::lock(&self.inner.cache);
        let entry = cache.get(&host.to_ascii_lowercase())?;
        (entry.expires > Instant::now()).then(|| Ok(entry.addrs.clone()))
    }

    fn lookup_inline(&self, host: &str) -> io::Result<Vec<IpAddr>> {
        let addrs = (self.inner.lookup)(host);
        self.finish(host, addrs)
    }

    /// Checks an answer and caches it.
    fn finish(&self, host: &str, addrs: io::Result<Vec<IpAddr>>) -> io::Result<Vec<IpAddr>> {
        let addrs = addrs?;
        if addrs.is_empty() {
            return Err(io::Error::new(io::ErrorKind::NotFound, format!("no addresses found for {host:?}")));
        }
        let inner = &self.inner;
        if inner.capacity > 0 && !inner.ttl.is_zero() {
            let now = Instant::now();
            let mut cache = crate::lock::lock(&inner.cache);
            if cache.len() >= inner.capacity {
                cache.retain(|_, e| e.expires > now);
            }
            if cache.len() >= inner.capacity {
                // Still full of live names: drop the one closest to expiry.
                if let Some(oldest) = cache.iter().min_by_key(|(_, e)| e.expires).map(|(k, _)| k.clone()) {
                    cache.remove(&oldest);
                }
            }
            // A TTL too long for an `Instant` (`Duration::MAX`) keeps the name for good.
            let expires = crate::time::deadline_from(now, inner.ttl);
            cache.insert(host.to_ascii_lowercase(), Entry { addrs: addrs.clone(), expires });
        }
        Ok(addrs)
    }

    /// Resolves an address target to socket addresses (blocking-style).
    pub(crate) fn resolve(&self, target: Target) -> io::Result<Vec<SocketAddr>> {
        match target {
            Target::Addrs(addrs) => Ok(addrs),
            Target::Host(host, port) => {
                Ok(self.lookup(&host)?.into_iter().map(|ip| SocketAddr::new(ip, port)).collect())
            }
        }
    }

    /// Resolves an address target to socket addresses (as a future).
    pub(crate) async fn resolve_async(&self, target: Target) -> io::Result<Vec<SocketAddr>> {
        match target {
            Target::Addrs(addrs) => Ok(addrs),
            Target::Host(host, port) => {
                Ok(self.lookup_async(&host).await?.into_iter().map(|ip| SocketAddr::new(ip, port)).collect())
            }
        }
    }
}

static DEFAULT: OnceLock<Resolver> = OnceLock::new();

/// The resolver that `TcpStream::connect`, `UdpSocket::connect`/`send_to` and [`lookup_host`]
/// use: [`Resolver::system`] unless [`set_default`] chose another before first use.
pub fn default_resolver() -> &'static Resolver {
    DEFAULT.get_or_init(Resolver::system)
}

/// Sets the process-wide default resolver. Only the first call before any lookup takes
/// effect; later calls return the resolver back as `Err`.
pub fn set_default(resolver: Resolver) -> Result<(), Resolver> {
    DEFAULT.set(resolver)
}

/// Resolves `addr` (`"host:port"`, `("host", port)`, or addresses) with the default resolver,
/// blocking-style: in a fiber the fiber parks while the lookup runs on the blocking pool.
pub fn lookup_host(addr: impl ToSocketAddrs) -> io::Result<Vec<SocketAddr>> {
    default_resolver().resolve(addr.to_target()?)
}

/// The future-side [`lookup_host`].
pub fn lookup_host_async(addr: impl ToSocketAddrs) -> IoFuture<Vec<SocketAddr>> {
    let target = addr.to_target();
    IoFuture::new(async move { default_resolver().resolve_async(target?).await })
}

/// Runs `f` on each address of `addr` in turn until one succeeds (as std's `connect` does).
pub(crate) fn each_resolved<T>(
    addr: impl ToSocketAddrs,
    mut f: impl FnMut(SocketAddr) -> io::Result<T>,
) -> io::Result<T> {
    if let Some(a) = addr.as_single() {
        return f(a);
    }
    let mut last_err = None;
    for a in lookup_host(addr)? {
        match f(a) {
            Ok(v) => return Ok(v),
            Err(e) => last_err = Some(e),
        }
    }
    Err(last_err.unwrap_or_else(no_addresses))
}

pub(crate) fn no_addresses() -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, "could not resolve to any addresses")
}
