//! Real servers for tests and benchmarks, each started on a free loopback port in a scratch
//! directory of its own and stopped (the directory removed) when its handle is dropped:
//! [`Postgres`] (a fresh cluster: `initdb`, then `postgres` in the foreground) and [`Redis`]
//! (`redis-server` without persistence).
//!
//! # Rules
//!
//! - **Found, never guessed.** The programs are looked up where Debian installs them
//!   ([`postgres_bin_dir`], [`redis_server`]); when they are missing, `start` fails with an
//!   error that names the package to install. Nothing here installs anything.
//! - **Nothing outlives its owner.** A handle's `Drop` stops its server (PostgreSQL's fast
//!   shutdown, Redis's SIGTERM, SIGKILL after a grace period) and removes its directory, also
//!   when a test panics. Each server also gets a parent-death signal: if the owning thread or
//!   process dies without running `Drop` (SIGKILL, a Ctrl-C that ends the process), the
//!   kernel stops the server. The parent-death signal follows the *thread* that started the
//!   server, so a handle must be dropped on the thread that made it, or outlive nothing that
//!   thread does (the tests and the tournament keep each handle on one thread).
//! - **Root is not PostgreSQL's user.** PostgreSQL refuses to run as root: run as root, the
//!   cluster is made and served by the `postgres` user (created by Debian's package), its
//!   directory owned by that user; otherwise by the calling user.

mod child;
mod postgres;
mod redis;

pub use child::free_port;
pub use postgres::{postgres_bin_dir, Postgres, PostgresOptions};
pub use redis::{redis_server, Redis};

/// Why a server could not be started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error(pub String);

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

/// The result of starting a server.
pub type Result<T> = std::result::Result<T, Error>;

fn error<T>(message: impl Into<String>) -> Result<T> {
    Err(Error(message.into()))
}
