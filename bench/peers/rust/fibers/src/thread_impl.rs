//! `rust-thread`: one OS thread per unit (std::thread, 64 KiB stacks). In `alloc`, `warm` and
//! `throughput` a switch is `std::thread::yield_now()` (sched_yield, as Ruby's benchmark uses
//! `Thread.pass`); the 2-unit `switch` case is a strict hand-off over two channels.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::{rss_bytes, Alloc, Competitor};

/// Stack of every unit thread: small, as a fiber runtime's would be (the default is 2 MiB).
pub const STACK_SIZE: usize = 64 * 1024;

pub struct Threads;

/// A one-shot gate: `wait` blocks until `open` has been called.
#[derive(Default)]
struct Gate {
    open: Mutex<bool>,
    cv: Condvar,
}

impl Gate {
    fn open(&self) {
        *self.open.lock().unwrap() = true;
        self.cv.notify_all();
    }
    fn wait(&self) {
        let mut open = self.open.lock().unwrap();
        while !*open {
            open = self.cv.wait(open).unwrap();
        }
    }
}

fn spawn<F: FnOnce() + Send + 'static>(f: F) -> JoinHandle<()> {
    match thread::Builder::new().stack_size(STACK_SIZE).spawn(f) {
        Ok(handle) => handle,
        Err(e) => {
            // Out of threads (ulimit -u, threads-max, max_map_count) or memory: say so and
            // stop rather than hang with half the units waiting.
            eprintln!("fibers-peer rust-thread: cannot spawn a thread: {e}");
            std::process::exit(1);
        }
    }
}

fn join_all(handles: Vec<JoinHandle<()>>) {
    for h in handles {
        h.join().expect("unit thread panicked");
    }
}

/// Strict ping-pong over two std mpsc channels: each thread blocks in `recv` until the other
/// hands it the turn. (Measured here against a Mutex<turn> + Condvar hand-off, which was
/// slower: 5-8 µs against 3.7-5 µs per switch on 2 cores.)
fn switch_channel(switches: usize) -> Duration {
    let (to_a, a_rx) = mpsc::channel::<()>();
    let (to_b, b_rx) = mpsc::channel::<()>();
    let t0 = Instant::now();
    let a = spawn(move || {
        for _ in 0..switches {
            to_b.send(()).unwrap();
            a_rx.recv().unwrap();
        }
    });
    let b = spawn(move || {
        for _ in 0..switches {
            b_rx.recv().unwrap();
            to_a.send(()).unwrap();
        }
    });
    join_all(vec![a, b]);
    t0.elapsed()
}

impl Competitor for Threads {
    const NAME: &'static str = "rust-thread";

    fn alloc(&mut self, units: usize, switches: usize) -> Alloc {
        let parked = Arc::new(AtomicUsize::new(0));
        let all_parked = Arc::new(Gate::default());
        let release = Arc::new(Gate::default());
        let mut handles = Vec::with_capacity(units);
        let rss0 = rss_bytes();
        let t0 = Instant::now();
        for _ in 0..units {
            let (parked, all_parked, release) = (parked.clone(), all_parked.clone(), release.clone());
            handles.push(spawn(move || {
                for _ in 0..switches {
                    thread::yield_now();
                }
                if parked.fetch_add(1, Ordering::AcqRel) + 1 == units {
                    all_parked.open();
                }
                release.wait();
            }));
        }
        all_parked.wait();
        let to_peak = t0.elapsed();
        let rss1 = rss_bytes();
        let t1 = Instant::now();
        release.open();
        join_all(handles);
        Alloc { elapsed: to_peak + t1.elapsed(), rss_growth: rss1 - rss0 }
    }

    fn switch(&mut self, switches: usize) -> Duration {
        switch_channel(switches)
    }

    fn rounds(&mut self, units: usize, switches: usize, repeats: usize) -> Vec<Duration> {
        (0..repeats)
            .map(|_| {
                let t0 = Instant::now();
                let handles = (0..units)
                    .map(|_| {
                        spawn(move || {
                            for _ in 0..switches {
                                thread::yield_now();
                            }
                        })
                    })
                    .collect();
                join_all(handles);
                t0.elapsed()
            })
            .collect()
    }
}
