//! The blocking suite's servers: the harness starts them before the suite's runs and stops
//! them after, and every competitor talks to the same ones.
//!
//! 1. **PostgreSQL**: a fresh cluster (`initdb` as the `postgres` user when the harness runs
//!    as root), `max_connections` 1,100, on 127.0.0.1 at a free port; installed with apt
//!    (`postgresql`) when missing and installing is allowed. Given as `BLOCKING_PG_URL`.
//! 2. **Redis**: `redis-server` without persistence at a free port (apt `redis-server`).
//!    Given as `BLOCKING_REDIS_URL`.
//! 3. **HTTP**: a spindle-http hello server with two workers (this program again, with
//!    `--serve-hello`), checked with one `GET /`. Given as `BLOCKING_HTTP_URL`.
//!
//! A server that cannot be had leaves its variable unset: the competitors then leave its
//! cases out, and the report says why ([`Servers::skipped`]). The servers (launched by the
//! `test-servers` crate, which the tests use too) are stopped and their directories removed
//! when [`Servers`] is dropped, on every way out of the suite; if the harness itself dies
//! first, the kernel stops them (their parent-death signal), and [`crate::interrupt`] stops
//! them on Ctrl-C and SIGTERM.

use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::process::Command;
use std::time::{Duration, Instant};

use test_servers::{Postgres, Redis};

use crate::http;
use crate::interrupt;
use crate::proc::Running;
use crate::setup::Installer;
use crate::ui::Ui;

/// How long the hello server may take to accept.
const HELLO_START_LIMIT: Duration = Duration::from_secs(30);

/// The suite's running servers.
#[derive(Default)]
pub struct Servers {
    postgres: Option<Postgres>,
    redis: Option<Redis>,
    hello: Option<Running>,
    /// `BLOCKING_*_URL` of the servers that run.
    pub env: Vec<(String, String)>,
    /// Why the cases of a server that does not run were not measured.
    pub skipped: Vec<String>,
    /// The cleanup registered for an interruption.
    registered: Vec<interrupt::Token>,
}

impl Servers {
    /// Installs what is missing (if allowed) and starts every server it can.
    pub fn start(installer: &mut Installer, ui: &Ui) -> Servers {
        let mut servers = Servers::default();
        ui.busy("blocking: starting PostgreSQL");
        match start_postgres(installer, ui) {
            Ok(pg) => {
                servers.env.push(("BLOCKING_PG_URL".into(), pg.url()));
                servers.registered.push(interrupt::register(pg.pid(), libc::SIGINT));
                servers.registered.push(interrupt::register_dir(pg.dir().to_path_buf()));
                servers.postgres = Some(pg);
            }
            Err(why) => servers.skip("pg_*", "PostgreSQL", &why, ui),
        }
        ui.busy("blocking: starting redis-server");
        let here = std::env::temp_dir();
        let redis = installer
            .ensure_tools(&["redis-server".into()], &["redis-server".into()], &here, ui)
            .map_err(|f| f.what)
            .and_then(|()| Redis::start().map_err(|e| e.to_string()));
        match redis {
            Ok(redis) => {
                servers.env.push(("BLOCKING_REDIS_URL".into(), redis.url()));
                servers.registered.push(interrupt::register(redis.pid(), libc::SIGTERM));
                servers.registered.push(interrupt::register_dir(redis.dir().to_path_buf()));
                servers.redis = Some(redis);
            }
            Err(why) => servers.skip("redis_*", "redis-server", &why, ui),
        }
        ui.busy("blocking: starting the spindle-http hello server");
        match start_hello() {
            Ok((hello, addr)) => {
                servers.env.push(("BLOCKING_HTTP_URL".into(), format!("http://{addr}/")));
                servers.registered.push(interrupt::register(hello.pid(), libc::SIGKILL));
                servers.hello = Some(hello);
            }
            Err(why) => servers.skip("http_*", "the spindle-http hello server", &why, ui),
        }
        servers
    }

    fn skip(&mut self, cases: &str, server: &str, why: &str, ui: &Ui) {
        let reason = format!("{cases} cases not measured: {server} is not available ({why})");
        ui.log(&reason);
        self.skipped.push(reason);
    }
}

impl Drop for Servers {
    fn drop(&mut self) {
        if let Some(hello) = self.hello.take() {
            hello.stop(Duration::from_secs(5));
        }
        drop(self.redis.take());
        drop(self.postgres.take());
        for token in self.registered.drain(..) {
            interrupt::deregister(token);
        }
    }
}

fn start_postgres(installer: &mut Installer, ui: &Ui) -> Result<Postgres, String> {
    if test_servers::postgres_bin_dir().is_none() {
        installer
            .apt_install("PostgreSQL is not installed (no initdb and postgres)", &["postgresql".into()], ui)
            .map_err(|f| f.what)?;
    }
    Postgres::start().map_err(|e| e.to_string())
}

/// Starts this program as the hello server (`--serve-hello`) on a free port and checks it.
fn start_hello() -> Result<(Running, SocketAddr), String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    let port = http::free_port().map_err(|e| format!("no free port: {e}"))?;
    let mut cmd = Command::new(exe);
    cmd.arg("--serve-hello").env("PORT", port.to_string()).env("WORKERS", "2");
    let mut server = Running::spawn(&mut cmd).map_err(|e| format!("cannot start it: {e}"))?;
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let deadline = Instant::now() + HELLO_START_LIMIT;
    while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
        if let Some(exit) = server.try_exit() {
            return Err(format!("it {} before accepting", exit.describe()));
        }
        if Instant::now() > deadline {
            server.stop(Duration::from_secs(1));
            return Err(format!("it did not accept on {addr} in time"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    if let Err(e) = http::check_hello(addr) {
        server.stop(Duration::from_secs(1));
        return Err(e);
    }
    Ok((server, addr))
}

/// `--serve-hello`: a spindle-http server answering `Hello, World!` on 127.0.0.1:$PORT with
/// $WORKERS workers, until killed (it also dies with the harness: its parent-death signal).
pub fn serve_hello() -> std::io::Result<()> {
    // SAFETY: prctl(2) with PR_SET_PDEATHSIG takes plain integers and touches no memory.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) };
    let port: u16 = std::env::var("PORT").ok().and_then(|p| p.parse().ok()).unwrap_or(0);
    let workers: usize = std::env::var("WORKERS").ok().and_then(|w| w.parse().ok()).unwrap_or(2);
    use spindle_http::header::{HeaderValue, CONTENT_TYPE};
    let server = spindle_http::Server::builder().workers(workers).serve(
        (Ipv4Addr::LOCALHOST, port),
        |_req: spindle_http::Request<spindle_http::Body>| {
            let mut res = spindle_http::Response::new("Hello, World!");
            res.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
            res
        },
    )?;
    server.wait();
    Ok(())
}
