//! [`Registration`]: a descriptor's readiness state and the driver that delivers its events
//! (its *home*: a worker's, or the runtime's shared task reactor), made lazily, and the wait
//! of a fiber on it. Used by spindle's own sockets (`net::source`) and, with the `hook`
//! feature, by the descriptors of the interposed libc calls (module `hook`).
//!
//! # Invariants
//!
//! - **Registered on first wait.** A descriptor is registered with a reactor only when a
//!   caller first has to wait on it ([`Registration::get_or_register`]); it stays registered
//!   with the driver that registered it; wake-ups reach waiters on any worker, of any
//!   runtime, through their wakers.
//! - **Never a wait on a dead home.** Before a wait registers a waker, the home's runtime is
//!   checked: if it has shut down (the descriptor outlived its runtime and is used in
//!   another), the readiness state moves to the current worker's driver
//!   ([`Registration::rehome`]), and outside any runtime the wait fails with an error. Old
//!   homes stay alive until the registration is dropped, so the home pointer read on that
//!   path never dangles.
//! - **Forgotten before the close.** The owner calls [`Registration::deregister`] before the
//!   descriptor closes, so an event still queued for it is recognised as stale (module
//!   `reactor`, "stale events are ignored").

use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::Waker;
use std::time::Instant;

use super::io::{Direction, ScheduledIo};
use super::Driver;
use crate::sched::worker::{self, Worker};

/// A descriptor's readiness state and its home.
pub(crate) struct Registration {
    pub(crate) io: Arc<ScheduledIo>,
    /// The current home, read on the way to every park; points to `homes.current`.
    home: AtomicPtr<Driver>,
    /// The current home, its token, and every earlier home. Kept alive so that `home` never
    /// dangles; changed only by [`Registration::rehome`].
    homes: Mutex<Homes>,
}

/// Where a registration's events are delivered, and where they were.
struct Homes {
    token: u64,
    current: Arc<Driver>,
    /// Earlier homes (whose runtimes shut down), kept alive for `Registration::home`, the
    /// latest first. A descriptor that never moved (all but those that outlive their
    /// runtime) pays one pointer for it, inline.
    earlier: Option<Box<Earlier>>,
}

/// A list of earlier homes (see `Homes::earlier`): held, never read.
struct Earlier {
    _home: Arc<Driver>,
    _next: Option<Box<Earlier>>,
}

impl Registration {
    fn new(io: Arc<ScheduledIo>, token: u64, driver: Arc<Driver>) -> Registration {
        let home = AtomicPtr::new(Arc::as_ptr(&driver).cast_mut());
        Registration { io, home, homes: Mutex::new(Homes { token, current: driver, earlier: None }) }
    }

    /// The registration in `cell`, made with the current worker's reactor if there is none
    /// yet, and moved to it if the runtime it was made with has shut down. `Ok(None)`: not
    /// registered and not on a worker.
    pub(crate) fn get_or_register(
        cell: &OnceLock<Registration>,
        fd: RawFd,
    ) -> io::Result<Option<&Registration>> {
        if let Some(reg) = cell.get() {
            if reg.home_shut_down() {
                let Some(worker) = worker::current() else {
                    return Err(io::Error::other(
                        "this spindle socket's runtime has shut down and it is being waited on outside \
                         any spindle runtime: use it in a fiber or task of a running runtime",
                    ));
                };
                // A worker that is shutting down itself keeps the old home: its fibers are
                // being cancelled, and the wait ends with that.
                if !worker.shared.shutdown.load(Ordering::Acquire) {
                    reg.rehome(fd, &worker.shared.driver)?;
                }
            }
            return Ok(Some(reg));
        }
        let Some(worker) = worker::current() else { return Ok(None) };
        // A task's descriptor goes to the shared task reactor, if the runtime has one, so
        // that whichever worker is idle receives its events; a fiber's stays with its worker,
        // where the fiber lives ("task sockets share one reactor", module `reactor`).
        let owner = match &worker.rt.io {
            Some(shared) if !worker.in_fiber() => shared.driver.clone(),
            _ => worker.shared.driver.clone(),
        };
        let (io, token) = owner.register(fd)?;
        if let Err(reg) = cell.set(Registration::new(io, token, owner.clone())) {
            // Another thread registered first (the descriptor is shared): undo ours.
            reg.deregister();
        }
        Ok(cell.get())
    }

    /// Whether the home's runtime has shut down: nothing polls its driver any more, so a
    /// waiter registered there would never be woken.
    fn home_shut_down(&self) -> bool {
        // SAFETY: `home` always points to a driver held by `homes` (the current one, or an
        // earlier one), which keeps every home this registration ever had alive until the
        // registration is dropped.
        let home = unsafe { &*self.home.load(Ordering::Acquire) };
        home.is_closed()
    }

    /// Moves the descriptor's events to `driver`, if its home's runtime has shut down.
    fn rehome(&self, fd: RawFd, driver: &Arc<Driver>) -> io::Result<()> {
        let mut homes = crate::lock::lock(&self.homes);
        let homes = &mut *homes;
        if !homes.current.is_closed() {
            return Ok(()); // another thread moved it first
        }
        let new_token = driver.register_io(fd, self.io.clone())?;
        homes.current.deregister(homes.token);
        homes.token = new_token;
        let old = std::mem::replace(&mut homes.current, driver.clone());
        homes.earlier = Some(Box::new(Earlier { _home: old, _next: homes.earlier.take() }));
        self.home.store(Arc::as_ptr(driver).cast_mut(), Ordering::Release);
        Ok(())
    }

    /// The current home's address (for tests that check where events go).
    #[cfg(test)]
    pub(crate) fn home_addr(&self) -> usize {
        self.home.load(Ordering::Acquire) as usize
    }

    /// Forgets the registration with the current home's driver (the descriptor is closing).
    pub(crate) fn deregister(&self) {
        let homes = crate::lock::lock(&self.homes);
        homes.current.deregister(homes.token);
    }

    /// Parks the running fiber of `worker` until an event of `dir` newer than `seen` (a
    /// fresh registration reports the current readiness as its event number 1) or
    /// `deadline` (then `TimedOut`). `call` names the wait in the fiber dump.
    pub(crate) fn wait_fiber(
        &self,
        worker: &Worker,
        dir: Direction,
        seen: u32,
        deadline: Option<Instant>,
        call: &'static str,
    ) -> io::Result<()> {
        let waker = crate::park::fiber_waker(worker);
        if !self.io.register(dir, seen, &waker) {
            return Ok(());
        }
        let timer = deadline.map(|d| worker.add_timer(d, waker.clone()));
        let _cleanup = Unregister { io: &self.io, dir, waker: &waker, timer };
        loop {
            crate::park::park_on(call);
            if self.io.seq(dir) != seen {
                return Ok(());
            }
            if deadline.is_some_and(|d| crate::sched::clock::now() >= d) {
                return Err(io::Error::new(io::ErrorKind::TimedOut, "the operation timed out"));
            }
        }
    }
}

/// Unregisters a waiter and cancels its timer on every way out of a wait, unwinding (runtime
/// shutdown, cancellation) included.
pub(crate) struct Unregister<'a> {
    pub(crate) io: &'a ScheduledIo,
    pub(crate) dir: Direction,
    pub(crate) waker: &'a Waker,
    pub(crate) timer: Option<crate::sched::worker::TimerHandle>,
}

impl Drop for Unregister<'_> {
    fn drop(&mut self) {
        self.io.unregister(self.dir, self.waker);
        if let (Some(key), Some(worker)) = (self.timer, worker::current()) {
            worker.cancel_timer(key);
        }
    }
}
