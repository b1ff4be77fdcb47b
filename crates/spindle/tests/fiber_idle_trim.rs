//! A worker that goes idle gives the pages of its free stacks back (beyond `stack_keep_warm`)
//! once it has slept `TRIM_AFTER_IDLE` (200 ms), measured on the coarse clock (module
//! `sched::worker::event_loop`, "clocks by need"): 2,000 fibers each touch 32 KiB of their
//! stacks and finish; after the worker has been idle for a second, most of those pages are no
//! longer resident. The busy worker's own look is out of the way (a `stack_cache` far above
//! the releases made), so only the idle trim can give them back. (Not counted under ASan or
//! TSan, whose shadow and fake-stack memory are not the stacks'.)

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn resident_bytes() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: usize = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

/// Writes `KIB` KiB of this fiber's stack, so that those pages become resident.
#[inline(never)]
fn touch_stack<const KIB: usize>() -> u8 {
    let mut block = [0u8; KIB];
    for (i, b) in block.iter_mut().enumerate().step_by(1024) {
        *b = i as u8;
    }
    std::hint::black_box(&mut block);
    block[KIB - 1024]
}

#[test]
fn an_idle_worker_gives_back_its_free_stacks_pages() {
    const FIBERS: usize = 2_000;
    const TOUCHED: usize = 32 << 10;
    let rt =
        spindle::Builder::new().worker_threads(1).stack_cache(1 << 20).stack_keep_warm(16).build().unwrap();
    let ran = rt.block_on(|| {
        let parked = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = spindle::sync::channel::<()>(FIBERS);
        let handles: Vec<_> = (0..FIBERS)
            .map(|_| {
                let (parked, rx) = (parked.clone(), rx.clone());
                spindle::spawn(move || {
                    let byte = touch_stack::<TOUCHED>();
                    parked.fetch_add(1, Ordering::Relaxed);
                    // All alive at once, so that each has a stack of its own.
                    rx.recv().unwrap();
                    byte
                })
            })
            .collect();
        while parked.load(Ordering::Relaxed) < FIBERS {
            spindle::yield_now();
        }
        for _ in 0..FIBERS {
            tx.send(()).unwrap();
        }
        let mut ran = 0;
        for handle in handles {
            std::hint::black_box(handle.join().unwrap());
            ran += 1;
        }
        ran
    });
    assert_eq!(ran, FIBERS);
    let busy = resident_bytes();
    if cfg!(any(spindle_asan, spindle_tsan)) {
        // Under a sanitizer the resident set is not the stacks': ASan may put the touched
        // array on its fake stack (heap), and both keep shadow memory of every page touched.
        // The trim still runs (its `madvise` is what they check); the count is not asserted.
        std::thread::sleep(Duration::from_millis(500));
        return;
    }
    // The worker sleeps now; it trims after 200 ms of it. Wait well past that (the bound is
    // a hang guard: no claim on how soon).
    let expected_drop = FIBERS * TOUCHED / 2;
    let mut idle = busy;
    for _ in 0..100 {
        std::thread::sleep(Duration::from_millis(100));
        idle = resident_bytes();
        if idle + expected_drop <= busy {
            break;
        }
    }
    assert!(
        idle + expected_drop <= busy,
        "resident {} KiB after the fibers finished, {} KiB after the worker idled: less than {} KiB came back",
        busy / 1024,
        idle / 1024,
        expected_drop / 1024
    );
}
