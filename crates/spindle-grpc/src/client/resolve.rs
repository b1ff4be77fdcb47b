//! A [`BalancedChannel`] over a gRPC target name ([`BalancedChannel::from_target`],
//! [`BalancedBuilder`]): the resolver's fiber that keeps the channel's children in step with
//! the addresses a `dns:///` name resolves to.
//!
//! # Invariants
//!
//! - **Off the workers.** A lookup goes through spindle's [`Resolver`] (the system's
//!   `getaddrinfo` on the blocking pool by default, or a lookup function of the user's): the
//!   resolver's fiber parks while it runs; no worker waits on DNS.
//! - **Fresh, but not too often.** The name is resolved when the channel is built, again every
//!   `refresh` (default 30 s), and again when a pick finds a server down or the name without an
//!   address ([`Resolution::ask`]) — never twice within `min_interval` (default 1 s). The
//!   resolver's own cache may answer within its TTL: a channel that must see changes sooner
//!   takes a [`Resolver`] with a shorter TTL ([`BalancedBuilder::resolver`]).
//! - **A failed lookup keeps what works.** A lookup that fails, or answers no address, leaves
//!   the children as they are (as grpc-go's DNS resolver does) and is recorded: a channel
//!   with no child fails its calls with that error. Only an answer with addresses changes the
//!   children: those of addresses still present are kept (their connections untouched), new
//!   addresses get new children (connecting at once under `round_robin`), and children of
//!   addresses gone are dropped from the list (their calls in flight finish; module `balance`).
//! - **Ends with the channel.** The fiber holds the balancer weakly and is woken when the last
//!   clone drops; it also ends when its runtime shuts down.

use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use spindle::net::dns::Resolver;

use super::balance::{Balanced, BalancedChannel, LoadBalancing};
use super::child::{Child, Waiters};
use super::endpoint::{Endpoint, Target};
use super::outlier::{Budget, OutlierEjection};
use super::remote_channel::RemoteChannel;
use super::resolution::Resolution;
use super::retry::ServiceConfig;
use super::retry_call::DEFAULT_RETRY_BUFFER;
use super::target::TargetName;

/// The settings of a [`BalancedChannel`] over a gRPC target name: `BalancedChannel::builder`.
#[derive(Clone)]
pub struct BalancedBuilder {
    target: TargetName,
    template: Option<Endpoint>,
    policy: LoadBalancing,
    resolver: Option<Resolver>,
    min_interval: Duration,
    refresh: Duration,
    retry: Option<Arc<ServiceConfig>>,
    retry_buffer: usize,
    outliers: Option<OutlierEjection>,
    health: Option<String>,
}

impl std::fmt::Debug for BalancedBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BalancedBuilder")
            .field("target", &self.target)
            .field("policy", &self.policy)
            .field("min_interval", &self.min_interval)
            .field("refresh", &self.refresh)
            .finish_non_exhaustive()
    }
}

impl BalancedChannel {
    /// A channel over the servers a gRPC target name gives (module `target`:
    /// `dns:///host:port`, `ipv4:a:p,b:p`, `ipv6:...`, `unix:/path`), with default settings:
    /// plain-text HTTP/2, `round_robin`, the system's resolver. Returns at once; a `dns` name
    /// resolves on a fiber of the runtime, and calls wait for its first answer in
    /// `poll_ready`. See [`BalancedChannel::builder`] for the settings.
    ///
    /// ```no_run
    /// # fn main() -> std::io::Result<()> {
    /// # spindle::Runtime::new()?.block_on(|| -> std::io::Result<()> {
    /// // Every address of a Kubernetes headless service, kept up to date.
    /// let channel = spindle_grpc::BalancedChannel::from_target("dns:///echo.default.svc.cluster.local:50051")?;
    /// # drop(channel); Ok(()) })
    /// # }
    /// ```
    pub fn from_target(target: &str) -> io::Result<BalancedChannel> {
        BalancedChannel::builder(target)?.build()
    }

    /// The settings of a channel over `target` (see [`from_target`](Self::from_target)).
    /// Errors: a target that is not a gRPC target name (`InvalidInput`, saying why).
    pub fn builder(target: &str) -> io::Result<BalancedBuilder> {
        Ok(BalancedBuilder {
            target: target.parse()?,
            template: None,
            policy: LoadBalancing::RoundRobin,
            resolver: None,
            min_interval: Duration::from_secs(1),
            refresh: Duration::from_secs(30),
            retry: None,
            retry_buffer: DEFAULT_RETRY_BUFFER,
            outliers: None,
            health: None,
        })
    }
}

