//! A throwaway PostgreSQL cluster: `initdb` in a scratch directory (trust authentication, no
//! fsync), then `postgres` in the foreground listening on 127.0.0.1 at a free port and on a
//! Unix socket in the same directory; stopped with a fast shutdown (SIGINT) when dropped.

use std::ffi::CString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::child::{self, Scratch, Server};
use crate::{error, Error, Result};

/// How long initdb and the server's start may take.
const START_LIMIT: Duration = Duration::from_secs(120);

/// The line the server logs once it accepts connections.
const READY: &str = "database system is ready to accept connections";

/// How the cluster is configured.
#[derive(Debug, Clone)]
pub struct PostgresOptions {
    /// `max_connections` (default 1,100: 1,000 clients and a margin).
    pub max_connections: u32,
}

impl Default for PostgresOptions {
    fn default() -> PostgresOptions {
        PostgresOptions { max_connections: 1100 }
    }
}

/// A running PostgreSQL server with a fresh cluster; stopped and deleted when dropped.
pub struct Postgres {
    // Dropped first: the server stops before its directory goes.
    server: Server,
    port: u16,
    socket_dir: PathBuf,
    _scratch: Scratch,
}

/// The directory with `initdb` and `postgres`: the newest `/usr/lib/postgresql/<version>/bin`
/// (where Debian's packages put them, off PATH), else PATH's.
pub fn postgres_bin_dir() -> Option<PathBuf> {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| Some((e.file_name().to_str()?.parse().ok()?, e.path().join("bin"))))
        .collect();
    versions.sort();
    let dirs: Vec<PathBuf> = versions.into_iter().rev().map(|(_, dir)| dir).collect();
    let initdb = child::find_program("initdb", &dirs)?;
    let dir = initdb.parent()?.to_path_buf();
    dir.join("postgres").is_file().then_some(dir)
}

/// The user and group the cluster runs as: `postgres` when running as root (PostgreSQL
/// refuses root), none (the caller's) otherwise.
fn cluster_owner() -> Result<Option<(u32, u32)>> {
    // SAFETY: geteuid(2) has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Ok(None);
    }
    let name = CString::new("postgres").expect("no NUL");
    // SAFETY: `name` is a NUL-terminated string; the returned record (static storage in
    // libc) is read at once, before any other call that could overwrite it.
    let record = unsafe { libc::getpwnam(name.as_ptr()) };
    if record.is_null() {
        return error(
            "running as root, and PostgreSQL refuses root, but there is no `postgres` user to run \
             it as (Debian's postgresql package creates it)",
        );
    }
    // SAFETY: non-null: a valid passwd record.
    let (uid, gid) = unsafe { ((*record).pw_uid, (*record).pw_gid) };
    Ok(Some((uid, gid)))
}

fn as_owner(cmd: &mut Command, owner: Option<(u32, u32)>) -> &mut Command {
    if let Some((uid, gid)) = owner {
        cmd.uid(uid).gid(gid);
    }
    cmd
}

impl Postgres {
    /// Makes a cluster and starts its server with the default options.
    pub fn start() -> Result<Postgres> {
        Postgres::start_with(&PostgresOptions::default())
    }

    /// Makes a cluster and starts its server.
    pub fn start_with(options: &PostgresOptions) -> Result<Postgres> {
        let Some(bin) = postgres_bin_dir() else {
            return error(
                "PostgreSQL is not installed: no initdb and postgres in /usr/lib/postgresql/*/bin or on \
                 PATH (Debian: apt-get install postgresql)",
            );
        };
        let owner = cluster_owner()?;
        let scratch = Scratch::new("pg-cluster")?;
        let dir = scratch.path();
        if let Some((uid, gid)) = owner {
            std::os::unix::fs::chown(dir, Some(uid), Some(gid))
                .map_err(|e| Error(format!("cannot give {} to the postgres user: {e}", dir.display())))?;
        }
        let data = dir.join("data");
        initdb(&bin, &data, owner)?;
        let port = child::free_port().map_err(|e| Error(format!("no free port: {e}")))?;
        let mut cmd = Command::new(bin.join("postgres"));
        cmd.arg("-D")
            .arg(&data)
            .arg("-k")
            .arg(dir)
            .args(["-p", &port.to_string()])
            .args(["-c", "listen_addresses=127.0.0.1"])
            .args(["-c", &format!("max_connections={}", options.max_connections)])
            // A throwaway cluster: no durability to pay for.
            .args(["-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"])
            .current_dir(dir);
        as_owner(&mut cmd, owner);
        // SIGINT is PostgreSQL's fast shutdown: it ends the backends and exits.
        let mut server = Server::spawn(&mut cmd, &dir.join("server.log"), libc::SIGINT)?;
        server.wait_ready("postgres", START_LIMIT, |s| s.log_since(0).contains(READY))?;
        Ok(Postgres { server, port, socket_dir: dir.to_path_buf(), _scratch: scratch })
    }

    /// The TCP port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Its directory: the cluster (`data/`), the log, and the Unix socket (`.s.PGSQL.<port>`).
    pub fn dir(&self) -> &Path {
        &self.socket_dir
    }

    /// The server's pid.
    pub fn pid(&self) -> u32 {
        self.server.pid()
    }

    /// A connection string for the `postgres` superuser over TCP, in key=value form.
    pub fn conninfo(&self) -> String {
        format!("host=127.0.0.1 port={} user=postgres dbname=postgres sslmode=disable", self.port)
    }

    /// The same as a URL.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres?sslmode=disable", self.port)
    }

    /// Stops the server and removes the cluster (what dropping does).
    pub fn stop(mut self) {
        self.server.stop();
    }
}

fn initdb(bin: &Path, data: &Path, owner: Option<(u32, u32)>) -> Result<()> {
    let mut cmd = Command::new(bin.join("initdb"));
    cmd.arg("-D")
        .arg(data)
        .args(["-A", "trust", "-U", "postgres", "-E", "UTF8", "--locale=C", "--no-sync"])
        .current_dir(data.parent().unwrap_or(Path::new("/")));
    as_owner(&mut cmd, owner);
    let out = cmd.output().map_err(|e| Error(format!("cannot run {}: {e}", bin.join("initdb").display())))?;
    if !out.status.success() {
        return error(format!(
            "initdb failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(())
}
