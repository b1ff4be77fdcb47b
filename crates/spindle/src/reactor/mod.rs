//! The reactor of one worker: epoll readiness, a wake-up eventfd and a timer wheel.
//!
//! # Invariants
//!
//! - **One driver per worker.** Each worker has one [`Driver`] (in its `WorkerShared`): an epoll instance, an eventfd
//!   registered level-triggered under [`WAKE_TOKEN`], and a slab of registrations. Only the
//!   worker's thread blocks on the epoll instance; any thread may register with it.
//! - **Task sockets share one reactor.** A runtime with two or more workers also has a shared
//!   task reactor (module `shared_io`): a socket first waited on by a task registers there,
//!   a fiber's socket with its worker. Each worker's epoll instance holds the shared one
//!   under [`SHARED_TOKEN`], one-shot and disarmed; the one sleeping worker that watches it
//!   arms it, and whoever sees `SHARED_TOKEN` (or busy-polls) reads the shared reactor and
//!   runs the woken tasks itself. So a connection's next request goes to an idle worker,
//!   not to the busy one that happened to register its socket.
//! - **Read for a busy owner.** An idle worker may read another worker's epoll instance without
//!   blocking ([`Driver::poll_for_owner`]) when that worker has not read it for a while (busy
//!   in a long computation, or preempted by the kernel), and dispatches its socket events
//!   itself: their tasks then run on the idle worker. Edge-triggered epoll reports each event
//!   to one caller only, so an event is dispatched once whoever reads it; the wake-up eventfd
//!   is left to its owner (it stays readable: level-triggered), so no remote wake-up is lost.
//! - **Stale events are ignored.** A registration's epoll token is `(generation << 32) | index`. The slab bumps a slot's
//!   generation when the registration is dropped, so an event that was already queued for a
//!   closed socket (or one that reused its descriptor) finds a different generation and is
//!   ignored: a stale event never wakes the wrong waiter.
//! - **No lost remote wake-up.** Remote work and sleeping share one atomic word (module `sleep_gate`, loom-checked): a
//!   producer sets the inbox bit after queueing and writes the eventfd only if the worker is
//!   (about to be) blocked; the worker sets the sleeping bit and stays awake if the inbox bit
//!   is set. No lost wake-up, and no syscall when the worker is awake.
//! - **Timers are the worker's.** The timer wheel is owned by the worker's thread (it lives in `Worker`, module `sched::worker::timers`, not here).

pub(crate) mod io;
pub(crate) mod registration;
pub(crate) mod shared_io;
pub(crate) mod sleep_gate;
pub(crate) mod wheel;

use std::io as stdio;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::sys::epoll::{Epoll, Event, EventFd};
use io::ScheduledIo;
use sleep_gate::SleepGate;

std::thread_local! {
    /// [`Driver::dispatch`]'s list of ready registrations, reused by every call on a thread.
    static DISPATCH_SCRATCH: std::cell::Cell<Vec<(Arc<ScheduledIo>, u32)>> = const { std::cell::Cell::new(Vec::new()) };
}

/// The token of the wake-up eventfd (no registration has generation `u32::MAX` in use).
pub(crate) const WAKE_TOKEN: u64 = u64::MAX;
/// The token under which a worker's epoll instance watches the runtime's shared task
/// reactor ("task sockets share one reactor"; generation `u32::MAX` again, index below it).
pub(crate) const SHARED_TOKEN: u64 = u64::MAX - 1;

#[derive(Debug, Default)]
struct Slot {
    generation: u32,
    io: Option<Arc<ScheduledIo>>,
}

#[derive(Debug, Default)]
struct Slab {
    slots: Vec<Slot>,
    free: Vec<u32>,
}

/// A worker's epoll instance and registrations (shared: other threads register and wake).
#[derive(Debug)]
pub(crate) struct Driver {
    epoll: Epoll,
    wake_fd: EventFd,
    sleeping: SleepGate,
    slab: Mutex<Slab>,
    /// Live registrations: a busy worker skips its non-blocking poll when there are none.
    registrations: AtomicUsize,
    /// Set when nothing polls this driver any more (its worker, or for the shared task
    /// reactor every worker, has shut down): "a socket never waits on a dead home".
    closed: AtomicBool,
}

