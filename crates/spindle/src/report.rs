//! Messages the runtime must not lose: a fiber stack that could not be mapped, a fiber holding
//! its worker (the watchdog), a failed `munmap`; and hints added to panics whose cause is
//! spindle's setup (tokio's "no reactor running" on a worker: [`panic_hint`]).
//!
//! They go to tracing when the feature `tracing` is on and a subscriber is set (target
//! `spindle`), else to the `log` crate when a logger is installed, and to stderr when none is:
//! a program that never set up logging still sees them. "No logger" is read as
//! `log::max_level() == LevelFilter::Off`, the state before any logger is installed (loggers
//! raise it when they are set up).

use std::fmt;

/// Reports an error: `log::error!` with a logger, else a line on stderr.
pub(crate) fn error(message: fmt::Arguments<'_>) {
    emit(log::Level::Error, message);
}

/// Reports a warning: `log::warn!` with a logger, else a line on stderr.
pub(crate) fn warn(message: fmt::Arguments<'_>) {
    emit(log::Level::Warn, message);
}

fn emit(level: log::Level, message: fmt::Arguments<'_>) {
    if crate::trace::report(level, message) {
        return;
    }
    if log::max_level() == log::LevelFilter::Off {
        // One formatted line per call (stderr is locked for it), so lines of several threads
        // do not interleave; `eprintln!` also lets the test harness capture it.
        eprintln!("[spindle {level}] {message}");
    } else {
        log::log!(target: "spindle", level, "{message}");
    }
}

/// What tokio's panics say when code needs its context and finds none ("there is no reactor
/// running, must be called from the context of a Tokio 1.x runtime").
const TOKIO_NO_CONTEXT: &str = "must be called from the context of a Tokio 1.x runtime";

/// Called by spindle's panic hook (module `fiber::cancel`) after the panic's own message: a
/// panic of tokio for want of its context, on a spindle worker, gets a line saying how to
/// give it one. Costs a thread-local read and a string search, only when something panics.
pub(crate) fn panic_hint(info: &std::panic::PanicHookInfo<'_>) {
    let payload = info.payload();
    let message = payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str));
    let Some(message) = message else { return };
    if !message.contains(TOKIO_NO_CONTEXT) || !crate::runtime::Handle::on_worker() {
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
    error(format_args!("spindle: the panic above is tokio's, on a spindle worker: {hint}"));
}
