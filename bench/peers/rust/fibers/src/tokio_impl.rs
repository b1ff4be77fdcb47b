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

impl Competitor for Tokio {
    const NAME: &'static str = "tokio";

    fn alloc(&mut self, units: usize) -> Alloc {
        self.rt.block_on(async move {
            let started = Arc::new(AtomicUsize::new(0));
            let all_started = Arc::new(Notify::new());
            let release = Arc::new(Notify::new());
            let mut handles = Vec::with_capacity(units);
            let rss0 = rss_bytes();
            let t0 = Instant::now();
            for _ in 0..units {
                let (started, all_started, release) =
                    (started.clone(), all_started.clone(), release.clone());
                handles.push(tokio::spawn(async move {
                    // Register for the release before counting in, so that the creator's
                    // notify_waiters (after the last one counted) reaches every unit.
                    let released = release.notified();
                    if started.fetch_add(1, Ordering::AcqRel) + 1 == units {
                        all_started.notify_one();
                    }
                    released.await;
                }));
            }
            // Spawned tasks run only once the creator waits: it waits for the last one.
            all_started.notified().await;
            let elapsed = t0.elapsed();
            let rss1 = rss_bytes();
            release.notify_waiters();
            join_all(handles).await;
            Alloc { elapsed, rss_growth: rss1 - rss0 }
        })
    }

    fn switch(&mut self, switches: usize) -> Duration {
        self.rt.block_on(async move {
            let t0 = Instant::now();
            let handles = (0..2)
                .map(|_| {
                    tokio::spawn(async move {
                        for _ in 0..switches {
                            yield_now().await;
                        }
                    })
                })
                .collect();
            join_all(handles).await;
            t0.elapsed()
        })
    }

    fn warm(&mut self, units: usize, repeats: usize) -> Vec<Duration> {
        self.rt.block_on(async move {
            let mut reps = Vec::with_capacity(repeats);
            for _ in 0..repeats {
                let mut handles = Vec::with_capacity(units);
                let t0 = Instant::now();
                for _ in 0..units {
                    handles.push(tokio::spawn(async {}));
                }
                join_all(handles).await;
                reps.push(t0.elapsed());
            }
            reps
        })
    }

    fn throughput(&mut self, units: usize, switches: usize, repeats: usize) -> Vec<Duration> {
        self.rt.block_on(async move {
            let mut reps = Vec::with_capacity(repeats);
            for _ in 0..repeats {
                let mut handles = Vec::with_capacity(units);
                let t0 = Instant::now();
                for _ in 0..units {
                    handles.push(tokio::spawn(async move {
                        for _ in 0..switches {
                            yield_now().await;
                        }
                    }));
                }
                join_all(handles).await;
                reps.push(t0.elapsed());
            }
            reps
        })
    }
}
