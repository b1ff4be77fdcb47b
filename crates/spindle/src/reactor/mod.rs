//! The reactor of one worker: epoll readiness, a wake-up eventfd and a timer wheel.
//!
//! # Invariants
//!
//! 1. Each worker has one [`Driver`] (in its `WorkerShared`): an epoll instance, an eventfd
//!    registered level-triggered under [`WAKE_TOKEN`], and a slab of registrations. Only the
//!    worker's thread waits on the epoll instance; any thread may register with it.
//! 2. A registration's epoll token is `(generation << 32) | index`. The slab bumps a slot's
//!    generation when the registration is dropped, so an event that was already queued for a
//!    closed socket (or one that reused its descriptor) finds a different generation and is
//!    ignored: a stale event never wakes the wrong waiter.
//! 3. `sleeping` is true only while the worker is (about to be) blocked in `epoll_wait`. A
//!    thread that makes work for the worker publishes it first, then reads `sleeping`
//!    (both SeqCst); the worker sets `sleeping` and then checks for work (SeqCst). So either the
//!    worker sees the work or the waker sees `sleeping` and writes the eventfd: no lost
//!    wake-up, and no syscall when the worker is awake.
//! 4. The timer wheel is owned by the worker's thread (it lives in `Worker`, not here).

pub(crate) mod io;
pub(crate) mod wheel;

use std::io as stdio;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::sys::epoll::{Epoll, Event, EventFd};
use io::ScheduledIo;

/// The token of the wake-up eventfd (no registration has generation `u32::MAX` in use).
pub(crate) const WAKE_TOKEN: u64 = u64::MAX;

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
    sleeping: AtomicBool,
    slab: Mutex<Slab>,
    /// Live registrations: a busy worker skips its non-blocking poll when there are none.
    registrations: AtomicUsize,
}

impl Driver {
    pub(crate) fn new() -> stdio::Result<Driver> {
        let epoll = Epoll::new()?;
        let wake_fd = EventFd::new()?;
        epoll.add_level_readable(wake_fd.raw(), WAKE_TOKEN)?;
        Ok(Driver {
            epoll,
            wake_fd,
            sleeping: AtomicBool::new(false),
            slab: Mutex::new(Slab::default()),
            registrations: AtomicUsize::new(0),
        })
    }

    /// Registers `fd` (edge-triggered, read + write + hang-up) and returns its readiness
    /// state and token. The caller must [`deregister`](Self::deregister) it before closing.
    pub(crate) fn register(&self, fd: RawFd) -> stdio::Result<(Arc<ScheduledIo>, u64)> {
        let io = Arc::new(ScheduledIo::new());
        let token = {
            let mut slab = crate::sync::lock(&self.slab);
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
        Ok((io, token))
    }

    /// Forgets a registration (its descriptor is about to be closed, which removes it from
    /// epoll). Later events carrying its token are ignored (invariant 2).
    pub(crate) fn deregister(&self, token: u64) {
        self.release(token);
    }

    fn release(&self, token: u64) {
        let index = (token & 0xFFFF_FFFF) as usize;
        let mut slab = crate::sync::lock(&self.slab);
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
        events.clear();
        let blocking = timeout != Some(Duration::ZERO);
        if blocking {
            self.sleeping.store(true, Ordering::SeqCst);
        }
        let res = self.epoll.wait(events, timeout);
        if blocking {
            self.sleeping.store(false, Ordering::SeqCst);
        }
        res?;
        let mut ready = Vec::with_capacity(events.len());
        {
            let slab = crate::sync::lock(&self.slab);
            for ev in events.iter() {
                if ev.token == WAKE_TOKEN {
                    self.wake_fd.drain();
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
        for (io, bits) in ready {
            io.dispatch(bits);
        }
        Ok(n)
    }

    /// Whether any descriptor is registered.
    pub(crate) fn has_registrations(&self) -> bool {
        self.registrations.load(Ordering::Relaxed) > 0
    }

    /// Marks the worker as about to sleep; returns after the caller re-checked for work.
    /// See invariant 3: call [`Driver::prepare_sleep`], re-check the queues, then `poll`.
    pub(crate) fn prepare_sleep(&self) {
        self.sleeping.store(true, Ordering::SeqCst);
    }

    /// Cancels [`prepare_sleep`](Self::prepare_sleep) when work was found.
    pub(crate) fn cancel_sleep(&self) {
        self.sleeping.store(false, Ordering::SeqCst);
    }

    /// Wakes the worker if it is blocked (or about to block) in `epoll_wait`. Callers publish
    /// the work first (invariant 3).
    pub(crate) fn wake(&self) {
        if self.sleeping.load(Ordering::SeqCst) {
            self.wake_fd.notify();
        }
    }

    /// Wakes the worker unconditionally (shutdown).
    pub(crate) fn force_wake(&self) {
        self.wake_fd.notify();
    }
}
