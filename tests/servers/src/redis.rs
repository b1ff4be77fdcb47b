//! A throwaway Redis: `redis-server` in the foreground on 127.0.0.1 at a free port, no
//! snapshots and no append-only file, its working directory a scratch directory; stopped with
//! SIGTERM when dropped.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use crate::child::{self, Scratch, Server};
use crate::{error, Error, Result};

/// How long the server may take to answer its first PING.
const START_LIMIT: Duration = Duration::from_secs(60);

/// `redis-server`, where Debian's `redis-server` package puts it (on PATH).
pub fn redis_server() -> Option<PathBuf> {
    child::find_program("redis-server", &[PathBuf::from("/usr/bin")])
}

/// A running redis-server; stopped and its directory removed when dropped.
pub struct Redis {
    // Dropped first: the server stops before its directory goes.
    server: Server,
    port: u16,
    _scratch: Scratch,
}

impl Redis {
    /// Starts a server.
    pub fn start() -> Result<Redis> {
        let Some(program) = redis_server() else {
            return error("redis-server is not installed (Debian: apt-get install redis-server)");
        };
        let scratch = Scratch::new("redis-server")?;
        let dir = scratch.path();
        let port = child::free_port().map_err(|e| Error(format!("no free port: {e}")))?;
        let mut cmd = Command::new(program);
        cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--daemonize", "no"])
            .args(["--save", "", "--appendonly", "no", "--maxclients", "10000"])
            .arg("--dir")
            .arg(dir)
            .current_dir(dir);
        let mut server = Server::spawn(&mut cmd, &dir.join("server.log"), libc::SIGTERM)?;
        server.wait_ready("redis-server", START_LIMIT, |_| ping(port))?;
        Ok(Redis { server, port, _scratch: scratch })
    }

    /// The TCP port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's pid.
    pub fn pid(&self) -> u32 {
        self.server.pid()
    }

    /// Its directory (the log; the working directory of the server).
    pub fn dir(&self) -> &std::path::Path {
        self._scratch.path()
    }

    /// `redis://127.0.0.1:<port>/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Stops the server and removes its directory (what dropping does).
    pub fn stop(mut self) {
        self.server.stop();
    }
}

/// Whether a server on `port` answers `PING` with `+PONG`.
fn ping(port: u16) -> bool {
    let Ok(mut conn) = TcpStream::connect(("127.0.0.1", port)) else { return false };
    let _ = conn.set_read_timeout(Some(Duration::from_secs(2)));
    if conn.write_all(b"PING\r\n").is_err() {
        return false;
    }
    let mut reply = [0u8; 7];
    conn.read_exact(&mut reply).is_ok() && &reply == b"+PONG\r\n"
}
