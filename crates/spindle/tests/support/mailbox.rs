//! A one-value async mailbox (a value slot and a waker), shared by the scheduler tests and the
//! pingpong bench: spindle's channels are blocking-style, so the async side brings its own.
//! Included with `#[path]` (this directory is not a test target of its own).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

/// `send` stores the value and wakes the receiver; one message in flight at a time.
#[derive(Clone, Default)]
pub struct Mailbox(Arc<Mutex<Slot>>);

#[derive(Default)]
struct Slot {
    value: Option<u64>,
    waker: Option<Waker>,
}

impl Mailbox {
    pub fn send(&self, v: u64) {
        let waker = {
            let mut slot = self.0.lock().unwrap();
            debug_assert!(slot.value.is_none(), "one message in flight per mailbox");
            slot.value = Some(v);
            slot.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// Whether a receiver is waiting (has left its waker).
    #[allow(dead_code)] // the tests use it, the bench does not
    pub fn has_waiter(&self) -> bool {
        self.0.lock().unwrap().waker.is_some()
    }

    pub fn recv(&self) -> Recv<'_> {
        Recv(self)
    }
}

/// The future of [`Mailbox::recv`].
pub struct Recv<'a>(&'a Mailbox);

impl Future for Recv<'_> {
    type Output = u64;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<u64> {
        let mut slot = self.0 .0.lock().unwrap();
        match slot.value.take() {
            Some(v) => Poll::Ready(v),
            None => {
                if !slot.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                    slot.waker = Some(cx.waker().clone());
                }
                Poll::Pending
            }
        }
    }
}
