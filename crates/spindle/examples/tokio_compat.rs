//! A tokio-only crate (reqwest) called from a spindle fiber, against a small HTTP server that
//! runs in spindle fibers on 127.0.0.1: directly (the worker runs inside the tokio bridge's
//! context), then through `spindle::compat::block_on` (the whole call on the bridge's thread).
//!
//! Run: `cargo run -p spindle --example tokio_compat --features tokio-compat`

use std::io::{Read, Write};

use spindle::net::TcpListener;

fn main() -> std::io::Result<()> {
    let rt = spindle::Runtime::new()?;
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    rt.spawn(move || {
        for _ in 0..2 {
            let (mut conn, _) = listener.accept().unwrap();
            let mut buf = [0u8; 4096];
            let _ = conn.read(&mut buf).unwrap(); // one small request fits
            conn.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\nconnection: close\r\n\r\nhello")
                .unwrap();
        }
    });
    let direct = rt.block_on(move || {
        // reqwest needs tokio's context: this worker runs inside the bridge's, so the call is
        // written as on tokio; the fiber parks while it waits.
        spindle::task::block_on(async move {
            let response = reqwest::get(format!("http://{addr}/")).await.expect("request");
            response.text().await.expect("body")
        })
    });
    assert_eq!(direct, "hello");
    let (status, body) = rt.block_on(move || {
        // reqwest needs tokio: the bridge runs the call on its tokio thread while this fiber
        // parks.
        spindle::compat::block_on(async move {
            let response = reqwest::get(format!("http://{addr}/")).await.expect("request");
            (response.status(), response.text().await.expect("body"))
        })
    });
    println!("{status} {body}");
    assert_eq!(body, "hello");
    Ok(())
}
