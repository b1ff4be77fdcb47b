//! Test support (included by `#[path]`): a logger that keeps the warnings of one crate, for
//! tests that check what is logged. Install a `static` one with `log::set_logger`.
#![allow(dead_code)]

use std::sync::Mutex;

/// Keeps the messages of warnings (and worse) whose target starts with `target`.
pub struct Capture {
    pub target: &'static str,
    pub warnings: Mutex<Vec<String>>,
}

impl Capture {
    pub const fn new(target: &'static str) -> Capture {
        Capture { target, warnings: Mutex::new(Vec::new()) }
    }

    /// The warnings seen so far.
    pub fn warnings(&self) -> Vec<String> {
        self.warnings.lock().unwrap().clone()
    }
}

impl log::Log for Capture {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.level() <= log::Level::Warn && metadata.target().starts_with(self.target)
    }

    fn log(&self, record: &log::Record<'_>) {
        if self.enabled(record.metadata()) {
            self.warnings.lock().unwrap().push(record.args().to_string());
        }
    }

    fn flush(&self) {}
}
