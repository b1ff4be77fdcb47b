//! Unix signals for fibers and tasks: wait for SIGINT, SIGTERM, SIGHUP, SIGUSR1 … in plain
//! blocking style ([`Signal::recv`], parks the fiber) or as a future ([`Signal::recv_async`]).
//!
//! ```no_run
//! use spindle::signal::{signal, SignalKind};
//!
//! let rt = spindle::Runtime::new().unwrap();
//! rt.block_on(|| {
//!     let mut hangups = signal(SignalKind::hangup()).unwrap();
//!     loop {
//!         hangups.recv(); // parks this fiber until the next SIGHUP
//!         println!("reloading the configuration");
//!     }
//! });
//! ```

// # How it works
//
// One self-pipe per process, made on first use, and one dispatcher thread that reads it. The
// handler of each signal (installed once per signal number, on the first [`signal`] call for
// it, through `signal-hook-registry`) sets that signal's `pending` flag and writes one byte
// to the pipe; both are async-signal-safe. The dispatcher wakes, and for each pending signal
// bumps its generation and wakes every fiber, thread and task waiting for it, on whatever
// worker they live.
//
// Why not `signalfd`: it only works if the signal is blocked in every thread of the process,
// including threads that other libraries started before spindle, which a library cannot
// guarantee. Why `signal-hook-registry`: it chains with handlers other libraries install
// (tokio, ctrlc) instead of replacing them, installs each `sigaction` without races, and saves
// `errno` around the handler; it is the registry tokio's signal support uses too.
//
// # Invariants
//
// - **Installed once.** Each signal number gets spindle's handler at most once per process,
//   and it stays installed: once a program listens for SIGINT, SIGINT no longer ends it (as
//   with tokio). The pipe and the dispatcher thread are made once.
// - **Never lost, may coalesce.** The handler sets `pending` before writing the byte, and the
//   dispatcher reads a byte before it swaps `pending` off, so every delivery is seen by a
//   dispatch round that starts after it. Several deliveries between two rounds count as one
//   (as the kernel itself coalesces pending signals).
// - **Seen from creation.** A [`Signal`] sees the deliveries after it was created: `recv`
//   returns when the generation moved past the last one this listener saw.
// - **No lost wake-up.** A waiter checks the generation and queues itself under the signal's
//   lock; the dispatcher bumps the generation before taking the waiters under that lock.
// - **Bounded waiters.** A task's waker is kept under its listener's key (one per
//   [`Signal`], replaced on re-poll, removed when the listener drops), a parked fiber's node
//   is dequeued on every way out.

use std::fmt;
use std::future::{poll_fn, Future};
use std::io::{self, Read};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};

use crate::lock::lock;
use crate::park::waker_set::WakerSet;
use crate::park::{self, WaitList, WaitNode};
use crate::sched::caller::blocking_caller;

/// Signal numbers are below this (Linux: 1..=64).
const MAX_SIGNAL: usize = 65;

/// A kind of signal to listen for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SignalKind(libc::c_int);

impl SignalKind {
    /// Any signal by its number (`libc::SIGWINCH`, a real-time signal …).
    pub const fn from_raw(signum: libc::c_int) -> SignalKind {
        SignalKind(signum)
    }

    /// The signal number.
    pub const fn as_raw(self) -> libc::c_int {
        self.0
    }

    /// SIGINT (Ctrl-C).
    pub const fn interrupt() -> SignalKind {
        SignalKind(libc::SIGINT)
    }

    /// SIGTERM (the polite "please stop" of service managers and `kill`).
    pub const fn terminate() -> SignalKind {
        SignalKind(libc::SIGTERM)
    }

    /// SIGHUP (terminal gone; by convention "reload the configuration" for daemons).
    pub const fn hangup() -> SignalKind {
        SignalKind(libc::SIGHUP)
    }

    /// SIGQUIT.
    pub const fn quit() -> SignalKind {
        SignalKind(libc::SIGQUIT)
    }

    /// SIGUSR1.
    pub const fn user_defined1() -> SignalKind {
        SignalKind(libc::SIGUSR1)
    }

    /// SIGUSR2.
    pub const fn user_defined2() -> SignalKind {
        SignalKind(libc::SIGUSR2)
    }

    /// SIGCHLD.
    pub const fn child() -> SignalKind {
        SignalKind(libc::SIGCHLD)
    }

