//! tokio's `AsyncRead`/`AsyncWrite` on spindle's streams (feature `tokio-io`): tokio's own
//! helpers (`read_exact`, `write_all`, `copy`, `split`) in spindle tasks, no tokio runtime.

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

use spindle::net::{TcpListener, TcpStream, UnixStream};

#[test]
fn tokio_helpers_over_a_tcp_connection() {
    let rt = spindle::Runtime::new().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let echo = rt.spawn(move || {
        let (conn, _) = listener.accept().unwrap();
        let (mut r, mut w) = conn.into_split();
        std::io::copy(&mut r, &mut w).unwrap();
    });
    let got = rt
        .spawn_async(async move {
            let mut conn = TcpStream::connect_async(addr).await.unwrap();
            conn.write_all(b"hello over tokio's traits\n").await.unwrap();
            let mut line = String::new();
            let mut reader = BufReader::new(&mut conn);
            reader.read_line(&mut line).await.unwrap();
            // The inherent `shutdown(how)` takes the name: call the trait's by its path.
            AsyncWriteExt::shutdown(&mut conn).await.unwrap();
            let mut rest = Vec::new();
            conn.read_to_end(&mut rest).await.unwrap();
            (line, rest)
        })
        .join()
        .unwrap();
    assert_eq!(got, ("hello over tokio's traits\n".to_string(), Vec::new()));
    echo.join().unwrap();
}

#[test]
fn owned_halves_and_unix_streams() {
    let rt = spindle::Runtime::new().unwrap();
    let (a, b) = UnixStream::pair().unwrap();
    let got = rt
        .spawn_async(async move {
            let (mut r, mut w) = a.into_split();
            let mut b = b;
            let writer = spindle::task::spawn_async(async move {
                let big = vec![7u8; 1 << 20];
                w.write_all(&big).await.unwrap();
                w.shutdown().await.unwrap();
            });
            // `b` echoes back what it reads.
            let echo = spindle::task::spawn_async(async move {
                let mut all = Vec::new();
                b.read_to_end(&mut all).await.unwrap();
                b.write_all(&all).await.unwrap();
                AsyncWriteExt::shutdown(&mut b).await.unwrap();
            });
            let mut back = Vec::new();
            r.read_to_end(&mut back).await.unwrap();
            writer.await.unwrap();
            echo.await.unwrap();
            back.len()
        })
        .join()
        .unwrap();
    assert_eq!(got, 1 << 20);
}
