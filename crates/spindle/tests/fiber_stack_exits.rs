//! Fibers that finish in random order never make spawning fail: releasing a stack never
//! splits a mapping (stacks are carved from chunks that are unmapped whole), so the number of
//! mappings and the resident memory stay bounded round after round.
//!
//! Each round spawns `n` fibers that park on a oneshot, wakes them in a shuffled order, joins
//! them all (every one must have started and finished), then counts the lines of
//! `/proc/self/maps` and the resident set. The bounds, from the pool's invariants
//! (`fiber/stack.rs`):
//! - mappings: at most one per 64 stacks in use at once, so after any round at most
//!   `baseline + n / 64 + 64` (the slack covers the test harness, the allocator and the
//!   runtime's own threads); and no growth from one round to the next beyond that slack.
//! - resident memory: a busy worker looks once per `stack_cache + 1,025` releases and gives
//!   back the pages of the free stacks beyond `keep_warm` that nobody took since its last look;
//!   a free stack with pages was released in the current window or the one before, so the
//!   free stacks hold at most `(keep_warm + 2 x (stack_cache + 1,025) + 64) x 8 KiB`; the
//!   allocator keeps the freed control blocks and oneshots for reuse (about 400 bytes a
//!   fiber, counted as 512), so after a round at most
//!   `baseline + that + fibers x 512 + 16 MiB of slack`; and no growth from one round to the
//!   next beyond the slack.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use spindle::sync::oneshot;

/// xorshift64*: a shuffle without a dependency.
fn shuffle<T>(items: &mut [T], mut seed: u64) {
    for i in (1..items.len()).rev() {
        seed ^= seed >> 12;
        seed ^= seed << 25;
        seed ^= seed >> 27;
        let j = (seed.wrapping_mul(0x2545_F491_4F6C_DD1D) % (i as u64 + 1)) as usize;
        items.swap(i, j);
    }
}

fn mappings() -> usize {
    std::fs::read_to_string("/proc/self/maps").unwrap().lines().count()
}

fn resident_bytes() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: usize = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

fn rounds(fibers: usize, rounds: usize) {
    const KEEP_WARM: usize = 256;
    const CACHE: usize = 1024;
    let rt = spindle::Builder::new()
        .worker_threads(1)
        .stack_cache(CACHE) // small, so that pages go back while busy and idle trims unmap chunks
        .stack_keep_warm(KEEP_WARM)
        .build()
        .unwrap();
    let baseline_maps = mappings();
    let baseline_rss = resident_bytes();
    let map_bound = baseline_maps + fibers / 64 + 64;
    let rss_bound = baseline_rss + (KEEP_WARM + 2 * (CACHE + 1025) + 64) * 8192 + fibers * 512 + (16 << 20);
    let mut previous: Option<(usize, usize)> = None;
    for round in 0..rounds {
        let started = rt.block_on(move || {
            let mut wakers = Vec::with_capacity(fibers);
            let mut handles = Vec::with_capacity(fibers);
            let parked = Arc::new(AtomicUsize::new(0));
            for _ in 0..fibers {
                let (tx, rx) = oneshot::<()>();
                wakers.push(tx);
                let parked = parked.clone();
                let fiber = move || {
                    parked.fetch_add(1, Ordering::Relaxed);
                    rx.recv().is_ok()
                };
                handles.push(spindle::fiber::Builder::new().spawn(fiber).expect("spawn"));
            }
            // Let every fiber start and park, so that they finish in the shuffled order.
            while parked.load(Ordering::Relaxed) < fibers {
                spindle::yield_now();
            }
            shuffle(&mut wakers, 0x9E37_79B9_7F4A_7C15 ^ round as u64);
            for tx in wakers {
                tx.send(()).unwrap();
            }
            handles
                .into_iter()
                .map(|h| h.join().expect("every fiber starts and finishes"))
                .filter(|ok| *ok)
                .count()
        });
        assert_eq!(started, fibers, "round {round}: every fiber ran");
        let (maps, rss) = (mappings(), resident_bytes());
        eprintln!(
            "round {round}: {maps} mappings (bound {map_bound}), {} KiB resident (bound {} KiB)",
            rss / 1024,
            rss_bound / 1024
        );
        assert!(maps <= map_bound, "round {round}: {maps} mappings, more than {map_bound}");
        assert!(rss <= rss_bound, "round {round}: {rss} bytes resident, more than {rss_bound}");
        if let Some((prev_maps, prev_rss)) = previous {
            assert!(maps <= prev_maps + 64, "round {round}: mappings grew from {prev_maps} to {maps}");
            assert!(
                rss <= prev_rss + (16 << 20),
                "round {round}: resident memory grew from {prev_rss} to {rss}"
            );
        }
        previous = Some((maps, rss));
    }
}

#[test]
fn random_order_exits_keep_mappings_and_memory_bounded() {
    rounds(20_000, 5);
}

/// The size from the report that found the bug: 300,000 fibers x 10 rounds (about a minute).
#[test]
#[ignore = "large: 300,000 fibers x 10 rounds; run with --ignored"]
fn random_order_exits_at_300k_x_10_rounds() {
    rounds(300_000, 10);
}
