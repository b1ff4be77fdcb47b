//! spindle::net beyond the basics: connecting by host name (the lookup runs on the blocking
//! pool, never on a worker), `connect_async` from a task, and a connection split into a reader
//! fiber and a writer fiber. Everything stays on 127.0.0.1.
//!
//! Run: `cargo run -p spindle --example net_connect`

use std::future::poll_fn;
use std::io::{self, BufRead, BufReader, Write};
use std::pin::Pin;

use futures_io::{AsyncRead, AsyncWrite};

use spindle::net::{dns, TcpListener, TcpStream};

fn main() -> io::Result<()> {
    let rt = spindle::Runtime::new()?;
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let port = listener.local_addr()?.port();

    // An upper-casing echo server: each connection is split into halves used by two fibers.
    rt.spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { continue };
            let (rd, mut wr) = conn.into_split();
            let (tx, rx) = spindle::sync::channel::<String>(16);
            spindle::spawn(move || {
                for line in BufReader::new(rd).lines() {
                    let Ok(line) = line else { break };
                    if tx.send(line.to_uppercase()).is_err() {
                        break;
                    }
                }
            });
            spindle::spawn(move || {
                for line in rx.iter() {
                    if writeln!(wr, "{line}").is_err() {
                        break;
                    }
                }
            });
        }
    });

    // A fiber: "localhost" is resolved on the blocking pool while this fiber parks.
    let reply = rt.block_on(move || -> io::Result<String> {
        let ips = dns::default_resolver().lookup("localhost")?;
        println!("localhost resolves to {ips:?} (looked up off the worker)");
        let mut conn = TcpStream::connect(("localhost", port))?;
        writeln!(conn, "hello from a fiber")?;
        let mut line = String::new();
        BufReader::new(&conn).read_line(&mut line)?;
        Ok(line)
    })?;
    print!("fiber got: {reply}");

    // A task: the same with futures (the `futures-io` traits; an async I/O helper crate such
    // as futures-util makes this shorter).
    let reply = rt
        .spawn_async(async move {
            let addrs = spindle::net::lookup_host_async(format!("localhost:{port}")).await?;
            let limit = std::time::Duration::from_secs(10);
            let mut conn = spindle::time::timeout(limit, TcpStream::connect_async(&addrs[..])).await??;
            let mut out: &[u8] = b"hello from a task\n";
            while !out.is_empty() {
                let n = poll_fn(|cx| Pin::new(&mut conn).poll_write(cx, out)).await?;
                out = &out[n..];
            }
            let mut line = Vec::new();
            let mut buf = [0u8; 256];
            while !line.ends_with(b"\n") {
                let n = poll_fn(|cx| Pin::new(&mut conn).poll_read(cx, &mut buf)).await?;
                if n == 0 {
                    break;
                }
                line.extend_from_slice(&buf[..n]);
            }
            io::Result::Ok(String::from_utf8_lossy(&line).into_owned())
        })
        .join()
        .expect("the task panicked")?;
    print!("task got: {reply}");
    Ok(())
}
