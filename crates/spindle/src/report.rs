//! Messages the runtime must not lose: a fiber stack that could not be mapped, a fiber holding
//! its worker (the watchdog), a failed `munmap`, the hint added to tokio's "no reactor running"
//! panics on a worker (module `fiber::cancel`).
//!
//! A leaf below every layer (fiber, sched and up call it; it calls only `trace`).
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
