//! Cancellation by unwinding, and what a panic during it looks like.
//!
//! A cancelled fiber (its runtime shut down, `JoinHandle::cancel`, a `timeout_fiber` that
//! expired) unwinds from the suspension point where it notices (`resume_unwind` with a
//! [`Cancelled`](super::Cancelled) payload), so its destructors run and its locks and sockets
//! are released. A `Drop` that panics during that unwinding is a panic while panicking: Rust
//! aborts the process, as it does for any thread, and no runtime can catch it.
//!
//! Invariant: **the reason is never lost.** While a fiber unwinds for cancellation its worker
//! thread records it ([`begin`] / [`end`]), and spindle's panic hook (installed once, chained
//! after the hook that was set before: its output comes first, unchanged) adds a line naming
//! the fiber and saying that the panic happened during cancellation, before the abort. The
//! same hook adds a hint to tokio's "no reactor running" panics on a worker
//! ([`panic_hint`]).

use std::cell::RefCell;
use std::sync::Once;

thread_local! {
    /// The fiber this thread is unwinding for cancellation: `(id, name)`.
    static CANCELLING: RefCell<Option<(u64, String)>> = const { RefCell::new(None) };
}

/// Records that the running fiber starts unwinding for cancellation.
pub(crate) fn begin(id: u64, name: &str) {
    crate::trace::fiber_cancelled(id, name);
    CANCELLING.with(|c| *c.borrow_mut() = Some((id, name.to_owned())));
}

/// The fiber's unwinding reached its entry (it was caught there): nothing to report any more.
pub(crate) fn end() {
    CANCELLING.with(|c| {
        if let Ok(mut c) = c.try_borrow_mut() {
            c.take();
        }
    });
}

/// Installs the chained panic hook, once per process.
pub(crate) fn install_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            previous(info);
            panic_hint(info);
            let note = CANCELLING.with(|c| c.try_borrow().ok().and_then(|c| c.clone()));
            if let Some((id, name)) = note {
                crate::report::error(format_args!(
                    "spindle: fiber {id} ({name}) panicked while it was being cancelled (its runtime \
                     shut down, or its handle or a timeout cancelled it); cancellation unwinds the \
                     fiber to run its destructors, so this is a panic during unwinding and the \
                     process aborts: a Drop must not panic"
                ));
            }
        }));
    });
}

/// What tokio's panics say when code needs its context and finds none ("there is no reactor
/// running, must be called from the context of a Tokio 1.x runtime").
const TOKIO_NO_CONTEXT: &str = "must be called from the context of a Tokio 1.x runtime";

/// Called by spindle's panic hook after the panic's own message: a
/// panic of tokio for want of its context, on a spindle worker, gets a line saying how to
/// give it one. Costs a thread-local read and a string search, only when something panics.
pub(crate) fn panic_hint(info: &std::panic::PanicHookInfo<'_>) {
    let payload = info.payload();
    let message = payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str));
    let Some(message) = message else { return };
    if !message.contains(TOKIO_NO_CONTEXT) || crate::sched::worker::current().is_none() {
        return;
    }
    let hint = if cfg!(feature = "tokio-compat") {
        "this runtime was built with Builder::tokio_context(false), so its workers run outside \
         the tokio bridge's context: build it with the default, or run the future through \
         spindle::compat::spawn / spindle::compat::block_on"
    } else {
        "enable spindle's `tokio-compat` feature: every worker then runs inside the tokio \
         bridge's context and tokio-only crates (reqwest, tonic-reflection, tokio::spawn, \
         tokio::time) run unchanged in fibers and tasks; or run the future through \
         spindle::compat::spawn / spindle::compat::block_on"
    };
    crate::report::error(format_args!("spindle: the panic above is tokio's, on a spindle worker: {hint}"));
}
