//! `spindle`: one fiber per unit on a spindle runtime (a single worker). A switch is
//! `spindle::yield_now()`. Same structure as the tokio competitor.

use std::sync::Arc;
use std::time::{Duration, Instant};

use spindle::sync::WaitGroup;
use spindle::{JoinHandle, Runtime};

use crate::{rss_bytes, Alloc, Competitor};

pub struct Spindle {
    rt: Runtime,
}

impl Spindle {
    pub fn new() -> Spindle {
        let rt = Runtime::new().expect("build the spindle runtime");
        Spindle { rt }
    }
}

fn join_all(handles: Vec<JoinHandle<()>>) {
    for h in handles {
        h.join().expect("unit fiber panicked");
    }
}

impl Competitor for Spindle {
    const NAME: &'static str = "spindle";

    fn alloc(&mut self, units: usize) -> Alloc {
        self.rt.block_on(move || {
            // `started` counts the units in; `release` holds them until the creator is done.
            let started = Arc::new(WaitGroup::new());
            started.add(units);
            let release = Arc::new(WaitGroup::new());
            release.add(1);
            let mut handles = Vec::with_capacity(units);
            let rss0 = rss_bytes();
            let t0 = Instant::now();
            for _ in 0..units {
                let (started, release) = (started.clone(), release.clone());
                handles.push(spindle::spawn(move || {
                    started.done();
                    release.wait();
                }));
            }
            // Whether or not spawn runs the fiber at once, the creator waits for the last.
            started.wait();
            let elapsed = t0.elapsed();
            let rss1 = rss_bytes();
            release.done();
            join_all(handles);
            Alloc { elapsed, rss_growth: rss1 - rss0 }
        })
    }

    fn switch(&mut self, switches: usize) -> Duration {
        self.rt.block_on(move || {
            let t0 = Instant::now();
            let handles = (0..2)
                .map(|_| {
                    spindle::spawn(move || {
                        for _ in 0..switches {
                            spindle::yield_now();
                        }
                    })
                })
                .collect();
            join_all(handles);
            t0.elapsed()
        })
    }

    fn warm(&mut self, units: usize, repeats: usize) -> Vec<Duration> {
        self.rt.block_on(move || {
            let mut reps = Vec::with_capacity(repeats);
            for _ in 0..repeats {
                let mut handles = Vec::with_capacity(units);
                let t0 = Instant::now();
                for _ in 0..units {
                    handles.push(spindle::spawn(|| {}));
                }
                join_all(handles);
                reps.push(t0.elapsed());
            }
            reps
        })
    }

    fn throughput(&mut self, units: usize, switches: usize, repeats: usize) -> Vec<Duration> {
        self.rt.block_on(move || {
            let mut reps = Vec::with_capacity(repeats);
            for _ in 0..repeats {
                let mut handles = Vec::with_capacity(units);
                let t0 = Instant::now();
                for _ in 0..units {
                    handles.push(spindle::spawn(move || {
                        for _ in 0..switches {
                            spindle::yield_now();
                        }
                    }));
                }
                join_all(handles);
                reps.push(t0.elapsed());
            }
            reps
        })
    }
}