    /// SIGWINCH (the terminal changed size).
    pub const fn window_change() -> SignalKind {
        SignalKind(libc::SIGWINCH)
    }

    /// SIGPIPE.
    pub const fn pipe() -> SignalKind {
        SignalKind(libc::SIGPIPE)
    }

    /// SIGALRM.
    pub const fn alarm() -> SignalKind {
        SignalKind(libc::SIGALRM)
    }
}

type Callback = Arc<dyn Fn() + Send + Sync>;

#[derive(Default)]
struct Waiters {
    /// Fibers and threads parked in `recv`.
    parked: WaitList,
    /// Tasks waiting in `poll_recv`, one waker per listener.
    wakers: WakerSet,
    /// Run by the dispatcher thread on each delivery (shutdown triggers).
    callbacks: Vec<Callback>,
}

#[derive(Default)]
struct Slot {
    /// Set by the handler, cleared by the dispatcher.
    pending: AtomicBool,
    /// Deliveries dispatched so far.
    generation: AtomicU64,
    waiters: Mutex<Waiters>,
    /// Whether spindle's handler is installed (also serialises installing it).
    installed: Mutex<bool>,
}

struct Registry {
    slots: Vec<Slot>,
    /// The pipe's write end, written by the handlers (non-blocking: a full pipe already
    /// guarantees a dispatch round).
    write_fd: RawFd,
    _write: UnixStream,
}

static REGISTRY: OnceLock<io::Result<Registry>> = OnceLock::new();

fn registry() -> io::Result<&'static Registry> {
    let made = REGISTRY.get_or_init(|| {
        let (read, write) = UnixStream::pair()?;
        write.set_nonblocking(true)?;
        std::thread::Builder::new()
            .name("spindle-signal".into())
            .stack_size(256 * 1024)
            .spawn(move || dispatch(read))?;
        let slots = (0..MAX_SIGNAL).map(|_| Slot::default()).collect();
        Ok(Registry { slots, write_fd: write.as_raw_fd(), _write: write })
    });
    made.as_ref().map_err(|e| io::Error::new(e.kind(), format!("spindle::signal could not start: {e}")))
}

/// The dispatcher thread: one byte per delivery (or fewer: they coalesce), then a round over
/// the pending flags.
fn dispatch(mut read: UnixStream) {
    let mut buf = [0u8; 64];
    loop {
        match read.read(&mut buf) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                log::error!("spindle::signal: the signal pipe failed ({e}); signals are no longer delivered");
                return;
            }
        }
        let Some(Ok(reg)) = REGISTRY.get() else { continue };
        for slot in &reg.slots {
            if !slot.pending.swap(false, Ordering::AcqRel) {
                continue;
            }
            slot.generation.fetch_add(1, Ordering::AcqRel);
            let (parked, wakers, callbacks) = {
                let mut w = lock(&slot.waiters);
                (w.parked.take_all(), w.wakers.take_all(), w.callbacks.clone())
            };
            for node in parked {
                park::wake(node);
            }
            for waker in wakers {
                waker.wake();
            }
            for callback in callbacks {
                callback();
            }
        }
    }
}

/// Installs spindle's handler for `kind` if it is not installed yet, and returns its slot.
fn slot(kind: SignalKind) -> io::Result<&'static Slot> {
    let signum = kind.0;
    let forbidden = signal_hook_registry::FORBIDDEN.contains(&signum) || signum == libc::SIGBUS;
    if signum <= 0 || signum as usize >= MAX_SIGNAL || forbidden {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("signal {signum} cannot be listened for (SIGKILL, SIGSTOP and fault signals never can)"),
        ));
    }
    let reg = registry()?;
    let slot = &reg.slots[signum as usize];
    let mut installed = lock(&slot.installed);
    if !*installed {
        let write_fd = reg.write_fd;
        let pending = &slot.pending;
        let handler = move || {
            pending.store(true, Ordering::Release);
            let byte = signum as u8;
            // SAFETY: the write(2) system call is async-signal-safe; `byte` is a valid one-byte
            // buffer and `write_fd` stays open for the life of the process (the registry is
            // static). A failed write (pipe full) is harmless: a dispatch round is already
            // due. Made as a raw system call, not through libc's `write`: with the `hook`
            // feature that symbol is spindle's interposed one, which is no code for a signal
            // handler.
            let _ = unsafe {
                libc::syscall(
                    libc::SYS_write,
                    libc::c_long::from(write_fd),
                    (&byte as *const u8) as libc::c_long,
                    1 as libc::c_long,
                )
            };
        };
        // SAFETY: the handler only stores to an atomic and makes the write(2) system call,
        // both async-signal-safe; it allocates nothing and takes no lock.
        unsafe { signal_hook_registry::register(signum, handler) }?;
        *installed = true;
    }
    Ok(slot)
}

