//! Stress: many fibers, many switches, many messages. Asserts completeness, never timings.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use spindle::sync::{channel, WaitGroup};
use spindle::Runtime;

/// Under ThreadSanitizer every started fiber has a TSan fiber with its own 512 KiB shadow
/// stack mapping (and TSan's per-fiber state), and vm.max_map_count allows 65,530 mappings a
/// process. Two of this file's cases running at once with 20,000 live fibers each exceeded
/// it ("ThreadSanitizer: out of memory: failed to allocate ... shadow stack", in CI), so
/// under TSan the cases take this lock and run one at a time. Elsewhere it is not taken.
fn one_at_a_time_under_tsan() -> Option<std::sync::MutexGuard<'static, ()>> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    cfg!(spindle_tsan).then(|| SERIAL.lock().unwrap_or_else(|poisoned| poisoned.into_inner()))
}

#[test]
fn a_hundred_thousand_fibers_run_to_completion() {
    let _serial = one_at_a_time_under_tsan();
    // Every fiber yields once before it finishes, so all of them have started (and, under
    // ThreadSanitizer, each has its own 512 KiB shadow stack mapping) before the first ends:
    // as in `a_hundred_thousand_fibers_parked_at_once`, 100,000 of those exceed
    // vm.max_map_count (a TSan run failed "out of memory: failed to allocate ... shadow stack").
    const N: usize = if cfg!(spindle_tsan) { 20_000 } else { 100_000 };
    let rt = Runtime::new().unwrap();
    let ran = Arc::new(AtomicUsize::new(0));
    let ran2 = ran.clone();
    let sum = rt.block_on(move || {
        let handles: Vec<_> = (0..N)
            .map(|i| {
                let ran = ran2.clone();
                spindle::spawn(move || {
                    spindle::yield_now();
                    ran.fetch_add(1, Ordering::Relaxed);
                    i as u64
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
    });
    assert_eq!(ran.load(Ordering::Relaxed), N);
    assert_eq!(sum, (N as u64 - 1) * N as u64 / 2);
}

#[test]
fn a_hundred_thousand_fibers_parked_at_once() {
    let _serial = one_at_a_time_under_tsan();
    // All alive together: each parks on the wait group, so every stack is in use at the peak.
    // Under ThreadSanitizer every fiber also has a TSan fiber with its own 512 KiB shadow
    // stack mapping; 100,000 of those at once exceed vm.max_map_count.
    const N: usize = if cfg!(spindle_tsan) { 20_000 } else { 100_000 };
    let rt = Runtime::new().unwrap();
    rt.block_on(|| {
        let release = Arc::new(WaitGroup::new());
        release.add(1);
        let finished = Arc::new(WaitGroup::new());
        finished.add(N);
        for _ in 0..N {
            let (release, finished) = (release.clone(), finished.clone());
            spindle::spawn(move || {
                release.wait();
                finished.done();
            });
        }
        spindle::yield_now(); // every fiber starts and parks
        assert_eq!(finished.count(), N);
        release.done();
        finished.wait();
    });
}

#[test]
fn two_fibers_ping_pong_two_million_messages() {
    let _serial = one_at_a_time_under_tsan();
    const ROUNDS: u64 = 1_000_000;
    let rt = Runtime::new().unwrap();
    let last = rt.block_on(|| {
        let (ping_tx, ping_rx) = channel::<u64>(1);
        let (pong_tx, pong_rx) = channel::<u64>(1);
        let ponger = spindle::spawn(move || {
            let mut n = 0;
            for v in ping_rx.iter() {
                pong_tx.send(v + 1).unwrap();
                n += 1;
            }
            n
        });
        let mut v = 0;
        for _ in 0..ROUNDS {
            ping_tx.send(v).unwrap();
            v = pong_rx.recv().unwrap() + 1;
        }
        drop(ping_tx);
        assert_eq!(ponger.join().unwrap(), ROUNDS);
        v
    });
    assert_eq!(last, 2 * ROUNDS);
}

#[test]
fn cross_thread_messages_are_never_lost() {
    let _serial = one_at_a_time_under_tsan();
    // Threads feed fibers and fibers answer threads: every wake-up crosses the worker's inbox.
    const PER_THREAD: u64 = 50_000;
    let rt = Runtime::new().unwrap();
    let (tx, rx) = channel::<u64>(16);
    let (back_tx, back_rx) = channel::<u64>(16);
    let consumers: Vec<_> = (0..8)
        .map(|_| {
            let (rx, back_tx) = (rx.clone(), back_tx.clone());
            rt.spawn(move || {
                for v in rx.iter() {
                    back_tx.send(v).unwrap();
                }
            })
        })
        .collect();
    drop((rx, back_tx));
    let producers: Vec<_> = (0..3)
        .map(|_| {
            let tx = tx.clone();
            std::thread::spawn(move || {
                for v in 1..=PER_THREAD {
                    tx.send(v).unwrap();
                }
            })
        })
        .collect();
    drop(tx);
    let collector = std::thread::spawn(move || back_rx.iter().fold((0u64, 0u64), |(n, s), v| (n + 1, s + v)));
    producers.into_iter().for_each(|h| h.join().unwrap());
    consumers.into_iter().for_each(|h| h.join().unwrap());
    let (count, sum) = collector.join().unwrap();
    assert_eq!(count, 3 * PER_THREAD);
    assert_eq!(sum, 3 * PER_THREAD * (PER_THREAD + 1) / 2);
}
