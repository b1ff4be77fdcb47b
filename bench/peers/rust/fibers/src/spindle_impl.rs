//! `spindle`: one fiber per unit on a spindle runtime (one worker thread, default 256 KiB
//! stacks committed lazily). A switch is `spindle::yield_now()`: the run queue is FIFO, so
//! two fibers that yield alternately hand control to each other. Same structure as the
//! tokio competitor.

use std::time::{Duration, Instant};

use spindle::sync::WaitGroup;
use spindle::{JoinHandle, LocalRuntime};

use crate::{rss_bytes, Alloc, Competitor};

pub struct Spindle {
    rt: LocalRuntime,
}

impl Spindle {
    pub fn new() -> Spindle {
        let rt = spindle::Builder::new().build_local().expect("build the spindle runtime");
        Spindle { rt }
    }
}

fn join_all(handles: Vec<JoinHandle<()>>) {
    for h in handles {
        h.join().expect("unit fiber panicked");
    }
}

fn yielding(switches: usize) -> impl FnOnce() + Send + 'static {
    move || {
        for _ in 0..switches {
            spindle::yield_now();
        }
    }
}

impl Competitor for Spindle {
    const NAME: &'static str = "spindle";

    fn alloc(&mut self, units: usize, switches: usize) -> Alloc {
        self.rt.block_on(move || {
            // `parked` counts the units in; `release` holds them until the creator is done.
            let parked = WaitGroup::new();
            parked.add(units);
            let release = WaitGroup::new();
            release.add(1);
            let mut handles = Vec::with_capacity(units);
            let rss0 = rss_bytes();
            let t0 = Instant::now();
            for _ in 0..units {
                let (parked, release) = (parked.clone(), release.clone());
                handles.push(spindle::spawn(move || {
                    for _ in 0..switches {
                        spindle::yield_now();
                    }
                    parked.done();
                    release.wait();
                }));
            }
            // The units run once the creator waits; the last one to park wakes it.
            parked.wait();
            let to_peak = t0.elapsed();
            let rss1 = rss_bytes();
            let t1 = Instant::now();
            release.done();
            join_all(handles);
            Alloc { elapsed: to_peak + t1.elapsed(), rss_growth: rss1 - rss0 }
        })
    }

    fn switch(&mut self, switches: usize) -> Duration {
        self.rt.block_on(move || {
            let t0 = Instant::now();
            let handles = (0..2).map(|_| spindle::spawn(yielding(switches))).collect();
            join_all(handles);
            t0.elapsed()
        })
    }

    fn rounds(&mut self, units: usize, switches: usize, repeats: usize) -> Vec<Duration> {
        self.rt.block_on(move || {
            (0..repeats)
                .map(|_| {
                    let t0 = Instant::now();
                    let handles = (0..units).map(|_| spindle::spawn(yielding(switches))).collect();
                    join_all(handles);
                    t0.elapsed()
                })
                .collect()
        })
    }
}
