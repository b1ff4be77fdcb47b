//! `N` async tasks spawned with `spindle::task::spawn_async` from an async task's poll, each
//! awaited through its `JoinHandle` by that task, for instruction counts: the task's
//! allocation, its queueing and poll, its waker (the awaiting task is woken by the
//! completion) and the handle's output read and free. Run it under
//! `valgrind --tool=callgrind` with two values of `N` and divide the difference in
//! instructions by the difference in `N` (`scripts/spawn_instructions.sh --task` does that).
//!
//! Usage: `task_spawn_count [N]`.

fn main() {
    let n: u64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(10_000);
    let rt = spindle::Builder::new().worker_threads(1).build().unwrap();
    let sum = rt
        .spawn_async(async move {
            let mut sum = 0u64;
            for i in 0..n {
                sum += spindle::task::spawn_async(async move { i & 1 }).await.unwrap();
            }
            sum
        })
        .join()
        .unwrap();
    assert_eq!(sum, n / 2);
}
