//! Rendezvous channels (`channel(0)`, Go's unbuffered channel): a send completes only once a
//! receiver has taken its value.
//!
//! A send is two waits on the channel's lock: it *offers* its value (pushes it into the one
//! slot a rendezvous channel has, waiting on `send_waiters` while another sender's offer
//! fills it), then waits on `offer_waiters` until the value is *settled*: taken by a receiver
//! (whose pop wakes it), or taken back by the sender itself when it gives up (a deadline,
//! every receiver gone, a dropped future, the unwinding of a cancelled fiber).
//!
//! Invariants (under the channel's lock; see module `channel` for the counters):
//! - **One offer at a time.** The slot holds at most one value, and it is the one whose
//!   ticket (the `offered` count before its push) equals `settled`. So a sender's value has
//!   been taken iff `settled > ticket` and it did not take it back itself.
//! - **Taking back decides.** A sender that gives up takes its value back under the lock: if
//!   `settled > ticket` by then a receiver has it, and the send counts as done (a send with a
//!   deadline returns `Ok`); otherwise the value leaves the slot, `settled` moves on, and the
//!   next waiting sender is woken for the free slot. A receiver's pop is the other way the
//!   offer settles; exactly one of the two happens.
//! - **Receivers receive as from any channel.** A receiver takes the offered value in its own
//!   round, as it takes a buffered one, so a `recv` in `select!` wins only with a value. A
//!   `send_async` future, though, learns that its value was taken only when polled again: one
//!   dropped in between (a `select!` whose other branch won the same round, a `timeout` that
//!   fired) has delivered its value all the same.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::channel::{
    offer_list, send_list, send_pass_on, SendError, SendTimeoutError, Sender, State, TrySendError,
};
use crate::lock::lock;
use crate::park::wait::{pass_none, Wait};
use crate::park::{self, WaitNode};

/// How an offer ended, once settled or abandoned.
pub(super) enum Settled {
    /// A receiver took the value.
    Taken,
    /// Every receiver is gone: the sender takes its value back.
    NoReceiver,
}

/// An offer made: its ticket, and the receiver to wake for it.
pub(super) type Offered = (u64, Option<Arc<WaitNode>>);

/// One offering round: `Some` once the value is in the slot or the channel has no receiver
/// left.
pub(super) fn offer_round<T>(
    s: &mut State<T>,
    value: &mut Option<T>,
) -> Option<Result<Offered, SendError<T>>> {
    let v = value.take().expect("an offer made twice");
    let ticket = s.offered;
    match s.try_push(v) {
        Ok(wake) => Some(Ok((ticket, wake))),
        Err(TrySendError::Disconnected(v)) => Some(Err(SendError(v))),
        Err(TrySendError::Full(v)) => {
            *value = Some(v);
            None
        }
    }
}

/// One round of the wait for the offer `ticket` to settle.
pub(super) fn settled_round<T>(s: &mut State<T>, ticket: u64) -> Option<Settled> {
    if s.settled > ticket {
        Some(Settled::Taken)
    } else if s.receivers == 0 {
        Some(Settled::NoReceiver)
    } else {
        None
    }
}

/// The sender of offer `ticket` gives up ("taking back decides"): `Some(value)` if it was not
/// taken (the slot is free again, and a waiting sender is woken), `None` if a receiver has it.
pub(super) fn take_back<T>(state: &Mutex<State<T>>, ticket: u64) -> Option<T> {
    let mut s = lock(state);
    if s.settled > ticket {
        return None;
    }
    let value = s.queue.pop_front().expect("an unsettled offer is in the slot");
    s.settled += 1;
    let next = s.send_waiters.pop();
    drop(s);
    if let Some(node) = next {
        park::wake(node);
    }
    Some(value)
}

/// An offer in flight: taken back if its sender leaves before it settled (a cancelled fiber
/// unwinding, a dropped future). The value is dropped then.
pub(super) struct Offer<'a, T> {
    pub(super) state: &'a Mutex<State<T>>,
    pub(super) ticket: u64,
    pub(super) open: bool,
}

impl<T> Offer<'_, T> {
    /// Settles the offer from its sender's side: `Ok` if a receiver took the value, else the
    /// value back.
    pub(super) fn take_back(mut self) -> Result<(), T> {
        self.open = false;
        match take_back(self.state, self.ticket) {
            None => Ok(()),
            Some(value) => Err(value),
        }
    }
}

impl<T> Drop for Offer<'_, T> {
    fn drop(&mut self) {
        if self.open {
            drop(take_back(self.state, self.ticket));
        }
    }
}

impl<T> Sender<T> {
    /// A rendezvous send ("one offer at a time"), waiting until `deadline` at the latest.
    #[track_caller]
    pub(super) fn send_rendezvous(
        &self,
        value: T,
        deadline: Option<Instant>,
    ) -> Result<(), SendTimeoutError<T>> {
        let state = &self.chan.state;
        let mut value = Some(value);
        let offered = Wait::new(state, send_list, send_pass_on)
            .block(deadline, "channel send", |s, _| offer_round(s, &mut value));
        let ticket = match offered {
            Some(Ok((ticket, wake))) => {
                if let Some(node) = wake {
                    park::wake(node);
                }
                ticket
            }
            Some(Err(SendError(v))) => return Err(SendTimeoutError::Disconnected(v)),
            None => {
                return Err(SendTimeoutError::Timeout(
                    value.take().expect("a timed-out offer keeps its value"),
                ))
            }
        };
        let offer = Offer { state, ticket, open: true };
        let settled = Wait::new(state, offer_list, pass_none).block(
            deadline,
            "channel send (until received)",
            |s, _| settled_round(s, ticket),
        );
        match (settled, offer.take_back()) {
            (_, Ok(())) => Ok(()),
            (Some(Settled::NoReceiver), Err(v)) => Err(SendTimeoutError::Disconnected(v)),
            (Some(Settled::Taken), Err(_)) => unreachable!("a taken offer is not given back"),
            (None, Err(v)) => Err(SendTimeoutError::Timeout(v)),
        }
    }
}