impl BalancedBuilder {
    /// The settings of every server's connection (timeouts, backoff, keepalive, limits, TLS,
    /// the runtime): the endpoint's URI gives the scheme (`http://` or `https://`) and is
    /// otherwise replaced by the target's addresses, with the target's `host:port` as the
    /// calls' `:authority` (and the name TLS checks). Default: `Endpoint::new("http://<target>")`.
    pub fn endpoint(mut self, template: Endpoint) -> BalancedBuilder {
        self.template = Some(template);
        self
    }

    /// The load-balancing policy (default `round_robin`).
    pub fn policy(mut self, policy: LoadBalancing) -> BalancedBuilder {
        self.policy = policy;
        self
    }

    /// The resolver of a `dns` name (default: [`spindle::net::dns::default_resolver`]). Its
    /// TTL bounds how old an answer the channel may see (module docs).
    pub fn resolver(mut self, resolver: Resolver) -> BalancedBuilder {
        self.resolver = Some(resolver);
        self
    }

    /// Resolve a `dns` name again every `refresh` (default 30 s), and on demand (a server
    /// down) no sooner than `min_interval` after the last lookup (default 1 s).
    pub fn re_resolution(mut self, min_interval: Duration, refresh: Duration) -> BalancedBuilder {
        self.min_interval = min_interval;
        self.refresh = refresh.max(min_interval);
        self
    }

    /// Retry policies per method, and the throttle, from a service config (module `retry`;
    /// [`ServiceConfig::from_json`] reads grpc's JSON form). Without one, only the calls a
    /// server never processed are sent again (transparent retries).
    pub fn service_config(mut self, config: ServiceConfig) -> BalancedBuilder {
        self.retry = Some(Arc::new(config));
        self
    }

    /// The bytes of request messages a call keeps so that it can be sent again (default
    /// 256 KiB); a call that sends more is not retried.
    pub fn retry_buffer(mut self, bytes: usize) -> BalancedBuilder {
        self.retry_buffer = bytes;
        self
    }

    /// Leaves out of the picks, for a while, a server whose calls keep failing with
    /// `UNAVAILABLE` or `DEADLINE_EXCEEDED` (module `outlier`; off by default).
    pub fn outlier_ejection(mut self, settings: OutlierEjection) -> BalancedBuilder {
        self.outliers = Some(settings);
        self
    }

    /// Watches each server's health for `service` (`grpc.health.v1.Health/Watch`, module
    /// `health`; `""` is the server as a whole) and leaves out of the picks a server that
    /// reports it is not serving, until it serves again (off by default; grpc-go's
    /// `healthCheckConfig`).
    pub fn health_check(mut self, service: impl Into<String>) -> BalancedBuilder {
        self.health = Some(service.into());
        self
    }

    /// Builds the channel. A fixed list (`ipv4:`, `ipv6:`, `unix:`) starts connecting to every
    /// server (`round_robin`) or the first (`pick_first`) now; a `dns` name starts its
    /// resolver's fiber on the endpoint's runtime. Errors: a template endpoint
    /// `connect_lazy` refuses, no runtime (build it on a worker, or give the template a
    /// `handle`), or a runtime that has shut down.
    pub fn build(self) -> io::Result<BalancedChannel> {
        let authority = self.target.authority();
        let mut template = match self.template {
            Some(template) => template,
            None => Endpoint::new(format!("http://{authority}"))?,
        };
        template.origin = authority.parse().map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("spindle-grpc: not an authority: {authority:?}"),
            )
        })?;
        if template.handle.is_none() {
            // The health watches run there too.
            template.handle = spindle::Handle::current();
        }
        let waiters = Arc::new(Waiters::default());
        let (retry, buffer) = (self.retry, self.retry_buffer);
        let outliers = self.outliers.map(Budget::new);
        let balanced = |children, waiters, resolution| {
            let balanced = Balanced::new(children, waiters, self.policy, resolution);
            Arc::new(balanced.with_retries(retry, buffer).with_outliers(outliers))
        };
        let (host, port) = match self.target {
            TargetName::Dns { host, port } => (host, port),
            TargetName::Addrs(addrs) => {
                let children = children_for(
                    &addrs,
                    &[],
                    &template,
                    self.policy,
                    &waiters,
                    None,
                    health_of(&self.health, &template),
                )?;
                return Ok(BalancedChannel::from_shared(balanced(children, waiters, None)));
            }
            TargetName::Unix(path) => {
                template.target = Target::Unix(path);
                let child = template.connect_lazy()?;
                child.connect_now()?;
                let child = Child::new(None, child, &waiters);
                let children =
                    vec![child.with_health(self.health.as_deref(), template.handle.as_ref(), None)];
                return Ok(BalancedChannel::from_shared(balanced(children, waiters, None)));
            }
        };
        let handle = template.handle.clone().or_else(spindle::Handle::current).ok_or_else(|| {
            io::Error::other("spindle-grpc: no runtime to resolve on: build the channel on a worker, or give its endpoint a handle")
        })?;
        let resolution = Arc::new(Resolution::new(authority));
        let balanced = balanced(Vec::new(), waiters, Some(resolution.clone()));
        let fiber = Refresh {
            balanced: Arc::downgrade(&balanced),
            resolution,
            resolver: self.resolver.unwrap_or_else(|| spindle::net::dns::default_resolver().clone()),
            host,
            port,
            template,
            min_interval: self.min_interval,
            refresh: self.refresh,
            health: self.health,
        };
        handle
            .try_spawn(move || fiber.run())
            .map_err(|e| io::Error::other(format!("spindle-grpc: cannot start the resolver: {e}")))?;
        Ok(BalancedChannel::from_shared(balanced))
    }
}

