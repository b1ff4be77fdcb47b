//! `N` fibers started with `fiber::Builder::spawn_now` from an async task's poll, each
//! awaited through its `JoinHandle` by that task: the per-request path of spindle-http's
//! blocking handlers (`spindle-http/src/handler.rs`), for instruction counts. The fiber does
//! not park, like a handler that answers at once, so `spawn_now` returns with it finished and
//! the await is ready at its first poll. Run it under `valgrind --tool=callgrind` with two
//! values of `N` and divide the difference in instructions by the difference in `N`
//! (`scripts/spawn_instructions.sh --now` does that).
//!
//! Usage: `spawn_now_count [N] [named]`; `named` gives each fiber a name and a stack size, as
//! spindle-http does (a [`spindle::fiber::Name`] built per request from pieces, stored inline).

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(10_000);
    let named = args.next().as_deref() == Some("named");
    let rt = spindle::Builder::new().worker_threads(1).build().unwrap();
    let sum = rt
        .spawn_async(async move {
            let mut sum = 0u64;
            for i in 0..n {
                let builder = if named {
                    // As spindle-http's `handler_name`: the pieces joined into the name in place.
                    let method = if i == u64::MAX { "POST" } else { "GET" };
                    let name = spindle::fiber::Name::concat(&["count ", method, " /"]);
                    spindle::fiber::Builder::new().name(name).stack_size(256 * 1024)
                } else {
                    spindle::fiber::Builder::new()
                };
                let h = builder.spawn_now(move || i & 1).unwrap();
                sum += h.await.unwrap();
            }
            sum
        })
        .join()
        .unwrap();
    assert_eq!(sum, n / 2);
}
