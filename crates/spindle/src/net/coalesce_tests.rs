//! `CoalescedStream` (module `net::coalesce`): gathered writes leave once per burst of the
//! worker's work, within the bound, in order; off a worker at once; a close or a drop delivers
//! what is pending; a deferred flush's error reaches the next write.

use std::future::poll_fn;
use std::io::{self, IoSlice, Read};
use std::os::unix::net::UnixStream as StdUnixStream;
use std::sync::{mpsc, Arc};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use super::{CoalescedStream, GATHER_LIMIT};
use crate::net::UnixStream;

/// A coalesced stream and its peer (a plain socket).
fn pair() -> (Arc<CoalescedStream>, StdUnixStream) {
    let (ours, peer) = StdUnixStream::pair().unwrap();
    (Arc::new(CoalescedStream::from(UnixStream::from_std(ours).unwrap())), peer)
}

fn write(s: &CoalescedStream, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
    s.poll_write_slices(cx, &[IoSlice::new(data)])
}

fn local_runtime() -> crate::LocalRuntime {
    crate::runtime::Builder::new().build_local().unwrap()
}

#[test]
fn frames_written_in_one_burst_leave_in_one_send_once_the_worker_runs_dry() {
    let rt = local_runtime();
    let (stream, peer) = pair();
    peer.set_nonblocking(true).unwrap();
    let s = stream.clone();
    let p = peer.try_clone().unwrap();
    rt.block_on(rt.spawn_async(async move {
        poll_fn(|cx| {
            for part in [&b"HEADERS;"[..], b"DATA;", b"TRAILERS"] {
                assert!(matches!(write(&s, cx, part), Poll::Ready(Ok(n)) if n == part.len()));
                assert!(matches!(s.poll_send_pending(cx), Poll::Ready(Ok(()))));
            }
            // Nothing has left yet: the worker sends once it has run everything runnable.
            let mut buf = [0u8; 64];
            assert_eq!((&p).read(&mut buf).unwrap_err().kind(), io::ErrorKind::WouldBlock);
            assert_eq!(s.sends(), 0);
            assert_eq!(s.pending(), 21);
            Poll::Ready(())
        })
        .await
    }))
    .unwrap();
    assert_eq!(stream.sends(), 1);
    assert_eq!(stream.pending(), 0);
    let mut buf = [0u8; 64];
    let n = (&peer).read(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"HEADERS;DATA;TRAILERS");
}

#[test]
fn a_write_off_a_worker_is_sent_at_once() {
    let (stream, peer) = pair();
    peer.set_nonblocking(true).unwrap();
    let mut cx = Context::from_waker(Waker::noop());
    assert!(matches!(write(&stream, &mut cx, b"now"), Poll::Ready(Ok(3))));
    assert!(matches!(stream.poll_send_pending(&mut cx), Poll::Ready(Ok(()))));
    assert_eq!(stream.sends(), 1);
    let mut buf = [0u8; 8];
    let n = (&peer).read(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"now");
}

/// The byte at `offset` of the test stream.
fn pattern(offset: usize) -> u8 {
    (offset % 251) as u8
}

#[test]
fn a_writer_whose_peer_does_not_read_stays_within_the_bound_and_loses_nothing() {
    const TOTAL: usize = 8 << 20;
    const CHUNK: usize = 1000;
    let rt = local_runtime();
    let (stream, mut peer) = pair();
    let (full_tx, full_rx) = mpsc::channel::<()>();
    // The reader starts only once the writer has found the socket full.
    let reader = std::thread::spawn(move || {
        full_rx.recv().unwrap();
        let mut got = Vec::with_capacity(TOTAL);
        peer.read_to_end(&mut got).unwrap();
        got
    });
    let s = stream.clone();
    rt.block_on(rt.spawn_async(async move {
        let mut offset = 0;
        let mut full = Some(full_tx);
        while offset < TOTAL {
            let chunk: Vec<u8> = (offset..(offset + CHUNK).min(TOTAL)).map(pattern).collect();
            let n = poll_fn(|cx| {
                let res = write(&s, cx, &chunk);
                assert!(s.pending() <= GATHER_LIMIT, "{} bytes pending", s.pending());
                if res.is_pending() {
                    if let Some(tx) = full.take() {
                        tx.send(()).unwrap();
                    }
                }
                res
            })
            .await
            .unwrap();
            offset += n;
        }
        assert!(full.is_none(), "the socket never filled up");
        poll_fn(|cx| s.poll_shutdown_write(cx)).await.unwrap();
    }))
    .unwrap();
    let got = reader.join().unwrap();
    assert_eq!(got.len(), TOTAL);
    assert!(got.iter().enumerate().all(|(i, &b)| b == pattern(i)), "bytes lost or reordered");
}