/// Listens for `kind`: installs spindle's handler for it on first use (from then on the
/// signal's default action, such as ending the process for SIGINT, no longer happens).
///
/// # Errors
///
/// `InvalidInput` for SIGKILL, SIGSTOP, the fault signals (SIGSEGV, SIGBUS, SIGILL, SIGFPE)
/// and numbers out of range; an OS error if the handler or the dispatcher cannot be set up.
pub fn signal(kind: SignalKind) -> io::Result<Signal> {
    let slot = slot(kind)?;
    Ok(Signal { kind, slot, seen: slot.generation.load(Ordering::Acquire), waker_key: None })
}

/// Runs `f` on spindle's signal thread after each delivery of `kind` (keep it short: it
/// delays the other signals' dispatch). Installed for the rest of the process.
pub(crate) fn on_signal(kind: SignalKind, f: impl Fn() + Send + Sync + 'static) -> io::Result<()> {
    let slot = slot(kind)?;
    lock(&slot.waiters).callbacks.push(Arc::new(f));
    Ok(())
}

/// Waits for the next SIGINT (Ctrl-C) blocking-style (parks a fiber). A SIGINT that comes
/// before this call is not seen (nor, once any listener exists, does it end the process):
/// to wait for several, keep one [`Signal`] and call [`Signal::recv`] in a loop.
pub fn ctrl_c() -> io::Result<()> {
    signal(SignalKind::interrupt())?.recv();
    Ok(())
}

/// Waits for the next SIGINT (Ctrl-C) as a future (see [`ctrl_c`]).
pub async fn ctrl_c_async() -> io::Result<()> {
    signal(SignalKind::interrupt())?.recv_async().await;
    Ok(())
}

/// A listener for one kind of signal, from [`signal`].
pub struct Signal {
    kind: SignalKind,
    slot: &'static Slot,
    seen: u64,
    /// This listener's entry in the slot's task wakers, once it has polled.
    waker_key: Option<u64>,
}

impl Drop for Signal {
    fn drop(&mut self) {
        if self.waker_key.is_some() {
            lock(&self.slot.waiters).wakers.remove(self.waker_key);
        }
    }
}

impl fmt::Debug for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Signal").field("kind", &self.kind).field("seen", &self.seen).finish()
    }
}

impl Signal {
    /// The signal this listener waits for.
    pub fn kind(&self) -> SignalKind {
        self.kind
    }

    /// Takes a delivery that came since the last one this listener saw, if any.
    fn take(&mut self) -> bool {
        let now = self.slot.generation.load(Ordering::Acquire);
        if now != self.seen {
            self.seen = now;
            return true;
        }
        false
    }

    /// Waits for the next delivery: parks a fiber, or blocks a plain thread.
    ///
    /// # Panics
    ///
    /// In an async task polled by a spindle worker (it would block the worker): use
    /// [`recv_async`](Self::recv_async) there.
    #[track_caller]
    pub fn recv(&mut self) {
        let _ = blocking_caller("signal recv");
        let node = WaitNode::new();
        // Dequeues the node on every way out (a cancelled fiber unwinds from the park).
        struct Leave<'a>(&'a Slot, &'a Arc<WaitNode>);
        impl Drop for Leave<'_> {
            fn drop(&mut self) {
                lock(&self.0.waiters).parked.remove(self.1);
            }
        }
        let _leave = Leave(self.slot, &node);
        loop {
            {
                let mut w = lock(&self.slot.waiters);
                if self.take() {
                    return;
                }
                w.parked.push(&node);
            }
            park::park_on("signal");
        }
    }

    /// Polls for the next delivery, registering the task's waker.
    pub fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if self.take() {
            return Poll::Ready(());
        }
        let mut w = lock(&self.slot.waiters);
        if self.take() {
            return Poll::Ready(());
        }
        w.wakers.register(&mut self.waker_key, cx.waker());
        Poll::Pending
    }

    /// Waits for the next delivery as a future.
    pub fn recv_async(&mut self) -> impl Future<Output = ()> + Send + '_ {
        poll_fn(move |cx| self.poll_recv(cx))
    }
}
