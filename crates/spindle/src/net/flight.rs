//! Single-flight lookups: concurrent lookups of one name share one blocking-pool job, so a
//! crawler that connects to one host 10,000 times at once runs `getaddrinfo` once, and a name
//! whose lookup hangs ties up one pool thread however many callers ask for it.
//!
//! # Invariants
//!
//! - **One job per name in flight.** `Flights::join` either finds the flight of the name
//!   under way or registers a new one (then the caller starts its job), under the map's lock.
//! - **Every flight lands.** The job owns a [`Landing`]; it completes the flight with the
//!   lookup's result, or, if the job is dropped without running (the runtime shut down first)
//!   or its lookup panics, with an error saying so. Waiters never wait for a job that is gone.
//! - **The answer is cached before the flight leaves the map**, so a lookup that starts after
//!   the job finished finds the cache or the flight, and never starts a second job.
//! - Each waiter keeps one waker under its key, removed when its future drops (a caller that
//!   timed out leaves nothing behind).

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use crate::lock::lock;
use crate::park::waker_set::WakerSet;

/// An outcome that every waiter can get a copy of (`io::Error` is not `Clone`).
type Shared = Result<Vec<IpAddr>, (io::ErrorKind, String)>;

/// The lookups in flight, by lower-cased name.
#[derive(Default)]
pub(super) struct Flights {
    map: Mutex<HashMap<String, Arc<Flight>>>,
}

/// One lookup in flight and the tasks waiting for it.
#[derive(Default)]
pub(super) struct Flight {
    state: Mutex<FlightState>,
}

#[derive(Default)]
struct FlightState {
    result: Option<Shared>,
    wakers: WakerSet,
}

impl Flights {
    /// The flight of `key`, and whether the caller just created it (and must start its job).
    pub(super) fn join(&self, key: &str) -> (Arc<Flight>, bool) {
        let mut map = lock(&self.map);
        if let Some(flight) = map.get(key) {
            return (flight.clone(), false);
        }
        let flight = Arc::new(Flight::default());
        map.insert(key.to_owned(), flight.clone());
        (flight, true)
    }

    /// Removes `flight` from the map if it is still the flight of `key`.
    fn leave(&self, key: &str, flight: &Arc<Flight>) {
        let mut map = lock(&self.map);
        if map.get(key).is_some_and(|f| Arc::ptr_eq(f, flight)) {
            map.remove(key);
        }
    }
}

impl Flight {
    /// A future of the flight's outcome.
    pub(super) fn wait(self: &Arc<Self>) -> FlightWait {
        FlightWait { flight: self.clone(), key: None }
    }

    fn complete(&self, result: Shared) {
        let wakers = {
            let mut state = lock(&self.state);
            if state.result.is_some() {
                return;
            }
            state.result = Some(result);
            state.wakers.take_all()
        };
        for waker in wakers {
            waker.wake();
        }
    }
}

/// Owned by a flight's job: lands the flight with the job's result, or with an error if the
/// job is dropped without landing it.
pub(super) struct Landing {
    flights: Arc<Flights>,
    key: String,
    flight: Arc<Flight>,
    landed: bool,
}

impl Landing {
    pub(super) fn new(flights: Arc<Flights>, key: String, flight: Arc<Flight>) -> Landing {
        Landing { flights, key, flight, landed: false }
    }

    /// Lands the flight with `result` (already cached by the caller, if it is an answer).
    pub(super) fn land(mut self, result: &io::Result<Vec<IpAddr>>) {
        self.landed = true;
        self.finish(match result {
            Ok(addrs) => Ok(addrs.clone()),
            Err(e) => Err((e.kind(), e.to_string())),
        });
    }

    fn finish(&self, result: Shared) {
        self.flights.leave(&self.key, &self.flight);
        self.flight.complete(result);
    }
}

impl Drop for Landing {
    fn drop(&mut self) {
        if !self.landed {
            let why =
                if std::thread::panicking() { "panicked" } else { "was cancelled: the runtime shut down" };
            self.finish(Err((io::ErrorKind::Other, format!("DNS lookup of {:?} {why}", self.key))));
        }
    }
}

/// Future returned by [`Flight::wait`].
pub(super) struct FlightWait {
    flight: Arc<Flight>,
    key: Option<u64>,
}

impl Future for FlightWait {
    type Output = io::Result<Vec<IpAddr>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let mut state = lock(&this.flight.state);
        match &state.result {
            Some(Ok(addrs)) => Poll::Ready(Ok(addrs.clone())),
            Some(Err((kind, msg))) => Poll::Ready(Err(io::Error::new(*kind, msg.clone()))),
            None => {
                state.wakers.register(&mut this.key, cx.waker());
                Poll::Pending
            }
        }
    }
}

impl Drop for FlightWait {
    fn drop(&mut self) {
        if self.key.is_some() {
            lock(&self.flight.state).wakers.remove(self.key);
        }
    }
}