#[test]
fn a_close_right_after_a_gathered_write_delivers_it() {
    let rt = local_runtime();
    let (stream, mut peer) = pair();
    rt.block_on(rt.spawn_async(async move {
        poll_fn(|cx| {
            assert!(write(&stream, cx, b"last words").is_ready());
            assert!(matches!(stream.poll_shutdown_write(cx), Poll::Ready(Ok(()))));
            Poll::Ready(())
        })
        .await
    }))
    .unwrap();
    let mut got = Vec::new();
    peer.read_to_end(&mut got).unwrap();
    assert_eq!(got, b"last words");
}

#[test]
fn a_drop_right_after_a_gathered_write_delivers_it() {
    let rt = local_runtime();
    let (stream, mut peer) = pair();
    rt.block_on(rt.spawn_async(async move {
        poll_fn(|cx| {
            assert!(write(&stream, cx, b"dropped with bytes pending").is_ready());
            assert_eq!(stream.pending(), 26);
            Poll::Ready(())
        })
        .await;
        drop(stream);
    }))
    .unwrap();
    let mut got = Vec::new();
    peer.read_to_end(&mut got).unwrap();
    assert_eq!(got, b"dropped with bytes pending");
}

#[test]
fn an_error_of_a_deferred_flush_surfaces_on_the_next_flush() {
    let rt = local_runtime();
    let (stream, peer) = pair();
    drop(peer);
    rt.block_on(rt.spawn_async(async move {
        poll_fn(|cx| {
            // Gathered and deferred: the error is not known yet.
            assert!(matches!(write(&stream, cx, b"into the void"), Poll::Ready(Ok(13))));
            assert!(matches!(stream.poll_send_pending(cx), Poll::Ready(Ok(()))));
            Poll::Ready(())
        })
        .await;
        // The worker runs dry and flushes before it sleeps.
        crate::time::sleep_future(Duration::from_millis(1)).await;
        let err = poll_fn(|cx| stream.poll_send_pending(cx)).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::BrokenPipe);
    }))
    .unwrap();
}

#[test]
fn a_fiber_and_a_task_writing_to_one_stream_on_one_worker_both_finish_and_lose_nothing() {
    const BIG: usize = 16 * 1024;
    const BIG_WRITES: usize = 300;
    const SMALL_WRITES: usize = 1000;
    let rt = local_runtime();
    let (stream, mut peer) = pair();
    let reader = std::thread::spawn(move || {
        let mut got = Vec::new();
        peer.read_to_end(&mut got).unwrap();
        got.len()
    });
    let s = stream.clone();
    rt.block_on(move || {
        // A task writing small pieces to the same stream, between the fiber's writes.
        let t = s.clone();
        let small = crate::task::spawn_async(async move {
            for _ in 0..SMALL_WRITES {
                poll_fn(|cx| write(&t, cx, b"0123456789")).await.unwrap();
                crate::task::yield_now().await;
            }
        });
        // The fiber's writes are sent at once (large): each takes a unit of the I/O budget,
        // and a fiber that takes the last unit yields, holding no lock of the stream's.
        let big = vec![7u8; BIG];
        for _ in 0..BIG_WRITES {
            let mut left = &big[..];
            while !left.is_empty() {
                let n = crate::task::block_on(poll_fn(|cx| write(&s, cx, left))).unwrap();
                left = &left[n..];
            }
        }
        small.join().unwrap();
        crate::task::block_on(poll_fn(|cx| s.poll_shutdown_write(cx))).unwrap();
    });
    assert_eq!(reader.join().unwrap(), BIG * BIG_WRITES + 10 * SMALL_WRITES);
}
