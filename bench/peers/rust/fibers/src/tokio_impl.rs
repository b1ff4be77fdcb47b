//! `tokio`: one task per unit on a current_thread runtime (I/O and time drivers enabled, as
//! `#[tokio::main(flavor = "current_thread")]` builds it): the comparable of one spindle
//! worker. A switch is `tokio::task::yield_now().await`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::runtime::Runtime;
use tokio::sync::Notify;
use tokio::task::{yield_now, JoinHandle};

use crate::{rss_bytes, Alloc, Competitor};

pub struct Tokio {
    rt: Runtime,
}

impl Tokio {
    pub fn new() -> Tokio {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("build the tokio runtime");
        Tokio { rt }
    }
}

async fn join_all(handles: Vec<JoinHandle<()>>) {
    for h in handles {
        h.await.expect("unit task panicked");
    }
}

async fn yielding(switches: usize) {
    for _ in 0..switches {
        yield_now().await;
    }
}

impl Competitor for Tokio {
    const NAME: &'static str = "tokio";

    fn alloc(&mut self, units: usize, switches: usize) -> Alloc {
        self.rt.block_on(async move {
            let parked = Arc::new(AtomicUsize::new(0));
            let all_parked = Arc::new(Notify::new());
            let release = Arc::new(Notify::new());
            let mut handles = Vec::with_capacity(units);
            let rss0 = rss_bytes();
            let t0 = Instant::now();
            for _ in 0..units {
                let (parked, all_parked, release) = (parked.clone(), all_parked.clone(), release.clone());
                handles.push(tokio::spawn(async move {
                    yielding(switches).await;
                    // Created before counting in, so that the creator's notify_waiters (after
                    // the last one counted) completes it even though it was not polled yet.
                    let released = release.notified();
                    if parked.fetch_add(1, Ordering::AcqRel) + 1 == units {
                        all_parked.notify_one();
                    }
                    released.await;
                }));
            }
            // Spawned tasks run only once the creator waits: the last one to park wakes it.
            all_parked.notified().await;
            let to_peak = t0.elapsed();
            let rss1 = rss_bytes();
            let t1 = Instant::now();
            release.notify_waiters();
            join_all(handles).await;
            Alloc { elapsed: to_peak + t1.elapsed(), rss_growth: rss1 - rss0 }
        })
    }

    fn switch(&mut self, switches: usize) -> Duration {
        self.rt.block_on(async move {
            let t0 = Instant::now();
            let handles = (0..2).map(|_| tokio::spawn(yielding(switches))).collect();
            join_all(handles).await;
            t0.elapsed()
        })
    }

    fn rounds(&mut self, units: usize, switches: usize, repeats: usize) -> Vec<Duration> {
        self.rt.block_on(async move {
            let mut reps = Vec::with_capacity(repeats);
            for _ in 0..repeats {
                let t0 = Instant::now();
                let handles = (0..units).map(|_| tokio::spawn(yielding(switches))).collect();
                join_all(handles).await;
                reps.push(t0.elapsed());
            }
            reps
        })
    }
}
