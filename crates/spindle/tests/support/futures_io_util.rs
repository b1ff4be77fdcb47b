//! Tiny helpers over the `futures-io` traits (the tests avoid a futures-util dependency).
//! Included with `#[path]` (this directory is not a test target of its own); each test file
//! uses some of them.
#![allow(dead_code)]

use std::future::poll_fn;
use std::io;
use std::pin::Pin;

use futures_io::{AsyncRead, AsyncSeek, AsyncWrite};

pub async fn write_all<W: AsyncWrite + Unpin>(w: &mut W, mut buf: &[u8]) -> io::Result<()> {
    while !buf.is_empty() {
        let n = poll_fn(|cx| Pin::new(&mut *w).poll_write(cx, buf)).await?;
        buf = &buf[n..];
    }
    Ok(())
}

pub async fn read_to_end<R: AsyncRead + Unpin>(r: &mut R) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = poll_fn(|cx| Pin::new(&mut *r).poll_read(cx, &mut buf)).await?;
        if n == 0 {
            return Ok(out);
        }
        out.extend_from_slice(&buf[..n]);
    }
}

pub async fn seek<S: AsyncSeek + Unpin>(s: &mut S, pos: io::SeekFrom) -> io::Result<u64> {
    poll_fn(|cx| Pin::new(&mut *s).poll_seek(cx, pos)).await
}

pub async fn flush<W: AsyncWrite + Unpin>(w: &mut W) -> io::Result<()> {
    poll_fn(|cx| Pin::new(&mut *w).poll_flush(cx)).await
}