/// The health check's service and the runtime its watches run on, when the channel checks
/// health.
fn health_of<'a>(
    service: &'a Option<String>,
    template: &'a Endpoint,
) -> Option<(&'a str, &'a spindle::Handle)> {
    Some((service.as_deref()?, template.handle.as_ref()?))
}

/// The children for `addrs`, in that order: an existing child's when one has the address,
/// else a new one (connecting now under `round_robin`, or when it is first under `pick_first`).
fn children_for(
    addrs: &[SocketAddr],
    existing: &[Child],
    template: &Endpoint,
    policy: LoadBalancing,
    waiters: &Arc<Waiters>,
    outliers: Option<&Arc<Budget>>,
    health: Option<(&str, &spindle::Handle)>,
) -> io::Result<Vec<Child>> {
    let mut children = Vec::with_capacity(addrs.len());
    for (i, &addr) in addrs.iter().enumerate() {
        if children.iter().any(|c: &Child| c.addr == Some(addr)) {
            continue;
        }
        let kept = existing.iter().find(|c| c.addr == Some(addr));
        let channel: RemoteChannel = match kept {
            Some(child) => child.channel.clone(),
            None => {
                let mut endpoint = template.clone();
                endpoint.target = Target::Tcp(addr.to_string());
                let channel = endpoint.connect_lazy()?;
                if policy == LoadBalancing::RoundRobin || i == 0 {
                    channel.connect_now()?;
                }
                channel
            }
        };
        let child = Child::new(Some(addr), channel, waiters).with_outlier(outliers, kept);
        children.push(child.with_health(health.map(|h| h.0), health.map(|h| h.1), kept));
    }
    Ok(children)
}

/// The resolver's fiber (module docs).
struct Refresh {
    balanced: Weak<Balanced>,
    resolution: Arc<Resolution>,
    resolver: Resolver,
    host: String,
    port: u16,
    template: Endpoint,
    min_interval: Duration,
    refresh: Duration,
    health: Option<String>,
}

impl Refresh {
    fn run(self) {
        loop {
            let looked_up = self.resolver.lookup(&self.host);
            let Some(balanced) = self.balanced.upgrade() else { return };
            if self.resolution.is_closed() {
                return;
            }
            self.apply(&balanced, looked_up);
            drop(balanced);
            let at = Instant::now();
            // Until the refresh, or a request no sooner than the minimum interval.
            if self.resolution.wait_deadline(at + self.refresh) {
                let earliest = at + self.min_interval;
                while Instant::now() < earliest && !self.resolution.is_closed() {
                    self.resolution.wait_deadline(earliest);
                }
            }
            if self.resolution.is_closed() {
                return;
            }
        }
    }

    fn apply(&self, balanced: &Balanced, looked_up: io::Result<Vec<std::net::IpAddr>>) {
        let error = match looked_up {
            Ok(ips) if !ips.is_empty() => {
                let addrs: Vec<SocketAddr> =
                    ips.into_iter().map(|ip| SocketAddr::new(ip, self.port)).collect();
                let existing = balanced.children();
                let unchanged = existing.len() == addrs.len()
                    && existing.iter().zip(&addrs).all(|(c, a)| c.addr == Some(*a));
                if !unchanged {
                    match children_for(
                        &addrs,
                        &existing,
                        &self.template,
                        balanced.policy(),
                        balanced.waiters(),
                        balanced.outliers(),
                        health_of(&self.health, &self.template),
                    ) {
                        Ok(children) => balanced.set_children(children),
                        // The runtime has shut down: nothing more to connect.
                        Err(e) => log::debug!("spindle-grpc: {}: {e}", self.resolution.name()),
                    }
                }
                None
            }
            Ok(_) => Some("the name resolved to no address".to_string()),
            Err(e) => Some(e.to_string()),
        };
        if let Some(error) = &error {
            log::debug!("spindle-grpc: resolving {}: {error}", self.resolution.name());
        }
        self.resolution.set_outcome(error);
        // A `poll_ready` waiting for the first answer picks again (and fails if it was an error).
        balanced.waiters().wake_all();
    }
}
