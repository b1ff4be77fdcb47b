//! The I/O budget (`sched::worker::coop`): a fiber whose socket reads keep completing without
//! waiting yields now and then, so another fiber on the same worker runs; the yield loses
//! nothing the reads returned.

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