impl Driver {
    pub(crate) fn new() -> stdio::Result<Driver> {
        let epoll = Epoll::new()?;
        let wake_fd = EventFd::new()?;
        epoll.add_level_readable(wake_fd.raw(), WAKE_TOKEN)?;
        Ok(Driver {
            epoll,
            wake_fd,
            sleeping: SleepGate::new(),
            slab: Mutex::new(Slab::default()),
            registrations: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
        })
    }

    /// Adds `shared`, the runtime's shared task reactor, to this (worker's) epoll instance,
    /// disarmed: see [`arm_shared`](Self::arm_shared).
    pub(crate) fn add_shared(&self, shared: &Driver) -> stdio::Result<()> {
        self.epoll.add_disarmed(shared.epoll.raw(), SHARED_TOKEN)
    }

    /// Arms the watch on `shared` once: a wait on this driver then returns (with
    /// `SHARED_TOKEN`) when `shared` has events ready, and the watch disarms itself. Only
    /// the worker that watches the shared reactor for everyone arms it ("one watcher").
    pub(crate) fn arm_shared(&self, shared: &Driver) -> stdio::Result<()> {
        self.epoll.arm_oneshot_readable(shared.epoll.raw(), SHARED_TOKEN)
    }

    /// Nothing will poll this driver any more.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
    }

    /// Whether [`close`](Self::close) was called.
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Registers `fd` (edge-triggered, read + write + hang-up) and returns its readiness
    /// state and token. The caller must [`deregister`](Self::deregister) it before closing.
    pub(crate) fn register(&self, fd: RawFd) -> stdio::Result<(Arc<ScheduledIo>, u64)> {
        let io = Arc::new(ScheduledIo::new());
        let token = self.register_io(fd, io.clone())?;
        Ok((io, token))
    }

    /// Adds `fd` to this driver's epoll set with an existing readiness state `io` (a socket
    /// moving to this driver from one whose runtime has shut down): its events now reach `io`.
    pub(crate) fn register_io(&self, fd: RawFd, io: Arc<ScheduledIo>) -> stdio::Result<u64> {
        let token = {
            let mut slab = crate::lock::lock(&self.slab);
            let index = match slab.free.pop() {
                Some(i) => i,
                None => {
                    slab.slots.push(Slot::default());
                    u32::try_from(slab.slots.len() - 1).expect("more than 2^32 registrations")
                }
            };
            let slot = &mut slab.slots[index as usize];
            slot.io = Some(io.clone());
            self.registrations.fetch_add(1, Ordering::Relaxed);
            (u64::from(slot.generation) << 32) | u64::from(index)
        };
        if let Err(e) = self.epoll.add(fd, token) {
            self.release(token);
            return Err(e);
        }
        Ok(token)
    }

    /// Forgets a registration (its descriptor is about to be closed, which removes it from
    /// epoll). Later events carrying its token are ignored ("stale events are ignored").
    pub(crate) fn deregister(&self, token: u64) {
        self.release(token);
    }

    fn release(&self, token: u64) {
        let index = (token & 0xFFFF_FFFF) as usize;
        let mut slab = crate::lock::lock(&self.slab);
        let slab = &mut *slab;
        if let Some(slot) = slab.slots.get_mut(index) {
            if u64::from(slot.generation) == token >> 32 && slot.io.take().is_some() {
                // Skip u32::MAX so that no registration ever carries WAKE_TOKEN.
                slot.generation = slot.generation.wrapping_add(1) % u32::MAX;
                slab.free.push(index as u32);
                self.registrations.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }

    /// Waits for readiness (at most `timeout`; `None` = until something happens) and wakes
    /// the waiters of every ready registration. Returns how many registrations were ready.
    pub(crate) fn poll(&self, events: &mut Vec<Event>, timeout: Option<Duration>) -> stdio::Result<usize> {
        self.wait(events, timeout)?;
        Ok(self.dispatch(events, true))
    }

    /// The first half of [`poll`](Self::poll): waits for readiness and leaves the events in
    /// `events` for [`dispatch`](Self::dispatch) (a worker that slept marks itself busy in
    /// between, so that the wake-ups it dispatches do not count it as idle).
    pub(crate) fn wait(&self, events: &mut Vec<Event>, timeout: Option<Duration>) -> stdio::Result<()> {
        events.clear();
        self.epoll.wait(events, timeout)
    }

    /// Reads this driver's readiness without blocking, on another worker's thread ("read for a
    /// busy owner"), and wakes the waiters of the ready registrations. Returns how many.
    pub(crate) fn poll_for_owner(&self, events: &mut Vec<Event>) -> stdio::Result<usize> {
        self.wait(events, Some(Duration::ZERO))?;
        Ok(self.dispatch(events, false))
    }

    /// The second half of [`poll`](Self::poll): wakes the waiters of the registrations in
    /// `events`; the owner (`own`) also drains the wake-up eventfd. Returns how many were
    /// ready. The shared task reactor's readiness (`SHARED_TOKEN`) is not dispatched here:
    /// the caller sees it with [`shared_ready`] and reads that reactor itself.
    pub(crate) fn dispatch(&self, events: &[Event], own: bool) -> usize {
        // The ready registrations are collected under the slab's lock and woken after it (a
        // wake may drop the last reference to a task whose socket then deregisters, which
        // takes that lock). The list is the thread's, kept between calls: a pass of the loop
        // allocates nothing. Taken out while in use, so a nested dispatch (a foreign waker
        // that polls) gets an empty one of its own.
        let mut ready = DISPATCH_SCRATCH.with(std::cell::Cell::take);
        {
            let slab = crate::lock::lock(&self.slab);
            for ev in events.iter() {
                if ev.token == WAKE_TOKEN {
                    if own {
                        self.wake_fd.drain();
                    }
                    continue;
                }
                if ev.token == SHARED_TOKEN {
                    continue;
                }
                let slot = slab.slots.get((ev.token & 0xFFFF_FFFF) as usize);
                if let Some(Slot { generation, io: Some(io) }) = slot {
                    if u64::from(*generation) == ev.token >> 32 {
                        ready.push((io.clone(), ev.bits));
                    }
                }
            }
        }
        let n = ready.len();
        for (io, bits) in ready.drain(..) {
            io.dispatch(bits);
        }
        // `with` + `replace`, not `LocalKey::set`: `set` goes through the key's lazy
        // initialisation path on every call, and a pass makes two.
        drop(DISPATCH_SCRATCH.with(|scratch| scratch.replace(ready)));
        n
    }

    /// Reads this (shared task) reactor without blocking and wakes the waiters of the
    /// ready registrations, on whichever worker found it ready. Returns how many.
    pub(crate) fn poll_shared(&self, events: &mut Vec<Event>) -> stdio::Result<usize> {
        self.wait(events, Some(Duration::ZERO))?;
        Ok(self.dispatch(events, false))
    }

    /// Whether any descriptor is registered.
    pub(crate) fn has_registrations(&self) -> bool {
        self.registrations.load(Ordering::Relaxed) > 0
    }

    /// The worker is about to block in [`poll`](Self::poll): false if remote work arrived
    /// (then it must not block). Pair with [`end_sleep`](Self::end_sleep).
    pub(crate) fn begin_sleep(&self) -> bool {
        self.sleeping.enter()
    }

    pub(crate) fn end_sleep(&self) {
        self.sleeping.leave();
    }

    /// A producer on another thread queued work for this worker: flags it and wakes the
    /// worker if it sleeps (one eventfd write, only then).
    pub(crate) fn publish_remote_work(&self) {
        if self.sleeping.publish() {
            self.wake_fd.notify();
        }
    }

    #[inline]
    pub(crate) fn has_remote_work(&self) -> bool {
        self.sleeping.has_inbox()
    }

    pub(crate) fn take_remote_work(&self) -> bool {
        self.sleeping.take_inbox()
    }

    /// Wakes the worker unconditionally (shutdown).
    pub(crate) fn force_wake(&self) {
        self.wake_fd.notify();
    }
}

/// Whether `events` (read from a worker's driver) say the shared task reactor has events.
pub(crate) fn shared_ready(events: &[Event]) -> bool {
    events.iter().any(|e| e.token == SHARED_TOKEN)
}
