//! [`yield_now`]: a task's yield to every other queued task and fiber of its worker.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Yields the current task: the first poll wakes the task and returns `Pending`, so that it
/// goes to the back of its worker's queue (never the LIFO slot: a task that wakes itself while
/// it runs is a yield) and every other queued task and fiber runs before it continues.
///
/// ```
/// let rt = spindle::Runtime::new().unwrap();
/// let h = rt.spawn_async(async {
///     for _ in 0..3 {
///         spindle::task::yield_now().await;
///     }
///     7
/// });
/// assert_eq!(h.join().unwrap(), 7);
/// ```
pub fn yield_now() -> YieldNow {
    YieldNow { yielded: false }
}

/// The future of [`yield_now`].
#[derive(Debug)]
#[must_use = "futures do nothing unless awaited"]
pub struct YieldNow {
    yielded: bool,
}

impl Future for YieldNow {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.yielded {
            return Poll::Ready(());
        }
        self.yielded = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}
