//! The I/O budget (`sched::worker::coop`): a fiber whose socket reads keep completing without
//! waiting yields now and then, so another fiber on the same worker runs; the yield loses
//! nothing the reads returned. A task whose every poll spends its budget does not hold back
//! its worker's timers either.

use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use spindle::net::TcpListener;
use spindle::Builder;

/// Bytes queued before the reader starts: far more one-byte reads than one budget (128).
const QUEUED: usize = 16 * 1024;

fn pattern(i: usize) -> u8 {
    (i % 251) as u8
}

#[test]
fn a_reader_that_never_waits_lets_another_fiber_on_its_worker_run() {
    let rt = Builder::new().worker_threads(1).build().unwrap();
    let (reads_before_other_ran, total_ok) = rt.block_on(|| {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        // A plain thread writes everything and keeps the connection open until told.
        let (written_tx, written_rx) = spindle::sync::unbounded::<()>();
        let (close_tx, close_rx) = std::sync::mpsc::channel::<()>();
        let writer = std::thread::spawn(move || {
            let mut peer = std::net::TcpStream::connect(addr).unwrap();
            let data: Vec<u8> = (0..QUEUED).map(pattern).collect();
            peer.write_all(&data).unwrap();
            written_tx.send(()).unwrap();
            let _ = close_rx.recv();
        });
        let (mut stream, _) = listener.accept().unwrap();
        // Loopback delivers as it sends: once the writer is done, all of it is queued here.
        written_rx.recv().unwrap();

        let other_ran = Arc::new(AtomicBool::new(false));
        let other = {
            let other_ran = other_ran.clone();
            spindle::spawn(move || other_ran.store(true, Ordering::Relaxed))
        };
        // Every read finds data queued, so none of them waits.
        let mut got = Vec::with_capacity(QUEUED);
        let mut reads_before_other_ran = None;
        let mut byte = [0u8; 1];
        while got.len() < QUEUED {
            assert_eq!(stream.read(&mut byte).unwrap(), 1);
            got.push(byte[0]);
            if reads_before_other_ran.is_none() && other_ran.load(Ordering::Relaxed) {
                reads_before_other_ran = Some(got.len());
            }
        }
        other.join().unwrap();
        close_tx.send(()).unwrap();
        writer.join().unwrap();
        let total_ok = got.iter().enumerate().all(|(i, &b)| b == pattern(i));
        (reads_before_other_ran, total_ok)
    });
    assert!(total_ok, "the bytes read were not the bytes written, in order");
    let reads = reads_before_other_ran
        .expect("the other fiber ran only once the reader had read everything (never yielded)");
    assert!(reads <= 128, "the other fiber waited for {reads} reads, more than one budget (128)");
}

#[test]
fn a_task_whose_reads_never_wait_lets_another_task_on_its_worker_run() {
    use std::future::poll_fn;
    use std::pin::Pin;
    let rt = Builder::new().worker_threads(1).build().unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let writer = std::thread::spawn(move || {
        let (mut peer, _) = listener.accept().unwrap();
        let data: Vec<u8> = (0..QUEUED).map(pattern).collect();
        peer.write_all(&data).unwrap();
        peer
    });
    let (reads_before_other_ran, total_ok) = rt.block_on(move || {
        let mut stream = spindle::net::TcpStream::connect(addr).unwrap();
        let peer = writer.join().unwrap();
        // Loopback delivers as it sends: with the writer done, everything is queued here.
        let other_ran = Arc::new(AtomicBool::new(false));
        let reader = {
            let other_ran = other_ran.clone();
            spindle::task::spawn_async(async move {
                let mut got = Vec::with_capacity(QUEUED);
                let mut reads_before_other_ran = None;
                let mut byte = [0u8; 1];
                let mut other = None;
                while got.len() < QUEUED {
                    if got.len() == 1 {
                        // After the first read (which may wait for the socket's first event):
                        // from here on every read finds data queued. Spawned from inside
                        // this poll, the other task is queued behind this one.
                        let flag = other_ran.clone();
                        other =
                            Some(spindle::task::spawn_async(
                                async move { flag.store(true, Ordering::Relaxed) },
                            ));
                    }
                    let n =
                        poll_fn(|cx| futures_io::AsyncRead::poll_read(Pin::new(&mut stream), cx, &mut byte))
                            .await
                            .unwrap();
                    assert_eq!(n, 1);
                    got.push(byte[0]);
                    if reads_before_other_ran.is_none() && other_ran.load(Ordering::Relaxed) {
                        reads_before_other_ran = Some(got.len());
                    }
                }
                other.expect("spawned after the first read").await.unwrap();
                let total_ok = got.iter().enumerate().all(|(i, &b)| b == pattern(i));
                (reads_before_other_ran, total_ok)
            })
        };
        let out = reader.join().unwrap();
        drop(peer);
        out
    });
    assert!(total_ok, "the bytes read were not the bytes written, in order");
    let reads = reads_before_other_ran
        .expect("the other task ran only once the reader had read everything (its poll never returned)");
    assert!(reads <= 129, "the other task waited for {reads} reads, more than one budget (128)");
}

/// A task whose reads always find data, with work after each read (a parser, say: here a
/// 100 µs spin), spends its whole I/O budget in every poll. Its worker used to fire due
/// timers only every `BUSY_POLL_INTERVAL` (64) task polls, i.e. after some 64 x 128 reads:
/// a timeout around such a flood ended ~0.8 s late here (a server flooding spindle-http's
/// client with `100 Continue` held a request past its timeout for much longer, as its parse
/// per read was heavier). A poll that spends the whole budget is now followed by a look at
/// the timers and the reactor. Counts reads, not time: the timeout must end the flood within
/// a few budgets of its deadline (~200 reads at 100 µs each), far below 64 budgets.
#[test]
fn a_task_whose_every_poll_spends_its_budget_does_not_hold_back_its_workers_timers() {
    use std::future::poll_fn;
    use std::pin::Pin;
    use std::task::Poll;
    use std::time::{Duration, Instant};
    const DEADLINE: Duration = Duration::from_millis(20);
    let rt = Builder::new().worker_threads(1).build().unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    // Writes until the reader's end closes (the write then fails).
    let writer = std::thread::spawn(move || {
        let (mut peer, _) = listener.accept().unwrap();
        let chunk = vec![7u8; 64 * 1024];
        while peer.write_all(&chunk).is_ok() {}
    });
    let reads = rt.block_on(move || {
        let mut stream = spindle::net::TcpStream::connect(addr).unwrap();
        spindle::task::spawn_async(async move {
            let mut reads = 0usize;
            let mut byte = [0u8; 1];
            let flood = poll_fn(|cx| loop {
                match futures_io::AsyncRead::poll_read(Pin::new(&mut stream), cx, &mut byte) {
                    Poll::Ready(Ok(1)) => {
                        reads += 1;
                        let work = Instant::now();
                        while work.elapsed() < Duration::from_micros(100) {
                            std::hint::spin_loop();
                        }
                    }
                    Poll::Ready(other) => panic!("the flood's read gave {other:?}"),
                    Poll::Pending => return Poll::<()>::Pending,
                }
            });
            let ended = spindle::time::timeout(DEADLINE, flood).await;
            assert!(ended.is_err(), "the flood never ends by itself");
            reads
            // The stream drops here: the writer's next write fails and it ends.
        })
        .join()
        .unwrap()
    });
    writer.join().unwrap();
    let budgets = reads / 128;
    assert!(
        budgets < 16,
        "the timeout ended the flood after {reads} reads ({budgets} full budgets): the due timer waited for many long polls"
    );
}
